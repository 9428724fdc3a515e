"""The proxy's WebSocket sessions: bytes and time around the core's adapter.

Once the engine decided an upgrade ``GET`` (a :class:`reel_core.Replay`
whose ``websocket`` is set, or a :class:`reel_core.Forward` whose
``websocket`` is true), the connection belongs to a
:class:`reel_core.WebSocketSession`, driven as its module docstring says:

- a replay: the ``101``, then a writer that sleeps until each step's
  deadline (:func:`reel_bindings._clock.sleep_until`) and a reader that feeds
  the client's bytes (its messages open the gates; a mismatch wakes the
  writer at once, which sends the close the core chose);
- a relay (record, auto, live): a connection of its own to the upstream
  (:meth:`AsyncUpstream.dial`), the handshake (:class:`UpstreamHandshake`),
  then two tasks moving frames each way as they come; the recording is
  appended when the session ends, however it ends.

Every write goes through one :class:`_Outbox` per connection: the bytes
queue in the order the core produced them and one task at a time writes,
so a close frame never overtakes the message before it.

Like the core's adapter, a session here knows the engine and the
:class:`reel_core.Upgrade` the HTTP side made, not the HTTP connection;
of the proxy it sees only the :class:`~._context.Context` it is handed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress

import anyio
import anyio.abc

from reel_core import Engine, Forward, RemoteProtocolError, Replay, Upgrade, UpstreamError
from reel_core.tools import (
    UpstreamAnswer,
    UpstreamHandshake,
    WebSocketOutput,
    WebSocketSession,
    WebSocketSignal,
)

from .._clock import sleep_until
from .._upstream import UpstreamFailure
from ._context import Context, Exchange

__all__ = ["relay_websocket", "replay_websocket"]

log = logging.getLogger("reel.proxy")

#: How long a session that ended waits for the close handshake (the other
#: side's close frame, the upstream's end of connection) before the proxy
#: closes the connections itself, in seconds.
CLOSE_GRACE = 2.0
#: The most bytes read at once from either side.
_READ_SIZE = 65536

_GONE = (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


class _Outbox:
    """Bytes for one connection, written in the order they were queued, by
    one task at a time (a write fails quietly once the peer is gone)."""

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self.stream = stream
        self._pending: list[bytes] = []
        self._lock = anyio.Lock()
        self.broken = False

    def put(self, data: bytes) -> None:
        if data and not self.broken:
            self._pending.append(data)

    async def flush(self) -> None:
        async with self._lock:
            while self._pending and not self.broken:
                data, self._pending = b"".join(self._pending), []
                try:
                    await self.stream.send(data)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                    self.broken = True
                    self._pending = []


async def _read(stream: anyio.abc.ByteStream) -> bytes:
    """The next bytes from ``stream``; ``b""`` once it ended or broke."""
    try:
        return await stream.receive(_READ_SIZE)
    except _GONE:
        return b""


# -- replay ---------------------------------------------------------------------------


async def replay_websocket(
    context: Context,
    exchange: Exchange,
    stream: anyio.abc.ByteStream,
    engine: Engine,
    upgrade: Upgrade,
    decision: Replay,
) -> None:
    """Serve a recorded WebSocket session to the client (``upgrade``: the
    HTTP side's answer to its upgrade)."""
    ws = exchange.websocket = WebSocketSession.replay(engine, upgrade, decision)
    client = _Outbox(stream)
    opened = anyio.current_time()
    exchange.status = 101
    out = ws.start(opened)
    client.put(out.to_client)
    await client.flush()
    news = anyio.Event()  # the reader fed something: the writer looks again
    sleeping = anyio.CancelScope()  # the writer's wait for a deadline

    def wake() -> None:
        nonlocal news
        news.set()
        news = anyio.Event()
        if ws.miss is not None or ws.closed:
            sleeping.cancel()

    async def reader() -> None:
        while True:
            data = await _read(stream)
            out = ws.receive_client(data, anyio.current_time())
            client.put(out.to_client)
            await client.flush()
            wake()
            if not data or ws.closed:  # after our close: its answer came
                return

    async def writer() -> bool:
        """Send the steps; True when the connection must drop at once."""
        nonlocal sleeping
        while True:
            step = ws.next_step()
            if step is WebSocketSignal.DONE:
                return False
            if step is WebSocketSignal.NEED_CLIENT:
                await news.wait()
                continue
            if step.until is not None:
                sleeping = anyio.CancelScope()
                if ws.miss is None and not ws.closed:
                    with sleeping:
                        await sleep_until(opened + step.until)
                if sleeping.cancelled_caught and not step.last:
                    continue  # a mismatch or the client's close came first: not sent
            client.put(ws.send(step))
            await client.flush()
            if step.last:
                return step.drop

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        if await writer():
            tg.cancel_scope.cancel()  # the recorded upstream dropped it: so do we
        else:
            # the reader reads on until the client answered our close (or
            # closed itself): closing with its bytes unread would reset the
            # connection, and the client could lose the close frame
            tg.cancel_scope.deadline = anyio.current_time() + CLOSE_GRACE
    if ws.miss is not None:
        context.runlog.websocket_missed(ws.miss)
        log.warning("%s", ws.miss.render())
    context.log(engine, exchange)


# -- relay (record, auto, live) -------------------------------------------------------


async def relay_websocket(
    context: Context,
    exchange: Exchange,
    stream: anyio.abc.ByteStream,
    engine: Engine,
    upgrade: Callable[[], Upgrade],
    forward: Forward,
    answer_http: Callable[[], Awaitable[None]],
) -> None:
    """Relay a WebSocket session to the upstream (recording it if
    ``forward.record``).  Once the upstream accepted, ``upgrade`` answers
    the client's upgrade on the HTTP side (the engine has the 101 then);
    ``answer_http`` writes what the engine has for the client when the
    upgrade is not accepted (the upstream's refusal, or a 502 saying why it
    could not be reached)."""
    assert forward.url is not None
    sent_at = anyio.current_time()
    # an upgrade that does not go through is an HTTP exchange (answered, recorded)
    where = engine.redactor.target(forward.request.target)
    try:
        if forward.record:
            await context.check_store(engine)
        upstream, host = await context.upstream.dial(forward.url)
    except UpstreamFailure as exc:
        log.warning("upstream failed for %s: %s", where, engine.redactor.text(str(exc)))
        engine.upstream_error(exc.error, exc.detail, mono=anyio.current_time())
        await answer_http()
        return
    async with upstream:
        handshake = UpstreamHandshake(forward.request, host, forward.url)
        answer: UpstreamAnswer | None = None
        failure = ""
        try:
            with anyio.fail_after(context.upstream.read_timeout):
                await upstream.send(handshake.data)
                while answer is None:
                    data = await _read(upstream)
                    answer = handshake.receive_data(data)
                    if answer is None and not data:
                        failure = "the upstream closed the connection before answering the upgrade"
                        break
        except TimeoutError:
            failure = "the upstream did not answer the upgrade in time"
        except RemoteProtocolError as exc:
            failure = str(exc)
        except _GONE as exc:
            failure = f"the upstream connection broke ({exc or type(exc).__name__})"
        now = anyio.current_time()
        if answer is None:
            log.warning("upstream failed for %s: %s", where, engine.redactor.text(failure))
            engine.upstream_error(UpstreamError.PROTOCOL, failure, mono=now)
            await answer_http()
            return
        # the upstream's answer, fed as any response: a refusal (401, 404...)
        # goes to the client, a 101 is the upgrade's (recorded with the session)
        engine.upstream_head(
            answer.status, answer.headers, mono=now, sent_at=sent_at, wall=time.time()
        )
        if answer.status != 101:
            if answer.data:
                engine.upstream_data(answer.data, mono=now)
            engine.upstream_end(mono=now)
            exchange.status = answer.status
            await answer_http()
            return
        engine.upstream_end(mono=now)
        exchange.status = 101
        ws = exchange.websocket = WebSocketSession.relay(
            engine, upgrade(), forward, answer, mono=now
        )
        try:
            await _relay(ws, stream, upstream)
        finally:  # appended and noted however the session ended (a proxy shutting down too)
            if forward.record:
                context.record_session(engine, ws, forward.request.target)
            context.log(engine, exchange)


async def _relay(
    ws: WebSocketSession, stream: anyio.abc.ByteStream, upstream: anyio.abc.ByteStream
) -> None:
    """Move frames both ways until the session ended (and its close
    handshake did, or :data:`CLOSE_GRACE` passed)."""
    client, server = _Outbox(stream), _Outbox(upstream)

    async def write(out: WebSocketOutput) -> None:
        client.put(out.to_client)
        server.put(out.to_upstream)
        await client.flush()
        await server.flush()

    await write(ws.start(anyio.current_time()))
    async with anyio.create_task_group() as tg:

        def ended() -> None:
            if ws.closed and tg.cancel_scope.deadline == float("inf"):
                tg.cancel_scope.deadline = anyio.current_time() + CLOSE_GRACE

        async def from_client() -> None:
            while True:
                data = await _read(stream)
                out = ws.receive_client(data, anyio.current_time())
                await write(out)
                ended()
                if not data:
                    return

        async def from_upstream() -> None:
            while True:
                data = await _read(upstream)
                out = ws.receive_upstream(data, anyio.current_time())
                await write(out)
                ended()
                if not data:  # the upstream's end: the session is over
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(from_client)
        tg.start_soon(from_upstream)
    with suppress(*_GONE):
        await anyio.aclose_forcefully(upstream)
