"""The HTTP/2 adapter, driven by an h2 client connection in memory."""

from __future__ import annotations

import importlib
import itertools
import json
import sys
from dataclasses import dataclass, field

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings
import hpack
import pytest
from hyperframe.frame import Frame as Frame_
from hyperframe.frame import HeadersFrame
from hypothesis import given, settings
from hypothesis import strategies as st

from reel_core import (
    Cassette,
    Config,
    Cut,
    EndOfResponse,
    Engine,
    Forward,
    Frame,
    Limits,
    LocalProtocolError,
    Miss,
    Mode,
    RemoteProtocolError,
    Replay,
    ResponseHead,
    Signal,
    State,
    Trailers,
)
from reel_core._h2_session import (
    HEAD_FENCE,
    H2ClientEnd,
    H2ClientMessage,
    H2Event,
    H2Refused,
    H2Session,
    H2SessionMiss,
)
from reel_core.tools import grpc_frame

from ._helpers import cassette_of, interaction

#: What the adapter hands out besides a signal.
Item = H2Event | H2Refused | H2ClientMessage | H2ClientEnd | H2SessionMiss

BODY = b'{"model":"m","messages":[]}'
SSE = ((0.0, b"data: 1\n\n"), (250.0, b"data: 2\n\n"), (1000.0, b"data: [DONE]\n\n"))


@dataclass
class Answer:
    """What the client got on one stream."""

    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    data: bytes = b""
    frames: list[bytes] = field(default_factory=list)
    ended: bool = False
    reset: int | None = None
    trailers: list[tuple[bytes, bytes]] | None = None

    @property
    def status(self) -> int:
        return int(dict(self.headers)[b":status"])


class Client:
    """An h2 client connection, its bytes going to and from a server session."""

    def __init__(
        self,
        window: int | None = None,
        frame_size: int | None = None,
        *,
        strict: bool = True,
        raw: bool = False,
    ) -> None:
        # strict=False: takes a value with spaces around it, as grpcio does;
        # raw: sends its headers as given, malformed or not
        config = h2.config.H2Configuration(
            client_side=True,
            header_encoding=None,
            validate_inbound_headers=strict,
            normalize_outbound_headers=not raw,
            validate_outbound_headers=not raw,
        )
        self.conn = h2.connection.H2Connection(config=config)
        self.conn.initiate_connection()
        values: dict[h2.settings.SettingCodes | int, int] = {}
        if window is not None:
            values[h2.settings.SettingCodes.INITIAL_WINDOW_SIZE] = window
        if frame_size is not None:
            values[h2.settings.SettingCodes.MAX_FRAME_SIZE] = frame_size
        if values:
            self.conn.update_settings(values)
        self.answers: dict[int, Answer] = {}
        self.goaway: h2.events.ConnectionTerminated | None = None
        self.auto_window = True

    def request(
        self,
        body: bytes = BODY,
        path: bytes = b"/v1/chat/completions",
        method: bytes = b"POST",
        extra: tuple[tuple[bytes, bytes], ...] = (),
        end: bool = True,
    ) -> int:
        sid: int = self.conn.get_next_available_stream_id()
        headers = [
            (b":method", method),
            (b":path", path),
            (b":scheme", b"http"),
            (b":authority", b"api.openai.com"),
            (b"content-type", b"application/json"),
            *extra,
        ]
        self.conn.send_headers(sid, headers, end_stream=not body and end)
        if body:
            self.conn.send_data(sid, body, end_stream=end)
        return sid

    def wire(self) -> bytes:
        data: bytes = self.conn.data_to_send()
        return data

    def receive(self, data: bytes) -> None:
        for event in self.conn.receive_data(data):
            sid = getattr(event, "stream_id", None)
            answer = self.answers.setdefault(sid, Answer()) if sid else None
            if isinstance(event, h2.events.ResponseReceived):
                assert answer is not None
                answer.headers = [(bytes(k), bytes(v)) for k, v in event.headers or ()]
            elif isinstance(event, h2.events.DataReceived):
                assert answer is not None
                assert event.data is not None
                answer.data += event.data
                if event.data:  # not the empty one END_STREAM may come in
                    answer.frames.append(event.data)
                if self.auto_window:
                    self.conn.acknowledge_received_data(event.flow_controlled_length or 0, sid or 0)
            elif isinstance(event, h2.events.TrailersReceived):
                assert answer is not None
                answer.trailers = [(bytes(k), bytes(v)) for k, v in event.headers or ()]
            elif isinstance(event, h2.events.StreamEnded):
                assert answer is not None
                answer.ended = True
            elif isinstance(event, h2.events.StreamReset):
                assert answer is not None
                answer.reset = event.error_code
            elif isinstance(event, h2.events.ConnectionTerminated):
                self.goaway = event


def pump(session: H2Session, client: Client, *, mono: float = 0.0) -> list[Item]:
    """Move bytes both ways until neither side has any, serving every
    response event the session hands out (a forward is left waiting)."""
    seen: list[Item] = []
    while True:
        data = client.wire()
        if data:
            session.receive_data(data)
        seen += serve(session)
        out = session.data_to_send()
        if out:
            client.receive(out)
        if not data and not out:
            return seen


def serve(session: H2Session) -> list[Item]:
    seen: list[Item] = []
    while not isinstance(item := session.next_event(), Signal):
        seen.append(item)
        if isinstance(item, H2Event) and isinstance(
            item.event, (ResponseHead, Frame, Trailers, EndOfResponse, Cut)
        ):
            session.send(item.stream_id, item.event)
    return seen


def replay_session(*interactions: object, **config: object) -> H2Session:
    cassette = cassette_of(*interactions)  # type: ignore[arg-type]
    return H2Session(lambda: Engine(cassette, Config(**config)))  # type: ignore[arg-type]


# -- replay --------------------------------------------------------------------


def test_a_replayed_json_answer() -> None:
    session = replay_session(interaction(id="rec1", response_body=b'{"ok":true}'))
    client = Client()
    sid = client.request()
    client.conn.prioritize(sid, weight=200)  # h2's business: nothing to hand out
    session.receive_data(client.wire(), wall=1_700_000_000.0)
    seen = pump(session, client)
    kinds = [type(e.event) for e in seen if isinstance(e, H2Event)]
    assert kinds == [Replay, ResponseHead, Frame, EndOfResponse, Signal]
    last = seen[-1]
    assert isinstance(last, H2Event)
    assert last.event is Signal.PAUSED
    assert last.engine.state is State.DONE
    assert last.engine.record() is None
    answer = client.answers[sid]
    assert answer.status == 200
    assert (b"content-type", b"application/json") in answer.headers
    assert answer.data == b'{"ok":true}'
    assert answer.ended
    assert answer.reset is None


def test_the_request_the_engine_sees() -> None:
    got: list[Engine] = []
    cassette = Cassette()

    def new_engine() -> Engine:
        got.append(Engine(cassette, Config(mode=Mode.REPLAY)))
        return got[-1]

    session = H2Session(new_engine)
    client = Client()
    client.request(
        path=b"/v1/x?a=1",
        extra=((b"cookie", b"a=1"), (b"x-other", b"y"), (b"cookie", b"b=2")),
    )
    seen = pump(session, client)
    miss = seen[0]
    assert isinstance(miss, H2Event)
    assert isinstance(miss.event, Miss)
    request = miss.event.request
    assert request.method == "POST"
    assert request.target == "/v1/x?a=1"
    assert request.header("host") == b"api.openai.com"
    assert request.header("cookie") == b"a=1; b=2"
    assert not any(name.startswith(b":") for name, _ in request.headers)
    assert request.body == BODY


def test_a_host_header_stands_for_a_missing_authority() -> None:
    session = replay_session(mode=Mode.REPLAY)
    client = Client()
    sid = client.conn.get_next_available_stream_id()
    head = [(b":method", b"GET"), (b":path", b"/v1/models"), (b":scheme", b"http")]
    client.conn.send_headers(sid, [*head, (b"host", b"example.test")], end_stream=True)
    miss = pump(session, client)[0]
    assert isinstance(miss, H2Event)
    assert isinstance(miss.event, Miss)
    assert miss.event.request.headers == ((b"host", b"example.test"),)


def test_a_replayed_sse_stream_comes_in_order_then_ends() -> None:
    rec = interaction(
        stream="sse", frames=SSE, end_ms=1200.0, headers=(("content-type", "text/event-stream"),)
    )
    session = replay_session(rec)
    client = Client()
    sid = client.request()
    seen = pump(session, client)
    frames = [e.event for e in seen if isinstance(e, H2Event) and isinstance(e.event, Frame)]
    assert [f.at for f in frames] == [0.0, 0.25, 1.0]
    answer = client.answers[sid]
    assert answer.frames == [data for _, data in SSE]
    assert answer.ended


def test_a_miss_is_a_404_saying_so() -> None:
    session = replay_session(mode=Mode.REPLAY)
    client = Client()
    sid = client.request(body=b'{"model":"other"}')
    pump(session, client)
    answer = client.answers[sid]
    assert answer.status == 404
    assert answer.ended
    assert b"x-reel-miss" in dict(answer.headers)
    assert json.loads(answer.data)["error"]["type"] == "reel_miss"


def test_two_streams_interleaved_are_two_exchanges() -> None:
    one = interaction(id="one", body=b'{"n":1}', response_body=b'{"a":1}')
    two = interaction(id="two", body=b'{"n":2}', response_body=b'{"a":2}')
    session = replay_session(one, two)
    client = Client()
    # both heads first, then both bodies: the requests interleave on the wire
    s1 = client.request(body=b'{"n":1}', end=False)
    s2 = client.request(body=b'{"n":2}', end=False)
    client.conn.end_stream(s2)
    client.conn.end_stream(s1)
    seen = pump(session, client)
    engines = {e.stream_id: e.engine for e in seen if isinstance(e, H2Event)}
    assert len(set(map(id, engines.values()))) == 2
    order = [e.stream_id for e in seen if isinstance(e, H2Event)]
    assert order[:2] == [s2, s1]  # the one whose request ended first decides first
    assert order[2:4] == [s2, s1]  # then each in turn
    assert client.answers[s1].data == b'{"a":1}'
    assert client.answers[s2].data == b'{"a":2}'


def test_a_large_body_waits_for_the_clients_window() -> None:
    big = bytes(range(256)) * 400  # 102,400 bytes
    session = replay_session(interaction(response_body=big))
    client = Client(window=1000, frame_size=16384)
    client.auto_window = False
    sid = client.request()
    pump(session, client)
    answer = client.answers[sid]
    assert answer.data == big[:1000]
    assert not answer.ended
    assert session.buffered(sid) == len(big) - 1000
    while not client.answers[sid].ended:
        client.conn.increment_flow_control_window(30000, stream_id=sid)
        client.conn.increment_flow_control_window(30000)
        pump(session, client)
    assert answer.data == big
    assert max(map(len, answer.frames)) <= 16384
    assert session.buffered(sid) == 0


def test_a_client_reset_ends_its_stream_only() -> None:
    long = interaction(
        id="long",
        body=b'{"n":1}',
        stream="sse",
        frames=SSE,
        end_ms=1200.0,
        headers=(("content-type", "text/event-stream"),),
    )
    other = interaction(id="other", body=b'{"n":2}', response_body=b'{"a":2}')
    session = replay_session(long, other)
    client = Client()
    s1 = client.request(body=b'{"n":1}')
    s2 = client.request(body=b'{"n":2}')
    session.receive_data(client.wire())
    # the replay of s1 is under way: its head and first frame are sent
    sent: list[object] = []
    while len(sent) < 3:
        item = session.next_event()
        assert isinstance(item, H2Event)
        if isinstance(item.event, (ResponseHead, Frame, EndOfResponse)):
            session.send(item.stream_id, item.event)
        if item.stream_id == s1:
            sent.append(item.event)
    client.receive(session.data_to_send())
    client.conn.reset_stream(s1, h2.errors.ErrorCodes.CANCEL)
    session.receive_data(client.wire())
    rest = serve(session)
    ends = [
        (e.stream_id, e.event)
        for e in rest
        if isinstance(e, H2Event) and isinstance(e.event, Signal)
    ]
    assert (s1, Signal.CLOSED) in ends
    assert (s1, Signal.PAUSED) in ends
    assert not any(
        isinstance(e, H2Event) and e.stream_id == s1 and isinstance(e.event, Frame) for e in rest
    )
    session.send(s1, Frame(b"late", None))  # nothing goes out on a reset stream
    client.receive(session.data_to_send())
    assert client.answers[s1].data == b"data: 1\n\n"
    assert client.answers[s2].data == b'{"a":2}'
    assert client.answers[s2].ended


def test_a_reset_while_a_handed_out_replay_plays_is_closed() -> None:
    """A replay's events are all handed out at once (PAUSED too); the
    binding plays them on their schedule.  A reset while it does is still
    the stream's CLOSED, so the binding stops playing; a refused stream's
    reset is none."""
    rec = interaction(
        stream="sse", frames=SSE, end_ms=1200.0, headers=(("content-type", "text/event-stream"),)
    )
    session = replay_session(rec, limits=Limits(max_body=100))
    client = Client()
    sid = client.request()
    session.receive_data(client.wire())
    handed: list[object] = []
    while not isinstance(item := session.next_event(), Signal):
        assert isinstance(item, H2Event)
        handed.append(item.event)
        if isinstance(item.event, ResponseHead):
            session.send(sid, item.event)  # the head goes out; the frames wait their turn
    assert handed[-1] is Signal.PAUSED
    client.receive(session.data_to_send())
    refused = client.request(body=b"x" * 101)  # over the limit: refused, ended at once
    session.receive_data(client.wire())
    assert isinstance(session.next_event(), H2Refused)
    client.conn.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
    session.receive_data(client.wire())
    closed = session.next_event()
    assert isinstance(closed, H2Event)
    assert (closed.stream_id, closed.event) == (sid, Signal.CLOSED)
    assert session.next_event() is Signal.NEED_DATA
    session.receive_data(b"")  # the refused stream's end is no CLOSED either
    assert refused not in [e.stream_id for e in serve(session)]
    assert session.next_event() is Signal.CLOSED


def test_a_bad_preface_is_a_goaway_and_an_error() -> None:
    session = H2Session(lambda: Engine(Cassette()))
    with pytest.raises(RemoteProtocolError, match="HTTP/2"):
        session.receive_data(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
    client = Client()
    client.receive(session.data_to_send())
    assert client.goaway is not None
    assert client.goaway.error_code == h2.errors.ErrorCodes.PROTOCOL_ERROR
    assert session.next_event() is Signal.CLOSED
    session.receive_data(b"more")  # after the end: let go
    assert session.data_to_send() == b""


def test_a_protocol_error_mid_connection_ends_every_exchange() -> None:
    session = replay_session(mode=Mode.RECORD)
    client = Client()
    sid = client.request()
    seen = pump(session, client)
    assert isinstance(seen[0], H2Event)
    assert isinstance(seen[0].event, Forward)
    # DATA on stream 0 is a connection error
    with pytest.raises(RemoteProtocolError):
        session.receive_data(b"\x00\x00\x01\x00\x00\x00\x00\x00\x00x")
    closed = session.next_event()
    assert isinstance(closed, H2Event)
    assert (closed.stream_id, closed.event) == (sid, Signal.CLOSED)
    engine = closed.engine
    engine.upstream_head(200, [], mono=1.0)  # the binding ends the forward
    engine.upstream_end(mono=2.0)
    done = session.next_event()
    assert isinstance(done, H2Event)
    assert done.event is Signal.PAUSED
    assert session.next_event() is Signal.CLOSED


def test_eof_ends_the_connection() -> None:
    session = replay_session()
    client = Client()
    client.request(end=False)  # a request never finished
    pump(session, client)
    session.receive_data(b"")
    assert session.next_event() is Signal.CLOSED


def test_a_client_goaway_ends_the_connection() -> None:
    session = replay_session(mode=Mode.RECORD)
    client = Client()
    sid = client.request()
    pump(session, client)
    client.conn.close_connection()
    closed = pump(session, client)
    assert [(e.stream_id, e.event) for e in closed if isinstance(e, H2Event)] == [
        (sid, Signal.CLOSED)
    ]
    assert session.next_event() is Signal.NEED_DATA  # the forward is the binding's to end


# -- forward -------------------------------------------------------------------


def test_a_forward_is_recorded_through_the_engine() -> None:
    cassette = Cassette()
    session = H2Session(lambda: Engine(cassette, Config(mode=Mode.RECORD)))
    client = Client()
    sid = client.request()
    seen = pump(session, client)
    assert len(seen) == 1
    forward = seen[0]
    assert isinstance(forward, H2Event)
    assert isinstance(forward.event, Forward)
    engine = forward.engine
    engine.upstream_head(
        200,
        [(b"content-type", b"text/event-stream"), (b"connection", b"close")],
        mono=1.0,
        sent_at=0.5,
    )
    engine.upstream_data(b"data: a\n\n", mono=1.1)
    seen = pump(session, client)
    assert [type(e.event) for e in seen if isinstance(e, H2Event)] == [ResponseHead, Frame]
    assert client.answers[sid].data == b"data: a\n\n"
    assert not client.answers[sid].ended
    session.send(sid, Frame(b"", None))  # an empty frame sends nothing
    assert session.data_to_send() == b""
    engine.upstream_data(b"data: b\n\n", mono=1.3)
    engine.upstream_end(mono=1.4)
    seen = pump(session, client)
    last = seen[-1]
    assert isinstance(last, H2Event)
    assert last.event is Signal.PAUSED
    recorded = last.engine.record()
    assert recorded is not None
    line = json.loads(recorded.line)
    assert [f[1] for f in line["response"]["frames"]] == ["data: a\n\n", "data: b\n\n"]
    assert client.answers[sid].ended
    assert b"connection" not in dict(client.answers[sid].headers)
    assert len(cassette.interactions()) == 1


GRPC_TRAILERS = [(b"grpc-status", b"0"), (b"grpc-message", b"")]


def test_trailers_end_the_stream_recorded_then_replayed() -> None:
    cassette = Cassette()
    # an SSE stream with trailers (gRPC's: the tests below); the engine
    # replays the trailers of a streamed response
    grpc = (b"content-type", b"text/event-stream")
    message = b"data: hi\n\n" * 28  # 280 bytes, past the window below
    session = H2Session(lambda: Engine(cassette, Config(mode=Mode.AUTO)))
    client = Client(window=100)
    client.auto_window = False
    sid = client.request(path=b"/xai_api.Chat/GetCompletion", extra=(grpc,))
    forward = pump(session, client)[0]
    assert isinstance(forward, H2Event)
    engine = forward.engine
    engine.upstream_head(200, [grpc], mono=1.0)
    engine.upstream_data(message, mono=1.1)
    engine.upstream_trailers([*GRPC_TRAILERS, (b"connection", b"x")], mono=1.2)
    engine.upstream_end(mono=1.3)
    seen = pump(session, client)
    assert [type(e.event) for e in seen if isinstance(e, H2Event)] == [
        ResponseHead,
        Frame,
        Trailers,
        EndOfResponse,
        Signal,
    ]
    assert client.answers[sid].trailers is None  # behind the body still queued
    assert not client.answers[sid].ended
    client.conn.increment_flow_control_window(1000, stream_id=sid)
    pump(session, client)
    assert client.answers[sid].data == message
    assert client.answers[sid].trailers == GRPC_TRAILERS
    assert client.answers[sid].ended
    last = seen[-1]
    assert isinstance(last, H2Event)
    assert last.engine.record() is not None
    # replayed later, trailers and all
    session = H2Session(lambda: Engine(cassette, Config(mode=Mode.REPLAY)))
    client = Client(window=100)
    client.auto_window = False
    again = client.request(path=b"/xai_api.Chat/GetCompletion", extra=(grpc,))
    seen = pump(session, client)
    assert isinstance(seen[0], H2Event)
    assert isinstance(seen[0].event, Replay)
    assert client.answers[again].trailers is None
    client.conn.increment_flow_control_window(1000, stream_id=again)
    pump(session, client)
    assert client.answers[again].data == message
    assert client.answers[again].trailers == GRPC_TRAILERS
    assert client.answers[again].ended


GRPC = (b"content-type", b"application/grpc")
GRPC_PATH = b"/xai_api.Chat/GetCompletion"


def test_a_grpc_call_recorded_then_replayed_with_its_status() -> None:
    cassette = Cassette()
    request = grpc_frame(b"\x0a\x02hi")
    answer = [grpc_frame(b"\x0a\x05hello"), grpc_frame(b"\x0a\x03bye")]
    trailers = [(b"grpc-status", b"0"), (b"grpc-message", b"")]
    session = H2Session(lambda: Engine(cassette, Config(mode=Mode.RECORD)))
    client = Client()
    sid = client.request(body=request, path=GRPC_PATH, extra=(GRPC, (b"te", b"trailers")))
    forward = pump(session, client)[0]
    assert isinstance(forward, H2Event)
    assert isinstance(forward.event, Forward)
    assert forward.event.request.body == request
    engine = forward.engine
    engine.upstream_head(200, [GRPC], mono=1.0)
    joined = b"".join(answer)
    engine.upstream_data(joined[:7], mono=1.1)  # cut mid-message, as a socket may
    engine.upstream_data(joined[7:], mono=1.2)
    engine.upstream_trailers(trailers, mono=1.3)
    engine.upstream_end(mono=1.3)
    done = pump(session, client)[-1]
    assert isinstance(done, H2Event)
    assert done.engine.record() is not None
    assert client.answers[sid].data == joined
    assert client.answers[sid].trailers == trailers
    # replayed: the same messages, then the same status, ending the stream
    session = H2Session(lambda: Engine(cassette, Config(mode=Mode.REPLAY)))
    client = Client()
    sid = client.request(body=request, path=GRPC_PATH, extra=(GRPC,))
    pump(session, client)
    assert client.answers[sid].frames == answer
    assert client.answers[sid].trailers == trailers
    assert client.answers[sid].ended


@pytest.mark.parametrize("message", [b" ", b" lead", b"trail ", b"\tboth\t", b" in side "])
def test_a_value_with_spaces_around_it_is_forwarded_recorded_and_replayed_as_it_came(
    message: bytes,
) -> None:
    """gRPC sends such a grpc-message (its Percent-Encoded grammar leaves
    the space); h2 stripped it on the way out, and the core before it."""
    cassette = Cassette()
    request = grpc_frame(b"\x0a\x02hi")
    head = [GRPC, (b"x-pad", message)]
    trailers = [(b"grpc-status", b"9"), (b"grpc-message", message)]
    session = H2Session(lambda: Engine(cassette, Config(mode=Mode.RECORD)))
    client = Client(strict=False)
    sid = client.request(body=request, path=GRPC_PATH, extra=(GRPC,))
    forward = pump(session, client)[0]
    assert isinstance(forward, H2Event)
    forward.engine.upstream_head(200, head, mono=1.0)
    forward.engine.upstream_trailers(trailers, mono=1.1)
    forward.engine.upstream_end(mono=1.2)
    done = pump(session, client)[-1]
    assert isinstance(done, H2Event)
    recorded = done.engine.record()
    assert recorded is not None
    line = json.loads(recorded.line)["response"]
    assert [message.decode()] * 2 == [
        dict(line["headers"])["x-pad"],
        dict(line["trailers"])["grpc-message"],
    ]
    answers = [client.answers[sid]]
    session = H2Session(lambda: Engine(cassette, Config(mode=Mode.REPLAY)))
    client = Client(strict=False)
    sid = client.request(body=request, path=GRPC_PATH, extra=(GRPC,))
    pump(session, client)
    answers.append(client.answers[sid])
    for answer in answers:  # forwarded, then replayed
        assert answer.headers[1:] == head
        assert answer.trailers == trailers
        assert answer.ended


@pytest.mark.parametrize("bad", [b"a\r\nx-injected: 1", b"a\nb", b"\x00"])
@pytest.mark.parametrize("where", ["head", "trailers"])
def test_a_recorded_value_with_a_nul_cr_or_lf_never_reaches_the_client(
    bad: bytes, where: str
) -> None:
    """A line edited by hand may hold one: the stream is reset (the client
    takes no answer for whole), and the error says which field."""
    session = replay_session(mode=Mode.RECORD)
    client = Client()
    sid = client.request(body=grpc_frame(b""), path=GRPC_PATH, extra=(GRPC,))
    pump(session, client)
    field = ((b"grpc-message", bad),)
    if where == "trailers":
        session.send(sid, ResponseHead(200, (GRPC,), b""))
    event = ResponseHead(200, field, b"") if where == "head" else Trailers(field)
    with pytest.raises(LocalProtocolError, match=r"byte in the value of b'grpc-message'"):
        session.send(sid, event)
    client.receive(session.data_to_send())
    assert client.answers[sid].reset == h2.errors.ErrorCodes.INTERNAL_ERROR
    assert client.answers[sid].trailers is None
    assert not client.answers[sid].ended
    session.send(sid, EndOfResponse(None))  # the stream is gone: nothing more
    assert session.data_to_send() == b""


def _frames(data: bytes) -> list[Frame_]:
    """The frames in ``data``, parsed."""
    frames = []
    while data:
        frame, length = Frame_.parse_frame_header(memoryview(data[:9]))
        frame.parse_body(memoryview(data[9 : 9 + length]))
        frames.append(frame)
        data = data[9 + length :]
    return frames


_REQUEST = [(b":method", b"POST"), (b":path", b"/v1/chat/completions"), (b":scheme", b"http")]


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        ([*_REQUEST, (b":authority", b"h"), (b"X-Upper", b"1")], "an uppercase header name"),
        ([*_REQUEST, (b":authority", b"h"), (b"connection", b"close")], "connection-specific"),
        ([*_REQUEST, (b":authority", b"h"), (b"te", b"gzip")], "only 'trailers'"),
        ([*_REQUEST, (b":authority", b"h"), (b"x-a", b"a\rb")], "a CR byte"),
        ([*_REQUEST, (b"x-a", b"1"), (b":authority", b"h")], "after a regular field"),
        ([(b":path", b"/"), (b":scheme", b"http"), (b":authority", b"h")], "no :method"),
    ],
)
def test_a_malformed_request_is_refused_on_its_stream_only(
    headers: list[tuple[bytes, bytes]], why: str
) -> None:
    """h2 made it a connection error (GOAWAY: every call on the connection
    failed); RFC 9113 8.1.1 makes it the stream's: a 400 saying which rule."""
    session = replay_session(interaction(), mode=Mode.REPLAY)
    client = Client(raw=True)
    bad = client.conn.get_next_available_stream_id()
    client.conn.send_headers(bad, headers, end_stream=True)
    good = client.request()
    seen = pump(session, client)
    (refused,) = [item for item in seen if isinstance(item, H2Refused)]
    assert refused.stream_id == bad
    assert why in str(refused.error)
    assert client.answers[bad].status == 400
    assert why in json.loads(client.answers[bad].data)["error"]["message"]
    assert client.answers[good].status == 200
    assert client.goaway is None


def test_malformed_request_trailers_refuse_the_request() -> None:
    session = replay_session(interaction(), mode=Mode.REPLAY)
    client = Client(raw=True)
    sid = client.request(end=False)
    client.conn.send_headers(sid, [(b":path", b"/x")], end_stream=True)
    seen = pump(session, client)
    assert [item.stream_id for item in seen if isinstance(item, H2Refused)] == [sid]
    assert client.answers[sid].status == 400
    assert client.goaway is None


def test_a_request_value_with_spaces_around_it_is_taken() -> None:
    """gRPC metadata may have them (grpcio sends them): h2 refused the
    connection.  The request is taken; its values are read as HTTP reads
    them, as every request's are (see docs/reliability.md)."""
    session = replay_session(interaction(), mode=Mode.REPLAY)
    client = Client(raw=True)
    sid = client.request(extra=((b"x-note", b" hi "),))
    seen = pump(session, client)
    replay = seen[0]
    assert isinstance(replay, H2Event)
    assert isinstance(replay.event, Replay)
    assert replay.event.request.header("x-note") == b"hi"
    assert client.answers[sid].status == 200
    assert client.goaway is None


def test_a_credential_in_a_response_is_never_indexed() -> None:
    """h2's outbound normalization kept it out of HPACK's table; Reel's does."""
    session = replay_session(mode=Mode.RECORD)
    client = Client()
    sid = client.request()
    pump(session, client)
    head = ((b"authorization", b"Bearer x"), (b"x-a", b"1"), (b"cookie", b"a=1"))
    session.send(sid, ResponseHead(200, head, b""))
    sent = session.data_to_send()
    client.receive(sent)
    assert client.answers[sid].headers[1:] == list(head)
    decoder = hpack.Decoder()
    (frame,) = [f for f in _frames(sent) if isinstance(f, HeadersFrame)]
    fields = list(decoder.decode(frame.data, raw=True))
    assert [type(f).__name__ for f in fields[1:]] == [
        "NeverIndexedHeaderTuple",
        "HeaderTuple",
        "NeverIndexedHeaderTuple",
    ]


def test_a_grpc_miss_is_not_found_in_the_trailers() -> None:
    session = replay_session(mode=Mode.REPLAY)
    client = Client()
    sid = client.request(body=grpc_frame(b"\x0a\x02no"), path=GRPC_PATH, extra=(GRPC,))
    pump(session, client)
    answer = client.answers[sid]
    assert answer.status == 200
    assert b"x-reel-miss" in dict(answer.headers)
    assert answer.trailers is not None
    assert dict(answer.trailers)[b"grpc-status"] == b"5"
    assert answer.ended


def test_a_cut_resets_the_stream() -> None:
    session = replay_session(mode=Mode.RECORD)
    client = Client()
    sid = client.request()
    forward = pump(session, client)[0]
    assert isinstance(forward, H2Event)
    engine = forward.engine
    engine.upstream_head(200, [], mono=1.0)
    from reel_core import UpstreamError

    engine.upstream_error(UpstreamError.RESET, "gone", mono=2.0)
    seen = pump(session, client)
    assert isinstance(seen[-2], H2Event)
    assert isinstance(seen[-2].event, Cut)
    assert client.answers[sid].reset == h2.errors.ErrorCodes.INTERNAL_ERROR
    assert not client.answers[sid].ended


def test_pseudo_and_hop_by_hop_fields_are_not_sent() -> None:
    session = replay_session(mode=Mode.RECORD)
    client = Client()
    sid = client.request()
    forward = pump(session, client)[0]
    assert isinstance(forward, H2Event)
    head = ((b":status", b"500"), (b"x-kept", b"1"), (b"transfer-encoding", b"chunked"))
    session.send(sid, ResponseHead(200, head, b""))
    session.send(sid, Trailers(((b":path", b"/x"), (b"grpc-status", b"0"))))
    session.send(sid, EndOfResponse(None))
    client.receive(session.data_to_send())
    assert client.answers[sid].headers == [(b":status", b"200"), (b"x-kept", b"1")]
    assert client.answers[sid].trailers == [(b"grpc-status", b"0")]


def test_a_head_h2_refuses_is_a_local_error_and_a_reset() -> None:
    session = replay_session(mode=Mode.RECORD)
    client = Client()
    sid = client.request()
    pump(session, client)
    session.send(sid, ResponseHead(200, ((b"", b"no name"),), b""))
    with pytest.raises(LocalProtocolError, match="h2 refused the response head"):
        session.send(sid, ResponseHead(200, (), b""))  # a second head
    client.receive(session.data_to_send())
    assert client.answers[sid].headers == [(b":status", b"200")]
    assert client.answers[sid].reset == h2.errors.ErrorCodes.INTERNAL_ERROR
    session.send(sid, EndOfResponse(None))  # the stream is gone: nothing more
    assert session.data_to_send() == b""


def test_a_goaway_in_the_same_bytes_as_requests_ends_them_quietly() -> None:
    session = replay_session(interaction(), limits=Limits(max_head=300))
    client = Client()
    ok = client.request()
    big = client.request(extra=((b"x-big", b"v" * 300),))
    client.conn.close_connection()
    session.receive_data(client.wire())  # no error: h2 can send nothing now
    assert session.next_event() is Signal.CLOSED
    assert (ok, big) == (1, 3)


def test_only_response_events_are_sent() -> None:
    session = replay_session()
    with pytest.raises(LocalProtocolError, match="Signal"):
        session.send(1, Signal.PAUSED)  # type: ignore[arg-type]


# -- limits --------------------------------------------------------------------


def test_a_body_over_the_limit_is_a_413_on_its_stream() -> None:
    session = replay_session(interaction(), limits=Limits(max_body=100))
    client = Client()
    big = client.request(body=b"x" * 50, end=False)
    client.conn.send_data(big, b"y" * 60)
    small = client.request()
    seen = pump(session, client)
    client.conn.send_data(big, b"z" * 10, end_stream=True)  # the rest is let go
    seen += pump(session, client)
    refused = [e for e in seen if isinstance(e, H2Refused)]
    assert [(r.stream_id, r.error.status) for r in refused] == [(big, 413)]
    answer = client.answers[big]
    assert answer.status == 413
    assert answer.ended
    error = json.loads(answer.data)["error"]
    assert "100-byte limit" in error["message"]
    assert client.answers[small].status == 200


def test_a_head_over_the_limit_is_a_431_on_its_stream() -> None:
    session = replay_session(limits=Limits(max_head=300))
    client = Client()
    sid = client.request(extra=((b"x-big", b"v" * 300),))
    seen = pump(session, client)
    assert [(e.stream_id, e.error.status) for e in seen if isinstance(e, H2Refused)] == [(sid, 431)]
    assert client.answers[sid].status == 431
    assert client.answers[sid].ended


def test_a_head_over_the_default_limit_is_its_streams_431() -> None:
    # h2's own fence (64 KiB) equals Limits' default: without the adapter's
    # higher one the connection would fail instead
    session = replay_session(interaction())
    client = Client()
    big = client.request(extra=((b"x-big", b"v" * 70_000),))
    small = client.request()
    pump(session, client)
    assert client.answers[big].status == 431
    assert client.answers[small].status == 200


def test_a_head_past_the_fence_fails_the_connection() -> None:
    # an HPACK bomb: one 4 KB field indexed, then named 300 times (about
    # 1.2 MB decoded from a block of about 4.3 KB); built by hand, as h2's
    # client would refuse to
    session = replay_session()
    head = [(b":method", b"GET"), (b":path", b"/"), (b":scheme", b"http"), (b":authority", b"a")]
    block = hpack.Encoder().encode([*head, *[(b"x-big", b"v" * 4000)] * 300], huffman=False)
    assert len(block) < 5000
    frame = HeadersFrame(1, data=block, flags=["END_STREAM", "END_HEADERS"])
    with pytest.raises(RemoteProtocolError, match="Oversized header block"):
        session.receive_data(Client().wire() + frame.serialize())
    client = Client()
    client.receive(session.data_to_send())
    assert client.goaway is not None
    assert client.goaway.error_code == h2.errors.ErrorCodes.ENHANCE_YOUR_CALM
    assert HEAD_FENCE < 300 * 4000


def test_a_reset_after_the_refusal_is_let_go() -> None:
    session = replay_session(limits=Limits(max_head=300))
    client = Client()
    sid = client.request(extra=((b"x-big", b"v" * 300),), end=False)
    pump(session, client)
    assert client.answers[sid].status == 431
    assert client.answers[sid].ended
    client.conn.reset_stream(sid)
    assert pump(session, client) == []


def test_connect_is_refused_on_its_stream() -> None:
    session = replay_session()
    client = Client()
    sid = client.conn.get_next_available_stream_id()
    client.conn.send_headers(
        sid, [(b":method", b"CONNECT"), (b":authority", b"example.test:443")], end_stream=True
    )
    seen = pump(session, client)
    assert isinstance(seen[0], H2Refused)
    assert seen[0].error.status == 405
    assert client.answers[sid].status == 405


def test_the_server_limits_concurrent_streams() -> None:
    session = H2Session(lambda: Engine(Cassette()), max_concurrent_streams=7)
    client = Client()
    pump(session, client)
    assert client.conn.remote_settings.max_concurrent_streams == 7


def test_a_refused_answer_waits_for_the_window_too() -> None:
    session = replay_session(limits=Limits(max_body=10))
    client = Client(window=5)
    client.auto_window = False
    sid = client.request(body=b"x" * 11)
    pump(session, client)
    assert len(client.answers[sid].data) == 5
    assert not client.answers[sid].ended
    client.conn.reset_stream(sid)
    pump(session, client)  # reset while queued: nothing more is sent


# -- optional dependency -------------------------------------------------------


def test_a_missing_h2_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "h2", None)
    monkeypatch.delitem(sys.modules, "reel_core._h2_session")
    with pytest.raises(ImportError, match=r"pip install 'reel-llm\[h2\]'"):
        importlib.import_module("reel_core._h2_session")
    monkeypatch.undo()
    assert importlib.import_module("reel_core._h2_session").H2Session is H2Session


def test_tools_loads_the_adapter_when_asked() -> None:
    import reel_core.tools

    assert reel_core.tools.H2Session is H2Session


# -- any cutting of the client's bytes -----------------------------------------


def _conversation() -> tuple[Client, bytes, list[int]]:
    client = Client()
    ids = [
        client.request(body=b'{"n":1}'),
        client.request(body=b'{"n":2}', end=False),
        client.request(body=b'{"n":9}'),
    ]
    client.conn.send_data(ids[1], b"", end_stream=True)
    return client, client.wire(), ids


def _answers(cuts: list[int] | None) -> tuple[dict[int, tuple[int, bytes, bool]], list[int]]:
    """The answers a client reads when the server got its bytes cut at
    ``cuts`` (whole when ``None``)."""
    one = interaction(id="one", body=b'{"n":1}', response_body=b"A" * 5000)
    two = interaction(
        id="two",
        body=b'{"n":2}',
        stream="sse",
        frames=SSE,
        end_ms=1200.0,
        headers=(("content-type", "text/event-stream"),),
    )
    session = replay_session(one, two, mode=Mode.REPLAY)
    client, data, ids = _conversation()
    points = sorted({c % len(data) for c in cuts or ()} | {0, len(data)})
    out = b""
    for a, b in itertools.pairwise(points):
        session.receive_data(data[a:b])
        serve(session)
        out += session.data_to_send()
    client.receive(out)  # the client reads everything at the end
    answers = {sid: (a.status, a.data, a.ended) for sid, a in client.answers.items()}
    return answers, ids


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=10_000), max_size=30))
def test_any_cutting_of_the_clients_bytes_gives_the_same_answers(cuts: list[int]) -> None:
    whole, ids = _answers(None)
    assert set(whole) == set(ids)
    assert whole[ids[0]] == (200, b"A" * 5000, True)
    assert whole[ids[1]] == (200, b"".join(d for _, d in SSE), True)
    assert whole[ids[2]][0] == 404
    assert whole[ids[2]][2]
    assert _answers(cuts)[0] == whole


# -- any interleaving of concurrent streams -------------------------------------

#: Recorded answers by request body; any other body is a miss.
RECORDED = {b'{"n":1}': b"A" * 3000, b'{"n":2}': b'{"a":2}', b'{"n":3}': b""}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from([*RECORDED, b'{"n":9}']), min_size=1, max_size=4),
    st.lists(st.integers(min_value=0, max_value=3), max_size=40),
    st.integers(min_value=1, max_value=8),
)
def test_each_stream_gets_its_own_answer_whatever_the_interleaving(
    bodies: list[bytes], order: list[int], chunk: int
) -> None:
    recorded = [
        interaction(id=f"r{i}", body=body, response_body=answer)
        for i, (body, answer) in enumerate(RECORDED.items())
    ]
    session = replay_session(*recorded, mode=Mode.REPLAY)
    client = Client()
    ids = [client.request(body=b"", end=False) for _ in bodies]
    left = [[body[i : i + chunk] for i in range(0, len(body), chunk)] for body in bodies]
    # the body pieces of every stream in the drawn order (each stream's own in
    # its order), then whatever the draw left, then each stream's end
    for pick in [*order, *list(range(len(bodies))) * 8]:
        k = pick % len(bodies)
        if left[k]:
            client.conn.send_data(ids[k], left[k].pop(0))
            pump(session, client)
    for sid in ids:
        client.conn.end_stream(sid)
        pump(session, client)
    for sid, body in zip(ids, bodies, strict=True):
        answer = client.answers[sid]
        assert answer.ended
        if body in RECORDED:
            assert (answer.status, answer.data) == (200, RECORDED[body])
        else:
            assert answer.status == 404
