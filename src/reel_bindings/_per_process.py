"""What the in-process bindings make once per process and share: the pools
their forwards go through (see :func:`reel_bindings._transport.process_pool`
and :func:`reel_bindings.requests.process_adapter`)."""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["PerProcess"]

T = TypeVar("T")


class PerProcess(Generic[T]):
    """Objects made once per process and key, on first use; each one
    ``close``\\ d as the process exits.  A forked child starts with none:
    a connection is its process's (two processes writing on one would read
    each other's answers), so the child makes its own, and leaves the
    parent's unclosed."""

    def __init__(self, close: Callable[[T], object]) -> None:
        self._made: dict[Hashable, T] = {}
        self._lock = threading.Lock()
        self._close = close
        atexit.register(self.close_all)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._made.clear)

    def get(self, key: Hashable, make: Callable[[], T]) -> T:
        """The object for ``key``, made by ``make`` the first time (threads
        racing here get one object: another would never be closed)."""
        made = self._made.get(key)
        if made is None:
            with self._lock:
                made = self._made.get(key)
                if made is None:
                    made = self._made[key] = make()
        return made

    def __len__(self) -> int:
        return len(self._made)

    def close_all(self) -> None:
        """Close every object made (as the process exits); the next
        :meth:`get` makes them again."""
        with self._lock:
            made = list(self._made.values())
            self._made.clear()
        for item in made:
            with contextlib.suppress(Exception):  # exiting: nothing left to tell
                self._close(item)
