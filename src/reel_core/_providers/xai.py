"""xAI's gRPC API (``xai-sdk``): what Reel knows of it.

- Recognition: a call under ``/xai_api.`` (``/xai_api.Chat/GetCompletion``
  ...), or a gRPC call to ``api.x.ai``; its ``authorization`` metadata (and
  an ``x-api-key``) is its credential, scrubbed as every credential header.
  xAI's OpenAI-compatible REST API (``/v1/chat/completions`` on the same
  host) stays OpenAI's: its bodies are OpenAI's.
- Its messages are protobuf: read only through a descriptor set
  (:mod:`reel_core._protobuf`), which turns each into the JSON objects the
  readers below take.  A request reads as ``{"messages": [...]}``, so its
  drift field is ``messages[*].user``.
- Usage (``GetChatCompletionResponse`` and the stream's
  ``GetChatCompletionChunk``): ``usage.prompt_tokens``,
  ``completion_tokens`` and ``reasoning_tokens`` apart (output counts both,
  as everywhere in Reel), ``cached_prompt_text_tokens`` (inside the
  prompt's count).  The answer is ``outputs[].message.content`` (a whole
  answer) or ``outputs[].delta.content`` (a chunk), tool calls under
  ``tool_calls[].function``.
"""

from __future__ import annotations

from typing import Any

from .._http import Headers, header_value
from ._base import Claim, Piece, Provider, Tally, count, string, text

__all__ = ["PROVIDER", "answer_pieces", "read_usage"]

#: The proto package of xAI's services.
PACKAGE = "/xai_api."
_HOST = "api.x.ai"
#: Usage counts only xAI's ``SamplingUsage`` has.
_XAI_COUNTS = ("reasoning_tokens", "prompt_text_tokens", "cached_prompt_text_tokens")


def recognizes(path: str, host: str, headers: Headers) -> bool:
    if path.startswith(PACKAGE):
        return True
    if host.rpartition(":")[0] != _HOST and host != _HOST:
        return False
    content_type = header_value(headers, b"content-type") or b""
    return content_type.split(b";", 1)[0].strip().lower().startswith(b"application/grpc")


def family(path: str) -> bool:
    return path.startswith(PACKAGE)


def _is_xai(obj: dict[str, Any]) -> bool:
    usage = obj.get("usage")
    return "outputs" in obj or (
        isinstance(usage, dict) and any(name in usage for name in _XAI_COUNTS)
    )


def read_usage(tally: Tally, obj: dict[str, Any], kind: object) -> bool | None:
    """A ``GetChatCompletionResponse`` or chunk, as its JSON mapping reads."""
    if not _is_xai(obj):
        return None
    tally.set_model(obj.get("model"))
    usage = obj.get("usage")
    if isinstance(usage, dict):
        completion = count(usage.get("completion_tokens"))
        reasoning = count(usage.get("reasoning_tokens"))
        tally.input = count(usage.get("prompt_tokens"))
        if completion is not None or reasoning is not None:
            tally.output = (completion or 0) + (reasoning or 0)
        tally.reasoning = reasoning
        tally.cached = count(usage.get("cached_prompt_text_tokens"))
        tally.includes_cached = True
    pieces = answer_pieces(obj, kind) or []
    return any(p.text or p.tool is not None for p in pieces) or any(
        text(part.get("reasoning_content")) for part in _parts(obj)
    )


def _parts(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The message (a whole answer) or delta (a chunk) of each output."""
    outputs = obj.get("outputs")
    parts = []
    for output in outputs if isinstance(outputs, list) else ():
        part = output.get("message", output.get("delta")) if isinstance(output, dict) else None
        if isinstance(part, dict):
            parts.append(part)
    return parts


def answer_pieces(obj: dict[str, Any], kind: object) -> list[Piece] | None:
    """The text and tool calls of each output, whole or a chunk's delta."""
    if not isinstance(obj.get("outputs"), list):
        return None
    pieces = []
    for part in _parts(obj):
        if text(part.get("content")):
            pieces.append(Piece(string(part.get("content"))))
        calls = part.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                name = function.get("name")
                arguments = string(function.get("arguments"))
                # a call comes whole, in one message: an empty slot
                pieces.append(Piece(tool=("", name if isinstance(name, str) else None, arguments)))
    return pieces


PROVIDER = Provider(
    name="xai",
    title="xAI",
    rank=280,
    host="https://api.x.ai",
    recognizes=recognizes,
    family=family,
    family_claim=Claim.MARKED,
    # a request reads as {"messages": [GetCompletionsRequest...]} through a descriptor set
    drift_fields=("messages[*].user",),
    stream_event_kinds=frozenset(),
    stream_usage_opt_in=False,
    usage_readers=((Claim.SHAPED, read_usage),),
    prices={},
    aliases={},
    answer_readers=((Claim.SHAPED, answer_pieces),),
    prompt_keys=(),
    key_variables=("XAI_API_KEY",),
)
