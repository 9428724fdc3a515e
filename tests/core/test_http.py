"""Requests as values, and parsing them from the wire with h11."""

from __future__ import annotations

import random

import h11
import pytest

from reel_core import Hints, Limits, LocalProtocolError, RemoteProtocolError, Request
from reel_core._http import HOP_BY_HOP, header_value, normalize_headers
from reel_core._reader import ReaderSignal, RequestReader

from ._helpers import BINDING_HINTS, client_bytes, random_split, splittings


def test_normalize_headers() -> None:
    assert normalize_headers(
        [("Content-Type", "application/json"), (b" X-Key ", b" v "), (bytearray(b"A"), "é")]  # type: ignore[list-item]
    ) == ((b"content-type", b"application/json"), (b"x-key", b"v"), (b"a", b"\xe9"))
    assert normalize_headers([]) == ()
    # a header typed into a cassette by hand may hold any character
    assert normalize_headers([("x-note", "ok ✓")]) == ((b"x-note", "ok ✓".encode()),)
    assert normalize_headers([("x-bad", "\ud800")]) == ((b"x-bad", b"\\ud800"),)


def test_header_value_is_the_last() -> None:
    headers = ((b"a", b"1"), (b"b", b"2"), (b"a", b"3"))
    assert header_value(headers, b"a") == b"3"
    assert header_value(headers, b"b") == b"2"
    assert header_value(headers, b"c") is None


def test_hop_by_hop() -> None:
    assert b"transfer-encoding" in HOP_BY_HOP
    assert b"connection" in HOP_BY_HOP
    assert b"content-type" not in HOP_BY_HOP


def test_request_value() -> None:
    r = Request(
        "post",
        b"/v1beta/models/g:generateContent?alt=sse&key=K&empty=&a=1&a=2",  # type: ignore[arg-type]
        [("Host", "x"), ("X-Goog-Api-Key", "k1"), ("x-goog-api-key", "k2")],  # type: ignore[arg-type]
        bytearray(b"{}"),  # type: ignore[arg-type]
    )
    assert r.method == "POST"
    assert r.target == "/v1beta/models/g:generateContent?alt=sse&key=K&empty=&a=1&a=2"
    assert r.path == "/v1beta/models/g:generateContent"
    assert r.query == (("alt", "sse"), ("key", "K"), ("empty", ""), ("a", "1"), ("a", "2"))
    assert r.header("X-GOOG-API-KEY") == b"k2"
    assert r.header("missing") is None
    assert type(r.body) is bytes
    assert r == Request("POST", r.target, r.headers, b"{}")
    assert hash(r) == hash(Request("POST", r.target, r.headers, b"{}"))


@pytest.mark.parametrize(
    ("target", "normalized"),
    [
        ("/", "/"),
        ("/v1/x?y=1", "/v1/x?y=1"),
        ("http://api.openai.com/v1/chat/completions", "/v1/chat/completions"),
        ("https://h:8443/v1/x?q=1#frag", "/v1/x?q=1"),
        ("http://localhost:9999", "/"),
        ("http://h?x=1", "/?x=1"),
    ],
)
def test_request_targets(target: str, normalized: str) -> None:
    r = Request("GET", target)
    assert r.target == normalized
    assert r.query == tuple(
        tuple(p.split("=", 1)) for p in normalized.partition("?")[2].split("&") if p
    )


@pytest.mark.parametrize(
    "target", ["", "*", "v1/x", "api.openai.com:443", "http:/x", "http://[x/", "http://[::1"]
)
def test_bad_request_targets(target: str) -> None:
    with pytest.raises(RemoteProtocolError, match="is neither a path nor a URL") as info:
        Request("GET", target)
    assert info.value.status == 400


def test_limits_defaults() -> None:
    assert Limits().max_head == 64 * 1024
    assert Limits().max_body == 32 * 1024 * 1024


# -- the reader ----------------------------------------------------------------


def read_all(chunks: list[bytes], limits: Limits | None = None) -> list[Request | ReaderSignal]:
    """Feed ``chunks`` and collect every request (restarting the cycle after each
    as a server that answered would)."""
    reader = RequestReader(limits or Limits())
    out: list[Request | ReaderSignal] = []
    for chunk in [*chunks, b""]:
        reader.receive_data(chunk)
        while True:
            got = reader.next_request()
            if got is ReaderSignal.NEED_DATA:
                break
            out.append(got)
            if got is ReaderSignal.CLOSED:
                return out
            assert isinstance(got, Request)
            reader.send(h11.Response(status_code=204, headers=[]))
            reader.send(h11.EndOfMessage())
            reader.start_next_cycle()
    return out


BODY = b'{"model":"gpt-4o","messages":[{"role":"user","content":"' + b"hi " * 300 + b'"}]}'
WIRE = {
    "get": client_bytes("GET", "/v1/models?limit=2", body=b""),
    "post": client_bytes("POST", "/v1/chat/completions", [(b"Authorization", b"Bearer k")], BODY),
    "chunked": client_bytes("POST", "/v1/responses", body=BODY, chunked=True),
    "empty post": client_bytes("POST", "/v1/x", body=b""),
    "absolute": client_bytes("POST", "http://api.openai.com/v1/embeddings", body=b"{}"),
}


@pytest.mark.parametrize("name", sorted(WIRE))
def test_any_splitting_gives_the_same_request(name: str) -> None:
    data = WIRE[name]
    results = [read_all(chunks) for chunks in splittings(data, seed=7, randoms=10)]
    first = results[0]
    assert len(first) == 2
    assert first[1] is ReaderSignal.CLOSED
    request = first[0]
    assert isinstance(request, Request)
    for other in results[1:]:
        assert other == first


def test_parsed_requests() -> None:
    post = read_all([WIRE["post"]])[0]
    assert isinstance(post, Request)
    assert post.method == "POST"
    assert post.target == "/v1/chat/completions"
    assert post.body == BODY
    assert post.header("authorization") == b"Bearer k"
    assert post.header("host") == b"reel.test"
    chunked = read_all([WIRE["chunked"]])[0]
    assert isinstance(chunked, Request)
    assert chunked.body == BODY
    assert chunked.header("transfer-encoding") == b"chunked"
    absolute = read_all([WIRE["absolute"]])[0]
    assert isinstance(absolute, Request)
    assert absolute.target == "/v1/embeddings"


def test_pipelined_requests_in_one_buffer() -> None:
    data = WIRE["get"] + WIRE["post"] + WIRE["chunked"]
    for chunks in splittings(data, seed=3, randoms=5):
        got = read_all(chunks)
        assert [g.target if isinstance(g, Request) else g for g in got] == [
            "/v1/models?limit=2",
            "/v1/chat/completions",
            "/v1/responses",
            ReaderSignal.CLOSED,
        ]


def test_a_pipelined_request_waits_for_the_response() -> None:
    reader = RequestReader(Limits())
    reader.receive_data(WIRE["get"] + WIRE["get"])
    assert isinstance(reader.next_request(), Request)
    assert reader.next_request() is ReaderSignal.PAUSED


def test_http_version_and_keep_alive() -> None:
    assert RequestReader(Limits()).client_http_version is None
    reader = RequestReader(Limits())

    def status() -> tuple[bool, bool]:
        return reader.keep_alive, reader.can_respond

    reader.receive_data(WIRE["get"])
    assert isinstance(reader.next_request(), Request)
    assert reader.client_http_version == b"1.1"
    assert status() == (False, True)
    head = reader.send(h11.Response(status_code=200, headers=[(b"content-length", b"2")]))
    assert head.startswith(b"HTTP/1.1 200 ")
    assert status() == (False, False)
    assert reader.send(h11.Data(data=b"ok")) == b"ok"
    assert reader.send(h11.EndOfMessage()) == b""
    assert status() == (True, False)
    reader.start_next_cycle()
    assert status() == (False, True)


def test_connection_close_ends_keep_alive() -> None:
    reader = RequestReader(Limits())
    reader.receive_data(client_bytes("GET", "/", [(b"connection", b"close")], b""))
    assert isinstance(reader.next_request(), Request)
    reader.send(h11.Response(status_code=204, headers=[]))
    reader.send(h11.EndOfMessage())
    assert not reader.keep_alive
    with pytest.raises(LocalProtocolError):
        reader.start_next_cycle()


def test_http_1_0() -> None:
    reader = RequestReader(Limits())
    reader.receive_data(b"GET /v1/models HTTP/1.0\r\n\r\n")
    got = reader.next_request()
    assert isinstance(got, Request)
    assert reader.client_http_version == b"1.0"


def test_idle_eof_is_closed() -> None:
    reader = RequestReader(Limits())
    assert reader.next_request() is ReaderSignal.NEED_DATA
    reader.receive_data(b"")
    assert reader.next_request() is ReaderSignal.CLOSED


@pytest.mark.parametrize(
    "partial",
    [
        b"POST /x HTTP/1.1\r\nHost: a\r\n",
        b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc",
        b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
    ],
)
def test_eof_mid_request_is_a_remote_error(partial: bytes) -> None:
    reader = RequestReader(Limits())
    reader.receive_data(partial)
    assert reader.next_request() is ReaderSignal.NEED_DATA
    reader.receive_data(b"")
    with pytest.raises(RemoteProtocolError) as info:
        reader.next_request()
    assert info.value.status == 400


def test_eof_after_a_parsed_head_is_a_remote_error() -> None:
    """Defensive: should h11 ever report a close once a head was read, the
    reader refuses it rather than dropping the request silently."""

    class Closing:
        their_http_version = None

        def next_event(self) -> object:
            return h11.ConnectionClosed()

    reader = RequestReader(Limits())
    reader._head = h11.Request(method="POST", target="/", headers=[(b"host", b"a")])
    reader._conn = Closing()  # type: ignore[assignment]
    with pytest.raises(RemoteProtocolError, match="client closed the connection mid-request"):
        reader.next_request()


def test_events_a_server_never_receives_are_skipped() -> None:
    """Defensive: the reader loops past any h11 event it has no use for."""

    class Odd:
        they_are_waiting_for_100_continue = False

        def __init__(self) -> None:
            self.events: list[object] = [
                h11.InformationalResponse(status_code=100, headers=[]),
                h11.NEED_DATA,
            ]

        def next_event(self) -> object:
            return self.events.pop(0)

    reader = RequestReader(Limits())
    odd = Odd()
    reader._conn = odd  # type: ignore[assignment]
    assert reader.next_request() is ReaderSignal.NEED_DATA
    assert odd.events == []


def test_data_after_eof_is_a_local_error() -> None:
    reader = RequestReader(Limits())
    reader.receive_data(b"")
    with pytest.raises(LocalProtocolError, match="received close, then received more data"):
        reader.receive_data(b"GET / HTTP/1.1\r\n")


def test_h11_remote_errors_in_receive_data_are_mapped(monkeypatch: pytest.MonkeyPatch) -> None:
    reader = RequestReader(Limits())

    def refuse(data: bytes) -> None:
        raise h11.RemoteProtocolError("nope", error_status_hint=414)

    monkeypatch.setattr(reader._conn, "receive_data", refuse)
    with pytest.raises(RemoteProtocolError, match="nope") as info:
        reader.receive_data(b"x")
    assert info.value.status == 414


@pytest.mark.parametrize(
    "garbage",
    [
        b"garbage\r\n\r\n",
        b"GET / HTTP/1.1\r\n\r\n",  # no Host
        b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nno colon here\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ],
)
def test_malformed_requests_are_400(garbage: bytes) -> None:
    outcomes = {_outcome(chunks, Limits()) for chunks in splittings(garbage, seed=1, randoms=2)}
    assert outcomes == {400}


def _outcome(chunks: list[bytes], limits: Limits) -> int:
    """Feed ``chunks``: 200 when the request parsed, else the error status."""
    reader = RequestReader(limits)
    try:
        for c in chunks:
            reader.receive_data(c)
            reader.next_request()
    except RemoteProtocolError as exc:
        return exc.status
    return 200


def test_oversized_head_is_431_however_it_is_split() -> None:
    limits = Limits(max_head=1024)
    data = client_bytes("GET", "/", [(b"x-big", b"a" * 2000)], b"")
    outcomes = {_outcome(chunks, limits) for chunks in splittings(data, seed=2, randoms=5)}
    assert outcomes == {431}


def test_head_limit_boundary_is_the_same_for_every_split() -> None:
    # h11 alone let a whole oversized head through when it came in one read
    limits = Limits(max_head=512)
    outcomes: dict[int, set[int]] = {}
    for pad in range(420, 470):
        data = client_bytes("GET", "/x", [(b"x-big", b"a" * pad)], b"")
        outcomes[len(data)] = {
            _outcome(chunks, limits) for chunks in splittings(data, seed=pad, randoms=6)
        }
    assert all(len(o) == 1 for o in outcomes.values()), outcomes
    accepted = [n for n, o in outcomes.items() if o == {200}]
    refused = [n for n, o in outcomes.items() if o == {431}]
    assert max(accepted) == limits.max_head + 1
    assert min(refused) == limits.max_head + 2


def test_oversized_head_names_the_flag_that_raises_the_limit() -> None:
    """The binding's hint says how to raise the limit; without one, the
    core's setting is named."""
    head = b"GET /x HTTP/1.1\r\nHost: a\r\nX-Long: " + b"y" * 50 + b"\r\n\r\n"
    for hints, says in ((BINDING_HINTS, ".*--max-head BYTES"), (Hints(), "raise Limits.max_head")):
        reader = RequestReader(Limits(max_head=40), hints)
        reader.receive_data(head)
        with pytest.raises(RemoteProtocolError, match=rf"over the 40-byte limit: {says}"):
            reader.next_request()


def test_body_over_the_limit_by_content_length_is_413() -> None:
    limits = Limits(max_body=100)
    reader = RequestReader(limits, BINDING_HINTS)
    # only the head is needed to refuse it
    reader.receive_data(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 101\r\n\r\n")
    with pytest.raises(RemoteProtocolError, match="request body of 101 bytes is over") as info:
        reader.next_request()
    assert info.value.status == 413
    assert str(info.value) == (
        "request body of 101 bytes is over the 100-byte limit: raise the limit with the proxy's "
        "--max-body BYTES, or REEL_MAX_BODY=BYTES (the proxy and the in-process bindings read it)"
    )
    assert reader.can_respond  # a 413 can still be answered


def test_body_at_the_limit_is_fine() -> None:
    limits = Limits(max_body=100)
    for chunked in (False, True):
        got = read_all([client_bytes("POST", "/x", body=b"x" * 100, chunked=chunked)], limits)
        assert isinstance(got[0], Request)
        assert len(got[0].body) == 100


def test_chunked_body_over_the_limit_is_413_while_streaming() -> None:
    limits = Limits(max_body=1000)
    reader = RequestReader(limits, BINDING_HINTS)
    reader.receive_data(b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n")
    assert reader.next_request() is ReaderSignal.NEED_DATA
    rng = random.Random(4)
    sent: list[int] = []

    def stream_until_refused() -> None:
        while True:
            n = rng.randint(1, 300)
            reader.receive_data(f"{n:x}\r\n".encode() + b"y" * n + b"\r\n")
            sent.append(n)
            reader.next_request()

    with pytest.raises(RemoteProtocolError, match="over the 1000-byte limit") as info:
        stream_until_refused()
    assert info.value.status == 413
    assert str(info.value).startswith("request body over the 1000-byte limit: raise the limit")
    assert "--max-body BYTES" in str(info.value)
    assert 1000 < sum(sent) <= 1300  # refused as soon as it went over


def test_connect_is_405() -> None:
    wire = b"CONNECT api.openai.com:443 HTTP/1.1\r\nHost: api.openai.com\r\n\r\n"
    assert {_outcome(chunks, Limits()) for chunks in splittings(wire)} == {405}
    reader = RequestReader(Limits())
    reader.receive_data(wire)
    with pytest.raises(RemoteProtocolError, match="CONNECT is not supported: Reel is not a tunn"):
        reader.next_request()


def test_send_errors_are_local() -> None:
    reader = RequestReader(Limits())
    with pytest.raises(LocalProtocolError):
        reader.send(h11.Data(data=b"x"))  # no request yet
    reader.send_failed()
    assert not reader.can_respond


def test_random_splits_of_many_requests() -> None:
    rng = random.Random(99)
    for _ in range(20):
        bodies = [bytes(rng.randrange(256) for _ in range(rng.randint(0, 200))) for _ in range(3)]
        data = b"".join(
            client_bytes("POST", f"/r{i}", body=b, chunked=bool(i % 2))
            for i, b in enumerate(bodies)
        )
        got = read_all(random_split(data, rng, rng.randint(1, 30)))
        assert [g.body for g in got if isinstance(g, Request)] == bodies


# -- Expect: 100-continue -------------------------------------------------------

EXPECT_HEAD = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n"
    b"Expect: 100-continue\r\n\r\n"
)


def test_a_client_waiting_for_100_continue_is_told_to_go_on_once() -> None:
    reader = RequestReader(Limits())
    reader.receive_data(EXPECT_HEAD)
    assert reader.next_request() is ReaderSignal.CONTINUE
    assert reader.send_continue() == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert reader.next_request() is ReaderSignal.NEED_DATA  # offered once
    reader.receive_data(b"{}{}")
    request = reader.next_request()
    assert isinstance(request, Request)
    assert request.body == b"{}{}"
    assert reader.send(h11.Response(status_code=200, headers=[(b"content-length", b"0")]))
    reader.send(h11.EndOfMessage())
    assert reader.keep_alive  # the interim answer leaves the exchange as it was


def test_100_continue_is_offered_once_even_if_not_sent() -> None:
    reader = RequestReader(Limits())
    reader.receive_data(EXPECT_HEAD)
    assert reader.next_request() is ReaderSignal.CONTINUE
    assert reader.next_request() is ReaderSignal.NEED_DATA


def test_100_continue_is_not_due_once_the_body_is_coming() -> None:
    reader = RequestReader(Limits())
    reader.receive_data(EXPECT_HEAD)
    assert reader.next_request() is ReaderSignal.CONTINUE
    reader.receive_data(b"{}")  # the client did not wait (curl gives up after a second)
    assert reader.next_request() is ReaderSignal.NEED_DATA
    assert reader.send_continue() == b""
    # and a client that sends the body with the head is never offered it
    whole = RequestReader(Limits())
    whole.receive_data(EXPECT_HEAD + b"{}{}")
    assert isinstance(whole.next_request(), Request)


def test_100_continue_is_offered_again_for_the_next_request() -> None:
    reader = RequestReader(Limits())
    reader.receive_data(EXPECT_HEAD)
    assert reader.next_request() is ReaderSignal.CONTINUE
    reader.send_continue()
    reader.receive_data(b"{}{}")
    assert isinstance(reader.next_request(), Request)
    reader.send(h11.Response(status_code=204, headers=[]))
    reader.send(h11.EndOfMessage())
    reader.start_next_cycle()
    reader.receive_data(EXPECT_HEAD)
    assert reader.next_request() is ReaderSignal.CONTINUE


def test_a_body_over_the_limit_is_refused_instead_of_continued() -> None:
    reader = RequestReader(Limits(max_body=3))
    reader.receive_data(EXPECT_HEAD)
    with pytest.raises(RemoteProtocolError) as info:
        reader.next_request()
    assert info.value.status == 413


def test_http_1_0_clients_are_never_offered_100_continue() -> None:
    reader = RequestReader(Limits())
    reader.receive_data(EXPECT_HEAD.replace(b"HTTP/1.1", b"HTTP/1.0"))
    assert reader.next_request() is ReaderSignal.NEED_DATA


@pytest.mark.parametrize(
    "wire",
    [
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
        b"X-Mixed-Case:   padded value  \r\nx-dup: 1\r\nX-Dup: 2\r\n\r\n{}",
        b"get http://api.example/v1/models?a=1&b= HTTP/1.1\r\nHOST: x\r\n\r\n",
        b"HEAD / HTTP/1.0\r\n\r\n",
        b"PoSt /v1/x HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n"
        b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
    ],
)
def test_a_parsed_request_equals_one_built_from_its_values(wire: bytes) -> None:
    """The reader builds its requests without normalizing again what h11
    already did (lowercase names, stripped values): the value is the one
    ``Request(...)`` makes of what h11 parsed."""
    reader = RequestReader(Limits())
    reader.receive_data(wire)
    got = reader.next_request()
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(wire)
    head = conn.next_event()
    assert isinstance(head, h11.Request)
    body = b""
    while isinstance(event := conn.next_event(), h11.Data):
        body += event.data
    built = Request(
        head.method.decode("latin-1"),
        head.target.decode("latin-1"),
        tuple(head.headers.raw_items()),
        body,
    )
    assert got == built
    assert isinstance(got, Request)
    assert (got.method, got.target, got.headers, got.body) == (
        built.method,
        built.target,
        built.headers,
        built.body,
    )
    assert hash(got) == hash(built)
