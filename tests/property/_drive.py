"""Drive a wire session the way a binding does (not a test module)."""

from __future__ import annotations

from collections.abc import Iterable

from reel_core import (
    Cut,
    EndOfResponse,
    Event,
    Forward,
    Frame,
    Miss,
    Replay,
    ResponseHead,
    Session,
    Signal,
    State,
)

__all__ = ["Decision", "feed", "pump", "upstream_reply"]

Decision = Replay | Forward | Miss

UPSTREAM_BODY = b'{"id":"chatcmpl-1","choices":[]}'


def upstream_reply(session: Session) -> None:
    """Answer a forward with a small JSON response, as an upstream would."""
    request = session.engine._request
    head_only = request is not None and request.method == "HEAD"
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(UPSTREAM_BODY)).encode()),
    ]
    session.engine.upstream_head(200, headers, mono=1.0, sent_at=0.5, wall=1_700_000_000.0)
    if not head_only:
        session.engine.upstream_data(UPSTREAM_BODY, mono=1.01)
    session.engine.upstream_end(mono=1.02)


def pump(session: Session, decisions: list[Decision]) -> Signal:
    """Pull every event the session has, sending the response events to the
    client, answering forwards and starting the next cycle when the
    connection allows; return the signal the session stopped on."""
    while True:
        event: Event | Signal = session.next_event()
        if isinstance(event, Signal):
            if event is Signal.PAUSED:
                if session.engine.state is State.AWAIT_UPSTREAM:
                    upstream_reply(session)
                    continue
                if session.engine.state is State.DONE:
                    session.engine.record()  # the line is not looked at here
                    if session.keep_alive:
                        session.start_next_cycle()
                        continue
            return event
        if isinstance(event, (Replay, Forward, Miss)):
            decisions.append(event)
        elif isinstance(event, (ResponseHead, Frame, EndOfResponse, Cut)):
            session.send(event)


def feed(session: Session, chunks: Iterable[bytes], *, eof: bool = False) -> list[Decision]:
    """Feed ``chunks`` one by one (pumping after each); the decisions made."""
    decisions: list[Decision] = []
    for chunk in chunks:
        session.receive_data(chunk)
        pump(session, decisions)
    if eof:
        session.receive_data(b"")
        pump(session, decisions)
    return decisions
