"""Where cassettes live: one small interface, :class:`Store`, and its
implementations (files, memory).

The core hands out lines and takes bytes; a store keeps them.  What every
implementation must guarantee (docs/stores.md says it for implementers):

* ``read(name)`` gives the cassette's bytes, every line as written, or
  ``None`` when there is no such cassette;
* ``append(name, line, header=...)`` adds one whole ``\\n``-terminated line
  atomically: never torn, never interleaved with another writer's line, in
  any process.  When the cassette is empty (or absent) ``header`` (its
  ``_meta`` line) goes first, in the same atomic step; the answer says
  whether it did;
* ``replace(name, data)`` swaps the whole cassette at once (record mode's
  fresh start, ``reel redact``): a reader sees the old bytes or the new,
  and no acknowledged append is lost to it;
* ``lock(name)`` is an exclusive lock across processes (the pytest
  plugin's one writer per cassette), not reentrant;
* ``exists``, ``list(prefix)`` and ``describe(name)`` (the cassette as
  messages name it);
* ``check()`` says now whether the store can be used (a server reached),
  raising :class:`StoreUnavailableError`; ``remote`` says whether it
  reaches a server (so a binding calls it off its event loop).

What a store may do better than the defaults :class:`Store` gives a class
that subclasses it: hand out a large cassette's bytes on demand
(``lines``), name its local file (``file``), and say cheaply when a
cassette changed (``stamp``).

A store behind a URL registers its scheme (:func:`register_store`): then
:func:`from_url` opens it, every ``--store``, ``$REEL_STORE``,
``--reel-store`` and ``reel_store`` value is checked against the one
registry (:func:`is_store_url`), and nothing else needs an edit.  A
store is then one module.

* ``write_asset``, ``read_asset``, ``assets``, ``delete_asset`` and
  ``describe_asset``: the payloads a cassette's lines refer to, by digest
  (see :mod:`reel_core._assets`); a file store keeps them in
  ``NAME.assets/sha256-<digest>`` beside the cassette.

A name is ``/``-separated and relative (:func:`check_name`); a
:class:`FileStore` without a root takes a path instead, as the bindings
always did.

:class:`FileStore` keeps today's files: each line is one ``os.write`` on an
``O_APPEND`` descriptor under an exclusive OS lock on the file (a crash can
leave at most a torn last line, which tolerant loading skips; the next
append starts on a fresh line).  The one OS lock (:func:`lock_fd`) is
``fcntl.flock`` on POSIX and ``msvcrt.locking`` of the file's first byte on
Windows (retried: it gives up after ten seconds there).  :class:`FileLock`
uses it on ``<cassette>.lock``, a file removed on release.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import os
import re
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Protocol, runtime_checkable

from reel_core import CassetteError, ConfigError, ReelError
from reel_core.tools import LineSource, shown_url

__all__ = [
    "PIECE",
    "FileLines",
    "FileLock",
    "FileStore",
    "MemoryStore",
    "OnDemandLines",
    "Store",
    "StoreFactory",
    "StoreURLError",
    "StoreUnavailableError",
    "assets_dir",
    "atomic_write",
    "check_digest",
    "check_name",
    "from_url",
    "is_store_url",
    "lock_fd",
    "register_store",
    "store_schemes",
    "unlock_fd",
]


class StoreUnavailableError(ReelError):
    """The cassette store cannot be used: its server cannot be reached (the
    message names its URL), its client library is not installed, or its
    URL is bad.  An outage, not a bad setting, so not a
    :class:`~reel_core.ConfigError` (a ``REEL_STORE`` the settings refuse
    is one, naming the variable): the message says what to do (start
    Redis, install the extra, correct ``--store``)."""


class StoreURLError(StoreUnavailableError, ConfigError):
    """The store's URL (or key prefix) is bad: a bad setting, so a
    :class:`~reel_core.ConfigError` too, the user corrects ``--store``."""


class OnDemandLines(LineSource, Protocol):
    """A cassette's bytes read on demand (:meth:`Store.lines`): a
    :class:`~reel_core.LineSource`, handed over in pieces to index it."""

    def pieces(self) -> Iterator[tuple[int, bytes]]:
        """The bytes in pieces, each but the last ending with a newline,
        with their offsets (for :meth:`reel_core.Cassette.load_pieces`)."""

    def close(self) -> None:
        """Let go of what it holds open."""


@runtime_checkable
class Store(Protocol):
    """Cassettes by name: read the lines, append one line atomically,
    replace, list, lock.  See the module's documentation for the guarantees."""

    def read(self, name: str) -> bytes | None:
        """Every byte of the cassette, or ``None`` when it does not exist."""

    def append(self, name: str, line: bytes, *, header: bytes = b"") -> bool:
        """Append one whole line atomically; when the cassette is empty,
        ``header`` first.  True when the cassette was empty (the header,
        if any, was written)."""

    def replace(self, name: str, data: bytes) -> None:
        """Make ``data`` the whole cassette, atomically."""

    def rewrite(self, name: str, change: Callable[[bytes], bytes | None]) -> bool:
        """Replace the cassette with ``change(what it holds)``, atomically,
        losing no line appended meanwhile (appended after the new bytes);
        ``change`` returning ``None`` leaves it as it is.  ``change`` may be
        called more than once (with what the cassette holds each time).
        False when the cassette does not exist (``change`` is not called)."""

    def exists(self, name: str) -> bool:
        """Whether the cassette exists (an empty one does)."""

    def list(self, prefix: str = "") -> builtins.list[str]:
        """The names of the cassettes whose names start with ``prefix``, sorted."""

    def lock(self, name: str) -> AbstractContextManager[object]:
        """An exclusive lock on the cassette across processes (not reentrant)."""

    def describe(self, name: str) -> str:
        """The cassette as messages name it (a path, a URL and key)."""

    def check(self) -> None:
        """Make sure the store can be used now (a server store connects):
        :class:`StoreUnavailableError` saying why not."""

    #: Whether :meth:`check` reaches a server: a binding on an event loop
    #: then calls it in a thread (a local store's check must return at once).
    remote: ClassVar[bool] = False

    def lines(self, name: str, at_least: int) -> OnDemandLines | None:
        """The cassette's bytes, read on demand, when it holds ``at_least``
        bytes or more (only its index is then kept in memory); ``None``
        (the default): :meth:`read` it whole."""
        return None

    def file(self, name: str) -> Path | None:
        """The cassette's local file, if it is one (``None``, the default:
        it is not a file)."""
        return None

    def stamp(self, name: str) -> str:
        """What changes whenever the cassette does (the viewer's live
        reload); the default is a digest of its bytes, ``"missing"`` when
        it does not exist."""
        data = self.read(name)
        return "missing" if data is None else hashlib.sha256(data).hexdigest()

    # -- assets: the payloads its lines refer to (see reel_core._assets) --

    def write_asset(self, name: str, digest: str, data: bytes) -> None:
        """Keep ``data`` as asset ``digest`` (its sha256, 64 hex digits) of
        cassette ``name``; one already there whole is left as it is, a
        damaged one is written again."""

    def read_asset(self, name: str, digest: str) -> bytes | None:
        """The bytes of asset ``digest`` of cassette ``name``, ``None`` when missing."""

    def assets(self, name: str) -> builtins.list[str]:
        """The digests of the assets kept for cassette ``name``, sorted."""

    def delete_asset(self, name: str, digest: str) -> None:
        """Remove asset ``digest`` of cassette ``name`` (gone already: nothing)."""

    def describe_asset(self, name: str, digest: str) -> str:
        """Asset ``digest`` of cassette ``name`` as messages name it."""


class StoreFactory(Protocol):
    """Opens the store a URL of its scheme names (nothing connected yet)."""

    def __call__(self, url: str, *, prefix: str | None, compress: bool) -> Store: ...


@dataclass(frozen=True)
class _Scheme:
    factory: StoreFactory
    #: How messages spell a URL of it (``redis://host:port/db``).
    example: str


#: The stores behind a URL, by scheme (lower case), in registration order.
_SCHEMES: dict[str, _Scheme] = {}


def register_store(scheme: str, factory: StoreFactory, *, example: str = "") -> None:
    """Make ``scheme://...`` URLs open the store ``factory`` makes, wherever
    a store is named (``--store``, ``$REEL_STORE``, ``--reel-store``, the
    ``reel_store`` ini option, ``store=``).  ``example`` is how messages
    spell such a URL (default ``scheme://...``).  Registering a scheme again
    replaces it."""
    key = scheme.lower()
    if not re.fullmatch(r"[a-z][a-z0-9+.-]*", key):
        raise ValueError(f"{scheme!r} is not a URL scheme")
    _SCHEMES[key] = _Scheme(factory, example or f"{key}://...")


def store_schemes() -> tuple[str, ...]:
    """The URL schemes a store is registered for."""
    return tuple(_SCHEMES)


def is_store_url(text: str) -> bool:
    """Whether ``text`` names a store behind a URL (a registered scheme)
    rather than a directory.  A URL of another scheme (``reddis://``,
    ``unix://``, ``http://``), or one a slash short (``redis:/:pw@host``),
    is a :class:`StoreURLError` that shows it without its
    credentials, not a directory of that name."""
    scheme, sep, _ = text.partition("://")
    slipped = "@" in text and re.match(r"[A-Za-z][A-Za-z0-9+.-]+:", text)
    if not (sep and re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme)) and not slipped:
        return False
    if not sep or scheme.lower() not in _SCHEMES:
        urls = " or ".join(s.example for s in _SCHEMES.values()) or "store"
        raise StoreURLError(f"unknown store {shown_url(text)}: give a directory, or a {urls} URL")
    return True


def from_url(
    spec: str | os.PathLike[str], *, prefix: str | None = None, compress: bool = False
) -> Store:
    """The store ``spec`` names: a URL of a registered scheme is that
    scheme's store (``prefix`` and ``compress`` are its to use); anything
    else is a directory of files (:class:`FileStore`).  A URL of another
    scheme is refused (:func:`is_store_url`).  Nothing is connected yet:
    :meth:`Store.check` does that."""
    text = os.fspath(spec)
    if is_store_url(text):
        scheme = _SCHEMES[text.partition("://")[0].lower()]
        return scheme.factory(text, prefix=prefix, compress=compress)
    if not text:
        raise StoreURLError("empty store: give a directory or a store URL")
    return FileStore(text)


#: An asset's name in a store: ``sha256-`` and its digest.
_ASSET_NAME = re.compile(r"sha256-([0-9a-f]{64})")


def check_digest(digest: str) -> str:
    """``digest`` if it is an asset's (64 lowercase hex digits)."""
    if not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise ValueError(f"not an asset digest (64 lowercase hex digits): {digest!r}")
    return digest


def assets_dir(cassette: Path) -> Path:
    """The directory of a cassette file's assets, beside it:
    ``chat.jsonl`` -> ``chat.assets`` (another name gets ``.assets`` added)."""
    if cassette.suffix == ".jsonl":
        return cassette.with_suffix(".assets")
    return cassette.with_name(cassette.name + ".assets")


_NAME_PART = re.compile(r"[A-Za-z0-9_\-][A-Za-z0-9._\-]*")


def check_name(name: str) -> str:
    """``name`` if it is a cassette name a store accepts: relative,
    ``/``-separated parts of letters, digits and ``._-``, none starting with
    a dot (no ``..``), at most 255 characters (a proxy's
    ``x-reel-cassette`` name, 200 at most, with ``.jsonl`` added fits).  Else a
    :class:`~reel_core.CassetteError` saying what is wrong."""
    parts = name.split("/")
    if not name or len(name) > 255 or not all(_NAME_PART.fullmatch(p) for p in parts):
        raise CassetteError(
            repr(name[:255]),
            None,
            "bad cassette name: use a relative path of letters, digits, '.', '_', '-' "
            "and '/' (no '..', no absolute path, no empty part), e.g. openai/chat-basic.jsonl",
        )
    return name


# -- the one OS lock ---------------------------------------------------------------

try:
    import fcntl

    def lock_fd(fd: int) -> None:
        """Wait for an exclusive lock on the open file ``fd``."""
        fcntl.flock(fd, fcntl.LOCK_EX)

    def unlock_fd(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)

    _UNLINK_HELD = True

except ImportError:  # pragma: no cover - Windows
    import msvcrt

    def lock_fd(fd: int) -> None:
        """Wait for an exclusive lock on the open file ``fd`` (its first byte)."""
        os.lseek(fd, 0, os.SEEK_SET)
        while True:
            try:  # LK_LOCK gives up after ~10 s: keep waiting
                msvcrt.locking(fd, msvcrt.LK_LOCK, 1)  # type: ignore[attr-defined]
                return
            except OSError:
                continue

    def unlock_fd(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]

    _UNLINK_HELD = False  # Windows cannot remove or replace an open file


def _open_locked(path: str | Path, flags: int) -> tuple[int, os.stat_result]:
    """Open ``path`` (creating it, and its directory) and lock it; the
    descriptor returned is locked and is the file at ``path`` now (with its
    status): a file replaced or removed while we waited (by
    :meth:`FileStore.replace` or a lock's release) is let go and the new
    one opened."""
    while True:
        try:
            fd = os.open(path, flags | os.O_CREAT, 0o644)
        except FileNotFoundError:  # no directory yet
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            continue
        try:
            lock_fd(fd)
            held = os.fstat(fd)
            current = os.stat(path)
        except FileNotFoundError:
            os.close(fd)
            continue
        except BaseException:
            os.close(fd)
            raise
        if (held.st_dev, held.st_ino) == (current.st_dev, current.st_ino):
            return fd, held
        os.close(fd)


def _held_size(fd: int, path: str | Path) -> int | None:
    """The size of the open ``fd`` if it is still the file at ``path``
    (``None``: replaced or removed)."""
    held = os.fstat(fd)
    try:
        current = os.stat(path)
    except FileNotFoundError:
        return None
    if (held.st_dev, held.st_ino) != (current.st_dev, current.st_ino):
        return None
    return held.st_size


def _read_to_end(fd: int, size: int) -> bytes:
    """What ``fd`` holds from where it is to its end: the ``size`` bytes its
    status gave in one read (no buffered reader to build per cassette),
    then whatever a writer other than Reel's, which takes no lock, added
    since."""
    first = os.read(fd, size) if size else b""
    rest = []
    while chunk := os.read(fd, 1 << 16):  # a short first read, or growth
        rest.append(chunk)
    return first + b"".join(rest) if rest else first


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` at once: a temporary file in the same
    directory, flushed to disk, then renamed over it (keeping the file's
    permission bits).  On any failure the original is untouched and the
    temporary file removed."""
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o644
    import tempfile  # writes only: a replay does not load it (nor shutil, bz2, random...)

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".reel-tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class FileLock:
    """``with FileLock(path):`` -- blocks until no other process (or other
    ``FileLock``) holds the lock file ``path``.  The file is removed on
    release, so no lock files are left behind.  Not reentrant."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        if self._fd is not None:
            raise RuntimeError(f"{self.path} is already held by this lock")
        self._fd, _ = _open_locked(self.path, os.O_RDWR)

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if _UNLINK_HELD:
                # Removed while held: a waiter then sees a stale file and retries.
                self.path.unlink(missing_ok=True)
            unlock_fd(fd)
        finally:
            os.close(fd)
        if not _UNLINK_HELD:  # pragma: no cover - Windows
            with contextlib.suppress(OSError):  # open elsewhere: removed later
                self.path.unlink()

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


# -- files -------------------------------------------------------------------------

#: How much of the file is read at a time while indexing it.
PIECE = 1024 * 1024


class FileLines:
    """A cassette file's bytes, read on demand (``os.pread``) from the file
    as it was when opened: the :class:`reel_core.LineSource` of a large
    cassette, so that only its index is in memory (replaying a
    100,000-interaction cassette of 368 MB held the file whole).

    A file rewritten in place since (a shorter one, or other bytes where a
    line was) is noticed: reading a line then raises ``ValueError`` and the
    line is answered as a bad line.  Reel itself never rewrites a cassette
    in place on POSIX (a fresh ``record`` renames a new file in; appends
    only add bytes past the size seen here)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = os.fspath(path)
        fd = os.open(self._path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        self._fd = fd
        self._size = os.fstat(fd).st_size
        self._closer = weakref.finalize(self, os.close, fd)

    def close(self) -> None:
        self._closer()

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, index: slice, /) -> bytes:
        start, stop, _ = index.indices(self._size)
        if stop <= start:
            return b""
        try:
            data = os.pread(self._fd, stop - start, start)
        except OSError as exc:
            raise ValueError(f"cannot read the cassette file again ({exc})") from None
        if len(data) != stop - start:
            raise ValueError(
                "the cassette file was cut short since it was opened (rewritten in place?): "
                "restart to read it again"
            )
        return data

    def find(self, sub: bytes, start: int, end: int, /) -> int:
        at = self[start:end].find(sub)
        return at if at < 0 else start + at

    def startswith(self, prefix: bytes, start: int, end: int, /) -> bool:
        return self[start : min(end, start + len(prefix))] == prefix

    def pieces(self, size: int = PIECE) -> Iterator[tuple[int, bytes]]:
        """The file in pieces of about ``size`` bytes, each but the last
        ending with a newline, with their offsets (for
        :meth:`reel_core.Cassette.load_pieces`).  The bytes after a
        piece's last newline are read again with the next piece rather
        than copied onto it: one copy of the file passes through memory."""
        offset, want = 0, max(size, 1)
        while offset < self._size:
            chunk = os.pread(self._fd, min(want, self._size - offset), offset)
            if not chunk:  # pragma: no cover - cut short while being read
                return
            if offset + len(chunk) >= self._size:
                yield offset, chunk
                return
            cut = chunk.rfind(b"\n") + 1
            if not cut:  # a line longer than a piece: read more of it at once
                want *= 2
                continue
            yield offset, chunk if cut == len(chunk) else chunk[:cut]
            offset, want = offset + cut, max(size, 1)


class FileStore(Store):
    """Cassettes as JSONL files.  With a ``root`` directory, names are
    checked (:func:`check_name`) and must stay inside it (a symbolic link
    leading out is refused too); without one, a name is a file path."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = None if root is None else Path(root)
        #: One appender at a time within this process (the OS lock is per
        #: open file, so threads would also wait; this saves the opens).
        self._thread_lock = threading.Lock()
        #: The file of each name appended to, checked once.
        self._files: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"FileStore({str(self.root)!r})" if self.root is not None else "FileStore()"

    def path(self, name: str) -> Path:
        """The file of cassette ``name``."""
        if self.root is None:
            return Path(name)
        path = self.root / check_name(name)
        try:
            inside = path.resolve().is_relative_to(self.root.resolve())
        except (OSError, RuntimeError):  # a symlink loop
            inside = False
        if not inside:
            raise CassetteError(
                str(path), None, f"the cassette leaves the store's directory {self.root}"
            )
        return path

    def describe(self, name: str) -> str:
        return str(self.path(name))

    def check(self) -> None:
        """Files are always there to write to (a write says what is wrong)."""

    def file(self, name: str) -> Path:
        return self.path(name)

    def lines(self, name: str, at_least: int) -> FileLines | None:
        """The file read on demand (:class:`FileLines`) when it is
        ``at_least`` bytes long; ``None`` for a smaller one, one that
        cannot be opened (its read says why), or where ``os.pread`` is
        missing (Windows)."""
        if not hasattr(os, "pread"):  # pragma: no cover - Windows has no pread
            return None
        path = self.path(name)
        try:
            if path.stat().st_size < at_least:
                return None
            return FileLines(path)
        except OSError:
            return None  # let the store's read say what is wrong

    def stamp(self, name: str) -> str:
        """The file's size and modification time."""
        try:
            st = self.path(name).stat()
        except (OSError, CassetteError):
            return "missing"
        return f"{st.st_size}:{st.st_mtime_ns}"

    def read(self, name: str) -> bytes | None:
        """The file's bytes, read under its lock: another process's line
        being appended is read whole or not at all (read without the lock,
        its first half would look like a torn line)."""
        path = self.path(name)
        while True:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                return None
            try:
                lock_fd(fd)
                try:
                    held = _held_size(fd, path)
                    if held is not None:
                        return _read_to_end(fd, held)
                finally:
                    unlock_fd(fd)
            finally:
                os.close(fd)
            # replaced (or removed) while we waited for the lock: read anew

    def exists(self, name: str) -> bool:
        return self.path(name).exists()

    def append(self, name: str, line: bytes, *, header: bytes = b"") -> bool:
        path = self._files.get(name)
        if path is None:
            path = self._files[name] = str(self.path(name))
        with self._thread_lock:
            fd, status = _open_locked(path, os.O_RDWR | os.O_APPEND)
            try:
                size = status.st_size
                prefix = header if size == 0 else b""
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    prefix = b"\n"  # a torn line from a crash: start afresh
                _write_all(fd, prefix + line)
            finally:
                try:
                    unlock_fd(fd)
                finally:
                    os.close(fd)
        return size == 0

    def replace(self, name: str, data: bytes) -> None:
        self._swap(self.path(name), lambda fd, size: data)

    def rewrite(self, name: str, change: Callable[[bytes], bytes | None]) -> bool:
        path = self.path(name)
        if not path.exists():
            return False
        self._swap(path, lambda fd, size: change(os.pread(fd, size, 0)))
        return True

    def _swap(self, path: Path, new: Callable[[int, int], bytes | None]) -> None:
        """Put ``new(fd, size)`` (given the file's descriptor and size, under
        its lock) in place of the file at ``path``; ``None``: leave it."""
        with self._thread_lock:
            # Held while the new file is renamed in: an appender waiting on
            # the old one finds it replaced and appends to the new one, so
            # none writes between a read and the rename.
            fd, status = _open_locked(path, os.O_RDWR)
            try:
                data = new(fd, status.st_size)
                if data is not None:
                    if _UNLINK_HELD:
                        # the file a link names is rewritten, the link kept:
                        # renamed over the link, the data would leave the file
                        # as it was (a redaction, say, undone where it counts)
                        atomic_write(Path(os.path.realpath(path)), data)
                    else:  # pragma: no cover - Windows: rewritten in place, locked
                        os.ftruncate(fd, 0)
                        os.lseek(fd, 0, os.SEEK_SET)
                        _write_all(fd, data)
            finally:
                try:
                    unlock_fd(fd)
                finally:
                    os.close(fd)

    def list(self, prefix: str = "") -> builtins.list[str]:
        root = self.root if self.root is not None else Path()
        names = []
        for path in root.rglob("*"):
            relative = path.relative_to(root)
            if any(part.startswith(".") for part in relative.parts):
                continue  # hidden files and a write's temporary files
            if path.suffix == ".lock" or not path.is_file():
                continue
            if any(part.endswith(".assets") for part in relative.parts[:-1]):
                continue  # a cassette's assets

            name = relative.as_posix()
            if name.startswith(prefix):
                names.append(name)
        return sorted(names)

    def lock(self, name: str) -> FileLock:
        path = self.path(name)
        return FileLock(path.with_name(path.name + ".lock"))

    def asset_path(self, name: str, digest: str) -> Path:
        """The file of asset ``digest``: ``NAME.assets/sha256-<digest>``."""
        return assets_dir(self.path(name)) / f"sha256-{check_digest(digest)}"

    def write_asset(self, name: str, digest: str, data: bytes) -> None:
        path = self.asset_path(name, digest)
        try:
            if path.stat().st_size == len(data) and path.read_bytes() == data:
                return  # content-addressed: whole already
        except FileNotFoundError:
            pass
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, data)

    def read_asset(self, name: str, digest: str) -> bytes | None:
        try:
            return self.asset_path(name, digest).read_bytes()
        except FileNotFoundError:
            return None

    def assets(self, name: str) -> builtins.list[str]:
        try:
            names = os.listdir(assets_dir(self.path(name)))
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(m.group(1) for m in map(_ASSET_NAME.fullmatch, names) if m is not None)

    def delete_asset(self, name: str, digest: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.asset_path(name, digest).unlink()

    def describe_asset(self, name: str, digest: str) -> str:
        return str(self.asset_path(name, digest))


# -- memory ------------------------------------------------------------------------


class MemoryStore(Store):
    """Cassettes in a dict, for tests (the in-memory twin of
    :class:`FileStore`: the same guarantees, across threads)."""

    def __init__(self, cassettes: dict[str, bytes] | None = None) -> None:
        self._data: dict[str, bytearray] = {
            check_name(name): bytearray(data) for name, data in (cassettes or {}).items()
        }
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._assets: dict[str, dict[str, bytes]] = {}

    def __repr__(self) -> str:
        return f"MemoryStore({len(self._data)} cassettes)"

    def describe(self, name: str) -> str:
        return f"memory:{check_name(name)}"

    def check(self) -> None:
        """Memory is always there."""

    def read(self, name: str) -> bytes | None:
        with self._guard:
            data = self._data.get(check_name(name))
            return None if data is None else bytes(data)

    def exists(self, name: str) -> bool:
        with self._guard:
            return check_name(name) in self._data

    def append(self, name: str, line: bytes, *, header: bytes = b"") -> bool:
        check_name(name)
        with self._guard:
            data = self._data.setdefault(name, bytearray())
            empty = not data
            if empty:
                data += header
            data += line
        return empty

    def replace(self, name: str, data: bytes) -> None:
        check_name(name)
        with self._guard:
            self._data[name] = bytearray(data)

    def rewrite(self, name: str, change: Callable[[bytes], bytes | None]) -> bool:
        check_name(name)
        with self._guard:
            if name not in self._data:
                return False
            new = change(bytes(self._data[name]))
            if new is not None:
                self._data[name] = bytearray(new)
        return True

    def list(self, prefix: str = "") -> builtins.list[str]:
        with self._guard:
            return sorted(name for name in self._data if name.startswith(prefix))

    @contextlib.contextmanager
    def _locked(self, name: str) -> Iterator[None]:
        with self._guard:
            lock = self._locks.setdefault(name, threading.Lock())
        with lock:
            yield

    def lock(self, name: str) -> AbstractContextManager[None]:
        return self._locked(check_name(name))

    def write_asset(self, name: str, digest: str, data: bytes) -> None:
        with self._guard:
            self._assets.setdefault(check_name(name), {})[check_digest(digest)] = data

    def read_asset(self, name: str, digest: str) -> bytes | None:
        with self._guard:
            return self._assets.get(check_name(name), {}).get(check_digest(digest))

    def assets(self, name: str) -> builtins.list[str]:
        with self._guard:
            return sorted(self._assets.get(check_name(name), {}))

    def delete_asset(self, name: str, digest: str) -> None:
        with self._guard:
            self._assets.get(check_name(name), {}).pop(check_digest(digest), None)

    def describe_asset(self, name: str, digest: str) -> str:
        return f"memory:{check_name(name)} sha256-{check_digest(digest)}"
