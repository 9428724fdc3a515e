"""The viewer page of cassettes in a store, drawn again when they change.

``reel view --serve`` and the proxy's ``--ui`` both serve a page that
reloads itself while a cassette grows.  What they share is here: the
*version* of the cassettes shown (cheap: a file's size and time, a Redis
list's length and last value; never their lines), and a page drawn only
when that version moved.  The cassettes are read through a
:class:`~reel_bindings._store.Store`, so a Redis cassette shows like a file.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence

from reel_core import ReelError
from reel_core.tools import AssetSource, ProtoSchema, decode_lines

from .._files import StoreAssets
from .._store import Store
from ._data import Source
from ._page import render_page

__all__ = ["LivePage", "source_of_bytes", "stamp", "store_version"]

#: How often a served page asks for the version (milliseconds).
POLL_MS = 1000


def stamp(store: Store, name: str) -> str:
    """What changes whenever cassette ``name`` of ``store`` does: a file's
    size and modification time, a store's own ``stamp`` (Redis: the list's
    length and last value), else a digest of its bytes."""
    return store.stamp(name)


def store_version(store: Store, names: Sequence[str]) -> str:
    """The version of the cassettes ``names``: it changes when one of them
    does, or when the names do (a new cassette in a directory)."""
    seen = "\n".join(f"{name}:{stamp(store, name)}" for name in names)
    return hashlib.sha256(seen.encode()).hexdigest()[:16]


def source_of_bytes(name: str, data: bytes, assets: AssetSource | None = None) -> Source:
    """A cassette's bytes as the page shows them: its interactions (their
    payloads read back from ``assets``), and the lines it could not read
    with why.  Raises :class:`~reel_core.CassetteError` for bytes that are
    no cassette."""
    decoded = decode_lines(data, name, assets=assets)
    return Source(
        name,
        [(line.number, line.interaction) for line in decoded.lines if line.interaction],
        [(line.number, line.error) for line in decoded.lines if line.error is not None],
    )


class LivePage:
    """The page of the cassettes ``names()`` names in ``store``, as
    ``(version, html)``: drawn again only when their version changed.
    Safe to call from several threads (one draws, the others wait)."""

    def __init__(
        self,
        store: Store,
        names: Callable[[], list[str]],
        *,
        title: Callable[[list[str]], str],
        poll_ms: int = POLL_MS,
        proto: ProtoSchema | None = None,
    ) -> None:
        self.store = store
        #: The descriptor set gRPC messages are shown through (``None``: bytes).
        self.proto = proto
        self.names = names
        self.title = title
        self.poll_ms = poll_ms
        self._lock = threading.Lock()
        self._version = ""
        self._html = ""

    def version(self) -> str:
        """The cassettes' version now (what the page polls)."""
        try:
            names = self.names()
            return store_version(self.store, names)
        except ReelError as exc:  # a server gone: the page says so when drawn
            return "!" + hashlib.sha256(str(exc).encode()).hexdigest()[:16]

    def page(self) -> tuple[str, str]:
        """``(version, html)``, drawn again when the version moved.  What
        cannot be read (a server gone, a file that is no cassette) is said
        on the page, which waits for it to be fixed."""
        with self._lock:
            version = self.version()
            if version != self._version or not self._html:
                self._html = self._draw(version)
                self._version = version
            return self._version, self._html

    def _draw(self, version: str) -> str:
        serve = {"version": version, "poll_ms": self.poll_ms}
        names: list[str] = []
        sources: list[Source] = []
        error = None
        try:
            names = self.names()
            for name in names:
                data = self.store.read(name)
                if data is not None:
                    sources.append(source_of_bytes(name, data, StoreAssets(self.store, name)))
        except ReelError as exc:  # CassetteError and StoreUnavailableError are ones
            error, sources = str(exc), []
        return render_page(
            sources, title=self.title(names), serve=serve, error=error, proto=self.proto
        )
