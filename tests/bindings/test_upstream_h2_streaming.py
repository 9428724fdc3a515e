"""A request body sent upstream as it comes (``AsyncUpstream.send(more=)``,
a gRPC call's later client messages over HTTP/2): each piece goes out
within the upstream's windows while the answer streams back, a reset or
GOAWAY while sending is the call's :class:`UpstreamFailure`, and an
HTTP/1.1 request takes no such body."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, aclosing, asynccontextmanager

import anyio
import anyio.abc
import pytest

pytest.importorskip("h2", reason="HTTP/2 upstream needs h2: pip install 'reel-llm[h2]'")

import h2.config
import h2.connection
import h2.errors
import h2.events

from reel_bindings._upstream import AsyncUpstream, UpstreamFailure
from reel_core import Request, UpstreamError
from reel_core.tools import grpc_frame

pytestmark = pytest.mark.anyio

GRPC = (b"content-type", b"application/grpc")


class Echo:
    """An HTTP/2 server that answers each request's head at once and sends
    each piece of its body back as it reads it (bidirectional), its
    trailers at the client's end; ``fail_after`` bytes read, it resets the
    stream (``"reset"``) or ends the connection (``"goaway"``).  It gives
    its window back as it reads, h2's default 64 KiB at a time."""

    def __init__(self, fail: str = "", fail_after: int = 0, *, hold: bool = False) -> None:
        self.fail, self.fail_after = fail, fail_after
        #: Never answer: no head, no echo, no trailers.
        self.hold = hold
        self.got: dict[int, bytearray] = {}
        self.ended: set[int] = set()
        self.resets: list[int] = []
        self.failed: set[int] = set()
        self.url = ""

    async def serve(self, stream: anyio.abc.ByteStream) -> None:
        config = h2.config.H2Configuration(client_side=False, header_encoding=None)
        conn = h2.connection.H2Connection(config)
        conn.initiate_connection()
        await stream.send(conn.data_to_send())
        while True:
            try:
                data = await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return
            for event in conn.receive_data(data):
                sid = getattr(event, "stream_id", 0)
                if sid in self.failed:
                    continue  # reset: the rest of its frames let go
                if isinstance(event, h2.events.RequestReceived):
                    self.got[sid] = bytearray()
                    if not self.hold:
                        conn.send_headers(sid, [(b":status", b"200"), GRPC])
                elif isinstance(event, h2.events.DataReceived):
                    piece = event.data or b""
                    self.got[sid] += piece
                    conn.acknowledge_received_data(event.flow_controlled_length or 0, sid)
                    if self.fail and len(self.got[sid]) >= self.fail_after:
                        self.failed.add(sid)
                        if self.fail == "reset":
                            conn.reset_stream(sid, h2.errors.ErrorCodes.INTERNAL_ERROR)
                        else:
                            conn.close_connection(h2.errors.ErrorCodes.NO_ERROR, last_stream_id=sid)
                            await stream.send(conn.data_to_send())
                            await stream.aclose()
                            return
                    elif piece and not self.hold:
                        conn.send_data(sid, piece)
                elif isinstance(event, h2.events.StreamEnded):
                    self.ended.add(sid)
                    if not self.hold:
                        conn.send_headers(sid, [(b"grpc-status", b"0")], end_stream=True)
                elif isinstance(event, h2.events.StreamReset):
                    self.resets.append(sid)
            await stream.send(conn.data_to_send())


@asynccontextmanager
async def serving(echo: Echo) -> AsyncIterator[Echo]:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    echo.url = f"http://127.0.0.1:{port}"

    async def one(stream: anyio.abc.ByteStream) -> None:
        async with stream:
            await echo.serve(stream)

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, one)
        yield echo
        tg.cancel_scope.cancel()


class Pieces:
    """The pieces of a body handed to ``more`` one at a time, each once
    the test lets it go (``give``); ``None`` is the end."""

    def __init__(self) -> None:
        self._send, self._receive = anyio.create_memory_object_stream[bytes | None](16)

    async def more(self) -> bytes | None:
        return await self._receive.receive()

    async def give(self, piece: bytes | None) -> None:
        await self._send.send(piece)

    def close(self) -> None:
        self._send.close()
        self._receive.close()


def call(first: bytes) -> Request:
    return Request("POST", "/pkg.Chat/Talk", (GRPC,), first)


async def until(done: Callable[[], bool]) -> None:
    while not done():
        await anyio.sleep(0.01)


async def test_each_piece_goes_while_the_answer_streams_back() -> None:
    """Bidirectional: the answer to each piece comes before the next is
    given (the request is not whole meanwhile), a piece larger than the
    upstream's window goes out whole as it opens, and the end ends it."""
    pieces = Pieces()
    big = grpc_frame(bytes(range(256)) * 1024)  # 256 KiB: four windows
    async with serving(Echo()) as echo, AsyncExitStack() as stack:
        upstream = AsyncUpstream(read_timeout=10)
        with anyio.fail_after(10):
            async with upstream.send(
                call(grpc_frame(b"one")), echo.url + "/pkg.Chat/Talk", more=pieces.more
            ) as response:
                got = bytearray()
                chunks = await stack.enter_async_context(aclosing(response.chunks()))
                for piece in (None, grpc_frame(b"two"), big):
                    if piece is not None:
                        await pieces.give(piece)
                    expected = len(got) + (len(piece) if piece else len(grpc_frame(b"one")))
                    while len(got) < expected:
                        got += await anext(chunks)
                assert not echo.ended  # all answered, and the request still open
                await pieces.give(None)
                async for chunk in chunks:
                    got += chunk
        await upstream.aclose()
    pieces.close()
    assert bytes(got) == grpc_frame(b"one") + grpc_frame(b"two") + big
    assert bytes(echo.got[1]) == bytes(got)
    assert response.trailers == [(b"grpc-status", b"0")]
    assert echo.ended == {1}


@pytest.mark.parametrize("fail", ["reset", "goaway"])
async def test_a_failure_while_sending_is_the_calls_failure(fail: str) -> None:
    pieces = Pieces()
    async with serving(Echo(fail, fail_after=100_000)) as echo:
        upstream = AsyncUpstream(read_timeout=10)
        sending = upstream.send(
            call(grpc_frame(b"one")), echo.url + "/pkg.Chat/Talk", more=pieces.more
        )

        async def send() -> None:
            async with sending as response, aclosing(response.chunks()) as chunks:
                await pieces.give(grpc_frame(b"x" * 200_000))  # past the failure
                async for _chunk in chunks:
                    pass

        with anyio.fail_after(10), pytest.raises(UpstreamFailure) as caught:
            await send()
        await upstream.aclose()
    pieces.close()
    expected = UpstreamError.RESET if fail == "reset" else UpstreamError.CLOSED
    assert caught.value.error is expected


async def test_an_answer_over_before_the_request_resets_it_and_stops_sending() -> None:
    """The caller leaves the answer (its client left, say): the upstream
    stream is reset (CANCEL) and ``more`` is awaited no more."""
    pieces = Pieces()
    async with serving(Echo()) as echo:
        upstream = AsyncUpstream(read_timeout=10)
        with anyio.fail_after(10):
            async with (
                upstream.send(
                    call(grpc_frame(b"one")), echo.url + "/pkg.Chat/Talk", more=pieces.more
                ) as response,
                aclosing(response.chunks()) as chunks,
            ):
                await anext(chunks)
            await until(lambda: bool(echo.resets))
        await upstream.aclose()
    pieces.close()
    assert echo.resets == [1]
    assert echo.ended == set()


async def test_an_http11_request_takes_no_body_as_it_comes() -> None:
    upstream = AsyncUpstream(read_timeout=1)
    plain = Request("POST", "/v1/chat", ((b"content-type", b"application/json"),), b"{}")

    async def nothing() -> bytes | None:
        return None

    more: Callable[[], Awaitable[bytes | None]] = nothing
    with pytest.raises(ValueError, match="HTTP/2"):
        async with upstream.send(plain, "http://127.0.0.1:9/v1/chat", more=more):
            pass
    await upstream.aclose()


@pytest.mark.parametrize("hold", [False, True])
async def test_the_read_timeout_counts_from_the_requests_end(hold: bool) -> None:
    """An upstream waiting for the client's next message is not timed out
    while the client takes its time (longer than the read timeout between
    messages); once the client ended, an upstream that answers nothing
    is, within the timeout."""
    pieces = Pieces()
    async with serving(Echo(hold=hold)) as echo:
        upstream = AsyncUpstream(read_timeout=0.3)
        sending = upstream.send(
            call(grpc_frame(b"one")), echo.url + "/pkg.Chat/Talk", more=pieces.more
        )
        got = bytearray()

        async def client() -> None:
            await anyio.sleep(0.6)  # twice the timeout before the next message
            await pieces.give(grpc_frame(b"two"))
            await anyio.sleep(0.6)
            await pieces.give(None)

        failed: list[UpstreamFailure] = []

        async def talk() -> None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(client)
                try:
                    async with sending as response, aclosing(response.chunks()) as chunks:
                        async for chunk in chunks:
                            got.extend(chunk)
                except UpstreamFailure as exc:
                    failed.append(exc)

        started = anyio.current_time()
        with anyio.fail_after(10):
            await talk()
        if hold:
            [failure] = failed
            assert failure.error is UpstreamError.TIMEOUT
            assert anyio.current_time() - started >= 1.2  # not before the client's end
        else:
            assert failed == []
        await upstream.aclose()
    pieces.close()
    if not hold:
        assert bytes(got) == grpc_frame(b"one") + grpc_frame(b"two")
        assert echo.ended == {1}
