"""The upstream relay every binding shares (``arelay`` in
``_async/relay.py``, ``relay`` generated from it in ``_sync/relay.py``): pass an upstream response's
body on to the client while feeding each chunk to the core.

A relay is a generator over the upstream's chunks (still content-encoded):
each chunk is fed to the core, then yielded to the client.  Its end is fed
as the end; a failure of the library underneath is fed as the
:class:`reel_core.UpstreamError` the binding's table maps it to, then
raised on.  When the client closes the relay before the end (the generator
is closed), the recording reads on for the grace the core gives
(``Engine.client_left``): an SDK stops at a stream's last event
(``[DONE]``) before the body's end was read, and the end that comes within
the grace makes the recording whole.  Once the grace runs out (or a read
fails: nobody reads on, so it is recorded, not raised), the core records
the exchange as the client saw it, cut by the client
(:attr:`reel_core.Abort.CLIENT_CLOSED`).  The upstream is closed however the
relay ends.
"""

from __future__ import annotations

import contextlib
import time
import types
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Protocol

from reel_core import Abort, UpstreamError

if TYPE_CHECKING:
    import anyio

__all__ = [
    "CLIENT_CLOSED",
    "READING",
    "AsyncCloser",
    "Failure",
    "Feed",
    "GraceOver",
    "ReadingFeed",
    "SyncCloser",
    "anext_before",
    "cancelled",
    "failed",
    "finished",
    "next_before",
    "shielded",
    "sync_cancelled",
    "sync_shielded",
]

#: The detail of the cut recorded when a client closes a response early.
CLIENT_CLOSED = "the client closed the response before its end"

#: The upstream bodies' iterators the relays are reading.  A client that
#: drops a stream unread leaves its relay, the body and the generators under
#: it as one garbage cycle, which the collector finalizes in any order; a
#: generator under the body finalized first would make the relay's one more
#: read look like the body's end, and a cut stream be recorded whole.  Held
#: here, outside that garbage, until the relay is done with them, they are
#: still open when the relay is finalized.
READING: set[object] = set()

#: Maps an exception to the failure it means (its ``UpstreamError`` and the
#: detail recorded), or ``None`` for one that is no upstream failure (a
#: bug, a cancellation): that one is raised on, untouched.
Failure = Callable[[Exception], "tuple[UpstreamError | Abort, str] | None"]


#: What closes the upstream response (sync, async).
SyncCloser = Callable[[], object]
AsyncCloser = Callable[[], Awaitable[object]]


class Feed(Protocol):
    """Where the relay reports what it saw of the upstream."""

    def data(self, chunk: bytes) -> None: ...

    def end(self) -> None: ...

    def error(self, error: UpstreamError | Abort, detail: str) -> None: ...


class ReadingFeed(Feed, Protocol):
    """The feed of a relay that reads on after its client left (``read_on``)."""

    def left(self, why: str) -> float:
        """The client closed the response (``why``): the seconds the
        recording reads on (``Engine.client_left``)."""
        ...


class GraceOver(Exception):
    """The grace the recording reads on for ran out (``anext_before``)."""


async def anext_before(chunks: AsyncIterator[bytes], deadline: float) -> bytes | None:
    """The next chunk of ``chunks`` (``None`` at its end), read before the
    clock (``anyio.current_time()``) reads ``deadline``, else
    :class:`GraceOver` (the read is cancelled)."""
    import anyio  # here: the sync bindings (requests) never load it

    with anyio.move_on_after(deadline - anyio.current_time()):
        return await anext(chunks, None)
    raise GraceOver


def next_before(chunks: Iterator[bytes], deadline: float) -> bytes | None:
    """The sync twin of :func:`anext_before` (``time.monotonic()``): a
    blocking read cannot be cancelled, so the deadline is looked at before
    each read, and a read that stalls is bounded by the client library's
    own read timeout."""
    if time.monotonic() >= deadline:
        raise GraceOver
    return next(chunks, None)


class _NeverRaised(BaseException):
    """What cancels a blocking read: nothing."""


def cancelled() -> type[BaseException]:
    """The exception that cancels the running task (asyncio's or trio's)."""
    import anyio  # here: the sync bindings never load it

    return anyio.get_cancelled_exc_class()


def sync_cancelled() -> type[BaseException]:
    """The sync twin of :func:`cancelled`: nothing cancels a blocking read."""
    return _NeverRaised


def shielded() -> anyio.CancelScope:
    """Where a relay whose client was cancelled reads on (the grace bounds it)."""
    import anyio  # here: the sync bindings never load it

    return anyio.CancelScope(shield=True)


def sync_shielded() -> contextlib.nullcontext[None]:
    """The sync twin of :func:`shielded`: nothing cancels a blocking read."""
    return contextlib.nullcontext()


def finished(chunks: object) -> bool:
    """Whether ``chunks`` is a generator that is over: closed by someone
    else (the relay sees its natural end itself), such as a garbage
    collector finalizing it before the relay above it."""
    if isinstance(chunks, types.GeneratorType):
        return chunks.gi_frame is None
    if isinstance(chunks, types.AsyncGeneratorType):
        return chunks.ag_frame is None
    return False


def failed(exc: Exception, feed: Feed, failure: Failure) -> bool:
    """Feed ``exc`` if it is an upstream failure; whether it was."""
    failed = failure(exc)
    if failed is not None:
        feed.error(*failed)
    return failed is not None
