"""The conversation of a gRPC session, and its form on a cassette line.

A client-streaming or bidirectional gRPC call (a *session*, see
:func:`reel_core._grpc_rule.is_grpc_session`) is one interaction, as a
WebSocket session is: its request is the call's ``POST /pkg.Service/Method``
with its first client message as the body (what it is keyed and matched
on), its response the status, headers and trailers, and
:attr:`~reel_core.Interaction.grpc` (a :class:`GrpcLog`) everything that
crossed, both ways, in order: each whole message (prefix included, as on
the wire) and each side's end, with its offset from the call's start.

On the line the response says ``"stream": "grpc-session"`` (a reader that
knows only ``sse``, ``chunks``, ``grpc`` and ``websocket`` refuses the line
rather than replay its head and trailers without the messages), and the
line's ``grpc`` field holds the entries: ``{"from": "client", "at": 0.0,
"base64": "..."}`` for a message (always base64: a protobuf behind a binary
prefix), ``{"from": "client", "at": 3.5, "end": true}`` for the client's
END_STREAM (its half close), ``{"from": "server", "at": 9.0, "end": true}``
for the call's end (the trailers, or the stream broken off), last.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ._grpc import rescrubbed
from ._redact import Redactor

__all__ = ["GRPC_SENDERS", "GRPC_SESSION", "GrpcLog", "GrpcMessage", "scrub_message"]

#: ``response.stream`` of a gRPC session's line.
GRPC_SESSION = "grpc-session"
#: Who sends an entry of a session.
GRPC_SENDERS = ("client", "server")


@dataclass(frozen=True)
class GrpcMessage:
    """One entry of a gRPC session: a whole message (``data``, its
    length prefix included), or a side's end (``end``: no data)."""

    #: ``"client"`` or ``"server"`` (:data:`GRPC_SENDERS`).
    sender: str
    #: Milliseconds after the call started.
    at_ms: float
    data: bytes = b""
    #: The client's END_STREAM (it sends no more), or the call's end (the
    #: server's trailers, or the stream broken off).
    end: bool = False


def scrub_message(
    frame: bytes,
    redactor: Redactor,
    found: list[str] | None = None,
    notes: list[tuple[str, str]] | None = None,
) -> bytes:
    """A session's message redacted: the one rule, for what is recorded,
    what ``reel redact`` rewrites and what a replay compares a client's
    message as.  The message is scrubbed as a unit (a secret split across
    two messages is neither's) by every rule, as a gRPC response's
    messages are, its length prefix written again for what is left (a
    compressed one decompressed; ``notes`` hears of one that is not)."""
    return rescrubbed(frame, lambda data: redactor.data(data, found), notes=notes)


@dataclass(frozen=True)
class GrpcLog:
    """A recorded gRPC session: what crossed, in the order it crossed the
    recorder."""

    messages: tuple[GrpcMessage, ...] = ()

    def client_messages(self) -> list[tuple[int, GrpcMessage]]:
        """The client's messages (not its end), with their positions."""
        return [(i, m) for i, m in enumerate(self.messages) if m.sender == "client" and not m.end]

    def redacted(
        self,
        redactor: Redactor,
        found: Callable[[str, list[str]], None] | None = None,
        notes: list[tuple[str, str]] | None = None,
    ) -> GrpcLog:
        """Every message redacted (:func:`scrub_message`); ``found(where,
        kinds)`` hears what was replaced in ``grpc.messages[i]``, ``notes``
        of a compressed message kept as it came (its coding, why)."""
        messages = []
        for i, message in enumerate(self.messages):
            kinds: list[str] = []
            data = scrub_message(message.data, redactor, kinds, notes) if message.data else b""
            if found is not None:
                found(f"grpc.messages[{i}]", kinds)
            messages.append(message if data == message.data else replace(message, data=data))
        return GrpcLog(tuple(messages))


def grpc_out(log: GrpcLog) -> dict[str, Any]:
    """The ``grpc`` field of a session's line."""
    messages: list[dict[str, Any]] = []
    for m in log.messages:
        item: dict[str, Any] = {"from": m.sender, "at": m.at_ms}
        if m.end:
            item["end"] = True
        else:
            item["base64"] = base64.b64encode(m.data).decode("ascii")
        messages.append(item)
    return {"messages": messages}


def grpc_in(value: Any, ms: Callable[[Any, str], float]) -> GrpcLog:
    """A session's ``grpc`` field read back (``ms`` reads an offset);
    ``ValueError`` says what is wrong.  A client message after the client's
    end, or anything after the call's end, is refused: a replay could not
    play it."""
    if not isinstance(value, dict) or not isinstance(value.get("messages"), list):
        raise ValueError('"grpc" must be an object with a list of "messages"')
    messages = []
    last = 0.0
    client_ended = ended = False
    for i, item in enumerate(value["messages"]):
        where = f"grpc.messages[{i}]"
        if not isinstance(item, dict):
            raise ValueError(f'"{where}" must be an object')
        sender = item.get("from")
        if sender not in GRPC_SENDERS:
            raise ValueError(f'"{where}.from" must be "client" or "server", not {sender!r}')
        at = ms(item.get("at"), f"{where}.at")
        if at < last:
            raise ValueError(f'"{where}" goes back in time ({at} < {last} ms)')
        last = at
        if ended:
            raise ValueError(f'"{where}" comes after the call\'s end (the server\'s "end")')
        end = item.get("end", False)
        if end is True:
            if "base64" in item:
                raise ValueError(f'"{where}" is an end and holds no "base64"')
            if sender == "client" and client_ended:
                raise ValueError(f'"{where}": the client ends its stream once')
            client_ended = client_ended or sender == "client"
            ended = sender == "server"
            messages.append(GrpcMessage(sender, at, end=True))
            continue
        if end is not False:
            raise ValueError(f'"{where}.end" must be true when present')
        if sender == "client" and client_ended:
            raise ValueError(f'"{where}": a client message after the client\'s end')
        text = item.get("base64")
        try:
            if not isinstance(text, str):
                raise binascii.Error
            data = base64.b64decode(text, validate=True)
        except binascii.Error:
            raise ValueError(
                f'"{where}" must hold its message as "base64" or be an "end"'
            ) from None
        messages.append(GrpcMessage(sender, at, data))
    return GrpcLog(tuple(messages))
