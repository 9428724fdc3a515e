"""An exclusive inter-process lock on a cassette, held while a test writes it.

The pytest plugin takes it in the modes that write (``record``, ``auto``) so
that two pytest-xdist workers never record the same cassette at once: the
second waits until the first test is done.  The lock is an OS lock
(``flock``; ``msvcrt.locking`` on Windows) on ``<cassette>.lock``; the file
is removed on release, so no lock files are left next to the cassettes.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from types import TracebackType

__all__ = ["CassetteLock"]

try:
    import fcntl

    def _lock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)

    _UNLINK_HELD = True

except ImportError:  # pragma: no cover - Windows
    import msvcrt

    def _lock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        while True:
            try:  # LK_LOCK gives up after ~10 s: keep waiting
                msvcrt.locking(fd, msvcrt.LK_LOCK, 1)  # type: ignore[attr-defined]
                return
            except OSError:
                continue

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]

    _UNLINK_HELD = False  # Windows cannot remove an open file


class CassetteLock:
    """``with CassetteLock(path):`` -- blocks until no other process holds
    the lock of cassette ``path``.  Not reentrant: a process holding it
    must not take it again."""

    def __init__(self, cassette: str | os.PathLike[str]) -> None:
        cassette = Path(cassette)
        self.path = cassette.with_name(cassette.name + ".lock")
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        if self._fd is not None:
            raise RuntimeError(f"{self.path} is already held by this CassetteLock")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                _lock(fd)
                # The holder before us may have removed the file after we
                # opened it: then we hold a lock nobody else will look at.
                held = os.fstat(fd)
                current = os.stat(self.path)
            except FileNotFoundError:
                os.close(fd)
                continue
            except BaseException:
                os.close(fd)
                raise
            if (held.st_dev, held.st_ino) == (current.st_dev, current.st_ino):
                self._fd = fd
                return
            os.close(fd)

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if _UNLINK_HELD:
                # Removed while held: a waiter then sees a stale file and retries.
                self.path.unlink(missing_ok=True)
            _unlock(fd)
        finally:
            os.close(fd)
        if not _UNLINK_HELD:  # pragma: no cover - Windows
            with contextlib.suppress(OSError):  # open elsewhere: removed later
                self.path.unlink()

    def __enter__(self) -> CassetteLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
