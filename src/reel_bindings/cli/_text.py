"""What a response says: the text and tool calls of OpenAI (chat, legacy
completions, Responses), Anthropic (messages, legacy complete), Gemini and
Ollama answers, whole or streamed, and the text of each stream frame.

Best effort by design: anything unrecognised is shown as its raw payload,
never an error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from reel_core import RecordedResponse, SSESplitter, looks_like_sse, parse_sse_event

__all__ = ["Assembled", "FrameText", "assemble", "frame_text"]


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str


@dataclass(frozen=True)
class Assembled:
    """The text a response carries and the tool calls it makes."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    #: Whether anything was recognised (else ``text`` is empty for a reason).
    recognised: bool = False


@dataclass(frozen=True)
class FrameText:
    """What to show for one stream frame."""

    #: ``delta`` (generated text or tool-call input, recognised), ``event``
    #: (a recognised event carrying no text), or ``data`` (the raw payload).
    kind: str
    text: str
    #: The SSE event name, if any.
    event: str | None = None


@dataclass
class _Piece:
    text: str = ""
    #: A tool-call fragment: (slot, name or None, argument text).
    tool: tuple[str, str | None, str] | None = None


@dataclass
class _Fold:
    text: list[str] = field(default_factory=list)
    tools: dict[str, list[str]] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    recognised: bool = False

    def add(self, pieces: list[_Piece]) -> None:
        for piece in pieces:
            self.recognised = True
            if piece.tool is not None:
                slot, name, args = piece.tool
                if not slot:  # a call complete in one piece (Gemini)
                    slot = f"#{len(self.tools)}"
                self.tools.setdefault(slot, [])
                if name:
                    self.names[slot] = name
                if args:
                    self.tools[slot].append(args)
            elif piece.text:
                self.text.append(piece.text)

    def result(self) -> Assembled:
        calls = tuple(
            ToolCall(self.names.get(slot, "?"), "".join(parts))
            for slot, parts in self.tools.items()
        )
        return Assembled("".join(self.text), calls, self.recognised)


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _s(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _pieces(obj: Any, event: str | None = None) -> list[_Piece] | None:
    """The text and tool-call fragments of one JSON object of a response;
    ``None`` when the shape is not recognised."""
    if not isinstance(obj, dict):
        return None
    kind = obj.get("type", event)
    out: list[_Piece] = []
    # -- Anthropic messages (stream events, then the whole message) --------
    if kind == "content_block_delta":
        delta = _obj(obj.get("delta"))
        slot = f"a{obj.get('index', 0)}"
        if "partial_json" in delta:
            return [_Piece(tool=(slot, None, _s(delta.get("partial_json"))))]
        return [_Piece(_s(delta.get("text")) or _s(delta.get("thinking")))]
    if kind == "content_block_start":
        block = _obj(obj.get("content_block"))
        if block.get("type") in ("tool_use", "server_tool_use"):
            slot = f"a{obj.get('index', 0)}"
            return [_Piece(tool=(slot, _s(block.get("name")), ""))]
        return [_Piece(_s(block.get("text")))]
    if kind in ("message_start", "message_delta", "message_stop", "content_block_stop", "ping"):
        return []
    if kind == "message" and isinstance(obj.get("content"), list):
        for i, block in enumerate(obj["content"]):
            if not isinstance(block, dict):
                continue
            if block.get("type") in ("tool_use", "server_tool_use"):
                args = _dumps(block.get("input", {}))
                out.append(_Piece(tool=(f"a{i}", _s(block.get("name")), args)))
            else:
                out.append(_Piece(_s(block.get("text"))))
        return out
    if kind == "completion" or ("completion" in obj and "stop_reason" in obj):
        return [_Piece(_s(obj.get("completion")))]
    # -- OpenAI Responses ---------------------------------------------------
    if isinstance(kind, str) and kind.startswith("response."):
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            return [_Piece(_s(obj.get("delta")))]
        if kind == "response.output_item.added":
            item = _obj(obj.get("item"))
            if item.get("type") == "function_call":
                slot = f"r{obj.get('output_index', 0)}"
                return [_Piece(tool=(slot, _s(item.get("name")), ""))]
        if kind == "response.function_call_arguments.delta":
            slot = f"r{obj.get('output_index', 0)}"
            return [_Piece(tool=(slot, None, _s(obj.get("delta"))))]
        return []
    if obj.get("object") == "response" and isinstance(obj.get("output"), list):
        for i, item in enumerate(obj["output"]):
            if not isinstance(item, dict):
                continue
            if item.get("type") == "function_call":
                out.append(_Piece(tool=(f"r{i}", _s(item.get("name")), _s(item.get("arguments")))))
            for part in item.get("content") or []:
                if isinstance(part, dict) and part.get("type") in ("output_text", "refusal"):
                    out.append(_Piece(_s(part.get("text")) or _s(part.get("refusal"))))
        return out
    # -- Gemini ---------------------------------------------------------------
    if isinstance(obj.get("candidates"), list):
        for candidate in obj["candidates"][:1]:
            content = candidate.get("content") if isinstance(candidate, dict) else None
            parts = content.get("parts") if isinstance(content, dict) else None
            for part in parts if isinstance(parts, list) else []:
                if not isinstance(part, dict):
                    continue
                call = part.get("functionCall")
                if isinstance(call, dict):
                    out.append(_Piece(tool=("", _s(call.get("name")), _dumps(call.get("args")))))
                else:
                    out.append(_Piece(_s(part.get("text"))))
        return out
    if "usageMetadata" in obj or "modelVersion" in obj:
        return []
    # -- OpenAI chat / legacy completions / compatible servers -----------------
    if isinstance(obj.get("choices"), list):
        for choice in obj["choices"][:1]:
            if not isinstance(choice, dict):
                continue
            message = choice.get("delta", choice.get("message"))
            if isinstance(message, dict):
                out.append(_Piece(_s(message.get("content")) or _s(message.get("refusal"))))
                for k, call in enumerate(message.get("tool_calls") or []):
                    if not isinstance(call, dict):
                        continue
                    fn = _obj(call.get("function"))
                    slot = f"o{call.get('index', k)}"
                    out.append(
                        _Piece(tool=(slot, _s(fn.get("name")) or None, _s(fn.get("arguments"))))
                    )
            elif "text" in choice:
                out.append(_Piece(_s(choice.get("text"))))
        return out
    # -- Ollama ------------------------------------------------------------------
    message = obj.get("message")
    if isinstance(message, dict) and "content" in message:
        return [_Piece(_s(message.get("content")))]
    if "response" in obj and "done" in obj:
        return [_Piece(_s(obj.get("response")))]
    return None


def _objects(data: bytes) -> Iterator[tuple[Any, str | None]]:
    """The JSON objects of a body: a document (an array's items), NDJSON
    lines, or SSE data payloads."""
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        value = None
    else:
        if isinstance(value, list):
            for item in value:
                yield item, None
        else:
            yield value, None
        return
    if looks_like_sse(data):
        for frame in _sse_frames(data):
            sse = parse_sse_event(frame)
            if sse.data is None or sse.data.strip() == "[DONE]":
                continue
            try:
                yield json.loads(sse.data), sse.event
            except (ValueError, RecursionError):
                continue
        return
    for line in data.splitlines():
        line = line.strip().strip(b",[]")
        if not line:
            continue
        try:
            yield json.loads(line), None
        except (ValueError, RecursionError):
            continue


def _sse_frames(data: bytes) -> list[bytes]:
    splitter = SSESplitter()
    return [*splitter.feed(data), *splitter.close()]


def assemble(response: RecordedResponse) -> Assembled:
    """The whole text and the tool calls of a response, whole or streamed."""
    fold = _Fold()
    if response.stream == "sse":
        for _, frame in response.frames:
            sse = parse_sse_event(frame)
            if sse.data is None or sse.data.strip() == "[DONE]":
                continue
            try:
                obj = json.loads(sse.data)
            except (ValueError, RecursionError):
                continue
            pieces = _pieces(obj, sse.event)
            if pieces is not None:
                fold.add(pieces)
    else:
        for obj, event in _objects(response.content):
            pieces = _pieces(obj, event)
            if pieces is not None:
                fold.add(pieces)
    return fold.result()


def frame_text(frame: bytes, stream: str) -> FrameText:
    """What one frame says: its delta text when recognisable, else its data
    payload (SSE) or its text (chunks)."""
    if stream == "sse":
        sse = parse_sse_event(frame)
        event, payload = sse.event, sse.data
        if payload is None:  # a comment or a lone event name: show it as it is
            return FrameText("data", frame.decode("utf-8", "replace").strip(), event)
        try:
            obj = json.loads(payload)
        except (ValueError, RecursionError):
            return FrameText("data", payload, event)
        pieces = _pieces(obj, event)
        described = None if pieces is None else _describe(pieces, event, obj)
        if described is None or (described.kind == "event" and not described.text):
            return FrameText("data", payload, event)
        return described
    collected: list[_Piece] = []
    recognised = False
    for obj, event in _objects(frame):
        pieces = _pieces(obj, event)
        if pieces is not None:
            recognised = True
            collected.extend(pieces)
    if recognised:
        described = _describe(collected, None, None)
        if described.text:
            return described
    return FrameText("data", frame.decode("utf-8", "replace"), None)


def _describe(pieces: list[_Piece], event: str | None, obj: Any) -> FrameText:
    parts: list[str] = []
    for piece in pieces:
        if piece.tool is not None:
            _, name, args = piece.tool
            if name:
                parts.append(f"{name}(")
            parts.append(args)
        elif piece.text:
            parts.append(piece.text)
    if parts:
        return FrameText("delta", "".join(parts), event)
    label = event
    if label is None and isinstance(obj, dict) and isinstance(obj.get("type"), str):
        label = obj["type"]
    return FrameText("event", label or "", event)
