"""What the two upstream clients share (``_upstream.py``, HTTP/1.1, and
``_upstream_h2.py``, HTTP/2): the failure they raise, the origin a
connection serves, the hook called once a request waits, the check of an
idle connection."""

from __future__ import annotations

import select
import socket
from collections.abc import Callable

from reel_core import Abort, UpstreamError

__all__ = ["Once", "Origin", "UpstreamFailure", "readable"]


class UpstreamFailure(Exception):
    """The upstream failed, or the proxy did not forward (the store is
    down); ``error`` says how (already mapped)."""

    def __init__(self, error: UpstreamError | Abort, detail: str) -> None:
        super().__init__(f"{error.value}: {detail}")
        self.error = error
        self.detail = detail


#: ``(scheme, host, port)``: which connections a request may reuse.
Origin = tuple[str, str, int]


def readable(sock: socket.socket) -> Callable[[], bool]:
    """A check of whether an idle connection has something to read: the
    server closed it (or broke the protocol); either way it cannot carry a
    request.  A poll registered once, so each check is one system call."""
    if hasattr(select, "poll"):
        poll = select.poll()
        poll.register(sock, select.POLLIN)
        return lambda: bool(poll.poll(0))
    return lambda: bool(select.select([sock], [], [], 0)[0])  # pragma: no cover - Windows


class Once:
    """Calls ``hook`` (if any) the first time it is called, never again."""

    __slots__ = ("_hook",)

    def __init__(self, hook: Callable[[], object] | None) -> None:
        self._hook = hook

    def __call__(self) -> None:
        hook, self._hook = self._hook, None
        if hook is not None:
            hook()
