"""The proxy's HTTP/2 connection: a pump around the core's ``H2Session``.

The sibling of ``_http11.py``, for a client that speaks HTTP/2 (h2c with
prior knowledge, or h2 chosen by ALPN on the ``--tls`` listener): the
listener hands it the connection and the bytes its first read gave.
Every decision is the session's and its engines' (one per stream); this
pump moves bytes and time.

Theory of operation.  One task reads the client (:meth:`HTTP2Connection._pump`):
each read is fed to the session, then the session's events are handed
out (:meth:`~HTTP2Connection.drain`) to the stream each belongs to, and
what the session has to send is written.  A stream's decision starts its
exchange: what is due at once (a miss, a replay in fast timing, a head and
the frames due with it) is sent there and goes out with that write, and
what must wait goes on in a task of the stream's own, so the streams of a
connection are served concurrently, each on its own schedule:

- a response the core answers (a replay, a miss, a refusal) is played as
  the HTTP/1.1 pump plays it: its head, then its frames at their
  deadlines after the head, those due at once joined into one piece of
  body (the core's ``replay_batches``, sent by ``H2Session.send_frames``),
  its trailers with the end; no more than :data:`BUFFERED_MAX` bytes of
  it wait in the session for the client's window (a long stream due at
  once goes on as the client reads);
- a forward is ``_forward.py``'s :class:`~._forward.Forwarding`, the one
  the HTTP/1.1 pump uses, the stream (:class:`_Stream`) its
  :class:`~._forward.Downstream`: the same relay, the same recording path;
  a gRPC call the session decided at its first message goes upstream then,
  its later messages and end (``H2ClientMessage``, ``H2ClientEnd``) handed
  to its :class:`~._grpc_call.StreamedCall` as they come, which the forward
  sends on and records (a session, on the same recording path);
- the client resetting the stream (or leaving, or breaking the protocol,
  answered with a GOAWAY) is the session's ``Signal.CLOSED``: a replay
  stops, a forward is told its client left (its grace, as on HTTP/1.1).

All writes go through :meth:`HTTP2Connection.write`, under one lock: the
session's bytes are taken and written in the order they were made.  Flow
control is the session's (a body waits in it for the client's window); a
forward whose stream holds more than :data:`BUFFERED_MAX` bytes waits for
the client to read before it reads its upstream on.

The proxy's timer closes the connection once it has had no exchange under
way for the client timeout (a request arriving piecemeal counts from the
moment the connection fell idle).  A viewer's request (``--ui``) is
refused by the cassette choice (``route``) before the engine looks at
it, and answered here with the page.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from contextlib import suppress

import anyio
import anyio.abc
import attrs

from reel_core import (
    Batch,
    EndOfResponse,
    Engine,
    Event,
    Forward,
    Frame,
    LocalProtocolError,
    Miss,
    Refused,
    RemoteProtocolError,
    Replay,
    Request,
    ResponseHead,
    Routed,
    Signal,
    Trailers,
    replay_batches,
)
from reel_core.tools import (
    H2ClientEnd,
    H2ClientMessage,
    H2Event,
    H2Refused,
    H2Session,
    H2SessionMiss,
    UiRefusal,
    own_answer,
    routed_verdict,
)

from .._clock import sleep_until
from ._context import Exchange
from ._forward import Forwarding, reason
from ._grpc_call import StreamedCall
from ._http11 import SETTLE_AFTER, WRITE_SIZE, Listener

__all__ = ["BUFFERED_MAX", "HTTP2Connection"]

log = logging.getLogger("reel.proxy")

#: The most response bytes a forwarded stream may hold waiting for the
#: client's window before its upstream is read on.
BUFFERED_MAX = 1024 * 1024


#: A decision: what starts a stream's exchange.
_DECISIONS = (Replay, Miss, Refused, Forward)


@attrs.define(eq=False)
class _Stream:
    """One stream's exchange: the engine's events handed to it, in order
    (the :class:`~._forward.Downstream` of a forward)."""

    conn: HTTP2Connection
    sid: int
    engine: Engine
    exchange: Exchange = attrs.Factory(Exchange)
    events: deque[Event | Signal] = attrs.Factory(deque)
    #: Why the client left the stream ("" while it is there).
    why: str = ""
    #: A forward's, once decided.
    forwarding: Forwarding | None = None
    #: A response the core answers: cancelled when the client leaves.
    scope: anyio.CancelScope = attrs.Factory(anyio.CancelScope)
    #: A response the core answers: its batches after the head (``None``
    #: until the head is sent), when its deadlines count from (the head
    #: went out; a replayed gRPC session's first message came), the batch
    #: waited for, whether its end was sent.
    batches: Iterator[Batch] | None = None
    start: float = 0.0
    waiting: Batch | None = None
    ended: bool = False
    #: A response the core answers holds more than ``BUFFERED_MAX`` bytes
    #: in the session, waiting for the client's window: it goes on once
    #: the client read some.
    blocked: bool = False
    #: A response the core answers sent a batch of ``WRITE_SIZE`` bytes and
    #: has more due: it goes on once that is written (a write per batch,
    #: never a long stream serialized whole before its first write).
    more_due: bool = False
    #: The session handed the exchange's end (``PAUSED``).
    over: bool = False
    #: A gRPC call forwarded at its first message (``H2Session.streamed``):
    #: the rest of its request, taken upstream as it comes.
    call: StreamedCall | None = None
    #: Set when events come for the stream (a replayed gRPC session's, as
    #: its client's messages release them), made when its player waits.
    more: anyio.Event | None = None

    def next_event(self) -> Event | Signal:
        """The stream's next event (``Signal.NEED_DATA``: none yet)."""
        if not self.events:
            self.conn.drain()
        return self.events.popleft() if self.events else Signal.NEED_DATA

    def send(self, event: Event) -> bytes:
        """Hand ``event`` to the session (its bytes go out with :meth:`write`)."""
        self.conn.session.send(self.sid, event)
        return b""

    async def write(self, data: bytes) -> None:
        """Write what the session holds; a forward whose answer piles up
        in the session waits for the client to read (``data`` is always
        empty: :meth:`send` returned it)."""
        conn = self.conn
        await conn.write()
        while conn.session.buffered(self.sid) > BUFFERED_MAX:
            await conn.client_moved()

    def watch(self, left: Callable[[str], None]) -> None:
        """The connection's reader watches the client already: its reset
        comes as the session's ``Signal.CLOSED`` (:meth:`left`, which tells
        the forward)."""

    def unwatch(self) -> None:
        """(See :meth:`watch`.)"""

    def left(self, why: str) -> None:
        """The client reset the stream, or left the connection."""
        if self.why:
            return
        self.why = why
        if self.forwarding is not None:
            self.forwarding.left(why)
        else:
            self.engine.client_left(why, mono=anyio.current_time())
            self.scope.cancel()

    def take(self, event: Event | Signal) -> None:
        """One of the stream's events, handed out by the session."""
        self.events.append(event)
        if self.more is not None:
            self.more.set()
            self.more = None

    async def wait_for_events(self) -> None:
        """Until the session hands the stream more events."""
        if not self.events:
            self.more = anyio.Event()
            await self.more.wait()

    def pulled(self) -> Iterator[Event]:
        """A core-made response's events as far as they came (to its
        exchange's end: :attr:`over`); its trailers go to the session as
        met (they go out with its end)."""
        while not isinstance(event := self.next_event(), Signal):
            if isinstance(event, Trailers):
                self.send(event)
            yield event
        if event is not Signal.NEED_DATA:
            self.over = True


@attrs.define(eq=False)
class HTTP2Connection:
    """One HTTP/2 client connection: its session, its streams' exchanges,
    and the scope that closes it once it stays idle too long."""

    proxy: Listener
    stream: anyio.abc.ByteStream
    session: H2Session
    #: Whether a request is the viewer's (``--ui``), answered here.
    route: Callable[[Request], bool] | None = None
    #: What the connection's first reads gave (the listener's sniff).
    first: bytes = b""
    #: Cancelled by the proxy's timer once ``deadline`` passed with no
    #: exchange under way (or by ``Proxy.shutdown_idle``).
    guard: anyio.CancelScope = attrs.Factory(anyio.CancelScope)
    #: When the connection, idle, is closed (on the proxy's clock; no
    #: deadline while an exchange is under way).
    deadline: float = float("inf")
    _streams: dict[int, _Stream] = attrs.Factory(dict)
    #: Streams decided while the session's events were handed out.
    _decided: deque[tuple[_Stream, Event]] = attrs.Factory(deque)
    _lock: anyio.Lock = attrs.Factory(anyio.Lock)
    _tasks: anyio.abc.TaskGroup | None = None
    #: Set once the client's next bytes came (a window may have moved),
    #: made when a forward waits for them.
    _moved: anyio.Event | None = None
    #: The session said the connection is over.
    _over: bool = False
    #: A write to the client failed.
    _broken: bool = False
    #: Why the client is gone, once it is ("": it is there).
    _gone: str = ""

    @property
    def idle(self) -> bool:
        """No exchange under way: :meth:`Proxy.shutdown_idle` may close it."""
        return not self._streams

    async def serve(self) -> None:
        """Serve the connection until it ends (and its exchanges with it:
        a forward whose client left reads on for its grace)."""
        self.deadline = self.proxy.now() + self.proxy.client_timeout
        with self.guard:
            async with anyio.create_task_group() as tasks:
                self._tasks = tasks
                await self._pump()
        if self.guard.cancelled_caught and self.proxy.now() >= self.deadline:
            log.debug("HTTP/2 client idle for %ss: closing", self.proxy.client_timeout)

    # -- the pump ------------------------------------------------------------

    async def _pump(self) -> None:
        """Read the client, feed the session, hand out its events, write."""
        if self.first:
            self._feed(self.first)
        while True:
            self.drain(writing=True)
            with suppress(anyio.BrokenResourceError):  # the session ends it
                await self.write()
            if self._over:
                return
            self._feed(await self._receive())

    def _feed(self, data: bytes) -> None:
        if not data:
            self._gone = self._gone or "the client closed the connection"
        try:
            self.session.receive_data(data, wall=time.time(), mono=anyio.current_time())
        except RemoteProtocolError as exc:  # its GOAWAY is in data_to_send
            self._gone = "the client broke the HTTP/2 protocol"
            log.warning("bad HTTP/2 from a client: %s (GOAWAY, connection closed)", exc)
        if self._moved is not None:
            self._moved.set()
            self._moved = None

    async def client_moved(self) -> None:
        """Until the client's next bytes (a WINDOW_UPDATE, say) or its end."""
        if not self._over:
            if self._moved is None:
                self._moved = anyio.Event()
            await self._moved.wait()

    async def _receive(self) -> bytes:
        """The client's next bytes (``b""``: it is gone), the timer
        watching the connection's deadline meanwhile."""
        proxy = self.proxy
        if proxy.closing and self.idle:
            return b""
        with proxy.awaiting(self):
            try:
                if proxy.recordings:
                    with anyio.move_on_after(SETTLE_AFTER):
                        return await self.stream.receive()
                    proxy.settle()
                return await self.stream.receive()
            except (
                anyio.EndOfStream,
                anyio.BrokenResourceError,
                anyio.ClosedResourceError,
                OSError,
            ):
                return b""

    def drain(self, *, writing: bool = False) -> None:
        """Hand each event the session has to its stream, then start the
        exchanges decided meanwhile (see :meth:`_begin`; ``writing``: the
        caller writes what the session holds next, the reader does)."""
        session = self.session
        while True:
            item = session.next_event()
            if isinstance(item, H2Event):
                self._hand(item)
            elif isinstance(item, H2Refused):
                log.warning(
                    "bad HTTP/2 request from client on stream %d: %s (answered %d)",
                    item.stream_id,
                    item.error,
                    item.error.status,
                )
            elif isinstance(item, H2SessionMiss):  # its NOT_FOUND trailers follow
                self.proxy.runlog.missed(item.report)
                log.debug("%s", item.report.render())
                missed = self._streams.get(item.stream_id)
                if missed is not None:
                    missed.exchange.session_missed = True
            elif isinstance(item, (H2ClientMessage, H2ClientEnd)):
                self._call_went_on(item)
            else:
                self._over = item is Signal.CLOSED
                break
        while self._decided:
            self._begin(*self._decided.popleft(), writing=writing)

    def _hand(self, item: H2Event) -> None:
        sid, event = item.stream_id, item.event
        stream = self._streams.get(sid)
        if stream is not None:
            if event is Signal.CLOSED:
                stream.left(self._gone or "the client reset the stream")
            else:
                stream.take(event)
        elif isinstance(event, _DECISIONS):
            stream = self._streams[sid] = _Stream(self, sid, item.engine)
            if isinstance(event, Forward) and self.session.streamed(sid):
                opened = self.session.started_at(sid)
                assert opened is not None  # a streamed call's
                stream.call = StreamedCall.of(
                    item.engine, record=event.record, first=event.request.body, opened=opened
                )
            self.deadline = float("inf")
            self._decided.append((stream, event))
        # else: the end of an exchange already served (a reset after it, its PAUSED)

    def _call_went_on(self, item: H2ClientMessage | H2ClientEnd) -> None:
        """A gRPC call forwarded at its first message went on: its client
        sent another message, or ended it; each goes upstream next."""
        stream = self._streams.get(item.stream_id)
        if stream is None or stream.call is None:
            return
        if isinstance(item, H2ClientMessage):
            stream.call.message(item.data, item.at)
        else:
            stream.call.end(item.rest, item.at)

    async def write(self) -> None:
        """Write what the session has to send, in the order it was made.
        Raises ``anyio.BrokenResourceError`` once the client is gone.

        The bytes taken are every stream's: they go out whole even when
        the task writing them is cancelled meanwhile (its stream reset, its
        forward's grace over), or another stream's answer would lose
        them.  A client that reads none of them for the client timeout is
        gone."""
        async with self._lock:
            if self._broken:
                raise anyio.BrokenResourceError
            data = self.session.data_to_send()
            if not data:
                return
            try:
                with anyio.CancelScope(shield=True), anyio.fail_after(self.proxy.client_timeout):
                    await self.stream.send(data)
            except (
                anyio.BrokenResourceError,
                anyio.ClosedResourceError,
                OSError,
                TimeoutError,
            ) as exc:
                self._broken = True
                self._gone = f"a write to the client failed ({reason(exc)})"
                log.debug("%s", self._gone)
                raise anyio.BrokenResourceError from exc

    # -- one stream's exchange -------------------------------------------------

    def _begin(self, stream: _Stream, decision: Event, *, writing: bool) -> None:
        """A stream's exchange starts.  A response the core answers is sent
        as far as it is due at once, when the caller writes next (a replay
        in fast timing, a miss: no task, and its bytes go out with the
        reader's next write); what waits (a frame's deadline, a forward,
        the viewer's page) goes on in a task of its own."""
        assert isinstance(decision, _DECISIONS)
        exchange = stream.exchange
        exchange.method = decision.request.method
        exchange.target = decision.request.target  # redacted when logged
        exchange.path = decision.request.path
        exchange.started = self.proxy.now()
        if isinstance(decision, Forward):
            exchange.forwarded = True  # its key is computed when logged
            stream.forwarding = Forwarding(self.proxy, stream, exchange, decision, call=stream.call)
            self._start(stream, self._forward(stream))
        elif isinstance(decision, Replay) and decision.websocket is not None:
            self._start(stream, self._no_websocket(stream, decision))
        elif (
            isinstance(decision, Refused)
            and self.route is not None
            and self.route(decision.request)
        ):
            self._start(stream, self._view(stream, decision.request))
        else:
            self._note(exchange, decision)
            if isinstance(decision, Replay) and decision.grpc is not None:
                # a gRPC session: its deadlines count from its first message
                stream.start = self.session.started_at(stream.sid) or anyio.current_time()
            try:
                if writing and self._play_due(stream):
                    self._ended(stream)
                    return
            except LocalProtocolError as exc:
                self._refused(stream, exc)
                return
            self._start(stream, self._play(stream))

    def _start(self, stream: _Stream, exchange: Awaitable[None]) -> None:
        assert self._tasks is not None
        self._tasks.start_soon(self._exchange, stream, exchange)

    async def _exchange(self, stream: _Stream, exchange: Awaitable[None]) -> None:
        """Serve the rest of one stream's exchange, to its end."""
        try:
            await exchange
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._ended(stream)  # the client is gone: the reader ends the connection
        except LocalProtocolError as exc:
            self._refused(stream, exc)
        else:
            self._ended(stream)

    def _refused(self, stream: _Stream, exc: LocalProtocolError) -> None:
        """h2 refused what Reel sent on the stream: it was reset (a bug)."""
        log.error(
            "could not answer HTTP/2 stream %d (%s): reset; please report it", stream.sid, exc
        )
        self._ended(stream)

    def _ended(self, stream: _Stream) -> None:
        """The stream's exchange is over: once the last one is, the
        connection's idle deadline runs (or, the proxy closing, it ends)."""
        del self._streams[stream.sid]
        if self.idle:
            self.deadline = self.proxy.now() + self.proxy.client_timeout
            if self.proxy.closing:
                self.guard.cancel()

    async def _forward(self, stream: _Stream) -> None:
        """Forward the stream's request (a gRPC call decided at its first
        message: that message, then the rest as its client sends it)."""
        forwarding = stream.forwarding
        assert forwarding is not None
        await forwarding.run()

    def _note(self, exchange: Exchange, event: Replay | Miss | Refused) -> None:
        """What the run log and the log keep of a response the core answers."""
        if isinstance(event, Replay):
            exchange.key = event.key
            if event.stale is not None:
                self.proxy.runlog.stale_served(
                    event.request.method, event.request.path, event.stale
                )
        elif isinstance(event, Miss):
            exchange.key = event.report.key
            self.proxy.runlog.missed(event.report)
            log.debug("%s", event.report.render())
        else:
            log.debug("refused: %s", event.message)

    def _play_due(self, stream: _Stream) -> bool:
        """Send a response the core answers as far as it is due now: its
        head, then each batch whose deadline passed.  True once it is all
        sent (logged then); else ``stream.waiting`` is the batch to wait
        for, ``stream.blocked`` says the session holds enough for the
        client's window, ``stream.more_due`` that a full batch went to the
        session (write it, then go on), or (none of them) the stream waits
        for more events (a replayed gRPC session's, released by its
        client's messages)."""
        if stream.batches is None:
            head = stream.next_event()
            if not isinstance(head, ResponseHead):  # the client reset the stream
                return True
            stream.exchange.status = head.status
            stream.send(head)
            if not stream.start:  # the head goes out now: deadlines count from it
                stream.start = anyio.current_time()
            stream.batches = replay_batches(stream.pulled(), WRITE_SIZE)
        session, sid = self.session, stream.sid
        stream.blocked = stream.more_due = False
        while True:
            batch = stream.waiting or next(stream.batches, None)
            stream.waiting = None
            if batch is None:
                if stream.ended or stream.over:
                    self.proxy.context.log(stream.engine, stream.exchange)
                    return True
                if not stream.events:
                    return False  # more come as the client's messages release them
                stream.batches = replay_batches(stream.pulled(), WRITE_SIZE)
                continue
            if batch.until is not None and stream.start + batch.until > anyio.current_time():
                stream.waiting = batch
                return False
            if batch.frames:
                session.send_frames(sid, batch.frames)
            if batch.last is not None:
                stream.send(batch.last)
                stream.ended = True
            elif session.buffered(sid) > BUFFERED_MAX:
                stream.blocked = True
                return False
            elif batch.size >= WRITE_SIZE:
                stream.more_due = True
                return False

    async def _play(self, stream: _Stream) -> None:
        """Send the rest of a response the core answers on its schedule
        (a reset stops it: logged then)."""
        with stream.scope:
            await self._unblocked(stream)  # begun by the reader, it may wait already
            while not self._play_due(stream):
                await self.write()
                batch = stream.waiting
                if stream.blocked:
                    await self._unblocked(stream)
                elif stream.more_due:
                    continue
                elif batch is None:
                    await stream.wait_for_events()
                else:
                    assert batch.until is not None
                    await sleep_until(stream.start + batch.until)
            await self.write()
        if stream.scope.cancelled_caught:
            self.proxy.context.log(stream.engine, stream.exchange)

    async def _unblocked(self, stream: _Stream) -> None:
        """Until no more than :data:`BUFFERED_MAX` of a blocked stream's
        bytes wait in the session (the client read the rest)."""
        while stream.blocked and self.session.buffered(stream.sid) > BUFFERED_MAX:
            await self.write()
            await self.client_moved()
        await self.write()

    async def _view(self, stream: _Stream, request: Request) -> None:
        """A request for the viewer (``--ui``), answered with its page: the
        refusal the engine made of it is dropped."""
        for _ in stream.pulled():
            pass
        answer = await self.proxy.view(Routed(request))
        if isinstance(answer, UiRefusal):
            stream.exchange.routed = routed_verdict(answer.status)
            await self._refuse(stream, request, answer.status, "reel_ui", answer.message)
            return
        status, headers, body = answer
        stream.exchange.routed = routed_verdict(status)
        await self._respond(stream, (ResponseHead(status, tuple(headers)), Frame(body, None)))

    async def _no_websocket(self, stream: _Stream, event: Replay) -> None:
        """A WebSocket session recorded for the request: HTTP/2 has no
        upgrade to replay it over (its 101 and messages are dropped)."""
        for _ in stream.pulled():
            pass
        if event.lease is not None:
            event.lease.end()
        message = (
            f"{event.request.target} is a recorded WebSocket session: it is replayed over "
            "HTTP/1.1 only (an Upgrade request); connect without HTTP/2"
        )
        log.warning("refused over HTTP/2: %s", stream.engine.redactor.text(message))
        await self._refuse(stream, event.request, 400, "reel_websocket_over_http2", message)

    async def _refuse(
        self, stream: _Stream, request: Request, status: int, kind: str, message: str
    ) -> None:
        """Answer the stream with an error the pump made: what the core
        makes of it (:func:`~reel_core.tools.own_answer`: a gRPC status to
        a gRPC call, Reel's JSON error to any other request)."""
        await self._respond(
            stream, own_answer(request.header("content-type"), status, kind, message)
        )

    async def _respond(self, stream: _Stream, events: tuple[Event, ...]) -> None:
        """Answer the stream with a response the pump made (not the engine's)."""
        for event in events:
            if isinstance(event, ResponseHead):
                stream.exchange.status = event.status
            stream.send(event)
        if not isinstance(events[-1], EndOfResponse):
            stream.send(EndOfResponse())
        await self.write()
        self.proxy.context.log(stream.engine, stream.exchange)
