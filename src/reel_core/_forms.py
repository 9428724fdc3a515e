"""Form bodies: ``application/x-www-form-urlencoded`` and ``multipart/form-data``.

Both are stored as sent (redacted); what they mean is read from the bytes
when a request is keyed, redacted or compared:

- a form-urlencoded body is its ``name=value`` fields, in sent order;
- a multipart body is its parts (name, filename, content type, content).
  The boundary is read from the body's first line (every client starts
  there), so a stored line needs no header; it enters neither the key nor
  a diff, so the random boundary a client draws per call never breaks a
  replay.

Redaction applies the query string's name rules (:meth:`Redactor.query`) to
the fields of either kind (a multipart field is a part without a filename),
and the text rules to the content of file parts that are text; the bytes of
the body are otherwise kept as they were sent.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote_plus, unquote_plus

if TYPE_CHECKING:
    from ._redact import Redactor

__all__ = [
    "FORM",
    "MULTIPART",
    "Part",
    "body_kind",
    "canonical_form",
    "canonical_multipart",
    "form_fields",
    "form_value",
    "multipart_value",
    "parse_multipart",
    "redact_form",
    "redact_multipart",
]

FORM = "application/x-www-form-urlencoded"
MULTIPART = "multipart/form-data"

_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def body_kind(content_type: bytes | None, body: bytes) -> str | None:
    """The media type of a request body when Reel reads it as a form
    (:data:`FORM` or :data:`MULTIPART`), else ``None`` (JSON and any other
    body are handled as bytes).  A multipart body must parse, with the
    boundary the header names."""
    if content_type is None or not body:
        return None
    media, _, params = content_type.decode("latin-1").partition(";")
    media = media.strip().lower()
    if media == FORM:
        return FORM if form_fields(body) is not None else None
    if media == MULTIPART:
        parsed = _parse(body)
        if parsed is None or parsed[0] != _boundary_param(params):
            return None
        return MULTIPART
    return None


def _boundary_param(params: str) -> bytes | None:
    for param in params.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "boundary":
            return value.strip().strip('"').encode("latin-1")
    return None


# -- form-urlencoded --------------------------------------------------------------


def _segments(body: bytes) -> list[str] | None:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text.split("&")


def form_fields(body: bytes) -> list[tuple[str, str]] | None:
    """The ``(name, value)`` fields of a form-urlencoded body in sent order
    (empty segments skipped), or ``None`` when it is not UTF-8 text."""
    segments = _segments(body)
    if segments is None:
        return None
    fields = []
    for segment in segments:
        if segment:
            name, _, value = segment.partition("=")
            fields.append((unquote_plus(name), unquote_plus(value)))
    return fields


def redact_form(body: bytes, redactor: Redactor, found: list[str] | None) -> bytes:
    """A form body with secret fields (the query string's name rules) and
    secret shapes in values replaced; every other byte as sent."""
    segments = _segments(body)
    if segments is None:  # pragma: no cover - a body_kind of FORM is UTF-8
        return body
    fields = [(i, *s.partition("=")) for i, s in enumerate(segments) if s]
    pairs = [(unquote_plus(name), unquote_plus(value)) for _, name, _, value in fields]
    redacted = redactor.query(pairs, found)
    for (i, name, sep, _), (_, old), (_, new) in zip(fields, pairs, redacted, strict=True):
        if new != old:
            segments[i] = name + (sep or "=") + quote_plus(new, safe="[]:")
    return "&".join(segments).encode("utf-8")


def _without(fields: Iterable[tuple[str, Any]], drop: frozenset[str]) -> list[tuple[str, Any]]:
    return [(name, value) for name, value in fields if name not in drop]


def canonical_form(body: bytes, drop: frozenset[str]) -> bytes | None:
    """A form body as the key sees it outside exact mode: its fields
    sorted (so their order does not matter), without the fields named in
    ``drop``; ``None`` when it is not a form body."""
    fields = form_fields(body)
    if fields is None:
        return None
    return b"form:" + _COMPACT.encode(sorted(_without(fields, drop))).encode("utf-8")


def _grouped(items: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """Fields by name; a repeated name holds the list of its values."""
    out: dict[str, Any] = {}
    repeated: set[str] = set()
    for name, value in items:
        if name not in out:
            out[name] = value
        elif name in repeated:
            out[name].append(value)
        else:
            out[name] = [out[name], value]
            repeated.add(name)
    return out


def form_value(body: bytes) -> dict[str, Any] | None:
    """A form body as a JSON value to diff (``{name: value}``)."""
    fields = form_fields(body)
    return None if fields is None else _grouped(fields)


# -- multipart/form-data ----------------------------------------------------------

_PARAM = re.compile(r';\s*([A-Za-z0-9_*\-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;]*)')


@dataclass(frozen=True)
class Part:
    """One part of a multipart body: its header block (at ``head``), and
    its content (``start`` to ``end``)."""

    headers: bytes
    name: str
    filename: str | None
    content_type: str | None
    head: int
    start: int
    end: int


def _parse(body: bytes) -> tuple[bytes, list[Part]] | None:
    if not body.startswith(b"--"):
        return None
    line_end = body.find(b"\r\n")
    boundary = body[2:line_end]
    if line_end < 0 or not boundary or len(boundary) > 200:
        return None
    delimiter = b"\r\n--" + boundary
    parts = []
    pos = line_end + 2
    while True:
        head_end = body.find(b"\r\n\r\n", pos)
        if head_end < 0:
            return None
        end = body.find(delimiter, head_end + 2)
        if end < 0:
            return None
        part = _part(body[pos:head_end], pos, head_end + 4, end)
        if part is None:
            return None
        parts.append(part)
        after = end + len(delimiter)
        if body.startswith(b"--", after):
            return boundary, parts
        if not body.startswith(b"\r\n", after):
            return None
        pos = after + 2


def _part(headers: bytes, head: int, start: int, end: int) -> Part | None:
    try:
        text = headers.decode("utf-8")
    except UnicodeDecodeError:
        return None
    name = filename = content_type = None
    for line in text.split("\r\n"):
        field, _, value = line.partition(":")
        field = field.strip().lower()
        if field == "content-disposition":
            params = {k.lower(): _unquote(v.strip()) for k, v in _PARAM.findall(value)}
            name = params.get("name")
            filename = params.get("filename")
        elif field == "content-type":
            content_type = value.strip()
    if name is None:
        return None
    return Part(headers, name, filename, content_type, head, start, end)


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return re.sub(r"\\(.)", r"\1", value[1:-1])
    return value


def parse_multipart(body: bytes) -> list[Part] | None:
    """The parts of a multipart body, or ``None`` when it does not parse."""
    parsed = _parse(body)
    return None if parsed is None else parsed[1]


def _text(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def redact_multipart(body: bytes, redactor: Redactor, found: list[str] | None) -> bytes:
    """A multipart body with its fields redacted like query parameters, the
    part headers and file contents like any body (a binary one's text runs
    too: :meth:`~reel_core.Redactor.data`); the boundary and every other
    byte as sent."""
    parts = parse_multipart(body)
    if parts is None:  # pragma: no cover - a body_kind of MULTIPART parses
        return body
    fields = [
        (part, text)
        for part in parts
        if part.filename is None and (text := _text(body[part.start : part.end])) is not None
    ]
    redacted = dict(
        zip(
            [id(part) for part, _ in fields],
            [v for _, v in redactor.query([(p.name, t) for p, t in fields], found)],
            strict=True,
        )
    )
    out: list[bytes] = []
    pos = 0
    for part in parts:
        out.append(body[pos : part.head])
        out.append(redactor.data(part.headers, found) + b"\r\n\r\n")
        content = body[part.start : part.end]
        if id(part) in redacted:
            content = redacted[id(part)].encode("utf-8")
        else:
            content = redactor.data(content, found)
        out.append(content)
        pos = part.end
    out.append(body[pos:])
    return b"".join(out)


def _digest(data: bytes) -> str:
    return f"{len(data)} bytes, sha256:{hashlib.sha256(data).hexdigest()}"


def canonical_multipart(body: bytes, drop: frozenset[str], *, exact: bool) -> bytes | None:
    """A multipart body as the key sees it, without its boundary: per part
    its name, filename, content type and a digest of its content -- sorted
    by name outside exact mode (parts of one name keep their order), without
    the parts named in ``drop``; in exact mode every part header, as sent,
    in sent order.  ``None`` when it does not parse."""
    parts = parse_multipart(body)
    if parts is None:
        return None
    rows: list[tuple[str, Any]] = []
    for part in parts:
        digest = hashlib.sha256(body[part.start : part.end]).hexdigest()
        if exact:
            rows.append((part.name, [part.headers.decode("utf-8"), digest]))
        else:
            rows.append((part.name, [part.filename, part.content_type, digest]))
    if not exact:
        rows = sorted(_without(rows, drop), key=lambda row: row[0])
    return b"multipart:" + _COMPACT.encode(rows).encode("utf-8")


def _shown(part: Part, content: bytes) -> Any:
    text = _text(content)
    if part.filename is None and part.content_type is None and text is not None:
        return text
    return {
        "filename": part.filename,
        "content_type": part.content_type,
        "body": text if text is not None else _digest(content),
    }


def multipart_value(body: bytes) -> dict[str, Any] | None:
    """A multipart body as a JSON value to diff: ``{name: value}``, a text
    field's value its text, a file part's ``{filename, content_type, body}``
    (a binary body shown by size and SHA-256 digest)."""
    parts = parse_multipart(body)
    if parts is None:
        return None
    return _grouped((p.name, _shown(p, body[p.start : p.end])) for p in parts)
