"""A stored body against its ``content-encoding`` header, for importers.

Recorders often keep a body decoded while its response headers still say
``gzip`` (vcrpy's ``decode_compressed_response``, HAR's ``content.text``).
Replayed as stored, that body would be decoded a second time and fail; so
:func:`settle_encoding` drops a header the body is no longer in (and says
so), and refuses a body that is the encoding's data but broken.
"""

from __future__ import annotations

import zlib

from .._body import ContentDecoder
from .._frames import is_sse_stream

__all__ = ["settle_encoding"]

Pairs = tuple[tuple[str, str], ...]


def _whole(encoding: str, body: bytes) -> None:
    """``ValueError`` when a gzip or deflate ``body`` stops before its end
    (the decoder hands out what it has; an import must not store a part)."""
    wbits = {"gzip": 31, "x-gzip": 31, "deflate": 15}.get(encoding)
    if wbits is None or not body:
        return
    if wbits == 15 and not _looks_encoded("deflate", body):
        wbits = -15  # raw deflate, without the zlib header
    reader = zlib.decompressobj(wbits)
    try:
        reader.decompress(body)
    except zlib.error as exc:  # pragma: no cover - the content decoder refused it first
        raise ValueError(str(exc)) from None
    if not reader.eof:
        raise ValueError(f"the {encoding} data stops before its end")


def _looks_encoded(encoding: str, body: bytes) -> bool:
    """Whether ``body`` starts as data of ``encoding`` does (its magic
    bytes; br has none: then anything that is not UTF-8 text)."""
    if encoding in ("gzip", "x-gzip"):
        return body.startswith(b"\x1f\x8b")
    if encoding == "deflate":
        # a zlib header: compression method 8, header checksum
        return len(body) >= 2 and body[0] & 0x0F == 8 and (body[0] << 8 | body[1]) % 31 == 0
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def settle_encoding(headers: Pairs, body: bytes) -> tuple[Pairs, tuple[str, ...]]:
    """The response headers to record ``body`` with, and notes on what
    changed: a ``content-encoding`` the body is no longer in dropped; an
    SSE body without a content type given one.  ``ValueError`` (its reason)
    for a body in its encoding but corrupt: storing it would replay garbage.
    Header names are lower-case."""
    notes: list[str] = []
    pairs = tuple((k.strip().lower(), v) for k, v in headers)
    encodings = [v.strip().lower() for k, v in pairs if k == "content-encoding"]
    encoding = encodings[-1] if encodings else "identity"
    decoded = body
    if encoding not in ("identity", ""):
        decoder = ContentDecoder(encoding)
        if decoder.decodes:
            try:
                decoded = decoder.decode(body) + decoder.flush()
                _whole(encoding, body)
            except ValueError as exc:
                if _looks_encoded(encoding, body):
                    raise ValueError(
                        f"the body is {encoding}-encoded (content-encoding {encoding}) but "
                        f"corrupt: {exc}; re-record it"
                    ) from None
                pairs = tuple((k, v) for k, v in pairs if k != "content-encoding")
                notes.append(
                    f"content-encoding {encoding} dropped: the body was stored decoded "
                    f"(it is no {encoding} data) and is kept as it is"
                )
        elif body:
            notes.append(f"the body stays {encoding}-encoded: Reel cannot decode {encoding} here")
    if not any(k == "content-type" for k, _ in pairs) and is_sse_stream(decoded):
        pairs = (*pairs, ("content-type", "text/event-stream"))
        notes.append("no content-type: the body is server-sent events, stored as SSE frames")
    return pairs, tuple(notes)
