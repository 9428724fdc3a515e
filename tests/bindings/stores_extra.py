"""A store added in one module: ``mem://NAME`` URLs name in-memory stores
of this process (one per name), registered on import.

Importing it (``-p tests.bindings.stores_extra`` for pytest) is all it
takes for ``--store mem://team``, ``--reel-store mem://team``,
``$REEL_STORE`` or ``store="mem://team"`` to use it: no other file names
the scheme (tests/bindings/test_store_registry.py).
"""

from __future__ import annotations

from reel_bindings._store import MemoryStore, register_store

__all__ = ["STORES", "MemStore"]


class MemStore(MemoryStore):
    """A :class:`MemoryStore` that says where it is by its URL, and counts
    its checks (a binding must check a store before it records)."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        self.checks = 0

    def __repr__(self) -> str:
        return self.url

    def describe(self, name: str) -> str:
        return f"{self.url}#{name}"

    def check(self) -> None:
        self.checks += 1


#: The stores made so far, by the name in their URL.
STORES: dict[str, MemStore] = {}


def _open(url: str, *, prefix: str | None, compress: bool) -> MemStore:
    name = url.partition("://")[2]
    return STORES.setdefault(name, MemStore(url))


register_store("mem", _open, example="mem://NAME")
