"""Requests as values.

Wire bindings feed raw bytes to :class:`~reel_core._reader.RequestReader`
(through the session), which builds them with h11; in-process bindings build
a :class:`Request` directly.  Either way the rest of the core sees the same
frozen value.  (The reader is a module of its own so that an in-process
replay, which parses no bytes, does not import h11.)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

from ._errors import RemoteProtocolError

__all__ = [
    "MISS_HEADER",
    "Headers",
    "Limits",
    "Request",
    "header_value",
    "normalize_fields",
    "normalize_headers",
]

Headers = tuple[tuple[bytes, bytes], ...]

#: Headers that describe one hop, never forwarded nor replayed.
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)


#: The header on every answer to a miss, and on no other answer, whatever
#: binding serves it: its value is the missed request's match key.  A tool
#: tells a miss from a real 404 by it (a replayed recording never carries
#: it, even if its line does).
MISS_HEADER = b"x-reel-miss"


def _as_bytes(value: str | bytes) -> bytes:
    if not isinstance(value, str):
        return bytes(value)
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:  # a header typed into a cassette by hand, say
        return value.encode("utf-8", "backslashreplace")


def normalize_headers(headers: Iterable[tuple[str | bytes, str | bytes]]) -> Headers:
    """Headers as a tuple of ``(lowercase name, value)`` byte pairs."""
    return tuple(
        [
            (
                (k if type(k) is bytes else _as_bytes(k)).strip().lower(),
                (v if type(v) is bytes else _as_bytes(v)).strip(),
            )
            for k, v in headers
        ]
    )


def normalize_fields(headers: Iterable[tuple[str | bytes, str | bytes]]) -> Headers:
    """A response's fields as a tuple of ``(lowercase name, value)`` byte
    pairs, each value as it came: an HTTP/2 value may start or end with a
    space (gRPC's ``grpc-message: " no more"``), and a recording keeps it
    (see :mod:`reel_core._fields`; h11 strips an HTTP/1.1 value's padding
    as it reads it)."""
    return tuple(
        [
            (
                (k if type(k) is bytes else _as_bytes(k)).strip().lower(),
                v if type(v) is bytes else _as_bytes(v),
            )
            for k, v in headers
        ]
    )


def header_value(headers: Headers, name: bytes) -> bytes | None:
    """The last value of header ``name`` (lowercase), or ``None``."""
    found = None
    for k, v in headers:
        if k == name:
            found = v
    return found


def _normalize_target(target: str | bytes) -> str:
    text = target.decode("latin-1") if isinstance(target, bytes) else target
    if not text.startswith("/"):
        # absolute-form ("http://host/path?q"), as a client configured to use a
        # proxy sends: keep only the path and query.
        try:
            parts = urlsplit(text)
        except ValueError:  # "http://[x/": a bracketed host that is no IPv6 address
            parts = urlsplit("")
        if not parts.scheme or not parts.netloc:
            raise RemoteProtocolError(f"request target {text!r} is neither a path nor a URL")
        text = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return text


@dataclass(frozen=True, init=False)
class Request:
    """One HTTP request, as the client sent it (credentials included: the
    core never stores headers, and redacts everything else before storing)."""

    method: str
    #: Origin form (``/path?query``); an absolute URL is reduced to it.
    target: str
    #: ``(lowercase name, value)`` byte pairs (any pairs are normalized).
    headers: Headers = ()
    body: bytes = b""

    def __init__(self, method: str, target: str, headers: Headers = (), body: bytes = b"") -> None:
        # The dataclass's own __init__ sets each field, then a
        # __post_init__ sets it again normalized: each field set once here
        # (a request built per in-process play: 2.9 -> 2.0 us).
        set_field = object.__setattr__
        set_field(self, "method", method.upper())
        set_field(self, "target", _normalize_target(target))
        set_field(self, "headers", normalize_headers(headers))
        set_field(self, "body", bytes(body))

    @property
    def path(self) -> str:
        """The target without its query string."""
        return self.target.partition("?")[0]

    @property
    def query(self) -> tuple[tuple[str, str], ...]:
        """The query string as ``(name, value)`` pairs in sent order."""
        query = self.target.partition("?")[2]
        return tuple(parse_qsl(query, keep_blank_values=True)) if query else ()

    def header(self, name: str) -> bytes | None:
        """The last value of header ``name`` (any case), or ``None``."""
        return header_value(self.headers, name.lower().encode("latin-1"))

    @property
    def websocket(self) -> bool:
        """Whether this is a WebSocket upgrade: a ``GET`` with
        ``Upgrade: websocket`` (any case, among other protocols)."""
        upgrade = self.header("upgrade")
        return (
            self.method == "GET"
            and upgrade is not None
            and b"websocket" in (t.strip() for t in upgrade.lower().split(b","))
        )


def parsed_request(method: bytes, target: bytes, headers: Headers, body: bytes) -> Request:
    """The :class:`Request` of a request h11 parsed: its header names
    already lowercased and values stripped (h11 strips them), its body
    joined bytes; equal to ``Request(...)`` of the same values (a test
    checks), without normalizing them a second time."""
    request = object.__new__(Request)
    set_field = object.__setattr__
    set_field(request, "method", method.decode("latin-1").upper())
    set_field(request, "target", _normalize_target(target))
    set_field(request, "headers", headers)
    set_field(request, "body", body)
    return request


@dataclass(frozen=True)
class Limits:
    """Size limits on what a client may send."""

    #: Largest request line plus headers, in bytes (answered with 431).
    max_head: int = 64 * 1024
    #: Largest request body, in bytes (answered with 413); also the most
    #: bytes any body, request or response, is decoded to (recording,
    #: import, ``reel check``): the one decoding limit.
    max_body: int = 32 * 1024 * 1024

    def body_too_large(self, size: int | None, hint: str) -> RemoteProtocolError:
        """The 413 for a body of ``size`` bytes (``None``: not known yet);
        ``hint`` says how to raise the limit (``Hints.max_body``)."""
        of = "" if size is None else f"of {size} bytes is "
        return RemoteProtocolError(
            f"request body {of}over the {self.max_body}-byte limit: {hint}", 413
        )
