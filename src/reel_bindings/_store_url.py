"""The store a ``--store`` value names, with the stores Reel ships
registered: a ``redis://`` or ``rediss://`` URL is a
:class:`~reel_bindings._redis.RedisStore`, anything else a directory of
files (:class:`~reel_bindings._store.FileStore`).

The registry itself (:func:`~reel_bindings._store.register_store`,
:func:`~reel_bindings._store.from_url`) is in :mod:`reel_bindings._store`,
so that the store interface knows none of its implementations: ``_redis``
builds on ``_store`` and registers its schemes there, and this module
imports both, so whoever opens a store by its URL has them.
"""

from __future__ import annotations

from . import _redis  # noqa: F401  (registers redis:// and rediss://)
from ._store import Store, from_url, is_store_url, store_schemes

__all__ = ["check_store", "is_store_url", "open_store", "store_schemes"]

#: The store a URL or a directory names (see :func:`~reel_bindings._store.from_url`).
open_store = from_url


def check_store(store: Store) -> None:
    """Make sure ``store`` can be used now (:meth:`Store.check`: a Redis
    store connects): :class:`StoreUnavailableError` saying why not."""
    store.check()
