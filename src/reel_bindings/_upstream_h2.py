"""HTTP/2 to the upstream, for the requests that need it (gRPC).

Theory of operation.  :class:`H2Pool` keeps one connection per origin
(h2c with prior knowledge for ``http://``, TLS with ALPN ``h2`` for
``https://``; :class:`~reel_bindings._upstream.AsyncUpstream` opens the
byte stream, through a ``CONNECT`` tunnel when a proxy is in the way), and
every request to that origin is a stream of it.  python-hyper's ``h2``,
sans-IO, keeps the frames and the streams' states; :class:`_Connection`
moves its bytes.

No task of its own reads the socket (the pool is made outside any task
group, and a reader that outlived its requests would need one): whoever
waits on the connection reads it.  A request waiting for its head, its
next chunk or a window to send in becomes the reader if nobody is, reads
once, hands every event to the stream it belongs to (:class:`_Stream`: a
head, DATA waiting for its reader, trailers, the end, or the failure that
ended it), wakes the others, and looks again; the others wait for that
wake-up.  So each stream's events reach its own reader and nothing crosses
streams.

Flow control both ways.  A request body goes out in DATA frames within the
upstream's windows, waiting (reading) for its WINDOW_UPDATEs; a body sent
as it comes (``more``: a gRPC call's later client messages) goes on beside
its answer, in a task of the request's own, and the read timeout counts
from its end (the upstream may wait on the client as long as it takes).  A response's
DATA is acknowledged when its reader takes it, not when it arrives: at most
a window (:data:`STREAM_WINDOW`) of a stream waits in Reel, and a 50 MB
body streams through in that much memory; a stream read to its end never
stalls, because taking its data opens its window again.

Failures are mapped here, per stream: ``RST_STREAM`` is a
:attr:`~reel_core.UpstreamError.RESET`; a ``GOAWAY`` ends every stream in
flight (h2 reads no frame after it) as
:attr:`~reel_core.UpstreamError.CLOSED`, saying whether the upstream had
taken the stream; an upstream that closes the connection, a
:attr:`~reel_core.UpstreamError.CLOSED` too; one that does not speak HTTP/2
(it answers the preface in HTTP/1.1, or ALPN picks another protocol), a
:attr:`~reel_core.UpstreamError.PROTOCOL`.  What a stream read before its
failure is handed out first, then the failure: a cut recording holds it.
An answer that ends before the request body does, then ``RST_STREAM
NO_ERROR``, is whole (RFC 9113 8.1).

A gRPC call that fails before any message is answered in one HEADERS
frame (Trailers-Only): its status fields are handed out as its trailers
(:func:`trailers_only`), where every other call has them.  The pool's
connections are not counted in ``AsyncUpstream``'s ``max_connections``
(one per origin; the upstream's ``SETTINGS_MAX_CONCURRENT_STREAMS`` bounds
its streams).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress

import anyio
import anyio.abc
import anyio.streams.tls

try:
    import h2.config
    import h2.connection
    import h2.errors
    import h2.events
    import h2.exceptions
    import h2.settings
except ImportError as exc:  # the h2 extra is not installed
    raise ImportError(
        "Reel forwards gRPC upstream over HTTP/2 with the h2 package: "
        "pip install 'reel-llm[h2]' (or 'reel-llm[grpc]')"
    ) from exc

from reel_core import RemoteProtocolError, UpstreamError
from reel_core.tools import HeaderBlock, check_received, is_grpc

from ._upstream_parts import Once as _Once
from ._upstream_parts import Origin as _Origin
from ._upstream_parts import UpstreamFailure
from ._upstream_parts import readable as _readable

__all__ = ["CONNECTION_WINDOW", "STREAM_WINDOW", "H2Pool", "h2_headers", "trailers_only"]

#: Bytes asked of the socket per read.
_READ_SIZE = 65536
#: The window each stream gives the upstream (``SETTINGS_INITIAL_WINDOW_SIZE``):
#: at most this much of a stream's response waits in Reel unread.
STREAM_WINDOW = 1 << 20
#: The connection's window: at most this much of all its streams' responses
#: waits in Reel unread.
CONNECTION_WINDOW = 1 << 24
#: How long an idle connection's pending bytes are read for before reuse.
_REFRESH_WAIT = 0.1
#: The largest header list taken from the upstream (as the h11 client's head).
_MAX_HEADER_LIST = 100 * 1024

#: Headers that never go in an HTTP/2 request (connection-specific ones).
_NOT_H2 = frozenset({b"host", b"connection", b"keep-alive", b"transfer-encoding", b"upgrade"})

#: The events that carry a header block of a response.
_HeaderEvent = (
    h2.events.ResponseReceived
    | h2.events.InformationalResponseReceived
    | h2.events.TrailersReceived
)
_HEADER_EVENTS = (
    h2.events.ResponseReceived,
    h2.events.InformationalResponseReceived,
    h2.events.TrailersReceived,
)

#: Why streams in flight failed when the upstream closed the connection.
_CLOSED = "the upstream closed the HTTP/2 connection"
_CLOSED_UNHEARD = (
    "the upstream closed the connection without answering: it may not speak HTTP/2 "
    "(a gRPC request goes upstream over HTTP/2 only)"
)

#: Opens the byte stream to an origin (TLS with ALPN ``h2`` for https).
Opener = Callable[[_Origin], Awaitable[anyio.abc.ByteStream]]
#: The next piece of a request body sent as it comes (``None``: its end).
More = Callable[[], Awaitable[bytes | None]]


def h2_headers(
    method: str, origin: _Origin, target: str, headers: list[tuple[bytes, bytes]]
) -> list[tuple[bytes, bytes]]:
    """The request's headers as an HTTP/2 request sends them: the pseudo
    headers first (``:authority`` from ``host``), names lower-case, no
    connection-specific header, and ``te: trailers`` (gRPC requires it; it
    is the only ``te`` HTTP/2 allows)."""
    authority = next((v for k, v in headers if k == b"host"), origin[1].encode("ascii"))
    return [
        (b":method", method.encode("ascii")),
        (b":scheme", origin[0].encode("ascii")),
        (b":authority", authority),
        (b":path", target.encode("ascii")),
        *((k.lower(), v) for k, v in headers if k.lower() not in _NOT_H2),
        (b"te", b"trailers"),
    ]


def _code(error_code: int | None) -> str:
    """An HTTP/2 error code's name (``CANCEL``), or its number."""
    if error_code is None:
        return "no error code"
    try:
        return h2.errors.ErrorCodes(error_code).name
    except ValueError:
        return str(error_code)


class _Stream:
    """What the connection read for one request, waiting for its reader."""

    __slots__ = ("data", "ended", "failure", "head", "sent", "trailers", "waiting")

    def __init__(self) -> None:
        #: The response's head (``:status`` among them), once it came.
        self.head: list[tuple[bytes, bytes]] | None = None
        #: DATA not yet taken: the bytes and their flow-controlled length.
        self.data: deque[tuple[bytes, int]] = deque()
        self.trailers: list[tuple[bytes, bytes]] = []
        #: The upstream ended the stream (``END_STREAM``).
        self.ended = False
        #: What ended the stream before its end (raised once its data is taken).
        self.failure: UpstreamFailure | None = None
        #: The request was sent whole (its END_STREAM went): waits for the
        #: answer count from then (see ``_Connection._within``).
        self.sent = False
        #: The wait for the answer under way, and its timeout.
        self.waiting: tuple[anyio.CancelScope, float] | None = None

    def sent_whole(self) -> None:
        """The request's END_STREAM went: a wait under way counts from now."""
        self.sent = True
        if self.waiting is not None:
            scope, timeout = self.waiting
            scope.deadline = anyio.current_time() + timeout

    def over(self) -> bool:
        return self.ended or self.failure is not None


class _Connection:
    """One HTTP/2 connection to an origin, its requests as streams."""

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self.stream = stream
        # h2 refuses a value that starts or ends with a space, which gRPC
        # sends (grpc-message: " no more"): the same checks but that one
        # are the core's (check_received), per header block
        config = h2.config.H2Configuration(
            client_side=True, header_encoding=None, validate_inbound_headers=False
        )
        self.h2 = h2.connection.H2Connection(config)
        self.h2.local_settings = h2.settings.Settings(
            client=True,
            initial_values={
                h2.settings.SettingCodes.ENABLE_PUSH: 0,
                h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: STREAM_WINDOW,
                h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: _MAX_HEADER_LIST,
            },
        )
        self.h2.initiate_connection()
        self.h2.increment_flow_control_window(CONNECTION_WINDOW - 65535)
        self.streams: dict[int, _Stream] = {}
        #: Why no new stream may start here (``None``: they may).
        self.closing: str | None = None
        self._dead = False
        self._heard = False  # a byte came from the upstream
        self._reading = False
        self._changed: anyio.Event | None = None
        self._writing = anyio.Lock()
        sock = stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
        self._readable = None if sock is None else _readable(sock)

    def usable(self) -> bool:
        """Whether a new request may be a stream of this connection."""
        return self.closing is None and self.h2.highest_outbound_stream_id < (1 << 31) - 2

    async def refresh(self) -> None:
        """Before an idle connection takes a request: read what it holds (a
        GOAWAY, a close: the upstream may end idle connections)."""
        if not self._reading and self._readable is not None and self._readable():
            self._reading = True
            try:
                # bounded: a readable TLS socket may hold a record that is
                # no data (a session ticket), and the read would wait on
                with anyio.move_on_after(_REFRESH_WAIT):
                    await self._read()
            finally:
                self._reading = False
                self._notify()

    async def open(
        self,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        hook: _Once,
        limit: float,
        *,
        end: bool = True,
    ) -> int:
        """Start a stream for a request (its head and the body within the
        windows, in one write), calls ``hook`` once it is written (or
        before it waits for a stream), then sends the rest of the body as
        the windows open; ``end``: the body ends the request (else more
        follows, :meth:`send_more`).  Waits at most ``limit`` seconds for
        the upstream to allow one more stream."""

        def free() -> bool:
            settings = self.h2.remote_settings
            return self.h2.open_outbound_streams < settings.max_concurrent_streams

        if not free():
            hook()
        with anyio.move_on_after(limit) as waited:
            await self._until(free)
        if waited.cancelled_caught:
            raise UpstreamFailure(
                UpstreamError.TIMEOUT,
                f"no free stream in {limit:g} s "
                f"({self.h2.remote_settings.max_concurrent_streams} are open)",
            )
        self._check()
        stream_id = self.h2.get_next_available_stream_id()
        try:
            self.h2.send_headers(stream_id, headers, end_stream=end and not body)
        except h2.exceptions.ProtocolError as exc:
            raise UpstreamFailure(
                UpstreamError.PROTOCOL, f"cannot send the request: {exc}"
            ) from None
        state = self.streams[stream_id] = _Stream()
        if not body:
            await self._flush()
            hook()
        else:
            await self._send(stream_id, body, end, hook)
        if end:
            state.sent_whole()
        return stream_id

    async def send_more(self, stream_id: int, data: bytes, *, end: bool) -> bool:
        """More of a request body whose head went with ``open(end=False)``:
        ``data`` within the windows as they open, then END_STREAM if
        ``end``.  False once the stream is over (answered, reset, the
        connection gone): nothing more goes on it."""
        state = self.streams.get(stream_id)
        if state is None or state.over() or self._dead:
            return False
        try:
            if data:
                await self._send(stream_id, data, end, None)
            elif end:
                self.h2.end_stream(stream_id)
                await self._flush()
        except h2.exceptions.ProtocolError:  # closed meanwhile: its reader says how
            return False
        if end:
            state.sent_whole()
        return not state.over() and not self._dead

    async def _send(self, stream_id: int, body: bytes, end: bool, hook: _Once | None) -> None:
        """``body`` on ``stream_id`` in DATA frames within the windows,
        waiting (reading) for the upstream's WINDOW_UPDATEs; the last
        frame ends the stream if ``end``.  ``hook`` is called after the
        first write.  Stops early once the stream is over."""
        state = self.streams[stream_id]
        sent = 0
        while True:
            if state.over() or self._dead:
                return  # answered (or failed) before the body's end
            window = min(self.h2.local_flow_control_window(stream_id), len(body) - sent)
            while window > 0:
                size = min(window, self.h2.max_outbound_frame_size)
                sent += size
                window -= size
                last = end and sent == len(body)
                self.h2.send_data(stream_id, body[sent - size : sent], end_stream=last)
            await self._flush()
            if hook is not None:
                hook()
                hook = None
            if sent == len(body):
                return
            await self._until(
                lambda: state.over() or self.h2.local_flow_control_window(stream_id) > 0
            )

    async def head(self, stream_id: int, timeout: float | None = None) -> list[tuple[bytes, bytes]]:
        """The response's head: the caller bounds the wait, or (``timeout``)
        it is :meth:`_within` it."""
        state = self.streams[stream_id]

        def came() -> bool:
            return state.head is not None or state.failure is not None

        if timeout is None:
            await self._until(came)
        elif not await self._within(state, came, timeout):
            raise UpstreamFailure(UpstreamError.TIMEOUT, "read timed out")
        if state.head is None:
            assert state.failure is not None
            raise state.failure
        return state.head

    async def next_data(self, stream_id: int, timeout: float) -> bytes | None:
        """The response's next chunk, ``None`` at its end; each wait at most
        ``timeout`` seconds.  Taking a chunk opens the window again."""
        state = self.streams[stream_id]
        if not await self._within(state, lambda: bool(state.data) or state.over(), timeout):
            raise UpstreamFailure(UpstreamError.TIMEOUT, "read timed out")
        if state.data:
            chunk, length = state.data.popleft()
            self.h2.acknowledge_received_data(length, stream_id)
            await self._flush()
            return chunk
        if state.failure is not None and not state.ended:
            raise state.failure
        return None

    async def _within(self, state: _Stream, done: Callable[[], bool], timeout: float) -> bool:
        """Read until ``done()``; False once ``timeout`` seconds passed with
        it not done, counted from the wait's start or, for a request whose
        body still comes (a gRPC call's client still sending), from its
        end: the upstream may wait for the client's next message as long
        as the client takes, and the client may end the call."""
        with anyio.CancelScope() as scope:
            scope.deadline = anyio.current_time() + timeout if state.sent else math.inf
            state.waiting = (scope, timeout)
            try:
                await self._until(done)
            finally:
                state.waiting = None
        return not scope.cancelled_caught

    async def close_stream(self, stream_id: int) -> None:
        """The request is done with its stream: one the upstream has not
        ended is reset (``CANCEL``), and what it left unread is handed
        back to the connection's window."""
        state = self.streams.pop(stream_id, None)
        if state is None or self._dead:
            return
        unread = sum(length for _, length in state.data)
        with suppress(h2.exceptions.ProtocolError):
            if not state.over() or not self._closed(stream_id):
                self.h2.reset_stream(stream_id, h2.errors.ErrorCodes.CANCEL)
            if unread:
                self.h2.acknowledge_received_data(unread, stream_id)
        with anyio.CancelScope(shield=True):
            await self._flush()

    def _closed(self, stream_id: int) -> bool:
        """Whether h2 has ``stream_id`` closed both ways."""
        stream = self.h2.streams.get(stream_id)
        return stream is None or stream.closed

    def _check(self) -> None:
        if self.closing is not None:
            raise UpstreamFailure(UpstreamError.CLOSED, self.closing)

    async def _until(self, done: Callable[[], bool]) -> None:
        """Read the connection until ``done()`` (or it is dead; the caller
        bounds the wait): as its reader if nobody is, else waiting for
        the reader's next wake-up."""
        while not done() and not self._dead:
            if self._reading:
                if self._changed is None:
                    self._changed = anyio.Event()
                await self._changed.wait()
                continue
            self._reading = True
            try:
                await self._read()
            finally:
                self._reading = False
                self._notify()

    def _notify(self) -> None:
        """Wake the requests waiting on the connection: its state moved."""
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def _read(self) -> None:
        """One read, its events handed to their streams, and what h2 has
        to say back (acknowledgements, window updates) written."""
        try:
            data = await self.stream.receive(_READ_SIZE)
        except anyio.EndOfStream:
            self._die(UpstreamError.CLOSED, _CLOSED if self._heard else _CLOSED_UNHEARD)
            return
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            self._die(UpstreamError.RESET, f"the HTTP/2 connection broke: {exc or 'reset'}")
            return
        if not self._heard and data.startswith(b"HTTP/"):
            line = data.partition(b"\r\n")[0][:80].decode("latin-1")
            self._die(
                UpstreamError.PROTOCOL,
                f"the upstream does not speak HTTP/2 (h2c with prior knowledge): it answered "
                f"{line!r}; a gRPC request goes upstream over HTTP/2 only: point Reel at an "
                "HTTP/2 (gRPC) server",
            )
            return
        self._heard = True
        try:
            events = self.h2.receive_data(data)
        except h2.exceptions.ProtocolError as exc:
            self._die(UpstreamError.PROTOCOL, f"the upstream broke HTTP/2: {exc}")
            return
        for event in events:
            self._handle(event)
        await self._flush()

    def _handle(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.ConnectionTerminated):
            self._goaway(event)
            return
        stream_id = getattr(event, "stream_id", 0)
        state = self.streams.get(stream_id)
        if isinstance(event, h2.events.DataReceived):
            length = event.flow_controlled_length or 0
            if state is not None and event.data:
                state.data.append((bytes(event.data), length))
            elif length:  # nobody reads it: handed back now
                self.h2.acknowledge_received_data(length, stream_id)
        if state is None:
            return
        if isinstance(event, _HEADER_EVENTS) and not self._fields(stream_id, state, event):
            return
        if isinstance(event, h2.events.ResponseReceived):
            state.head = list(event.headers or [])
        elif isinstance(event, h2.events.TrailersReceived):
            state.trailers = list(event.headers or [])
        elif isinstance(event, h2.events.StreamEnded) and state.failure is None:
            # (a malformed header block's failure stands: not a whole answer)
            state.ended = True
        elif isinstance(event, h2.events.StreamReset) and not state.ended:
            # (after the end, a reset is the upstream's way of refusing the
            # rest of a request body it answered without: no failure)
            state.failure = UpstreamFailure(
                UpstreamError.RESET,
                f"the upstream reset the stream (RST_STREAM {_code(event.error_code)})",
            )

    def _fields(self, stream_id: int, state: _Stream, event: _HeaderEvent) -> bool:
        """Whether a header block the upstream sent is well-formed HTTP/2
        (:func:`~reel_core.tools.check_received`: every rule of h2's own
        validation but the one against surrounding whitespace).  One that
        is not fails its stream, which is reset (``PROTOCOL_ERROR``, RFC
        9113 8.1.1): the other streams go on."""
        block = (
            HeaderBlock.TRAILERS
            if isinstance(event, h2.events.TrailersReceived)
            else HeaderBlock.RESPONSE
        )
        try:
            check_received([(bytes(k), bytes(v)) for k, v in event.headers or ()], block)
        except RemoteProtocolError as exc:
            if not state.over():
                state.failure = UpstreamFailure(
                    UpstreamError.PROTOCOL,
                    f"the upstream broke HTTP/2: {exc}; the answer ends there "
                    "(the upstream server is at fault)",
                )
            with suppress(h2.exceptions.ProtocolError):
                self.h2.reset_stream(stream_id, h2.errors.ErrorCodes.PROTOCOL_ERROR)
            return False
        return True

    def _goaway(self, event: h2.events.ConnectionTerminated) -> None:
        """The upstream sent GOAWAY: no new stream here, and (h2 reads no
        frame after it) every stream in flight ends now."""
        last = event.last_stream_id if event.last_stream_id is not None else 0
        code = _code(event.error_code)
        self.closing = f"the upstream ended the HTTP/2 connection (GOAWAY {code})"
        for stream_id, state in self.streams.items():
            if state.over():
                continue
            taken = (
                "mid-response"
                if state.head is not None
                else "before answering; it took the request"
                if stream_id <= last
                else "before taking the request (it was not processed)"
            )
            state.failure = UpstreamFailure(UpstreamError.CLOSED, f"{self.closing} {taken}")
        self._dead = True

    def _die(self, error: UpstreamError, detail: str) -> None:
        """The connection is over: every stream in flight fails with ``detail``."""
        self.closing = self.closing or detail
        self._dead = True
        for state in self.streams.values():
            if not state.over():
                state.failure = UpstreamFailure(error, detail)

    async def _flush(self) -> None:
        """Write what h2 has to send.  Taken under the lock: header blocks
        go out in the order they were encoded.  A failed write is not the
        failure: the next read says what happened."""
        async with self._writing:
            data = self.h2.data_to_send()
            if not data or self._dead:
                return
            try:
                await self.stream.send(data)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                pass
            except BaseException:
                # cancelled mid-write: the frames may be cut, the connection is done
                self._die(UpstreamError.RESET, "a write to the upstream was cut off")
                raise

    def idle(self) -> bool:
        return not self.streams

    async def aclose(self) -> None:
        self._die(UpstreamError.CLOSED, "the HTTP/2 connection was closed")
        with anyio.CancelScope(shield=True):
            await anyio.aclose_forcefully(self.stream)


#: The fields of a gRPC status, which end a call (its trailers).
_STATUS_FIELDS = frozenset({b"grpc-status", b"grpc-message", b"grpc-status-details-bin"})


def trailers_only(
    headers: list[tuple[bytes, bytes]],
) -> tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]]:
    """A response whose head ended its stream, as head and trailers.  A
    gRPC call that fails before any message answers in one HEADERS frame
    ("Trailers-Only"), its status among the headers; its status fields are
    its trailers, as in every other gRPC response, so a recording holds a
    call's status in one place (and the core's own gRPC answers do too).
    Any other response is left as it came."""
    content_type = next((v for k, v in headers if k == b"content-type"), None)
    if not is_grpc(content_type) or not any(k == b"grpc-status" for k, _ in headers):
        return headers, []
    return (
        [(k, v) for k, v in headers if k not in _STATUS_FIELDS],
        [(k, v) for k, v in headers if k in _STATUS_FIELDS],
    )


class _Response:
    """An HTTP/2 response: its head, its body read with :meth:`chunks`,
    its trailers once that is read to its end."""

    def __init__(
        self,
        connection: _Connection,
        stream_id: int,
        head: list[tuple[bytes, bytes]],
        timeout: float,
    ) -> None:
        status = next((v for k, v in head if k == b":status"), b"")
        try:
            self.status = int(status)
        except ValueError:
            raise UpstreamFailure(
                UpstreamError.PROTOCOL, f"the upstream answered a bad :status {status!r}"
            ) from None
        self.headers = [(k, v) for k, v in head if not k.startswith(b":")]
        self.trailers: list[tuple[bytes, bytes]] = []
        self.complete = False
        state = connection.streams[stream_id]
        if state.ended and not state.data and not state.trailers:
            self.headers, state.trailers = trailers_only(self.headers)
        self._connection = connection
        self._stream_id = stream_id
        self._timeout = timeout

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        connection, stream_id = self._connection, self._stream_id
        while (chunk := await connection.next_data(stream_id, self._timeout)) is not None:
            yield chunk
        self.trailers = connection.streams[stream_id].trailers
        self.complete = True


async def _send_rest(connection: _Connection, stream_id: int, more: More) -> None:
    """Send each piece ``more`` gives on ``stream_id`` as it comes, then
    the request's end; stops once the stream is over (its failure is the
    response's to say)."""
    while (data := await more()) is not None:
        if not await connection.send_more(stream_id, data, end=False):
            return
    await connection.send_more(stream_id, b"", end=True)


class H2Pool:
    """One multiplexed HTTP/2 connection per origin, shared by the requests
    under way to it (see the module's docstring)."""

    def __init__(self, opener: Opener, *, connect_timeout: float, read_timeout: float) -> None:
        self._opener = opener
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self._current: dict[_Origin, _Connection] = {}
        self._connections: set[_Connection] = set()
        self._connecting: dict[_Origin, anyio.Lock] = {}

    @asynccontextmanager
    async def send(
        self,
        method: str,
        origin: _Origin,
        target: str,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        hook: _Once,
        more: More | None = None,
    ) -> AsyncIterator[_Response]:
        """Send a request as a stream of ``origin``'s connection; yields the
        response (see ``AsyncUpstream.send``: the same hook and timeouts).
        With ``more``, ``body`` is the body's start: each piece ``more``
        gives goes after it as it comes, while the response is read (a
        gRPC call's later client messages), and its ``None`` ends the
        request."""
        connection = await self._take(origin, hook)
        fields = h2_headers(method, origin, target, headers)
        stream_id: int | None = None
        failure: BaseException | None = None
        try:
            async with anyio.create_task_group() as rest:
                try:
                    head: list[tuple[bytes, bytes]] | None = None
                    with anyio.move_on_after(self.read_timeout) as scope:
                        stream_id = await connection.open(
                            fields, body, hook, self.connect_timeout, end=more is None
                        )
                        if more is None:  # a final head: h2 keeps 1xx apart
                            head = await connection.head(stream_id)
                    if scope.cancelled_caught:
                        what = "read" if stream_id is not None else "write"
                        raise UpstreamFailure(UpstreamError.TIMEOUT, f"{what} timed out")
                    assert stream_id is not None
                    if more is not None:  # the rest goes as it comes, beside the answer
                        rest.start_soon(_send_rest, connection, stream_id, more)
                        head = await connection.head(stream_id, self.read_timeout)
                    assert head is not None
                    yield _Response(connection, stream_id, head, self.read_timeout)
                except BaseException as exc:  # raised past the task group as it came, not grouped
                    failure = exc
                rest.cancel_scope.cancel()  # the answer is over: so is the request
            if failure is not None:
                raise failure
        finally:
            if stream_id is not None:
                await connection.close_stream(stream_id)
            await self._settle(connection, origin)

    async def _take(self, origin: _Origin, hook: _Once) -> _Connection:
        """The origin's connection, else a new one (``hook`` is called
        before one is made)."""
        connection = self._current.get(origin)
        if connection is not None:
            if connection.idle():
                await connection.refresh()
            if connection.usable():
                return connection
        hook()
        lock = self._connecting.setdefault(origin, anyio.Lock())
        async with lock:
            connection = self._current.get(origin)
            if connection is not None and connection.usable():
                return connection
            stream = await self._opener(origin)
            if origin[0] == "https":
                agreed = stream.extra(anyio.streams.tls.TLSAttribute.alpn_protocol, None)
                if agreed != "h2":
                    await anyio.aclose_forcefully(stream)
                    raise UpstreamFailure(
                        UpstreamError.PROTOCOL,
                        f"the upstream {origin[1]}:{origin[2]} does not speak HTTP/2 over TLS "
                        f"(ALPN agreed on {agreed or 'nothing'}, not h2); a gRPC request goes "
                        "upstream over HTTP/2 only",
                    )
            connection = _Connection(stream)
            self._current[origin] = connection
            self._connections.add(connection)
            return connection

    async def _settle(self, connection: _Connection, origin: _Origin) -> None:
        """After a request: a connection that can take no more and serves
        none is closed."""
        if connection.idle() and not connection.usable():
            if self._current.get(origin) is connection:
                del self._current[origin]
            self._connections.discard(connection)
            await connection.aclose()

    async def aclose(self) -> None:
        connections = list(self._connections)
        self._connections.clear()
        self._current.clear()
        for connection in connections:
            await connection.aclose()
