"""Replaying one request through the engine, for the format tests, and a
cassette as a Reel before the digest as sent wrote it (not a test module)."""

from __future__ import annotations

import json

from reel_core import Cassette, Config, Engine, Frame, Mode, Replay, Request, ResponseHead, Signal

__all__ = ["replay_one", "without_sent"]


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


def without_sent(data: bytes) -> bytes:
    """The cassette ``data`` with no line's ``"sent"`` digest, as a Reel
    before the digest wrote it (a request is then keyed in full)."""
    head, *lines = data.splitlines(keepends=True)
    out = [head]
    for line in lines:
        obj = json.loads(line)
        obj.pop("sent", None)
        out.append(json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
    return b"".join(out)
