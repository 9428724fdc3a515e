"""Cassette files: read once, append one locked write per line.

Appends are safe across threads, tasks and processes (pytest-xdist workers,
several proxies): each line goes out in a single ``os.write`` on an
``O_APPEND`` descriptor while holding an exclusive OS lock on the file.  A
crash can leave at most a torn last line, which tolerant loading skips; the
next append starts on a fresh line so it never glues onto the torn one.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import threading
from pathlib import Path
from typing import Any

from reel_core import Cassette, CassetteError, CassetteMeta, Mode, is_meta_line

__all__ = [
    "IN_PROCESS_RECORD_HINT",
    "CassetteFile",
    "CassetteNotFoundError",
    "new_cassette_meta",
]


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


try:
    import fcntl

    def _lock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)

except ImportError:  # pragma: no cover - Windows
    import msvcrt

    def _lock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_LOCK, 1)  # type: ignore[attr-defined]

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class CassetteFile:
    """One cassette on disk and its in-memory :class:`~reel_core.Cassette`.

    ``mode`` decides what opening does: ``record`` starts the file afresh,
    the other modes read what is there.  A missing file is an empty
    cassette in ``auto`` and ``live`` mode (``auto`` creates it when it
    records); in ``replay`` mode it raises :class:`CassetteNotFoundError`,
    whose message ends with ``hint`` (how to record it), unless
    ``missing_ok``.  ``strict`` loading raises at the first bad line;
    tolerant loading (the default) skips bad lines with a warning.

    A new cassette (a missing or empty file, or one ``record`` starts
    afresh without a salt) gets a fresh redaction salt in its ``_meta``
    (:func:`new_cassette_meta`); an existing cassette keeps what its
    ``_meta`` says, a salt or none.
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
    ) -> None:
        self.path = Path(path)
        self.mode = mode
        self._thread_lock = threading.Lock()
        name = str(self.path)
        #: Our _meta is not (yet) the file's: set when the file was missing
        #: or empty; another process may write its own first (see append).
        self._unwritten_meta = False
        if mode is Mode.RECORD:
            # Starting afresh keeps the cassette's own settings (its _meta line),
            # its salt included.
            kept = self._existing_meta(name) if meta is None else meta
            self.cassette = Cassette(name, new_cassette_meta(kept))
            self._reset()
            return
        exists = self.path.exists()
        data = self.path.read_bytes() if exists else b""
        if data.strip(b"\xef\xbb\xbf \t\r\n"):
            self.cassette = Cassette.loads(data, name=name, strict=strict)
            if strict:
                self.cassette.validate()  # every line parsed, not just indexed
        elif not exists and mode is Mode.REPLAY and not missing_ok:
            raise CassetteNotFoundError(name, hint)
        else:
            self.cassette = Cassette(name, new_cassette_meta(meta))
            self._unwritten_meta = True

    def _existing_meta(self, name: str) -> CassetteMeta | None:
        try:
            with self.path.open("rb") as f:
                first = f.readline()
        except FileNotFoundError:
            return None
        if not is_meta_line(first.removeprefix(b"\xef\xbb\xbf")):
            return None
        return Cassette.loads(first, name=name).meta

    def _adopt_salt(self, fd: int) -> None:
        """Another process wrote this new cassette's ``_meta`` first: use
        its salt from now on, so later recordings agree with the file.
        (The line in hand was redacted with ours: a request of it that held
        a secret or PII in its content will not replay and is recorded again
        in auto mode.)"""
        first = os.pread(fd, 65536, 0).split(b"\n", 1)[0].removeprefix(b"\xef\xbb\xbf")
        if not is_meta_line(first):
            disk: Any = None
        else:
            try:
                disk = _salt_of(Cassette.loads(first, name=str(self.path)).meta)
            except (CassetteError, ValueError):  # a bad _meta line: loading will say so
                return
        if disk != _salt_of(self.cassette.meta):
            self.cassette.meta = _with_salt(self.cassette.meta, disk)

    def _reset(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            _lock(fd)
            try:
                os.ftruncate(fd, 0)
                _write_all(fd, self.cassette.meta.to_line())
            finally:
                _unlock(fd)
        finally:
            os.close(fd)

    def append(self, line: bytes) -> None:
        """Append one cassette line (as the session handed it out)."""
        if self.mode is Mode.LIVE or self.mode is Mode.REPLAY:
            raise RuntimeError(f"cassette {self.path} is not written in {self.mode.value} mode")
        if not line.endswith(b"\n") or b"\n" in line[:-1]:
            raise ValueError("a cassette line is one \\n-terminated line")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._thread_lock:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                _lock(fd)
                try:
                    size = os.fstat(fd).st_size
                    prefix = b""
                    if size == 0:
                        prefix = self.cassette.meta.to_line()
                    else:
                        if self._unwritten_meta:
                            self._adopt_salt(fd)
                        if os.pread(fd, 1, size - 1) != b"\n":
                            prefix = b"\n"  # a torn line from a crash: start afresh
                    self._unwritten_meta = False
                    _write_all(fd, prefix + line)
                finally:
                    _unlock(fd)
            finally:
                os.close(fd)
