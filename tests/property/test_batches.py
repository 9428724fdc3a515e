"""Property: a replay written in batches (``replay_batches`` and
``Session.send_frames``, the proxy's way) sends the client what a replay
written event by event sends: the same body bytes, the same end or cut,
each byte no earlier and no later than its own frame's step.  Over
generated streams: frames of 0 to 64 KB, any count and offsets, every
timing mode, any batch limit; and a client that reads in any pieces (h11
is fed the wire in arbitrary cuts, as a slow reader's ``recv`` gets it)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import h11
from hypothesis import example, given
from hypothesis import strategies as st

from reel_core import (
    Batch,
    Config,
    Cut,
    EndOfResponse,
    Event,
    Frame,
    Mode,
    RecordedResponse,
    Replay,
    ResponseHead,
    Session,
    Signal,
    Step,
    StreamCut,
    Timing,
    replay_batches,
    replay_schedule,
)

from .strategies import HIT_BODY, HIT_PATH, hit_cassette, timings

Timed = Frame | EndOfResponse | Cut

deadline = st.none() | st.floats(0, 1e6, allow_nan=False)
timed: st.SearchStrategy[Event] = st.one_of(
    st.builds(Frame, st.binary(max_size=8), deadline),
    st.builds(Frame, st.just(b""), deadline),
    st.builds(EndOfResponse, deadline),
    st.builds(Cut, st.sampled_from(["reset", "timeout", "closed"]), st.just(""), deadline),
)
limits = st.integers(1, 32)


def steps_of(batches: list[Batch]) -> list[Step]:
    """A batch's steps: its first event waits as the batch does, the rest
    go out at once after it."""
    steps: list[Step] = []
    for batch in batches:
        events: list[Frame | EndOfResponse | Cut] = [*batch.frames]
        if batch.last is not None:
            events.append(batch.last)
        assert events, "a batch sends something"
        steps += [Step(batch.until if i == 0 else None, e) for i, e in enumerate(events)]
    return steps


@given(st.lists(timed | st.just(ResponseHead(200, ())), max_size=24), limits)
@example([Frame(b"ab", 0.0), Frame(b"c", 0.0), Frame(b"d", 0.0), EndOfResponse(0.0)], 2)
@example([Frame(b"a", 1.0), EndOfResponse(2.0)], 8)
@example([EndOfResponse(1.0)], 8)
@example([Frame(b"a", None), Frame(b"b", 0.5), Frame(b"c", None)], 1)
def test_batches_are_the_schedule_grouped(events: list[Event], limit: int) -> None:
    """The same steps as ``replay_schedule``, none lost or added, every
    wait where it was: ``replay_batches`` decides inline, this is its oracle."""
    batches = list(replay_batches(events, limit))
    assert steps_of(batches) == list(replay_schedule(events))
    for i, batch in enumerate(batches):
        # bounded: only the last frame of a batch may cross the limit
        assert sum(len(f.data) for f in batch.frames[:-1]) < limit
        assert batch.size == sum(len(f.data) for f in batch.frames)
        if i + 1 < len(batches):  # cut only where it must be
            assert batch.last is None
            assert batches[i + 1].until is not None or batch.size >= limit


def test_batches_pull_no_event_past_the_end() -> None:
    pulled: list[Event] = []

    def source() -> Iterator[Event]:
        events: list[Event] = [Frame(b"a", 0.0), EndOfResponse(0.0), Frame(b"late", 0.0)]
        for event in events:
            pulled.append(event)
            yield event

    assert list(replay_batches(source(), 64)) == [
        Batch(None, (Frame(b"a", 0.0),), EndOfResponse(0.0))
    ]
    assert pulled == [Frame(b"a", 0.0), EndOfResponse(0.0)]


def test_a_pull_that_stops_before_the_end_sends_what_came() -> None:
    assert list(replay_batches([Frame(b"a", 0.0), Frame(b"b", 0.0)], 64)) == [
        Batch(None, (Frame(b"a", 0.0), Frame(b"b", 0.0)))
    ]
    assert list(replay_batches([], 64)) == []


# -- through a session, to an h11 client ---------------------------------------------

_sizes = st.one_of(st.integers(0, 200), st.integers(0, 64 * 1024))


@st.composite
def big_frames(draw: st.DrawFn) -> tuple[tuple[float, bytes], ...]:
    """Frames of 0 to 64 KB (SSE-like text or any bytes), offsets often
    shared (due at once) and sometimes later."""
    at = 0.0
    frames = []
    for i in range(draw(st.integers(0, 12))):
        if draw(st.booleans()):
            at += draw(st.sampled_from([0.001, 0.25, 3.0]))
        size = draw(_sizes)
        data = (b"data: %d " % i + b"x" * size + b"\n\n")[:size]
        if draw(st.booleans()):
            data = draw(st.binary(min_size=min(size, 16), max_size=16)) + data[16:]
        frames.append((at, data))
    return tuple(frames)


@st.composite
def streamed_responses(draw: st.DrawFn) -> RecordedResponse:
    frames = draw(big_frames())
    last = frames[-1][0] if frames else 0.0
    headers = (("content-type", "text/event-stream"),)
    if draw(st.booleans()):
        cut = StreamCut(last + draw(st.sampled_from([0.0, 0.5])), "reset", "")
        return RecordedResponse(200, headers, stream="sse", frames=frames, cut=cut)
    end = last + draw(st.sampled_from([0.0, 0.5]))
    return RecordedResponse(200, headers, stream="sse", frames=frames, end_ms=end)


def _request() -> bytes:
    client = h11.Connection(h11.CLIENT)
    head = h11.Request(
        method="POST",
        target=HIT_PATH,
        headers=[("host", "api.openai.com"), ("content-length", str(len(HIT_BODY)))],
    )
    pieces = [head, h11.Data(data=HIT_BODY), h11.EndOfMessage()]
    return b"".join([client.send(event) or b"" for event in pieces])


#: What the client gets: the bytes of each write; when each frame's body
#: bytes go out (the clock a naive replay follows); whether the response
#: ended (``True``) or was cut (``False``).
Wire = tuple[bytes, list[tuple[float, bytes]], bool]


def _started(response: RecordedResponse, timing: Timing) -> tuple[Session, bytes, Iterator[Event]]:
    session = Session(hit_cassette(response), Config(mode=Mode.REPLAY, timing=timing))
    session.receive_data(_request())

    def pulled() -> Iterator[Event]:
        while not isinstance(event := session.next_event(), Signal):
            yield event

    events = pulled()
    decision = next(events)
    assert isinstance(decision, Replay)
    head = next(events)
    assert isinstance(head, ResponseHead)
    return session, session.send(head), events


def event_by_event(response: RecordedResponse, timing: Timing) -> Wire:
    """The replay as it was written before batches: a step at a time."""
    session, wire, events = _started(response, timing)
    sent: list[tuple[float, bytes]] = []
    clock, ended = 0.0, False
    for step in replay_schedule(events):
        clock = step.until if step.until is not None else clock
        wire += session.send(step.event)
        if isinstance(step.event, Frame):
            sent.append((clock, step.event.data))
        ended = isinstance(step.event, EndOfResponse)
    return wire, sent, ended


def batched(response: RecordedResponse, timing: Timing, limit: int) -> Wire:
    """The replay as the proxy writes it: a batch at a time."""
    session, wire, events = _started(response, timing)
    sent: list[tuple[float, bytes]] = []
    clock, ended = 0.0, False
    for batch in replay_batches(events, limit):
        clock = batch.until if batch.until is not None else clock
        wire += session.send_frames(batch.frames)
        sent += [(clock, frame.data) for frame in batch.frames]
        if batch.last is not None:
            wire += session.send(batch.last)
            ended = isinstance(batch.last, EndOfResponse)
    return wire, sent, ended


def received(wire: bytes, cuts: list[int]) -> tuple[bytes, bool]:
    """What an h11 client reading ``wire`` in the pieces ``cuts`` makes
    of it (a slow reader's ``recv``): the body, de-chunked, and whether the
    response ended."""
    client = h11.Connection(h11.CLIENT)
    client.send(h11.Request(method="POST", target=HIT_PATH, headers=[("host", "x")]))
    body: list[bytes] = []
    ended = False
    points = sorted({0, len(wire), *(c % (len(wire) + 1) for c in cuts)})
    for a, b in itertools.pairwise(points):
        client.receive_data(wire[a:b])
        while (event := client.next_event()) is not h11.NEED_DATA:
            if isinstance(event, h11.Data):
                body.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                ended = True
            else:
                assert isinstance(event, h11.Response)
    return b"".join(body), ended


@given(
    streamed_responses(),
    timings(),
    st.integers(1, 128 * 1024),
    st.lists(st.integers(0, 1 << 20), max_size=8),
)
@example(
    RecordedResponse(200, (), stream="sse", frames=((0.0, b"a" * 70_000), (0.0, b"b")), end_ms=0.0),
    Timing(),
    64 * 1024,
    [],
)
@example(  # a cut mid-stream, due at once: the body so far, then no end
    RecordedResponse(
        200,
        (),
        stream="sse",
        frames=((0.0, b"data: 1\n\n"), (0.0, b"data: 2\n\n")),
        cut=StreamCut(0.0, "reset", ""),
    ),
    Timing.parse("fast"),
    64 * 1024,
    [3, 40],
)
def test_the_client_receives_the_same(
    response: RecordedResponse, timing: Timing, limit: int, cuts: list[int]
) -> None:
    old_wire, old_sent, old_ended = event_by_event(response, timing)
    wire, sent, ended = batched(response, timing, limit)
    body, got_end = received(wire, cuts)
    assert (body, got_end) == received(old_wire, cuts)
    assert body == b"".join(data for _, data in response.frames)
    assert got_end == ended == old_ended == (response.cut is None)
    # each frame's bytes go out when the event-by-event replay sent them
    assert sent == old_sent


@given(timings(), st.floats(0, 1e9, allow_nan=False))
def test_scale_is_what_schedule_multiplies_by(timing: Timing, offset: float) -> None:
    assert offset * timing.scale == timing.schedule(offset)


# -- pulling a replay's events ---------------------------------------------------------


@given(streamed_responses(), timings(), st.booleans())
def test_pull_hands_out_what_next_event_does(
    response: RecordedResponse, timing: Timing, stop_early: bool
) -> None:
    """``Engine.pull`` (the proxy's way: a replay's frames without a call
    each) gives the events ``next_event`` gives, in order, and leaves the
    engine where pulling them one by one leaves it; a pull dropped midway
    (a client that left) leaves the rest to ``next_event``."""

    def session() -> Session:
        made = Session(hit_cassette(response), Config(mode=Mode.REPLAY, timing=timing))
        made.receive_data(_request())
        return made

    one_by_one, pulled = session(), session()
    expected: list[Event] = []
    while not isinstance(event := one_by_one.next_event(), Signal):
        expected.append(event)
    assert pulled.next_event() == expected[0]  # the decision: the session's own pull
    events = pulled.engine.pull()
    got = [expected[0]]
    if stop_early:
        got += itertools.islice(events, 2)
        while not isinstance(event := pulled.engine.next_event(), Signal):
            got.append(event)
    else:
        got += events
    assert got == expected
    assert pulled.engine.state is one_by_one.engine.state
    assert pulled.next_event() == one_by_one.next_event() == Signal.PAUSED
