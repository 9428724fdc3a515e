"""The fake upstream's HTTP/1.1 server: h11 over anyio sockets (asyncio or trio).

Theory of operation: one task per connection reads a request with h11, records
it, asks :func:`tests.fakes.routes.respond` (sans-IO) for the :class:`Reply`,
and plays it: a plain body in one write; a stream as one write per frame, frame
``i`` due ``i * delay`` after the head (absolute deadlines, so no drift); then
the faults the reply's scenarios name (``cut``, ``reset``, ``stall``,
``garbage``, ``close-early``).  Connections are kept alive between requests.
"""

from __future__ import annotations

import socket
import struct
from collections import deque
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from http import HTTPStatus

import anyio
import anyio.abc
import h11

from .routes import respond
from .wire import FRAME_DELAY_HEADER, ReceivedRequest, Reply, Scenario, scrub, secrets_of

__all__ = [
    "CUT_AFTER",
    "DEFAULT_FRAME_DELAY",
    "GARBAGE",
    "SLOW_FRAME_DELAY",
    "FakeUpstream",
    "serve_fake",
]

#: Seconds between streamed frames unless the server, ``slow`` or the header says otherwise.
DEFAULT_FRAME_DELAY = 0.005
#: Seconds between streamed frames under the ``slow`` scenario.
SLOW_FRAME_DELAY = 0.05
#: Frames a ``cut``/``reset`` stream sends before the connection goes (fewer if it is short).
CUT_AFTER = 3
#: What the ``garbage`` scenario answers instead of HTTP.
GARBAGE = b"\x00\x16\x03\x01 this is not HTTP \xff\xfe\r\n\r\n"

_GONE = (
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    anyio.EndOfStream,
    ConnectionError,
    h11.RemoteProtocolError,
)


def _out(conn: h11.Connection, event: h11.Event) -> bytes:
    data = conn.send(event)
    return data if data is not None else b""


def _reason(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""


class FakeUpstream:
    """One running fake: where it listens and what it has received.

    ``requests`` and ``connections`` are appended/counted by the server as it
    goes; read them from the test.  ``push_reply`` scripts the next answers.
    """

    def __init__(self, host: str, port: int, frame_delay: float) -> None:
        self.host = host
        self.port = port
        #: Seconds between streamed frames (the ``slow`` scenario and the header override it).
        self.frame_delay = frame_delay
        #: Every request received, in order (secrets included: this is the upstream's view).
        self.requests: list[ReceivedRequest] = []
        #: How many TCP connections were accepted.
        self.connections = 0
        #: How many connections the client closed (or broke) while an answer
        #: was being sent on them.
        self.hangups = 0
        #: What it answered to each request, in the order of ``requests`` (a
        #: test compares a recording with it: nothing lost, cut or doubled).
        self.answered: list[Reply] = []
        #: Exceptions the fake's own code raised while answering (each answered with a 500).
        self.errors: list[Exception] = []
        self._scripted: deque[Reply] = deque()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def push_reply(self, reply: Reply) -> None:
        """Answer the next request with ``reply`` instead of routing it (FIFO).

        The reply's ``scenarios`` still drive the faults (``cut``, ``stall``, ...).
        """
        self._scripted.append(reply)

    def clear(self) -> None:
        """Forget the requests and errors seen and reset the connection count."""
        self.requests.clear()
        self.answered.clear()
        self.errors.clear()
        self.connections = 0
        self.hangups = 0

    def frame_delay_for(self, request: ReceivedRequest, reply: Reply) -> float:
        override = request.header(FRAME_DELAY_HEADER)
        if override is not None:
            with suppress(ValueError):
                return max(0.0, float(override) / 1000)
        if Scenario.SLOW in reply.scenarios:
            return SLOW_FRAME_DELAY
        return self.frame_delay

    async def handle(self, stream: anyio.abc.SocketStream) -> None:
        """Serve one connection until it closes (keep-alive, one request at a time)."""
        self.connections += 1
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                request = await self._receive(conn, stream)
                if request is None:
                    return
                self.requests.append(request)
                reply = self._scripted.popleft() if self._scripted else self._respond(request)
                self.answered.append(reply)
                try:
                    if not await self._play(conn, stream, request, reply):
                        return
                except _GONE:
                    self.hangups += 1
                    raise
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return
                conn.start_next_cycle()
        except _GONE:
            return
        finally:
            await anyio.aclose_forcefully(stream)

    def _respond(self, request: ReceivedRequest) -> Reply:
        """Route the request; a bug in the fake answers 500 (and lands in ``errors``)."""
        try:
            return respond(request)
        except Exception as exc:
            self.errors.append(exc)
            message = scrub(f"reel fake upstream failed to answer: {exc!r}\n", secrets_of(request))
            text = message.encode()
            return Reply(500, (("content-type", "text/plain; charset=utf-8"),), (text,))

    async def _receive(
        self, conn: h11.Connection, stream: anyio.abc.SocketStream
    ) -> ReceivedRequest | None:
        head: h11.Request | None = None
        body = bytearray()
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError:
                await self._reject(conn, stream)
                return None
            if event is h11.NEED_DATA:
                try:
                    data = await stream.receive(65536)
                except anyio.EndOfStream:
                    data = b""
                conn.receive_data(data)
            elif isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage) and head is not None:
                return ReceivedRequest(
                    method=head.method.decode("ascii"),
                    target=head.target.decode("latin-1"),
                    headers=tuple(
                        (k.decode("latin-1"), v.decode("latin-1")) for k, v in head.headers
                    ),
                    body=bytes(body),
                )
            else:  # ConnectionClosed or PAUSED
                return None

    async def _reject(self, conn: h11.Connection, stream: anyio.abc.SocketStream) -> None:
        if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        try:
            response = h11.Response(
                status_code=400, headers=[("content-length", "0"), ("connection", "close")]
            )
            await stream.send(_out(conn, response) + _out(conn, h11.EndOfMessage()))
        except (h11.LocalProtocolError, *_GONE):
            pass

    async def _play(
        self,
        conn: h11.Connection,
        stream: anyio.abc.SocketStream,
        request: ReceivedRequest,
        reply: Reply,
    ) -> bool:
        """Send ``reply`` with its faults; True if the connection may be reused."""
        faults = reply.scenarios
        if Scenario.CLOSE_EARLY in faults:
            return False
        if Scenario.GARBAGE in faults:
            await stream.send(GARBAGE)
            return False
        headers = list(reply.headers)
        if reply.streamed:
            headers.append(("transfer-encoding", "chunked"))
        else:
            headers.append(("content-length", str(len(reply.body))))
        head = _out(
            conn,
            h11.Response(status_code=reply.status, headers=headers, reason=_reason(reply.status)),
        )
        delay = self.frame_delay_for(request, reply)
        if Scenario.STALL in faults:
            await stream.send(head)
            await _wait_for_eof(stream)
            return False
        if Scenario.CUT in faults or Scenario.RESET in faults:
            await stream.send(head)
            if reply.streamed:
                count = min(CUT_AFTER, max(1, len(reply.frames) - 1))
                await _send_frames(conn, stream, reply.frames[:count], delay)
            else:
                await stream.send(_out(conn, h11.Data(data=reply.body[: len(reply.body) // 2])))
            if Scenario.RESET in faults:
                _abort(stream)
            return False
        if not reply.streamed:
            body = _out(conn, h11.Data(data=reply.body)) if reply.body else b""
            await stream.send(head + body + _out(conn, h11.EndOfMessage()))
            return True
        await stream.send(head)
        await _send_frames(conn, stream, reply.frames, delay)
        await stream.send(_out(conn, h11.EndOfMessage()))
        return True


async def _send_frames(
    conn: h11.Connection, stream: anyio.abc.SocketStream, frames: Sequence[bytes], delay: float
) -> None:
    """One write per frame, frame ``i`` due ``i * delay`` after the head (deadlines, no drift)."""
    start = anyio.current_time()
    for index, frame in enumerate(frames, start=1):
        wait = start + index * delay - anyio.current_time()
        if wait > 0:
            await anyio.sleep(wait)
        if frame:
            await stream.send(_out(conn, h11.Data(data=frame)))


async def _wait_for_eof(stream: anyio.abc.SocketStream) -> None:
    """Hold the connection open, sending nothing, until the peer closes it."""
    while True:
        try:
            await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return


def _abort(stream: anyio.abc.SocketStream) -> None:
    """Make the coming close a TCP RST (SO_LINGER on, zero timeout)."""
    raw = stream.extra(anyio.abc.SocketAttribute.raw_socket)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


@asynccontextmanager
async def serve_fake(
    *, frame_delay: float = DEFAULT_FRAME_DELAY, port: int = 0, host: str = "127.0.0.1"
) -> AsyncIterator[FakeUpstream]:
    """Run the fake on ``host:port`` (port 0: any free one) for the ``async with`` body."""
    listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
    bound = listener.extra(anyio.abc.SocketAttribute.local_port)
    fake = FakeUpstream(host, bound, frame_delay)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, fake.handle, tg)
        try:
            yield fake
        finally:
            tg.cancel_scope.cancel()
