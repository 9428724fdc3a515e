"""Token usage, model and time to first token, read from a recorded response.

:func:`extract_usage` reads what a provider reported about an exchange --
the model that answered, the tokens it billed and when the first generated
content arrived -- from the stored response, whole body or stream:

- OpenAI chat completions (and legacy completions, and OpenAI-compatible
  servers): ``usage.prompt_tokens`` / ``completion_tokens``, with
  ``prompt_tokens_details.cached_tokens`` and
  ``completion_tokens_details.reasoning_tokens``; a stream carries usage in
  its last chunk only when the request set ``stream_options.include_usage``.
- OpenAI Responses API: ``usage.input_tokens`` / ``output_tokens`` with
  ``input_tokens_details.cached_tokens`` and
  ``output_tokens_details.reasoning_tokens``, in the body or in the
  ``response`` of the ``response.completed`` (or ``.incomplete`` /
  ``.failed``) event.
- OpenAI embeddings: ``usage.prompt_tokens``; the output count is 0.
- Anthropic messages: ``usage.input_tokens`` / ``output_tokens`` /
  ``cache_read_input_tokens`` / ``cache_creation_input_tokens``; in a stream
  ``message_start`` carries the model and the input side and each
  ``message_delta`` carries cumulative counts, the last one winning.
- Gemini ``generateContent`` / ``streamGenerateContent``:
  ``usageMetadata`` (``promptTokenCount``, ``candidatesTokenCount``,
  ``thoughtsTokenCount``, ``cachedContentTokenCount``,
  ``toolUsePromptTokenCount``) and ``modelVersion``; in a stream the last
  ``usageMetadata`` wins, whether the stream is SSE (``alt=sse``) or the
  JSON array kept as timed chunks.

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
from typing import Any

from ._cassette import RecordedResponse
from ._frames import SSESplitter, looks_like_sse, parse_sse_event

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
        }


def extract_usage(
    provider: str, path: str, request_body: bytes, response: RecordedResponse
) -> Usage:
    """The :class:`Usage` of a recorded exchange; never raises.

    ``provider`` and ``path`` are the interaction's (``path`` without the
    query); the wire format is recognised from the bodies themselves, so an
    OpenAI-compatible endpoint under any provider or path is read too.
    """
    try:
        return _extract(provider, path, request_body, response)
    except Exception:  # a last guard: usage is best effort, never a failed recording
        return Usage()


# -- the reading -------------------------------------------------------------


def _extract(provider: str, path: str, request_body: bytes, response: RecordedResponse) -> Usage:
    acc = _Accumulator(embeddings=path.rstrip("/").endswith("/embeddings"))
    if response.stream is None:
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
    if model is None:
        model = _request_model(provider, path, request_body)
    return acc.usage(model)


def _looks_like_sse(frames: tuple[tuple[float, bytes], ...]) -> bool:
    head = b""
    for _, data in frames:
        head = (head + data).lstrip()
        if len(head) >= 6:
            break
    return looks_like_sse(head)


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
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
    other (NDJSON).  Unreadable stretches are skipped line by line."""
    decode = json.JSONDecoder().raw_decode
    pos = _skip(text, 0)
    if text.startswith("[", pos):
        pos = _skip(text, pos + 1)
    end = len(text)
    while pos < end:
        if text[pos] == "]":
            pos = _skip(text, pos + 1)
            if text.startswith("[", pos):  # concatenated arrays
                pos = _skip(text, pos + 1)
            continue
        try:
            value, stop = decode(text, pos)
        except (ValueError, RecursionError):
            newline = text.find("\n", pos)
            if newline < 0:
                return
            pos = _skip(text, newline + 1)
            continue
        if isinstance(value, dict):
            yield value, pos, stop
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    yield item, pos, stop
        pos = _skip(text, stop)


_GEMINI_MODEL_PATH = re.compile(r"/models/([^/:]+)")


def _request_model(provider: str, path: str, body: bytes) -> str | None:
    if b'"model"' in body:
        obj = _loads(body.decode("utf-8", "replace"))
        if isinstance(obj, dict):
            model = obj.get("model")
            if isinstance(model, str) and model:
                return model
    match = _GEMINI_MODEL_PATH.search(path)
    if match and (provider == "gemini" or ":" in path.rpartition("/")[2]):
        return match.group(1)
    return None


# -- the wire formats ----------------------------------------------------------


def _count(value: Any) -> int | None:
    """A token count, or ``None`` for anything that is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


def _sub(obj: dict[str, Any], name: str, key: str) -> int | None:
    inner = obj.get(name)
    return _count(inner.get(key)) if isinstance(inner, dict) else None


def _text(value: Any) -> bool:
    return isinstance(value, str) and value != ""


_ANTHROPIC_EVENTS = frozenset(
    {
        "message_start",
        "message_delta",
        "message_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "ping",
    }
)
_RESPONSES_WITH_BODY = frozenset(
    {
        "response.created",
        "response.in_progress",
        "response.queued",
        "response.completed",
        "response.incomplete",
        "response.failed",
    }
)
_RESPONSES_DELTAS = frozenset(
    {
        "response.output_text.delta",
        "response.refusal.delta",
        "response.function_call_arguments.delta",
        "response.custom_tool_call_input.delta",
        "response.reasoning_text.delta",
        "response.reasoning_summary_text.delta",
    }
)


class _Accumulator:
    """Folds the JSON objects of a response into usage figures."""

    __slots__ = (
        "cache_write",
        "cached",
        "embeddings",
        "first_ms",
        "includes_cached",
        "input",
        "model",
        "output",
        "reasoning",
    )

    def __init__(self, *, embeddings: bool = False) -> None:
        self.embeddings = embeddings
        self.model: str | None = None
        self.input: int | None = None
        self.output: int | None = None
        self.cached: int | None = None
        self.reasoning: int | None = None
        self.cache_write: int | None = None
        self.includes_cached = True
        self.first_ms: float | None = None

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

    def _set_model(self, value: Any) -> None:
        if isinstance(value, str) and value:
            self.model = value

    def take(self, obj: dict[str, Any], event: str | None) -> bool:
        """Fold in one object; true when it carries generated content."""
        kind = obj.get("type", event)
        if isinstance(kind, str):
            if kind.startswith("response."):
                return self._responses_event(obj, kind)
            if kind in _ANTHROPIC_EVENTS:
                return self._anthropic_event(obj, kind)
            if kind == "message":
                self._anthropic_message(obj)
                return False
            if kind == "error":
                return False
        if obj.get("object") == "response":
            self._responses_body(obj)
            return False
        if "candidates" in obj or "usageMetadata" in obj or "modelVersion" in obj:
            return self._gemini(obj)
        return self._openai(obj)

    # OpenAI chat completions, completions, embeddings; compatible servers.

    def _openai(self, obj: dict[str, Any]) -> bool:
        self._set_model(obj.get("model"))
        usage = obj.get("usage")
        if not isinstance(usage, dict):
            extra = obj.get("x_groq")  # Groq puts stream usage here
            usage = extra.get("usage") if isinstance(extra, dict) else None
        if isinstance(usage, dict):
            self._openai_usage(usage, list_object=obj.get("object") == "list")
        elif "prompt_eval_count" in obj or "eval_count" in obj:  # Ollama's own API
            self.input = _count(obj.get("prompt_eval_count"))
            self.output = _count(obj.get("eval_count"))
        choices = obj.get("choices")
        if isinstance(choices, list):
            return any(isinstance(choice, dict) and _choice_content(choice) for choice in choices)
        if obj.get("object") == "thread.message.delta":  # the Assistants API
            delta = obj.get("delta")
            content = delta.get("content") if isinstance(delta, dict) else None
            return isinstance(content, list) and any(
                isinstance(part, dict)
                and isinstance(part.get("text"), dict)
                and _text(part["text"].get("value"))
                for part in content
            )
        message = obj.get("message")  # Ollama chat
        if isinstance(message, dict) and _delta_content(message):
            return True
        return _text(obj.get("response"))  # Ollama generate

    def _openai_usage(self, usage: dict[str, Any], *, list_object: bool) -> None:
        if "prompt_tokens" in usage or "completion_tokens" in usage:
            prompt = _count(usage.get("prompt_tokens"))
            completion = _count(usage.get("completion_tokens"))
            if completion is None and prompt is not None and list_object:
                completion = 0  # an embeddings list: no output
            self.input, self.output = prompt, completion
            cached = _sub(usage, "prompt_tokens_details", "cached_tokens")
            if cached is None:
                cached = _count(usage.get("prompt_cache_hit_tokens"))  # DeepSeek
            self.cached = cached
            self.reasoning = _sub(usage, "completion_tokens_details", "reasoning_tokens")
            self.includes_cached = True
        elif "cache_read_input_tokens" in usage or "cache_creation_input_tokens" in usage:
            self._anthropic_usage(usage)
        elif "input_tokens" in usage or "output_tokens" in usage:
            self._responses_usage(usage)

    # OpenAI Responses API.

    def _responses_event(self, obj: dict[str, Any], kind: str) -> bool:
        if kind in _RESPONSES_WITH_BODY:
            body = obj.get("response")
            if isinstance(body, dict):
                self._responses_body(body)
            return False
        return kind in _RESPONSES_DELTAS and _text(obj.get("delta"))

    def _responses_body(self, body: dict[str, Any]) -> None:
        self._set_model(body.get("model"))
        usage = body.get("usage")
        if isinstance(usage, dict):
            self._responses_usage(usage)

    def _responses_usage(self, usage: dict[str, Any]) -> None:
        self.input = _count(usage.get("input_tokens"))
        self.output = _count(usage.get("output_tokens"))
        self.cached = _sub(usage, "input_tokens_details", "cached_tokens")
        self.reasoning = _sub(usage, "output_tokens_details", "reasoning_tokens")
        self.includes_cached = True

    # Anthropic messages.

    def _anthropic_event(self, obj: dict[str, Any], kind: str) -> bool:
        if kind == "content_block_delta":
            delta = obj.get("delta")
            return isinstance(delta, dict) and (
                _text(delta.get("text"))
                or _text(delta.get("partial_json"))
                or _text(delta.get("thinking"))
            )
        if kind == "content_block_start":
            # A tool call's name comes in the block start (and a call with
            # no arguments has no non-empty delta at all).
            block = obj.get("content_block")
            return isinstance(block, dict) and (
                _text(block.get("name")) or _text(block.get("text"))
            )
        if kind == "message_start":
            message = obj.get("message")
            if isinstance(message, dict):
                self._anthropic_message(message)
        elif kind == "message_delta":
            usage = obj.get("usage")
            if isinstance(usage, dict):
                self._anthropic_usage(usage)
        return False

    def _anthropic_message(self, message: dict[str, Any]) -> None:
        self._set_model(message.get("model"))
        usage = message.get("usage")
        if isinstance(usage, dict):
            self._anthropic_usage(usage)

    def _anthropic_usage(self, usage: dict[str, Any]) -> None:
        # Stream deltas are cumulative and may name only some counts: each
        # count present overrides the one before.
        self.includes_cached = False
        for key, attr in (
            ("input_tokens", "input"),
            ("output_tokens", "output"),
            ("cache_read_input_tokens", "cached"),
            ("cache_creation_input_tokens", "cache_write"),
        ):
            value = _count(usage.get(key))
            if value is not None:
                setattr(self, attr, value)

    # Gemini.

    def _gemini(self, obj: dict[str, Any]) -> bool:
        self._set_model(obj.get("modelVersion"))
        meta = obj.get("usageMetadata")
        if isinstance(meta, dict):
            prompt = _count(meta.get("promptTokenCount"))
            candidates = _count(meta.get("candidatesTokenCount"))
            thoughts = _count(meta.get("thoughtsTokenCount"))
            if prompt is not None or candidates is not None or thoughts is not None:
                # Zero counts are left out of Gemini's JSON (proto3).
                tool_prompt = _count(meta.get("toolUsePromptTokenCount")) or 0
                self.input = None if prompt is None else prompt + tool_prompt
                self.output = (candidates or 0) + (thoughts or 0)
                self.cached = _count(meta.get("cachedContentTokenCount"))
                self.reasoning = thoughts
                self.includes_cached = True
        candidates_list = obj.get("candidates")
        if isinstance(candidates_list, list):
            for candidate in candidates_list:
                content = candidate.get("content") if isinstance(candidate, dict) else None
                parts = content.get("parts") if isinstance(content, dict) else None
                if isinstance(parts, list):
                    for part in parts:
                        if isinstance(part, dict) and (
                            _text(part.get("text")) or isinstance(part.get("functionCall"), dict)
                        ):
                            return True
        return False


def _delta_content(delta: dict[str, Any]) -> bool:
    if (
        _text(delta.get("content"))
        or _text(delta.get("reasoning_content"))
        or _text(delta.get("reasoning"))
        or _text(delta.get("refusal"))
    ):
        return True
    calls = delta.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and (
                _text(function.get("name")) or _text(function.get("arguments"))
            ):
                return True
    function = delta.get("function_call")
    return isinstance(function, dict) and (
        _text(function.get("name")) or _text(function.get("arguments"))
    )


def _choice_content(choice: dict[str, Any]) -> bool:
    delta = choice.get("delta")
    if isinstance(delta, dict):
        return _delta_content(delta)
    return _text(choice.get("text"))  # legacy completions stream
