"""Literal credentials: the values a request carried as credentials,
scrubbed from everything written for its exchange.

Theory of operation
-------------------
Secret *shapes* (``sk-...``, ``AIza...``) are found by :mod:`._redact`.  A
credential with no known shape (an Azure 32-hex key, an opaque gateway
token, a ``?key=``) is found by its value instead: the client sent it, so
the session knows it.  :func:`exchange_redactor` is the one place that
collects the values, for every binding, importer and WebSocket session:
the credential headers' (:func:`credential_values`, :data:`CREDENTIAL_HEADERS`
plus names from the settings), the credential query parameters' and the
credential fields' of the body as read for the recording
(:func:`sent_values`, :func:`body_values`), and what a caller adds (a
WebSocket session's first message's).

:class:`Literals` turns each value of :data:`MIN_LENGTH` or more characters
into *needles*: the value itself, with ``+`` for each space, and the stable
middle of its base64 encodings (standard and URL-safe alphabets, at the
three byte alignments), so an echo inside a data URL or a base64 JSON
string is found too.  The escapes of a value's characters (JSON
``\\uXXXX``, ``%XX``, HTML entities, each in any case and mixed) are not
listed: a text is also searched read back through them (:mod:`._escapes`),
and a match there replaces the escapes it came from, whole.  One compiled
alternation of the needles, longest first, finds them all in one scan of a
text (and of its read-back view); each is replaced by
``[REDACTED:credential]``.

:class:`ExchangeRedactor` is a :class:`~reel_core.Redactor` that first
replaces the literals and then applies the rules of the redactor it wraps.
The session uses one for each request that carries a credential (a
request without one keeps the plain redactor: it costs nothing), so the
stored request, its match key, the response (its header values as their
bytes: :meth:`ExchangeRedactor.header_value`), the cut detail, error texts
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
import contextlib
import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ._body import parse_json
from ._errors import ConfigError
from ._escapes import Escapes
from ._forms import FORM, MULTIPART, form_fields, parse_multipart
from ._http import Headers
from ._redact import _FOLD, Redactor, is_credential_name

__all__ = [
    "CREDENTIAL_HEADERS",
    "MIN_LENGTH",
    "PLACEHOLDER",
    "ExchangeRedactor",
    "Literals",
    "Sent",
    "body_values",
    "credential_values",
    "exchange_redactor",
    "header_names",
    "sent_values",
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
#: Any placeholder Reel writes (``[REDACTED:kind]``, a digest or not): what
#: an imported or re-recorded line holds where a secret was.
_REEL_PLACEHOLDER = re.compile(rb"\[REDACTED:[^\]]*\]")
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


def _kept(found: Iterable[bytes]) -> tuple[bytes, ...]:
    """The values of ``found`` that are scrubbed: :data:`MIN_LENGTH`
    characters or more, without repeats, longest first."""
    # (a placeholder, Reel's or a recorder's, holds no secret: one taken for
    # a value would be found again in every placeholder written)
    kept = {
        v
        for v in found
        if len(v) >= MIN_LENGTH
        and not _REEL_PLACEHOLDER.fullmatch(v)
        and not _RECORDER_PLACEHOLDER.fullmatch(v)
    }
    return tuple(sorted(kept, key=lambda v: (-len(v), v)))


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
    return _kept(found) if found else ()


class Sent(Protocol):
    """What of a request, as read for its recording (a
    :class:`~reel_core.RecordedRequest` not yet redacted), may carry
    credentials besides its headers."""

    @property
    def query(self) -> tuple[tuple[str, str], ...]: ...
    @property
    def body(self) -> bytes: ...
    @property
    def content_type(self) -> str | None: ...


# A body may hold a credential field only if a name a credential's ends in
# is followed by a quote (JSON, a multipart name, JSON inside a JSON string:
# a backslash folds to a quote) or an "=" (a form): a few substring tests
# on the body folded to lower case (C speed, as the redactor's own hints)
# say whether to parse it.
#: ``(a part of names a credential's end in, those ends)``: the ends are
#: looked for only in a body that holds their part.
_NAME_ENDS: tuple[tuple[bytes, tuple[bytes, ...]], ...] = (
    (b"key", (b"key",)),
    (b"token", (b"token",)),
    (b"secret", (b"secret",)),
    (b"pass", (b"password", b"passwd", b"passphrase")),
    (b"authorization", (b"authorization",)),
    (b"credential", (b"credential", b"credentials")),
    (b"sig", (b"sig", b"signature")),
)


#: More occurrences of one name end than this: the body is parsed anyway.
_NAMES_LOOKED_AT = 64


@functools.lru_cache(maxsize=1024)
def _names_credential(name: bytes) -> bool:
    """Whether a field named ``name`` holds a credential (remembered: the
    same few names, ``max_tokens`` say, come with request after request)."""
    return is_credential_name(name.decode("utf-8", "replace"), query=True)


def _may_name(data: bytes, *, form: bool = False) -> bool:
    """False only when ``data`` holds no credential-named field: each name
    a credential's may end in, before a quote (JSON, a multipart name) or
    in a ``form`` an ``=``, is read back to the quote or ``&`` before it
    and asked about (``prompt_cache_key`` and ``max_tokens`` are no
    credentials: the body is not parsed for them)."""
    delimiters = (b"=", b"&") if form else (b'"', b'"')
    folded = data.translate(_FOLD)
    for part, ends in _NAME_ENDS:
        if part not in folded:
            continue
        after, before = delimiters
        for end in ends:
            at = folded.find(end + after)
            for _ in range(_NAMES_LOOKED_AT):
                if at < 0:
                    break
                stop = at + len(end)
                if _names_credential(data[folded.rfind(before, 0, at) + 1 : stop]):
                    return True
                at = folded.find(end + after, stop)
            else:
                return True
    return False


def _named(name: str, fields: tuple[str, ...], *, query: bool = False) -> bool:
    return is_credential_name(name, query=query) or name in fields


def _json_leaves(value: Any, fields: tuple[str, ...]) -> list[str]:
    """The strings under credential-named fields of a JSON value
    (``api_key``, ``{"client_secret": {"value": ...}}``), and of the JSON
    documents its strings hold.  Iterative: no depth is too deep."""
    out: list[str] = []
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        item, inside = stack.pop()
        if isinstance(item, dict):
            stack += ((v, inside or _named(str(k), fields)) for k, v in item.items())
        elif isinstance(item, list):
            stack += ((v, inside) for v in item)
        elif isinstance(item, str):
            if inside:
                out.append(item)
            elif item[:1] in ("{", "[") and _may_name(item.encode("utf-8", "replace")):
                is_json, nested = parse_json(item.encode("utf-8", "surrogatepass"))
                if is_json:
                    stack.append((nested, False))
    return out


def body_values(body: bytes, content_type: str | None, fields: tuple[str, ...] = ()) -> list[str]:
    """The values of the credential fields of a request body (or a
    WebSocket message) read as ``content_type`` says: a form's or a
    multipart body's fields named as query parameters are
    (:func:`~reel_core.is_credential_name`, ``query=True``), a JSON
    document's string values under credential-named fields; ``fields``
    names more (the redaction settings' own)."""
    if not body or not (
        _may_name(body, form=content_type == FORM)
        or any(f.encode("utf-8", "replace") in body for f in fields)
    ):
        return []
    if content_type == FORM:
        pairs = form_fields(body) or []
        return [value for name, value in pairs if _named(name, fields, query=True)]
    if content_type == MULTIPART:
        out = []
        for part in parse_multipart(body) or []:
            if part.filename is None and _named(part.name, fields, query=True):
                out.append(body[part.start : part.end].decode("utf-8", "replace"))
        return out
    is_json, value = parse_json(body)
    return _json_leaves(value, fields) if is_json else []


def sent_values(sent: Sent, fields: tuple[str, ...] = ()) -> tuple[bytes, ...]:
    """The literal credential values a request carries besides its headers:
    its credential query parameters (Gemini's ``?key=``), and the
    credential fields of its body (:func:`body_values`)."""
    found = [value for name, value in sent.query if _named(name, fields, query=True)]
    found += body_values(sent.body, sent.content_type, fields)
    return _kept(v.encode("utf-8", "surrogatepass") for v in found) if found else ()


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


def _needles(value: bytes) -> set[bytes]:
    """The spellings of one literal that are looked for: the value, with
    ``+`` for each space (a form or a query), and the stable middles of its
    base64 encodings.  Escapes of its characters (JSON, percent, HTML) are
    not spelled out: the text is read back instead (:mod:`._escapes`)."""
    needles = {value, *_base64_middles(value)}
    if b" " in value:
        needles.add(value.replace(b" ", b"+"))
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


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` in order, overlapping ones joined."""
    out: list[tuple[int, int]] = []
    for start, stop in sorted(spans):
        if out and start < out[-1][1]:
            out[-1] = (out[-1][0], max(stop, out[-1][1]))
        else:
            out.append((start, stop))
    return out


def _aligned(data: bytes, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The ``spans`` of UTF-8 ``data`` that hold whole characters: a Latin-1
    value's bytes found inside the encoding of other characters are not
    that value (and replacing them would break the text)."""
    size = len(data)
    return [
        (start, stop)
        for start, stop in spans
        if not 0x80 <= data[start] < 0xC0 and (stop == size or not 0x80 <= data[stop] < 0xC0)
    ]


@dataclass(frozen=True)
class Literals:
    """The literal credential values of one request, and how to find them.

    ``values`` are the credentials themselves (never shown in the repr).
    """

    values: tuple[bytes, ...] = field(repr=False)
    _bytes: re.Pattern[bytes] = field(init=False, repr=False, compare=False)
    _escapes: Escapes = field(init=False, repr=False, compare=False)
    _probes: tuple[bytes, ...] = field(init=False, repr=False, compare=False)
    _text_probes: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        needles: set[bytes] = set()
        for value in self.values:
            needles |= _needles(value)
        escapes = Escapes(needles)
        # A value may hold what reads as an escape ("a\\/b", "x%41"): a text
        # that escapes some other character of it is read back with that
        # one decoded too, so the value is also looked for read back.
        needles |= {view.data for view in map(escapes.view, list(needles)) if view is not None}
        # Longest first: where two needles start at the same place, the
        # longer wins (the whole "Bearer X" over "X").
        ordered = sorted(needles, key=lambda n: (-len(n), n))
        object.__setattr__(self, "_bytes", re.compile(b"|".join(map(re.escape, ordered))))
        object.__setattr__(self, "_escapes", escapes)
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
            if self._escapes.occur(text):
                data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
                view = self._escapes.view(data)
                if view is not None and any(map(view.data.__contains__, self._probes)):
                    return True
        return False

    def spans(self, data: bytes) -> list[tuple[int, int]]:
        """Where the literals are in ``data``, in order, none overlapping:
        each as it is or in a spelling :func:`_needles` lists, and each in
        the text read back with the escapes of its characters decoded (a
        span then covers whole escapes)."""
        spans = []
        if any(map(data.__contains__, self._probes)):
            spans = [m.span() for m in self._bytes.finditer(data)]
        view = self._escapes.view(data)
        if view is not None and any(map(view.data.__contains__, self._probes)):
            spans += [view.span(*m.span()) for m in self._bytes.finditer(view.data)]
        return _merged(spans)

    def _replace(self, data: bytes, spans: list[tuple[int, int]]) -> bytes:
        pieces: list[bytes] = []
        cursor = 0
        for start, stop in spans:
            pieces += (data[cursor:start], _PLACEHOLDER_BYTES)
            cursor = stop
        pieces.append(data[cursor:])
        return b"".join(pieces)

    def text(self, text: str, found: list[str] | None = None) -> str:
        """``text`` with every literal replaced by the placeholder."""
        if not self.occurs(text):
            return text
        data = text.encode("utf-8", "surrogatepass")
        spans = _aligned(data, self.spans(data))
        if found is not None:
            found.extend(["credential"] * len(spans))
        return self._replace(data, spans).decode("utf-8", "surrogatepass")

    def data(self, data: bytes, found: list[str] | None = None) -> bytes:
        """``data`` (any bytes, UTF-8 or not) with every literal replaced."""
        if not self.occurs(data):
            return data
        spans = self.spans(data)
        if found is not None:
            found.extend(["credential"] * len(spans))
        return self._replace(data, spans)

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
        spans = self.spans(joined)
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
        # base's settings and what it compiled from them (a function of its
        # settings alone), not compiled again: one is made per cassette
        self.__dict__.update(base.__dict__)
        object.__setattr__(self, "base", base)
        object.__setattr__(self, "literals", literals)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ExchangeRedactor):
            return NotImplemented
        return (self.base, self.literals) == (other.base, other.literals)

    def __hash__(self) -> int:
        return hash((self.base, self.literals))

    def with_salt(self, salt: str | None) -> Redactor:
        if salt is None or self.salt is not None:
            return self
        return ExchangeRedactor(self.base.with_salt(salt), self.literals)

    def keeps(self, *texts: str | bytes) -> bool:
        return not self.literals.occurs(*texts) and super().keeps(*texts)

    def text(self, text: str, found: list[str] | None = None) -> str:
        return super().text(self.literals.text(text, found), found)

    def data(self, data: bytes, found: list[str] | None = None) -> bytes:
        # the base's own: its text rules need not look for the literals again
        return self.base.data(self.literals.data(data, found), found)

    def header_value(self, value: str, found: list[str] | None = None) -> str:
        # a value is its bytes read as Latin-1: scrubbed as those bytes (a
        # line edited by hand may hold more: then as text, by super())
        with contextlib.suppress(UnicodeEncodeError):
            value = self.literals.data(value.encode("latin-1"), found).decode("latin-1")
        return super().header_value(value, found)

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
    return ExchangeRedactor(base, _literals(values))


@functools.lru_cache(maxsize=64)
def _literals(values: tuple[bytes, ...]) -> Literals:
    """One per credentials, whatever the redactor: each cassette has a
    redactor of its own (its salt), and a suite sends one key to all."""
    return Literals(values)


def exchange_redactor(
    base: Redactor,
    headers: Headers,
    names: frozenset[bytes] = CREDENTIAL_HEADERS,
    sent: Sent | None = None,
    *,
    more: Iterable[bytes] = (),
) -> Redactor:
    """The redactor of an exchange, the one place that collects what the
    client sent as credentials: the values of its credential ``headers``
    (named in ``names``), of its credential query parameters and body
    fields (``sent``: the request as read for its recording, not
    redacted; :func:`sent_values`) and ``more`` (a WebSocket session's
    first client message's).  ``base`` itself when there is none (of
    :data:`MIN_LENGTH` or more characters), else an
    :class:`ExchangeRedactor` that also scrubs them, in every form."""
    values = credential_values(headers, names)
    if sent is not None:
        values += sent_values(sent, base.fields)
    values += _kept(more)
    if not values:
        return base
    if isinstance(base, ExchangeRedactor):  # never wrapped twice
        values += base.literals.values
        base = base.base
    return _exchange(base, _kept(values))
