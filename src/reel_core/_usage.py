"""Token usage, model and time to first token, read from a recorded response.

:func:`extract_usage` reads what a provider reported about an exchange --
the model that answered, the tokens it billed and when the first generated
content arrived -- from the stored response, whole body or stream:

OpenAI (chat completions, Responses, embeddings and compatible servers),
Anthropic messages, Gemini ``generateContent`` and Ollama.  What each
provider's responses look like is read by its module in
:mod:`reel_core._providers` (``openai.py``, ``anthropic.py``, ``gemini.py``,
``generic.py``); this module holds what does not depend on the provider:
the :class:`Usage` value, cutting a body or stream into JSON objects, timing
the first content, and the fold that offers each object to the providers'
readers.

What the counts mean is normalised a little, so that one price formula fits
every provider (see :mod:`reel_core._prices`):

- ``output_tokens`` is every billed output token: reasoning included.  OpenAI
  and Anthropic already count it so; Gemini reports thoughts apart, so there
  ``output_tokens = candidatesTokenCount + thoughtsTokenCount``.
- ``input_tokens`` is the provider's own input count.  OpenAI and Gemini
  count cache reads inside it; Anthropic does not (``input_tokens`` there is
  the uncached rest, cache reads and writes are separate).
  :attr:`Usage.input_includes_cached` says which.  Gemini's tool-use prompt
  tokens are billed as input and added to it.

Nothing here raises on odd input: garbage, binary or non-JSON bodies give a
:class:`Usage` with ``None`` fields.  Each frame is parsed once.
"""

from __future__ import annotations

import codecs
import json
import re
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._frames import SSESplitter, looks_like_sse, parse_sse_event
from ._interaction import RecordedResponse
from ._nesting import check_depth, load_json
from ._providers import USAGE_READERS, Tally, model_of, request_model

if TYPE_CHECKING:
    from ._protobuf import ProtoSchema

__all__ = ["Usage", "extract_usage"]


@dataclass(frozen=True)
class Usage:
    """What one exchange used.  ``None`` means the response did not say."""

    #: The model that answered (the response's own name for it, a dated
    #: snapshot, else the requested one).
    model: str | None = None
    #: Input (prompt) tokens, as the provider counts them; see
    #: :attr:`input_includes_cached`.
    input_tokens: int | None = None
    #: Output tokens, reasoning/thinking tokens included.
    output_tokens: int | None = None
    #: Input tokens read from the provider's prompt cache.
    cached_tokens: int | None = None
    #: Output tokens spent on reasoning (a part of ``output_tokens``).
    reasoning_tokens: int | None = None
    #: Offset in ms, from the first response byte, of the first frame that
    #: carries generated content: non-empty text or reasoning text, a tool
    #: call's name or arguments; ``None`` for a whole (non-stream) body.  For
    #: SSE it is the frame's offset; for a JSON stream kept as chunks, the
    #: chunk where the content starts.
    first_token_ms: float | None = None
    #: Input tokens written to the prompt cache (Anthropic's
    #: ``cache_creation_input_tokens``; billed above the input rate).
    cache_write_tokens: int | None = None
    #: Whether ``cached_tokens`` are counted inside ``input_tokens`` (OpenAI,
    #: Gemini) or apart from them (Anthropic).
    input_includes_cached: bool = True
    #: Audio tokens, a part of ``input_tokens`` / ``output_tokens`` /
    #: ``cached_tokens`` (the realtime APIs: OpenAI Realtime, Gemini Live,
    #: whose video tokens are priced as audio and counted here too).
    audio_input_tokens: int | None = None
    audio_output_tokens: int | None = None
    audio_cached_tokens: int | None = None

    def to_meta(self) -> dict[str, Any]:
        """The cassette ``meta`` fields: every key always present (``null``
        when unknown) so the schema is stable."""
        return {
            "model": self.model,
            "tokens_in": self.input_tokens,
            "tokens_out": self.output_tokens,
            "tokens_cached": self.cached_tokens,
            "tokens_cache_write": self.cache_write_tokens,
            "tokens_reasoning": self.reasoning_tokens,
            "ttft_ms": self.first_token_ms,
            # only where a realtime session reported them: HTTP lines keep
            # their shape
            **(
                {
                    "tokens_audio_in": self.audio_input_tokens,
                    "tokens_audio_out": self.audio_output_tokens,
                    "tokens_audio_cached": self.audio_cached_tokens,
                }
                if self.audio_input_tokens is not None or self.audio_output_tokens is not None
                else {}
            ),
        }


def extract_usage(
    provider: str,
    path: str,
    request_body: bytes,
    response: RecordedResponse,
    proto: ProtoSchema | None = None,
) -> Usage:
    """The :class:`Usage` of a recorded exchange; never raises.

    ``provider`` and ``path`` are the interaction's (``path`` without the
    query); the wire format is recognised from the bodies themselves, so an
    OpenAI-compatible endpoint under any provider or path is read too.  A
    gRPC call's messages are read through ``proto``, a descriptor set's
    schema, as the JSON objects its provider's readers take (without one
    they are bytes: nothing is read).
    """
    try:
        return _extract(provider, path, request_body, response, proto)
    except Exception:  # a last guard: usage is best effort, never a failed recording
        return Usage()


# -- the reading -------------------------------------------------------------


def _extract(
    provider: str,
    path: str,
    request_body: bytes,
    response: RecordedResponse,
    proto: ProtoSchema | None = None,
) -> Usage:
    acc = _Accumulator(embeddings=path.rstrip("/").endswith("/embeddings"))
    if response.stream == "grpc":
        if proto is not None:
            _read_grpc(acc, proto, path, response.frames)
    elif response.stream is None:
        _read_body(acc, response.body)
    elif response.stream == "sse":
        for at, frame in response.frames:
            if _counts_only(acc) and not _may_count(frame):
                continue
            _read_sse_frame(acc, frame, at)
    elif _looks_like_sse(response.frames):
        _read_sse_chunks(acc, response.frames)
    else:
        _read_chunks(acc, response.frames)
    model = acc.model
    if model is None and proto is not None:
        model = _grpc_model(proto, path, request_body)
    if model is None:
        model = request_model(path, request_body, provider)
    return acc.usage(model)


def _read_grpc(
    acc: _Accumulator, proto: ProtoSchema, path: str, frames: tuple[tuple[float, bytes], ...]
) -> None:
    """Each gRPC message as the JSON object its descriptor reads it as; a
    message it does not read is passed over."""
    from ._protobuf import SchemaNote

    for at, frame in frames:
        try:
            (obj,) = proto.read(path, [frame], response=True)
        except SchemaNote:
            continue
        if acc.take(obj, None) and acc.first_ms is None:
            acc.first_ms = at


def _grpc_model(proto: ProtoSchema, path: str, body: bytes) -> str | None:
    """The ``model`` of a gRPC request's first message, read through ``proto``."""
    return model_of(path, proto.request_json(path, body)) or None


def _looks_like_sse(frames: tuple[tuple[float, bytes], ...]) -> bool:
    head = b""
    for _, data in frames:
        head = (head + data).lstrip()
        if len(head) >= 6:
            break
    return looks_like_sse(head)


def _loads(text: str) -> Any:
    try:
        return load_json(text)
    except ValueError:
        return None


def _counts_only(acc: _Accumulator) -> bool:
    """Whether only token counts are left to read: the model and the first
    content (for the time to first token) are known."""
    return acc.first_ms is not None and acc.model is not None


def _may_count(event: bytes) -> bool:
    """Whether an SSE event may hold token counts: every provider's are under
    a key holding "usage" (``usage``, ``usageMetadata``) or ending in
    "_count" (Ollama's ``eval_count``).  A long stream's content events
    hold neither, and are not parsed once the first one is read."""
    return b"usage" in event or b"_count" in event


def _read_sse_chunks(acc: _Accumulator, frames: tuple[tuple[float, bytes], ...]) -> None:
    # A "chunks" stream that turns out to be SSE (served without its content
    # type) is cut into events, each timed by the chunk that completes it.
    splitter = SSESplitter()
    last = 0.0
    for at, data in frames:
        last = at
        for frame in splitter.feed(data):
            _read_sse_frame(acc, frame, at)
    for frame in splitter.close():
        _read_sse_frame(acc, frame, last)


def _read_sse_frame(acc: _Accumulator, frame: bytes, at: float | None) -> None:
    sse = parse_sse_event(frame)
    if sse.data is None or sse.data == "[DONE]":  # a comment, a lone event name, the end
        return
    obj = _loads(sse.data)
    if isinstance(obj, dict) and acc.take(obj, sse.event) and acc.first_ms is None:
        acc.first_ms = at


def _read_body(acc: _Accumulator, body: bytes) -> None:
    if looks_like_sse(body):  # served without its content type
        splitter = SSESplitter()
        for frame in [*splitter.feed(body), *splitter.close()]:
            _read_sse_frame(acc, frame, None)
        return
    text = body.decode("utf-8", "replace")
    for obj, _, _ in _json_values(text):
        acc.take(obj, None)


def _read_chunks(acc: _Accumulator, frames: tuple[tuple[float, bytes], ...]) -> None:
    """A stream of JSON kept as timed chunks: Gemini's JSON array, NDJSON."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    parts: list[str] = []
    ends: list[int] = []  # the character offset where each chunk ends
    size = 0
    for _, data in frames:
        part = decoder.decode(data)
        parts.append(part)
        size += len(part)
        ends.append(size)
    tail = decoder.decode(b"", True)
    if tail:
        parts.append(tail)
        ends[-1] += len(tail)
    text = "".join(parts)
    values = list(_json_values(text))
    # One JSON object delivered in pieces is a whole body, not a stream of
    # generated frames: it has no time to first token.  An array (Gemini) or
    # a run of objects (NDJSON) is a stream.
    timed = len(values) > 1 or text.lstrip().startswith("[")
    for obj, start, end in values:
        if acc.take(obj, None) and timed and acc.first_ms is None:
            match = _CONTENT_KEY.search(text, start, end)
            where = match.start() if match else end - 1
            index = min(bisect_right(ends, where), len(frames) - 1)
            acc.first_ms = frames[index][0]


# Where generated content starts inside a stream element (after the element
# is known to carry some): a Gemini text part or function call, an OpenAI
# content or arguments string, an Ollama message or response.
_CONTENT_KEY = re.compile(
    r'(?<!\\)"functionCall"\s*:|(?<!\\)"(?:text|content|arguments|thinking|response)"\s*:\s*"(?!")'
)
_WS = re.compile(r"[\s,]*")


def _skip(text: str, pos: int) -> int:
    """Past the whitespace and commas at ``pos``."""
    match = _WS.match(text, pos)
    return pos if match is None else match.end()


def _json_values(text: str) -> Iterator[tuple[dict[str, Any], int, int]]:
    """Each top-level JSON object in ``text`` with its span: one object, the
    elements of one array (even a truncated one), or objects one after the
    other (NDJSON).  Unreadable stretches are skipped line by line.

    Linear in ``text``: a value is read from ``source``, which is ``text``
    until the first unreadable stretch and then the line being read (which
    starts ``base`` characters into ``text``).  The error ``json`` raises
    counts the lines before it, so reading the whole text after each of
    many bad lines would count them all each time.
    """
    decode = json.JSONDecoder().raw_decode
    pos = _skip(text, 0)
    if text.startswith("[", pos):
        pos = _skip(text, pos + 1)
    end = len(text)
    source, base = text, 0
    while pos < end:
        if text[pos] == "]":
            pos = _skip(text, pos + 1)
            if text.startswith("[", pos):  # concatenated arrays
                pos = _skip(text, pos + 1)
            continue
        if pos >= base + len(source):  # past the line read alone: the next one
            newline = text.find("\n", pos)
            source, base = text[pos : end if newline < 0 else newline], pos
        try:
            value, stop = decode(source, pos - base)
            stop += base
            check_depth(value, text[pos:stop])
        except (ValueError, RecursionError):  # RecursionError: nested beyond Python's reach
            newline = text.find("\n", pos)
            if newline < 0:
                return
            pos = _skip(text, newline + 1)
            source, base = "", pos  # from here on, line by line
            continue
        if isinstance(value, dict):
            yield value, pos, stop
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    yield item, pos, stop
        pos = _skip(text, stop)


# -- the fold ------------------------------------------------------------------


class _Accumulator(Tally):
    """Folds the JSON objects of a response into usage figures, offering
    each to the providers' readers in turn (see
    :data:`reel_core._providers.USAGE_READERS`)."""

    __slots__ = ()

    def usage(self, model: str | None) -> Usage:
        output = self.output
        if output is None and self.embeddings and self.input is not None:
            output = 0
        return Usage(
            model=model,
            input_tokens=self.input,
            output_tokens=output,
            cached_tokens=self.cached,
            reasoning_tokens=self.reasoning,
            first_token_ms=self.first_ms,
            cache_write_tokens=self.cache_write,
            input_includes_cached=self.includes_cached,
        )

    def take(self, obj: dict[str, Any], event: str | None) -> bool:
        """Fold in one object; true when it carries generated content."""
        kind = obj.get("type", event)
        for read in USAGE_READERS:
            content = read(self, obj, kind)
            if content is not None:
                return content
        return False  # no reader claims it (OpenAI's chat reader claims any)
