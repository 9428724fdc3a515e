"""The answers Reel makes itself over HTTP/2, as an h2 client reads them: a
gRPC call gets ``200`` and its status in the trailers for every refusal and
failure (issue 35), any other request the status and JSON it always got."""

from __future__ import annotations

import json

import h2.errors
import pytest

from reel_core import (
    Cassette,
    Config,
    Cut,
    Engine,
    Forward,
    Limits,
    MatchConfig,
    Mode,
    RemoteProtocolError,
    Request,
    UpstreamError,
)
from reel_core._h2_session import H2Event, H2Refused, H2Session
from reel_core.tools import grpc_frame, percent_decode

from .test_h2_session import Answer, Client, pump

PATH = b"/xai_api.Chat/GetCompletion"
GRPC = b"application/grpc"
JSON = b"application/json"


def call(
    client: Client,
    content_type: bytes,
    *,
    body: bytes = grpc_frame(b"\x0a\x01m"),
    extra: tuple[tuple[bytes, bytes], ...] = (),
    method: bytes = b"POST",
) -> int:
    sid: int = client.conn.get_next_available_stream_id()
    head = [(b":method", method), (b":authority", b"api.x.ai")]
    if method != b"CONNECT":
        head += [(b":path", PATH), (b":scheme", b"http")]
    head += [(b"content-type", content_type), *extra]
    client.conn.send_headers(sid, head, end_stream=not body)
    if body:
        client.conn.send_data(sid, body, end_stream=True)
    return sid


def grpc_status(answer: Answer) -> tuple[int, str]:
    """A gRPC answer's code and message, checked to be a gRPC answer."""
    assert answer.status == 200
    assert (b"content-type", GRPC) in answer.headers
    assert answer.data == b""
    assert answer.ended
    assert answer.reset is None
    fields = dict(answer.trailers or [])
    return int(fields[b"grpc-status"]), percent_decode(fields[b"grpc-message"])


def session_of(**config: object) -> H2Session:
    cassette = Cassette("c.jsonl")
    return H2Session(lambda: Engine(cassette, Config(**config)))  # type: ignore[arg-type]


@pytest.mark.parametrize(("content_type", "grpc"), [(GRPC, True), (JSON, False)])
def test_a_head_over_the_limit(content_type: bytes, grpc: bool) -> None:
    session = session_of(mode=Mode.REPLAY, limits=Limits(max_head=300))
    client = Client()
    sid = call(client, content_type, extra=((b"x-big", b"v" * 300),))
    seen = pump(session, client)
    assert [(e.stream_id, e.error.status) for e in seen if isinstance(e, H2Refused)] == [(sid, 431)]
    answer = client.answers[sid]
    if grpc:
        code, message = grpc_status(answer)
        assert code == 8  # RESOURCE_EXHAUSTED
        assert "300-byte limit" in message
    else:
        assert answer.status == 431
        assert json.loads(answer.data)["error"]["type"] == "reel_bad_request"


@pytest.mark.parametrize(("content_type", "grpc"), [(GRPC, True), (JSON, False)])
def test_a_body_over_the_limit(content_type: bytes, grpc: bool) -> None:
    session = session_of(mode=Mode.REPLAY, limits=Limits(max_body=100))
    client = Client()
    sid = call(client, content_type, body=grpc_frame(b"x" * 200))
    pump(session, client)
    answer = client.answers[sid]
    if grpc:
        code, message = grpc_status(answer)
        assert code == 8  # RESOURCE_EXHAUSTED
        assert "100-byte limit" in message
    else:
        assert answer.status == 413


@pytest.mark.parametrize(("content_type", "grpc"), [(GRPC, True), (JSON, False)])
def test_connect_is_unimplemented(content_type: bytes, grpc: bool) -> None:
    session = session_of(mode=Mode.REPLAY)
    client = Client()
    sid = call(client, content_type, body=b"", method=b"CONNECT")
    pump(session, client)
    answer = client.answers[sid]
    if grpc:
        assert grpc_status(answer) == (12, "Reel does not serve CONNECT requests")
    else:
        assert answer.status == 405


@pytest.mark.parametrize(
    ("error", "code", "status"),
    [
        (UpstreamError.REFUSED, 14, 502),
        (UpstreamError.RESET, 14, 502),
        (UpstreamError.CLOSED, 14, 502),
        (UpstreamError.TIMEOUT, 4, 504),
        (UpstreamError.PROTOCOL, 13, 502),
    ],
)
@pytest.mark.parametrize("grpc", [True, False])
def test_an_upstream_failure(error: UpstreamError, code: int, status: int, grpc: bool) -> None:
    session = session_of(mode=Mode.RECORD)
    client = Client()
    sid = call(client, GRPC if grpc else JSON)
    forward = pump(session, client)[0]
    assert isinstance(forward, H2Event)
    assert isinstance(forward.event, Forward)
    forward.engine.upstream_error(error, "gone", mono=0.0)
    pump(session, client)
    answer = client.answers[sid]
    if grpc:
        got, message = grpc_status(answer)
        assert got == code
        assert message == (
            f"Reel could not reach the upstream for {PATH.decode()}: {error.value} (gone)"
        )
    else:
        assert answer.status == status
        assert json.loads(answer.data)["error"]["failure"] == error.value


def test_a_message_keeps_its_spaces_through_the_wire() -> None:
    def select(request: Request) -> Cassette:
        raise RemoteProtocolError("  no such cassette  ", 404)

    session = H2Session(lambda: Engine(select))
    client = Client()
    sid = call(client, GRPC)
    pump(session, client)
    assert grpc_status(client.answers[sid]) == (5, "  no such cassette  ")
    assert dict(client.answers[sid].trailers or [])[b"grpc-message"].startswith(b"%20%20no")


def test_a_broken_cassette_line_is_internal() -> None:
    request = Request(
        "POST",
        PATH.decode(),
        ((b"host", b"api.x.ai"), (b"content-type", GRPC)),
        grpc_frame(b"\x0a\x01m"),
    )
    key = Engine(Cassette()).recorded_request(request).key(MatchConfig())
    broken = b'{"key":"' + key.encode() + b'","id":BROKEN}'
    cassette = Cassette.loads(Cassette().meta.to_line() + broken + b"\n", name="c.jsonl")
    session = H2Session(lambda: Engine(cassette))
    client = Client()
    sid = call(client, GRPC)
    pump(session, client)
    code, message = grpc_status(client.answers[sid])
    assert code == 13  # INTERNAL
    assert "c.jsonl:2: not a JSON line" in message


@pytest.mark.parametrize(
    ("error", "code"),
    [(UpstreamError.RESET, 14), (UpstreamError.CLOSED, 14), (UpstreamError.TIMEOUT, 4)],
)
def test_a_grpc_answer_that_broke_off_ends_with_its_status_recorded_then_replayed(
    error: UpstreamError, code: int
) -> None:
    cassette = Cassette("c.jsonl")
    session = H2Session(lambda: Engine(cassette, Config(mode=Mode.RECORD)))
    client = Client()
    sid = call(client, GRPC)
    forward = pump(session, client)[0]
    assert isinstance(forward, H2Event)
    engine = forward.engine
    engine.upstream_head(200, [(b"content-type", GRPC)], mono=1.0)
    engine.upstream_data(grpc_frame(b"part"), mono=1.1)
    engine.upstream_error(error, "gone", mono=2.0)
    seen = pump(session, client)
    assert any(isinstance(e, H2Event) and isinstance(e.event, Cut) for e in seen)
    said = (code, f"Reel: the call broke off ({error.value}: gone)")
    live = client.answers[sid]
    assert live.reset is None
    assert live.ended
    assert live.data == grpc_frame(b"part")  # what came goes out first
    assert grpc_code_of(live) == said
    recorded = engine.record()
    assert recorded is not None
    # replayed: the same end, the upstream gone
    again = H2Session(lambda: Engine(Cassette.loads(cassette.dumps(), name="c.jsonl")))
    client = Client()
    sid = call(client, GRPC)
    pump(again, client)
    assert client.answers[sid].data == grpc_frame(b"part")
    assert grpc_code_of(client.answers[sid]) == said


def grpc_code_of(answer: Answer) -> tuple[int, str]:
    fields = dict(answer.trailers or [])
    return int(fields[b"grpc-status"]), percent_decode(fields[b"grpc-message"])


def test_a_cut_before_any_head_resets_a_grpc_stream() -> None:
    session = session_of(mode=Mode.RECORD)
    client = Client()
    sid = call(client, GRPC)
    pump(session, client)
    session.send(sid, Cut("reset", "gone"))  # the engine cuts after a head only
    client.receive(session.data_to_send())
    assert client.answers[sid].reset == h2.errors.ErrorCodes.INTERNAL_ERROR
