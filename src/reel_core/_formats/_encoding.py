"""A stored body against its ``content-encoding`` header, for importers.

Recorders often keep a body decoded while its response headers still say
``gzip`` (vcrpy's ``decode_compressed_response``, HAR's ``content.text``).
Replayed as stored, that body would be decoded a second time and fail; so
:func:`settle_encoding` drops a header the body is no longer in (and says
so), and refuses a body that is the encoding's data but broken.  It decodes
through the one bounded path (:func:`reel_core._decode.decode_content`):
an entry that inflates to gigabytes costs at most the body limit.
"""

from __future__ import annotations

from .._decode import DecodeError, Failure, codings_of, decode_content
from .._frames import is_sse_stream
from .._http import Limits

__all__ = ["settle_encoding"]

Pairs = tuple[tuple[str, str], ...]

#: The bytes a body is decoded to here at most: past them it is evidently
#: in its coding, and recording it decides (under the import's limit).
_PROBE = Limits.max_body


def _looks_encoded(encoding: str, body: bytes) -> bool:
    """Whether ``body`` starts as data of ``encoding`` does (its magic
    bytes; br has none: then anything that is not UTF-8 text)."""
    if encoding in ("gzip", "x-gzip"):
        return body.startswith(b"\x1f\x8b")
    if encoding == "deflate":
        # a zlib header: compression method 8, header checksum
        return len(body) >= 2 and body[0] & 0x0F == 8 and (body[0] << 8 | body[1]) % 31 == 0
    if encoding == "zstd":
        return body.startswith(b"\x28\xb5\x2f\xfd")
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
    A body in a coding this install does not read, or too large decoded,
    keeps its header: recording it says so (and the import skips it).
    Header names are lower-case."""
    notes: list[str] = []
    pairs = tuple((k.strip().lower(), v) for k, v in headers)
    encodings = [v for k, v in pairs if k == "content-encoding"]
    codings = codings_of(encodings[-1] if encodings else None)
    decoded = body
    if codings and body:
        encoding = ", ".join(codings)
        try:
            decoded = decode_content(body, codings, _PROBE)
        except DecodeError as exc:
            if exc.failure is Failure.TOO_LARGE or _looks_encoded(codings[-1], body):
                if exc.failure is Failure.CORRUPT:
                    raise ValueError(
                        f"the body is {encoding}-encoded (content-encoding {encoding}) but "
                        f"corrupt: {exc}; re-record it"
                    ) from None
                decoded = b""  # in its coding (recording it says whether it decodes)
            else:
                pairs = tuple((k, v) for k, v in pairs if k != "content-encoding")
                notes.append(
                    f"content-encoding {encoding} dropped: the body was stored decoded "
                    f"(it is no {encoding} data) and is kept as it is"
                )
    if not any(k == "content-type" for k, _ in pairs) and is_sse_stream(decoded):
        pairs = (*pairs, ("content-type", "text/event-stream"))
        notes.append("no content-type: the body is server-sent events, stored as SSE frames")
    return pairs, tuple(notes)
