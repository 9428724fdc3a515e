"""A forward: one request sent upstream, its answer passed on and recorded.

The proxy's pumps (``_http11.py``, ``_http2.py``) hand a
:class:`reel_core.Forward` here, with the :class:`Downstream` its answer
goes to: an HTTP/1.1 connection (:class:`H11Downstream`) or one HTTP/2
stream.
The request goes upstream through the one seam to the network; the
answer's head and chunks are fed to the engine (the relay,
``reel_bindings._async.relay``) and what the engine makes of them goes to
the client as it arrives.  Meanwhile the client is watched: one that leaves
stops the writes, and the upstream is read on for the grace the core gives
(``Engine.client_left``), its recording's place in the queue held from the
moment it left (``_recordings.py``).  The recordings waiting are built while
the upstream works, a step at a time in the forward's own task, and what is
left of them once the answer is passed on.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from contextlib import aclosing
from typing import TYPE_CHECKING, Protocol

import anyio
import anyio.abc
import attrs

from reel_core import (
    Abort,
    Cut,
    EndOfResponse,
    Engine,
    Event,
    Forward,
    PendingRecording,
    ResponseHead,
    Session,
    Signal,
    State,
    UpstreamError,
)

from .._async.relay import arelay
from .._upstream import UpstreamFailure, UpstreamResponse
from ._context import Context, Exchange
from ._recordings import Building, Place, RecordingQueue

if TYPE_CHECKING:  # made by the HTTP/2 pump, for a gRPC call
    from ._grpc_call import StreamedCall

__all__ = [
    "ClientReader",
    "Downstream",
    "Forwarding",
    "H11Downstream",
    "Host",
    "Outcome",
    "reason",
    "send",
]

log = logging.getLogger("reel.proxy")

#: Makes the recording to store out of the engine's (a gRPC session's).
Amend = Callable[[PendingRecording], PendingRecording]


class Host(Protocol):
    """What a forward asks of the proxy."""

    @property
    def context(self) -> Context: ...

    @property
    def recordings(self) -> RecordingQueue: ...

    def record(
        self,
        engine: Engine,
        target: str,
        *,
        later: bool = False,
        place: Place | None = None,
        amend: Amend | None = None,
    ) -> None:
        """Queue the recording of a finished forward (see ``Proxy.record``)."""
        ...


class Downstream(Protocol):
    """Where a forward's answer goes: the client's side of one exchange.

    ``next_event`` and ``send`` are its protocol adapter's (the HTTP/1.1
    session's, an HTTP/2 stream's); ``write`` puts the bytes ``send`` gave
    on the wire (raising ``anyio.BrokenResourceError`` or
    ``ClosedResourceError`` when the client is gone).  ``watch(left)``
    has the client watched from then on, by its connection's reader:
    ``left(why)`` is called once it left, until ``unwatch()``."""

    @property
    def engine(self) -> Engine: ...

    def next_event(self) -> Event | Signal: ...

    def send(self, event: Event) -> bytes: ...

    async def write(self, data: bytes) -> None: ...

    def watch(self, left: Callable[[str], None]) -> None: ...

    def unwatch(self) -> None: ...


#: What a read of the client gave: bytes (``b""``: its end) or why it failed.
Outcome = bytes | anyio.BrokenResourceError | anyio.ClosedResourceError | OSError


class ClientReader:
    """The one reader of an HTTP/1.1 client from the connection's first
    forward on: a task of the connection's own (:meth:`run`) that reads
    the client whenever someone waits for what comes next, the pump (the
    next request: :meth:`receive`) or a forward (:meth:`watch`: a client
    that leaves, or its next request, pipelined).  A task started and
    cancelled per forward to watch its client cost more than the rest of
    the forward's bookkeeping (issue 36).

    Bytes go to one of them, the forward first; the end (or a broken
    connection) to both, and to every later :meth:`receive`.  Waiting is
    cancellable (a client's deadline, a quiet client): what the read
    gives meanwhile is kept for the next :meth:`receive`."""

    __slots__ = ("_kept", "_reading", "_ready", "_stream", "_wanted", "_watcher")

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self._stream = stream
        #: Set when someone waits for the next read.
        self._wanted = anyio.Event()
        #: A read is under way (its outcome goes to whoever waits then).
        self._reading = False
        #: Set when :meth:`receive` has something (``None``: nobody waits).
        self._ready: anyio.Event | None = None
        #: What a read gave that :meth:`receive` has not taken (the end:
        #: kept for good).
        self._kept: Outcome | None = None
        #: A forward's watch: hears what the next read gives.
        self._watcher: Callable[[Outcome], None] | None = None

    async def run(self) -> None:
        """Read the client each time a read is wanted, until its end."""
        while True:
            await self._wanted.wait()
            self._wanted = anyio.Event()
            self._reading = True
            outcome: Outcome
            try:
                outcome = await self._stream.receive()
            except anyio.EndOfStream:
                outcome = b""
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                outcome = exc
            self._reading = False
            watcher, self._watcher = self._watcher, None
            if watcher is not None:
                watcher(outcome)
            if watcher is None or not _goes_on(outcome):
                self._keep(outcome)
            if not _goes_on(outcome):
                return

    def _keep(self, outcome: Outcome) -> None:
        self._kept = outcome
        if self._ready is not None:
            self._ready.set()
            self._ready = None

    async def receive(self) -> bytes:
        """The client's next bytes (``b""``: its end), as a stream's
        ``receive`` would; raises what a broken connection raised."""
        if self._kept is None:
            self._want()
            ready = self._ready = anyio.Event()
            await ready.wait()
        outcome = self._kept
        assert outcome is not None
        if _goes_on(outcome):
            self._kept = None
        if isinstance(outcome, bytes):
            return outcome
        raise outcome

    def watch(self, watcher: Callable[[Outcome], None]) -> None:
        """Have ``watcher`` hear what the next read gives (a forward's), or
        what one gave that nobody took yet."""
        kept = self._kept
        if kept is not None:
            if _goes_on(kept):
                self._kept = None
            watcher(kept)
            return
        self._watcher = watcher
        self._want()

    def _want(self) -> None:
        """A read, unless one is under way (never two outcomes waiting)."""
        if not self._reading:
            self._wanted.set()

    def unwatch(self) -> None:
        """The forward is over: the next read goes to :meth:`receive`."""
        self._watcher = None


def _goes_on(outcome: Outcome) -> bool:
    """Whether the client may send more after ``outcome`` (it was bytes)."""
    return isinstance(outcome, bytes) and bool(outcome)


@attrs.define(eq=False)
class H11Downstream:
    """An HTTP/1.1 connection's side of a forward: its session and socket,
    and the connection's reader of the client."""

    stream: anyio.abc.ByteStream
    session: Session
    reader: ClientReader

    @property
    def engine(self) -> Engine:
        return self.session.engine

    def next_event(self) -> Event | Signal:
        return self.session.next_event()

    def send(self, event: Event) -> bytes:
        return self.session.send(event)

    async def write(self, data: bytes) -> None:
        await send(self.stream, data)

    def watch(self, left: Callable[[str], None]) -> None:
        """The client is read while the request is forwarded.  Its end (or
        a broken connection) means it left.  Bytes are the next request,
        pipelined: they wait in the session, and the watch ends."""

        def heard(outcome: Outcome) -> None:
            if isinstance(outcome, bytes) and outcome:
                self.session.receive_data(outcome, wall=time.time())
            elif isinstance(outcome, bytes):
                left("the client closed the connection")
            else:
                left(f"the client connection broke ({reason(outcome)})")

        self.reader.watch(heard)

    def unwatch(self) -> None:
        self.reader.unwatch()


@attrs.define(eq=False)
class Forwarding:
    """One request sent upstream, each chunk passed on as it arrives.

    The client is watched meanwhile: when it closes the connection (or a
    write to it fails), nothing more is written to it, and the upstream
    is read on for the core's grace (``Engine.client_left``): an answer
    that ends within it is recorded whole, else the upstream is closed
    then and the exchange recorded as the client saw it, cut by the client.
    """

    host: Host
    client: Downstream
    #: The connection's exchange under way (its log line).
    exchange: Exchange
    forward: Forward
    #: The forward's scope: cancelled once the grace is over (or at once).
    stop: anyio.CancelScope = attrs.Factory(anyio.CancelScope)
    #: Why the client left ("" while it is there).
    why: str = ""
    #: The recording's place in the queue, held from the moment the client
    #: left (its exchange ended then, for the client) while the grace runs.
    place: Place | None = None
    #: A gRPC call forwarded at its first message (HTTP/2): the rest of its
    #: request goes upstream as its client sends it.
    call: StreamedCall | None = None

    async def run(self) -> None:
        """Forward, pass the answer on, and record it; raises
        ``anyio.BrokenResourceError`` once the client left (the connection
        is over)."""
        if not self.why:  # (a client may leave before: an HTTP/2 stream reset at once)
            await self._run()
        if self.why:
            self._ended_without_client()
            raise anyio.BrokenResourceError

    async def _run(self) -> None:
        recordings = self.host.recordings
        # Record mode: the recordings waiting when the request goes (up to
        # the newest) are built while the upstream works, in this task (see
        # ``AsyncUpstream.send``'s ``meanwhile``), and what is left of them
        # once the answer is passed on.
        last = recordings.last
        try:
            # (a scope cancelled before, by a client that left at once, is
            # cancelled as it is entered)
            with self.stop:
                try:
                    # The client is watched once the request is on its way (or
                    # a connection is being made for it): nothing needs it before.
                    await self._relay(functools.partial(self.client.watch, self.left), last)
                finally:
                    self.client.unwatch()  # the watch is over
        except BaseException:
            # Cancelled from outside (the proxy stops) while the grace ran:
            # the client left, and what it saw is recorded.  (An answer the
            # proxy itself cuts off is not: that cut is no truth to replay.)
            if self.why:
                self._ended_without_client()
            raise
        finally:
            if last is not None:  # (never cancelled: see build_through)
                await recordings.build_through(last)

    def left(self, why: str) -> None:
        """The client left: the forward stops writing to it, and stops
        reading its upstream after the grace the core gives (at once in
        live mode, or before the answer's head)."""
        if self.why:
            return
        self.why = why
        now = anyio.current_time()
        engine = self.client.engine
        grace = engine.client_left(why, mono=now)
        if grace:
            target = self.forward.request.target
            self.place = self.host.recordings.reserve(engine.redactor, target)
            self.stop.deadline = min(self.stop.deadline, now + grace)
        else:
            self.stop.cancel()
        if self.call is not None and not self.call.ended:
            # a call whose client left before its end cannot go on: its
            # upstream stream is reset now, the recording cut where it was
            self.stop.cancel()

    def _ended_without_client(self) -> None:
        """The client left before the end of the answer: what the
        recording read after it (see the class) ends the exchange, and its
        line is appended."""
        forward, client = self.forward, self.client
        engine = client.engine
        if engine.state is State.DONE:
            log.debug("the client left before the end of its answer, which came within the grace")
        else:
            log.info(
                "the client closed the connection mid-exchange: the upstream was closed too%s",
                " (recorded as far as the client read)" if forward.record else "",
            )
            if self.call is not None:
                self.call.over(anyio.current_time())
            engine.upstream_error(Abort.CLIENT_CLOSED, self.why, mono=anyio.current_time())
        # nobody reads the rest: pull it, append the line
        while not isinstance(event := client.next_event(), Signal):
            if isinstance(event, Cut):
                client.send(event)
        self._log()  # (once: an end or cut already sent was)
        self.host.record(engine, forward.request.target, place=self.place, amend=self._amend())

    def _amend(self) -> Amend | None:
        """How a gRPC session's recording is made of the engine's (``None``:
        as the engine made it)."""
        call = self.call
        if call is None or call.recorder is None:
            return None
        return functools.partial(call.amend, mono=anyio.current_time())

    def _log(self) -> None:
        self.host.context.log(self.client.engine, self.exchange)

    async def _flush(self) -> None:
        """Write the events the engine has for the client (none once it left)."""
        client, exchange, target = self.client, self.exchange, self.forward.request.target
        while True:
            event = client.next_event()
            if isinstance(event, Signal):
                return
            if isinstance(event, ResponseHead):
                exchange.status = event.status
            data = client.send(event)
            if isinstance(event, Cut):
                self._log()
            try:
                if not self.why:  # once the client left, only the recording reads on
                    await client.write(data)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                self.left(f"a write to the client failed ({reason(exc)})")
            finally:
                if isinstance(event, (EndOfResponse, Cut)):
                    # The client has its answer: the line is built and
                    # appended now, or (record mode) soon (see settle).
                    self.host.record(
                        client.engine, target, later=True, place=self.place, amend=self._amend()
                    )
                if isinstance(event, EndOfResponse):
                    self._log()

    async def _relay(self, waiting: Callable[[], None], last: Building | Place | None) -> None:
        forward = self.forward
        context, engine = self.host.context, self.client.engine
        assert forward.url is not None
        sent_at = anyio.current_time()
        try:
            if forward.record:
                await context.check_store(engine)
            request, url, call = forward.request, forward.url, self.call
            more = None if call is None else call.next
            meanwhile = None
            if last is not None:
                meanwhile = functools.partial(self.host.recordings.step_toward, last)
            sent = context.upstream.send(
                request, url, waiting=waiting, meanwhile=meanwhile, more=more
            )
            async with sent as response:
                engine.upstream_head(
                    response.status,
                    response.headers,
                    mono=anyio.current_time(),
                    sent_at=sent_at,
                    wall=time.time(),
                )
                await self._flush()
                # closed however the loop ends (a client that left cancels
                # it; run() records why)
                feed = _Feed(engine, response, call)
                relayed = arelay(response.chunks(), feed, _failure, read_on=False)
                async with aclosing(relayed):
                    async for _chunk in relayed:
                        await self._flush()
                # the end, before the upstream connection is put back: the
                # client's end does not wait on that
                await self._flush()
        except UpstreamFailure as exc:
            where = engine.redactor.target(forward.request.target)
            if exc.error is Abort.STORE:
                log.error(
                    "%s was NOT forwarded (answered 502): %s",
                    where,
                    engine.redactor.text(exc.detail),
                )
            else:
                log.warning("upstream failed for %s: %s", where, engine.redactor.text(str(exc)))
            if engine.state in (State.AWAIT_UPSTREAM, State.STREAMING):  # not fed by the relay
                if self.call is not None:
                    self.call.over(anyio.current_time())
                engine.upstream_error(exc.error, exc.detail, mono=anyio.current_time())
        if engine.state is State.DONE:
            await self._flush()


class _Feed:
    """The relay's feed: the engine, at the loop's clock (no ``left``: the
    relay does not read on, :meth:`Forwarding.left` does).  At the end, the
    response's trailers (HTTP/2: set once its body is read) go first."""

    __slots__ = ("_call", "_engine", "_response")

    def __init__(
        self, engine: Engine, response: UpstreamResponse, call: StreamedCall | None
    ) -> None:
        self._engine = engine
        self._response = response
        self._call = call

    def data(self, chunk: bytes) -> None:
        now = anyio.current_time()
        if self._call is not None:
            self._call.answered(chunk, now)
        self._engine.upstream_data(chunk, mono=now)

    def end(self) -> None:
        now = anyio.current_time()
        if self._call is not None:
            self._call.over(now)
        if self._response.trailers:
            self._engine.upstream_trailers(self._response.trailers, mono=now)
        self._engine.upstream_end(mono=now)

    def error(self, error: UpstreamError | Abort, detail: str) -> None:
        now = anyio.current_time()
        if self._call is not None:
            self._call.over(now)
        self._engine.upstream_error(error, detail, mono=now)


def _failure(exc: Exception) -> tuple[UpstreamError | Abort, str] | None:
    """What the relay feeds for an exception: the upstream client's failures."""
    return (exc.error, exc.detail) if isinstance(exc, UpstreamFailure) else None


def reason(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__ or exc
    return str(cause) or type(cause).__name__


async def send(stream: anyio.abc.ByteStream, data: bytes) -> None:
    if data:
        await stream.send(data)
