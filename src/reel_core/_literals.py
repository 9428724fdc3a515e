"""Literal credentials: the values of the credential headers a request
carried, scrubbed from everything written for its exchange.

Theory of operation
-------------------
Secret *shapes* (``sk-...``, ``AIza...``) are found by :mod:`._redact`.  A
credential with no known shape (an Azure 32-hex key, an opaque gateway
token) is found by its value instead: the client sent it in a header, so
the session knows it.  :func:`credential_values` collects the values of
the credential headers (:data:`CREDENTIAL_HEADERS`, plus names from the
settings); :class:`Literals` turns each value of :data:`MIN_LENGTH` or more
characters into *needles*: the value itself, its URL-encoded forms, its
``\\/`` JSON form, and the stable middle of its base64 encodings (standard
and URL-safe alphabets, at the three byte alignments), so an echo inside a
data URL or a base64 JSON string is found too.  One compiled alternation of
the needles, longest first, finds them all in one scan of a text; each is
replaced by ``[REDACTED:credential]``.

:class:`ExchangeRedactor` is a :class:`~reel_core.Redactor` that first
replaces the literals and then applies the rules of the redactor it wraps.
The session uses one for each request that carries a credential header (a
request without one keeps the plain redactor: it costs nothing), so the
stored request, its match key, the response, the cut detail, error texts
and the targets the bindings log are all scrubbed of the request's values.

A stream is scrubbed over its joined bytes (a value may straddle two
frames) and the result is mapped back onto the frames (:meth:`Literals.frames`):
each frame keeps its offset; a value that starts in one frame is replaced
there, and its bytes in the following frames are dropped, which leaves them
shorter or empty.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import quote_from_bytes

from ._errors import ConfigError
from ._http import Headers
from ._redact import Redactor

__all__ = [
    "CREDENTIAL_HEADERS",
    "MIN_LENGTH",
    "PLACEHOLDER",
    "ExchangeRedactor",
    "Literals",
    "credential_values",
    "exchange_redactor",
    "header_names",
]

#: Request headers whose values are credentials (lower case).
CREDENTIAL_HEADERS = frozenset(
    {
        b"authorization",
        b"proxy-authorization",
        b"api-key",
        b"x-api-key",
        b"x-goog-api-key",
        b"cookie",
    }
)

#: Shorter values are not scrubbed: replacing ``test`` everywhere would
#: change innocent bodies (and such a value is no real secret).
MIN_LENGTH = 8

#: What a literal credential is replaced with.
PLACEHOLDER = "[REDACTED:credential]"
_PLACEHOLDER_BYTES = PLACEHOLDER.encode()
#: What recorders put where a secret was (Ruby VCR's and vcrpy's filters:
#: ``<OPENAI_API_KEY>``, upper case): no secret, so never scrubbed from what
#: is kept.  A real key in angle brackets (``<sk-...>``) still is.
_RECORDER_PLACEHOLDER = re.compile(rb"(?:[A-Za-z][A-Za-z0-9-]* )?<[A-Z][A-Z0-9_]*>")

_AUTHORIZATION = (b"authorization", b"proxy-authorization")
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def header_names(settings: Mapping[str, object]) -> tuple[str, ...]:
    """The further credential header names of a ``redact`` settings object
    (its ``"headers"`` list), lower-cased.  Raises ``ConfigError``
    when the list is not one of header names."""
    names = settings.get("headers", [])
    if not isinstance(names, list) or not all(
        isinstance(n, str) and _HEADER_NAME.fullmatch(n) for n in names
    ):
        raise ConfigError(
            'redact "headers" must be a list of header names, like ["x-gateway-token"]'
        )
    return tuple(n.lower() for n in names)


def _unquote_cookie(value: bytes) -> bytes:
    value = value.strip()
    if len(value) >= 2 and value[:1] == value[-1:] == b'"':
        return value[1:-1]
    return value


def _values_of(name: bytes, value: bytes) -> list[bytes]:
    """The literals one credential header holds."""
    if name == b"cookie":
        out = []
        for part in value.split(b";"):
            _, eq, cookie = part.partition(b"=")
            if eq:
                out.append(_unquote_cookie(cookie))
        return out
    out = [value]
    if name in _AUTHORIZATION:
        scheme, sep, credential = value.partition(b" ")
        credential = credential.strip()
        if sep and credential:
            out.append(credential)
            if scheme.lower() == b"basic":
                try:
                    decoded = base64.b64decode(credential, validate=True)
                except (binascii.Error, ValueError):
                    decoded = b""
                if decoded:
                    out.append(decoded)
                    out.append(decoded.partition(b":")[2])
    return out


def credential_values(
    headers: Headers, names: frozenset[bytes] = CREDENTIAL_HEADERS
) -> tuple[bytes, ...]:
    """The literal credential values ``headers`` carry (headers named in
    ``names``, lower case), each :data:`MIN_LENGTH` characters or more,
    without repeats, longest first.  Empty for most headers, fast."""
    found: list[bytes] = []
    for name, value in headers:
        if name in names:
            found.extend(_values_of(name, value))
    if not found:
        return ()
    # (a value inside the placeholder, "REDACTED", would be found in it again)
    kept = {
        v
        for v in found
        if len(v) >= MIN_LENGTH
        and v not in _PLACEHOLDER_BYTES
        and not _RECORDER_PLACEHOLDER.fullmatch(v)
    }
    return tuple(sorted(kept, key=lambda v: (-len(v), v)))


def _base64_middles(value: bytes) -> set[bytes]:
    """The part of each base64 encoding of ``value`` that depends on
    ``value`` alone, wherever it starts in the encoded bytes: for each of
    the three byte alignments, the encoding without its first group (which
    mixes in the bytes before) and without the last, partial one."""
    middles = set()
    for skip in range(3):
        encoded = base64.b64encode(bytes(skip) + value)
        middle = encoded[4 if skip else 0 : (skip + len(value)) // 3 * 4]
        middles.add(middle)
        middles.add(middle.translate(_URLSAFE))
    return middles


_URLSAFE = bytes.maketrans(b"+/", b"-_")
_PERCENT = re.compile(rb"%[0-9A-F]{2}")


def _needles(value: bytes) -> set[bytes]:
    """The forms of one literal that are scrubbed."""
    needles = {value, *_base64_middles(value)}
    for safe in (b"", b"/"):
        quoted = quote_from_bytes(value, safe=safe).encode("ascii")
        needles.add(quoted)
        needles.add(_PERCENT.sub(lambda m: m.group(0).lower(), quoted))
    if b"/" in value:
        needles.add(value.replace(b"/", b"\\/"))  # "\/" in a JSON string
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:  # a Latin-1 header value: also as UTF-8 text holds it
        needles.add(value.decode("latin-1").encode("utf-8"))
    return needles


def _as_text(value: bytes) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value.decode("latin-1")


@dataclass(frozen=True)
class Literals:
    """The literal credential values of one request, and how to find them.

    ``values`` are the credentials themselves (never shown in the repr).
    """

    values: tuple[bytes, ...] = field(repr=False)
    _bytes: re.Pattern[bytes] = field(init=False, repr=False, compare=False)
    _text: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _probes: tuple[bytes, ...] = field(init=False, repr=False, compare=False)
    _text_probes: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        needles: set[bytes] = set()
        for value in self.values:
            needles |= _needles(value)
        # Longest first: where two needles start at the same place, the
        # longer wins (the whole "Bearer X" over "X").
        ordered = sorted(needles, key=lambda n: (-len(n), n))
        object.__setattr__(self, "_bytes", re.compile(b"|".join(map(re.escape, ordered))))
        text = "|".join(re.escape(_as_text(n)) for n in ordered)
        object.__setattr__(self, "_text", re.compile(text))
        # A text holds a needle only if it holds one of the needles that
        # contain no other: a few substring tests (C speed, ~0.1 ms a MB
        # each) say whether the alternation (~20 ms a MB) needs to run.
        probes = tuple(n for n in ordered if not any(m != n and m in n for m in ordered))
        object.__setattr__(self, "_probes", probes)
        object.__setattr__(self, "_text_probes", tuple(_as_text(n) for n in probes))

    def __bool__(self) -> bool:
        return bool(self.values)

    def occurs(self, *texts: str | bytes) -> bool:
        """Whether any literal (in any of its forms) is in one of ``texts``."""
        for text in texts:
            if isinstance(text, str):
                if any(map(text.__contains__, self._text_probes)):
                    return True
            elif any(map(text.__contains__, self._probes)):
                return True
        return False

    def text(self, text: str, found: list[str] | None = None) -> str:
        """``text`` with every literal replaced by the placeholder."""
        if not self.occurs(text):
            return text
        scrubbed, count = self._text.subn(PLACEHOLDER, text)
        if count and found is not None:
            found.extend(["credential"] * count)
        return scrubbed

    def data(self, data: bytes, found: list[str] | None = None) -> bytes:
        """``data`` (any bytes, UTF-8 or not) with every literal replaced."""
        if not self.occurs(data):
            return data
        scrubbed, count = self._bytes.subn(_PLACEHOLDER_BYTES, data)
        if count and found is not None:
            found.extend(["credential"] * count)
        return scrubbed

    def frames(
        self, frames: Sequence[tuple[float, bytes]], found: list[str] | None = None
    ) -> list[tuple[float, bytes]]:
        """Timed frames scrubbed as one stream: a literal split across
        frames is found.  Each frame keeps its offset; a literal is replaced
        in the frame where it starts, and its bytes in the next frames are
        dropped (they become shorter, or empty).  The frames joined are
        always ``data()`` of the frames joined."""
        joined = b"".join([data for _, data in frames])
        if not self.occurs(joined):
            return list(frames)
        spans = [m.span() for m in self._bytes.finditer(joined)]
        if found is not None:
            found.extend(["credential"] * len(spans))
        out: list[tuple[float, bytes]] = []
        spans.reverse()  # popped from the end: the first span is last
        end = 0
        for at, data in frames:
            start, end = end, end + len(data)
            pieces: list[bytes] = []
            cursor = start
            while spans and spans[-1][0] < end:
                begin, stop = spans[-1]
                if begin >= start:  # starts in this frame: the placeholder goes here
                    pieces.append(joined[cursor:begin])
                    pieces.append(_PLACEHOLDER_BYTES)
                if stop > end:  # goes on into the next frame
                    cursor = end
                    break
                cursor = stop
                spans.pop()
            pieces.append(joined[cursor:end])
            out.append((at, b"".join(pieces)))
        return out


class ExchangeRedactor(Redactor):
    """The redactor of one exchange: replaces the request's literal
    credentials (:class:`Literals`), then applies the rules of ``base``.

    It is a :class:`Redactor` with ``base``'s settings, so everything that
    takes a redactor takes it; ``text``, ``data``, ``query`` and ``keeps``
    (and ``target``, through them) also see the literals.
    """

    base: Redactor
    literals: Literals

    def __init__(self, base: Redactor, literals: Literals) -> None:
        settings = {f.name: getattr(base, f.name) for f in dataclasses.fields(base) if f.init}
        Redactor.__init__(self, **settings)
        object.__setattr__(self, "base", base)
        object.__setattr__(self, "literals", literals)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ExchangeRedactor):
            return NotImplemented
        return (self.base, self.literals) == (other.base, other.literals)

    def __hash__(self) -> int:
        return hash((self.base, self.literals))

    def keeps(self, *texts: str | bytes) -> bool:
        return not self.literals.occurs(*texts) and super().keeps(*texts)

    def text(self, text: str, found: list[str] | None = None) -> str:
        return super().text(self.literals.text(text, found), found)

    def data(self, data: bytes, found: list[str] | None = None) -> bytes:
        return super().data(self.literals.data(data, found), found)

    def query(
        self, pairs: Iterable[tuple[str, str]], found: list[str] | None = None
    ) -> tuple[tuple[str, str], ...]:
        # values go through self.text (or are blanked whole): names need it here
        named = [(self.literals.text(name, found), value) for name, value in pairs]
        return super().query(named, found)


@functools.lru_cache(maxsize=64)
def _exchange(base: Redactor, values: tuple[bytes, ...]) -> ExchangeRedactor:
    """One per redactor and credentials: a client sends the same key with
    every request, so its needles are compiled once."""
    return ExchangeRedactor(base, Literals(values))


def exchange_redactor(
    base: Redactor, headers: Headers, names: frozenset[bytes] = CREDENTIAL_HEADERS
) -> Redactor:
    """The redactor for a request with ``headers``: ``base`` itself when
    they carry no credential (of :data:`MIN_LENGTH` or more characters),
    else an :class:`ExchangeRedactor` that also scrubs their values."""
    values = credential_values(headers, names)
    if not values:
        return base
    if isinstance(base, ExchangeRedactor):  # never wrapped twice
        values = tuple(sorted({*values, *base.literals.values}, key=lambda v: (-len(v), v)))
        base = base.base
    return _exchange(base, values)
