"""The proxy's upstream client over HTTP/2 (a gRPC request): one connection
per origin multiplexed, flow control both ways, trailers, and each way an
HTTP/2 upstream fails mapped onto an :class:`UpstreamError`."""

from __future__ import annotations

import importlib
import sys
import tracemalloc
from collections.abc import Callable
from contextlib import aclosing
from pathlib import Path
from urllib.parse import quote

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reel_bindings._upstream import AsyncUpstream, UpstreamFailure
from reel_core import Request, UpstreamError
from tests.fakes.upstream import closed_port_url, serve_fake
from tests.h2_server import H2Server, pattern, serve_h2

from .forward_proxy import LocalCA, serve_forward_proxy

pytestmark = pytest.mark.anyio

GRPC = (b"content-type", b"application/grpc")
NAME = "upstream.reel.test"


def grpc(path: str = "/pkg.Service/Method", body: bytes = b"", **asks: str) -> Request:
    """A gRPC request asking the test server for ``asks`` (``x-h2-*`` headers)."""
    headers = [(f"x-h2-{k.replace('_', '-')}".encode(), v.encode()) for k, v in asks.items()]
    return Request("POST", path, (GRPC, *headers), body)


async def fetch(
    upstream: AsyncUpstream, server: H2Server, request: Request
) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
    async with upstream.send(request, server.url + request.target) as response:
        body = b"".join([chunk async for chunk in response.chunks()])
    return response.status, body, response.trailers


async def read_into(
    got: list[bytes],
    upstream: AsyncUpstream,
    base: str,
    request: Request,
    waiting: Callable[[], object] | None = None,
) -> None:
    """Read ``request``'s answer into ``got`` a chunk at a time (what came
    before a failure stays there)."""
    async with upstream.send(request, base + request.target, waiting=waiting) as response:
        async for chunk in response.chunks():
            got.append(chunk)


async def test_a_grpc_request_goes_over_http2_with_its_trailers() -> None:
    async with serve_h2() as server:
        upstream = AsyncUpstream(read_timeout=10)
        request = grpc(
            body=b"\0\0\0\0\x02hi", trailers="grpc-status=0,grpc-message=fine", chunks="3"
        )
        async with upstream.send(request, server.url + request.target) as response:
            assert response.trailers == []  # filled once the body is read
            chunks = [chunk async for chunk in response.chunks()]
        await upstream.aclose()
    assert response.status == 200
    assert b"".join(chunks) == b"/pkg.Service/Method 7 \0\0\0\0\x02hi"
    assert len(chunks) == 3  # streamed as it came
    assert all(not name.startswith(b":") for name, _ in response.headers)
    assert (b"content-type", b"application/octet-stream") in response.headers
    assert response.trailers == [(b"grpc-status", b"0"), (b"grpc-message", b"fine")]
    assert server.preface == [True]  # h2c with prior knowledge
    (seen,) = server.seen
    assert seen.headers[b":method"] == b"POST"
    assert seen.headers[b":scheme"] == b"http"
    assert seen.headers[b"te"] == b"trailers"  # gRPC needs it; HTTP/2 allows only it
    assert b"host" not in seen.headers
    assert seen.headers[b":authority"] == server.url[7:].encode()


async def test_http11_responses_have_no_trailers() -> None:
    async with serve_fake() as fake:
        upstream = AsyncUpstream(read_timeout=10)
        request = Request("GET", "/v1/models", ((b"authorization", b"Bearer x"),))
        async with upstream.send(request, fake.url + "/v1/models") as response:
            async for _chunk in response.chunks():
                pass
        await upstream.aclose()
    assert response.trailers == []


async def test_tls_with_alpn_h2(tmp_path: Path) -> None:
    ca = LocalCA.make(tmp_path)
    async with serve_h2(tls=ca.ca) as server:
        upstream = AsyncUpstream(read_timeout=10, ca=ca.pem)
        got = await fetch(upstream, server, grpc(trailers="grpc-status=0"))
        again = await fetch(upstream, server, grpc("/pkg.Service/Other"))
        await upstream.aclose()
    assert got == (200, b"/pkg.Service/Method 0 ", [(b"grpc-status", b"0")])
    assert again[1] == b"/pkg.Service/Other 0 "
    assert server.alpn == ["h2"]
    assert server.connections == 1


async def test_tls_upstream_without_h2_in_alpn_is_a_clear_protocol_error(tmp_path: Path) -> None:
    ca = LocalCA.make(tmp_path)
    async with serve_h2(tls=ca.ca, alpn=("http/1.1",)) as server:
        upstream = AsyncUpstream(read_timeout=10, ca=ca.pem)
        with pytest.raises(UpstreamFailure) as caught:
            await fetch(upstream, server, grpc())
        await upstream.aclose()
    assert caught.value.error is UpstreamError.PROTOCOL
    assert "does not speak HTTP/2 over TLS" in caught.value.detail
    assert "gRPC request goes upstream over HTTP/2 only" in caught.value.detail


async def test_http11_upstream_is_a_clear_protocol_error() -> None:
    async with serve_fake() as fake:
        upstream = AsyncUpstream(read_timeout=10)
        request = grpc()
        with pytest.raises(UpstreamFailure) as caught:
            async with upstream.send(request, fake.url + request.target):
                pass
        await upstream.aclose()
    assert caught.value.error is UpstreamError.PROTOCOL
    assert "does not speak HTTP/2" in caught.value.detail
    assert "HTTP/1.1 " in caught.value.detail  # what it answered instead


async def test_refused_connection_is_refused() -> None:
    upstream = AsyncUpstream(read_timeout=10, connect_timeout=5)
    with pytest.raises(UpstreamFailure) as caught:
        async with upstream.send(grpc(), closed_port_url() + "/pkg.Service/Method"):
            pass
    assert caught.value.error is UpstreamError.REFUSED


async def test_a_reset_stream_mid_body_hands_out_what_came_then_fails_reset() -> None:
    async with serve_h2() as server:
        upstream = AsyncUpstream(read_timeout=10)
        got: list[bytes] = []
        with pytest.raises(UpstreamFailure) as caught:
            await read_into(got, upstream, server.url, grpc(size="5000", reset_after="3000"))
        # the connection lives on: the next stream is answered on it
        after = await fetch(upstream, server, grpc("/after"))
        await upstream.aclose()
    assert caught.value.error is UpstreamError.RESET
    assert "RST_STREAM INTERNAL_ERROR" in caught.value.detail
    assert b"".join(got) == pattern(3000)
    assert after[1] == b"/after 0 "
    assert server.connections == 1


async def test_goaway_fails_every_stream_in_flight_and_the_next_request_reconnects() -> None:
    async with serve_h2() as server:
        upstream = AsyncUpstream(read_timeout=10)
        failures: dict[str, UpstreamFailure] = {}
        cut = b""
        long_started = anyio.Event()

        async def long() -> None:
            request = grpc("/long", size="100000", chunks="100", delay_ms="20")
            try:
                async with upstream.send(request, server.url + "/long") as response:
                    long_started.set()
                    async for _chunk in response.chunks():
                        pass
            except UpstreamFailure as exc:
                failures["long"] = exc

        async def goaway() -> None:
            nonlocal cut
            await long_started.wait()
            request = grpc("/bye", size="4000", goaway_after="1000")
            try:
                async with upstream.send(request, server.url + "/bye") as response:
                    async for chunk in response.chunks():
                        cut += chunk
            except UpstreamFailure as exc:
                failures["bye"] = exc

        async with anyio.create_task_group() as tg:
            tg.start_soon(long)
            tg.start_soon(goaway)
        after = await fetch(upstream, server, grpc("/after"))
        await upstream.aclose()
    assert {name: f.error for name, f in failures.items()} == {
        "long": UpstreamError.CLOSED,
        "bye": UpstreamError.CLOSED,
    }
    assert all("GOAWAY NO_ERROR" in f.detail for f in failures.values())
    assert "mid-response" in failures["bye"].detail
    assert cut == pattern(1000)
    assert after[1] == b"/after 0 "
    assert server.connections == 2


async def test_goaway_before_a_stream_was_taken_says_it_was_not_processed() -> None:
    async with serve_h2() as server:
        upstream = AsyncUpstream(read_timeout=10)
        with pytest.raises(UpstreamFailure) as caught:
            await fetch(upstream, server, grpc(goaway_first="1"))
        await upstream.aclose()
    assert caught.value.error is UpstreamError.CLOSED
    assert "it was not processed" in caught.value.detail


async def test_read_timeout_and_waiting_hook() -> None:
    async with serve_h2() as server:
        upstream = AsyncUpstream(read_timeout=0.3)
        calls: list[int] = []
        request = grpc(size="2000", chunks="2", delay_ms="2000")
        with pytest.raises(UpstreamFailure) as caught:
            await read_into([], upstream, server.url, request, lambda: calls.append(1))
        # a reused connection: the hook is called once the request is written
        async with upstream.send(
            grpc("/again"), server.url + "/again", waiting=lambda: calls.append(2)
        ) as response:
            async for _chunk in response.chunks():
                pass
        await upstream.aclose()
    assert caught.value.error is UpstreamError.TIMEOUT
    assert calls == [1, 2]
    assert server.connections == 1


async def test_a_request_body_larger_than_the_windows_is_sent_whole() -> None:
    body = pattern(3 * 1024 * 1024 + 17)  # the server's windows are h2's 64 KiB
    async with serve_h2() as server:
        upstream = AsyncUpstream(read_timeout=10)
        status, answer, _ = await fetch(upstream, server, grpc("/up", body))
        await upstream.aclose()
    assert status == 200
    assert answer.startswith(b"/up %d " % len(body))
    assert server.seen[0].body == body


async def test_a_50mb_response_streams_through_a_window_at_a_time() -> None:
    size = 50 * 1024 * 1024
    async with serve_h2() as server:
        upstream = AsyncUpstream(read_timeout=30)
        from reel_bindings._upstream_h2 import STREAM_WINDOW

        received, paused_at = 0, 0
        tracemalloc.start()
        try:
            async with upstream.send(grpc("/big", size=str(size)), server.url + "/big") as r:
                async for chunk in r.chunks():
                    if not received:  # the reader dawdles: the upstream must wait
                        await anyio.sleep(0.3)
                        paused_at = max(server.sent.values())
                    assert chunk == pattern(len(chunk), received)
                    received += len(chunk)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        await upstream.aclose()
    assert received == size
    # flow control: while nobody read, at most a window was sent
    assert paused_at <= STREAM_WINDOW
    assert peak < 8 * STREAM_WINDOW  # never held whole (50 MB)


async def test_a_proxy_in_the_way_is_tunnelled_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca = LocalCA.make(tmp_path)
    async with (
        serve_h2() as plain,
        serve_h2(tls=ca.ca, names=(NAME,)) as secure,
    ):
        routes = {
            f"{NAME}:80": ("127.0.0.1", int(plain.url.rpartition(":")[2])),
            f"{NAME}:443": ("127.0.0.1", int(secure.url.rpartition(":")[2])),
        }
        async with serve_forward_proxy(routes) as forward:
            environ = {"HTTP_PROXY": forward.url, "HTTPS_PROXY": forward.url}
            upstream = AsyncUpstream(read_timeout=10, ca=ca.pem, environ=environ)
            for url in (f"http://{NAME}/pkg.S/M", f"https://{NAME}/pkg.S/M"):
                async with upstream.send(grpc("/pkg.S/M"), url) as response:
                    body = b"".join([chunk async for chunk in response.chunks()])
                assert body == b"/pkg.S/M 0 "
            await upstream.aclose()
    # h2c cannot be forwarded in absolute form: both went through CONNECT
    assert [(s.method, s.target) for s in forward.seen] == [
        ("CONNECT", f"{NAME}:80"),
        ("CONNECT", f"{NAME}:443"),
    ]
    assert secure.alpn == ["h2"]
    assert plain.preface == [True]


async def test_aclose_closes_the_connections() -> None:
    async with serve_h2() as server:
        upstream = AsyncUpstream(read_timeout=10)
        await fetch(upstream, server, grpc())
        await upstream.aclose()
        # a new request after aclose opens a new connection
        await fetch(upstream, server, grpc())
        await upstream.aclose()
    assert server.connections == 2


#: A request of the generated mix: its path, body size, answer size, how
#: many writes, and its trailers.
_Call = tuple[int, int, int, int, bool]

CALLS = st.lists(
    st.tuples(
        st.integers(0, 10_000),
        st.integers(0, 200_000),
        st.integers(0, 300_000),
        st.integers(1, 5),
        st.booleans(),
    ),
    min_size=1,
    max_size=24,
)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=CALLS)
def test_concurrent_forwards_share_one_connection_and_nothing_crosses_streams(
    backend: str, calls: list[_Call]
) -> None:
    """Invariant: however many requests run at once over one connection,
    each gets its own answer (body and trailers) whole, in order."""

    async def main() -> None:
        async with serve_h2() as server:
            upstream = AsyncUpstream(read_timeout=30)
            got: dict[int, tuple[bytes, list[tuple[bytes, bytes]]]] = {}

            async def one(index: int, call: _Call) -> None:
                tag, sent, size, chunks, trailed = call
                asks = {"size": str(size), "chunks": str(chunks)}
                if trailed:
                    asks["trailers"] = f"x-call={index},x-tag={tag}"
                request = grpc(f"/pkg.S/M{index}", pattern(sent, tag), **asks)
                status, body, trailers = await fetch(upstream, server, request)
                assert status == 200
                got[index] = (body, trailers)

            # one connection first, then the mix on it at once
            await fetch(upstream, server, grpc("/warm"))
            async with anyio.create_task_group() as tg:
                for index, call in enumerate(calls):
                    tg.start_soon(one, index, call)
            await upstream.aclose()
        assert server.connections == 1
        for index, (tag, sent, size, _chunks, trailed) in enumerate(calls):
            body, trailers = got[index]
            assert body == pattern(size)
            expected = [(b"x-call", b"%d" % index), (b"x-tag", b"%d" % tag)] if trailed else []
            assert trailers == expected
            seen = next(s for s in server.seen if s.path == f"/pkg.S/M{index}")
            assert seen.body == pattern(sent, tag)

    anyio.run(main, backend=backend)


async def test_a_response_left_before_its_end_resets_only_its_stream() -> None:
    async with serve_h2() as server:
        upstream = AsyncUpstream(read_timeout=10)
        request = grpc("/long", size="200000", chunks="50", delay_ms="10")
        async with (
            upstream.send(request, server.url + "/long") as response,
            aclosing(response.chunks()) as chunks,
        ):
            await anext(chunks)  # the caller leaves after the first chunk
        after = await fetch(upstream, server, grpc("/after"))
        with anyio.fail_after(5):
            while not server.resets:
                await anyio.sleep(0.01)
        await upstream.aclose()
    assert server.resets == [1]  # /long's stream, not /after's
    assert after[1] == b"/after 0 "
    assert server.connections == 1


async def test_streams_wait_for_the_upstreams_limit() -> None:
    async with serve_h2(max_streams=2) as server:
        upstream = AsyncUpstream(read_timeout=10)
        await fetch(upstream, server, grpc("/warm"))  # the server's SETTINGS are known
        got: list[bytes] = []

        async def one(index: int) -> None:
            request = grpc(f"/s{index}", size="3000", chunks="3", delay_ms="20")
            got.append((await fetch(upstream, server, request))[1])

        async with anyio.create_task_group() as tg:
            for index in range(6):
                tg.start_soon(one, index)
        await upstream.aclose()
    assert got == [pattern(3000)] * 6
    assert server.most_open <= 2
    assert server.connections == 1


async def test_without_h2_a_grpc_request_is_a_clear_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # as if h2 were missing
    monkeypatch.delitem(sys.modules, "reel_bindings._upstream_h2", raising=False)
    monkeypatch.setitem(sys.modules, "h2", None)
    monkeypatch.setitem(sys.modules, "h2.config", None)
    upstream = AsyncUpstream(read_timeout=10)
    with pytest.raises(UpstreamFailure) as caught:
        async with upstream.send(grpc(), "http://127.0.0.1:9/pkg.Service/Method"):
            pass
    assert caught.value.error is UpstreamError.PROTOCOL
    assert "pip install" in caught.value.detail


def test_the_h2_module_names_the_extra_when_h2_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "reel_bindings._upstream_h2", raising=False)
    monkeypatch.setitem(sys.modules, "h2", None)
    monkeypatch.setitem(sys.modules, "h2.config", None)
    with pytest.raises(ImportError, match=r"pip install 'reel-llm\[h2\]'"):
        importlib.import_module("reel_bindings._upstream_h2")


async def test_a_connection_the_upstream_ended_while_idle_is_not_reused() -> None:
    async with serve_h2() as server:
        upstream = AsyncUpstream(read_timeout=10)
        first = await fetch(upstream, server, grpc("/first", goaway_idle="1"))
        await anyio.sleep(0.2)  # the GOAWAY and the close wait on the idle connection
        second = await fetch(upstream, server, grpc("/second"))
        await upstream.aclose()
    assert first[1] == b"/first 0 "
    assert second[1] == b"/second 0 "  # not a failure: a new connection carried it
    assert server.connections == 2


async def test_an_answer_before_the_request_body_is_whole_then_a_no_error_reset() -> None:
    async with serve_h2() as server:
        upstream = AsyncUpstream(read_timeout=10)
        big = grpc("/early", pattern(500_000), early="1")  # past the server's window
        got = await fetch(upstream, server, big)
        after = await fetch(upstream, server, grpc("/after"))
        await upstream.aclose()
    assert got == (200, b"early", [])  # whole: the reset after the end is no failure
    assert after[1] == b"/after 0 "
    assert server.connections == 1


# -- header values as the upstream sent them (docs/reliability.md, "A header
# value the peer may send reaches the client as it was sent") ------------------


async def test_a_value_with_spaces_around_it_is_taken_as_it_came() -> None:
    """grpcio sends a status's details as they are (gRPC's Percent-Encoded
    grammar leaves the space): h2 refused them (RFC 9113 8.2.1), and the
    call's status became Reel's INTERNAL; now they come as they were sent."""
    messages = [b" ", b" lead", b"trail ", b"\tboth\t", b"", b"in side", b"%20x"]
    async with serve_h2() as server:
        upstream = AsyncUpstream(read_timeout=10)
        got = []
        for message in messages:
            asked = f"grpc-status=9,grpc-message={quote(message)}"
            got.append(await fetch(upstream, server, grpc(trailers=asked)))
        await upstream.aclose()
    assert [trailers for _, _, trailers in got] == [
        [(b"grpc-status", b"9"), (b"grpc-message", message)] for message in messages
    ]
    assert server.connections == 1  # and nothing broke the connection


@pytest.mark.parametrize(
    ("trailers", "why"),
    [
        ("Grpc-Status=0", "an uppercase header name b'Grpc-Status'"),
        ("grpc-message=a%0Db", "a CR byte in the value of b'grpc-message'"),
        ("grpc-message=a%0Ab", "a LF byte"),
        ("grpc-message=%00", "a NUL byte"),
        ("x%20y=1", "an illegal byte b' ' in the header name"),
        ("=1", "an empty header name"),
        ("x:y=1", "a colon inside the header name"),
        ("%3Apath=/x", "pseudo-header fields in trailers"),
        ("connection=close", "the connection-specific field b'connection'"),
        ("te=gzip", "te: b'gzip' (only 'trailers' is allowed)"),
    ],
)
async def test_a_malformed_header_block_fails_its_stream_only(trailers: str, why: str) -> None:
    """Every other rule of h2's validation holds: the stream that broke one
    fails (PROTOCOL, saying which), after the body that came before it;
    the connection and its other streams go on."""
    async with serve_h2() as server:
        upstream = AsyncUpstream(read_timeout=10)
        got: list[bytes] = []
        with pytest.raises(UpstreamFailure) as caught:
            await read_into(got, upstream, server.url, grpc(trailers=trailers))
        after = await fetch(upstream, server, grpc("/after", trailers="grpc-status=0"))
        await upstream.aclose()
    assert caught.value.error is UpstreamError.PROTOCOL
    assert f"malformed HTTP/2 trailers header block: {why}" in caught.value.detail
    assert b"".join(got) == b"/pkg.Service/Method 0 "
    assert after[2] == [(b"grpc-status", b"0")]
    assert server.connections == 1


async def test_a_head_is_checked_as_trailers_are() -> None:
    """A value with spaces around it in the head comes as it was sent; a
    malformed head fails its stream before any body, the connection lives."""
    async with serve_h2() as server:
        upstream = AsyncUpstream(read_timeout=10)
        async with upstream.send(
            grpc(head="x-pad=%20a%20"), server.url + "/pkg.Service/Method"
        ) as ok:
            assert (b"x-pad", b" a ") in ok.headers
        with pytest.raises(UpstreamFailure) as caught:
            await fetch(upstream, server, grpc(head="X-Upper=1"))
        after = await fetch(upstream, server, grpc("/after"))
        await upstream.aclose()
    assert caught.value.error is UpstreamError.PROTOCOL
    assert "malformed HTTP/2 response header block: an uppercase header name" in caught.value.detail
    assert after[1] == b"/after 0 "
    assert server.connections == 1
