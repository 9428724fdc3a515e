"""What every ``reel`` command shares: reading cassettes line by line,
errors that become exit codes, tables, JSON output and terminal progress.

Exit codes, for every command: 0 success; 1 the command found something
(differences, secrets, bad lines, unconvertible interactions); 2 bad usage or
input that cannot be read.
"""

from __future__ import annotations

import contextvars
import json
import os
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, TypeVar

from reel_core import CassetteError, CassetteMeta, ConfigError, Interaction, Redactor, ReelError
from reel_core.tools import ProtoSchema, decode_lines, is_meta_line, read_line

from .._files import StoreAssets
from .._settings import SettingError, Settings, pii_from_env
from .._store import FileStore, Store
from .._store import atomic_write as replace_file

__all__ = [
    "EXIT_FINDINGS",
    "EXIT_OK",
    "EXIT_USAGE",
    "STORE",
    "CassetteLines",
    "CliError",
    "Line",
    "Progress",
    "assets_of",
    "atomic_write",
    "check_output",
    "env_pii",
    "fmt_ms",
    "fmt_num",
    "fmt_usd",
    "is_meta_line",
    "parse_cassette",
    "parse_line",
    "plural",
    "print_json",
    "read_bytes",
    "read_cassette",
    "redactor_for",
    "split_lines",
    "table",
    "write_output",
]

T = TypeVar("T")

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


class CliError(Exception):
    """A failure the user can fix: printed as ``reel CMD: message``, exit 2."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


#: The store the reading commands read from (``--store``, set by
#: :mod:`._store`); ``None``: files.
STORE: contextvars.ContextVar[Store | None] = contextvars.ContextVar("reel_store", default=None)


def add_proto_option(p: Any) -> None:
    """``--proto-descriptor FILE`` on a command that shows or matches gRPC
    messages: through it they read as JSON (``$REEL_PROTO_DESCRIPTOR``
    when not given)."""
    p.add_argument(
        "--proto-descriptor",
        metavar="FILE",
        help="a descriptor set (protoc --descriptor_set_out=FILE --include_imports): gRPC "
        "messages are shown as JSON through it, else as bytes (default: "
        "$REEL_PROTO_DESCRIPTOR); needs pip install 'reel-llm[grpc]'",
    )


def proto_of(given: str | None, environ: Mapping[str, str] | None = None) -> ProtoSchema | None:
    """The descriptor set ``--proto-descriptor`` (or its variable) names,
    read; a :class:`CliError` (exit 2) naming it when it is none."""
    try:
        settings = Settings.resolve(
            {"proto_descriptor": given},
            environ,
            only=("proto_descriptor",),
            flag_label=lambda name: "--proto-descriptor",
        )
    except SettingError as exc:
        raise CliError(str(exc)) from None
    return settings.proto_descriptor


def assets_of(path: Path) -> StoreAssets:
    """The assets of the cassette ``path`` (in the command's store, else
    beside the file), as the core reads them."""
    store = STORE.get()
    if store is not None:
        return StoreAssets(store, path.as_posix())
    return StoreAssets(FileStore(), str(path))


def read_bytes(path: Path) -> bytes:
    """The bytes of the cassette file ``path`` (read through the store), or
    a :class:`CliError` saying why not."""
    store = STORE.get()  # the --store of the command, if any
    if store is not None:
        try:
            data = store.read(path.as_posix())
        except ReelError as exc:  # a bad name, the server gone
            raise CliError(str(exc)) from None
        if data is None:
            raise CliError(f"{store.describe(path.as_posix())}: no such cassette in the store")
        return data
    try:
        data = FileStore().read(str(path))
    except IsADirectoryError:
        raise CliError(f"{path}: is a directory, not a cassette file") from None
    except OSError as exc:
        raise CliError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if data is None:
        raise CliError(f"{path}: no such file")
    return data


@dataclass
class Line:
    """One non-blank line of a cassette after the ``_meta`` line."""

    #: 1-based line number in the file.
    number: int
    raw: bytes
    interaction: Interaction | None
    #: Why the line is not an interaction (``None`` when it is one).
    error: str | None = None


@dataclass
class CassetteLines:
    """A cassette file read line by line, tolerant of bad lines."""

    path: Path
    meta: CassetteMeta
    lines: list[Line] = field(default_factory=list)
    #: Why the first line is not a usable ``_meta`` line (the defaults are
    #: then in force).
    meta_error: str | None = None
    #: The ``_meta`` line names a schema newer than this Reel reads.
    meta_newer: bool = False
    #: The file has a ``_meta`` line (good or bad).
    has_meta: bool = False

    @property
    def empty(self) -> bool:
        """No ``_meta`` line and no line but blank ones."""
        return not self.has_meta and not self.lines

    @property
    def interactions(self) -> list[Interaction]:
        return [line.interaction for line in self.lines if line.interaction is not None]

    @property
    def bad(self) -> list[Line]:
        return [line for line in self.lines if line.error is not None]


def parse_line(raw: bytes, path: Path | None = None) -> Interaction:
    """Parse one interaction line of cassette ``path``, its assets put
    back; ``ValueError`` says what is wrong (the same checks as
    :meth:`reel_core.Cassette.loads`, a missing or corrupt asset too)."""
    return read_line(raw, None if path is None else assets_of(path))


def split_lines(data: bytes) -> list[bytes]:
    """The ``\\n``-separated lines of ``data``, ends kept (a stray ``\\r``
    stays inside its line): joined, they are ``data`` again."""
    parts = data.split(b"\n")
    out = [p + b"\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def read_cassette(path: Path, *, tolerant_meta: bool = False) -> CassetteLines:
    """Read ``path`` line by line.  Bad interaction lines are kept with
    their error; a bad ``_meta`` line raises :class:`CliError` unless
    ``tolerant_meta`` (then the defaults apply and ``meta_error`` says why)."""
    data = read_bytes(path)
    return parse_cassette(data, path, tolerant_meta=tolerant_meta)


def parse_cassette(
    data: bytes, path: Path, *, tolerant_meta: bool = False, meta_only: bool = False
) -> CassetteLines:
    """:func:`read_cassette` for bytes; ``meta_only`` reads the ``_meta``
    line alone.  The core's :func:`reel_core.decode_lines` reads them; what
    it refuses (not UTF-8, no cassette at all, a bad ``_meta`` line unless
    ``tolerant_meta``) is a :class:`CliError`."""
    try:
        decoded = decode_lines(
            data,
            str(path),
            tolerant_meta=tolerant_meta,
            meta_only=meta_only,
            assets=assets_of(path),
        )
    except CassetteError as exc:
        raise CliError(str(exc)) from None
    return CassetteLines(
        path,
        decoded.meta,
        [Line(line.number, line.raw, line.interaction, line.error) for line in decoded.lines],
        meta_error=decoded.meta_error,
        meta_newer=decoded.meta_newer,
        has_meta=decoded.has_meta,
    )


def env_pii(environ: Mapping[str, str] | None = None) -> bool:
    """Whether PII is redacted: ``REEL_REDACT_PII=0`` (``false``, ``no``,
    ``off``) turns it off."""
    return pii_from_env(environ)


def redactor_for(meta: CassetteMeta, where: Path) -> Redactor:
    """The redactor a cassette's recordings were made with: its ``_meta``
    ``redact`` settings, PII off when they or ``REEL_REDACT_PII=0`` say so."""
    settings = meta.extra.get("redact", {})
    if not isinstance(settings, dict):
        raise CliError(f'{where}:1: "_meta.redact" must be an object')
    pii = bool(settings.get("pii", True)) and env_pii()
    try:
        return Redactor.from_settings({**settings, "pii": pii})
    except ConfigError as exc:
        raise CliError(f'{where}:1: bad "_meta.redact" settings: {exc}') from None


def atomic_write(path: Path, data: bytes) -> None:
    """Replace the cassette file ``path`` with ``data`` at once, through the
    store (:meth:`FileStore.replace`: a temporary file renamed over it under
    the cassette's lock).  On any failure the original is untouched."""
    FileStore().replace(str(path), data)


# -- output files --------------------------------------------------------------
#
# Every command that writes a file other than the cassette it rewrites
# (view, diff --html, export, import, pull) writes it with write_output:
# never over one of its inputs, however the output is spelled (the same
# path, "..", a symbolic or a hard link: the same device and inode), never
# over an existing file without --force, and never through a link -- a
# temporary file in the output's directory is renamed over the name given,
# so a link there is replaced, and what it pointed at is left as it was.


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):  # either is missing (or not a path at all)
        return False


def check_output(out: Path, inputs: Iterable[Path], *, force: bool, what: str = "input") -> None:
    """Refuse (:class:`CliError`) to write ``out`` when it is the same file
    as one of ``inputs`` (the ``what`` it would overwrite), a directory, or
    a file that exists while ``force`` is not given."""
    for path in inputs:
        if _same_file(out, path):
            also = "" if out == path else f" ({out} is the same file)"
            raise CliError(
                f"{path}: the output would overwrite the {what}{also}: name another with -o"
            )
    if out.is_dir():
        raise CliError(f"{out}: is a directory: name a file with -o")
    if (out.exists() or out.is_symlink()) and not force:
        raise CliError(f"{out} exists: pass --force to overwrite it")


def write_output(
    out: Path, data: bytes, inputs: Iterable[Path] = (), *, force: bool, what: str = "input"
) -> None:
    """Write ``data`` to the file ``out`` at once (a temporary file in its
    directory, renamed over it), after :func:`check_output` (asked again
    here: an input may have been linked there since the command started).
    A failure is a :class:`CliError`; the file there before is untouched."""
    check_output(out, inputs, force=force, what=what)
    try:
        replace_file(out, data)
    except OSError as exc:
        raise CliError(f"{out}: cannot write: {exc.strerror or exc}") from None


# -- output ------------------------------------------------------------------


def print_json(value: Any, out: TextIO | None = None) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2), file=out or sys.stdout)


def table(
    headers: Sequence[str], rows: Iterable[Sequence[str]], *, right: Iterable[int] = ()
) -> list[str]:
    """Rows as aligned text lines (columns in ``right`` right-aligned)."""
    body = [list(r) for r in rows]
    widths = [len(h) for h in headers]
    for row in body:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    right_set = set(right)

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.rjust(widths[i]) if i in right_set else cell.ljust(widths[i])
            for i, cell in enumerate(cells)
        ]
        return "  ".join(parts).rstrip()

    return [line(headers), *(line(r) for r in body)]


def plural(n: int, word: str, words: str | None = None) -> str:
    """``1 line``, ``2 lines``."""
    return f"{n} {word if n == 1 else (words or word + 's')}"


def fmt_ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if value < 10 else f"{value:.0f}"


def fmt_num(value: int | None) -> str:
    return "-" if value is None else str(value)


def fmt_usd(value: float | None) -> str:
    """``$0.0000048``; ``?`` when unknown (never 0)."""
    if value is None:
        return "?"
    if value >= 1:
        return f"${value:,.4f}"
    text = f"{value:.8f}".rstrip("0").rstrip(".")
    return "$" + (text if text != "0" or value == 0 else "0.00000001")


class Progress:
    """``[3/40] path`` on stderr, rewritten in place, only when stderr is a
    terminal and the work takes a moment; cleared when done."""

    def __init__(self, total: int, *, stream: TextIO | None = None, delay: float = 0.3) -> None:
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        try:
            tty = self.stream.isatty()
        except (AttributeError, ValueError):
            tty = False
        self.enabled = tty and total > 1
        self._start = time.monotonic()
        self._delay = delay
        self._last = 0.0
        self._shown = False

    def step(self, done: int, label: str) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._start < self._delay or now - self._last < 0.05:
            return
        self._last = now
        self.stream.write(f"\r\x1b[K[{done}/{self.total}] {label}"[:200])
        self.stream.flush()
        self._shown = True

    def done(self) -> None:
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False

    def track(self, items: Sequence[T]) -> Iterator[T]:
        """Iterate ``items`` showing progress; clears the line at the end."""
        try:
            for i, item in enumerate(items):
                self.step(i, str(item[0] if isinstance(item, tuple) else item))
                yield item
        finally:
            self.done()
