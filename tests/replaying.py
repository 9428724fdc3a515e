"""Replaying one request through the engine, for the format tests (not a test module)."""

from __future__ import annotations

from reel_core import Cassette, Config, Engine, Frame, Mode, Replay, Request, ResponseHead, Signal

__all__ = ["replay_one"]


def replay_one(cassette: Cassette, request: Request) -> tuple[int, bytes]:
    """The status and body the engine replays for ``request`` (a miss fails)."""
    engine = Engine(cassette, Config(mode=Mode.REPLAY))
    engine.receive_request(request)
    events = []
    while not isinstance(event := engine.next_event(), Signal):
        events.append(event)
    assert isinstance(events[0], Replay), f"a miss: {events[0]}"
    head = events[1]
    assert isinstance(head, ResponseHead)
    return head.status, b"".join(e.data for e in events if isinstance(e, Frame))
