"""Requests for no known provider, and the servers read through them.

- Recognition: ``generic`` is what a request is when no provider claims it
  (a local server, an unknown path); it has no real host, so it is only
  forwarded under a configured upstream, and no drift fields.
- Ollama's own API (``/api/chat``, ``/api/generate``): the token counts
  ``prompt_eval_count`` / ``eval_count`` and the answer in
  ``message.content`` or ``response``.  Its OpenAI-compatible endpoints are
  read as OpenAI (see :mod:`.openai`, which calls the readers here for the
  rest).
"""

from __future__ import annotations

from typing import Any

from .._http import Headers
from ._base import Claim, Piece, Provider, Tally, count, string, text

__all__ = ["PROVIDER", "answer_pieces", "ollama_generated", "read_ollama_counts"]


def recognizes(path: str, host: str, headers: Headers) -> bool:
    return True


def family(path: str) -> bool:
    return False


def read_ollama_counts(tally: Tally, obj: dict[str, Any]) -> None:
    """Ollama's counts, on an object without an OpenAI ``usage``."""
    if "prompt_eval_count" in obj or "eval_count" in obj:
        tally.input = count(obj.get("prompt_eval_count"))
        tally.output = count(obj.get("eval_count"))


def ollama_generated(obj: dict[str, Any]) -> bool:
    """Whether an Ollama ``generate`` object carries generated text."""
    return text(obj.get("response"))


def answer_pieces(obj: dict[str, Any], kind: object) -> list[Piece] | None:
    """An Ollama chat message or generate answer (whole or one NDJSON line)."""
    message = obj.get("message")
    if isinstance(message, dict) and "content" in message:
        return [Piece(string(message.get("content")))]
    if "response" in obj and "done" in obj:
        return [Piece(string(obj.get("response")))]
    return None


PROVIDER = Provider(
    name="generic",
    title="Generic",
    # it recognizes anything: tried last
    rank=10_000,
    host=None,
    recognizes=recognizes,
    family=family,
    family_claim=Claim.SHAPED,
    drift_fields=(),
    stream_event_kinds=frozenset(),
    # Compatible servers follow OpenAI: stream usage only when asked for.
    stream_usage_opt_in=True,
    usage_readers=(),
    prices={},
    aliases={},
    answer_readers=((Claim.SHAPED, answer_pieces),),
    # Ollama's generate API
    prompt_keys=("prompt",),
)
