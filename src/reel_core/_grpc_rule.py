"""Which gRPC calls are sessions: the one rule, on both sides.

Nothing tells a proxy whether a method is unary, server-streaming,
client-streaming or bidirectional (no descriptor is needed), so what
crossed decides.  Record side, :func:`is_grpc_session`: a call is a session
when its client sent more than one message, or had not ended its stream
when the server answered (a message, or the call's end); else it is an
ordinary exchange, whole at the client's end.  Replay side, the cassette
says what the record side decided: a call plays as a session when a
recording of its path is one (:func:`plays_as_session`); a recording that
is no session then plays as the session it was (:func:`as_session`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ._errors import RemoteProtocolError
from ._grpc import GrpcSplitter
from ._grpc_log import GrpcLog, GrpcMessage
from ._interaction import Interaction

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._cassette import Cassette

__all__ = ["as_session", "is_grpc_session", "plays_as_session"]


def is_grpc_session(messages: Sequence[GrpcMessage]) -> bool:
    """Whether a call that went so is a session: the one rule.  Its client
    sent more than one message, or the server answered (a message, or the
    call's end) before the client ended its stream.  Else (at most one
    message, then the client's end, then the answer) it is an ordinary
    unary or server-streaming exchange."""
    for i, message in enumerate(messages):  # every entry before ``i`` is a client message
        if message.sender == "server":
            return True  # the server answered with the client's stream open
        if message.end:
            return False  # the client ended after at most one message
        if i:
            return True  # its second message
    return False  # nothing from the server, the client's stream open: at most one message


def plays_as_session(cassette: Cassette, method: str, path: str, *, forwards: bool = False) -> bool:
    """Whether a call to ``method`` ``path`` plays from ``cassette`` as a
    session: when a recording of that path is one (the call is then decided
    on its first message, the rest gated).  ``forwards``: a miss is
    forwarded (auto mode), so a path with no recording at all streams too,
    as in record mode (held whole, a bidirectional call whose client waits
    for an answer before it ends its stream would never be forwarded).
    Worked out once for each path and size of the cassette."""
    cache = cassette.cache("grpc-sessions")
    known = cache.get((method, path))
    if known is None or known[0] != len(cassette):
        recorded = sessions = False
        for interaction in cassette.same_endpoint(method, path):
            recorded = True
            if interaction.grpc is not None:
                sessions = True
                break
        known = cache[(method, path)] = (len(cassette), recorded, sessions)
    _, recorded, sessions = known
    return bool(sessions or (forwards and not recorded))


def as_session(recording: Interaction) -> Interaction:
    """An ordinary recording of a gRPC call as the session it was: its
    request's messages, the client's end, then its response's messages on
    their offsets and its end, all gated behind the client's end.  A call
    played as a session whose recording is no session plays so: a client
    that sends one message more than it gets NOT_FOUND."""
    entries = [GrpcMessage("client", 0.0, m) for m in _framed(recording.request.body)]
    entries.append(GrpcMessage("client", 0.0, end=True))
    response = recording.response
    if response.stream is None:
        entries += [GrpcMessage("server", 0.0, m) for m in _framed(response.body)]
    else:
        entries += [GrpcMessage("server", at, data) for at, data in response.frames]
    end = response.end_ms if response.cut is None else response.cut.at_ms
    entries.append(GrpcMessage("server", max([end, *(m.at_ms for m in entries)]), end=True))
    return replace(recording, grpc=GrpcLog(tuple(entries)))


def _framed(body: bytes) -> list[bytes]:
    """The whole messages of a gRPC body, prefix included (a body that is
    no run of whole messages: itself, one message)."""
    splitter = GrpcSplitter()
    try:
        messages = splitter.feed(body)
    except RemoteProtocolError:
        return [body] if body else []
    return [body] if splitter.close() else messages
