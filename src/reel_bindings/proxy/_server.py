"""The proxy: an HTTP/1.1 server on h11 (inside reel_core) over anyio.

It holds no decisions: each connection is a :class:`reel_core.Session` fed
the bytes the client sends; the proxy sleeps until each replayed frame's
deadline, forwards upstream when the session says so, writes what the
session serializes, and appends the lines it hands out.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import time
from collections.abc import Callable, Iterator
from contextlib import aclosing, contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import anyio
import anyio.abc
import anyio.lowlevel
import attrs

from reel_core import (
    Cassette,
    CassetteError,
    CassetteMeta,
    Config,
    Continue,
    Cut,
    EndOfResponse,
    Event,
    Forward,
    Frame,
    Miss,
    MissReport,
    Mode,
    Recorded,
    Refused,
    RemoteProtocolError,
    Replay,
    Request,
    ResponseHead,
    Session,
    Signal,
    State,
    UiRequest,
    UiResource,
    UpstreamError,
    WebSocketMiss,
    WebSocketSession,
    replay_schedule,
    safe_cassette_name,
)

from .._async.relay import arelay
from .._clock import sleep_until
from .._files import CassetteFile, CassetteNotFoundError
from .._freshness import Freshness
from .._store import FileStore, Store, StoreUnavailableError, check_name
from .._store_url import check_store
from .._upstream import AsyncUpstream, UpstreamFailure
from ._recordings import Place, RecordingQueue
from ._websocket import relay_websocket, replay_websocket

if TYPE_CHECKING:
    from ..view._live import LivePage

__all__ = ["CASSETTE_HEADER", "Proxy"]

log = logging.getLogger("reel.proxy")

T = TypeVar("T")

#: The request header naming the cassette (with ``--cassette-dir``).
CASSETTE_HEADER = "x-reel-cassette"

#: In record mode, how long a client may stay quiet after an answer before
#: the recordings waiting are built anyway (seconds; see ``Proxy.settle``).
SETTLE_AFTER = 0.01

#: The longest and shortest wait between two looks of the proxy's timer at
#: its connections' deadlines (seconds; see ``Proxy.tick``).
TICK_MAX = 1.0
TICK_MIN = 0.001


@attrs.define(eq=False)
class _Exchange:
    """Per-request bookkeeping for the log line."""

    method: str = ""
    target: str = ""
    outcome: str = ""
    key: str = ""
    #: A forward's key is computed late (``Session.forward_key``), when logged.
    forwarded: bool = False
    status: int = 0
    #: When the request was decided, on ``time.monotonic`` (for the log).
    started: float = 0.0
    #: When the first byte of the request arrived, on ``time.monotonic``
    #: (0: none yet).
    first_byte: float = 0.0


@attrs.define(eq=False)
class _Connection:
    """One client connection: its session, the exchange under way, and the
    scope that closes it when the client keeps the proxy waiting."""

    session: Session
    exchange: _Exchange = attrs.Factory(_Exchange)
    #: Cancelled by the proxy's timer once ``deadline`` passed while the
    #: connection waits for the client (or by ``Proxy.shutdown_idle``).
    guard: anyio.CancelScope = attrs.Factory(anyio.CancelScope)
    #: The client's deadline while a request is awaited, on
    #: ``time.monotonic`` (a plain number the timer reads: the scope's own
    #: deadline is never moved, and the event loop's clock is not needed).
    deadline: float = math.inf


class Proxy:
    """Serves connections for one configuration (shared cassette state)."""

    def __init__(
        self,
        config: Config,
        *,
        cassette: Path | CassetteFile | None = None,
        cassette_dir: Path | None = None,
        strict: bool = False,
        client_timeout: float = 60.0,
        upstream: AsyncUpstream | None = None,
        store: Store | None = None,
        report: bool = False,
        asset_threshold: int | None = None,
    ) -> None:
        if store is not None and cassette_dir is not None:
            raise ValueError("give a store or a cassette_dir, not both")
        if store is None and (cassette is None) == (cassette_dir is None):
            raise ValueError("give exactly one of cassette and cassette_dir")
        self.config = config
        #: ``REEL_ASSET_THRESHOLD`` (see :class:`~reel_bindings._files.CassetteFile`).
        self.asset_threshold = asset_threshold
        self.cassette_dir = cassette_dir
        self.strict = strict
        self.client_timeout = client_timeout
        self.upstream = upstream if upstream is not None else AsyncUpstream()
        #: Where the cassettes are: a store given (``cassette`` and the
        #: ``x-reel-cassette`` header name cassettes in it), the directory's,
        #: or files named by path.
        self.store: Store = store if store is not None else FileStore(cassette_dir)
        self.named = store is not None
        self._files: dict[Path, CassetteFile] = {}
        #: The same files by their cassette's name (what a session holds).
        self._by_label: dict[str, CassetteFile] = {}
        #: Whether what each request got is kept for a report (the lists
        #: below): the pytest plugin's proxy, which lives for one test, reads
        #: them; a proxy serving for days keeps none (its log says it all),
        #: or they would grow by a line each request.
        self.report = report
        #: Every miss served so far (the pytest plugin fails a test on them).
        self.misses: list[MissReport] = []
        #: What each request got, as ``(method, path, outcome)`` (the run report).
        self.outcomes: list[tuple[str, str, str]] = []
        #: Every replayed WebSocket session that stopped on a client message.
        self.websocket_misses: list[WebSocketMiss] = []
        #: Stale recordings served, recordings superseded, drifts (logged too).
        self.freshness = Freshness(keep=report)
        #: ``(path, outcome)`` of each WebSocket session once it ended (hit,
        #: miss, recorded, live); an upgrade refused or failed upstream is
        #: an HTTP exchange, in :attr:`outcomes`.
        self.websocket_outcomes: list[tuple[str, str]] = []
        if isinstance(cassette, CassetteFile):  # an open file, shared with other bindings
            self._files[cassette.path] = cassette
            self._by_label[cassette.cassette.name] = cassette
            cassette = cassette.path
        self._default = cassette
        if cassette is not None:
            self._open(cassette)
        elif self.named:
            check_store(self.store)  # a server down says so now, naming it
        elif config.mode is Mode.REPLAY and not (cassette_dir and cassette_dir.is_dir()):
            raise CassetteNotFoundError(
                str(cassette_dir),
                f"record into it first with `reel auto --cassette-dir {cassette_dir}`",
                what="cassette directory",
            )
        self.active = 0
        #: Recorded exchanges that could not be written (disk full, read-only).
        self._unwritten = 0
        #: Finished forwards whose recordings wait to be built, in the order
        #: they ended (see ``_recordings.py``).
        self._recordings = RecordingQueue(self._append)
        #: The connections waiting for their client (see :meth:`_receive`).
        self._waiting: set[_Connection] = set()
        #: How long the timer sleeps between two looks at the deadlines: a
        #: tenth of the client timeout, within ``TICK_MIN`` and ``TICK_MAX``
        #: (a deadline is acted on at most that late, never early).
        self.tick = min(max(client_timeout / 10, TICK_MIN), TICK_MAX)
        #: The running timer's scope (None while no connection is open).
        self._timer: anyio.CancelScope | None = None
        self.closing = False
        #: The viewer's page (``--ui``), made when first asked for.
        self._viewer: LivePage | None = None

    def _open(self, path: Path) -> CassetteFile:
        file = self._files.get(path)
        if file is None:
            # --match given: a new (or re-recorded) cassette keeps it in its _meta line.
            meta = CassetteMeta(match=self.config.match) if self.config.match else None
            if self.named:
                where = f"--store {self.store.describe(path.as_posix()).split(' ')[0]}"
                hint = (
                    f"record it first with `reel auto {where} --cassette {path.as_posix()}` "
                    "(records what is missing)"
                )
            elif self._default is not None:
                hint = (
                    f"record it first with `reel auto --cassette {path}` (records what is "
                    f"missing) or `reel record --cassette {path}`"
                )
            else:
                hint = (
                    f"record it first with `reel auto --cassette-dir {self.cassette_dir}` "
                    "(records what is missing)"
                )
            if self.named:
                name = path.as_posix()
            elif self.cassette_dir is None:
                name = str(path)
            else:  # its name in the directory's store
                name = path.relative_to(self.cassette_dir).as_posix()
            file = CassetteFile(
                name,
                mode=self.config.mode,
                strict=self.strict,
                meta=meta,
                hint=hint,
                store=self.store,
                asset_threshold=self.asset_threshold,
            )
            self._files[path] = file
            self._by_label[file.cassette.name] = file
        return file

    def _select(self, request: Request) -> Cassette:
        """The cassette a request is for (the ``x-reel-cassette`` header
        names one inside ``--cassette-dir``)."""
        if self._default is not None:
            return self._files[self._default].cassette
        header = request.header(CASSETTE_HEADER)
        name = safe_cassette_name(header.decode("latin-1") if header else "default")
        if self.named:
            return self._open_named(name)
        assert self.cassette_dir is not None
        path = self.cassette_dir / name
        try:
            inside = path.resolve().is_relative_to(self.cassette_dir.resolve())
        except (OSError, RuntimeError):  # a symlink loop
            inside = False
        if not inside:
            raise RemoteProtocolError(f"cassette {name!r} leaves the cassette directory", 400)
        try:
            return self._open(path).cassette
        except CassetteNotFoundError as exc:  # this request misses its cassette
            raise RemoteProtocolError(str(exc), 404) from None
        except OSError as exc:  # a directory, unreadable...: this request fails, not the proxy
            # the cassette is at fault, not the client: refused as a bad cassette (500)
            raise CassetteError(
                str(path), None, f"cannot be read ({exc.strerror or exc})"
            ) from None

    def _open_named(self, name: str) -> Cassette:
        """The cassette ``name`` in the store (``x-reel-cassette``)."""
        try:
            return self._open(Path(check_name(name))).cassette
        except CassetteNotFoundError as exc:  # this request misses its cassette
            raise RemoteProtocolError(str(exc), 404) from None
        except StoreUnavailableError as exc:  # this request fails, not the proxy
            raise RemoteProtocolError(str(exc), 502) from None
        except CassetteError as exc:  # a bad name
            raise RemoteProtocolError(str(exc), 400) from None

    def _file_of(self, cassette: Cassette) -> CassetteFile:
        return self._by_label[cassette.name]

    @property
    def cassettes(self) -> list[CassetteFile]:
        return list(self._files.values())

    # -- the viewer (--ui) -----------------------------------------------------

    def _viewed(self) -> list[str]:
        """The cassettes the viewer shows: the one served, else every
        cassette of the directory or store (re-listed: new ones show)."""
        if self._default is not None:
            return [self._files[self._default].name]
        return self.store.list()

    async def _ui_answer(self, resource: UiResource) -> tuple[bytes, str]:
        """The viewer's answer for ``resource``, drawn in a worker thread
        (a big cassette takes a while): the proxy keeps serving meanwhile."""
        if self._viewer is None:
            # imported when first asked for: a proxy without --ui never
            # needs the viewer
            from ..view._live import LivePage

            self._viewer = LivePage(
                self.store, self._viewed, title=lambda names: "Reel proxy: " + ", ".join(names)
            )
        if resource is UiResource.VERSION:
            version = await anyio.to_thread.run_sync(self._viewer.version)
            return json.dumps({"version": version}).encode(), "application/json"
        _, html = await anyio.to_thread.run_sync(self._viewer.page)
        return html.encode("utf-8"), "text/html; charset=utf-8"

    def note(self, into: list[T], item: T) -> None:
        """Append to one of the report's lists, if this proxy keeps them."""
        if self.report:
            into.append(item)

    def shutdown_idle(self) -> None:
        """Close every connection that is between requests."""
        self.closing = True
        for conn in list(self._waiting):
            if conn.session.state is State.IDLE:
                conn.guard.cancel()

    # -- the timer -----------------------------------------------------------

    async def _time(self, scope: anyio.CancelScope) -> None:
        """The proxy's one timer: every :attr:`tick`, close the connections
        whose client let its deadline pass (see :meth:`_expire`), until the
        last connection ends (it cancels ``scope``).

        One timer for all connections, not a deadline per connection: the
        deadline changes twice a request (set while the client is awaited,
        lifted while it is answered), and moving a cancel scope's deadline
        re-sorts the event loop's timers each time (about 10 µs a request
        on trio at 16 connections).  A plain number read every tick costs
        nothing on the way of a request (and is on ``time.monotonic``, a
        tenth of the cost of reading the event loop's clock through anyio);
        the price is that a client is cut off up to a tick after its
        deadline, never before.  Should the task hosting the timer be
        cancelled alone, the next connection opened starts another."""
        with scope:
            while True:
                await anyio.sleep(self.tick)
                self._expire(time.monotonic())

    def _expire(self, now: float) -> None:
        """Cancel the guard of every waiting connection whose deadline is past."""
        for conn in self._waiting:
            if conn.deadline <= now:
                conn.guard.cancel()

    # -- one connection ------------------------------------------------------

    async def handle(self, stream: anyio.abc.ByteStream) -> None:
        """Serve one client connection until it ends.

        The first connection opened (while none is) also runs the proxy's
        timer (:meth:`_time`) beside it; its task ends once the last
        connection has: a proxy is served by any listener, and needs no
        task group of its own."""
        if self._timer is not None:
            await self._connection(stream)
            return
        timer = self._timer = anyio.CancelScope()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._time, timer)
                await self._connection(stream)
        finally:
            if self._timer is timer:  # cancelled from outside
                self._timer = None

    async def _connection(self, stream: anyio.abc.ByteStream) -> None:
        self.active += 1
        try:
            async with stream:
                await self._serve(stream)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
            pass
        except Exception:  # a bug: it costs this connection, never the proxy
            log.exception("internal error while serving a connection (closed); please report it")
        finally:
            self.settle()  # the connection's recordings go to disk as it ends
            self.active -= 1
            if not self.active and self._timer is not None:
                # the last one: the timer stops (the next connection starts one)
                self._timer.cancel()
                self._timer = None

    async def _serve(self, stream: anyio.abc.ByteStream) -> None:
        select: Cassette | Callable[[Request], Cassette] = (
            self._select if self._default is None else self._files[self._default].cassette
        )
        conn = _Connection(Session(select, self.config))
        # One cancel scope for the whole connection, cancelled by the timer
        # when the client lets its deadline pass (cheaper than a scope per read).
        with conn.guard:
            await self._converse(stream, conn)
        if conn.guard.cancelled_caught:
            await self._timed_out(stream, conn)

    async def _converse(self, stream: anyio.abc.ByteStream, conn: _Connection) -> None:
        session = conn.session
        exchange = conn.exchange
        out = _Pending()  # response bytes due now, not written yet
        while True:
            try:
                event = session.next_event()
            except RemoteProtocolError as exc:
                log.warning("bad request from client: %s (answered %d)", exc, exc.status)
                answer = session.error_response(exc)
                if answer:
                    await _send(stream, answer)
                    await _linger(stream, min(self.client_timeout, 10.0))
                return
            if event is Signal.NEED_DATA:
                if not await self._receive(stream, conn):
                    return
                continue
            if event is Signal.CLOSED:
                return
            if isinstance(event, Continue):  # the client waits for it to send the body
                await _send(stream, session.send(event))
                continue
            if event is Signal.PAUSED:
                if session.state is State.DONE and session.keep_alive and not self.closing:
                    session.start_next_cycle()
                    exchange = conn.exchange = _Exchange()
                    continue
                return
            if isinstance(event, UiRequest):  # the viewer, not a recording
                exchange.method = event.request.method
                exchange.target = event.request.target
                exchange.started = time.monotonic()
                exchange.outcome = "viewer"
                session.ui_answer(*await self._ui_answer(event.resource))
                continue
            if isinstance(event, (Replay, Miss, Forward, Refused)):
                exchange.method = event.request.method
                exchange.target = event.request.target  # redacted when logged
                exchange.started = time.monotonic()
                outcome = (
                    "hit"
                    if isinstance(event, Replay)
                    else "miss"
                    if isinstance(event, Miss)
                    else "refused"
                    if isinstance(event, Refused)
                    else "recorded"
                    if event.record
                    else "live"
                )
                upgraded = (isinstance(event, Replay) and event.websocket is not None) or (
                    isinstance(event, Forward) and event.websocket
                )
                if not upgraded:  # a session's outcome is known when it ends
                    self.note(self.outcomes, (event.request.method, event.request.path, outcome))
                if isinstance(event, Replay):
                    exchange.outcome, exchange.key = "hit", event.key
                    if event.stale is not None:
                        exchange.outcome = "hit (stale)"
                        method, path = event.request.method, event.request.path
                        self.freshness.stale_served(method, path, event.stale)
                    if event.websocket is not None:  # the connection is the session's now
                        await replay_websocket(self, stream, session, event, exchange)
                        return
                    if event.similarity is not None:
                        exchange.outcome = f"hit (fuzzy {event.similarity:.2f})"
                    whole = session.send_replay()
                    if whole is not None:  # due at once: one write, serialized once
                        exchange.status = whole[0].status
                        with self._replay_left(session, exchange):
                            await stream.send(whole[1])
                        self._log(session, exchange)
                elif isinstance(event, Miss):
                    exchange.outcome, exchange.key = "miss", event.report.key
                    self.note(self.misses, event.report)
                    log.debug("%s", event.report.render())
                elif isinstance(event, Refused):
                    exchange.outcome = "refused"
                    log.debug("refused: %s", event.message)
                else:
                    exchange.outcome = "recorded" if event.record else "live"
                    if event.refresh:
                        exchange.outcome = "recorded (the recording was stale)"
                    exchange.forwarded = True  # its key is computed when logged
                    if event.websocket:
                        refusal = functools.partial(self._answer, stream, session, exchange)
                        await relay_websocket(self, stream, session, event, exchange, refusal)
                        return
                    await self._forward(stream, session, event, exchange)
                continue
            # Bytes due now are gathered and go out in one write when the
            # next frame must wait, the response ends, or WRITE_SIZE bytes
            # are pending: a write per event costs a system call and a
            # wake-up of the client each, and one write of a whole long
            # stream due at once (fast timing) would hold it all in memory
            # and keep every other connection waiting.
            if isinstance(event, ResponseHead):
                exchange.status = event.status
                out.add(session.send(event))
                with self._replay_left(session, exchange):
                    played = await self._play(stream, session, exchange, out)
                if not played:
                    return  # closing without finishing the body is the cut
                continue

    async def _play(
        self, stream: anyio.abc.ByteStream, session: Session, exchange: _Exchange, out: _Pending
    ) -> bool:
        """Send a replayed body on its schedule, the head already pending;
        False after a cut (the connection must close)."""
        start = anyio.current_time()  # the head goes out now: deadlines count from it
        for step in replay_schedule(_pulled(session)):
            if step.until is not None and start + step.until > anyio.current_time():
                await out.flush(stream)
                await sleep_until(start + step.until)
            event = step.event
            if isinstance(event, Frame):
                if out.add(session.send(event)):
                    await out.flush(stream)
            elif isinstance(event, EndOfResponse):
                out.add(session.send(event))
                await out.flush(stream)
                self._log(session, exchange)
            else:
                await out.flush(stream)
                session.send(event)
                exchange.outcome += f" (cut: {event.error})"
                self._log(session, exchange)
                return False
        return True

    @contextmanager
    def _replay_left(self, session: Session, exchange: _Exchange) -> Iterator[None]:
        """A replay's write that fails (the client left midway) ends its
        exchange: logged then, once, as every exchange is; the connection
        closes as before."""
        try:
            yield
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            exchange.outcome += " (client left)"
            self._log(session, exchange)
            raise

    async def _receive(self, stream: anyio.abc.ByteStream, conn: _Connection) -> bool:
        """Read what the client sent next; False when the connection is over."""
        session, exchange = conn.session, conn.exchange
        if self.closing and session.state is State.IDLE:
            return False
        # A request under way must arrive whole within the timeout of its
        # first byte, however it trickles in (no slowloris).  The timer
        # enforces it while the connection waits here (no deadline while
        # the request is answered); shutdown_idle() may close it too.
        conn.deadline = (exchange.first_byte or time.monotonic()) + self.client_timeout
        self._waiting.add(conn)
        try:
            data = await (self._quiet(stream) if self._recordings else stream.receive())
        except anyio.EndOfStream:
            data = b""
        finally:
            self._waiting.discard(conn)
        if data and not exchange.first_byte:
            exchange.first_byte = time.monotonic()
        session.receive_data(data, now=time.time())
        return True

    async def _quiet(self, stream: anyio.abc.ByteStream) -> bytes:
        """What the client sends next; the recordings waiting are built
        once it has been quiet for ``SETTLE_AFTER`` (a client sending its
        next request at once has it forwarded first: see :meth:`settle`)."""
        with anyio.move_on_after(SETTLE_AFTER):
            return await stream.receive()
        self.settle()
        return await stream.receive()

    async def _timed_out(self, stream: anyio.abc.ByteStream, conn: _Connection) -> None:
        """The guard fired: the client's deadline passed (a partial request
        is answered 408), or the proxy is shutting down an idle connection."""
        if time.monotonic() < conn.deadline:
            return  # shutdown
        if not conn.exchange.first_byte:
            log.debug("client idle for %ss: closing", self.client_timeout)
            return
        log.warning(
            "a client sent only part of a request in %ss (--client-timeout): answered 408",
            self.client_timeout,
        )
        late = RemoteProtocolError(
            f"the request did not arrive whole within {self.client_timeout:g} s "
            "of its first byte (the proxy's --client-timeout); send it at once",
            408,
        )
        with suppress(anyio.BrokenResourceError):
            await _send(stream, conn.session.error_response(late))

    async def _forward(
        self,
        stream: anyio.abc.ByteStream,
        session: Session,
        forward: Forward,
        exchange: _Exchange,
    ) -> None:
        """Send the request upstream, passing each chunk on as it arrives.

        The client is watched meanwhile: when it closes the connection (or a
        write to it fails), nothing more is written to it, and the upstream
        is read on for the core's grace (``Engine.client_left``): an answer
        that ends within it is recorded whole, else the upstream is closed
        then and the exchange recorded as the client saw it, cut by the client.
        """
        assert forward.url is not None
        relayed = anyio.Event()
        gone = _Gone(session, self._recordings, forward.request.target)
        try:
            async with anyio.create_task_group() as tg:
                gone.stop = tg.cancel_scope

                def waiting() -> None:
                    # The request is on its way (or a connection is being made
                    # for it): what it did not need before it went runs now,
                    # while the upstream works.  Starting the watch costs a task.
                    tg.start_soon(_watch, stream, session, gone)
                    last = self._recordings.last
                    if last is not None:  # record mode: built as the upstream works
                        busy = functools.partial(_awaits_upstream, session)
                        tg.start_soon(self._recordings.build_meanwhile, last, busy, relayed)

                try:
                    await self._relay(stream, session, forward, exchange, gone, waiting)
                finally:
                    relayed.set()
                    tg.cancel_scope.cancel()  # the watch is over
        except BaseException:
            # Cancelled from outside (the proxy stops) while the grace ran:
            # the client left, and what it saw is recorded.  (An answer the
            # proxy itself cuts off is not: that cut is no truth to replay.)
            if gone.why:
                self._left(session, forward, exchange, gone)
            raise
        if gone.why:
            self._left(session, forward, exchange, gone)
            raise anyio.BrokenResourceError

    def _left(self, session: Session, forward: Forward, exchange: _Exchange, gone: _Gone) -> None:
        """The client left (``gone``) before the end of a forward's answer:
        what the recording read after it (see :meth:`_forward`) ends the
        exchange, and its line is appended."""
        if session.state is State.DONE:
            log.debug("the client left before the end of its answer, which came within the grace")
        else:
            log.info(
                "the client closed the connection mid-exchange: the upstream was closed too%s",
                " (recorded as far as the client read)" if forward.record else "",
            )
            if session.state is State.AWAIT_UPSTREAM:
                exchange.outcome += " (client left)"
            session.upstream_error(UpstreamError.CLIENT_CLOSED, gone.why, now=anyio.current_time())
        # nobody reads the rest: pull it, append the line
        while not isinstance(event := session.next_event(), Signal):
            if isinstance(event, Cut):
                session.send(event)
                exchange.outcome += f" (cut: {event.error})"
                self._log(session, exchange)
        self._record(session, forward.request.target, place=gone.place)

    async def _relay(
        self,
        stream: anyio.abc.ByteStream,
        session: Session,
        forward: Forward,
        exchange: _Exchange,
        gone: _Gone,
        waiting: Callable[[], None],
    ) -> None:
        assert forward.url is not None
        sent_at = anyio.current_time()

        async def flush() -> None:
            while True:
                event = session.next_event()
                if isinstance(event, Signal):
                    return
                if isinstance(event, ResponseHead):
                    exchange.status = event.status
                data = session.send(event)
                if isinstance(event, Cut):
                    exchange.outcome += f" (cut: {event.error})"
                    self._log(session, exchange)
                try:
                    if not gone.why:  # once the client left, only the recording reads on
                        await _send(stream, data)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                    gone.left(f"a write to the client failed ({_reason(exc)})")
                finally:
                    if isinstance(event, (EndOfResponse, Cut)):
                        # The client has its answer: the line is built and
                        # appended now, or (record mode) soon (see settle).
                        self._record(session, forward.request.target, later=True, place=gone.place)
                    if isinstance(event, EndOfResponse):
                        self._log(session, exchange)

        try:
            if forward.record:
                await self._check_store(session)
            request, url = forward.request, forward.url
            async with self.upstream.send(request, url, waiting=waiting) as response:
                session.upstream_head(
                    response.status,
                    response.headers,
                    now=anyio.current_time(),
                    sent_at=sent_at,
                    timestamp=time.time(),
                )
                await flush()
                # closed however the loop ends (a client that left cancels
                # it; _forward records why)
                relayed = arelay(response.chunks(), _Feed(session), _failure, read_on=False)
                async with aclosing(relayed):
                    async for _chunk in relayed:
                        await flush()
                # the end, before the upstream connection is put back: the
                # client's end does not wait on that
                await flush()
        except UpstreamFailure as exc:
            where = session.redactor.target(forward.request.target)
            if exc.error is UpstreamError.STORE:
                log.error(
                    "%s was NOT forwarded (answered 502): %s",
                    where,
                    session.redactor.text(exc.detail),
                )
            else:
                log.warning("upstream failed for %s: %s", where, session.redactor.text(str(exc)))
            if session.state is State.AWAIT_UPSTREAM:
                exchange.outcome = f"upstream {exc.error.value}"
            if session.state in (State.AWAIT_UPSTREAM, State.STREAMING):  # not fed by the relay
                session.upstream_error(exc.error, exc.detail, now=anyio.current_time())
        if session.state is State.DONE:
            await flush()

    async def _answer(
        self, stream: anyio.abc.ByteStream, session: Session, exchange: _Exchange
    ) -> None:
        """Write what the session has for the client (an upgrade the upstream
        refused, or a 502 saying why it was not reached), log it, and
        append its line (a refusal is recorded as any answer)."""
        while not isinstance(event := session.next_event(), Signal):
            if isinstance(event, ResponseHead):
                exchange.status = event.status
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await _send(stream, session.send(event))
        self._record(session, exchange.target)
        self._log(session, exchange)

    def _record_websocket(self, session: Session, ws: WebSocketSession, target: str) -> None:
        """Append a relayed WebSocket session's line (see :meth:`_record`)."""
        try:
            recorded = ws.record(now=anyio.current_time())
        except Exception:
            self._unwritten += 1
            log.exception(
                "could not build the recording of the WebSocket session %s: it was NOT "
                "recorded; please report this",
                session.redactor.target(target),
            )
            return
        if recorded is not None:
            self.settle()  # lines go in the order their exchanges ended
            self._append(session.cassette, recorded)

    async def _check_store(self, session: Session) -> None:
        """Before a forward that records: its cassette's store must be able
        to keep the line (a Redis server may have gone).  Else the request
        is not forwarded and the client is answered 502 saying why."""
        store = self._file_of(session.cassette).store
        if getattr(store, "check", None) is None:
            return  # files and memory: nothing to reach
        try:
            await anyio.to_thread.run_sync(check_store, store)
        except StoreUnavailableError as exc:
            raise UpstreamFailure(UpstreamError.STORE, str(exc)) from None

    def _record(
        self, session: Session, target: str, *, later: bool = False, place: Place | None = None
    ) -> None:
        """Queue the recording of a finished forward (in the ``place`` held
        for it since its client left, if any), and build it now unless
        ``later`` in record mode (see :meth:`settle`)."""
        pending = session.engine.take_recording()
        if place is not None:
            self._recordings.fill(place, pending)
        elif pending is not None:
            self._recordings.add(pending, session.redactor, target)
        if not later or self.config.mode is not Mode.RECORD:
            self.settle()

    @property
    def write_errors(self) -> int:
        """Exchanges that were NOT recorded: a line that could not be
        written (disk full, read-only, a store gone) or built (a bug)."""
        return self._unwritten + self._recordings.failures

    def settle(self) -> None:
        """Build the recordings waiting, in the order their exchanges
        ended, and append their lines (see ``_recordings.py``: in record
        mode they are built while the CPU would wait anyway, or here when
        a client has been quiet for ``SETTLE_AFTER``, or as its connection
        ends (the proxy's shutdown too); in every other mode, as each
        exchange ends, before the connection reads on)."""
        self._recordings.settle()

    def _append(self, cassette: Cassette, recorded: Recorded) -> None:
        """Write a recorded line; a disk that fills or turns read-only loses
        that exchange (said loudly), never the proxy."""
        file = self._file_of(cassette)
        self.freshness.recorded(recorded)
        try:
            file.append(recorded.line)
        except StoreUnavailableError as exc:  # the server went between check and append
            self._unwritten += 1
            log.error(
                "%s: exchange %s was NOT recorded; the client got its answer. Record it "
                "again once the store is back.",
                exc,
                recorded.interaction_id,
            )
        except OSError as exc:
            self._unwritten += 1
            log.error(
                "could not write %s (%s): exchange %s was NOT recorded; the client got its "
                "answer. Free space or fix permissions, then record it again.",
                file.path,
                exc.strerror or exc,
                recorded.interaction_id,
            )

    def _log(self, session: Session, exchange: _Exchange) -> None:
        if not log.isEnabledFor(logging.INFO):
            return
        elapsed = (time.monotonic() - exchange.started) * 1000
        key = session.forward_key() if exchange.forwarded else exchange.key
        key = key[7:19] if key else "-"
        log.info(
            "%s %-8s %s %s key=%s %d %.1fms",
            self.config.mode.value,
            exchange.outcome,
            exchange.method or "-",
            session.redactor.target(exchange.target) if exchange.target else "-",
            key,
            exchange.status,
            elapsed,
        )


@attrs.define(eq=False)
class _Gone:
    """Whether the client left while its request was forwarded."""

    session: Session
    recordings: RecordingQueue
    #: The forwarded request's target (names its place in a log).
    target: str
    #: The forward's scope: cancelled once the grace is over.
    stop: anyio.CancelScope = attrs.Factory(anyio.CancelScope)
    #: What showed it ("" while the client is there).
    why: str = ""
    #: The recording's place in the queue, held from the moment the client
    #: left (its exchange ended then, for the client) while the grace runs.
    place: Place | None = None

    def left(self, why: str) -> None:
        """The client left: the forward stops writing to it, and stops
        reading its upstream after the grace the core gives (at once in
        live mode, or before the answer's head)."""
        if self.why:
            return
        self.why = why
        now = anyio.current_time()
        grace = self.session.engine.client_left(why, now=now)
        if grace:
            self.place = self.recordings.reserve(self.session.redactor, self.target)
            self.stop.deadline = min(self.stop.deadline, now + grace)
        else:
            self.stop.cancel()


async def _watch(stream: anyio.abc.ByteStream, session: Session, gone: _Gone) -> None:
    """While a request is forwarded: read from the client.  Its EOF (or a
    broken connection) means it left (see :meth:`_Gone.left`).  Bytes are
    the next request, pipelined: they wait in the session, and the watch
    ends."""
    try:
        data = await stream.receive()
    except anyio.EndOfStream:
        data = b""
        why = "the client closed the connection"
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
        data = b""
        why = f"the client connection broke ({_reason(exc)})"
    if data:
        session.receive_data(data, now=time.time())
        return
    gone.left(why)


class _Feed:
    """The relay's feed: the session, at the loop's clock."""

    __slots__ = ("_session",)

    def __init__(self, session: Session) -> None:
        self._session = session

    def data(self, chunk: bytes) -> None:
        self._session.upstream_data(chunk, now=anyio.current_time())

    def end(self) -> None:
        self._session.upstream_end(now=anyio.current_time())

    def error(self, error: UpstreamError, detail: str) -> None:
        self._session.upstream_error(error, detail, now=anyio.current_time())

    def left(self, why: str) -> float:  # (unused: read_on=False, see _Gone)
        return self._session.engine.client_left(why, now=anyio.current_time())


def _failure(exc: Exception) -> tuple[UpstreamError, str] | None:
    """What the relay feeds for an exception: the upstream client's failures."""
    return (exc.error, exc.detail) if isinstance(exc, UpstreamFailure) else None


def _awaits_upstream(session: Session) -> bool:
    """Whether ``session``'s forward still waits for its upstream's answer."""
    return session.state is State.AWAIT_UPSTREAM


def _pulled(session: Session) -> Iterator[Event]:
    """The session's events until it signals (a replay's are all at hand)."""
    while not isinstance(event := session.next_event(), Signal):
        yield event


def _reason(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__ or exc
    return str(cause) or type(cause).__name__


async def _send(stream: anyio.abc.ByteStream, data: bytes) -> None:
    if data:
        await stream.send(data)


#: The most response bytes joined into one write to a client.
WRITE_SIZE = 64 * 1024


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
