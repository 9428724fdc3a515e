"""The pytest plugin's proxy: one listener per worker, one :class:`Proxy` per test.

Theory of operation.  Starting a proxy per test cost about 3.4 ms (a
portal thread, an event loop, a listening socket, then stopping all of
them); a test's cassette, mode and settings live in its :class:`Proxy`,
not in the listener.  So a worker (each xdist worker, or the one pytest
process) opens one listener on 127.0.0.1 when a test first asks for the
proxy, on a background anyio portal, and keeps it for the session; each
test hands it its own :class:`Proxy` (:meth:`SessionProxy.serving`) and
takes it back at its end.

Isolation is the per-test proxy's: a connection is served by the proxy of
the test that was current when it was accepted, for its whole life, and
the test's end closes every connection of its proxy as the per-test
listener's stop did (idle ones at once; one still answering gets the
record grace, then is cut), before the next test starts.  So a miss, a
recording or a run log entry of test A is never test B's; a client kept
across tests (the SDK client :meth:`SessionProxy.openai` makes once per
worker) finds its pooled connection closed and opens another for B.  A
connection accepted while no test is being served is closed at once.

Stopping a test.  Which test is current, and which connections are each
test's, change under one thread lock, taken by the test's thread and by
the loop as it accepts a connection; so once the test's thread has made
no test current, no connection is accepted for the test again.  Most
tests end quiet: every connection of theirs is an HTTP/1.1 one waiting,
between two requests, for a request the client has not sent (nothing to
read on its socket), no recording waits and the upstream was never
opened (a replay).  Then nothing is left to wait for, and the test's
thread shuts the sockets down itself (``shutdown``: the client's end
reads EOF at once, so its pool opens another connection for the next
test) and goes on, with no hand-off to the loop: the loop sees each
connection end as it gets to it, and ends its task.  A test that ends
any other way (a stream still answering, a request on its way, a
recording to write, an HTTP/2 or WebSocket connection, upstream
connections to close) is stopped on the loop, as the per-test listener
was: the test's thread waits for it.  Either way the test's run log is
then sealed (:meth:`Proxy.seal`): what still ends on its connections (a
request racing the test's end, cut with its socket) is noted elsewhere,
so the figures the plugin reports for the test never move after its end.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.from_thread

if TYPE_CHECKING:
    from .proxy import Proxy

__all__ = ["SessionProxy"]

#: How long stopping a test waits for its cut connections to end (they end
#: at their next checkpoint; this only bounds a bug).
_CUT_WAIT = 5.0
#: Loop turns for the closed sockets to be closed (see ``_stop``).
_CLOSE_TURNS = 2
#: How many times a test's end looks for its connections to be quiet,
#: letting the loop run in between, before it hands the stop to the loop.
_LOOKS = 3
#: How many copies of the session's SDK client, by their options, are kept.
_COPIES = 16


class _Test:
    """One test's proxy and the connections it serves: each one's cancel
    scope and its socket (changed under the session's lock)."""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        self.scopes: dict[anyio.CancelScope, Any] = {}
        self.ended: anyio.Event | None = None

    def done(self, scope: anyio.CancelScope) -> None:
        self.scopes.pop(scope, None)
        if not self.scopes and self.ended is not None:
            self.ended.set()


class SessionProxy:
    """A listener on a free port of 127.0.0.1 serving each test's proxy in turn."""

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self._portal: anyio.from_thread.BlockingPortal | None = None
        self._current: _Test | None = None
        self._lock = threading.Lock()
        self._clients: dict[str, Any] = {}
        #: The clients' copies by their options (see :meth:`openai`).
        self._copies: dict[tuple[tuple[str, Any], ...], Any] = {}
        self.url = ""

    # -- the session --

    def start(self) -> str:
        """Listen (once); the URL."""
        if self._portal is None:
            portal = self._stack.enter_context(anyio.from_thread.start_blocking_portal("asyncio"))
            self._portal = portal
            self.url = self._stack.enter_context(
                portal.wrap_async_context_manager(self._listening())
            )
        return self.url

    def close(self) -> None:
        """Stop listening; close the clients made for the session."""
        clients, self._clients = self._clients, {}
        self._copies.clear()  # they share their client's connections, closed with it
        for client in clients.values():
            with contextlib.suppress(Exception):
                client.close()
        self._portal = None
        self._stack.close()

    @contextlib.asynccontextmanager
    async def _listening(self) -> Any:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(listener.serve, self._handle, tg)
                try:
                    yield f"http://127.0.0.1:{port}"
                finally:
                    tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await listener.aclose()

    async def _handle(self, stream: anyio.abc.ByteStream) -> None:
        scope = anyio.CancelScope()
        with self._lock:
            test = self._current
            if test is not None:
                test.scopes[scope] = stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
        if test is None:  # between tests: nobody's connection
            await stream.aclose()
            return
        try:
            with scope:
                async with stream:
                    await test.proxy.handle(stream)
        finally:
            with self._lock:
                test.done(scope)

    # -- one test --

    @contextlib.contextmanager
    def serving(self, proxy: Proxy, *, grace: float) -> Iterator[str]:
        """Serve ``proxy`` (one test's) until the block ends; then close its
        connections as a stopping listener would: the idle ones at once, the
        others after up to ``grace`` seconds (a recording reading on a
        stream its client left), and close its upstream connections."""
        url = self.start()
        assert self._portal is not None
        test = _Test(proxy)
        with self._lock:
            if self._current is not None:
                raise RuntimeError("the session proxy serves one test at a time")
            self._current = test
        try:
            yield url
        finally:
            if not self._stopped_quiet(test):
                self._portal.call(self._stop, test, grace)
            proxy.seal()  # what races the end is cut, and not the test's to report

    def _stopped_quiet(self, test: _Test) -> bool:
        """Make no test current; if ``test`` ended quiet (see the module's
        docstring), shut its connections' sockets down here and say so
        (True); else they are the loop's to stop (False)."""
        with self._lock:
            self._current = None  # no connection is accepted for it from now on
        for look in range(_LOOKS):
            if look:  # the loop's turn: it may be ending the exchange just answered
                time.sleep(0)
            with self._lock:
                sockets = list(test.scopes.values())
                if not _quiet(test.proxy, sockets):
                    continue
                for sock in sockets:
                    with contextlib.suppress(OSError):  # the client closed it meanwhile
                        sock.shutdown(socket.SHUT_RDWR)
                return True
        return False

    async def _stop(self, test: _Test, grace: float) -> None:
        proxy = test.proxy
        try:
            proxy.shutdown_idle()
            with anyio.move_on_after(grace):
                while proxy.active:
                    await anyio.sleep(0.02)
            if test.scopes:
                test.ended = anyio.Event()
                for scope in list(test.scopes):
                    scope.cancel()
                with anyio.move_on_after(_CUT_WAIT):
                    await test.ended.wait()
            # asyncio closes a socket a loop turn after its stream's aclose():
            # let that happen, so the client sees its pooled connection
            # closed before the next test reuses it
            for _ in range(_CLOSE_TURNS):
                await anyio.sleep(0)
        finally:
            with anyio.CancelScope(shield=True):
                await proxy.upstream.aclose()

    # -- clients --

    def openai(self, **options: Any) -> Any:
        """An ``openai.OpenAI`` on the proxy over plain HTTP, made once per
        session (an SDK client builds an SSL context of about 20 ms), with
        ``options`` (``with_options``: the test's key, ``max_retries=``...).
        The copy for the same options is made once too (``with_options``
        costs about 0.1 ms a test; a suite asks for the same few): the
        tests asking for them share it, as they share its connections."""
        base = self._base_openai()
        if not options:
            return base
        key = tuple(sorted(options.items()))
        try:
            copy = self._copies.get(key)
        except TypeError:  # a value that cannot be a key (an httpx.Timeout): a copy each
            return base.with_options(**options)
        if copy is None:
            if len(self._copies) >= _COPIES:
                self._copies.clear()
            copy = self._copies[key] = base.with_options(**options)
        return copy

    def _base_openai(self) -> Any:
        client = self._clients.get("openai")
        if client is None:
            from ._sdk_parts import import_sdk

            openai = import_sdk("openai", "openai")
            httpx = import_sdk("httpx", "httpx")
            http = httpx.Client(transport=httpx.HTTPTransport())
            client = openai.OpenAI(
                base_url=self.start() + "/v1", api_key="reel-per-test", http_client=http
            )
            self._clients["openai"] = client
        return client


def _quiet(proxy: Proxy, sockets: list[Any]) -> bool:
    """Whether the connections of ``proxy`` (on ``sockets``) are quiet:
    nothing to read first, then every connection idle (a request read in
    between was served whole, or is still under way), no recording
    waiting, and the upstream unused."""
    return (
        None not in sockets
        and not _readable(sockets)
        and len(sockets) == proxy.active
        and proxy.between_requests()
        and proxy.upstream.unused
    )


def _readable(sockets: list[Any]) -> bool:
    """Whether any of ``sockets`` has something to read (a request on its
    way, or the client's end), or is closed already (its connection is
    ending): the loop has work to do on it."""
    if not sockets:
        return False
    if any(sock.fileno() < 0 for sock in sockets):
        return True
    if not hasattr(select, "poll"):  # Windows: select() takes any socket there
        return bool(select.select(sockets, [], [], 0)[0])
    poller = select.poll()  # no FD_SETSIZE limit, unlike select()
    for sock in sockets:
        poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))
