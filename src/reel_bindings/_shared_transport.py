"""Transports for an SDK client shared by many tests: each request goes to
the cassette of the test being run.

Theory of operation.  Suites often make their client once (at a module's
import, in a session fixture): an SDK client builds an SSL context of
about 20 ms, and a suite of a thousand tests would pay it a thousand times.
Such a client cannot be given one test's transport; it is given a
:class:`SharedTransport` (or :class:`AsyncSharedTransport`) instead, made
once, which owns no cassette.  The pytest plugin says which test is being
run (``_call_context.share_for_test``, for each test that uses Reel: the
``reel`` fixture or the marker), as a getter of that test's cassette; each request
asks for it and is handed to that test's own transport (made on the test's
first request through a shared transport, one per test and per kind,
closed with the test).  So a request through a shared client is replayed,
recorded, matched and reported exactly as through ``reel.transport()``:
the same misses, the same isolation (a request belongs to the test running
when it is sent).  A request sent while no test using Reel runs (at import,
in a session fixture, from a thread a test left behind) fails with what to
do, and nothing is recorded.  A shared client made in a replay run without
a key carries Reel's replay placeholder; a test that would forward it
(its marker makes it record) is refused by the engine, as every binding's
request carrying the placeholder is (``reel_core``'s ``Engine``).

The plugin never imports this module: the code under test does, when it
makes a shared client.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, cast

from ._call_context import shared_for_test
from ._transport import AsyncBase, SyncBase

if TYPE_CHECKING:
    from .httpcore import AsyncTransport, Transport

__all__ = [
    "AsyncSharedTransport",
    "NoTestRunning",
    "SharedTransport",
]


class _TestCassette(Protocol):
    """What a shared transport needs of the running test's cassette (the
    plugin's ``ReelCassette``)."""

    def _shared_sync(self) -> Transport: ...

    def _shared_async(self) -> AsyncTransport: ...


class NoTestRunning(RuntimeError):
    """A request through a shared transport while no test using Reel runs."""


#: One test's first requests at once (two threads): one fixture, one transport.
_lock = threading.Lock()

_NO_TEST = (
    "a client on Reel's shared transport sent a request while no test using Reel "
    "was running: give the test the `reel` fixture or mark it @pytest.mark.reel "
    "(a module's `pytestmark` marks all its tests); a request sent at import, from a "
    "session fixture or from a thread a test left running has no cassette"
)


def _cassette() -> _TestCassette:
    """The running test's cassette (:class:`NoTestRunning` when none)."""
    cassette = shared_for_test()
    if cassette is None:
        raise NoTestRunning(_NO_TEST)
    return cast(_TestCassette, cassette())


def _sync() -> Transport:
    with _lock:
        return _cassette()._shared_sync()


def _async() -> AsyncTransport:
    with _lock:
        return _cassette()._shared_async()


class SharedTransport(SyncBase):
    """A sync transport for ``httpx.Client`` / ``httpx2.Client``: each
    request on the running test's cassette.  Nothing of its own is open
    (each test's transport is closed with its test)."""

    def handle_request(self, request: Any) -> Any:
        return _sync().handle_request(request)

    def close(self) -> None:
        """Nothing to close."""

    def __enter__(self) -> Any:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc: BaseException | None = None,
        tb: TracebackType | None = None,
    ) -> None:
        self.close()


class AsyncSharedTransport(AsyncBase):
    """An async transport for ``httpx.AsyncClient`` / ``httpx2.AsyncClient``
    (asyncio or trio): each request on the running test's cassette."""

    async def handle_async_request(self, request: Any) -> Any:
        return await _async().handle_async_request(request)

    async def aclose(self) -> None:
        """Nothing of the transport's own is open."""

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc: BaseException | None = None,
        tb: TracebackType | None = None,
    ) -> None:
        await self.aclose()
