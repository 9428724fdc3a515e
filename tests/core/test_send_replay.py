"""A replay's response sent whole (``Session.send_replay``): the client gets
byte for byte what sending each event gives, and the connection goes on
(or closes) as it would.

Each case serves the same client bytes through two sessions of the same
cassette: one sends every response it can whole, the other pulls and sends
event by event, the oracle.
"""

from __future__ import annotations

import gzip
from collections.abc import Sequence

import pytest

from reel_core import (
    Cassette,
    Config,
    Cut,
    EndOfResponse,
    Engine,
    Event,
    Frame,
    Interaction,
    Limits,
    LocalProtocolError,
    Mode,
    Recorded,
    RemoteProtocolError,
    Replay,
    ResponseHead,
    Session,
    Signal,
    State,
    StreamCut,
    Timing,
)
from reel_core import _session as session_module
from reel_core._reader import RequestReader

from ._helpers import cassette_of, client_bytes, interaction, parse_response, request, state

BODY = b'{"model":"m","messages":[]}'
SSE = ((0.0, b"data: 1\n\n"), (250.0, b"data: 2\n\n"), (1000.0, b"data: [DONE]\n\n"))


def sse(**kw: object) -> Interaction:
    return interaction(
        stream="sse",
        frames=SSE,
        end_ms=1200.0,
        headers=(("content-type", "text/event-stream"), ("x-request-id", "req_1")),
        **kw,  # type: ignore[arg-type]
    )


def serve(
    session: Session, chunks: Sequence[bytes], *, whole: bool
) -> tuple[bytes, list[str], int]:
    """Feed ``chunks`` and answer every request, keeping the connection up
    while the session allows; the bytes sent back, the decisions, and how
    many responses went out whole."""
    out = b""
    decisions: list[str] = []
    wholes = 0
    for chunk in chunks:
        session.receive_data(chunk)
        while True:
            event = session.next_event()
            if event is Signal.PAUSED and state(session) is State.DONE and session.keep_alive:
                session.start_next_cycle()
                continue
            if isinstance(event, Signal):
                break
            if isinstance(event, (ResponseHead, Frame, EndOfResponse, Cut)):
                out += session.send(event)
                continue
            decisions.append(type(event).__name__)
            sent = session.send_replay() if whole else None
            if sent is not None:
                head, data = sent
                assert data.startswith(b"HTTP/1.%s %d " % (data[7:8], head.status))
                out += data
                wholes += 1
    return out, decisions, wholes


def both(
    cassette: bytes, chunks: Sequence[bytes], timing: str = "fast"
) -> tuple[bytes, list[str], int, Session]:
    """Serve ``chunks`` both ways; they must agree.  What the whole way gave."""
    config = Config(timing=Timing.parse(timing))
    oracle = Session(Cassette.loads(cassette), config)
    expected, decisions, none = serve(oracle, chunks, whole=False)
    assert none == 0
    session = Session(Cassette.loads(cassette), config)
    out, got, wholes = serve(session, chunks, whole=True)
    assert out == expected
    assert got == decisions
    assert session.keep_alive == oracle.keep_alive
    assert state(session) is state(oracle)
    return out, decisions, wholes, session


def line(*interactions: Interaction) -> bytes:
    return b"".join(i.to_line() for i in interactions)


@pytest.mark.parametrize("timing", ["fast", "realtime"])
def test_a_body_is_sent_whole_in_any_timing(timing: str) -> None:
    wire = client_bytes(body=BODY)
    out, decisions, wholes, _ = both(line(interaction(response_body=b'{"ok":1}')), [wire], timing)
    assert decisions == ["Replay"]
    assert wholes == 1
    head, body, complete = parse_response(out)
    assert (head.status_code, body, complete) == (200, b'{"ok":1}', True)


def test_a_stream_is_sent_whole_in_fast_timing_only() -> None:
    wire = client_bytes(body=BODY)
    out, _, wholes, _ = both(line(sse()), [wire], "fast")
    assert wholes == 1
    head, body, complete = parse_response(out)
    assert (b"transfer-encoding", b"chunked") in head.headers
    assert (body, complete) == (b"".join(d for _, d in SSE), True)
    # realtime: the frames wait for their deadlines, event by event
    _, _, wholes, _ = both(line(sse()), [wire], "realtime")
    assert wholes == 0


def test_a_head_request_gets_the_head_alone() -> None:
    rec = interaction("HEAD", "/v1/models", b"", response_body=b"abc")
    for r in (rec, sse(method="HEAD", path="/v1/models", body=b"")):
        out, _, wholes, _ = both(line(r), [client_bytes("HEAD", "/v1/models", body=b"")] * 2)
        assert wholes == 2
        first, _, _ = parse_response(out, method="HEAD")
        assert out.count(b"HTTP/1.1 200 OK\r\n") == 2
        assert first.status_code == 200


def test_a_retried_request_is_served_whole_each_time_in_order() -> None:
    cassette = line(
        interaction(id="a", status=429, response_body=b'{"error":"slow down"}'),
        interaction(id="b", response_body=b'{"ok":true}'),
    )
    wire = client_bytes(body=BODY)
    out, decisions, wholes, _ = both(cassette, [wire, wire, wire, wire])
    assert decisions == ["Replay"] * 4
    assert wholes == 4  # the fourth repeats the last (replay mode's default)
    assert out.count(b"HTTP/1.1 429 ") == 1
    assert out.count(b"HTTP/1.1 200 ") == 3


def test_pipelined_requests_are_each_served() -> None:
    wire = client_bytes(body=BODY) * 3 + client_bytes(body=b'{"other":1}')
    out, decisions, wholes, session = both(line(interaction()), [wire])
    assert decisions == ["Replay", "Replay", "Replay", "Miss"]
    assert wholes == 3
    assert out.count(b"HTTP/1.1 200 ") == 3
    assert b"HTTP/1.1 404 " in out
    assert session.next_event() is Signal.NEED_DATA


@pytest.mark.parametrize("record", [interaction(response_body=b"{}"), sse()])
@pytest.mark.parametrize(
    "connection",
    [[b"close"], [b"keep-alive"], [b"Keep-Alive, Close"], [b"keep-alive", b"close"], [b"TE"]],
)
def test_connection_headers_close_as_h11_would(
    record: Interaction, connection: list[bytes]
) -> None:
    wire = client_bytes(headers=[(b"connection", v) for v in connection], body=BODY)
    closes = any(b"close" in v.lower() for v in connection)
    out, decisions, wholes, _ = both(line(record), [wire, wire])
    assert wholes == len(decisions) == (1 if closes else 2)
    assert (b"Connection: close\r\n" in out) is closes


@pytest.mark.parametrize("record", [interaction(response_body=b"{}"), sse()])
def test_an_http_1_0_client_gets_a_close_delimited_answer(record: Interaction) -> None:
    wire = b"POST /v1/chat/completions HTTP/1.0\r\nContent-Length: 27\r\n\r\n" + BODY
    out, _, wholes, session = both(line(record), [wire])
    assert wholes == 1
    assert b"Connection: close\r\n" in out
    assert b"transfer-encoding" not in out.lower()
    assert not session.keep_alive
    with pytest.raises(LocalProtocolError, match="not in a reusable state"):
        session.start_next_cycle()


def test_a_gzip_recorded_body_is_sent_as_it_is_replayed() -> None:
    packed = gzip.compress(b'{"text":"' + b"hello " * 200 + b'"}')
    engine = Engine(Cassette(), Config(mode=Mode.RECORD))
    engine.receive_request(request(BODY))
    assert not isinstance(engine.next_event(), Signal)  # the forward
    headers = [(b"content-type", b"application/json"), (b"content-encoding", b"gzip")]
    engine.upstream_head(200, headers, mono=0.0)
    engine.upstream_data(packed, mono=0.0)
    engine.upstream_end(mono=0.0)
    while not isinstance(engine.next_event(), Signal):
        pass
    recorded = engine.record()
    assert isinstance(recorded, Recorded)
    out, _, wholes, _ = both(recorded.line, [client_bytes(body=BODY)])
    assert wholes == 1
    assert parse_response(out)[1] == gzip.decompress(packed)


def test_responses_that_cannot_go_whole_go_event_by_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cut = interaction(stream="chunks", frames=((0.0, b"part"),), cut=StreamCut(1.0, "reset"))
    _, _, wholes, session = both(line(cut), [client_bytes(body=BODY)])
    assert wholes == 0
    assert not session.keep_alive  # the cut closes the connection
    big = interaction(response_body=b"x" * (session_module.WHOLE_MAX + 1))
    _, _, wholes, _ = both(line(big), [client_bytes(body=BODY)])
    assert wholes == 0
    # a response h11 refuses: a lowercase "head" is no HEAD to h11, which
    # then waits for the body the head announces (each way fails alike)
    rec = interaction("HEAD", "/v1/models", b"", response_body=b"abc")
    for whole in (False, True):
        session = Session(cassette_of(rec))
        with pytest.raises(LocalProtocolError, match="Too little data"):
            serve(session, [client_bytes("head", "/v1/models", body=b"")], whole=whole)


def test_misses_refusals_and_pulled_responses_are_not_sent_whole() -> None:
    session = Session(cassette_of(interaction()))
    session.receive_data(client_bytes(body=b'{"other":1}'))
    assert type(session.next_event()).__name__ == "Miss"
    assert session.send_replay() is None
    session = Session(cassette_of(interaction()))
    session.receive_data(client_bytes(body=BODY))
    assert isinstance(session.next_event(), Replay)
    head = session.next_event()
    assert isinstance(head, ResponseHead)
    assert session.send_replay() is None  # its head was pulled
    assert session.send(head).startswith(b"HTTP/1.1 200 ")
    assert Session(Cassette()).send_replay() is None  # nothing asked yet


def test_a_client_that_closed_is_answered_event_by_event() -> None:
    wire = client_bytes(body=BODY)
    session = Session(cassette_of(interaction()))
    session.receive_data(wire)
    session.receive_data(b"")  # its EOF: h11 closes after the answer
    assert isinstance(session.next_event(), Replay)
    assert session.send_replay() is None
    # once the answer went whole, an EOF is read on the next cycle
    session = Session(cassette_of(interaction()))
    session.receive_data(wire)
    assert isinstance(session.next_event(), Replay)
    assert session.send_replay() is not None
    session.receive_data(b"")
    assert session.next_event() is Signal.PAUSED
    assert session.keep_alive
    session.start_next_cycle()
    assert session.next_event() is Signal.CLOSED


def test_after_a_whole_response_nothing_more_is_sent() -> None:
    session = Session(cassette_of(interaction()))
    session.receive_data(client_bytes(body=BODY))
    assert isinstance(session.next_event(), Replay)
    assert session.send_replay() is not None
    with pytest.raises(LocalProtocolError, match="sent whole"):
        session.send(EndOfResponse())
    assert session.error_response(RemoteProtocolError("late", 400)) == b""


def replaying(engine: Engine) -> tuple[Event, ...] | None:
    """``engine.replaying``, read afresh (no narrowing from earlier asserts)."""
    return engine.replaying


def test_the_engine_hands_out_a_replay_whole_only_before_it_is_pulled() -> None:
    engine = Engine(cassette_of(interaction()))
    with pytest.raises(LocalProtocolError, match="take_replay"):
        engine.take_replay()
    assert state(engine) is State.ERROR
    engine = Engine(cassette_of(interaction()))
    engine.receive_request(request(BODY))
    assert replaying(engine) is None  # the decision comes first
    assert isinstance(engine.next_event(), Replay)
    events = replaying(engine)
    assert events is not None
    assert [type(e) for e in events] == [ResponseHead, Frame, EndOfResponse]
    assert engine.take_replay() is events
    assert state(engine) is State.DONE
    assert engine.next_event() is Signal.PAUSED
    engine.start_next_cycle()
    engine.receive_request(request(BODY))
    engine.next_event()
    assert replaying(engine) is events  # the same recording: the same events


def test_kept_responses_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    cassette = line(interaction(id="a"), interaction(body=b'{"b":1}', id="b"))
    wire = client_bytes(body=BODY) + client_bytes(body=b'{"b":1}')
    _, _, wholes, _ = both(cassette, [wire, wire])
    assert wholes == 4
    monkeypatch.setattr(session_module, "_WHOLE_BYTES", 150)  # one response or so
    _, decisions, wholes, _ = both(cassette, [wire, wire])
    assert decisions == ["Replay"] * 4
    assert wholes == 4


def test_one_recording_is_kept_for_each_shape_of_request() -> None:
    """The sessions of one cassette share what they serialized; a request
    of another shape (HTTP version, Connection) gets its own bytes."""
    cassette = cassette_of(interaction(response_body=b'{"ok":1}'))
    answers = []
    for wire in (
        client_bytes(body=BODY),
        client_bytes(headers=[(b"connection", b"close")], body=BODY),
        client_bytes(body=BODY),
    ):
        session = Session(cassette)
        session.receive_data(wire)
        assert isinstance(session.next_event(), Replay)
        sent = session.send_replay()
        assert sent is not None
        answers.append(sent[1])
    assert answers[0] == answers[2]
    assert answers[1] == answers[0].replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1)


def test_a_reader_sends_whole_only_in_place_of_a_response() -> None:
    reader = RequestReader(Limits())
    with pytest.raises(LocalProtocolError, match="in place of the whole response"):
        reader.sent_whole(True)  # no request read yet


#: Framing and hop-by-hop headers a hand-edited line may hold (Reel records none).
FRAMING = (
    ("Content-Length", "999"),
    ("Transfer-Encoding", "chunked"),
    ("Connection", "close"),
    ("Keep-Alive", "timeout=5"),
)


def test_a_hand_edited_lines_framing_headers_are_not_replayed() -> None:
    """A replay frames what it sends itself: a whole body gets one
    ``Content-Length``, its own, and a stream none (chunked), whatever
    framing a hand-edited line holds; the other headers are kept."""
    headers = (("content-type", "application/json"), *FRAMING, ("x-request-id", "req_1"))
    whole = interaction(headers=headers, response_body=b'{"ok":1}')
    stream = interaction(
        stream="sse",
        frames=SSE,
        end_ms=1200.0,
        headers=(("content-type", "text/event-stream"), *FRAMING),
    )
    for rec, expected_body in ((whole, b'{"ok":1}'), (stream, b"".join(d for _, d in SSE))):
        wire = client_bytes(body=BODY)
        out, decisions, _, _ = both(line(rec), [wire])
        assert decisions == ["Replay"]
        head, body, complete = parse_response(out)
        assert (head.status_code, body, complete) == (200, expected_body, True)
        names = [name for name, _ in head.headers]
        assert b"keep-alive" not in names
        assert (b"connection", b"close") not in head.headers
        if rec is whole:
            assert names.count(b"content-length") == 1
            assert (b"content-length", b"8") in head.headers
            assert b"transfer-encoding" not in names
            assert (b"x-request-id", b"req_1") in head.headers
        else:
            assert b"content-length" not in names
            assert names.count(b"transfer-encoding") == 1  # h11's own: chunked
