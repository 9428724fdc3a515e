"""An open cassette: read once from its store, one atomic append per line.

Appends are safe across threads, tasks and processes (pytest-xdist workers,
several proxies): the store guarantees it (see :mod:`reel_bindings._store`;
for files, one ``os.write`` on an ``O_APPEND`` descriptor under an exclusive
OS lock, a torn last line left by a crash never glued onto).  This module
adds what a cassette needs on top: the ``_meta`` line of a new cassette,
its redaction salt, and acting on the core's :func:`reel_core.start_of`.
"""

from __future__ import annotations

import dataclasses
import os
import re
import secrets
import threading
from pathlib import Path
from typing import Any

from reel_core import SCHEMA_VERSION, Cassette, CassetteError, CassetteMeta, Freeze, Mode
from reel_core.tools import Start, is_meta_line, split_line, start_of

from ._store import PIECE, FileLines, FileStore, Store

#: A byte that is not blank (a BOM's bytes, spaces, tabs, line ends): a
#: cassette holding none is an empty one.  Searched for, not stripped: a
#: strip copied the whole file to look at its first bytes.
_NOT_BLANK = re.compile(rb"[^\xef\xbb\xbf \t\r\n]")

__all__ = [
    "IN_PROCESS_RECORD_HINT",
    "PIECE",
    "CassetteFile",
    "CassetteNotFoundError",
    "FileLines",
    "StoreAssets",
    "new_cassette_meta",
]

#: A cassette file this large (bytes) or larger is indexed piece by piece and
#: its lines read from the file when first used, instead of held in memory.
#: Below it, reading the whole file at once is cheaper than an open file
#: descriptor and a read per line.
ON_DEMAND_FROM = 32 * 1024 * 1024


class StoreAssets:
    """The assets of cassette ``name`` in ``store``, as the core reads them
    (a :class:`reel_core.AssetSource`)."""

    def __init__(self, store: Store, name: str) -> None:
        self.store = store
        self.name = name

    def read(self, digest: str) -> bytes | None:
        return self.store.read_asset(self.name, digest)

    def describe(self, digest: str) -> str:
        return self.store.describe_asset(self.name, digest)

    @property
    def mend(self) -> str:
        return (
            "restore it, or record the line again "
            "(`reel check` lists every missing or corrupt asset)"
        )


def _salt_of(meta: CassetteMeta) -> Any:
    redact = meta.extra.get("redact")
    return redact.get("salt") if isinstance(redact, dict) else None


def _with_salt(meta: CassetteMeta, salt: str | None) -> CassetteMeta:
    redact = meta.extra.get("redact", {})
    redact = dict(redact) if isinstance(redact, dict) else {}
    if salt is None:
        redact.pop("salt", None)
    else:
        redact["salt"] = salt
    extra = {k: v for k, v in meta.extra.items() if k != "redact"}
    if redact:
        extra["redact"] = redact
    return dataclasses.replace(meta, extra=extra)


def new_cassette_meta(meta: CassetteMeta | None = None) -> CassetteMeta:
    """The ``_meta`` of a new cassette: ``meta`` (or the defaults) with a
    fresh random redaction salt (``"redact": {"salt": <32 hex>}``) unless
    it has one.  The salt keys the digests that keep redacted values apart
    (see docs/redaction.md); the core never makes one up itself."""
    meta = meta if meta is not None else CassetteMeta()
    if _salt_of(meta) is not None:
        return meta
    return _with_salt(meta, secrets.token_hex(16))


#: How to create a missing cassette, said by the in-process bindings.
IN_PROCESS_RECORD_HINT = (
    'record it first: run with REEL_MODE=auto (or mode="auto"), which creates it '
    "and records what is missing"
)


class CassetteNotFoundError(CassetteError):
    """Replay mode was asked to read a cassette that does not exist: it
    records nothing, so every request would miss."""

    def __init__(
        self, path: str, hint: str = IN_PROCESS_RECORD_HINT, *, what: str = "cassette"
    ) -> None:
        super().__init__(path, None, f"no such {what}, and replay mode records nothing: {hint}")
        self.hint = hint


class CassetteFile:
    """One cassette in a :class:`~reel_bindings._store.Store` and its
    in-memory :class:`~reel_core.Cassette`.

    ``path`` is the cassette's name in ``store`` (default: a
    :class:`FileStore` without a root, where the name is a file path).
    What opening does is the core's decision (:func:`reel_core.start_of`):
    ``record`` starts the cassette afresh (unless ``refreshed``: it was
    already, earlier in this run), the other modes read what is there.  A
    missing cassette is an empty one in ``auto`` and ``live`` mode
    (``auto`` creates it when it records); in ``replay`` mode it raises
    :class:`CassetteNotFoundError`, whose message ends with ``hint`` (how to
    record it), unless ``missing_ok``.  ``strict`` loading raises at the
    first bad line; tolerant loading (the default) skips bad lines with a
    warning.

    A new cassette (a missing or empty one, or one ``record`` starts
    afresh without a salt) gets a fresh redaction salt in its ``_meta``
    (:func:`new_cassette_meta`); an existing cassette keeps what its
    ``_meta`` says, a salt or none.

    Each line is written through :func:`reel_core.split_line`: its base64
    payloads of ``asset_threshold`` characters or more (the cassette's own
    ``_meta`` setting wins; ``None``: the core's default) go to the store's
    assets first, then the line that refers to them.  The cassette reads
    them back from there (:class:`StoreAssets`).

    The cassette keeps ``parsed_lines`` of its lines parsed at most, the
    ones used last (``None``: the core's default; see ``reel_core._parsed``).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        mode: Mode = Mode.REPLAY,
        strict: bool = False,
        meta: CassetteMeta | None = None,
        missing_ok: bool = False,
        hint: str = IN_PROCESS_RECORD_HINT,
        store: Store | None = None,
        refreshed: bool = False,
        held: bool = False,
        asset_threshold: int | None = None,
        parsed_lines: int | None = None,
    ) -> None:
        self.store: Store = store if store is not None else FileStore()
        self._asset_setting = asset_threshold
        #: Lines recorded but not yet written (``held``: see :meth:`commit`).
        self._held: list[bytes] | None = [] if held else None
        #: ``record`` started this held cassette afresh: the store is replaced at commit.
        self._fresh_pending = False
        #: How many recorded lines this object has written to the store.
        self.written = 0
        self.name = os.fspath(path)
        self.mode = mode
        self._thread_lock = threading.Lock()
        assets = StoreAssets(self.store, self.name)
        label = self.store.describe(self.name)
        #: Our _meta is not (yet) the cassette's: set when it was missing
        #: or empty; another process may write its own first (see append).
        self._unwritten_meta = False
        self._header = b""
        self._header_of: CassetteMeta | None = None
        #: The ``_meta`` in hand has freeze bases the store's line lacks (held: see commit).
        self._freeze_pending = False
        #: Whether the store held the cassette once this object opened it
        #: (``record`` mode's fresh start, unless held, writes it).
        self.existed = self.store.exists(self.name)
        self._open(label, mode, strict, meta, missing_ok, hint, assets, refreshed)
        if parsed_lines is not None:
            self.cassette.parsed_lines = parsed_lines

    def _open(
        self,
        label: str,
        mode: Mode,
        strict: bool,
        meta: CassetteMeta | None,
        missing_ok: bool,
        hint: str,
        assets: StoreAssets,
        refreshed: bool,
    ) -> None:
        """Make :attr:`cassette` as the core's :func:`reel_core.start_of` says."""
        start = start_of(mode, exists=self.existed, refreshed=refreshed)
        if start is Start.FRESH:
            # Starting afresh keeps the cassette's own settings (its _meta line),
            # its salt included.
            kept = self._existing_meta(label) if meta is None else meta
            if kept is not None and kept.schema < SCHEMA_VERSION:
                # every line is written anew, by this Reel: its schema
                kept = dataclasses.replace(kept, schema=SCHEMA_VERSION)
            self.cassette = Cassette(label, new_cassette_meta(kept), assets=assets)
            if self._held is not None:
                self._fresh_pending = True  # the store stays as it is until commit
                return
            self.store.replace(self.name, self.cassette.meta.to_line())
            self.existed = True
            return
        if start is Start.MISSING and not missing_ok:
            raise CassetteNotFoundError(label, hint)
        loaded = self._load_on_demand(label, strict, assets)
        if loaded is not None:
            self.cassette = loaded
            return
        data = self.store.read(self.name) or b""
        if _NOT_BLANK.search(data):
            self.cassette = Cassette.loads(data, name=label, strict=strict, assets=assets)
            if strict:
                self.cassette.validate()  # every line parsed, not just indexed
        else:
            self.cassette = Cassette(label, new_cassette_meta(meta), assets=assets)
            self._unwritten_meta = True

    def _load_on_demand(self, label: str, strict: bool, assets: StoreAssets) -> Cassette | None:
        """A large cassette, indexed piece by piece, its lines left in the
        store (its :meth:`~reel_bindings._store.Store.lines`, a
        :class:`FileLines` for a file); ``None`` for any other cassette."""
        lines = self.store.lines(self.name, ON_DEMAND_FROM)
        if lines is None:
            return None
        try:
            cassette = Cassette.load_pieces(
                lines.pieces(), lines, name=label, strict=strict, assets=assets
            )
            if strict:
                cassette.validate()
        except BaseException:
            lines.close()
            raise
        return cassette

    @property
    def path(self) -> Path:
        """The cassette's file (for a store of files; else its name as a path)."""
        return self.store.file(self.name) or Path(self.name)

    @path.setter
    def path(self, path: str | os.PathLike[str]) -> None:
        self.name = os.fspath(path)
        self.cassette.assets = StoreAssets(self.store, self.name)  # they lie beside it

    def _first_line(self) -> bytes:
        data = self.store.read(self.name) or b""
        return data.split(b"\n", 1)[0].removeprefix(b"\xef\xbb\xbf")

    def _existing_meta(self, label: str) -> CassetteMeta | None:
        first = self._first_line()
        if not is_meta_line(first):
            return None
        return Cassette.loads(first, name=label).meta

    def _adopt_salt(self) -> None:
        """Another process wrote this new cassette's ``_meta`` first: use
        its salt from now on, so later recordings agree with the store.
        (The line in hand was redacted with ours: a request of it that held
        a secret or PII in its content will not replay and is recorded again
        in auto mode.)"""
        first = self._first_line()
        if not is_meta_line(first):
            theirs: Any = None
        else:
            try:
                theirs = _salt_of(Cassette.loads(first, name=self.cassette.name).meta)
            except (CassetteError, ValueError):  # a bad _meta line: loading will say so
                return
        if theirs != _salt_of(self.cassette.meta):
            self.cassette.meta = _with_salt(self.cassette.meta, theirs)

    def append(self, line: bytes) -> None:
        """Append one cassette line (as the session handed it out); a new
        cassette's ``_meta`` line goes first."""
        if self.mode is Mode.LIVE or self.mode is Mode.REPLAY:
            raise RuntimeError(
                f"cassette {self.store.describe(self.name)} is not written in "
                f"{self.mode.value} mode"
            )
        if not line.endswith(b"\n") or b"\n" in line[:-1]:
            raise ValueError("a cassette line is one \\n-terminated line")
        with self._thread_lock:
            if self._held is not None:
                self._held.append(line)
                return
            self._write(line)

    @property
    def held(self) -> int:
        """How many recorded lines wait for :meth:`commit` (0 when not held)."""
        return len(self._held or ())

    @property
    def fresh_pending(self) -> bool:
        """``record`` mode started this held cassette afresh, not written yet."""
        return self._fresh_pending

    def commit(self) -> int:
        """Write the held lines (one atomic append each; a cassette that
        ``record`` started afresh is replaced by its ``_meta`` line and them,
        in one atomic replace) and stop holding; returns how many."""
        with self._thread_lock:
            lines, self._held = self._held or [], None
            if self._fresh_pending:
                self._fresh_pending = False
                lines = [self._split(line) for line in lines]
                self.store.replace(self.name, self.cassette.meta.to_line() + b"".join(lines))
                self.written += len(lines)
                return len(lines)
            for line in lines:
                self._write(line)
            if self._freeze_pending:
                self._write_freeze()
            return len(lines)

    def discard(self) -> int:
        """Drop the held lines, leaving the store as it was, and stop
        holding; returns how many were dropped."""
        with self._thread_lock:
            lines, self._held = self._held or [], None
            self._fresh_pending = False
            self._freeze_pending = False
            return len(lines)

    def keep_freeze(self, freeze: Freeze) -> Freeze:
        """Put ``freeze``'s base values into the cassette's ``_meta`` and
        write that line to the store now (held: at :meth:`commit`, with the
        recordings; ``live`` and ``replay`` mode: never), the lines after it
        kept.  Returns the bases the cassette keeps: a base the store's
        ``_meta`` line already holds (another writer's) wins over ours."""
        with self._thread_lock:
            self.cassette.meta = dataclasses.replace(self.cassette.meta, freeze=freeze)
            if not self.mode.records:
                return freeze
            if self._held is not None:
                self._freeze_pending = not self._fresh_pending  # a fresh commit writes it
                return freeze
            self._freeze_pending = True
            return self._write_freeze()

    def _write_freeze(self) -> Freeze:
        """Write the freeze bases in hand into the store's ``_meta`` line
        (one replace of the whole cassette; a blank or missing one gets our
        ``_meta`` line alone)."""
        ours = self.cassette.meta
        data = (self.store.read(self.name) or b"").removeprefix(b"\xef\xbb\xbf")
        first, _, rest = data.partition(b"\n")
        if not _NOT_BLANK.search(data):
            line, rest = ours.to_line(), b""
        elif is_meta_line(first):
            theirs = Cassette.loads(first, name=self.cassette.name).meta
            kept = theirs.freeze.merged(ours.freeze)
            if kept == theirs.freeze:  # the store has them (another writer's, or ours)
                line = b""
            else:
                line = dataclasses.replace(theirs, freeze=kept).to_line()
            ours = dataclasses.replace(ours, freeze=kept)
        else:  # no _meta line: ours goes first
            line, rest = ours.to_line(), data
        if line:
            self.store.replace(self.name, line + rest)
        self.cassette.meta = ours
        self._unwritten_meta = False
        self._freeze_pending = False
        return ours.freeze

    def _split(self, line: bytes) -> bytes:
        """``line`` with its large payloads moved to the store's assets
        (written first: a line never refers to an asset not yet kept)."""
        threshold = self.cassette.meta.asset_threshold(self._asset_setting)
        line, assets = split_line(line, threshold)
        for digest, data in assets.items():
            self.store.write_asset(self.name, digest, data)
        return line

    def _write(self, line: bytes) -> None:
        line = self._split(line)
        meta = self.cassette.meta
        if meta is not self._header_of:  # the _meta line, made once per meta
            self._header, self._header_of = meta.to_line(), meta
        created = self.store.append(self.name, line, header=self._header)
        if not created and self._unwritten_meta:
            self._adopt_salt()
        self._unwritten_meta = False
        self.written += 1
