"""The upstream relay every binding shares (``arelay`` in
``_async/relay.py``, ``relay`` generated from it in ``_sync/relay.py``): pass an upstream response's
body on to the client while feeding each chunk to the core.

A relay is a generator over the upstream's chunks (still content-encoded):
each chunk is fed to the core, then yielded to the client.  Its end is fed
as the end; a failure of the library underneath is fed as the
:class:`reel_core.UpstreamError` the binding's table maps it to, then
raised on.  When the client closes the relay before the end (the generator
is closed), one more read takes the end if it is there: an SDK stops at a
stream's last event (``[DONE]``) before the body's end was read.  If a
chunk comes instead, the recording is cut there, by the client
(:attr:`UpstreamError.CLIENT_CLOSED`); a failure of that read is recorded,
not raised, as nobody reads on.  The upstream is closed however the relay
ends.
"""

from __future__ import annotations

import types
from collections.abc import Awaitable, Callable
from typing import Protocol

from reel_core import UpstreamError

__all__ = [
    "CLIENT_CLOSED",
    "READING",
    "AsyncCloser",
    "Failure",
    "Feed",
    "SyncCloser",
    "closed_early",
    "failed",
    "finished",
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
Failure = Callable[[Exception], "tuple[UpstreamError, str] | None"]


#: What closes the upstream response (sync, async).
SyncCloser = Callable[[], object]
AsyncCloser = Callable[[], Awaitable[object]]


class Feed(Protocol):
    """Where the relay reports what it saw of the upstream."""

    def data(self, chunk: bytes) -> None: ...

    def end(self) -> None: ...

    def error(self, error: UpstreamError, detail: str) -> None: ...


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


def closed_early(last: bytes | None, feed: Feed) -> None:
    """After the client closed: the end if the one more read found it
    (``None``), else the chunk read, and the cut by the client."""
    if last is None:
        feed.end()
    else:
        feed.data(last)
        feed.error(UpstreamError.CLIENT_CLOSED, CLIENT_CLOSED)
