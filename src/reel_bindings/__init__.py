"""reel_bindings: Reel's I/O.  The proxy (``python -m reel_bindings.proxy``),
in-process transports and the cassette stores, all driving ``reel_core``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._files import CassetteFile, CassetteNotFoundError
    from ._redis import RedisStore
    from ._store import FileStore, MemoryStore, Store, StoreUnavailableError
    from ._store_url import open_store
    from .calls import Codec, arecord_call, boundary, calls_on, record_call, tool

__all__ = [
    "CassetteFile",
    "CassetteNotFoundError",
    "Codec",
    "FileStore",
    "MemoryStore",
    "RedisStore",
    "Store",
    "StoreUnavailableError",
    "arecord_call",
    "boundary",
    "calls_on",
    "open_store",
    "record_call",
    "tool",
]

_HOMES = {
    "CassetteFile": "_files",
    "CassetteNotFoundError": "_files",
    "FileStore": "_store",
    "MemoryStore": "_store",
    "Store": "_store",
    "StoreUnavailableError": "_store",
    "open_store": "_store_url",
    # boundaries (reel_bindings.calls): `from reel_bindings import tool`
    "Codec": "calls",
    "arecord_call": "calls",
    "boundary": "calls",
    "calls_on": "calls",
    "record_call": "calls",
    "tool": "calls",
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
