"""reel_bindings: Reel's I/O.  The proxy (``python -m reel_bindings.proxy``),
in-process transports and the cassette stores, all driving ``reel_core``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._files import CassetteFile, CassetteNotFoundError
    from ._redis import RedisStore
    from ._store import FileStore, MemoryStore, Store, StoreUnavailableError, StoreURLError
    from ._store_url import open_store

__all__ = [
    "CassetteFile",
    "CassetteNotFoundError",
    "FileStore",
    "MemoryStore",
    "RedisStore",
    "Store",
    "StoreURLError",
    "StoreUnavailableError",
    "open_store",
]

_HOMES = {
    "CassetteFile": "_files",
    "CassetteNotFoundError": "_files",
    "FileStore": "_store",
    "MemoryStore": "_store",
    "Store": "_store",
    "StoreURLError": "_store",
    "StoreUnavailableError": "_store",
    "open_store": "_store_url",
    # redis-py is imported when a RedisStore is made, not with this module
    "RedisStore": "_redis",
}


def __getattr__(name: str) -> Any:
    # Imported on first use, so that loading the pytest plugin (an entry
    # point, imported before coverage starts) does not import reel_core.
    if name in _HOMES:
        import importlib

        return getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
