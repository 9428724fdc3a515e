"""What keying a request found, kept for the same request sent again.

Keying a replayed request is most of what Reel does for it: the secret
check of its path and body, its credential values, the canonical JSON of
its body and a SHA-256 (about 25 us for a 0.8 KB chat request, where
httpx's own work is 80).  All of it is a function of the request alone
(method, target, headers, body) and of the engine's settings (redactor,
credential header names, match settings, body limit), never of the
cassette's contents: a retry, a test run twice in one process, or a load
generator sending one request again gets the same answer.  So each
cassette keeps a small memo per settings (:meth:`Cassette.memo`), shared
by every engine playing it, and a request seen before is looked up by
value (one hash of its fields) instead of keyed again.

Nothing is ever stale: the cassette growing, its cursor moving or a line
being replaced changes what a key *finds*, never the key.  The memo only
bounds its memory: requests with bodies over :data:`MAX_BODY` are not
kept, and past :data:`MAX_ENTRIES` or :data:`MAX_BYTES` of bodies the
oldest entries go first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from ._http import Headers, Request

__all__ = ["MAX_BODY", "MAX_BYTES", "MAX_ENTRIES", "KeyMemo"]

#: Larger bodies are keyed every time (their keying dwarfs httpx's cost anyway).
MAX_BODY = 64 * 1024
#: At most this many requests are remembered per cassette and settings ...
MAX_ENTRIES = 4096
#: ... holding at most this many body bytes together.
MAX_BYTES = 16 * 1024 * 1024

T = TypeVar("T")


class KeyMemo(Generic[T]):
    """Request -> what keying it gave (``T``), oldest forgotten first."""

    __slots__ = ("_bytes", "_entries")

    def __init__(self) -> None:
        # popitem(last=False) takes the oldest in one step: engines on other
        # threads (each player has its own lock) may share a cassette
        self._entries: OrderedDict[tuple[str, str, Headers, bytes], T] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, request: Request, compute: Callable[[], T]) -> T:
        """What ``compute()`` gave for a request equal to ``request`` (same
        method, target, headers and body), computing it the first time."""
        body = len(request.body)
        if body > MAX_BODY:
            return compute()
        entries = self._entries
        # Keyed by a tuple of its fields, not the request: a tuple of bytes
        # and strings is one the garbage collector stops tracking, where a
        # request object would be walked by every full collection for as
        # long as the memo keeps it.
        key = (request.method, request.target, request.headers, request.body)
        found = entries.get(key)
        if found is not None:
            return found
        value = compute()
        entries[key] = value
        self._bytes += body
        while entries and (len(entries) > MAX_ENTRIES or self._bytes > MAX_BYTES):
            oldest, _ = entries.popitem(last=False)
            self._bytes -= len(oldest[3])
        return value
