"""The proxy's HTTP/1.1 connection: a pump around the core's session.

Shaped as httpcore's ``_async/http11.py`` is around h11, the other way
round: :class:`HTTP11Connection` pulls the session's next event
(:meth:`~HTTP11Connection._receive_event`, which reads the socket while the
session needs data) and hands it to the method for its kind (one per event:
a decision, a routed request, a head to play, a ``100 Continue``, the end of
an exchange).  Its state is the session's and the engine's, not flags of its
own: each handler says only whether the connection goes on.

A forward goes to ``_forward.py``, a WebSocket session to
``_websocket.py`` (imported at the upgrade, with wsproto and the core's
WebSocket rooms: a connection that never upgrades never loads them).
What the connection asks of the proxy that accepted it is
:class:`Listener` (the timer, the recordings, the viewer), and the
:class:`~._context.Context` it hands on.

A connection whose first bytes are HTTP/2's client preface (h2c with prior
knowledge) is no HTTP/1.1 one: :meth:`HTTP11Connection.serve` looks at what
its first read gave (no read of its own) and hands those bytes back, and
the listener serves the connection with ``_http2.py``'s pump instead.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from typing import Any, Protocol

import anyio
import anyio.abc
import attrs

from reel_core import (
    Continue,
    EndOfResponse,
    Event,
    Forward,
    Miss,
    Refused,
    RemoteProtocolError,
    Replay,
    ResponseHead,
    Routed,
    Session,
    Signal,
    State,
    replay_batches,
)
from reel_core.tools import UiRefusal, routed_verdict

from .._clock import sleep_until
from .._runlog import RunLog
from ._context import Exchange
from ._forward import ClientReader, Forwarding, H11Downstream, Host, reason, send

__all__ = [
    "H2_PREFACE",
    "SETTLE_AFTER",
    "WRITE_SIZE",
    "HTTP11Connection",
    "Listener",
    "Page",
    "Watched",
]

log = logging.getLogger("reel.proxy")

#: In record mode, how long a client may stay quiet after an answer before
#: the recordings waiting are built anyway (seconds; see ``Proxy.settle``).
SETTLE_AFTER = 0.01

#: The most response bytes joined into one write to a client.
WRITE_SIZE = 64 * 1024

#: A page of the proxy's own (the viewer's): status, headers, body.
Page = tuple[int, list[tuple[bytes, bytes]], bytes]

#: The first bytes of an HTTP/2 connection (RFC 9113, 3.4): a client that
#: knows the proxy speaks HTTP/2 (h2c with prior knowledge, or h2 chosen by
#: ALPN) sends them before anything else.
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


class Watched(Protocol):
    """A connection the proxy's timer may close while it waits for its
    client: once ``deadline`` (on the proxy's clock) passed, or at
    shutdown while it is ``idle``, its ``guard`` is cancelled."""

    guard: anyio.CancelScope
    deadline: float

    @property
    def idle(self) -> bool:
        """No exchange under way: the connection is between requests."""
        ...


class Listener(Host, Protocol):
    """What a connection asks of the proxy that accepted it (a forward's
    :class:`~._forward.Host`, and more)."""

    @property
    def client_timeout(self) -> float: ...

    @property
    def closing(self) -> bool:
        """The proxy is stopping: a connection between requests ends."""
        ...

    @property
    def runlog(self) -> RunLog: ...

    def now(self) -> float:
        """The proxy's clock (``time.monotonic``): deadlines, first bytes."""
        ...

    def awaiting(self, conn: Watched) -> AbstractContextManager[None]:
        """While ``conn`` waits for its client: its deadline is watched."""
        ...

    def settle(self) -> None: ...

    async def view(self, routed: Routed) -> Page | UiRefusal:
        """The answer to a request the proxy routed to itself (the viewer):
        its status, headers and body, or why it is refused."""
        ...


class _Pending:
    """Response bytes due now, not written yet, joined into writes of at
    most ``WRITE_SIZE`` bytes (a larger piece, a big body, is cut into
    writes of that size)."""

    __slots__ = ("_pieces", "_size")

    def __init__(self) -> None:
        self._pieces: list[bytes] = []
        self._size = 0

    def add(self, data: bytes) -> bool:
        """Keep ``data``; True when a write is due (``WRITE_SIZE`` reached)."""
        if data:
            self._pieces.append(data)
            self._size += len(data)
        return self._size >= WRITE_SIZE

    async def flush(self, stream: anyio.abc.ByteStream) -> None:
        """Write what is pending, in writes of at most ``WRITE_SIZE`` bytes.
        Each write yields to the event loop: other connections get their
        turn between them."""
        pieces, self._pieces, self._size = self._pieces, [], 0
        batch: list[bytes] = []
        size = 0
        for piece in pieces:
            if batch and size + len(piece) > WRITE_SIZE:
                await stream.send(b"".join(batch))
                batch, size = [], 0
            if len(piece) > WRITE_SIZE:  # a large whole body: cut into writes
                for at in range(0, len(piece), WRITE_SIZE):
                    await stream.send(piece[at : at + WRITE_SIZE])
                continue
            batch.append(piece)
            size += len(piece)
        if batch:
            await stream.send(b"".join(batch))


@attrs.define(eq=False)
class HTTP11Connection:
    """One client connection: its session, the exchange under way, and the
    scope that closes it when the client keeps the proxy waiting."""

    proxy: Listener
    stream: anyio.abc.ByteStream
    session: Session
    exchange: Exchange = attrs.Factory(Exchange)
    #: Cancelled by the proxy's timer once ``deadline`` passed while the
    #: connection waits for the client (or by ``Proxy.shutdown_idle``).
    guard: anyio.CancelScope = attrs.Factory(anyio.CancelScope)
    #: The client's deadline while a request is awaited, on the proxy's
    #: clock (a plain number the timer reads: the scope's own deadline is
    #: never moved, and the event loop's clock is not needed).
    deadline: float = float("inf")
    #: Response bytes due now, not written yet.
    _out: _Pending = attrs.Factory(_Pending)
    #: What the connection's first reads gave while they could still be the
    #: start of :data:`H2_PREFACE` (``None`` once they cannot).
    _first: bytes | None = b""
    #: The connection's tasks (its reader of the client, once it forwards).
    _tasks: anyio.abc.TaskGroup | None = None
    #: Reads the client from the first forward on (see ``ClientReader``).
    _reader: ClientReader | None = None

    async def serve(self) -> bytes | None:
        """Serve the connection until it ends.  One cancel scope for the
        whole connection, cancelled by the timer when the client lets its
        deadline pass (cheaper than a scope per read).

        Returns the bytes read so far when they begin with
        :data:`H2_PREFACE`: the connection is HTTP/2's, not served here."""
        with self.guard:
            failure: Exception | None = None
            async with anyio.create_task_group() as self._tasks:
                try:
                    await self._pump()
                except Exception as exc:  # raised as it is, not in a group
                    failure = exc
                finally:
                    self._tasks.cancel_scope.cancel()  # the reader, if any
            if failure is not None:
                raise failure
        if self.guard.cancelled_caught:
            await self._timed_out()
        first, self._first = self._first, None
        return first if first is not None and first.startswith(H2_PREFACE) else None

    @property
    def idle(self) -> bool:
        """Between requests: :meth:`Proxy.shutdown_idle` may close it."""
        return self.session.engine.state is State.IDLE

    # -- the pump ------------------------------------------------------------

    async def _pump(self) -> None:
        """Hand each event to its handler (:data:`_HANDLERS`) until one
        says the connection is over."""
        while True:
            event = await self._receive_event()
            if event is None or event is Signal.CLOSED:
                return
            if event is Signal.PAUSED:
                if not self._next_cycle():
                    return
                continue
            if not await _HANDLERS[type(event)](self, event):
                return

    async def _receive_event(self) -> Event | Signal | None:
        """The session's next event, reading from the client while it
        needs data; ``None`` once the connection is over (the client's
        bytes were bad: answered, or it ended while the proxy closes)."""
        while True:
            try:
                event = self.session.next_event()
            except RemoteProtocolError as exc:
                log.warning("bad request from client: %s (answered %d)", exc, exc.status)
                answer = self.session.error_response(exc)
                if answer:
                    await send(self.stream, answer)
                    await _linger(self.stream, min(self.proxy.client_timeout, 10.0))
                return None
            if event is not Signal.NEED_DATA:
                return event
            if not await self._receive():
                return None

    def _next_cycle(self) -> bool:
        """The exchange is over: whether the connection carries the next."""
        session = self.session
        if session.finished and session.keep_alive and not self.proxy.closing:
            session.start_next_cycle()
            self.exchange = Exchange()
            return True
        return False

    def _decided(self, event: Replay | Miss | Refused | Forward | Routed) -> Exchange:
        """The exchange under way, named by the request just decided."""
        exchange = self.exchange
        exchange.method = event.request.method
        exchange.target = event.request.target  # redacted when logged
        exchange.path = event.request.path
        exchange.started = self.proxy.now()
        return exchange

    # -- one handler per event -----------------------------------------------

    async def _replay(self, event: Replay) -> bool:
        exchange = self._decided(event)
        exchange.key = event.key
        if event.stale is not None:
            method, path = event.request.method, event.request.path
            self.proxy.runlog.stale_served(method, path, event.stale)
        if event.websocket is not None:  # the connection is the session's now
            from ._websocket import replay_websocket

            session = self.session
            upgrade = session.upgrade(event.request)
            context = self.proxy.context
            await replay_websocket(context, exchange, self.stream, session.engine, upgrade, event)
            return False
        whole = self.session.send_replay()
        if whole is not None:  # due at once: one write, serialized once
            exchange.status = whole[0].status
            with self._replay_left():
                await self.stream.send(whole[1])
            self._log()
        return True

    async def _miss(self, event: Miss) -> bool:
        exchange = self._decided(event)
        exchange.key = event.report.key
        self.proxy.runlog.missed(event.report)
        log.debug("%s", event.report.render())
        return True

    async def _refused(self, event: Refused) -> bool:
        self._decided(event)
        log.debug("refused: %s", event.message)
        return True

    async def _forward(self, event: Forward) -> bool:
        exchange = self._decided(event)
        exchange.forwarded = True  # its key is computed when logged
        if event.websocket:
            from ._websocket import relay_websocket

            session = self.session
            await relay_websocket(
                self.proxy.context,
                exchange,
                self.stream,
                session.engine,
                functools.partial(session.upgrade, event.request),
                event,
                self._answer,
            )
            return False
        client = H11Downstream(self.stream, self.session, self._watcher())
        await Forwarding(self.proxy, client, self.exchange, event).run()
        return True

    def _watcher(self) -> ClientReader:
        """The connection's reader of the client, started by its first forward."""
        if self._reader is None:
            assert self._tasks is not None
            self._reader = ClientReader(self.stream)
            self._tasks.start_soon(self._reader.run)
        return self._reader

    async def _read(self) -> bytes:
        """The client's next bytes (``EndOfStream`` at its end): through
        the connection's reader once there is one."""
        if self._reader is None:
            return await self.stream.receive()
        data = await self._reader.receive()
        if not data:
            raise anyio.EndOfStream
        return data

    async def _routed(self, event: Routed) -> bool:
        """A request for the proxy itself (the viewer): never recorded."""
        exchange = self._decided(event)
        answer = await self.proxy.view(event)
        if isinstance(answer, UiRefusal):
            exchange.status = answer.status
            data = self.session.refuse(answer.status, "reel_ui", answer.message)
        else:
            exchange.status = answer[0]
            data = self.session.respond(*answer)
        exchange.routed = routed_verdict(exchange.status)
        with self._replay_left():
            await send(self.stream, data)
        self._log()
        return True

    async def _continue(self, event: Continue) -> bool:
        """The client waits for it to send the body."""
        await send(self.stream, self.session.send(event))
        return True

    async def _head(self, event: ResponseHead) -> bool:
        """A response the core answers (a replay's, a miss's, a refusal's):
        played on its schedule.  False after a cut (closing without
        finishing the body is the cut)."""
        self.exchange.status = event.status
        self._out.add(self.session.send(event))
        with self._replay_left():
            return await self._play()

    # -- a response the core answers ----------------------------------------

    async def _play(self) -> bool:
        """Send a replayed body on its schedule, the head already pending;
        False after a cut (the connection must close).

        Bytes due now are gathered and go out in one write when the next
        frame must wait, the response ends, or ``WRITE_SIZE`` bytes are
        pending: a write per event costs a system call and a wake-up of the
        client each, and one write of a whole long stream due at once (fast
        timing) would hold it all in memory and keep every other connection
        waiting.  The frames due at once come from the core as a batch
        (``replay_batches``), serialized as one piece of body: one chunk and
        one h11 call for a batch instead of one per frame."""
        session, stream, out = self.session, self.stream, self._out
        start = anyio.current_time()  # the head goes out now: deadlines count from it
        for batch in replay_batches(session.engine.pull(), WRITE_SIZE):
            if batch.until is not None and start + batch.until > anyio.current_time():
                await out.flush(stream)
                await sleep_until(start + batch.until)
            if batch.frames and out.add(session.send_frames(batch.frames)):
                await out.flush(stream)
            last = batch.last
            if isinstance(last, EndOfResponse):
                out.add(session.send(last))
                await out.flush(stream)
                self._log()
            elif last is not None:
                await out.flush(stream)
                session.send(last)
                self._log()
                return False
        return True

    @contextmanager
    def _replay_left(self) -> Iterator[None]:
        """A write of an answer the core or the proxy made (a replay's, a
        viewer's) that fails (the client left midway) ends its exchange:
        logged then, once, as every exchange is; the connection closes as
        before."""
        try:
            yield
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            why = f"a write to the client failed ({reason(exc)})"
            self.session.engine.client_left(why, mono=anyio.current_time())
            self._log()
            raise

    async def _answer(self) -> None:
        """Write what the engine has for the client (an upgrade the upstream
        refused, or a 502 saying why it was not reached), log it, and
        append its line (a refusal is recorded as any answer)."""
        session, exchange = self.session, self.exchange
        while not isinstance(event := session.next_event(), Signal):
            if isinstance(event, ResponseHead):
                exchange.status = event.status
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await send(self.stream, session.send(event))
        self.proxy.record(session.engine, exchange.target)
        self._log()

    def _log(self) -> None:
        self.proxy.context.log(self.session.engine, self.exchange)

    # -- reading the client ---------------------------------------------------

    async def _receive(self) -> bool:
        """Read what the client sent next; False when the connection is over."""
        proxy, session, exchange = self.proxy, self.session, self.exchange
        if proxy.closing and session.engine.state is State.IDLE:
            return False
        # A request under way must arrive whole within the timeout of its
        # first byte, however it trickles in (no slowloris).  The timer
        # enforces it while the connection waits here (no deadline while
        # the request is answered); shutdown_idle() may close it too.
        self.deadline = (exchange.first_byte or proxy.now()) + proxy.client_timeout
        with proxy.awaiting(self):
            try:
                data = await (self._quiet() if proxy.recordings else self._read())
            except anyio.EndOfStream:
                data = b""
        if data and not exchange.first_byte:
            exchange.first_byte = proxy.now()
        if self._first is not None:  # the connection's first bytes
            return self._sniff(data)
        session.receive_data(data, wall=time.time())
        return True

    def _sniff(self, data: bytes) -> bool:
        """The connection's first bytes: HTTP/1.1 goes on with them; the
        start of HTTP/2's preface is read on until it is whole (False: the
        connection is not this pump's, its bytes are in ``_first``)."""
        first = self._first = (self._first or b"") + data
        if data and H2_PREFACE.startswith(first[: len(H2_PREFACE)]):
            return len(first) < len(H2_PREFACE)
        self._first = None
        if first:
            self.session.receive_data(first, wall=time.time())
        if not data:  # the end, after a piece of a preface or nothing
            self.session.receive_data(b"")
        return True

    async def _quiet(self) -> bytes:
        """What the client sends next; the recordings waiting are built
        once it has been quiet for ``SETTLE_AFTER`` (a client sending its
        next request at once has it forwarded first: see ``Proxy.settle``)."""
        with anyio.move_on_after(SETTLE_AFTER):
            return await self._read()
        self.proxy.settle()
        return await self._read()

    async def _timed_out(self) -> None:
        """The guard fired: the client's deadline passed (a partial request
        is answered 408), or the proxy is shutting down an idle connection."""
        timeout = self.proxy.client_timeout
        if self.proxy.now() < self.deadline:
            return  # shutdown
        if not self.exchange.first_byte:
            log.debug("client idle for %ss: closing", timeout)
            return
        log.warning(
            "a client sent only part of a request in %ss (--client-timeout): answered 408",
            timeout,
        )
        late = RemoteProtocolError(
            f"the request did not arrive whole within {timeout:g} s "
            "of its first byte (the proxy's --client-timeout); send it at once",
            408,
        )
        with suppress(anyio.BrokenResourceError):
            await send(self.stream, self.session.error_response(late))


#: The handler of each kind of event the session hands out (a
#: :class:`Signal` is the pump's own); a response's other events are pulled
#: by the handler of its head, or of its forward.
_HANDLERS: dict[type[Any], Callable[[HTTP11Connection, Any], Awaitable[bool]]] = {
    Replay: HTTP11Connection._replay,
    Miss: HTTP11Connection._miss,
    Refused: HTTP11Connection._refused,
    Forward: HTTP11Connection._forward,
    Routed: HTTP11Connection._routed,
    Continue: HTTP11Connection._continue,
    ResponseHead: HTTP11Connection._head,
}


async def _linger(stream: anyio.abc.ByteStream, limit: float) -> None:
    """After an error answer, read and drop what the client still sends
    (a body over the limit, say) until it closes, pauses for a second, or
    ``limit`` seconds passed.  Closing with unread bytes would reset the
    connection, and the client would see the reset instead of the answer.
    A client already gone (a reset: ``ENOTCONN`` from ``shutdown`` on trio)
    leaves nothing to wait for."""
    with (
        anyio.move_on_after(limit),
        suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream),
    ):
        with suppress(NotImplementedError):  # TLS (--tls) has no half-close
            await stream.send_eof()
        while True:
            with anyio.move_on_after(1.0) as pause:
                await stream.receive()
            if pause.cancelled_caught:
                return
