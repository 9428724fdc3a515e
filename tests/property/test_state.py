"""Property 7: the transition table is total and the session obeys it.

Every (State, Input) pair either moves to the table's state or raises
:class:`LocalProtocolError` (and puts a session in ERROR).  A state machine
drives a real session through random sequences of API calls, right and
wrong, and checks that its state is always the one the table predicts,
that each call hands out the events it should, that misuse raises
LocalProtocolError and leaves the session in ERROR, and that nothing else
ever escapes.
"""

from __future__ import annotations

import itertools
from collections import deque

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from reel_core import (
    Abort,
    Config,
    Cut,
    EndOfResponse,
    Engine,
    Event,
    Forward,
    Frame,
    LocalProtocolError,
    Miss,
    Mode,
    Recorded,
    Replay,
    Request,
    ResponseHead,
    Signal,
    State,
    Trailers,
    UpstreamError,
)
from reel_core._state import TRANSITIONS, transition
from reel_core.tools import Input, SSESplitter

from .strategies import hit_cassette, hit_request

ALL_PAIRS = list(itertools.product(State, Input))


def check_pair(state: State, event: Input) -> None:
    expected = TRANSITIONS.get((state, event))
    if expected is None:
        with pytest.raises(LocalProtocolError, match=f"{event.value} is not allowed"):
            transition(state, event)
    else:
        assert transition(state, event) is expected
    session = Engine(hit_cassette())
    session.state = state
    if expected is None:
        with pytest.raises(LocalProtocolError):
            session._to(event)
        assert session.state is State.ERROR
    else:
        session._to(event)
        assert session.state is expected


@given(st.sampled_from(list(State)), st.sampled_from(list(Input)))
def test_any_pair(state: State, event: Input) -> None:
    check_pair(state, event)


@pytest.mark.parametrize(("state", "event"), ALL_PAIRS, ids=lambda v: v.value)
def test_every_pair(state: State, event: Input) -> None:
    check_pair(state, event)


def test_table_is_over_the_enums_and_closed_and_error_are_final() -> None:
    assert set(TRANSITIONS) <= set(ALL_PAIRS)
    assert all(isinstance(v, State) for v in TRANSITIONS.values())
    assert not [pair for pair in TRANSITIONS if pair[0] in (State.CLOSED, State.ERROR)]


def test_misuse_the_machine_found_leaves_the_session_in_error() -> None:
    """Its minimal failing sequences: a second ``receive_request``, and
    ``start_next_cycle`` with events still to pull, raised but left the
    state as it was."""
    session = Engine(hit_cassette())
    session.receive_request(hit_request())
    with pytest.raises(LocalProtocolError):
        session.receive_request(hit_request())
    assert session.state is State.ERROR
    session = Engine(hit_cassette())
    session.receive_request(hit_request())
    assert isinstance(session.next_event(), Replay)
    with pytest.raises(LocalProtocolError):
        session.start_next_cycle()
    assert session.state is State.ERROR


OTHER_A = Request("POST", "/v1/chat/completions", (), b'{"model":"gpt-4o-mini","messages":[]}')
OTHER_B = Request("GET", "/v1/models?limit=2", ())
REQUESTS = (hit_request(), OTHER_A, OTHER_B)

EventType = type[Event]


class SessionMachine(RuleBasedStateMachine):
    """A model of the session built on TRANSITIONS, checked against a real one."""

    def __init__(self) -> None:
        super().__init__()
        self.session = Engine(hit_cassette())
        self.mode = Mode.REPLAY
        self.state = State.IDLE
        self.pending: Request | None = None
        self.queue: deque[EventType] = deque()
        self.recording = False
        #: A finished forward waits for ``record()``.
        self.record_due = False
        self.serving: Request | None = None
        #: The replay each recorded request gets, as event types.
        self.replays: dict[Request, tuple[EventType, ...]] = {
            hit_request(): (ResponseHead, Frame, EndOfResponse)
        }
        self.fed: list[bytes] = []
        self.sse = False
        #: The upstream response being fed had its trailers.
        self.trailed = False

    @initialize(mode=st.sampled_from(list(Mode)))
    def start(self, mode: Mode) -> None:
        self.mode = mode
        self.session = Engine(hit_cassette(), Config(mode=mode))

    # -- helpers -----------------------------------------------------------------

    def feed(self, event: Input) -> bool:
        """Apply ``event`` to the model: whether the table allows it."""
        new = TRANSITIONS.get((self.state, event))
        if new is None:
            self.state = State.ERROR
            return False
        self.state = new
        return True

    def misuse(self, call: object, *args: object, **kwargs: object) -> None:
        assert callable(call)
        with pytest.raises(LocalProtocolError):
            call(*args, **kwargs)
        self.state = State.ERROR

    # -- client side ---------------------------------------------------------------

    @rule(request=st.sampled_from(REQUESTS))
    def receive_request(self, request: Request) -> None:
        if self.state is not State.IDLE or self.pending is not None:
            self.misuse(self.session.receive_request, request)
            return
        self.session.receive_request(request)
        self.pending = request

    @rule()
    def next_event(self) -> None:
        if self.state is State.ERROR and not self.queue:
            self.misuse(self.session.next_event)
            return
        got = self.session.next_event()
        if self.queue:
            expected = self.queue.popleft()
            assert isinstance(got, expected), (got, expected)
            if self.state is State.SERVING and expected in (EndOfResponse, Cut):
                assert self.feed(Input.SERVED)
            return
        if self.state is State.IDLE and self.pending is not None:
            self.decide(got)
            return
        if self.state is State.IDLE:
            assert got is Signal.NEED_DATA
        else:
            assert got is Signal.PAUSED

    def decide(self, got: Event | Signal) -> None:
        request, self.pending = self.pending, None
        assert request is not None
        if self.mode in (Mode.REPLAY, Mode.AUTO) and request in self.replays:
            assert isinstance(got, Replay)
            assert self.feed(Input.HIT)
            self.queue.extend(self.replays[request])
        elif self.mode is Mode.REPLAY:
            assert isinstance(got, Miss)
            assert self.feed(Input.MISS)
            self.queue.extend((ResponseHead, Frame, EndOfResponse))
        else:
            assert isinstance(got, Forward)
            assert got.record is self.mode.records
            assert self.feed(Input.FORWARD)
            self.recording = got.record
            self.serving = request
        assert got.request == request

    @rule()
    def start_next_cycle(self) -> None:
        if self.queue or self.record_due or TRANSITIONS.get((self.state, Input.NEXT_CYCLE)) is None:
            self.misuse(self.session.start_next_cycle)
            return
        self.session.start_next_cycle()
        assert self.feed(Input.NEXT_CYCLE)

    # -- upstream side -------------------------------------------------------------

    @rule(status=st.sampled_from((200, 429, 500)), stream=st.booleans())
    def upstream_head(self, status: int, stream: bool) -> None:
        kind = b"text/event-stream" if stream else b"application/json"
        call = self.session.upstream_head
        if not self.feed(Input.UPSTREAM_HEAD):
            self.misuse(call, status, [(b"content-type", kind)], mono=1.0)
            return
        call(status, [(b"content-type", kind)], mono=1.0)
        self.queue.append(ResponseHead)
        self.fed, self.sse, self.trailed = [], stream, False

    @rule(data=st.sampled_from((b"", b"data: 1\n\n", b'{"a":', b"\xff")))
    def upstream_data(self, data: bytes) -> None:
        if self.trailed and self.state is State.STREAMING:  # trailers come last
            self.misuse(self.session.upstream_data, data, mono=1.5)
            return
        if not self.feed(Input.UPSTREAM_DATA):
            self.misuse(self.session.upstream_data, data, mono=1.5)
            return
        self.session.upstream_data(data, mono=1.5)
        if data:
            self.queue.append(Frame)
            self.fed.append(data)

    @rule()
    def upstream_trailers(self) -> None:
        trailers = [(b"grpc-status", b"0")]
        if self.trailed and self.state is State.STREAMING:  # one set a response
            self.misuse(self.session.upstream_trailers, trailers, mono=1.7)
            return
        if not self.feed(Input.UPSTREAM_TRAILERS):
            self.misuse(self.session.upstream_trailers, trailers, mono=1.7)
            return
        self.session.upstream_trailers(trailers, mono=1.7)
        self.queue.append(Trailers)
        self.trailed = True

    @rule()
    def upstream_end(self) -> None:
        if not self.feed(Input.UPSTREAM_END):
            self.misuse(self.session.upstream_end, mono=2.0)
            return
        self.session.upstream_end(mono=2.0)
        self.queue.append(EndOfResponse)
        self.finish_recording(cut=False)

    @rule(error=st.sampled_from([*UpstreamError, *Abort]))
    def upstream_error(self, error: UpstreamError | Abort) -> None:
        before = self.state
        if not self.feed(Input.UPSTREAM_ERROR):
            self.misuse(self.session.upstream_error, error, mono=2.0)
            return
        self.session.upstream_error(error, "it broke", mono=2.0)
        if before is State.AWAIT_UPSTREAM:  # answered with a 502/504, nothing recorded
            self.queue.extend((ResponseHead, Frame, EndOfResponse))
            self.recording = False
        else:
            self.queue.append(Cut)
            self.finish_recording(cut=True)

    def finish_recording(self, *, cut: bool) -> None:
        if self.recording:
            self.record_due = True
            assert self.serving is not None
            self.replays[self.serving] = self.replay_of_recording(cut=cut)
        self.recording = False

    def replay_of_recording(self, *, cut: bool) -> tuple[EventType, ...]:
        """What a replay of the exchange just recorded hands out."""
        end: EventType = Cut if cut else EndOfResponse
        if self.trailed and not cut:
            return (*self.replay_of_body(cut=cut), Trailers, end)
        return (*self.replay_of_body(cut=cut), end)

    def replay_of_body(self, *, cut: bool) -> tuple[EventType, ...]:
        """The head and frames of that replay."""
        if self.sse:
            splitter = SSESplitter()
            frames = splitter.feed(b"".join(self.fed)) + splitter.close()
            return (ResponseHead, *[Frame] * len(frames))
        if cut:  # a body cut short replays as the chunks that came
            return (ResponseHead, *[Frame] * len(self.fed))
        return (ResponseHead, *[Frame] * bool(self.fed))

    @rule()
    def record(self) -> None:
        got = self.session.record()
        if self.record_due:
            assert isinstance(got, Recorded)
            self.record_due = False
        else:
            assert got is None

    @invariant()
    def state_is_predicted(self) -> None:
        assert self.session.state is self.state


TestSession = SessionMachine.TestCase
