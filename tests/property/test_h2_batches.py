"""Property: a replay sent over HTTP/2 in batches (``replay_batches`` and
``H2Session.send_frames``, the proxy's way) gives the client what one sent
event by event gives: the same body bytes, the same end or reset, each
frame's bytes sent at its own step of the schedule; DATA frames no larger
than the client's frame size, and no more queued than the window let out.
Over generated streams (frames of 0 to 64 KB, any count and offsets, ends
and cuts), every timing mode, any batch limit, any window and frame size."""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import example, given
from hypothesis import strategies as st

from reel_core import (
    Config,
    Cut,
    EndOfResponse,
    Engine,
    Event,
    Frame,
    Mode,
    RecordedResponse,
    ResponseHead,
    Signal,
    StreamCut,
    Timing,
    replay_batches,
    replay_schedule,
)
from reel_core.tools import H2Event, H2Session

from ..core.test_h2_session import Client
from .strategies import HIT_BODY, HIT_PATH, hit_cassette, timings
from .test_batches import streamed_responses

#: What the client got, and when (the step's clock) each frame went out.
Got = tuple[bytes, bool, int | None, list[tuple[float, bytes]]]


def _started(
    response: RecordedResponse, timing: Timing, window: int, frame_size: int
) -> tuple[H2Session, Client, int, Iterator[Event]]:
    cassette = hit_cassette(response)
    session = H2Session(lambda: Engine(cassette, Config(mode=Mode.REPLAY, timing=timing)))
    client = Client(window=window, frame_size=frame_size)
    sid = client.request(HIT_BODY, HIT_PATH.encode())
    _move(session, client)
    events: list[Event] = []
    while not isinstance(item := session.next_event(), Signal):
        assert isinstance(item, H2Event)
        if isinstance(item.event, Event):
            events.append(item.event)
    head = events[1]
    assert isinstance(head, ResponseHead)
    session.send(sid, head)
    return session, client, sid, iter(events[2:])


def _move(session: H2Session, client: Client) -> None:
    """Bytes both ways until neither side has any (the client acknowledges
    what it reads, so the window opens as it reads)."""
    while True:
        data = client.wire()
        if data:
            session.receive_data(data)
        out = session.data_to_send()
        if out:
            client.receive(out)
        if not data and not out:
            return


def _ended(client: Client, sid: int, sent: list[tuple[float, bytes]]) -> Got:
    answer = client.answers[sid]
    return answer.data, answer.ended, answer.reset, sent


def event_by_event(
    response: RecordedResponse, timing: Timing, window: int, frame_size: int
) -> tuple[Got, Client]:
    session, client, sid, events = _started(response, timing, window, frame_size)
    sent: list[tuple[float, bytes]] = []
    clock = 0.0
    for step in replay_schedule(events):
        clock = step.until if step.until is not None else clock
        session.send(sid, step.event)
        if isinstance(step.event, Frame):
            sent.append((clock, step.event.data))
        _move(session, client)
    return _ended(client, sid, sent), client


def batched(
    response: RecordedResponse, timing: Timing, window: int, frame_size: int, limit: int
) -> tuple[Got, Client]:
    session, client, sid, events = _started(response, timing, window, frame_size)
    sent: list[tuple[float, bytes]] = []
    clock = 0.0
    for batch in replay_batches(events, limit):
        clock = batch.until if batch.until is not None else clock
        session.send_frames(sid, batch.frames)
        sent += [(clock, frame.data) for frame in batch.frames]
        if batch.last is not None:
            session.send(sid, batch.last)
        _move(session, client)
    return _ended(client, sid, sent), client


@given(
    streamed_responses(),
    timings(),
    st.sampled_from([65_535, 1_000, 100_000]),
    st.sampled_from([16_384, 20_000]),
    st.integers(1, 128 * 1024),
)
@example(  # a cut mid-stream, due at once: the body so far, then a reset
    RecordedResponse(
        200,
        (),
        stream="sse",
        frames=((0.0, b"data: 1\n\n"), (0.0, b"data: 2\n\n")),
        cut=StreamCut(0.0, "reset", ""),
    ),
    Timing.parse("fast"),
    65_535,
    16_384,
    64 * 1024,
)
def test_the_http2_client_receives_the_same(
    response: RecordedResponse, timing: Timing, window: int, frame_size: int, limit: int
) -> None:
    (body, ended, reset, sent), _ = event_by_event(response, timing, window, frame_size)
    (got_body, got_ended, got_reset, got_sent), client = batched(
        response, timing, window, frame_size, limit
    )
    assert got_body == body == b"".join(data for _, data in response.frames)
    assert got_ended == ended == (response.cut is None)
    assert (got_reset is None) == (reset is None) == (response.cut is None)
    assert got_sent == sent  # each frame's bytes at its own step
    assert all(len(piece) <= frame_size for piece in client.answers[1].frames)
    assert client.answers[1].frames or not body


def test_a_batch_waits_for_the_window_and_buffered_counts_it() -> None:
    """A batch larger than the client's window: what the window lets out
    goes, the rest waits, counted by ``buffered``; the end waits behind it."""
    frames = tuple((0.0, b"data: %d %s\n\n" % (i, b"x" * 90)) for i in range(2000))
    response = RecordedResponse(200, (), stream="sse", frames=frames, end_ms=0.0)
    session, client, sid, events = _started(response, Timing.parse("fast"), 1_000, 16_384)
    client.auto_window = False
    body = b"".join(data for _, data in frames)
    for batch in replay_batches(events, 64 * 1024):
        session.send_frames(sid, batch.frames)
        if isinstance(batch.last, (EndOfResponse, Cut)):
            session.send(sid, batch.last)
    _move(session, client)
    answer = client.answers[sid]
    assert answer.data == body[:1_000]
    assert session.buffered(sid) == len(body) - 1_000
    assert not answer.ended
    while not client.answers[sid].ended:
        client.conn.increment_flow_control_window(50_000, stream_id=sid)
        client.conn.increment_flow_control_window(50_000)
        _move(session, client)
        assert session.buffered(sid) == len(body) - len(answer.data)
    assert answer.data == body
    assert session.buffered(sid) == 0


def test_a_cut_waits_behind_the_body_before_it() -> None:
    """A cut due with frames the window holds back: the frames reach the
    client as the window opens, then the reset (before, the reset went at
    once and the frames waiting were lost)."""
    frames = tuple((0.0, b"data: %d %s\n\n" % (i, b"x" * 90)) for i in range(100))
    cut = StreamCut(0.0, "reset", "the upstream reset the stream")
    response = RecordedResponse(200, (), stream="sse", frames=frames, cut=cut)
    session, client, sid, events = _started(response, Timing.parse("fast"), 1_000, 16_384)
    client.auto_window = False
    for batch in replay_batches(events, 64 * 1024):
        session.send_frames(sid, batch.frames)
        assert isinstance(batch.last, Cut)
        session.send(sid, batch.last)
    _move(session, client)
    assert client.answers[sid].reset is None
    while client.answers[sid].reset is None:
        client.conn.increment_flow_control_window(5_000, stream_id=sid)
        client.conn.increment_flow_control_window(5_000)
        _move(session, client)
    assert client.answers[sid].data == b"".join(data for _, data in frames)
    assert not client.answers[sid].ended


def test_frames_sent_on_a_reset_stream_are_dropped() -> None:
    frames = ((0.0, b"data: 1\n\n"),)
    response = RecordedResponse(200, (), stream="sse", frames=frames, end_ms=0.0)
    session, client, sid, _ = _started(response, Timing.parse("fast"), 65_535, 16_384)
    client.conn.reset_stream(sid)
    _move(session, client)
    session.send_frames(sid, [Frame(b"data: 1\n\n")])
    assert session.buffered(sid) == 0
    assert session.data_to_send() == b""
