"""Fuzzy matching: the recording whose prompt is most like the request's.

Only recordings of the same method, path, query, model and stream flag
compete (a near prompt must not turn a JSON answer into a stream, or serve
another page); the score is a similarity of prompt texts from 0 to 1, and a
request with no prompt text has nothing to be near.  The built-in
similarity needs no dependency: the cosine of character-trigram counts,
which shrugs off spelling variants and small rewordings and punishes a
changed subject.  A sentence-embedding similarity can be passed in instead
(``MatchConfig(similarity=...)``).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import TYPE_CHECKING

from ._calls import CALL_METHOD, call_text
from ._protobuf import body_value
from ._providers import model_of, prompt_text

if TYPE_CHECKING:
    from ._cassette import Cassette, Interaction, RecordedRequest
    from ._match import MatchConfig

__all__ = ["nearest", "text_similarity"]

_WORD = re.compile(r"\w+", re.UNICODE)


def _features(text: str) -> Counter[str]:
    words = " ".join(_WORD.findall(text.lower()))
    return Counter(words[i : i + 3] for i in range(len(words) - 2))


def text_similarity(a: str, b: str) -> float:
    """Cosine similarity of character-trigram counts of the lowercased words,
    from 0 to 1: spelling variants and small rewordings score high (what is /
    what's: 0.92), a changed subject scores low (France / Spain: 0.83)."""
    if a == b:
        return 1.0
    fa, fb = _features(a), _features(b)
    if not fa or not fb:
        return 0.0
    dot = sum(count * fb[word] for word, count in fa.items() if word in fb)
    norm = math.sqrt(sum(c * c for c in fa.values())) * math.sqrt(sum(c * c for c in fb.values()))
    return dot / norm


def _stream_flag(body: object) -> object:
    return body.get("stream") if isinstance(body, dict) else None


def nearest(
    request: RecordedRequest, cassette: Cassette, config: MatchConfig
) -> tuple[Interaction, float] | None:
    """The best recording above ``config.threshold`` for ``request``, with
    its score; ``None`` when none reaches it.  A gRPC call's messages are
    read through ``config.proto``, a descriptor set, when it reads them."""
    proto = config.proto
    _, body = body_value(request.body, request.path, proto)
    # a call's "prompt" is the text of its arguments
    text = call_text if request.method == CALL_METHOD else prompt_text
    mine = text(body)
    if not mine:
        return None
    model = model_of(request.path, body)
    query = sorted(request.query)
    similarity = config.similarity or text_similarity
    best: tuple[Interaction, float] | None = None
    for interaction in cassette.same_endpoint(request.method, request.path):
        _, theirs = body_value(interaction.request.body, interaction.request.path, proto)
        if (
            model_of(interaction.request.path, theirs) != model
            or _stream_flag(theirs) != _stream_flag(body)
            or sorted(interaction.request.query) != query
        ):
            continue
        score = similarity(mine, text(theirs))
        if score >= config.threshold and (best is None or score > best[1]):
            best = (interaction, score)
    return best
