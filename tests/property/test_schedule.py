"""Property: the replay schedule sends every event when the naive loop
would (sleep until each event's own deadline, then send it), for any
recorded timing replayed in any timing mode, and for any deadlines at all."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from reel_bindings._inprocess import whole_body
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
    Timing,
    replay_schedule,
)

from .strategies import hit_cassette, hit_request, recorded_responses, timings

Timed = Frame | EndOfResponse | Cut


def naive(events: list[Event]) -> list[tuple[float, Timed]]:
    """Sleep until each timed event's own ``at``, then send it: when it
    goes out (the clock never goes back), up to the end or cut."""
    clock = 0.0
    sent: list[tuple[float, Timed]] = []
    for event in events:
        if isinstance(event, (Frame, EndOfResponse, Cut)):
            clock = max(clock, event.at or 0.0)
            sent.append((clock, event))
            if not isinstance(event, Frame):
                break
    return sent


def scheduled(events: list[Event]) -> list[tuple[float, Timed]]:
    """Follow the schedule: when each step's event goes out."""
    clock = 0.0
    sent: list[tuple[float, Timed]] = []
    for step in replay_schedule(events):
        if step.until is not None:
            assert step.until > clock  # a wait is never for a passed deadline
            clock = step.until
        sent.append((clock, step.event))
    return sent


def replayed(response: RecordedResponse, timing: Timing) -> list[Event]:
    """The events after the head of a replay of ``response``."""
    session = Engine(hit_cassette(response), Config(mode=Mode.REPLAY, timing=timing))
    session.receive_request(hit_request())
    events: list[Event] = []
    seen_head = False
    while not isinstance(event := session.next_event(), Signal):
        if seen_head:
            events.append(event)
        seen_head = seen_head or isinstance(event, ResponseHead)
    return events


@given(recorded_responses(), timings())
def test_schedule_of_a_replay_is_the_naive_loop(response: RecordedResponse, timing: Timing) -> None:
    events = replayed(response, timing)
    assert scheduled(events) == naive(events)
    assert [e for _, e in naive(events)] == [
        e for e in events if isinstance(e, (Frame, EndOfResponse, Cut))
    ]


deadline = st.none() | st.floats(0, 1e6, allow_nan=False)
timed: st.SearchStrategy[Event] = st.one_of(
    st.builds(Frame, st.binary(max_size=4), deadline),
    st.builds(EndOfResponse, deadline),
    st.builds(Cut, st.sampled_from(["reset", "timeout", "closed"]), st.just(""), deadline),
)


@given(st.lists(timed, max_size=20))
def test_schedule_of_any_deadlines_is_the_naive_loop(events: list[Event]) -> None:
    """Even deadlines no session makes (going back, missing, after the end)."""
    assert scheduled(events) == naive(events)


def body_of_steps(events: list[Event]) -> bytes | None:
    """The oracle of ``whole_body``: the schedule's steps, answered as one
    body when there are at most two, none waits and none is a cut."""
    steps = list(replay_schedule(events))
    if len(steps) > 2 or any(s.until is not None or isinstance(s.event, Cut) for s in steps):
        return None
    return b"".join(s.data for s in steps)


@given(st.lists(timed | st.just(ResponseHead(200, ())), max_size=6))
# two events, the short way's shape: each late, none late, other kinds
@example([Frame(b"x", 0.0), EndOfResponse(0.0)])
@example([Frame(b"x", None), EndOfResponse(None)])
@example([Frame(b"x", 0.5), EndOfResponse(0.5)])
@example([Frame(b"x", 0.5), EndOfResponse(None)])
@example([Frame(b"x", 0.0), EndOfResponse(0.2)])
@example([Frame(b"x", 0.0), Cut("reset", "", 0.0)])
@example([Frame(b"x", 0.0), Frame(b"y", 0.0)])
@example([EndOfResponse(0.0), Frame(b"x", 0.0)])
def test_whole_body_is_what_the_schedule_sends_at_once(events: list[Event]) -> None:
    # a tuple of two events takes a short way: the same answer
    assert whole_body(events) == whole_body(tuple(events)) == body_of_steps(events)


@given(recorded_responses(), timings())
def test_whole_body_of_a_replay(response: RecordedResponse, timing: Timing) -> None:
    events = replayed(response, timing)
    body = whole_body(events)
    assert body == whole_body(tuple(events)) == body_of_steps(events)
    if response.stream is None:  # a non-stream replay is always one body
        assert body == response.body
