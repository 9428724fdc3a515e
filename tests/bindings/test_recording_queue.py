"""The proxy's recording queue against a model, over random interleavings.

Connections drive one :class:`RecordingQueue` as the proxy does: a forward
builds a step of the recordings waiting now and then while it waits on its
upstream (``step_toward``), is answered, queues its own recording, and
builds what is left of those it took on (``build_through``); a connection
settles when its client is quiet or leaves.  Hypothesis draws the
program (how many connections, what each does, how long each recording
takes to build, which builds fail) and the schedule (how many times each
task yields between two moves); asyncio runs it, deterministically.

The model is the rule in ``proxy/_recordings.py``: every recording added
is appended exactly once (a failing build: dropped, counted), in the
order added; once ``settle()`` returns, nothing waits; once a forward
ends, the recordings it took on are no longer waiting.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reel_bindings.proxy._recordings import RecordingQueue
from reel_core import Cassette, Recorded, Redactor

CASSETTE = Cassette("c")
REDACTOR = Redactor()


class Built(Exception):
    """A build that fails (a bug in the core): the exchange is lost, said."""


@dataclass(eq=False)
class Recording:
    """A recording that takes ``steps`` steps to build (or fails at its last)."""

    number: int
    steps: int
    fails: bool = False
    #: Never handed to the queue (its place given up).
    empty: bool = False
    taken: int = 0
    cassette: Cassette = CASSETTE

    def step(self) -> Recorded | None:
        self.taken += 1
        if self.taken < self.steps:
            return None
        if self.fails:
            raise Built(f"recording {self.number}")
        return Recorded(b"%d\n" % self.number, str(self.number), "k", None, None)


@dataclass
class Forward:
    """A forward: its upstream answers after ``upstream`` yields; the
    answer goes out over ``answer`` yields; its recording takes ``steps``.
    ``grace``: the client leaves once the answer started, and its recording
    is known ``grace`` yields later (``None``: the client stays; an
    ``empty`` recording: nothing to record, such as live mode)."""

    upstream: int
    answer: int
    steps: int
    fails: bool
    grace: int | None = None
    empty: bool = False


@dataclass
class Settle:
    """The client was quiet for a moment (or left): ``settle()``."""

    pauses: int


@dataclass
class World:
    queue: RecordingQueue
    appended: list[int] = field(default_factory=list)
    added: list[Recording] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


async def pause(n: int) -> None:
    for _ in range(n):
        await anyio.lowlevel.checkpoint()


async def forward(world: World, move: Forward) -> None:
    queue = world.queue
    last = queue.last
    try:
        # the upstream works: the recordings waiting are built meanwhile, a
        # step at a time, until its answer comes (``step_toward``)
        for _ in range(move.upstream):
            if last is not None:
                queue.step_toward(last)
            await anyio.lowlevel.checkpoint()
        empty = move.empty and move.grace is not None  # (else the forward records)
        recording = Recording(len(world.added), move.steps, move.fails, empty)
        if move.grace is not None:  # the client leaves: its place is held
            world.added.append(recording)
            place = queue.reserve(REDACTOR, f"/v1/{recording.number}")
            await pause(move.grace)  # the recording reads on
            queue.fill(place, None if empty else recording)
            queue.fill(place, recording)  # a second fill does nothing
            queue.settle()  # what waited behind the place (the proxy's _left)
            return
        await pause(move.answer)  # the answer goes out
        world.added.append(recording)
        queue.add(recording, REDACTOR, f"/v1/{recording.number}")
    finally:
        if last is not None:  # the forward's end: what is left of them
            await queue.build_through(last)
            if queue.holds(last) and not queue.blocked:
                world.problems.append("a forward ended with its recordings waiting")


async def connection(world: World, moves: list[Forward | Settle]) -> None:
    for move in moves:
        if isinstance(move, Forward):
            await forward(world, move)
        else:
            await pause(move.pauses)
            world.queue.settle()
            if world.queue and not world.queue.blocked:
                world.problems.append("settle() returned with recordings waiting")
    world.queue.settle()  # the connection ends


moves = st.one_of(
    st.builds(
        Forward,
        upstream=st.integers(0, 6),
        answer=st.integers(0, 3),
        steps=st.integers(1, 7),
        fails=st.sampled_from([False] * 7 + [True]),  # a build that fails now and then
        grace=st.one_of(st.none(), st.none(), st.integers(0, 8)),
        empty=st.sampled_from([False] * 3 + [True]),
    ),
    st.builds(Settle, pauses=st.integers(0, 3)),
)
programs = st.lists(st.lists(moves, min_size=1, max_size=8), min_size=1, max_size=6)


def run(program: list[list[Forward | Settle]]) -> World:
    appended: list[int] = []

    def append(cassette: Cassette, recorded: Recorded) -> None:
        assert cassette is CASSETTE
        appended.append(int(recorded.interaction_id))

    world = World(RecordingQueue(append), appended)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for moves in program:
                tg.start_soon(connection, world, moves)

    with pytest.MonkeyPatch.context() as patch:  # the failing builds are logged: keep it quiet
        patch.setattr("reel_bindings.proxy._recordings.log.exception", lambda *a, **k: None)
        anyio.run(main, backend="asyncio")
    return world


@settings(max_examples=300, deadline=None)
@given(programs)
def test_every_recording_is_appended_once_in_order(program: list[list[Forward | Settle]]) -> None:
    world = run(program)
    assert world.problems == []
    kept = [r.number for r in world.added if not r.fails and not r.empty]
    assert world.appended == kept  # each once, in the order added or its place held
    assert world.queue.failures == sum(r.fails and not r.empty for r in world.added)
    assert not world.queue


def interleavings() -> Iterator[list[list[Forward | Settle]]]:
    """The interleavings that lost recordings (issue 31): one connection's
    forward waits for its answer while its builder waits too; another
    connection settles the queue right before that builder wakes (the old
    builder then built from an empty queue: IndexError, and the forward's
    exchange was lost with it)."""
    for pauses in range(8):
        yield [[Forward(0, 0, 7, False), Forward(0, 3, 1, False)], [Settle(pauses)]]


@pytest.mark.parametrize("program", list(interleavings()))
def test_a_queue_settled_under_a_waiting_builder_loses_nothing(
    program: list[list[Forward | Settle]],
) -> None:
    world = run(program)
    assert world.problems == []
    assert world.appended == [r.number for r in world.added]


def test_a_recording_waits_behind_a_place_held_and_follows_it() -> None:
    """A client left a stream (its place held while the grace runs), made
    its next request on a new connection, and got its answer first: the
    lines keep the order the client saw (a retry must replay second)."""
    world = run([[Forward(0, 0, 1, False, grace=10)], [Forward(1, 0, 1, False)]])
    assert world.problems == []
    assert world.appended == [0, 1]
