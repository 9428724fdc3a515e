"""The shape of a response, and how two shapes differ: provider drift.

When a stale recording is recorded again, the new answer to the same
request may have a different *shape* from the one it supersedes: a field
added or gone, a value of another type, another status, another sequence of
stream events.  That is a provider changing its API under you, which a
replay of old recordings would hide.  The words of the answer are not its
shape: a model answering differently is no drift.

* :func:`response_shape` reduces a recorded response to its :class:`Shape`:
  the status, the body's kind, each JSON path with its types (list items
  under ``[*]``), and for a stream the sequence of event names (repeats
  folded: ``delta+``) and the JSON paths of each event's data by event name;
  a WebSocket session's server messages count as its events (named by their
  ``type``).
* :func:`shape_changes` lists what differs between two shapes, one line each
  (``+ choices[*].message.refusal: string``).
* :func:`drift_of` compares two recordings into a :class:`Drift`, or
  ``None`` when they have the same shape.

Pure functions: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._frames import SSESplitter, parse_sse_event
from ._interaction import Interaction, RecordedResponse
from ._nesting import load_json

__all__ = ["Drift", "Shape", "drift_of", "response_shape", "shape_changes"]

#: Paths and their JSON types: ``{"choices[*].index": {"number"}}``.
Paths = Mapping[str, frozenset[str]]


@dataclass(frozen=True)
class Shape:
    """What a response looks like, without its words."""

    status: int
    #: ``json``, ``text``, ``empty``, ``sse``, ``chunks`` or ``websocket``.
    kind: str
    #: A whole body's (or a chunked stream's) JSON paths and their types.
    paths: Paths = field(default_factory=dict)
    #: A stream's event names in order, consecutive repeats folded into one.
    events: tuple[str, ...] = ()
    #: Each event name's data paths and types, all its events together.
    event_paths: Mapping[str, Paths] = field(default_factory=dict)


@dataclass(frozen=True)
class Drift:
    """A recording whose shape differs from the one it superseded."""

    key: str
    endpoint: str
    #: The superseded recording's id, and the new one's.
    old_id: str
    new_id: str
    #: When each was recorded (their ``ts``).
    old_ts: str | None
    new_ts: str | None
    #: What changed, one line each (``status 200 -> 400``, ``+ path: type``).
    changes: tuple[str, ...]

    def line(self) -> str:
        """The drift in one line, for a log or a terminal summary."""
        return f"drift {self.endpoint} ({self.old_id} -> {self.new_id}): " + "; ".join(self.changes)

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "endpoint": self.endpoint,
            "old": {"id": self.old_id, "ts": self.old_ts},
            "new": {"id": self.new_id, "ts": self.new_ts},
            "changes": list(self.changes),
        }


def json_paths(value: Any, path: str = "", into: dict[str, set[str]] | None = None) -> Paths:
    """Every path of a parsed JSON value and the types found there."""
    found: dict[str, set[str]] = {} if into is None else into
    if isinstance(value, dict):
        found.setdefault(path or "$", set()).add("object")
        for name, item in value.items():
            json_paths(item, f"{path}.{name}" if path else str(name), found)
    elif isinstance(value, list):
        found.setdefault(path or "$", set()).add("array")
        for item in value:
            json_paths(item, f"{path}[*]", found)
    else:
        found.setdefault(path or "$", set()).add(_scalar(value))
    return {p: frozenset(types) for p, types in found.items()}


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "null"


def _parse(data: bytes) -> Any:
    """Parsed JSON, or ``_NOT_JSON``."""
    try:
        return load_json(data)
    except ValueError:
        return _NOT_JSON


_NOT_JSON = object()


def _fold(names: Iterable[str]) -> tuple[str, ...]:
    """Consecutive repeats folded into one: a longer answer has more
    deltas (one delta or ten), not another shape."""
    folded: list[str] = []
    for name in names:
        if not folded or folded[-1] != name:
            folded.append(name)
    return tuple(folded)


def _events_shape(status: int, kind: str, events: list[tuple[str, bytes | None]]) -> Shape:
    """The shape of a sequence of named events with their data."""
    by_name: dict[str, dict[str, set[str]]] = {}
    for name, data in events:
        paths = by_name.setdefault(name, {})
        if data is None:
            continue
        parsed = _parse(data)
        if parsed is _NOT_JSON:
            paths.setdefault("$", set()).add("text")
        else:
            json_paths(parsed, "", paths)
    event_paths = {
        name: {p: frozenset(types) for p, types in paths.items()} for name, paths in by_name.items()
    }
    return Shape(status, kind, events=_fold(name for name, _ in events), event_paths=event_paths)


def _sse_events(response: RecordedResponse) -> list[tuple[str, bytes | None]]:
    splitter = SSESplitter()
    frames = [f for _, data in response.frames for f in splitter.feed(data)]
    frames += splitter.close()
    events: list[tuple[str, bytes | None]] = []
    for frame in frames:
        event = parse_sse_event(frame)
        if event.data is None:  # a comment or keep-alive: not dispatched
            continue
        data = event.data.encode()
        # OpenAI ends its streams with "data: [DONE]": name it, it is no JSON
        name = event.event or ("[DONE]" if event.data == "[DONE]" else "message")
        events.append((name, None if name == "[DONE]" else data))
    return events


def _message_name(data: bytes) -> tuple[str, bytes | None]:
    """A WebSocket message's name: its JSON ``type``, else its top-level
    keys (Gemini Live's ``serverContent``...), else ``text``."""
    parsed = _parse(data)
    if isinstance(parsed, dict):
        kind = parsed.get("type")
        name = kind if isinstance(kind, str) else "+".join(sorted(parsed)) or "{}"
        return name, data
    return ("json" if parsed is not _NOT_JSON else "text"), data


def response_shape(interaction: Interaction) -> Shape:
    """The shape of a recording's response (for a WebSocket session: the
    sequence and shapes of the server's messages)."""
    response = interaction.response
    status = response.status
    if interaction.websocket is not None:
        events = [
            _message_name(m.data) if not m.binary else ("binary", None)
            for m in interaction.websocket.messages
            if m.sender == "server"
        ]
        return _events_shape(status, "websocket", events)
    if response.stream == "sse":
        return _events_shape(status, "sse", _sse_events(response))
    body = response.content
    if not body.strip():
        return Shape(status, "empty")
    parsed = _parse(body)
    if parsed is not _NOT_JSON:
        return Shape(status, "json" if response.stream is None else "chunks", json_paths(parsed))
    if response.stream is not None:  # JSON lines (a Gemini stream without alt=sse)
        found: dict[str, set[str]] = {}
        for line in body.splitlines():
            item = _parse(line.strip().rstrip(b","))
            if item is not _NOT_JSON:
                json_paths(item, "", found)
        if found:
            return Shape(status, "chunks", {p: frozenset(t) for p, t in found.items()})
    return Shape(status, "text")


def _path_changes(old: Paths, new: Paths, where: str = "") -> list[str]:
    changes = []
    for path in sorted(old.keys() | new.keys()):
        label = f"{where}{path}"
        if path not in new:
            changes.append(f"- {label}: {'|'.join(sorted(old[path]))}")
        elif path not in old:
            changes.append(f"+ {label}: {'|'.join(sorted(new[path]))}")
        elif old[path] != new[path]:
            before, after = "|".join(sorted(old[path])), "|".join(sorted(new[path]))
            changes.append(f"~ {label}: {before} -> {after}")
    return changes


def shape_changes(old: Shape, new: Shape) -> list[str]:
    """What differs from ``old`` to ``new``, one line each: ``status 200 ->
    400``, ``body json -> text``, ``events a, b -> a, c``, then paths added
    (``+``), gone (``-``) and retyped (``~``), an event's under its name
    (``content_block_delta: delta.text``)."""
    changes = []
    if old.status != new.status:
        changes.append(f"status {old.status} -> {new.status}")
    if old.kind != new.kind:
        changes.append(f"body {old.kind} -> {new.kind}")
        return changes  # paths of different kinds of body say nothing more
    if old.events != new.events:
        changes.append(f"events {', '.join(old.events)} -> {', '.join(new.events)}")
    changes += _path_changes(old.paths, new.paths)
    for name in sorted(old.event_paths.keys() & new.event_paths.keys()):
        changes += _path_changes(old.event_paths[name], new.event_paths[name], f"{name}: ")
    return changes


def drift_of(old: Interaction, new: Interaction) -> Drift | None:
    """How ``new``'s response differs in shape from ``old``'s (the recording
    it supersedes), or ``None`` when they have the same shape."""
    changes = shape_changes(response_shape(old), response_shape(new))
    if not changes:
        return None
    endpoint = new.endpoint or f"{new.request.method} {new.request.path}"
    return Drift(new.key, endpoint, old.id, new.id, old.timestamp, new.timestamp, tuple(changes))
