"""Where a cassette's lines lie: the protocol a binding's line source meets.

A room of its own, with nothing imported, so a binding that only names the
protocol (a store's on-demand file) loads none of the cassette's code.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["LineSource"]


class LineSource(Protocol):
    """Where the lines of a cassette lie: ``bytes``, or what a binding
    offers instead (the file itself, read on demand)."""

    def __getitem__(self, index: slice, /) -> bytes: ...

    def __len__(self) -> int: ...

    def find(self, sub: bytes, start: int, end: int, /) -> int: ...

    def startswith(self, prefix: bytes, start: int, end: int, /) -> bool: ...
