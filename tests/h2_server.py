"""A tiny HTTP/2 server for the tests: h2 over anyio sockets (asyncio or
trio), h2c with prior knowledge or TLS with ALPN ``h2``.

It answers every request ``200`` with ``content-type: application/octet-stream``
and a body that names the request (``<path> <body length> <body's first 32
bytes>``), unless the request's headers ask otherwise:

===========================  ==============================================
``x-h2-size: N``             a body of ``N`` bytes (a repeating pattern,
                             :func:`pattern`) instead, in DATA frames as the
                             client's window allows
``x-h2-chunks: N``           the body in ``N`` writes (a stream), each after
                             ``x-h2-delay-ms`` (default 0)
``x-h2-trailers: a=1,b=2``   trailers after the body, percent-decoded and
                             sent as they are (``%20x``: a space first;
                             ``X``: an uppercase name), as a faulty or a
                             gRPC server may
``x-h2-grpc: N``             ``N`` gRPC messages (``content-type:
                             application/grpc``), each naming the request
``x-h2-status: N``           that status
``x-h2-head: a=1,b=2``       more fields in the head, as the trailers'
``x-h2-reset-after: N``      ``RST_STREAM`` (``INTERNAL_ERROR``) after ``N``
                             bytes of the body
``x-h2-goaway-after: N``     ``GOAWAY`` (``NO_ERROR``, last stream: this one)
                             after ``N`` bytes, then the connection closed
``x-h2-early: 1``            ``200`` ``early`` before reading the request's
                             body, then ``RST_STREAM`` ``NO_ERROR``
``x-h2-goaway-idle: 1``     after the answer, ``GOAWAY`` (``NO_ERROR``) and
                             the connection closed
``x-h2-goaway-first: 1``     ``GOAWAY`` before answering, the last stream id
                             one below this one, then the connection closed
===========================  ==============================================

What it saw is kept: ``server.seen`` (each request's headers, body and
stream), ``server.connections`` (how many were made), ``server.sent`` (bytes
of body sent, by connection and stream), ``server.resets`` (the streams the
client reset), ``server.most_open`` (the most streams open at once),
``server.preface`` (each connection's first bytes
were the HTTP/2 preface).  The benchmark may reuse it::

    async with serve_h2() as server:  # server.url: http://127.0.0.1:PORT
        ...
    async with serve_h2(tls=ca) as server:  # https://127.0.0.1:PORT, a trustme CA
        ...
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import unquote_to_bytes

import anyio
import anyio.abc
import anyio.streams.tls
import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
import h11

if TYPE_CHECKING:
    import trustme

__all__ = ["H2Server", "Seen", "pattern", "serve_h2"]

#: A response body: its ``n`` bytes from ``offset``.
_Body = Callable[[int, int], bytes]

_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def pattern(size: int, offset: int = 0) -> bytes:
    """``size`` bytes of the body ``x-h2-size`` asks for, from ``offset``."""
    block = bytes(range(251))  # a prime length: a cut at any place shows
    start = offset % 251
    whole = block[start:] + block * (size // 251 + 2)
    return whole[:size]


def _grpc_frame(message: bytes) -> bytes:
    return b"\0" + len(message).to_bytes(4, "big") + message


@dataclass
class Seen:
    """A request the server received."""

    stream_id: int
    headers: dict[bytes, bytes]
    body: bytes

    @property
    def path(self) -> str:
        return self.headers[b":path"].decode()


@dataclass
class H2Server:
    url: str
    seen: list[Seen] = field(default_factory=list)
    connections: int = 0
    preface: list[bool] = field(default_factory=list)
    alpn: list[str | None] = field(default_factory=list)
    sent: dict[tuple[int, int], int] = field(default_factory=dict)
    resets: list[int] = field(default_factory=list)
    #: The most streams open at once on a connection.
    most_open: int = 0


class _Connection:
    def __init__(
        self, server: H2Server, stream: anyio.abc.ByteStream, number: int, max_streams: int
    ) -> None:
        self.server = server
        self.stream = stream
        self.number = number
        # what a test asks for goes out as asked (x-h2-trailers: a value
        # with spaces around it, say), as grpcio sends it
        config = h2.config.H2Configuration(
            client_side=False,
            header_encoding=None,
            normalize_outbound_headers=False,
            validate_outbound_headers=False,
        )
        self.h2 = h2.connection.H2Connection(config)
        self.h2.local_settings = h2.settings.Settings(
            client=False,
            initial_values={h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: max_streams},
        )
        self.requests: dict[int, tuple[list[tuple[bytes, bytes]], bytearray]] = {}
        self.window = anyio.Event()
        self.lock = anyio.Lock()
        self.closed = False
        self.early: set[int] = set()

    async def flush(self) -> None:
        async with self.lock:
            data = self.h2.data_to_send()
            if data and not self.closed:
                with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                    await self.stream.send(data)

    async def run(self) -> None:
        self.h2.initiate_connection()
        await self.flush()
        first = True
        async with anyio.create_task_group() as tg:
            while not self.closed:
                try:
                    data = await self.stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    break
                if first:
                    self.server.preface.append(data.startswith(_PREFACE[: len(data)]))
                    first = False
                try:
                    events = self.h2.receive_data(data)
                except h2.exceptions.ProtocolError:
                    await self.flush()
                    break
                for event in events:
                    self.handle(event, tg)
                await self.flush()
            tg.cancel_scope.cancel()

    def handle(self, event: h2.events.Event, tg: anyio.abc.TaskGroup) -> None:
        if isinstance(event, h2.events.RequestReceived):
            assert event.stream_id is not None
            self.requests[event.stream_id] = (list(event.headers or []), bytearray())
            if (b"x-h2-early", b"1") in (event.headers or []):
                self.early.add(event.stream_id)
                tg.start_soon(self.answer_early, event.stream_id)
        elif isinstance(event, h2.events.DataReceived):
            assert event.stream_id is not None
            assert event.data is not None
            if event.stream_id in self.early:
                return  # never read: the client's window stays shut
            self.requests[event.stream_id][1].extend(event.data)
            self.h2.acknowledge_received_data(event.flow_controlled_length or 0, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            assert event.stream_id is not None
            if event.stream_id not in self.early:
                tg.start_soon(self.respond, event.stream_id)
        elif isinstance(event, h2.events.StreamReset):
            assert event.stream_id is not None
            self.server.resets.append(event.stream_id)
        elif isinstance(event, (h2.events.WindowUpdated, h2.events.RemoteSettingsChanged)):
            self.window.set()
            self.window = anyio.Event()

    async def send_body(self, stream_id: int, body: _Body, start: int, end: int) -> None:
        """``body``'s bytes ``start`` to ``end`` in DATA frames as the
        client's windows allow."""
        key = (self.number, stream_id)
        sent = start
        while sent < end:
            window = min(self.h2.local_flow_control_window(stream_id), end - sent)
            if window <= 0:
                await self.window.wait()
                continue
            while window > 0:
                size = min(window, self.h2.max_outbound_frame_size)
                self.h2.send_data(stream_id, body(sent, size))
                sent += size
                window -= size
            self.server.sent[key] = sent
            await self.flush()

    async def answer_early(self, stream_id: int) -> None:
        """Answer before the request's body, then refuse the rest of it
        (``RST_STREAM`` ``NO_ERROR``, as RFC 9113 8.1 allows)."""
        self.h2.send_headers(stream_id, [(b":status", b"200"), (b"content-length", b"5")])
        self.h2.send_data(stream_id, b"early", end_stream=True)
        self.h2.reset_stream(stream_id, h2.errors.ErrorCodes.NO_ERROR)
        await self.flush()

    async def goaway(self, last: int) -> None:
        self.h2.close_connection(h2.errors.ErrorCodes.NO_ERROR, last_stream_id=last)
        await self.flush()
        self.closed = True
        await anyio.aclose_forcefully(self.stream)

    async def respond(self, stream_id: int) -> None:
        self.server.most_open = max(self.server.most_open, self.h2.open_inbound_streams)
        pairs, body = self.requests.pop(stream_id)
        headers = dict(pairs)
        self.server.seen.append(Seen(stream_id, headers, bytes(body)))
        with suppress(h2.exceptions.StreamClosedError):  # the client reset the stream
            await self._respond(stream_id, headers, bytes(body))

    async def _respond(self, stream_id: int, headers: dict[bytes, bytes], body: bytes) -> None:
        if b"x-h2-goaway-first" in headers:
            await self.goaway(max(stream_id - 2, 0))
            return
        size = headers.get(b"x-h2-size")
        messages = headers.get(b"x-h2-grpc")
        answer: _Body
        if messages is not None:  # gRPC messages, each naming the request
            whole = b"".join(
                _grpc_frame(b"%s reply %d to %d bytes" % (headers[b":path"], i, len(body)))
                for i in range(int(messages))
            )
            length = len(whole)

            def answer(offset: int, n: int) -> bytes:
                return whole[offset : offset + n]
        elif size is not None:  # made a frame at a time: never held whole
            length = int(size)

            def answer(offset: int, n: int) -> bytes:
                return pattern(n, offset)
        else:
            whole = _named(headers[b":path"], body)
            length = len(whole)

            def answer(offset: int, n: int) -> bytes:
                return whole[offset : offset + n]

        status = headers.get(b"x-h2-status", b"200")
        kind = b"application/grpc" if messages is not None else b"application/octet-stream"
        head = [(b":status", status), (b"content-type", kind)]
        if size is None and messages is None:
            head.append((b"content-length", b"%d" % length))
        head += _raw_fields(headers.get(b"x-h2-head"))
        self.h2.send_headers(stream_id, head)
        await self.flush()
        chunks = int(headers.get(b"x-h2-chunks", b"1"))
        delay = int(headers.get(b"x-h2-delay-ms", b"0")) / 1000
        reset = headers.get(b"x-h2-reset-after")
        goaway = headers.get(b"x-h2-goaway-after")
        cut = int(reset or goaway or -1)
        if cut >= 0:
            await self.send_body(stream_id, answer, 0, cut)
            if reset is not None:
                self.h2.reset_stream(stream_id, h2.errors.ErrorCodes.INTERNAL_ERROR)
                await self.flush()
            else:
                await self.goaway(stream_id)
            return
        step = max(-(-length // chunks), 1)
        for start in range(0, length, step):
            if delay and start:
                await anyio.sleep(delay)
            await self.send_body(stream_id, answer, start, min(start + step, length))
        trailers = headers.get(b"x-h2-trailers")
        if trailers:
            self.h2.send_headers(stream_id, _raw_fields(trailers), end_stream=True)
        else:
            self.h2.send_data(stream_id, b"", end_stream=True)
        await self.flush()
        if b"x-h2-goaway-idle" in headers:  # the connection ends once idle
            await self.goaway(stream_id)


def _raw_fields(asked: bytes | None) -> list[tuple[bytes, bytes]]:
    """``a=1,b=2`` as fields, each name and value percent-decoded."""
    if not asked:
        return []
    pairs = [pair.split(b"=", 1) for pair in asked.split(b",")]
    return [(unquote_to_bytes(k), unquote_to_bytes(v)) for k, v in pairs]


def _named(path: bytes, body: bytes) -> bytes:
    """The plain answer: names the request."""
    return b"%s %d %s" % (path, len(body), body[:32])


async def _serve_h11(server: H2Server, stream: anyio.abc.ByteStream) -> None:
    """HTTP/1.1, when ALPN agreed on it: the plain answer only, its header
    names capitalized (HTTP/2's are lower-case)."""
    conn = h11.Connection(h11.SERVER)
    head: h11.Request | None = None
    body = bytearray()
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            try:
                conn.receive_data(await stream.receive())
            except anyio.EndOfStream:
                conn.receive_data(b"")
        elif isinstance(event, h11.Request):
            head, body = event, bytearray()
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            assert head is not None
            headers = {k.lower(): v for k, v in head.headers.raw_items()}
            headers |= {b":method": head.method, b":path": head.target}
            server.seen.append(Seen(0, headers, bytes(body)))
            answer = _named(head.target, bytes(body))
            fields = [
                (b"Content-Type", b"application/octet-stream"),
                (b"Content-Length", b"%d" % len(answer)),
            ]
            out = conn.send(h11.Response(status_code=200, headers=fields)) or b""
            out += (conn.send(h11.Data(data=answer)) or b"") + (
                conn.send(h11.EndOfMessage()) or b""
            )
            await stream.send(out)
            conn.start_next_cycle()
        else:  # ConnectionClosed
            return


@asynccontextmanager
async def serve_h2(
    tls: trustme.CA | None = None,
    alpn: tuple[str, ...] = ("h2",),
    names: tuple[str, ...] = ("localhost", "127.0.0.1"),
    max_streams: int = 100,
) -> AsyncIterator[H2Server]:
    """An HTTP/2 server on 127.0.0.1: h2c, or TLS (a certificate for
    ``names`` from the trustme CA ``tls``) offering ``alpn`` (where it
    agrees on ``http/1.1``, it answers plain requests over HTTP/1.1), each
    connection taking ``max_streams`` streams at once."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    context: ssl.SSLContext | None = None
    if tls is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.issue_cert(*names).configure_cert(context)
        context.set_alpn_protocols(list(alpn))
    server = H2Server(f"{'https' if tls else 'http'}://127.0.0.1:{port}")

    async def serve(client: anyio.abc.SocketStream) -> None:
        stream: anyio.abc.ByteStream = client
        number = server.connections
        server.connections += 1
        async with client:
            if context is not None:
                try:
                    wrapped = await anyio.streams.tls.TLSStream.wrap(
                        client, server_side=True, ssl_context=context
                    )
                except (ssl.SSLError, anyio.BrokenResourceError, OSError):
                    return
                agreed = wrapped.extra(anyio.streams.tls.TLSAttribute.alpn_protocol)
                server.alpn.append(agreed)
                stream = wrapped
                if agreed == "http/1.1":
                    with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                        await _serve_h11(server, stream)
                    return
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                await _Connection(server, stream, number, max_streams).run()

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        try:
            yield server
        finally:
            tg.cancel_scope.cancel()
