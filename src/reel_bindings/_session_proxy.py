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
"""

from __future__ import annotations

import contextlib
import threading
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


class _Test:
    """One test's proxy and the connections it serves."""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        self.scopes: set[anyio.CancelScope] = set()
        self.ended: anyio.Event | None = None

    def done(self, scope: anyio.CancelScope) -> None:
        self.scopes.discard(scope)
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
        test = self._current
        if test is None:  # between tests: nobody's connection
            await stream.aclose()
            return
        scope = anyio.CancelScope()
        test.scopes.add(scope)
        try:
            with scope:
                async with stream:
                    await test.proxy.handle(stream)
        finally:
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
            self._portal.call(self._stop, test, grace)

    async def _stop(self, test: _Test, grace: float) -> None:
        self._current = None  # refuse new connections at once
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

    def openai(self) -> Any:
        """An ``openai.OpenAI`` on the proxy over plain HTTP, made once per
        session (an SDK client builds an SSL context of about 20 ms); each
        test takes a copy with its key (``with_options``)."""
        client = self._clients.get("openai")
        if client is None:
            from .sdk import _import

            openai = _import("openai", "openai")
            httpx = _import("httpx", "httpx")
            http = httpx.Client(transport=httpx.HTTPTransport())
            client = openai.OpenAI(
                base_url=self.start() + "/v1", api_key="reel-per-test", http_client=http
            )
            self._clients["openai"] = client
        return client
