"""The proxy's upstream client: keep-alive, framing, limits and failures."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress

import anyio
import anyio.abc
import pytest

from reel_bindings import _upstream
from reel_bindings._upstream import AsyncUpstream, UpstreamFailure
from reel_core import Request, UpstreamError
from tests.fakes.upstream import closed_port_url, respond, serve_fake
from tests.secrets import GATEWAY_TOKEN

AUTHORIZATION = f"Bearer {GATEWAY_TOKEN}".encode()

pytestmark = pytest.mark.anyio

CHAT = "/v1/chat/completions"


def chat(prompt: str = "hello", *, stream: bool = False, method: str = "POST") -> Request:
    body = b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"%s"}]%s}' % (
        prompt.encode(),
        b',"stream":true' if stream else b"",
    )
    headers = ((b"content-type", b"application/json"), (b"authorization", AUTHORIZATION))
    return Request(method, CHAT, headers, body if method == "POST" else b"")


async def exchange(upstream: AsyncUpstream, request: Request, url: str) -> tuple[int, bytes]:
    async with upstream.send(request, url + request.target) as response:
        body = b"".join([chunk async for chunk in response.chunks()])
    return response.status, body


Handler = Callable[[anyio.abc.SocketStream], Awaitable[None]]


@asynccontextmanager
async def raw_server(handler: Handler) -> AsyncIterator[tuple[str, list[int]]]:
    """A server running ``handler`` on each connection; its URL and a list
    that counts connections."""
    accepted: list[int] = []

    async def serve(stream: anyio.abc.SocketStream) -> None:
        accepted.append(1)
        async with stream:
            with suppress(anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await handler(stream)

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        try:
            yield f"http://127.0.0.1:{port}", accepted
        finally:
            tg.cancel_scope.cancel()


async def read_request(stream: anyio.abc.SocketStream) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        data += await stream.receive()
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        body += await stream.receive()
    return head


OK = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"


async def test_connections_are_kept_alive_and_bodies_streamed() -> None:
    upstream = AsyncUpstream()
    async with serve_fake(frame_delay=0.0) as fake:
        plain = await exchange(upstream, chat("one"), fake.url)
        streamed = await exchange(upstream, chat("two", stream=True), fake.url)
        await upstream.aclose()
    assert plain == (200, respond(fake.requests[0]).body)
    assert streamed == (200, respond(fake.requests[1]).body)
    assert fake.connections == 1
    # what the upstream saw: credentials intact, host and length set
    sent = fake.requests[0]
    assert sent.header("authorization") == AUTHORIZATION.decode()
    assert sent.header("host") == fake.url.removeprefix("http://")


async def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    async def once(stream: anyio.abc.SocketStream) -> None:
        await read_request(stream)
        await stream.send(OK)  # keep-alive as far as the client knows, then gone

    upstream = AsyncUpstream()
    async with raw_server(once) as (url, accepted):
        assert await exchange(upstream, chat(), url) == (200, b"ok")
        await anyio.sleep(0.05)  # the close reaches the idle connection
        assert await exchange(upstream, chat(), url) == (200, b"ok")
        await upstream.aclose()
    assert len(accepted) == 2


async def test_connection_close_and_unread_bodies_are_not_reused() -> None:
    async def answer(stream: anyio.abc.SocketStream) -> None:
        await read_request(stream)
        await stream.send(b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok")

    upstream = AsyncUpstream()
    async with raw_server(answer) as (url, accepted):
        assert await exchange(upstream, chat(), url) == (200, b"ok")
        async with upstream.send(chat(), url + CHAT) as response:
            assert response.status == 200  # the body is left unread
        assert await exchange(upstream, chat(), url) == (200, b"ok")
        await upstream.aclose()
    assert len(accepted) == 3


async def test_informational_answers_are_skipped_and_head_has_no_body() -> None:
    async def answer(stream: anyio.abc.SocketStream) -> None:
        while True:
            head = await read_request(stream)
            early = b"HTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\n"
            if head.startswith(b"HEAD"):
                await stream.send(early + b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
            else:
                await stream.send(early + OK)

    upstream = AsyncUpstream()
    async with raw_server(answer) as (url, accepted):
        assert await exchange(upstream, chat(method="HEAD"), url) == (200, b"")
        assert await exchange(upstream, chat(), url) == (200, b"ok")
        await upstream.aclose()
    assert len(accepted) == 1


async def test_the_connection_limit_queues_requests_and_frees_idle_ones() -> None:
    async def answer(stream: anyio.abc.SocketStream) -> None:
        while True:
            await read_request(stream)
            await anyio.sleep(0.05)
            await stream.send(OK)

    upstream = AsyncUpstream(max_connections=1)
    async with raw_server(answer) as (url, accepted), raw_server(answer) as (other, _):
        results: list[tuple[int, bytes]] = []

        async def one() -> None:
            results.append(await exchange(upstream, chat(), url))

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(one)
        # the idle connection to the first server makes room for the other one
        assert await exchange(upstream, chat(), other) == (200, b"ok")
        await upstream.aclose()
    assert results == [(200, b"ok")] * 3
    assert len(accepted) == 1


async def test_waiting_for_a_free_connection_times_out() -> None:
    async def answer(stream: anyio.abc.SocketStream) -> None:
        await read_request(stream)
        await stream.send(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        await anyio.sleep(10)

    upstream = AsyncUpstream(max_connections=1, connect_timeout=0.1)
    async with raw_server(answer) as (url, _), upstream.send(chat(), url + CHAT) as held:
        assert held.status == 200
        with pytest.raises(UpstreamFailure) as failure:
            await exchange(upstream, chat(), url)
    assert failure.value.error is UpstreamError.TIMEOUT
    await upstream.aclose()


async def answer_with(data: bytes, stream: anyio.abc.SocketStream) -> None:
    await read_request(stream)
    await stream.send(data)


@pytest.mark.parametrize(
    ("answer", "error", "detail"),
    [
        (b"", UpstreamError.CLOSED, "without sending a response"),
        (b"\x00\x16 not HTTP\r\n\r\n", UpstreamError.PROTOCOL, "illegal status line"),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nok", UpstreamError.CLOSED, "mid-response"),
    ],
)
async def test_broken_answers(answer: bytes, error: UpstreamError, detail: str) -> None:
    upstream = AsyncUpstream()
    async with raw_server(lambda stream: answer_with(answer, stream)) as (url, _):
        with pytest.raises(UpstreamFailure) as failure:
            await exchange(upstream, chat(), url)
    assert failure.value.error is error
    assert detail in failure.value.detail
    await upstream.aclose()


async def test_a_silent_server_times_out() -> None:
    async def silent(stream: anyio.abc.SocketStream) -> None:
        await read_request(stream)
        await anyio.sleep(10)

    upstream = AsyncUpstream(read_timeout=0.1)
    async with raw_server(silent) as (url, _):
        with pytest.raises(UpstreamFailure) as failure:
            await exchange(upstream, chat(), url)
    assert failure.value.error is UpstreamError.TIMEOUT
    await upstream.aclose()


async def test_a_server_that_reads_nothing_times_the_write_out() -> None:
    """The write and the head share one timeout, and the failure says
    which of the two it caught."""

    upstream = AsyncUpstream(read_timeout=0.3)
    big = Request("POST", CHAT, ((b"content-type", b"application/json"),), b"x" * (64 << 20))
    # a server that never accepts, so never reads: the socket buffers fill
    with socket.create_server(("127.0.0.1", 0)) as deaf:
        url = f"http://127.0.0.1:{deaf.getsockname()[1]}"
        with pytest.raises(UpstreamFailure) as failure:
            await exchange(upstream, big, url)
    assert failure.value.error is UpstreamError.TIMEOUT
    assert failure.value.detail == "write timed out"
    await upstream.aclose()


async def test_waiting_is_called_once_when_the_request_first_waits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``waiting`` runs before a new connection is made, and after the
    request is written on an idle connection reused: never while the
    request could still be on its way with nothing to wait for."""
    seen: list[str] = []
    connect = anyio.connect_tcp
    write = _upstream._write

    async def connecting(host: str, port: int) -> anyio.abc.SocketStream:
        seen.append("connect")
        return await connect(host, port)

    async def writing(connection: object, data: bytes) -> None:
        seen.append("write")
        await write(connection, data)  # type: ignore[arg-type]

    monkeypatch.setattr(anyio, "connect_tcp", connecting)
    monkeypatch.setattr(_upstream, "_write", writing)
    upstream = AsyncUpstream()
    async with serve_fake(frame_delay=0.0) as fake:
        for prompt in ("new connection", "reused"):
            request = chat(prompt)
            async with upstream.send(
                request, fake.url + request.target, waiting=lambda: seen.append("waiting")
            ) as response:
                assert response.status == 200
                seen.append("head")
                async for _ in response.chunks():
                    pass
        await upstream.aclose()
    assert seen == ["waiting", "connect", "write", "head", "write", "waiting", "head"]
    assert fake.connections == 1


async def test_refused_tls_and_bad_urls() -> None:
    upstream = AsyncUpstream(connect_timeout=5)
    with pytest.raises(UpstreamFailure) as refused:
        await exchange(upstream, chat(), closed_port_url())
    assert refused.value.error is UpstreamError.REFUSED
    async with serve_fake() as fake:  # TLS to a server speaking plain HTTP
        with pytest.raises(UpstreamFailure) as tls:
            await exchange(upstream, chat(), fake.url.replace("http:", "https:"))
    assert tls.value.error is UpstreamError.TLS
    for url in ("ftp://example.com", "http://127.0.0.1:port"):
        with pytest.raises(UpstreamFailure) as bad:
            async with upstream.send(chat(), url):
                pass  # pragma: no cover - never sent
        assert bad.value.error is UpstreamError.PROTOCOL
    bad_header = Request("POST", CHAT, ((b"x-bad", b"a\x00b"),), b"{}")
    with pytest.raises(UpstreamFailure) as invalid:
        await exchange(upstream, bad_header, closed_port_url())
    assert invalid.value.error is UpstreamError.PROTOCOL
    await upstream.aclose()


async def test_name_resolution_failure_is_dns(monkeypatch: pytest.MonkeyPatch) -> None:
    async def unresolvable(*args: object, **kwargs: object) -> None:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(anyio, "connect_tcp", unresolvable)
    with pytest.raises(UpstreamFailure) as failure:
        await exchange(AsyncUpstream(), chat(), "https://api.openai.invalid")
    assert failure.value.error is UpstreamError.DNS
