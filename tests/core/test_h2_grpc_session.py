"""gRPC sessions over the HTTP/2 adapter, driven by an h2 client in memory:
client-streaming and bidirectional calls recorded through the seam a
binding drives, then replayed gated by the client's messages."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from reel_core import (
    Cassette,
    Config,
    EndOfResponse,
    Engine,
    Forward,
    Frame,
    Limits,
    Miss,
    Mode,
    Replay,
    ResponseHead,
    Signal,
    Timing,
    Trailers,
)
from reel_core._grpc_session import GrpcCallRecorder
from reel_core._h2_session import (
    H2ClientEnd,
    H2ClientMessage,
    H2Event,
    H2Refused,
    H2Session,
    H2SessionMiss,
)
from reel_core.tools import grpc_frame

from .test_grpc_session import ANOTHER_SESSION, Entry, client_messages, conversations, record
from .test_h2_session import Client

PATH = b"/pkg.Chat/Talk"
GRPC = (b"content-type", b"application/grpc")
OK = [(b"grpc-status", b"0"), (b"grpc-message", b"")]

Handed = H2Event | H2Refused | H2ClientMessage | H2ClientEnd | H2SessionMiss


@dataclass
class Binding:
    """What a proxy's pump does with a session's events, its clock a number."""

    session: H2Session
    client: Client
    now: float = 0.0
    seen: list[Handed] = field(default_factory=list)

    def step(self) -> list[Handed]:
        """Move the client's bytes in (at ``now``), serve what is handed out
        (every response event sent at once), and the answer's bytes out."""
        data = self.client.wire()
        if data:
            self.session.receive_data(data, mono=self.now)
        got: list[Handed] = []
        while not isinstance(item := self.session.next_event(), Signal):
            got.append(item)
            if isinstance(item, H2Event) and isinstance(
                item.event, (ResponseHead, Frame, Trailers, EndOfResponse)
            ):
                self.session.send(item.stream_id, item.event)
        out = self.session.data_to_send()
        if out:
            self.client.receive(out)
        self.seen += got
        return got


def open_call(client: Client, first: bytes | None, *, end: bool = False) -> int:
    """A gRPC call's head (and its first message, when given)."""
    sid: int = client.conn.get_next_available_stream_id()
    head = [
        (b":method", b"POST"),
        (b":path", PATH),
        (b":scheme", b"http"),
        (b":authority", b"api.x.ai"),
        GRPC,
        (b"te", b"trailers"),
    ]
    client.conn.send_headers(sid, head, end_stream=first is None and end)
    if first is not None:
        client.conn.send_data(sid, first, end_stream=end)
    return sid


def send(client: Client, sid: int, data: bytes, *, end: bool = False) -> None:
    client.conn.send_data(sid, data, end_stream=end)


def record_through_h2(
    cassette: Cassette, client_messages: list[bytes], answers: list[bytes], *, bidi: bool
) -> None:
    """A call recorded in record mode, through the seam a binding drives:
    the first message in the Forward's request, the others as
    ``H2ClientMessage``, the end as ``H2ClientEnd``; the upstream's answers
    fed to the engine and the recorder.  ``bidi``: each answer follows its
    client message; else (client-streaming) they all follow the end."""
    session = H2Session(lambda: Engine(cassette, Config(mode=Mode.RECORD)))
    client = Client()
    pump = Binding(session, client, now=1.0)
    sid = open_call(client, grpc_frame(client_messages[0]))
    got = pump.step()
    forward = got[0]
    assert isinstance(forward, H2Event)
    assert isinstance(forward.event, Forward)
    assert session.streamed(sid)
    engine = forward.engine
    opened = session.started_at(sid)
    assert opened == 1.0
    recorder = GrpcCallRecorder(engine.redactor, opened=opened)
    recorder.client_message(forward.event.request.body, opened)
    engine.upstream_head(200, [GRPC], mono=1.0, sent_at=1.0)
    now = 1.0

    def answer(i: int) -> None:
        engine.upstream_data(grpc_frame(answers[i]), mono=now)
        recorder.server_message(grpc_frame(answers[i]), now)

    if bidi:
        answer(0)
    for i, message in enumerate(client_messages[1:], start=1):
        now += 0.1
        pump.now = now
        send(client, sid, grpc_frame(message))
        got = pump.step()
        relayed = [g for g in got if isinstance(g, H2ClientMessage)]
        assert [g.data for g in relayed] == [grpc_frame(message)]
        assert relayed[0].at == now
        recorder.client_message(relayed[0].data, relayed[0].at)
        if bidi:
            answer(i)
    now += 0.1
    pump.now = now
    send(client, sid, b"", end=True)
    ended = [g for g in pump.step() if isinstance(g, H2ClientEnd)]
    assert ended == [H2ClientEnd(sid, b"", now)]
    recorder.client_end(now)
    if not bidi:
        for i in range(len(answers)):
            answer(i)
    engine.upstream_trailers(OK, mono=now)
    engine.upstream_end(mono=now)
    recorder.ended(now)
    done = pump.step()[-1]
    assert isinstance(done, H2Event)
    assert done.event is Signal.PAUSED
    assert recorder.record(engine) is not None
    assert client.answers[sid].trailers == OK


def replaying(cassette: Cassette, timing: str = "realtime") -> Binding:
    config = Config(mode=Mode.REPLAY, timing=Timing.parse(timing))
    session = H2Session(lambda: Engine(cassette, config))
    return Binding(session, Client(), now=50.0)


def frames_of(handed: list[Handed]) -> list[Frame]:
    return [h.event for h in handed if isinstance(h, H2Event) and isinstance(h.event, Frame)]


def test_a_client_streaming_call_replays_after_its_last_message() -> None:
    cassette = Cassette("c.jsonl")
    record_through_h2(cassette, [b"1", b"2", b"3"], [b"sum=6"], bidi=False)
    stored = cassette.interactions()[0]
    assert stored.grpc is not None  # three messages: a session
    assert stored.request.body == grpc_frame(b"1")
    pump = replaying(Cassette.loads(cassette.dumps(), name="c.jsonl"))
    sid = open_call(pump.client, grpc_frame(b"1"))
    got = pump.step()
    assert [type(h.event) for h in got if isinstance(h, H2Event)] == [Replay, ResponseHead]
    assert pump.session.started_at(sid) == 50.0
    answer = pump.client.answers[sid]
    assert answer.status == 200
    assert answer.data == b""  # nothing before the client's messages
    send(pump.client, sid, grpc_frame(b"2"))
    assert frames_of(pump.step()) == []
    send(pump.client, sid, grpc_frame(b"3"), end=True)
    got = pump.step()
    assert [f.data for f in frames_of(got)] == [grpc_frame(b"sum=6")]
    assert answer.data == grpc_frame(b"sum=6")
    assert answer.trailers == OK
    assert answer.ended
    last = got[-1]
    assert isinstance(last, H2Event)
    assert last.event is Signal.PAUSED
    assert last.engine.record() is None


def test_a_bidirectional_call_is_gated_message_by_message() -> None:
    cassette = Cassette("c.jsonl")
    record_through_h2(cassette, [b"hi", b"how", b"bye"], [b"A", b"B", b"C"], bidi=True)
    pump = replaying(Cassette.loads(cassette.dumps(), name="c.jsonl"))
    sid = open_call(pump.client, grpc_frame(b"hi"))
    got = pump.step()
    first = frames_of(got)
    assert [f.data for f in first] == [grpc_frame(b"A")]
    assert first[0].at == 0.0  # recorded with its client message: due at once
    assert pump.client.answers[sid].data == grpc_frame(b"A")
    pump.now = 50.7  # the client is slower than recorded (100 ms): its answer follows it
    send(pump.client, sid, grpc_frame(b"how"))
    second = frames_of(pump.step())
    assert [f.data for f in second] == [grpc_frame(b"B")]
    assert second[0].at is not None
    assert abs(second[0].at - 0.7) < 1e-9
    pump.now = 50.9
    send(pump.client, sid, grpc_frame(b"bye"), end=True)
    rest = pump.step()
    assert [f.data for f in frames_of(rest)] == [grpc_frame(b"C")]
    answer = pump.client.answers[sid]
    assert answer.frames == [grpc_frame(b"A"), grpc_frame(b"B"), grpc_frame(b"C")]
    assert answer.trailers == OK


def test_a_changed_message_ends_the_call_not_found() -> None:
    cassette = Cassette("c.jsonl")
    record_through_h2(cassette, [b"hi", b"how", b"bye"], [b"A", b"B", b"C"], bidi=True)
    pump = replaying(Cassette.loads(cassette.dumps(), name="c.jsonl"))
    sid = open_call(pump.client, grpc_frame(b"hi"))
    pump.step()
    send(pump.client, sid, grpc_frame(b"who"))
    got = pump.step()
    misses = [g for g in got if isinstance(g, H2SessionMiss)]
    assert len(misses) == 1
    assert misses[0].stream_id == sid
    assert "client message 1 " in misses[0].report.reason
    answer = pump.client.answers[sid]
    assert answer.frames == [grpc_frame(b"A")]  # nothing recorded after it
    assert answer.trailers is not None
    assert dict(answer.trailers)[b"grpc-status"] == b"5"
    assert dict(answer.trailers)[b"grpc-message"].startswith(b"Reel miss: gRPC session")
    assert answer.ended
    # the client's last bytes on the ended stream are let go
    send(pump.client, sid, grpc_frame(b"bye"), end=True)
    assert pump.step() == []


def test_messages_that_came_before_the_decision_wait_for_it() -> None:
    """All of a call's bytes in one read: the later messages and the end
    reach the session once the call is decided."""
    cassette = Cassette("c.jsonl")
    record_through_h2(cassette, [b"1", b"2"], [b"sum"], bidi=False)
    pump = replaying(Cassette.loads(cassette.dumps(), name="c.jsonl"))
    sid = open_call(pump.client, grpc_frame(b"1") + grpc_frame(b"2"), end=True)
    pump.step()
    answer = pump.client.answers[sid]
    assert answer.frames == [grpc_frame(b"sum")]
    assert answer.trailers == OK


def test_a_forwarded_calls_early_messages_follow_its_forward_in_order() -> None:
    cassette = Cassette("c.jsonl")
    session = H2Session(lambda: Engine(cassette, Config(mode=Mode.RECORD)))
    client = Client()
    pump = Binding(session, client, now=3.0)
    sid = open_call(client, grpc_frame(b"1") + grpc_frame(b"2") + b"\x00\x00", end=True)
    got = pump.step()
    assert isinstance(got[0], H2Event)
    assert isinstance(got[0].event, Forward)
    assert got[0].event.request.body == grpc_frame(b"1")
    assert got[1:] == [
        H2ClientMessage(sid, grpc_frame(b"2"), 3.0),
        H2ClientEnd(sid, b"\x00\x00", 3.0),
    ]


def test_a_unary_call_on_a_path_without_sessions_is_whole_at_its_end() -> None:
    cassette = Cassette("c.jsonl")
    pump = replaying(cassette)
    sid = open_call(pump.client, grpc_frame(b"1"))
    assert not pump.session.streamed(sid)
    assert pump.session.started_at(sid) is None
    assert pump.step() == []  # nothing is decided before the end
    send(pump.client, sid, grpc_frame(b"2"), end=True)
    got = pump.step()
    assert isinstance(got[0], H2Event)
    assert isinstance(got[0].event, Miss)
    assert got[0].event.request.body == grpc_frame(b"1") + grpc_frame(b"2")


def test_a_streamed_calls_miss_lets_its_later_messages_go() -> None:
    cassette = Cassette("c.jsonl")
    record_through_h2(cassette, [b"1", b"2"], [b"sum"], bidi=False)
    pump = replaying(Cassette.loads(cassette.dumps(), name="c.jsonl"))
    sid = open_call(pump.client, grpc_frame(b"other"))
    got = pump.step()
    assert isinstance(got[0], H2Event)
    assert isinstance(got[0].event, Miss)
    send(pump.client, sid, grpc_frame(b"2"), end=True)
    assert pump.step() == []
    assert dict(pump.client.answers[sid].trailers or [])[b"grpc-status"] == b"5"


def test_a_call_with_no_message_is_decided_at_its_end() -> None:
    cassette = Cassette("c.jsonl")
    session = H2Session(lambda: Engine(cassette, Config(mode=Mode.RECORD)))
    pump = Binding(session, Client(), now=2.0)
    sid = open_call(pump.client, None, end=True)
    got = pump.step()
    assert isinstance(got[0], H2Event)
    assert isinstance(got[0].event, Forward)
    assert got[0].event.request.body == b""
    assert got[1:] == [H2ClientEnd(sid, b"", 2.0)]


def test_a_torn_message_before_the_first_is_invalid_argument() -> None:
    session = H2Session(lambda: Engine(Cassette(), Config(mode=Mode.RECORD)))
    pump = Binding(session, Client())
    sid = open_call(pump.client, b"\x00\x00\x00", end=True)
    got = pump.step()
    assert isinstance(got[0], H2Refused)
    assert got[0].error.status == 400
    assert "truncated" in str(got[0].error)
    # the client reads a gRPC status, not an HTTP 400 (issue 35)
    answer = pump.client.answers[sid]
    assert answer.status == 200
    assert answer.data == b""
    assert dict(answer.trailers or [])[b"grpc-status"] == b"3"


def test_a_message_over_the_limit_is_a_413_first_and_a_reset_later() -> None:
    limits = Limits(max_body=64)
    cassette = Cassette()
    session = H2Session(lambda: Engine(cassette, Config(mode=Mode.RECORD, limits=limits)))
    pump = Binding(session, Client())
    big = grpc_frame(b"x" * 100)
    sid = open_call(pump.client, big[:10])
    got = pump.step()
    assert isinstance(got[0], H2Refused)
    assert got[0].error.status == 413
    assert dict(pump.client.answers[sid].trailers or [])[b"grpc-status"] == b"8"
    # under way: the call's stream is reset, its exchange ended
    other = open_call(pump.client, grpc_frame(b"1"))
    forward = pump.step()[0]
    assert isinstance(forward, H2Event)
    send(pump.client, other, big[:10])
    got = pump.step()
    assert got == [H2Event(other, Signal.CLOSED, forward.engine)]
    assert pump.client.answers[other].reset is not None
    assert sid != other


def test_a_client_reset_ends_a_replayed_session() -> None:
    cassette = Cassette("c.jsonl")
    record_through_h2(cassette, [b"1", b"2"], [b"sum"], bidi=False)
    pump = replaying(Cassette.loads(cassette.dumps(), name="c.jsonl"))
    sid = open_call(pump.client, grpc_frame(b"1"))
    pump.step()
    pump.client.conn.reset_stream(sid)
    got = pump.step()
    assert [g.event for g in got if isinstance(g, H2Event)] == [Signal.CLOSED, Signal.PAUSED]


def test_a_decoder_is_asked_for_each_path() -> None:
    cassette = Cassette("c.jsonl")
    record_through_h2(cassette, [b"1", b"2"], [b"sum"], bidi=False)
    asked: list[str] = []

    def decoder(path: str) -> None:
        asked.append(path)

    config = Config(mode=Mode.REPLAY)
    replay = Cassette.loads(cassette.dumps(), name="c.jsonl")
    session = H2Session(lambda: Engine(replay, config), decode=decoder)
    pump = Binding(session, Client())
    open_call(pump.client, grpc_frame(b"1"))
    pump.step()
    assert asked == [PATH.decode()]


def test_a_missed_calls_early_messages_are_let_go_too() -> None:
    cassette = Cassette("c.jsonl")
    record_through_h2(cassette, [b"1", b"2"], [b"sum"], bidi=False)
    pump = replaying(Cassette.loads(cassette.dumps(), name="c.jsonl"))
    sid = open_call(pump.client, grpc_frame(b"other") + grpc_frame(b"2"), end=True)
    got = pump.step()
    assert [type(g.event) for g in got if isinstance(g, H2Event)] == [
        Miss,
        ResponseHead,
        Trailers,
        EndOfResponse,
        Signal,
    ]
    assert not any(isinstance(g, (H2ClientMessage, H2ClientEnd)) for g in got)
    assert pump.client.answers[sid].ended


# -- any conversation, any cutting ------------------------------------------------------


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points) if b > a]


@settings(max_examples=40, deadline=None)
@given(conversations(), st.lists(st.integers(0, 64), max_size=4))
def test_any_conversation_cut_any_way_replays_gated_over_h2(
    conversation: list[Entry], cuts: list[int]
) -> None:
    """A recorded call replayed through the adapter, each client message
    sent in DATA frames cut anywhere: before each client entry the client
    has exactly the server messages recorded before it, and at the end all
    of them and the recorded status."""
    cassette = Cassette("c.jsonl")
    record(ANOTHER_SESSION, cassette)
    record(conversation, cassette)
    pump = replaying(Cassette.loads(cassette.dumps(), name="c.jsonl"), timing="fast")
    first = client_messages(conversation)[0]
    sid = open_call(pump.client, None)
    for piece in _cut(first, cuts):
        send(pump.client, sid, piece)
    pump.step()
    expected = b""
    for e in conversation[1:]:
        if e.sender == "server":
            expected += e.data
            continue
        assert pump.client.answers[sid].data == expected
        assert not pump.client.answers[sid].ended
        pieces = _cut(e.data, cuts) if not e.end else []
        for piece in pieces:
            send(pump.client, sid, piece)
        if e.end:
            send(pump.client, sid, b"", end=True)
        pump.step()
    answer = pump.client.answers[sid]
    assert answer.data == expected
    assert answer.trailers == OK
    assert answer.ended


def test_malformed_trailers_break_a_call_under_way_and_are_let_go_after_a_refusal() -> None:
    """A streamed call's client trailers are checked as any header block
    (h2's own check is off: see reel_core._fields): malformed ones reset a
    call under way, its exchange ended; after a refusal they are let go."""
    session = H2Session(lambda: Engine(Cassette(), Config(mode=Mode.RECORD)))
    pump = Binding(session, Client(raw=True))
    sid = open_call(pump.client, grpc_frame(b"1"))
    forward = pump.step()[0]
    assert isinstance(forward, H2Event)
    assert isinstance(forward.event, Forward)
    pump.client.conn.send_headers(sid, [(b"Bad", b"1")], end_stream=True)
    assert pump.step() == [H2Event(sid, Signal.CLOSED, forward.engine)]
    assert pump.client.answers[sid].reset is not None
    # refused at its head, its answer waiting for the window, then
    # malformed trailers: let go, the answer goes out whole once it opens
    session = H2Session(lambda: Engine(Cassette(), Config(mode=Mode.RECORD)))
    pump = Binding(session, Client(window=10, raw=True))
    pump.client.auto_window = False
    refused = pump.client.conn.get_next_available_stream_id()
    pump.client.conn.send_headers(refused, [(b":path", PATH)])
    pump.client.conn.send_headers(refused, [(b"Bad", b"1")], end_stream=True)
    got = pump.step()
    assert [type(item) for item in got] == [H2Refused]
    pump.client.conn.increment_flow_control_window(1000, stream_id=refused)
    pump.step()
    answer = pump.client.answers[refused]
    assert (answer.status, answer.reset, answer.ended) == (400, None, True)
    assert b"no :method" in answer.data
