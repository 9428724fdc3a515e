"""An exclusive inter-process lock on a cassette, held while a test writes it.

The pytest plugin takes it (through its store's ``lock(name)``) in the
modes that write (``record``, ``auto``) so that two pytest-xdist workers
never record the same cassette at once.  For files it is the store's one OS
lock (see :mod:`reel_bindings._store`) on ``<cassette>.lock``, removed on
release.  :class:`CassetteLock` is kept for code that named it.
"""

from __future__ import annotations

import os
from pathlib import Path

from ._store import FileLock

__all__ = ["CassetteLock"]


class CassetteLock(FileLock):
    """``with CassetteLock(path):`` -- blocks until no other process holds
    the lock of cassette ``path`` (the file ``<path>.lock``).  Not reentrant."""

    def __init__(self, cassette: str | os.PathLike[str]) -> None:
        cassette = Path(cassette)
        super().__init__(cassette.with_name(cassette.name + ".lock"))
