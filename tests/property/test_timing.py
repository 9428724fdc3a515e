"""Property 4: replay deadlines.

Replay deadlines never go back in time; ``slow=N`` multiplies every
realtime deadline by exactly N; ``fast`` makes every deadline zero.  This
holds for stored streams and for streams recorded from any clock readings.
"""

from __future__ import annotations

import itertools

from hypothesis import example, given
from hypothesis import strategies as st

from reel_core import (
    Cassette,
    Config,
    Cut,
    EndOfResponse,
    Engine,
    Frame,
    Mode,
    RecordedResponse,
    Request,
    Signal,
    Timing,
    UpstreamError,
)
from reel_core.tools import TimingMode

from .strategies import hit_cassette, hit_request, recorded_responses, timings


def deadlines(cassette: Cassette, request: Request, timing: Timing) -> list[float]:
    """The ``at`` of every frame and of the end (or cut) of a replay."""
    session = Engine(cassette, Config(mode=Mode.REPLAY, timing=timing))
    session.receive_request(request)
    out: list[float] = []
    while True:
        event = session.next_event()
        if isinstance(event, Signal):
            return out
        if isinstance(event, (Frame, EndOfResponse, Cut)):
            assert event.at is not None
            out.append(event.at)


def expected_realtime(response: RecordedResponse) -> list[float]:
    if response.stream is None:
        return [0.0] * (2 if response.body else 1)
    ends = response.cut.at_ms if response.cut is not None else response.end_ms
    return [at / 1000.0 for at, _ in response.frames] + [ends / 1000.0]


def monotone(values: list[float]) -> bool:
    return all(a <= b for a, b in itertools.pairwise(values))


@given(recorded_responses(), timings())
@example(RecordedResponse(100, (("content-type", "\u0100"),), stream="sse"), Timing())
def test_replay_deadlines(response: RecordedResponse, timing: Timing) -> None:
    realtime = deadlines(hit_cassette(response), hit_request(), Timing())
    assert realtime == expected_realtime(response)
    assert monotone(realtime)
    scheduled = deadlines(hit_cassette(response), hit_request(), timing)
    assert len(scheduled) == len(realtime)
    assert monotone(scheduled)
    if timing.mode is TimingMode.FAST:
        assert scheduled == [0.0] * len(realtime)
    elif timing.mode is TimingMode.SLOW:
        assert scheduled == [at * timing.factor for at in realtime]
    else:
        assert scheduled == realtime


@given(st.integers(1, 1000).map(float) | st.floats(1e-3, 1e3), recorded_responses())
def test_slow_parses_and_scales_exactly(factor: float, response: RecordedResponse) -> None:
    timing = Timing.parse(f"slow={factor!r}")
    assert timing == Timing(TimingMode.SLOW, factor)
    realtime = deadlines(hit_cassette(response), hit_request(), Timing())
    slow = deadlines(hit_cassette(response), hit_request(), timing)
    assert slow == [at * factor for at in realtime]


clock_readings = st.lists(st.floats(0, 1e4, allow_nan=False), min_size=1, max_size=12)


@given(
    clock_readings,
    st.lists(st.binary(min_size=1, max_size=20), max_size=11),
    st.booleans(),
    timings(),
)
def test_recorded_stream_replays_monotone(
    nows: list[float], chunks: list[bytes], cut: bool, timing: Timing
) -> None:
    """Record a chunked stream with any clock readings (even ones going
    back), then replay it: deadlines never go back."""
    cassette = Cassette()
    request = Request("POST", "/v1/chat/completions", (), b'{"model":"m","stream":true}')
    session = Engine(cassette, Config(mode=Mode.RECORD))
    session.receive_request(request)
    session.next_event()
    readings = itertools.cycle(nows)
    session.upstream_head(200, [(b"content-type", b"application/x-ndjson")], mono=next(readings))
    for chunk in chunks:
        session.upstream_data(chunk, mono=next(readings))
    if cut:
        session.upstream_error(UpstreamError.RESET, "gone", mono=next(readings))
    else:
        session.upstream_end(mono=next(readings))
    while not isinstance(session.next_event(), Signal):
        pass
    recorded = session.record()
    assert recorded is not None
    line = recorded.line
    replayed = Cassette.loads(line)
    (interaction,) = replayed
    offsets = [at for at, _ in interaction.response.frames]
    assert monotone(offsets)
    realtime = deadlines(Cassette.loads(line), request, Timing())
    assert monotone(realtime)
    assert realtime == expected_realtime(interaction.response)
    scheduled = deadlines(Cassette.loads(line), request, timing)
    assert monotone(scheduled)
    if timing.mode is TimingMode.SLOW:
        assert scheduled == [at * timing.factor for at in realtime]
    elif timing.mode is TimingMode.FAST:
        assert set(scheduled) == {0.0}
