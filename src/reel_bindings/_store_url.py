"""The store a ``--store`` value names: a ``redis://`` or ``rediss://`` URL
is a :class:`~reel_bindings._redis.RedisStore`, anything else a directory of
files (:class:`~reel_bindings._store.FileStore`).

Here, not in :mod:`reel_bindings._store`, so that the store interface knows
none of its implementations: ``_redis`` builds on ``_store``, and this module
on both.
"""

from __future__ import annotations

import os
import re

from reel_core.tools import shown_url

from ._redis import DEFAULT_PREFIX, RedisStore
from ._store import FileStore, Store, StoreURLError

__all__ = ["STORE_SCHEMES", "check_store", "is_store_url", "open_store"]


#: URL schemes of stores on a server (anything else is a directory).
STORE_SCHEMES = ("redis", "rediss")


def open_store(
    spec: str | os.PathLike[str], *, prefix: str | None = None, compress: bool = False
) -> Store:
    """The store ``spec`` names: a ``redis://`` or ``rediss://`` URL is a
    :class:`~reel_bindings._redis.RedisStore` (under ``prefix``, default
    ``reel``); anything else is a directory of files (:class:`FileStore`).
    A URL of another scheme is refused (:func:`is_store_url`).  Nothing
    is connected yet: :func:`check_store` does that."""
    text = os.fspath(spec)
    if is_store_url(text):
        return RedisStore(text, prefix=prefix or DEFAULT_PREFIX, compress=compress)
    if not text:
        raise StoreURLError("empty store: give a directory or a redis:// URL")
    return FileStore(text)


def is_store_url(text: str) -> bool:
    """Whether ``text`` names a store on a server (a ``redis://`` or
    ``rediss://`` URL) rather than a directory.  A URL of another scheme
    (``reddis://``, ``unix://``, ``http://``), or one a slash short
    (``redis:/:pw@host``), is a :class:`StoreURLError` that shows
    it without its credentials, not a directory of that name."""
    scheme, sep, _ = text.partition("://")
    slipped = "@" in text and re.match(r"[A-Za-z][A-Za-z0-9+.-]+:", text)
    if not (sep and re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme)) and not slipped:
        return False
    if not sep or scheme.lower() not in STORE_SCHEMES:
        raise StoreURLError(
            f"unknown store {shown_url(text)}: give a directory, or a redis://host:port/db or "
            "rediss:// (TLS) URL"
        )
    return True


def check_store(store: Store) -> None:
    """Make sure ``store`` can be used now (a Redis store connects):
    :class:`StoreUnavailableError` saying why not.  A store without a
    ``check`` method (files, memory) always can."""
    check = getattr(store, "check", None)
    if check is not None:
        check()
