"""How bodies are stored, and how encoded request bodies are read.

A stored body is JSON when the bytes are JSON, text when they are UTF-8, and
base64 otherwise.  JSON is stored as a JSON value *and* a ``style`` that
re-serializes it to exactly the bytes received (checked when storing; bytes
no style reproduces are stored as text), so replay stays byte-faithful while
the cassette stays readable and diffable.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import math
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any

from ._decode import StreamDecoder, codings_of, decode_content
from ._errors import ConfigError
from ._nesting import load_json

__all__ = [
    "ContentDecoder",
    "cheap_body",
    "decode_body",
    "decode_request_body",
    "encode_body",
    "parse_json",
]

#: separators per spacing name (indent styles use json's own).
_SPACINGS = ("compact", "spaced", "indent=2", "indent=4")


#: ``json.dumps`` with these settings, without building an encoder per call.
_COMPACT = {a: json.JSONEncoder(separators=(",", ":"), ensure_ascii=a) for a in (False, True)}
_SPACED = {a: json.JSONEncoder(ensure_ascii=a) for a in (False, True)}


def _dumps(value: Any, style: str) -> str:
    spacing, indent, ascii_, newline = _style(style)
    if spacing == "compact":
        text = _COMPACT[ascii_].encode(value)
    elif spacing == "spaced":
        text = _SPACED[ascii_].encode(value)
    else:
        text = _indented(value, " " * indent, ascii_)
    return text + "\n" if newline else text


@functools.lru_cache(maxsize=64)
def _style(style: str) -> tuple[str, int, bool, bool]:
    """A style's spacing, indent, ``ascii`` flag and ``nl`` flag (a replay
    renders a body per request: the few styles in use are read once)."""
    spacing, _, flags = style.partition(",")
    names = flags.split("+")
    indent = 0
    if spacing.startswith("indent="):
        indent = int(spacing[7:])
        if not 0 <= indent <= 64:
            raise ValueError(f"unknown JSON style {style!r}")
        spacing = "indent"
    elif spacing not in ("compact", "spaced"):
        raise ValueError(f"unknown JSON style {style!r}")
    return spacing, indent, "ascii" in names, "nl" in names


class _NotPlainJSON(Exception):
    pass


def _float(value: float) -> str:
    if value != value:
        return "NaN"
    if value == math.inf:
        return "Infinity"
    if value == -math.inf:
        return "-Infinity"
    return float.__repr__(value)


def _indented(value: Any, indent: str, ascii_: bool) -> str:
    """``json.dumps(value, indent=len(indent), ensure_ascii=ascii_)`` for a
    value ``json.loads`` made, two to three times faster: the standard
    library encodes indented JSON with a generator per container, in
    Python (only compact output has a C encoder), and replaying a recorded
    response re-renders its body this way."""
    string = encode_basestring_ascii if ascii_ else encode_basestring
    out: list[str] = []
    add = out.append

    def encode(o: Any, newline: str) -> None:
        if isinstance(o, str):
            add(string(o))
        elif o is None:
            add("null")
        elif o is True:
            add("true")
        elif o is False:
            add("false")
        elif isinstance(o, int):
            add(int.__repr__(o))
        elif isinstance(o, float):
            add(_float(o))
        elif isinstance(o, dict):
            if not o:
                add("{}")
                return
            inner = newline + indent
            separator = "{" + inner
            for key, item in o.items():
                if not isinstance(key, str):
                    raise _NotPlainJSON
                add(separator)
                add(string(key))
                add(": ")
                # strings and ints, most leaves, without a call each
                if type(item) is str:
                    add(string(item))
                elif type(item) is int:
                    add(int.__repr__(item))
                else:
                    encode(item, inner)
                separator = "," + inner
            add(newline + "}")
        elif isinstance(o, list):
            if not o:
                add("[]")
                return
            inner = newline + indent
            separator = "[" + inner
            for item in o:
                add(separator)
                if type(item) is str:
                    add(string(item))
                else:
                    encode(item, inner)
                separator = "," + inner
            add(newline + "]")
        else:
            raise _NotPlainJSON

    try:
        encode(value, "\n")
    except (_NotPlainJSON, RecursionError):
        return json.dumps(value, indent=len(indent), ensure_ascii=ascii_)
    return "".join(out)


def parse_json(data: bytes) -> tuple[bool, Any]:
    """``(True, value)`` when ``data`` is a JSON document, else ``(False, None)``."""
    head = data[:1]
    if head not in (b"{", b"[") and data.lstrip()[:1] not in (b"{", b"["):
        return False, None
    try:
        return True, load_json(data)
    except ValueError:  # not JSON, or nested deeper than Reel reads: kept as text
        return False, None


def _json_style(data: bytes, value: Any) -> str | None:
    """The style that re-serializes ``value`` to exactly ``data``, if any
    (the first in ``_SPACINGS`` order that does)."""
    nl = "nl" if data.endswith(b"\n") else ""
    for spacing in _spacings(data):
        for ascii_ in ("", "ascii") if data.isascii() else ("",):
            flags = "+".join(f for f in (ascii_, nl) if f)
            style = f"{spacing},{flags}" if flags else spacing
            try:
                if _dumps(value, style).encode("utf-8") == data:
                    return style
            except (ValueError, RecursionError):  # pragma: no cover - json.loads output
                return None
    return None


def _spacings(data: bytes) -> tuple[str, ...]:
    """The spacings that can have written ``data``, in ``_SPACINGS`` order.

    Recording tries each style until one writes the body's bytes, and an
    indented render is the costly one (the standard library has no C
    encoder for it): try only the spacings the first bytes allow.  An
    indented style, and no other, puts a newline right after the opening
    bracket of a container that is not empty (a JSON string holds no raw
    newline), then exactly its indent in spaces before the first item,
    which never starts with a space.  An empty container is ``{}`` or
    ``[]`` in every style, and compact, tried first, takes it.  No style
    writes leading whitespace."""
    if data[1:2] != b"\n":
        return _SPACINGS[:2] if data[:1] in (b"{", b"[") else ()
    if data.startswith(b"    ", 2):
        return ("indent=4",)
    return ("indent=2",) if data.startswith(b"  ", 2) else ()


def encode_body(data: bytes) -> dict[str, Any] | None:
    """The stored form of a body: ``{"json": v[, "style": s]}``,
    ``{"text": s}`` or ``{"base64": s}``; ``None`` for an empty body."""
    if not data:
        return None
    is_json, value = parse_json(data)
    if is_json:
        style = _json_style(data, value)
        if style == "compact":
            return {"json": value}
        if style is not None:
            return {"json": value, "style": style}
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def cheap_body(stored: object) -> bytes | None:
    """The bytes of a stored body when making them costs next to nothing
    (``null``, text, base64), or ``None`` for a JSON body, whose bytes are
    rendered by :func:`decode_body` when first needed: a replay never sends
    the recorded request's body, and rendering it cost as much as a third
    of parsing its line.  Raises ``ValueError`` for whatever
    :func:`decode_body` would refuse, a JSON body's style included (the
    value itself came from ``json.loads``: it always renders)."""
    if isinstance(stored, dict) and "json" in stored:
        style = stored.get("style", "compact")
        if not isinstance(style, str):
            raise ValueError("body style must be a string")
        _style(style)  # an unknown style raises
        return None
    return decode_body(stored)


def decode_body(stored: object) -> bytes:
    """The bytes of a stored body (the inverse of :func:`encode_body`).

    Raises ``ValueError`` when ``stored`` is not a stored body.
    """
    if stored is None:
        return b""
    if not isinstance(stored, dict):
        raise ValueError(f"a body must be an object or null, not {type(stored).__name__}")
    if "json" in stored:
        style = stored.get("style", "compact")
        if not isinstance(style, str):
            raise ValueError("body style must be a string")
        return _dumps(stored["json"], style).encode("utf-8")
    if isinstance(stored.get("text"), str):
        return stored["text"].encode("utf-8")  # type: ignore[no-any-return]
    if isinstance(stored.get("base64"), str):
        try:
            return base64.b64decode(stored["base64"], validate=True)
        except binascii.Error as exc:
            raise ValueError(f"bad base64 body: {exc}") from None
    raise ValueError('a body needs one of "json", "text" or "base64"')


class ContentDecoder:
    """Incremental decoder of a ``content-encoding`` value (gzip, deflate,
    br, zstd, or a list of them), for a client reading its own answer: no
    limit.  Storage decodes through :func:`~reel_core._decode.decode_chunks`
    (bounded) instead.

    ``decodes`` is false for identity and for codings this install cannot
    decode: the bytes are then passed through and the header kept.
    """

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding.strip().lower()
        self._codings = codings_of(self.encoding)
        self._stream = StreamDecoder(self._codings)
        self.decodes = self._stream.decodes

    def decode(self, data: bytes) -> bytes:
        """Decode the next chunk.  Raises ``ValueError`` on corrupt data."""
        return self._stream.decode(data) if self.decodes else data

    def decode_whole(self, data: bytes, limit: int) -> bytes:
        """Decode a whole body, never holding more than ``limit`` decoded
        bytes.  Raises ``ValueError`` on corrupt or truncated data and on
        output over ``limit``."""
        if not self.decodes:
            return data
        return decode_content(data, self._codings, limit)

    def flush(self) -> bytes:
        """The end of the body (what is still held: nothing, each chunk's
        output is handed out whole)."""
        return b""


def check_style(style: str) -> None:
    """Raise :class:`ConfigError` for an unknown JSON style."""
    try:
        _dumps(None, style)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def decode_request_body(
    data: bytes, encoding: bytes | None, limit: int
) -> tuple[bytes, str | None, str | None]:
    """A request body as it is stored and keyed: ``(body, encoding, error)``.

    A body sent with a ``content-encoding`` (gzip, deflate, br, or a list of
    them) is decoded, so redaction and matching see what it says; ``encoding``
    is the header's value, normalized.  A body that does not decode is kept
    as sent, with ``error`` saying why.  Identity and an empty body are kept
    as they are, with no encoding."""
    if not data or encoding is None:
        return data, None, None
    codings = codings_of(encoding)
    if not codings:
        return data, None, None
    name = ", ".join(codings)
    try:
        return decode_content(data, name, limit), name, None
    except ValueError as exc:
        return data, name, str(exc)
