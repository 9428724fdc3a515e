"""The answers Reel makes itself (issue 35): for a gRPC call a gRPC status
(``200``, no message, ``grpc-status`` and ``grpc-message`` trailers), for
any other request the status and JSON error they always were.

Every kind of answer Reel makes itself is a scenario here, driven through
the engine; a hypothesis property runs each with gRPC content types and
others, and any message text."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reel_core import (
    Abort,
    Cassette,
    CassetteError,
    Config,
    EndOfResponse,
    Engine,
    Event,
    Forward,
    Frame,
    MatchConfig,
    Miss,
    Mode,
    Refused,
    RemoteProtocolError,
    Request,
    ResponseHead,
    Trailers,
    UpstreamError,
)
from reel_core.tools import (
    REPLAY_KEY,
    GrpcStatus,
    grpc_code,
    grpc_error_answer,
    grpc_frame,
    own_answer,
    percent_decode,
    percent_encode,
)

from ._helpers import pull

PATH = "/xai_api.Chat/GetCompletion"

#: Content types a gRPC client sends (case and parameters aside).
GRPC_TYPES = (
    b"application/grpc",
    b"application/grpc+proto",
    b"application/grpc+json",
    b"Application/GRPC; charset=utf-8",
)
#: Content types that are not gRPC (gRPC-Web is another protocol).
OTHER_TYPES = (None, b"application/json", b"application/grpc-web", b"text/plain")


def grpc_request(content_type: bytes | None, target: str = PATH) -> Request:
    headers = [(b"host", b"api.x.ai")]
    if content_type is not None:
        headers.append((b"content-type", content_type))
    return Request("POST", target, tuple(headers), grpc_frame(b"\x0a\x01m"))


def events_of(engine: Engine) -> list[Event]:
    return pull(engine)[0]


# -- the scenarios: every answer Reel makes itself ------------------------------


@dataclass(frozen=True)
class Scenario:
    """One kind of answer of Reel's own: how to get it for a request (its
    text ``said`` somewhere in the message), its HTTP status and JSON
    ``type``, and the gRPC status a gRPC client gets instead."""

    name: str
    run: Callable[[Request, str, bool], list[Event]]
    status: int
    kind: str
    code: GrpcStatus


def _miss(request: Request, said: str, trailers: bool) -> list[Event]:
    engine = Engine(Cassette(said or "c"), Config(mode=Mode.REPLAY))
    engine.reads_trailers = trailers
    engine.receive_request(request)
    return events_of(engine)


def _failing(error: UpstreamError | Abort) -> Callable[[Request, str, bool], list[Event]]:
    def run(request: Request, said: str, trailers: bool) -> list[Event]:
        engine = Engine(Cassette(), Config(mode=Mode.RECORD))
        engine.reads_trailers = trailers
        engine.receive_request(request)
        assert isinstance(engine.next_event(), Forward)
        engine.upstream_error(error, said, mono=0.0)
        return events_of(engine)

    return run


def _selected(error: Exception) -> Callable[[Request, str, bool], list[Event]]:
    def run(request: Request, said: str, trailers: bool) -> list[Event]:
        def select(_: Request) -> Cassette:
            if isinstance(error, RemoteProtocolError):
                raise RemoteProtocolError(f"{error} {said}", error.status)
            raise CassetteError("notes.txt", None, f"not a Reel cassette {said}")

        engine = Engine(select)
        engine.reads_trailers = trailers
        engine.receive_request(request)
        return events_of(engine)

    return run


def _no_upstream(request: Request, said: str, trailers: bool) -> list[Event]:
    engine = Engine(Cassette(), Config(mode=Mode.AUTO, routing=True))
    engine.reads_trailers = trailers
    engine.receive_request(
        Request(request.method, f"/api/generate?q={len(said)}", request.headers, request.body)
    )
    return events_of(engine)


def _broken_line(request: Request, said: str, trailers: bool) -> list[Event]:
    key = Engine(Cassette()).recorded_request(request).key(MatchConfig())
    # Indexed (key first, ends in "}") but not JSON: found only when used.
    broken = b'{"key":"' + key.encode() + b'","id":BROKEN}'
    cassette = Cassette.loads(Cassette().meta.to_line() + broken + b"\n", name="c.jsonl")
    engine = Engine(cassette)
    engine.reads_trailers = trailers
    engine.receive_request(request)
    return events_of(engine)


def _placeholder(request: Request, said: str, trailers: bool) -> list[Event]:
    engine = Engine(Cassette(), Config(mode=Mode.RECORD))
    engine.reads_trailers = trailers
    keyed = ((b"authorization", f"Bearer {REPLAY_KEY}".encode()),)
    target = f"/v1/chat/completions?q={len(said)}"
    engine.receive_request(Request(request.method, target, request.headers + keyed, request.body))
    return events_of(engine)


#: Each way the upstream fails before its head, and the gRPC status it is.
FAILURES: list[tuple[UpstreamError | Abort, GrpcStatus]] = [
    (UpstreamError.REFUSED, GrpcStatus.UNAVAILABLE),
    (UpstreamError.DNS, GrpcStatus.UNAVAILABLE),
    (UpstreamError.TLS, GrpcStatus.UNAVAILABLE),
    (UpstreamError.RESET, GrpcStatus.UNAVAILABLE),
    (UpstreamError.CLOSED, GrpcStatus.UNAVAILABLE),
    (UpstreamError.TIMEOUT, GrpcStatus.DEADLINE_EXCEEDED),
    (UpstreamError.PROTOCOL, GrpcStatus.INTERNAL),
    (Abort.STORE, GrpcStatus.UNAVAILABLE),
    (Abort.CLIENT_CLOSED, GrpcStatus.CANCELLED),
]

SCENARIOS = [
    Scenario("miss", _miss, 404, "reel_miss", GrpcStatus.NOT_FOUND),
    *[
        Scenario(f"upstream {e.value}", _failing(e), e.status, "reel_upstream_error", code)
        for e, code in FAILURES
    ],
    Scenario(
        "bad cassette name",
        _selected(RemoteProtocolError("bad cassette name", 400)),
        400,
        "reel_bad_cassette",
        GrpcStatus.INVALID_ARGUMENT,
    ),
    Scenario(
        "cassette not found",
        _selected(RemoteProtocolError("no cassette", 404)),
        404,
        "reel_bad_cassette",
        GrpcStatus.NOT_FOUND,
    ),
    Scenario(
        "store down",
        _selected(RemoteProtocolError("the store is down", 502)),
        502,
        "reel_bad_cassette",
        GrpcStatus.UNAVAILABLE,
    ),
    Scenario(
        "no cassette at all",
        _selected(CassetteError("x", None, "x")),
        500,
        "reel_bad_cassette",
        GrpcStatus.INTERNAL,
    ),
    Scenario("broken line", _broken_line, 500, "reel_bad_cassette", GrpcStatus.INTERNAL),
    Scenario("no upstream", _no_upstream, 421, "reel_no_upstream", GrpcStatus.UNIMPLEMENTED),
    Scenario(
        "placeholder key", _placeholder, 401, "reel_placeholder_key", GrpcStatus.UNAUTHENTICATED
    ),
]


def answer_of(events: list[Event]) -> tuple[ResponseHead, bytes, Trailers | None]:
    """The head, the body and the trailers of an exchange's events."""
    heads = [e for e in events if isinstance(e, ResponseHead)]
    assert len(heads) == 1
    assert isinstance(events[-1], EndOfResponse)
    body = b"".join([e.data for e in events if isinstance(e, Frame)])
    trailers = [e for e in events if isinstance(e, Trailers)]
    return heads[0], body, trailers[0] if trailers else None


def said_text(events: list[Event]) -> str:
    """The message the decision carries (a refusal's, a miss's line)."""
    decision = events[0]
    if isinstance(decision, Refused):
        return decision.message
    assert isinstance(decision, Miss)
    return decision.report.summary()


@given(
    scenario=st.sampled_from(SCENARIOS),
    grpc_type=st.sampled_from(GRPC_TYPES),
    plain=st.one_of(
        st.tuples(st.sampled_from(OTHER_TYPES), st.booleans()),
        # a gRPC request over HTTP/1.1, which carries no trailers
        st.tuples(st.sampled_from(GRPC_TYPES), st.just(False)),
    ),
    said=st.text(max_size=40),
)
def test_a_grpc_call_never_gets_a_non_200_or_a_body_from_reel(
    scenario: Scenario,
    grpc_type: bytes,
    plain: tuple[bytes | None, bool],
    said: str,
) -> None:
    said = said.replace("\x00", "")  # a cassette name cannot hold it
    # not a gRPC call, or a client that reads no trailers: the status and
    # JSON error it always got
    other_type, trailers_read = plain
    events = scenario.run(grpc_request(other_type), said, trailers_read)
    head, body, trailers = answer_of(events)
    assert head.status == scenario.status
    assert dict(head.headers)[b"content-type"] == b"application/json"
    assert trailers is None
    if scenario.kind == "reel_miss":
        assert json.loads(body)["error"]["type"] == "reel_miss"
    else:
        error = json.loads(body)["error"]
        assert error["type"] == error["code"] == scenario.kind
    # the same answer to a gRPC call: a gRPC status, the message in the trailers
    events = scenario.run(grpc_request(grpc_type), said, True)
    head, body, trailers = answer_of(events)
    assert head.status == 200
    assert dict(head.headers)[b"content-type"] == b"application/grpc"
    assert not any(isinstance(e, Frame) for e in events)
    assert body == b""
    assert trailers is not None
    fields = dict(trailers.headers)
    assert fields[b"grpc-status"] == b"%d" % scenario.code
    message = fields[b"grpc-message"]
    assert all(0x20 <= b < 0x7F for b in message)
    assert message == message.strip(b" \t")
    if isinstance(events[0], (Refused, Miss)):
        assert percent_decode(message) == said_text(events)
    else:  # an upstream failure: the decision was the Forward
        assert "upstream" in percent_decode(message) or "store" in percent_decode(message)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_each_answer_of_reels_own_to_a_grpc_call(scenario: Scenario) -> None:
    events = scenario.run(grpc_request(b"application/grpc"), "", True)
    head, body, trailers = answer_of(events)
    assert (head.status, body) == (200, b"")
    assert trailers is not None
    assert dict(trailers.headers)[b"grpc-status"] == b"%d" % scenario.code


def test_an_upstream_timeout_is_deadline_exceeded_with_what_failed() -> None:
    # issue 35: it was a 504 with a JSON body, read by a gRPC client as
    # UNAVAILABLE with no detail
    events = _failing(UpstreamError.TIMEOUT)(grpc_request(b"application/grpc"), "read 30 s", True)
    head, _, trailers = answer_of(events)
    assert head.status == 200
    assert trailers is not None
    fields = dict(trailers.headers)
    assert fields[b"grpc-status"] == b"4"
    assert percent_decode(fields[b"grpc-message"]) == (
        f"Reel could not reach the upstream for {PATH}: timeout (read 30 s)"
    )


def test_a_grpc_miss_over_http_1_1_is_a_404_not_an_empty_200() -> None:
    # a client that reads no trailers would take a 200 with its status in
    # trailers it never got for a success (the miss was answered so before)
    engine = Engine(Cassette("c"), Config(mode=Mode.REPLAY))
    assert not engine.reads_trailers  # the default: the HTTP/1.1 adapter's
    engine.receive_request(grpc_request(b"application/grpc"))
    head, body, trailers = answer_of(events_of(engine))
    assert head.status == 404
    assert trailers is None
    assert json.loads(body)["error"]["type"] == "reel_miss"


def test_a_head_request_of_grpc_is_still_a_grpc_status() -> None:
    events = own_answer(b"application/grpc", 413, "reel_bad_request", "big", head_only=True)
    assert [type(e) for e in events] == [ResponseHead, Trailers, EndOfResponse]


def test_a_json_answer_is_what_it_was() -> None:
    events = own_answer(None, 502, "reel_upstream_error", "down", failure="refused")
    head, frame, end = events
    assert isinstance(head, ResponseHead)
    assert isinstance(frame, Frame)
    assert head.status == 502
    assert head.headers == (
        (b"content-type", b"application/json"),
        (b"content-length", str(len(frame.data)).encode()),
    )
    assert json.loads(frame.data) == {
        "error": {
            "type": "reel_upstream_error",
            "code": "reel_upstream_error",
            "message": "down",
            "failure": "refused",
        }
    }
    assert end == EndOfResponse(0.0)
    head, end = own_answer(None, 404, "reel_miss", "m", body=b"{}\n", head_only=True)
    assert head == ResponseHead(
        404, ((b"content-type", b"application/json"), (b"content-length", b"3"))
    )


# -- the table -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "failure", "code"),
    [
        (400, None, GrpcStatus.INVALID_ARGUMENT),
        (401, None, GrpcStatus.UNAUTHENTICATED),
        (403, None, GrpcStatus.PERMISSION_DENIED),
        (404, None, GrpcStatus.NOT_FOUND),
        (405, None, GrpcStatus.UNIMPLEMENTED),
        (408, None, GrpcStatus.DEADLINE_EXCEEDED),
        (413, None, GrpcStatus.RESOURCE_EXHAUSTED),
        (421, None, GrpcStatus.UNIMPLEMENTED),
        (429, None, GrpcStatus.RESOURCE_EXHAUSTED),
        (431, None, GrpcStatus.RESOURCE_EXHAUSTED),
        (500, None, GrpcStatus.INTERNAL),
        (501, None, GrpcStatus.UNIMPLEMENTED),
        (502, None, GrpcStatus.UNAVAILABLE),
        (503, None, GrpcStatus.UNAVAILABLE),
        (504, None, GrpcStatus.DEADLINE_EXCEEDED),
        (502, "refused", GrpcStatus.UNAVAILABLE),
        (502, "protocol", GrpcStatus.INTERNAL),
        (502, "client-closed", GrpcStatus.CANCELLED),
        (502, "store", GrpcStatus.UNAVAILABLE),
        (504, "timeout", GrpcStatus.DEADLINE_EXCEEDED),
        (418, None, GrpcStatus.UNKNOWN),
    ],
)
def test_the_grpc_status_of_each_answer(status: int, failure: str | None, code: GrpcStatus) -> None:
    assert grpc_code(status, failure) is code
    answered, headers, trailers = grpc_error_answer(status, " why ", failure=failure)
    assert answered == 200
    assert headers == ((b"content-type", b"application/grpc"),)
    assert trailers == ((b"grpc-status", b"%d" % code), (b"grpc-message", b"%20why%20"))


# -- grpc-message --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (" leading", b"%20leading"),
        ("trailing  ", b"trailing%20%20"),
        ("  both ends  ", b"%20%20both ends%20%20"),
        ("   ", b"%20%20%20"),
        ("", b""),
        ("tab\tinside", b"tab%09inside"),
        ("\udcff", b"%ED%B3%BF"),  # a lone surrogate: encoded, not an error
    ],
)
def test_grpc_message_survives_header_whitespace_stripping(text: str, value: bytes) -> None:
    assert percent_encode(text) == value
    assert percent_decode(value) == text


@given(st.text(st.characters(exclude_categories=())))  # lone surrogates too
def test_percent_decode_undoes_percent_encode_for_any_text(text: str) -> None:
    encoded = percent_encode(text)
    assert percent_decode(encoded) == text
    # a legal header value (visible ASCII and space) that no stripping changes
    assert all(0x20 <= b < 0x7F for b in encoded)
    assert encoded == encoded.strip() == encoded.strip(b" \t")


def test_percent_decode_reads_what_others_send() -> None:
    assert percent_decode(b"100%") == "100%"  # no triple: kept as it is (the spec)
    assert percent_decode(b"%zz%4") == "%zz%4"
    assert percent_decode(b"%FF!") == "\ufffd!"  # not UTF-8: replaced, not an error
