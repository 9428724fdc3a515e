"""Content codings: which ones this install reads, and the one bounded path
every encoded body is decoded through.

Theory of operation.  A body Reel stores must be one Reel can read: its
redaction, matching, ``reel check`` and the viewer all read the decoded
bytes.  So a binding asks upstream only for the codings this install
decodes (:func:`accept_encoding` rewrites the client's ``accept-encoding``
to them), and every body that arrives encoded anyway (a request body, a
response body, a stream, an imported entry) is decoded by
:func:`decode_chunks`: a generator over ``(tag, bytes)`` chunks that yields
the decoded bytes of each chunk under its tag, and raises
:class:`DecodeError` saying why it cannot (:class:`Failure`: a coding this
install does not read, corrupt or truncated data, or more than ``limit``
decoded bytes).

Decoding is streamed and capped, never done whole and measured after: each
step asks its decompressor for at most :data:`_STEP` bytes (zlib's
``max_length``, brotli's ``output_buffer_limit``; zstd is fed in pieces of
:data:`_ZSTD_PIECE` bytes, whose output a zstd block bounds), and the
output is counted as it comes, so a few hundred kilobytes that inflate to
gigabytes cost at most the limit and one step's output.  A decompressor
that cannot cap its output (a brotli before 1.2) is not one this install
decodes with.
"""

from __future__ import annotations

import enum
import functools
import importlib
import zlib
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

__all__ = [
    "DecodeError",
    "Failure",
    "StreamDecoder",
    "accept_encoding",
    "codings_of",
    "decodable_codings",
    "decode_chunks",
    "decode_content",
]

T = TypeVar("T")

#: The most output one step of a decompressor gives (zlib's ``max_length``,
#: brotli's ``output_buffer_limit``).
_STEP = 1 << 20
#: zstd input is fed this many bytes at a time: a zstd block (at most
#: 128 KiB of output) takes at least 4 bytes, so one step yields at most
#: about 8 MiB whatever the data.
_ZSTD_PIECE = 256

#: What to install for a coding this install does not read.
_INSTALL = {
    "br": "install brotli 1.2 or later: pip install 'reel-llm[brotli]'",
    "zstd": "install zstandard: pip install 'reel-llm[zstd]'",
}


class Failure(enum.Enum):
    """Why a body does not decode."""

    #: A coding this install does not read (zstd without zstandard...).
    UNSUPPORTED = "unsupported"
    #: The data is not what its coding says, or stops before its end.
    CORRUPT = "corrupt"
    #: It decodes to more than the limit.
    TOO_LARGE = "too-large"


class DecodeError(ValueError):
    """A body that does not decode; ``failure`` says why, the message how."""

    def __init__(self, failure: Failure, message: str) -> None:
        super().__init__(message)
        self.failure = failure


class _Stage(Protocol):
    """One coding undone, chunk by chunk."""

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The decoded bytes of ``data``, in pieces of about :data:`_STEP`
        bytes at most (the caller counts them, and stops)."""
        ...

    def end(self) -> None:
        """All data fed: :class:`DecodeError` when it stopped short."""
        ...


def _canonical(coding: str) -> str:
    return "gzip" if coding == "x-gzip" else coding


def codings_of(value: str | bytes | None) -> tuple[str, ...]:
    """The codings a ``content-encoding`` value lists, lower case, in the
    order applied (``identity`` and empty items left out)."""
    if not value:
        return ()
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    return tuple(
        c for c in (item.strip().lower() for item in text.split(",")) if c and c != "identity"
    )


def _import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _brotli() -> Any:
    """The brotli module that can cap its output (``None``: none here)."""
    for name in ("brotli", "brotlicffi"):
        module = _import(name)
        if module is not None and hasattr(module.Decompressor(), "can_accept_more_data"):
            return module
    return None


def _zstd() -> Any:
    """A factory of zstd decompressors (``None``: no zstd here): the
    standard library's ``compression.zstd`` where Python has it, else
    ``zstandard``.  Both decompressors have ``decompress``, ``eof`` and
    ``unused_data``."""
    stdlib = _import("compression.zstd")
    if stdlib is not None:
        return stdlib.ZstdDecompressor
    zstandard = _import("zstandard")
    if zstandard is not None:
        return lambda: zstandard.ZstdDecompressor().decompressobj()
    return None


@functools.cache
def decodable_codings() -> tuple[str, ...]:
    """The codings this install decodes, in the order a binding asks for
    them: gzip and deflate always, br with brotli 1.2 or later (or a
    brotlicffi that caps its output), zstd with ``zstandard`` or the
    standard library's ``compression.zstd``.  Looked up once a process."""
    codings = ["gzip", "deflate"]
    if _brotli() is not None:
        codings.append("br")
    if _zstd() is not None:
        codings.append("zstd")
    return tuple(codings)


def _cannot(coding: str) -> str:
    """Why ``coding`` cannot be decoded here, and what to install."""
    hint = _INSTALL.get(coding, "no Reel decodes it")
    return f"cannot decode content-encoding {coding!r} ({hint})"


@functools.lru_cache(maxsize=64)
def _accept(value: bytes, codings: tuple[str, ...]) -> bytes:
    kept: list[bytes] = []
    star = None
    for item in value.split(b","):
        name = item.split(b";", 1)[0].strip().lower()
        if name == b"*":
            star = item.strip()
        elif name == b"identity" or _canonical(name.decode("latin-1")) in codings:
            kept.append(item.strip())
    if star is not None:  # any coding: the ones decoded here, with its weight
        weight = star[1:]
        named = {k.split(b";", 1)[0].strip().lower() for k in kept}
        kept += [c.encode() + weight for c in codings if c.encode() not in named]
    return b", ".join(kept) if kept else b"identity"


def accept_encoding(value: bytes) -> bytes:
    """The ``accept-encoding`` a binding sends upstream for a client's
    ``value``: the codings the client accepts that this install decodes
    (weights kept; ``*`` becomes those codings), else ``identity``.  (No
    header stays no header: the upstream then sends none.)  The client can
    read whatever comes back: it asked for it."""
    return _accept(value, decodable_codings())


# -- the stages ------------------------------------------------------------------------


class _Zlib:
    """gzip (its members one after the other) or deflate (zlib-wrapped as
    the spec says, or raw as some servers send it)."""

    def __init__(self, coding: str) -> None:
        self._coding = coding
        self._reader: Any = None

    def _new(self, data: bytes) -> Any:
        if self._coding == "gzip":
            return zlib.decompressobj(zlib.MAX_WBITS | 16)
        zlib_header = data[0] & 0x0F == 8 and (len(data) < 2 or (data[0] << 8 | data[1]) % 31 == 0)
        return zlib.decompressobj(zlib.MAX_WBITS if zlib_header else -zlib.MAX_WBITS)

    def feed(self, data: bytes) -> Iterator[bytes]:
        while data:
            if self._reader is None:
                self._reader = self._new(data)
            elif self._reader.eof:
                if self._coding == "deflate":
                    raise _corrupt(self._coding, "bytes after its end")
                self._reader = self._new(data)  # another gzip member
            while True:
                try:
                    out = self._reader.decompress(data, _STEP)
                except zlib.error as exc:
                    raise _corrupt(self._coding, str(exc)) from None
                if out:
                    yield out
                if self._reader.eof:
                    data = self._reader.unused_data
                    break
                data = self._reader.unconsumed_tail
                if not data and len(out) < _STEP:
                    return  # all taken, all given: a full step may leave output in zlib

    def end(self) -> None:
        if self._reader is not None and not self._reader.eof:
            raise DecodeError(Failure.CORRUPT, f"truncated {self._coding} body")


class _Brotli:
    def __init__(self, module: Any) -> None:
        self._reader = module.Decompressor()
        self._fed = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        if not data:
            return
        self._fed = True
        try:
            out = self._reader.process(data, output_buffer_limit=_STEP)
            while True:
                if out:
                    yield out
                if self._reader.can_accept_more_data():
                    return
                out = self._reader.process(b"", output_buffer_limit=_STEP)
        except Exception as exc:  # brotli raises its own error type
            raise _corrupt("br", str(exc)) from None

    def end(self) -> None:
        if self._fed and not self._reader.is_finished():
            raise DecodeError(Failure.CORRUPT, "truncated br body")


class _Zstd:
    """zstd frames one after the other, fed in small pieces (a decompressor
    of ``zstandard`` cannot cap its output otherwise)."""

    def __init__(self, new: Any) -> None:
        self._new = new
        self._reader: Any = None

    def feed(self, data: bytes) -> Iterator[bytes]:
        view = memoryview(data)
        for start in range(0, len(view), _ZSTD_PIECE):
            piece: bytes | memoryview = view[start : start + _ZSTD_PIECE]
            while piece:
                if self._reader is None or self._reader.eof:
                    self._reader = self._new()  # the first frame, or the next
                try:
                    out = self._reader.decompress(piece)
                except Exception as exc:  # zstandard and the stdlib have their own
                    raise _corrupt("zstd", str(exc)) from None
                if out:
                    yield out
                piece = self._reader.unused_data if self._reader.eof else b""

    def end(self) -> None:
        if self._reader is not None and not self._reader.eof:
            raise DecodeError(Failure.CORRUPT, "truncated zstd body")


def _corrupt(coding: str, detail: str) -> DecodeError:
    return DecodeError(Failure.CORRUPT, f"corrupt {coding} body: {detail}")


def _stage(coding: str) -> _Stage | None:
    """A fresh decoder of ``coding``, or ``None`` when this install has none."""
    coding = _canonical(coding)
    if coding in ("gzip", "deflate"):
        return _Zlib(coding)
    if coding == "br":
        module = _brotli()
        return None if module is None else _Brotli(module)
    if coding == "zstd":
        new = _zstd()
        return None if new is None else _Zstd(new)
    return None


# -- the one path ----------------------------------------------------------------------


def _undo(
    chunks: Iterable[tuple[T, bytes]], stage: _Stage, coding: str, limit: int
) -> Iterator[tuple[T, bytes]]:
    size = 0
    for tag, data in chunks:
        for out in stage.feed(data):
            size += len(out)
            if size > limit:
                raise DecodeError(
                    Failure.TOO_LARGE, f"{_canonical(coding)} body decodes to over {limit} bytes"
                )
            yield tag, out
    stage.end()


def decode_chunks(
    chunks: Iterable[tuple[T, bytes]], codings: Sequence[str], limit: int
) -> Iterator[tuple[T, bytes]]:
    """The decoded bytes of ``chunks`` (``(tag, bytes)`` in the order they
    came), each under the tag of the chunk that completed it, undoing
    ``codings`` (as :func:`codings_of` lists them: the last applied is
    undone first), never more than ``limit`` bytes at any step.  Raises
    :class:`DecodeError` as it goes: before anything for a coding this
    install does not read.  No codings: the chunks themselves, not copied."""
    out: Iterable[tuple[T, bytes]] = chunks
    for coding in reversed(codings):
        stage = _stage(coding)
        if stage is None:
            raise DecodeError(Failure.UNSUPPORTED, _cannot(coding))
        out = _undo(out, stage, coding, limit)
    yield from out


def decode_content(data: bytes, encoding: str | Sequence[str], limit: int) -> bytes:
    """``data`` decoded from a ``content-encoding`` value (or the codings
    :func:`codings_of` read from one), at most ``limit`` bytes; raises
    :class:`DecodeError` saying why it cannot."""
    codings = codings_of(encoding) if isinstance(encoding, str) else encoding
    if not codings:
        return data
    return b"".join([out for _, out in decode_chunks([(None, data)], codings, limit)])


class StreamDecoder:
    """One body decoded chunk by chunk as it is read (``decode``, then
    ``flush``), with no limit: what a client reading its own answer gets
    (the requests adapter hands it so).  Storage never goes this way."""

    def __init__(self, codings: Sequence[str]) -> None:
        self._stages = [s for s in (_stage(c) for c in reversed(codings)) if s is not None]
        #: Whether it decodes (else it passes the bytes through).
        self.decodes = bool(codings) and len(self._stages) == len(codings)
        if not self.decodes:
            self._stages = []

    def decode(self, data: bytes) -> bytes:
        """The decoded bytes of the next chunk: ``DecodeError`` on corrupt data."""
        pieces = [data]
        for stage in self._stages:
            pieces = [out for piece in pieces for out in stage.feed(piece)]
        return b"".join(pieces)
