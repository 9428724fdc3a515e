"""gRPC's length-prefixed messages: the splitter, the whole-body reader, the
content type, ``grpc-message``'s percent-encoding, a miss's answer, and a
gRPC response recorded as its messages (byte-exact on replay)."""

from __future__ import annotations

import base64
import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reel_core import (
    Cassette,
    Config,
    EndOfResponse,
    Engine,
    Frame,
    Interaction,
    MatchConfig,
    Miss,
    Mode,
    RecordedRequest,
    RecordedResponse,
    Redactor,
    RemoteProtocolError,
    Request,
    ResponseHead,
    Trailers,
)
from reel_core._record import Recorder
from reel_core.tools import (
    GrpcSplitter,
    GrpcStatus,
    grpc_frame,
    grpc_messages,
    grpc_miss_answer,
    is_grpc,
    match_key,
    percent_encode,
)

from ._helpers import cassette_of, pull, random_split, request

GRPC_HEAD = ((b"content-type", b"application/grpc"),)
CALL = RecordedRequest("POST", "/xai_api.Chat/GetCompletion", (), grpc_frame(b"\x0a\x01m"))
SECRET = "sk-proj-" + "Q7wE9rT2yU4iO6pA8sD0" * 3

_messages = st.lists(st.binary(max_size=300), max_size=8)


def split(splitter: GrpcSplitter, pieces: list[bytes]) -> tuple[list[bytes], bytes]:
    out: list[bytes] = []
    for piece in pieces:
        out += splitter.feed(piece)
    return out, splitter.close()


# -- framing -----------------------------------------------------------------------


def test_a_frame_is_flag_length_and_message() -> None:
    assert grpc_frame(b"hi") == b"\x00\x00\x00\x00\x02hi"
    assert grpc_frame(b"", compressed=True) == b"\x01\x00\x00\x00\x00"


@given(_messages, st.randoms(use_true_random=False), st.integers(1, 40))
def test_any_messages_any_cutting_come_out_whole_and_byte_exact(
    messages: list[bytes], rng: random.Random, pieces: int
) -> None:
    frames = [grpc_frame(m, compressed=rng.random() < 0.3) for m in messages]
    body = b"".join(frames)
    for cutting in (random_split(body, rng, pieces), [body[i : i + 1] for i in range(len(body))]):
        out, rest = split(GrpcSplitter(), cutting)
        assert out == frames
        assert rest == b""
    assert grpc_messages(body) == messages


@given(_messages, st.binary(min_size=1, max_size=30), st.randoms(use_true_random=False))
def test_an_unfinished_tail_is_what_close_returns(
    messages: list[bytes], tail: bytes, rng: random.Random
) -> None:
    frames = [grpc_frame(m) for m in messages]
    # a prefix declaring more bytes than follow, or a prefix cut short
    unfinished = grpc_frame(tail)[:-1] if len(tail) > 1 else grpc_frame(tail)[:3]
    body = b"".join(frames) + unfinished
    out, rest = split(GrpcSplitter(), random_split(body, rng, 7))
    assert out == frames
    assert b"".join(out) + rest == body
    assert rest == unfinished
    with pytest.raises(RemoteProtocolError, match="gRPC body truncated"):
        grpc_messages(body)


def test_truncated_bodies_say_where() -> None:
    with pytest.raises(RemoteProtocolError, match=r"3 bytes at offset 7 are not a whole 5-byte"):
        grpc_messages(grpc_frame(b"ab") + b"\x00\x00\x00")
    with pytest.raises(RemoteProtocolError, match=r"offset 0 declares 9 bytes and 2 follow") as e:
        grpc_messages(b"\x00\x00\x00\x00\x09ab")
    assert e.value.status == 400


def test_a_message_over_the_limit_is_refused_at_its_prefix() -> None:
    prefix = b"\x00" + (1000).to_bytes(4, "big")
    with pytest.raises(RemoteProtocolError, match="1000 bytes is over the 999-byte") as e:
        grpc_messages(prefix + b"x" * 1000, max_message=999)
    assert e.value.status == 413
    splitter = GrpcSplitter(max_message=999, hint="raise it with --max-body")
    with pytest.raises(RemoteProtocolError, match="999-byte body limit: raise it with --max-body"):
        splitter.feed(prefix)  # before any of its bytes came
    assert grpc_messages(prefix + b"x" * 1000, max_message=1000) == [b"x" * 1000]


def test_close_resets_the_splitter() -> None:
    splitter = GrpcSplitter()
    assert splitter.feed(b"\x00\x00\x00\x00\x05ab") == []
    assert splitter.close() == b"\x00\x00\x00\x00\x05ab"
    assert splitter.feed(grpc_frame(b"z")) == [grpc_frame(b"z")]


@pytest.mark.parametrize(
    ("content_type", "grpc"),
    [
        ("application/grpc", True),
        ("application/grpc+proto", True),
        (b"Application/GRPC; charset=utf-8", True),
        ("application/grpc+json", True),
        ("application/grpc-web", False),
        ("application/grpc-web+proto", False),
        ("application/json", False),
        ("", False),
        (None, False),
    ],
)
def test_is_grpc(content_type: str | bytes | None, grpc: bool) -> None:
    assert is_grpc(content_type) is grpc


# -- status and miss ------------------------------------------------------------------


def test_status_codes_have_grpcs_names() -> None:
    assert GrpcStatus(0) is GrpcStatus.OK
    assert GrpcStatus(5) is GrpcStatus.NOT_FOUND
    assert GrpcStatus(16) is GrpcStatus.UNAUTHENTICATED
    assert b"%d" % GrpcStatus.NOT_FOUND == b"5"
    assert [s.value for s in GrpcStatus] == list(range(17))


def test_grpc_message_is_percent_encoded_as_the_spec_says() -> None:
    # space and visible ASCII pass, ``%`` and everything else is %XX of UTF-8
    assert percent_encode("a b~!") == b"a b~!"
    assert percent_encode("100%") == b"100%25"
    assert percent_encode("é\n") == b"%C3%A9%0A"


@given(st.text())
def test_percent_encoding_is_ascii_and_reversible(text: str) -> None:
    from urllib.parse import unquote_to_bytes

    encoded = percent_encode(text)
    assert all(0x20 <= b < 0x7F for b in encoded)
    assert unquote_to_bytes(encoded) == text.encode("utf-8", "surrogatepass")


def test_a_miss_is_not_found_with_the_report_in_grpc_message() -> None:
    engine = Engine(Cassette("c"), Config(mode=Mode.REPLAY))
    engine.receive_request(request(target="/xai_api.Chat/GetCompletion"))
    miss = engine.next_event()
    report = miss.report  # type: ignore[union-attr]
    status, headers, trailers = grpc_miss_answer(report)
    assert status == 200
    assert headers == ((b"content-type", b"application/grpc"),)
    assert trailers[0] == (b"grpc-status", b"5")
    name, message = trailers[1]
    assert name == b"grpc-message"
    assert message == percent_encode(report.summary())
    assert b"Reel miss" in message
    assert b"/xai_api.Chat/GetCompletion" in message


# -- recording ------------------------------------------------------------------------


def recorder(redactor: Redactor | None = None, max_body: int = 1 << 20) -> Recorder:
    return Recorder(
        CALL,
        key="sha256:" + "0" * 64,
        id="g",
        redactor=redactor or Redactor(),
        provider="xai",
        endpoint="POST /xai_api.Chat/GetCompletion",
        max_body=max_body,
    )


def record(
    chunks: list[tuple[float, bytes]],
    redactor: Redactor | None = None,
    max_body: int = 1 << 20,
) -> Interaction:
    rec = recorder(redactor, max_body)
    rec.head(200, GRPC_HEAD, 0.0, None)
    for at, chunk in chunks:
        rec.data(chunk, at)
    rec.trailers(((b"grpc-status", b"0"),))
    return rec.end(max((at for at, _ in chunks), default=0.0) + 0.01)


def test_a_grpc_response_is_stored_as_its_messages_when_each_completed() -> None:
    one, two = grpc_frame(b"\x08\x01first"), grpc_frame(b"\xff\x00second")
    body = one + two
    got = record([(0.010, body[:3]), (0.020, body[3:15]), (0.030, body[15:])])
    response = got.response
    assert response.stream == "grpc"
    assert response.frames == ((20.0, one), (30.0, two))
    assert response.trailers == (("grpc-status", "0"),)
    assert got.meta["shape"] == "grpc"
    line = json.loads(got.to_line())
    assert line["response"]["stream"] == "grpc"
    assert line["response"]["frames"][1][1] == {"base64": base64.b64encode(two).decode()}
    assert Interaction.from_json(line) == got


def test_an_unfinished_last_message_is_a_frame_of_its_own() -> None:
    body = grpc_frame(b"ok") + b"\x00\x00\x00\x00\x09par"
    response = record([(0.01, body)]).response
    assert response.frames == ((10.0, grpc_frame(b"ok")), (20.0, b"\x00\x00\x00\x00\x09par"))


def test_a_message_over_the_body_limit_is_kept_as_timed_chunks() -> None:
    big = b"\x00" + (5000).to_bytes(4, "big") + b"x" * 20
    body = grpc_frame(b"ok") + big
    response = record([(0.01, body[:9]), (0.02, body[9:])], max_body=1000).response
    assert response.stream == "chunks"
    assert response.content == body


def test_a_secret_in_a_message_is_scrubbed_and_the_prefix_stays_true() -> None:
    message = f"key={SECRET};".encode()
    response = record([(0.01, grpc_frame(message) + grpc_frame(b"plain"))]).response
    first, second = (data for _, data in response.frames)
    assert SECRET.encode() not in first
    assert grpc_messages(first + second)[1] == b"plain"
    assert len(grpc_messages(first)) == 1
    assert second == grpc_frame(b"plain")


def test_the_requests_credential_echoed_in_a_message_is_scrubbed() -> None:
    from reel_core._literals import CREDENTIAL_HEADERS, exchange_redactor

    token = "tok-" + "9f8e7d6c5b4a3210" * 2
    scrub = exchange_redactor(
        Redactor(), ((b"authorization", f"Bearer {token}".encode()),), CREDENTIAL_HEADERS, CALL
    )
    response = record([(0.01, grpc_frame(f"echo {token}".encode()))], redactor=scrub).response
    (frame,) = (data for _, data in response.frames)
    assert token.encode() not in frame
    assert len(grpc_messages(frame)) == 1
    # stored redacted and redacted again (``reel redact``): unchanged
    assert response.redacted(Redactor()) == response
    found: list[tuple[str, list[str]]] = []
    RecordedResponse(200, stream="grpc", frames=((0.0, grpc_frame(SECRET.encode())),)).redacted(
        Redactor(), lambda where, kinds: found.append((where, kinds))
    )
    assert found[-1][0] == "response.frames"
    assert found[-1][1]


@given(
    _messages,
    st.randoms(use_true_random=False),
    st.integers(1, 12),
)
def test_any_grpc_stream_replays_byte_exact(
    messages: list[bytes], rng: random.Random, pieces: int
) -> None:
    body = b"".join(grpc_frame(m) for m in messages)
    chunks = random_split(body, rng, pieces)
    recorded = record([(0.001 * (i + 1), c) for i, c in enumerate(chunks)])
    stored = Interaction(
        key=request_key(),
        id="g",
        request=recorded.request,
        response=recorded.response,
    )
    engine = Engine(cassette_of(stored), Config(mode=Mode.REPLAY))
    engine.receive_request(grpc_request())
    events, _ = pull(engine)
    kinds = [type(e) for e in events[1:]]
    assert kinds[0] is ResponseHead
    assert kinds[-2:] == [Trailers, EndOfResponse]
    replayed = [e.data for e in events if isinstance(e, Frame)]
    assert b"".join(replayed) == body
    assert replayed == [grpc_frame(m) for m in messages]


def grpc_request() -> Request:
    return request(
        grpc_frame(b"\x0a\x01m"),
        target="/xai_api.Chat/GetCompletion",
        headers=((b"host", b"api.x.ai"), (b"content-type", b"application/grpc")),
    )


def request_key() -> str:
    return match_key("POST", "/xai_api.Chat/GetCompletion", (), CALL.body, MatchConfig())


def test_the_engine_answers_a_grpc_miss_with_its_status() -> None:
    engine = Engine(Cassette("c"), Config(mode=Mode.REPLAY))
    engine.reads_trailers = True  # as the HTTP/2 adapter and the gRPC channels set it
    engine.receive_request(grpc_request())
    events, _ = pull(engine)
    miss, head, trailers, end = events
    assert isinstance(miss, Miss)
    assert isinstance(head, ResponseHead)
    assert isinstance(trailers, Trailers)
    assert end == EndOfResponse(0.0)
    status, headers, expected = grpc_miss_answer(miss.report)
    assert head.status == status == 200
    assert head.headers[0] == headers[0]
    assert dict(head.headers)[b"x-reel-miss"].startswith(b"sha256:")
    assert trailers.headers == expected
    assert dict(trailers.headers)[b"grpc-status"] == b"5"


def test_grpc_frames_are_written_base64_even_when_they_are_text() -> None:
    got = record([(0.01, grpc_frame(b"plain text"))])
    frames = json.loads(got.to_line())["response"]["frames"]
    assert frames == [[10.0, {"base64": base64.b64encode(grpc_frame(b"plain text")).decode()}]]
