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

from reel_core import Interaction, RecordedResponse
from reel_core.tools import (
    Piece,
    ProtoSchema,
    SSESplitter,
    answer_pieces,
    load_json,
    looks_like_sse,
    parse_sse_event,
    request_frames,
    shown_messages,
)

__all__ = ["Assembled", "FrameText", "GrpcShown", "assemble", "frame_text", "grpc_shown"]

#: What a note on messages shown as bytes adds: how to show them as JSON.
GRPC_HINT = "give the call's descriptor set with --proto-descriptor FILE to show them as JSON"


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


@dataclass(frozen=True)
class GrpcShown:
    """A gRPC call's messages as shown: the request's and the response's,
    each JSON through a descriptor set, else bytes with a note saying why."""

    request: list[Any]
    request_note: str | None
    response: list[Any]
    response_note: str | None

    def objects(self) -> list[Any]:
        """The response's messages read as JSON (none when they are bytes)."""
        return [] if self.response_note is not None else self.response


def grpc_shown(ix: Interaction, proto: ProtoSchema | None) -> GrpcShown | None:
    """``ix``'s messages when it is a gRPC call (a request body of whole
    messages to ``/pkg.Service/Method``, or a ``grpc`` response stream),
    else ``None``.  A note on bytes says how to show them as JSON."""
    req, resp = ix.request, ix.response
    frames = request_frames(req.path, req.body)
    if frames is None and resp.stream != "grpc":
        return None
    request, request_note = shown_messages(frames or [], req.path, proto)
    response, response_note = (
        shown_messages([f for _, f in resp.frames], req.path, proto, response=True)
        if resp.stream == "grpc"
        else ([], None)
    )

    def hinted(note: str | None) -> str | None:
        return f"{note} ({GRPC_HINT})" if note is not None and proto is None else note

    return GrpcShown(request, hinted(request_note), response, hinted(response_note))


def assemble(response: RecordedResponse, grpc: GrpcShown | None = None) -> Assembled:
    """The whole text and the tool calls of a response, whole or streamed
    (a gRPC call's from its messages read as JSON, ``grpc``)."""
    fold = _Fold()
    if response.stream == "grpc":
        for obj in grpc.objects() if grpc is not None else []:
            pieces = answer_pieces(obj)
            if pieces is not None:
                fold.add(pieces)
    elif response.stream == "sse":
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
