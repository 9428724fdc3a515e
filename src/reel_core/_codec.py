"""The cassette codec: JSON lines (bytes) <-> values, and nothing else.

Pure functions, no state: an :class:`~reel_core._interaction.Interaction`
to its line and back (written and read beside the values, in
:mod:`reel_core._interaction`; re-exported here), the ``_meta`` line to a
:class:`~reel_core._meta.CassetteMeta` and back (:mod:`reel_core._meta`),
and :func:`decode_cassette`, which reads a whole file into the lines a
:class:`~reel_core._cassette.Cassette` files (its ``_meta`` line read, a
byte order mark skipped, bad lines refused or skipped with a warning, a
torn last line named so).  Every reader of cassettes (the ``reel`` commands
too) decides through these functions what a line says and what is wrong
with it.  :func:`decode_lines` reads every line, parsed, bad ones kept
with their error: the ``reel`` commands' reader.

A line written by Reel starts with its match key::

    {"key":"sha256:<64 hex>","id":...,"request":{...},"response":{...},...}

so :func:`scan_keyed` finds lines and their keys without parsing any body;
a line is parsed the first time it is used.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from ._assets import AssetSource, join_line
from ._errors import CassetteError, SchemaVersionError
from ._interaction import Interaction, format_timestamp, interaction_from_json, interaction_line
from ._meta import CassetteMeta, meta_from_json, meta_line, read_meta_line
from ._nesting import LINE_DEPTH, load_json

__all__ = [
    "KEY_PREFIX",
    "CassetteWarning",
    "DecodedLine",
    "DecodedLines",
    "Head",
    "KeyedRun",
    "ParsedLine",
    "decode_cassette",
    "decode_head",
    "decode_lines",
    "decode_parts",
    "encoding_problem",
    "format_timestamp",
    "interaction_from_json",
    "interaction_line",
    "is_meta_line",
    "meta_from_json",
    "meta_line",
    "not_a_cassette",
    "read_line",
    "scan_keyed",
    "torn_note",
]

_BOM = b"\xef\xbb\xbf"
#: How every line Reel writes starts.
KEY_PREFIX = b'{"key":"sha256:'
_KEY_END = len(KEY_PREFIX) + 64  # index of the quote closing the key
#: The start of a line written by Reel: its key, then the next field.
_KEY_LINE = re.compile(rb'\{"key":"sha256:[0-9a-f]{64}"')
#: A line of Reel's ending, and the next starting: ``}``, newline, the key.
_JOINT = b"}\n" + KEY_PREFIX
#: ``sha256:<64 hex>"`` of a line matching ``_KEY_LINE`` (its head), with its
#: hex digits turned into "0" by ``_HEX_AS_ZERO``: only a head reads so.
_HEX_AS_ZERO = bytes.maketrans(b"123456789abcdef", b"0" * 15)
_ZEROED_HEAD = b"sha256:".translate(_HEX_AS_ZERO) + b"0" * 64 + b'"'


class CassetteWarning(UserWarning):
    """A tolerant load skipped a line it could not read."""


def encoding_problem(data: bytes) -> str | None:
    """Why ``data`` (a whole file) cannot be a cassette's UTF-8, from its
    first bytes: another Unicode encoding, a compressed or binary file.
    ``None`` when it may be UTF-8 (each line's bytes are checked when read)."""
    head = data[:64]
    if head.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):
        return "this file is UTF-32, not UTF-8: re-save it as UTF-8"
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "this file is UTF-16, not UTF-8: re-save it as UTF-8"
    if head.startswith(b"\x1f\x8b"):
        return "this file is gzip-compressed, not UTF-8 text: decompress it (gunzip) first"
    if b"\x00" in head:
        half = len(head) // 2
        if half and (head[0::2].count(0) >= half or head[1::2].count(0) >= half):
            return "this file is UTF-16, not UTF-8: re-save it as UTF-8"
        return "this file holds NUL bytes: a binary file, not UTF-8 JSON lines"
    return None


def torn_note(reason: str) -> str:
    """What to add to ``reason``, why the last line of a file is bad: a line
    that is not JSON there is most likely a write cut short."""
    return " (a torn last line: a write cut short)" if reason.startswith("not a JSON") else ""


def not_a_cassette(has_meta: bool, read: int, bad: Sequence[tuple[int, bytes, str]]) -> str | None:
    """Why a file is no cassette at all, or ``None``: it has no ``_meta``
    line, no line is an interaction (``read`` is how many are), and no bad
    line (``(number, raw, reason)``) starts like a line of Reel's (a torn
    one, say).  Every reader of cassettes decides so."""
    if has_meta or read or not bad:
        return None
    if any(raw.lstrip(b"\xef\xbb\xbf \t").startswith(KEY_PREFIX) for _, raw, _ in bad):
        return None
    number, _, reason = bad[0]
    return f"not a Reel cassette: no line is an interaction (line {number}: {reason})"


def read_line(raw: bytes, assets: AssetSource | None = None) -> Interaction:
    """Parse one interaction line, its assets put back from ``assets``
    (see :mod:`reel_core._assets`); ``ValueError`` says what is wrong (what
    every reader of cassettes reports for a bad line, a missing or corrupt
    asset included)."""
    try:
        obj = load_json(raw, limit=LINE_DEPTH)
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"not UTF-8 at byte {exc.start + 1} of the line (0x{raw[exc.start]:02x}): "
            "re-save the file as UTF-8"
        ) from None
    except ValueError as exc:
        raise ValueError(f"not a JSON line ({exc})") from None
    if isinstance(obj, dict) and "_meta" in obj:
        raise ValueError("a _meta line must be the first line")
    if isinstance(obj, dict) and "assets" in obj:
        join_line(obj, assets)
    return interaction_from_json(obj)


def is_meta_line(raw: bytes) -> bool:
    """Whether ``raw``, the first line of a cassette, is its ``_meta`` line:
    an object naming ``"_meta"`` near its start, however it was formatted
    (every reader of cassettes, ``reel validate`` included, decides so)."""
    return raw.lstrip(b"\xef\xbb\xbf \t").startswith(b"{") and b'"_meta"' in raw[:64]


# -- a whole file -------------------------------------------------------------


class KeyedRun(NamedTuple):
    """Lines of Reel's, not parsed: ``source[starts[i]:ends[i]]`` with key
    ``keys[i]``, numbered from ``number`` in their file.  ``source`` is the
    piece of the file they were found in, which starts ``origin`` bytes
    into the file (0 for a whole file)."""

    source: bytes
    starts: list[int]
    ends: list[int]
    keys: list[str]
    number: int
    origin: int = 0


class ParsedLine(NamedTuple):
    """A line that needed parsing to be read (not written by Reel as is)."""

    raw: bytes
    number: int
    interaction: Interaction


def decode_cassette(
    data: bytes, name: str, *, strict: bool = True, assets: AssetSource | None = None
) -> tuple[CassetteMeta | None, list[KeyedRun | ParsedLine]]:
    """The ``_meta`` settings (``None`` without that line) and the lines of
    cassette bytes ``data``, in file order.

    Strict decoding raises :class:`CassetteError` at the first bad line;
    tolerant decoding (``strict=False``) skips bad lines with a
    :class:`CassetteWarning` each (blamed on the caller of the caller: the
    code that loaded the cassette).  A newer schema raises
    :class:`SchemaVersionError` either way, and a file that is no cassette
    at all (:func:`not_a_cassette`) raises :class:`CassetteError`.
    """
    head = decode_head(data, name)
    parts = decode_parts([(0, data)], name, head, strict=strict, stacklevel=4, assets=assets)
    return head.meta, list(parts)


class Head(NamedTuple):
    """What the start of a cassette file says: its ``_meta`` settings
    (``None`` without that line), and where its first interaction line
    starts (``pos``, after the number ``number`` of lines before it)."""

    meta: CassetteMeta | None
    pos: int
    number: int


def decode_head(data: bytes, name: str) -> Head:
    """The :class:`Head` of a cassette whose first bytes (its first line
    whole, at least) are ``data``; :class:`CassetteError` for a file that
    is no UTF-8 text or a bad ``_meta`` line."""
    problem = encoding_problem(data)
    if problem is not None:
        raise CassetteError(name, None, problem)
    # a byte order mark an editor added is skipped, not cut off: no copy
    pos = len(_BOM) if data.startswith(_BOM) else 0
    first_end = data.find(b"\n", pos)
    if first_end < 0:
        first_end = len(data)
    if not is_meta_line(data[pos:first_end]):
        return Head(None, pos, 0)
    return Head(read_meta_line(data[pos:first_end], name), first_end + 1, 1)


def decode_parts(
    pieces: Iterable[tuple[int, bytes]],
    name: str,
    head: Head,
    *,
    strict: bool = True,
    stacklevel: int = 3,
    assets: AssetSource | None = None,
) -> Iterator[KeyedRun | ParsedLine]:
    """The lines of a cassette handed over in pieces, as they are found, so
    that a large file need never be in memory whole: ``(offset, piece)``
    in file order, each piece but the last ending with a newline (a line
    is never split between two), the first one read by
    :func:`decode_head` (``head``).  Lines of Reel's are found where they
    lie in their piece (:class:`KeyedRun`, with the piece's offset), so a
    binding can read them again later from the file itself.  Bad lines
    are refused or skipped as :func:`decode_cassette` says, once every
    piece was read."""
    number = head.number  # the number of the line before ``pos``
    read = 0
    skipped: list[tuple[int, bytes, str]] = []
    pos = head.pos
    for origin, data, last in _with_last(pieces):
        size = len(data)
        stop = size if last else size - 1  # a piece's last newline ends its last line
        find = data.find
        # Lines are found where they lie in ``data``: no split, no copy.
        while pos <= stop:
            starts, ends, keys = scan_keyed(data, pos)
            if keys:
                yield KeyedRun(data, starts, ends, keys, number + 1, origin)
                number += len(keys)
                read += len(keys)
                pos = ends[-1] + 1
                continue
            end = find(b"\n", pos)
            if end < 0:
                end = size  # the last line (torn if it is not JSON)
            number += 1
            raw = data[pos:end]
            pos = end + 1
            if not raw.strip():
                continue
            try:
                parsed = read_line(raw, assets)
            except ValueError as exc:
                reason = str(exc) + (torn_note(str(exc)) if last and end == size else "")
                if strict:
                    raise CassetteError(name, number, reason) from None
                skipped.append((number, raw, reason))
                continue
            yield ParsedLine(raw, number, parsed)
            read += 1
        pos = 0
    if skipped:
        junk = not_a_cassette(head.meta is not None, read, skipped)
        if junk is not None:
            raise CassetteError(name, None, junk)
        for number, _, reason in skipped:
            warnings.warn(
                f"{name}:{number}: skipped: {reason}", CassetteWarning, stacklevel=stacklevel
            )


def _with_last(pieces: Iterable[tuple[int, bytes]]) -> Iterator[tuple[int, bytes, bool]]:
    """Each piece, and whether it is the last."""
    previous = None
    for piece in pieces:
        if previous is not None:
            yield *previous, False
        previous = piece
    yield *(previous or (0, b"")), True


def scan_keyed(data: bytes, pos: int) -> tuple[list[int], list[int], list[str]]:
    """The lines Reel wrote from ``pos`` on, up to the first it did not (or
    the end): their starts, ends and keys.

    Reel's line starts with its key (``_KEY_LINE``) and ends with ``}``; a
    JSON line never holds a raw newline, so each ``\\n`` ends a line.  One
    check at each newline covers the lines on both sides of it (``_JOINT``),
    and the keys are checked and decoded for the whole run at once: per
    line, a regex match and a decode cost nearly as much as the whole loop.
    """
    if not data.startswith(KEY_PREFIX, pos):
        return [], [], []
    first = pos
    ends: list[int] = []
    heads: list[bytes] = []
    # bound once: this loop runs once a line
    find, starts_with = data.find, data.startswith
    add_end, add_head = ends.append, heads.append
    while True:
        end = find(b"\n", pos)
        if not starts_with(_JOINT, end - 1):
            break
        add_end(end)
        add_head(data[pos + 8 : pos + _KEY_END + 1])
        pos = end + 1
    # the run's last line, which no line of Reel's follows
    if end < 0:
        end = len(data)
    if data[end - 1] == 0x7D:  # "}"
        add_end(end)
        add_head(data[pos + 8 : pos + _KEY_END + 1])
    starts = [first, *[stop + 1 for stop in ends]]
    starts.pop()  # where the run stopped
    blob = b"".join(heads)
    if blob.translate(_HEX_AS_ZERO) != _ZEROED_HEAD * len(ends):
        # a key that is not one (a hand-edited line): the run stops before it
        good = next(i for i, start in enumerate(starts) if _KEY_LINE.match(data, start) is None)
        del starts[good:], ends[good:]
        blob = blob[: good * len(_ZEROED_HEAD)]  # the heads before it are whole
    keys = blob.decode("ascii").split('"')
    keys.pop()  # the empty string after the last key's quote
    return starts, ends, keys


# -- every line, parsed: what the ``reel`` commands read ---------------------------


class DecodedLine(NamedTuple):
    """One non-blank line after the ``_meta`` line, parsed."""

    #: 1-based line number in the cassette.
    number: int
    raw: bytes
    #: ``None`` when the line is not an interaction ...
    interaction: Interaction | None
    #: ... and then why not.
    error: str | None = None


class DecodedLines(NamedTuple):
    """A whole cassette read line by line (:func:`decode_lines`)."""

    #: The ``_meta`` settings (the defaults without a usable ``_meta`` line).
    meta: CassetteMeta
    lines: list[DecodedLine]
    #: Why the first line is not a usable ``_meta`` line.
    meta_error: str | None
    #: The ``_meta`` line names a schema newer than this Reel reads.
    meta_newer: bool
    #: The cassette has a ``_meta`` line (good or bad).
    has_meta: bool


def decode_lines(
    data: bytes,
    name: str,
    *,
    tolerant_meta: bool = False,
    meta_only: bool = False,
    assets: AssetSource | None = None,
) -> DecodedLines:
    """Every line of cassette bytes ``data``, each parsed, a bad one kept
    with its error (where :func:`decode_cassette` only scans lines Reel
    wrote and skips bad ones).  Raises :class:`CassetteError` when ``data``
    is not UTF-8 text, or is no cassette at all (:func:`not_a_cassette`),
    or (unless ``tolerant_meta``: the defaults then apply and
    ``meta_error`` says why) when its ``_meta`` line is bad.  A newer
    schema's lines, and with ``meta_only`` every line, are not read."""
    problem = encoding_problem(data)
    if problem is not None:
        raise CassetteError(name, None, problem)
    raw_lines = data.removeprefix(_BOM).split(b"\n")
    meta = CassetteMeta()
    meta_error = None
    newer = False
    has_meta = is_meta_line(raw_lines[0])
    if has_meta:
        try:
            meta = meta_from_json(load_json(raw_lines[0]), name)
        except ValueError as exc:
            meta_error = f"the _meta line is not JSON ({exc})"
        except CassetteError as exc:
            meta_error = exc.reason
            newer = isinstance(exc, SchemaVersionError)
        if meta_error is not None and not tolerant_meta:
            raise CassetteError(name, 1, meta_error)
    lines: list[DecodedLine] = []
    if newer or meta_only:
        return DecodedLines(meta, lines, meta_error, newer, has_meta)
    last = len(raw_lines) - 1
    bad: list[tuple[int, bytes, str]] = []
    for i in range(1 if has_meta else 0, len(raw_lines)):
        raw = raw_lines[i]
        if not raw.strip():
            continue
        try:
            lines.append(DecodedLine(i + 1, raw, read_line(raw, assets)))
        except ValueError as exc:
            reason = str(exc) + (torn_note(str(exc)) if i == last else "")
            lines.append(DecodedLine(i + 1, raw, None, reason))
            bad.append((i + 1, raw, reason))
    junk = not_a_cassette(has_meta, len(lines) - len(bad), bad)
    if junk is not None:
        raise CassetteError(name, None, junk)
    return DecodedLines(meta, lines, meta_error, newer, has_meta)
