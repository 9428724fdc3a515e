"""The match index of a cassette: which lines record each key.

:class:`KeyIndex` is the fast one a cassette uses; :class:`NaiveKeyIndex`
says the same thing the plain way, and is the oracle the property tests
(``tests/property/test_index.py``) hold the fast one to.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

__all__ = ["KeyIndex", "NaiveKeyIndex"]


class KeyIndex:
    """Key -> the positions of the lines recording it, in the order added.

    A key recorded once holds a bare position, not a list: a list for each
    of 100,000 keys, each tracked by the garbage collector, cost a quarter of
    a whole cassette load.  :meth:`bulk_load` files a run of lines at once.
    """

    __slots__ = ("_map",)

    def __init__(self) -> None:
        self._map: dict[str, int | list[int]] = {}

    def add(self, key: str, position: int) -> None:
        """Add ``position`` to the recordings of ``key``."""
        index = self._map
        positions = index.setdefault(key, [])
        if isinstance(positions, int):
            positions = index[key] = [positions]
        positions.append(position)

    def bulk_load(self, keys: Sequence[str], first: int) -> None:
        """:meth:`add` ``keys[i]`` at position ``first + i``, for every ``i``."""
        index = self._map
        fresh: dict[str, int | list[int]] = dict(
            zip(keys, range(first, first + len(keys)), strict=True)
        )
        if len(fresh) == len(keys) and index.keys().isdisjoint(fresh.keys()):
            index.update(fresh)  # nearly always: each key new, recorded once
        else:  # a request recorded more than once
            for position, key in enumerate(keys, first):
                self.add(key, position)

    def positions(self, key: str) -> Sequence[int]:
        """The positions recording ``key`` in the order added (none: empty)."""
        positions = self._map.get(key, ())
        return (positions,) if isinstance(positions, int) else positions

    def __iter__(self) -> Iterator[str]:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)


class NaiveKeyIndex:
    """:class:`KeyIndex` as a plain dict of lists: the oracle."""

    __slots__ = ("_map",)

    def __init__(self) -> None:
        self._map: dict[str, list[int]] = {}

    def add(self, key: str, position: int) -> None:
        self._map.setdefault(key, []).append(position)

    def bulk_load(self, keys: Sequence[str], first: int) -> None:
        for i, key in enumerate(keys):
            self.add(key, first + i)

    def positions(self, key: str) -> Sequence[int]:
        return self._map.get(key, [])

    def __iter__(self) -> Iterator[str]:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)
