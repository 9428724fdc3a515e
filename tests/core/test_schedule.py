"""The replay schedule: when a binding waits, and what it sends."""

from __future__ import annotations

from collections.abc import Iterator

from reel_core import (
    Cut,
    EndOfResponse,
    Event,
    Frame,
    ResponseHead,
    Step,
    replay_schedule,
)


def test_each_later_deadline_is_waited_for_once() -> None:
    events: list[Event] = [
        Frame(b"a", at=0.0),
        Frame(b"b", at=0.5),
        Frame(b"c", at=0.5),
        Frame(b"d", at=1.25),
        EndOfResponse(at=1.25),
    ]
    assert list(replay_schedule(events)) == [
        Step(None, Frame(b"a", at=0.0)),
        Step(0.5, Frame(b"b", at=0.5)),
        Step(None, Frame(b"c", at=0.5)),
        Step(1.25, Frame(b"d", at=1.25)),
        Step(None, EndOfResponse(at=1.25)),
    ]


def test_a_deadline_that_goes_back_or_is_missing_waits_for_nothing() -> None:
    events: list[Event] = [Frame(b"a", at=2.0), Frame(b"b", at=1.0), Frame(b"c"), EndOfResponse()]
    assert [s.until for s in replay_schedule(events)] == [2.0, None, None, None]


def test_the_schedule_ends_at_the_end_or_the_cut() -> None:
    cut = Cut("reset", "gone", at=0.25)
    events: list[Event] = [Frame(b"a", at=0.0), cut, Frame(b"late", at=9.0), EndOfResponse()]
    steps = list(replay_schedule(events))
    assert steps == [Step(None, Frame(b"a", at=0.0)), Step(0.25, cut)]
    assert [s.data for s in steps] == [b"a", b""]
    assert [s.last for s in steps] == [False, True]
    ended = list(replay_schedule([EndOfResponse(at=0.0), Frame(b"x")]))
    assert ended == [Step(None, EndOfResponse(at=0.0))]
    assert ended[0].last


def test_untimed_events_are_no_step() -> None:
    events: list[Event] = [ResponseHead(200, ()), Frame(b"a", at=0.1), EndOfResponse()]
    assert [s.event for s in replay_schedule(events)] == [Frame(b"a", at=0.1), EndOfResponse()]


def test_the_schedule_pulls_nothing_past_the_end() -> None:
    pulled: list[Event] = []

    def source() -> Iterator[Event]:
        for event in (Frame(b"a", at=0.0), EndOfResponse(at=0.0), Frame(b"never")):
            pulled.append(event)
            yield event

    assert len(list(replay_schedule(source()))) == 2
    assert pulled == [Frame(b"a", at=0.0), EndOfResponse(at=0.0)]


def test_events_that_stop_before_an_end_stop_the_schedule() -> None:
    # a recording is always ended, but the schedule needs no end to stop
    assert list(replay_schedule([Frame(b"a", at=0.0)])) == [Step(None, Frame(b"a", at=0.0))]
    assert list(replay_schedule([])) == []
