"""What a response says: the text and tool calls of OpenAI (chat, legacy
completions, Responses), Anthropic (messages, legacy complete), Gemini and
Ollama answers, whole or streamed, and the text of each stream frame.

The shapes of each provider's answers are read by the core's provider
modules (:func:`reel_core.answer_pieces`); this module folds the
pieces into a whole answer and describes single frames.

Best effort by design: anything unrecognised is shown as its raw payload,
never an error.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from reel_core import RecordedResponse
from reel_core.tools import (
    Piece,
    SSESplitter,
    answer_pieces,
    load_json,
    looks_like_sse,
    parse_sse_event,
)

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
class _Fold:
    text: list[str] = field(default_factory=list)
    tools: dict[str, list[str]] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    recognised: bool = False

    def add(self, pieces: list[Piece]) -> None:
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


def _objects(data: bytes) -> Iterator[tuple[Any, str | None]]:
    """The JSON objects of a body: a document (an array's items), NDJSON
    lines, or SSE data payloads."""
    try:
        value = load_json(data)
    except ValueError:
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
                yield load_json(sse.data), sse.event
            except ValueError:
                continue
        return
    for line in data.splitlines():
        line = line.strip().strip(b",[]")
        if not line:
            continue
        try:
            yield load_json(line), None
        except ValueError:
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
                obj = load_json(sse.data)
            except ValueError:
                continue
            pieces = answer_pieces(obj, sse.event)
            if pieces is not None:
                fold.add(pieces)
    else:
        for obj, event in _objects(response.content):
            pieces = answer_pieces(obj, event)
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
            obj = load_json(payload)
        except ValueError:
            return FrameText("data", payload, event)
        pieces = answer_pieces(obj, event)
        described = None if pieces is None else _describe(pieces, event, obj)
        if described is None or (described.kind == "event" and not described.text):
            return FrameText("data", payload, event)
        return described
    collected: list[Piece] = []
    recognised = False
    for obj, event in _objects(frame):
        pieces = answer_pieces(obj, event)
        if pieces is not None:
            recognised = True
            collected.extend(pieces)
    if recognised:
        described = _describe(collected, None, None)
        if described.text:
            return described
    return FrameText("data", frame.decode("utf-8", "replace"), None)


def _describe(pieces: list[Piece], event: str | None, obj: Any) -> FrameText:
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
