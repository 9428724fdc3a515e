"""The proxy's listener: the cassettes, the timer, and the connections.

A :class:`Proxy` holds what its connections share: the cassettes (a file,
a directory, a store), the recording queue (``_recordings.py``), the one
timer that closes the connections whose client keeps them waiting, the
viewer (``--ui``), and what the run report collects.  It holds no
decisions and moves no bytes: each connection it is handed
(:meth:`Proxy.handle`) is an :class:`~._http11.HTTP11Connection`, the pump
around a :class:`reel_core.Session`, which asks the proxy only what its
``Listener`` protocol names and hands a WebSocket session only the
:class:`~._context.Context`.  A connection that speaks HTTP/2 (its first
bytes are the HTTP/2 preface, or ALPN chose ``h2`` on the ``--tls``
listener) is an :class:`~._http2.HTTP2Connection` instead, the pump around
``reel_core.tools.H2Session``, asking the same of the proxy.

What only some proxies need is imported at its first use, so a plain
HTTP/1.1 replay (the pytest plugin's per-test proxy) loads none of it: the
HTTP/2 pump and h2 at the first HTTP/2 connection, the viewer at its first
page, the store registry for a store named per request, and WebSocket
sessions (wsproto) at the first upgrade (``_http11.py``).
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import anyio
import anyio.abc
import anyio.streams.tls

from reel_core import (
    Abort,
    Cassette,
    CassetteError,
    CassetteMeta,
    Config,
    Engine,
    Mode,
    PendingRecording,
    Recorded,
    RemoteProtocolError,
    Request,
    Routed,
    Session,
    Verdict,
)
from reel_core.tools import UiRefusal, UiResource, safe_cassette_name, ui_request

from .._files import CassetteFile, CassetteNotFoundError
from .._runlog import RunLog
from .._store import FileStore, Store, StoreUnavailableError, check_name
from .._upstream import AsyncUpstream, UpstreamFailure
from ._context import Context, Exchange
from ._http11 import HTTP11Connection, Page, Watched
from ._recordings import Place, RecordingQueue

if TYPE_CHECKING:
    from reel_core.tools import WebSocketSession

    from ..view._live import LivePage

__all__ = ["CASSETTE_HEADER", "Proxy"]

log = logging.getLogger("reel.proxy")

T = TypeVar("T")

#: The request header naming the cassette (with ``--cassette-dir``).
CASSETTE_HEADER = "x-reel-cassette"

#: The longest and shortest wait between two looks of the proxy's timer at
#: its connections' deadlines (seconds; see ``Proxy.tick``).
TICK_MAX = 1.0
TICK_MIN = 0.001


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
        parsed_lines: int | None = None,
    ) -> None:
        if store is not None and cassette_dir is not None:
            raise ValueError("give a store or a cassette_dir, not both")
        if store is None and (cassette is None) == (cassette_dir is None):
            raise ValueError("give exactly one of cassette and cassette_dir")
        self.config = config
        #: ``REEL_ASSET_THRESHOLD`` (see :class:`~reel_bindings._files.CassetteFile`).
        self.asset_threshold = asset_threshold
        #: ``--parsed-lines`` / ``REEL_PARSED_LINES``: the parsed lines each
        #: cassette it opens keeps (``None``: the core's default).
        self.parsed_lines = parsed_lines
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
        #: Whether what each request got is kept for a report: the pytest
        #: plugin's proxy, which lives for one test, reads its run log's
        #: misses and last exchanges; a proxy serving for days keeps only
        #: the counts (its log says the rest).
        self.report = report
        #: What each exchange got (the core's verdict; a WebSocket session
        #: once it ended), the misses and what freshness found, bounded.
        self.runlog = RunLog() if report else RunLog(window=0, keep=0)
        if isinstance(cassette, CassetteFile):  # an open file, shared with other bindings
            path = cassette.path  # made from its name each time it is asked for
            self._files[path] = cassette
            self._by_label[cassette.cassette.name] = cassette
            cassette = path
        self._default = cassette
        if cassette is not None:
            self._open(cassette)
        elif self.named:
            from .._store_url import check_store

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
        #: The connections waiting for their client (see :meth:`awaiting`).
        self._waiting: set[Watched] = set()
        #: How long the timer sleeps between two looks at the deadlines: a
        #: tenth of the client timeout, within ``TICK_MIN`` and ``TICK_MAX``
        #: (a deadline is acted on at most that late, never early).
        self.tick = min(max(client_timeout / 10, TICK_MIN), TICK_MAX)
        #: The running timer's scope (None while no connection is open).
        self._timer: anyio.CancelScope | None = None
        self.closing = False
        #: The viewer's page (``--ui``), made when first asked for.
        self._viewer: LivePage | None = None
        #: What a connection's exchanges may ask of this proxy.
        self.context = Context(
            config=config,
            upstream=self.upstream,
            check_store=self._check_store,
            log=self._log,
            record_session=self._record_websocket,
            runlog=self.runlog,
        )

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
                parsed_lines=self.parsed_lines,
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

    def _route(self, request: Request) -> bool:
        """Whether ``request`` is for the proxy itself: its viewer (``--ui``)."""
        assert self.config.ui is not None
        return ui_request(request, self.config.ui) is not None

    async def view(self, routed: Routed) -> Page | UiRefusal:
        """The answer to a request for the viewer: the page or its version
        (drawn in a worker thread: a big cassette takes a while, and the
        proxy keeps serving meanwhile), or the refusal saying why not."""
        assert self.config.ui is not None
        asked = ui_request(routed.request, self.config.ui, self.config.hints)
        assert asked is not None  # routed by _route
        if isinstance(asked, UiRefusal):
            return asked
        if self._viewer is None:
            # imported when first asked for: a proxy without --ui never
            # needs the viewer
            from ..view._live import LivePage

            self._viewer = LivePage(
                self.store,
                self._viewed,
                title=lambda names: "Reel proxy: " + ", ".join(names),
                proto=self.config.proto,  # gRPC messages shown as the proxy matches them
            )
        if asked is UiResource.VERSION:
            version = await anyio.to_thread.run_sync(self._viewer.version)
            body = json.dumps({"version": version}).encode()
            return 200, _page_headers("application/json", body), body
        _, html = await anyio.to_thread.run_sync(self._viewer.page)
        body = html.encode("utf-8")
        return 200, _page_headers("text/html; charset=utf-8", body), body

    def between_requests(self) -> bool:
        """Whether every open connection is an HTTP/1.1 one waiting for its
        client between two requests (no byte of the next one read), and no
        recording waits: each exchange has ended and been noted, and
        closing the connections cuts nothing.
        Read from another thread (the pytest plugin's session proxy), it is
        a snapshot: whatever the loop does next (a client's next request)
        is the caller's to rule out."""
        waiting = tuple(self._waiting)  # one step: the loop may change the set
        return (
            len(waiting) == self.active
            and not self._recordings
            and all(
                isinstance(conn, HTTP11Connection) and conn.idle and not conn.exchange.first_byte
                for conn in waiting
            )
        )

    def seal(self) -> RunLog:
        """The run log as it is now, noted in no more: what still ends
        from now on (an exchange racing the end of the pytest plugin's
        test, cut as its connection is) is counted in a fresh one, which
        nobody reads."""
        sealed = self.runlog
        self.runlog = RunLog(window=0, keep=0)  # read by nobody: counts only
        return sealed

    def shutdown_idle(self) -> None:
        """Close every connection that is between requests."""
        self.closing = True
        for conn in list(self._waiting):
            if conn.idle:
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

    def now(self) -> float:
        """The proxy's clock, ``time.monotonic``: the connections' deadlines
        and first bytes, the log's durations."""
        return time.monotonic()

    @contextmanager
    def awaiting(self, conn: Watched) -> Iterator[None]:
        """While ``conn`` waits for its client, the timer watches its
        ``deadline``."""
        self._waiting.add(conn)
        try:
            yield
        finally:
            self._waiting.discard(conn)

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
                select: Cassette | Callable[[Request], Cassette] = (
                    self._select if self._default is None else self._files[self._default].cassette
                )
                if stream.extra(anyio.streams.tls.TLSAttribute.alpn_protocol, None) == "h2":
                    await self._http2(stream, select, b"")
                    return
                route = self._route if self.config.ui is not None else None
                session = Session(select, self.config, route=route)
                first = await HTTP11Connection(self, stream, session).serve()
                if first is not None:  # the HTTP/2 preface: h2c with prior knowledge
                    await self._http2(stream, select, first)
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

    async def _http2(
        self,
        stream: anyio.abc.ByteStream,
        select: Cassette | Callable[[Request], Cassette],
        first: bytes,
    ) -> None:
        """Serve an HTTP/2 connection (its ``first`` bytes read): an engine
        per stream, choosing its cassette as an HTTP/1.1 request's does.
        A viewer's request (``--ui``) is refused by that choice before the
        engine matches or forwards it, and the pump answers it."""
        try:
            from reel_core.tools import H2Session

            from ._http2 import HTTP2Connection
        except ImportError as exc:  # the h2 extra is missing
            log.warning("an HTTP/2 client was turned away: %s", exc)
            return
        route = None
        if self.config.ui is not None:
            route = self._route
            select = functools.partial(_not_routed, route, select)
        config = self.config
        decode = None if config.proto is None else config.proto.message_reader
        session = H2Session(functools.partial(Engine, select, config), decode=decode)
        await HTTP2Connection(self, stream, session, route, first).serve()

    # -- recordings ------------------------------------------------------------

    @property
    def recordings(self) -> RecordingQueue:
        """Finished forwards whose recordings wait to be built."""
        return self._recordings

    async def _check_store(self, engine: Engine) -> None:
        """Before a forward that records: its cassette's store must be able
        to keep the line (a Redis server may have gone).  Else the request
        is not forwarded and the client is answered 502 saying why."""
        store = self._file_of(engine.cassette).store
        try:
            if store.remote:  # a server to reach: off the event loop
                await anyio.to_thread.run_sync(store.check)
            else:
                store.check()  # files and memory: at once
        except StoreUnavailableError as exc:
            raise UpstreamFailure(Abort.STORE, str(exc)) from None

    def _record_websocket(self, engine: Engine, ws: WebSocketSession, target: str) -> None:
        """Append a relayed WebSocket session's line (see :meth:`record`)."""
        try:
            recorded = ws.record(mono=anyio.current_time())
        except Exception:
            self._unwritten += 1
            log.exception(
                "could not build the recording of the WebSocket session %s: it was NOT "
                "recorded; please report this",
                engine.redactor.target(target),
            )
            return
        if recorded is not None:
            self.settle()  # lines go in the order their exchanges ended
            self._append(engine.cassette, recorded)

    def record(
        self,
        engine: Engine,
        target: str,
        *,
        later: bool = False,
        place: Place | None = None,
        amend: Callable[[PendingRecording], PendingRecording] | None = None,
    ) -> None:
        """Queue the recording of a finished forward (in the ``place`` held
        for it since its client left, if any), and build it now unless
        ``later`` in record mode (see :meth:`settle`); ``amend`` makes the
        recording stored out of the engine's (a gRPC session's)."""
        pending = engine.take_recording()
        if pending is not None and amend is not None:
            pending = amend(pending)
        if place is not None:
            self._recordings.fill(place, pending)
        elif pending is not None:
            self._recordings.add(pending, engine.redactor, target)
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
        mode they are built while the CPU would wait anyway, or when a
        client has been quiet for ``_http11.SETTLE_AFTER``, or as its
        connection ends (the proxy's shutdown too); in every other mode, as
        each exchange ends, before the connection reads on)."""
        self._recordings.settle()

    def _append(self, cassette: Cassette, recorded: Recorded) -> None:
        """Write a recorded line; a disk that fills or turns read-only loses
        that exchange (said loudly), never the proxy."""
        file = self._file_of(cassette)
        self.runlog.recorded(recorded)
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

    def _log(self, engine: Engine, exchange: Exchange) -> None:
        """An exchange ended: noted in the run log with the core's verdict
        (a WebSocket session's once it ended; a request the proxy answered
        itself, its own), then logged with the core's label; once each."""
        if exchange.logged:
            return
        exchange.logged = True
        ws = exchange.websocket
        if exchange.routed is not None:
            verdict: Verdict | None = exchange.routed
            label = exchange.routed.value
        elif ws is not None:
            verdict, label = ws.verdict, ws.label
        elif exchange.session_missed:  # as a WebSocket session's: a miss, not a hit
            verdict, label = Verdict.MISS, "miss (gRPC session)"
        else:
            verdict, label = engine.verdict, engine.label
        if verdict is not None:
            kind = "http" if ws is None else "websocket"
            self.runlog.served(exchange.method, exchange.path, verdict, kind)
        if not log.isEnabledFor(logging.INFO):
            return
        elapsed = (self.now() - exchange.started) * 1000
        key = engine.forward_key() if exchange.forwarded else exchange.key
        key = key[7:19] if key else "-"
        log.info(
            "%s %-8s %s %s key=%s %d %.1fms",
            self.config.mode.value,
            label,
            exchange.method or "-",
            engine.redactor.target(exchange.target) if exchange.target else "-",
            key,
            exchange.status,
            elapsed,
        )


def _not_routed(
    route: Callable[[Request], bool],
    select: Cassette | Callable[[Request], Cassette],
    request: Request,
) -> Cassette:
    """``select``'s cassette for ``request``, unless ``route`` claims it
    (the viewer's, over HTTP/2): refused then, never matched nor
    forwarded, and the HTTP/2 pump answers it."""
    if route(request):
        raise RemoteProtocolError("the viewer answers this request", 421)
    return select(request) if callable(select) else select


def _page_headers(content_type: str, body: bytes) -> list[tuple[bytes, bytes]]:
    """The headers of a viewer's answer: never cached, nor sniffed."""
    return [
        (b"content-type", content_type.encode("latin-1")),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
        (b"x-content-type-options", b"nosniff"),
    ]
