"""pydantic-ai's WebSocket cassettes (its realtime tests, YAML).

The root holds ``version`` (1) and ``interactions``, each one WebSocket
message: ``{kind: message, direction: sent | received, data}`` (older files
have no ``kind``; newer ones add ``at``, seconds after the connection
opened).  ``data`` is the message's JSON value, parsed: pydantic-ai's own
replay sends ``json.dumps(data)``, and so is each message rebuilt here (a
string that is no JSON object stays the text it is; ``!!binary`` bytes a
binary message).  The whole file is one session: one Reel interaction, its
upgrade ``GET`` and the messages in order, ``sent`` from the client.

The file keeps no URL, no headers and no close, so the upgrade is inferred
from the messages, and every assumption is said in the import report:

- OpenAI Realtime (events with a ``type`` such as ``session.update``):
  ``GET /v1/realtime?model=M`` on ``api.openai.com``, the model the server
  named (``session.created`` / ``session.updated``).  A session joined by
  ``call_id`` (WebRTC sideband) or on Azure dialled another URL.
- Gemini Live (a first ``setup`` message, or ``setupComplete``): google-genai's
  default ``GET /ws/google.ai.generativelanguage.v1.GenerativeService.
  BidiGenerateContent`` on ``generativelanguage.googleapis.com``, the key
  in the ``x-goog-api-key`` header as google-genai sends it (a client on
  another API version, ``v1beta``/``v1alpha``, or giving ``?key=``, misses).
- Messages without ``at``: every offset 0 (the replay sends each server
  message as soon as its gate opens, whatever the timing mode).
- No close is recorded: the replay leaves the session to the client.

A session of another service (its first message neither shape) is skipped
with why: nothing says where it was dialled.  Entries of another ``kind``
are left out, named in the report.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from .._interaction import WebSocketLog, WebSocketMessage
from ._base import Exchange, Skipped
from ._fields import Skip, text_bytes
from ._yaml import Unsupported, find_unsupported, load_interactions

__all__ = ["DESCRIPTION", "NAME", "TOOL", "parse", "sniff"]

NAME = "pydantic-ws"
TOOL = "pydantic-ai-websocket"
DESCRIPTION = "pydantic-ai's WebSocket cassettes (realtime tests, YAML: messages sent and received)"

OPENAI = "https://api.openai.com/v1/realtime"
GEMINI = (
    "https://generativelanguage.googleapis.com/ws/"
    "google.ai.generativelanguage.v1.GenerativeService.BidiGenerateContent"
)
#: An entry that is a message: a list item opening with ``kind: message``
#: then ``direction``, or (older files) with ``direction`` itself.
_MESSAGE = re.compile(
    rb"^-[ \t]+(?:kind:[ \t]+message[ \t]*\r?\n[ \t]+)?direction:[ \t]+(?:sent|received)[ \t]*$",
    re.M,
)
_URI = re.compile(rb"^[ \t]*(?:-[ \t]+)?uri:", re.M)
_SENDERS = {"sent": "client", "received": "server"}


def sniff(data: bytes) -> bool:
    """An ``interactions`` list whose entries are messages with a direction
    (and no HTTP ``uri`` anywhere: that is a vcrpy cassette)."""
    head = data[:4096]
    return b"interactions:" in head and bool(_MESSAGE.search(head)) and not _URI.search(data)


def parse(data: bytes, name: str) -> list[Exchange | Skipped]:
    items = load_interactions(data, name, "pydantic-ai WebSocket")
    try:
        return [_session(items)]
    except Skip as exc:
        return [Skipped(0, str(exc))]


def _session(items: list[Any]) -> Exchange:
    messages: list[WebSocketMessage] = []
    values: list[tuple[str, Any]] = []
    notes: list[str] = []
    left: list[str] = []
    at_ms = 0.0
    timed = False
    for i, item in enumerate(items):
        if isinstance(item, Unsupported) and item.reason:  # a recursive alias, say
            raise Skip(f"entry {i}: {item.reason}")
        if not isinstance(item, Mapping):
            raise Skip(f"entry {i} is a {type(item).__name__}, not a mapping")
        kind = item.get("kind", "message")
        if kind != "message":
            left.append(f"{i} ({kind})")
            continue
        sender = _SENDERS.get(str(item.get("direction")))
        if sender is None:
            raise Skip(f"entry {i} has direction {item.get('direction')!r}: sent or received")
        if "data" not in item:
            raise Skip(f"entry {i} has no data")
        value = item["data"]
        found = find_unsupported(value)
        if found:
            raise Skip(
                f"entry {i}: {found.reason}"
                if found.reason
                else f"entry {i} holds a {found.tag} value, which Reel does not construct"
            )
        at = item.get("at")
        if at is not None:
            if isinstance(at, bool) or not isinstance(at, (int, float)) or not at >= 0:
                raise Skip(f"entry {i} has at {at!r}: seconds, a number >= 0")
            timed = True
            at_ms = max(at_ms, round(float(at) * 1000.0, 3))  # offsets never go back
        payload, binary = _payload(value)
        messages.append(WebSocketMessage(sender, at_ms, payload, binary))
        values.append((sender, value))
    if not messages:
        raise Skip("no messages: nothing to replay")
    target, why = _upgrade(values)
    notes.append(why)
    if not timed:
        notes.append(
            "no timing in the file (no `at`): every message at offset 0, so a replay sends "
            "each server message as soon as the client message before it came"
        )
    notes.append("no close in the file: the replay leaves closing the session to the client")
    if left:
        notes.append("left out, not WebSocket messages: entries " + ", ".join(left))
    return Exchange(
        0,
        "GET",
        target,
        (),
        b"",
        101,
        (),
        b"",
        notes=tuple(notes),
        websocket=WebSocketLog(tuple(messages), None),
    )


def _payload(value: Any) -> tuple[bytes, bool]:
    """A message's bytes as pydantic-ai's replay sends them: JSON written
    by ``json.dumps``; a string as its text; bytes as a binary message."""
    if isinstance(value, bytes):
        return value, True
    if isinstance(value, str):
        return text_bytes(value), False
    try:
        return json.dumps(value).encode(), False
    except (TypeError, ValueError) as exc:  # a date, a set...: YAML holds more than JSON
        raise Skip(f"a message is no JSON value ({exc})") from None


def _upgrade(values: list[tuple[str, Any]]) -> tuple[str, str]:
    """The upgrade's URL, told from the messages, and the note saying so."""
    objects = [(s, v) for s, v in values if isinstance(v, Mapping)]
    first_client = next((v for s, v in objects if s == "client"), None)
    if (first_client is not None and "setup" in first_client) or any(
        "setupComplete" in v for s, v in objects if s == "server"
    ):
        return GEMINI, (
            "the file keeps no URL: assumed Gemini Live (setup/setupComplete) at "
            "GET /ws/google.ai.generativelanguage.v1.GenerativeService.BidiGenerateContent, "
            "google-genai's default API version, the key in a header as google-genai sends it "
            "(a client giving ?key= or another version misses)"
        )
    first = objects[0][1].get("type") if objects else None
    if isinstance(first, str) and "." in first:  # session.created, session.update...
        model = next(
            (
                v["session"]["model"]
                for s, v in objects
                if s == "server"
                and isinstance(v.get("session"), Mapping)
                and isinstance(v["session"].get("model"), str)
            ),
            None,
        )
        if model is None:
            return OPENAI, (
                "the file keeps no URL: assumed OpenAI Realtime (its events) at "
                "GET /v1/realtime, no model named by the server"
            )
        note = (
            f"the file keeps no URL: assumed OpenAI Realtime (its events) at "
            f"GET /v1/realtime?model={model}, the model the server named"
        )
        if first != "session.created":
            note += (
                " (it does not open with the server's session.created: a sideband session joined "
                "by call_id dialled ?call_id= instead)"
            )
        return f"{OPENAI}?model={model}", note
    raise Skip(
        "cannot tell which service this session talked to (neither OpenAI Realtime events nor "
        "a Gemini Live setup) and the file keeps no URL: record it again through the Reel proxy"
    )
