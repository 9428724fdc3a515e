"""Redaction: what never reaches a cassette.

Request headers are never stored at all; which response headers are is
:mod:`reel_core._headers`'s rule (their values are scrubbed here, as text).
Bodies, queries and stream frames are scrubbed for secret shapes and
(unless turned off) PII, each replaced by a placeholder naming its kind,
``[REDACTED:openai-key]``.  Placeholders match no pattern, so redaction is
idempotent; it runs before the match key is computed, so a live request
carrying a secret matches its redacted recording.  What is forwarded
upstream is never touched.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from ._body import _dumps, _json_style, parse_json
from ._errors import ConfigError
from ._jsonpath import WILDCARD, JSONPath, parse_path

__all__ = [
    "SECRET_PATTERNS",
    "Redactor",
    "is_credential_name",
]

# No letter, digit or "_" may stand right before a key's prefix: "risk-..."
# holds "sk-" but is a word.
_START = r"(?<![A-Za-z0-9_])"

#: Secret shapes, most specific first: kind -> regular expression.  Each
#: starts at a word boundary and asks for a plausible body: OpenAI and
#: Anthropic keys hold a run of 16 letters and digits and (OpenAI) a digit,
#: which hyphenated words ("sk-assessment-framework-...") do not.
SECRET_PATTERNS: Mapping[str, str] = {
    "anthropic-key": _START + r"sk-ant-(?=[A-Za-z0-9_\-]*?[A-Za-z0-9]{16})[A-Za-z0-9_\-]{16,}",
    "openai-key": (
        _START + r"sk-(?:proj-|svcacct-|admin-)?"
        r"(?=[A-Za-z0-9_\-]*?[A-Za-z0-9]{16})(?=[A-Za-z0-9_\-]*?[0-9])[A-Za-z0-9_\-]{20,}"
    ),
    "google-key": _START + r"AIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])",
    "github-token": (
        _START + r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})(?![A-Za-z0-9_])"
    ),
    "aws-access-key": r"(?<![A-Za-z0-9_])(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}(?![A-Za-z0-9_])",
    "aws-secret-key": (
        r"(?i:aws_?secret_?access_?key|aws_?secret)[\"']?\s*[:=]\s*[\"']?"
        r"(?-i:[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"
    ),
    "slack-token": _START + r"xox[abposr]-(?=[A-Za-z\-]*[0-9])[A-Za-z0-9\-]{10,}",
    "jwt": (r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    # The separator may be URL-encoded (a header dumped into a query string).
    # A token holds a digit: "bearer responsibilities" is prose.
    "bearer-token": (
        _START + r"(?i:bearer)(?:\s+|%20|\+)"
        r"(?=(?:[A-Za-z._~+/\-]|%[0-9A-Fa-f]{2})*[0-9])"
        r"(?:[A-Za-z0-9._~+/\-]|%[0-9A-Fa-f]{2}){16,}=*"
    ),
}

#: Generic top-level domains an e-mail address may end in (besides any two
#: letters, a country code): "via@agent.tool" and "icon@2x.png" are not
#: addresses.
EMAIL_TLDS = (
    "com net org edu gov mil int info biz name pro aero coop museum mobi "
    "io ai app dev cloud email online site tech xyz page blog shop store "
    "systems solutions services company group network digital agency"
)
_TLD = "|".join(sorted(EMAIL_TLDS.split(), key=len, reverse=True))

#: PII shapes, redacted unless turned off (``REEL_REDACT_PII=0``).
PII_PATTERNS: Mapping[str, str] = {
    "email": (
        r"(?<![\w.+%-])[A-Za-z0-9._%+\-]+(?:@|%40)"  # the @ may be URL-encoded
        rf"[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.(?i:{_TLD}|[a-z]{{2}})(?![\w\-]|\.\w)"
    ),
    # Phone numbers, in the shapes people write them.  Not inside a longer
    # run of digit groups (UUIDs, versions, ids): no word character, "+",
    # "-", "/" or "." may touch either end.
    "phone": (
        r"(?<![\w+.\-/])(?:"
        # international: "+", a country code, then two to five groups
        # separated by one space, "-" or "." (the first may be in parentheses):
        # +44 20 7946 0958, +49 30 1234567, +1 (555) 123-4567, +33 1 23 45 67 89
        r"\+[1-9][0-9]{0,2}(?:[ .\-]\(?[0-9]{1,4}\)?|[ ]?\([0-9]{1,4}\))"
        r"(?:[ .\-][0-9]{2,8}){1,4}"
        # an area code in parentheses: (555) 123-4567, (020) 7946 0958
        r"|\([0-9]{2,5}\)[ ]?[0-9]{3,4}[ .\-][0-9]{3,4}"
        # North American, "-" or "." twice, the area code not starting with
        # 0 or 1: 555-123-4567, 555.123.4567 (not 123 456 7890)
        r"|[2-9][0-9]{2}-[0-9]{3}-[0-9]{4}|[2-9][0-9]{2}\.[0-9]{3}\.[0-9]{4}"
        r")(?![\w\-/]|\.[0-9])"
    ),
}

#: A phone number holds 7 to 15 digits (ITU E.164).
_PHONE_DIGITS = range(7, 16)

# -- names of credentials ---------------------------------------------------------

#: Last name segments that make a name a credential on their own:
#: ``password``, ``client_secret``, ``proxy-authorization``, ``apikey``.
_CREDENTIAL_LAST = frozenset(
    {
        "password",
        "passwd",
        "passphrase",
        "secret",
        "authorization",
        "credential",
        "credentials",
        "apikey",
        "accesstoken",
        "authtoken",
        "refreshtoken",
        "idtoken",
        "privatekey",
        "secretkey",
        "clientsecret",
    }
)
#: ``key`` after one of these segments is a credential (``api_key``,
#: ``x-api-key``, ``SecretAccessKey``, ``private_key``); ``sort_key``,
#: ``cache_key`` and ``idempotency_key`` are not.
_KEY_KINDS = frozenset(
    {"api", "access", "secret", "private", "signing", "encryption", "master", "subscription"}
)
#: ``token`` after one of these is a credential (``access_token``,
#: ``refresh_token``, ``id_token``, ``x-auth-token``); ``page_token``,
#: ``eos_token`` and ``next_page_token`` are not.
_TOKEN_KINDS = frozenset(
    {"access", "refresh", "id", "auth", "api", "bearer", "session", "security", "oauth", "bot"}
)
#: Whole query parameter (and form field) names that carry credentials in
#: URLs: Gemini's ``?key=``, ``?token=``, an Azure SAS ``sig``.
_QUERY_CREDENTIALS = frozenset({"key", "token", "sig", "signature"})
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEGMENT_SEPARATORS = re.compile(r"[_\-.\s]+")


def _segments(name: str) -> list[str]:
    """``name`` cut into lower-case words at ``_``, ``-``, ``.``, spaces
    and camelCase boundaries: ``xApiKey`` -> ``["x", "api", "key"]``."""
    return [s.lower() for s in _SEGMENT_SEPARATORS.split(_CAMEL.sub("_", name)) if s]


@functools.lru_cache(maxsize=1024)
def is_credential_name(name: str, *, query: bool = False) -> bool:
    """Whether a JSON field, query parameter or form field named ``name``
    holds a credential: its last name segment (or last two) say so.

    ``api_key``, ``apiKey``, ``x-api-key``, ``aws_secret_access_key``,
    ``client_secret``, ``password``, ``access_token``, ``authorization``
    are; ``token``, ``key``, ``max_tokens``, ``page_token``, ``sort_key``,
    ``cache_key``, ``eos_token``, ``prompt_cache_key`` are not.  In a query
    (``query=True``) the bare names URLs use for credentials count too:
    ``key`` (Gemini), ``token``, ``sig`` and ``signature``.
    """
    if query and name.lower() in _QUERY_CREDENTIALS:
        return True
    words = _segments(name)
    if not words:
        return False
    last = words[-1]
    if last in _CREDENTIAL_LAST:
        return True
    before = words[-2] if len(words) > 1 else ""
    return (last == "key" and before in _KEY_KINDS) or (last == "token" and before in _TOKEN_KINDS)


# A JSON field whose name may be a credential's (its last word is one a
# credential name ends in); is_credential_name decides.  Also JSON escaped
# inside a JSON string: \"api_key\": \"...\".
_NAME_END = r"(?:key|token|secret|password|passwd|passphrase|authorization|credentials?)"
_NAME = rf"[A-Za-z0-9_.\- ]{{0,64}}?{_NAME_END}"
# (A pattern, not compiled here: each Redactor compiles it with its own
# ``fields`` added, so compiling it alone would be wasted.)
_FIELD_VALUE = (
    rf'(?i)("({_NAME})"\s*:\s*")((?:[^"\\]|\\.)*)(")'
    rf'|(\\"({_NAME})\\"\s*:\s*\\")((?:[^"\\]|\\[^"])*)(\\")'
)
#: A placeholder, with or without its digest: ``[REDACTED:kind]``,
#: ``[REDACTED:kind:0123456789ab]``.
PLACEHOLDER = re.compile(r"\[REDACTED:[^\]]*?(?::(?P<digest>[0-9a-f]{12}))?\]")
_SALT = re.compile(r"[0-9a-f]{32}")

# A necessary condition for any built-in pattern to match ASCII text, checked
# before the combined regular expression (which costs ~150 us on a 1 KB chat
# request): every secret shape holds one of _SECRET_LITERALS or a match of one
# of _SECRET_HINTS; the (?i) shapes and every secret field (its name then a
# quote, or a backslash and a quote) hold one of the _FOLDED_HINTS once folded
# by _FOLD (lower case, a backslash read as a quote); an e-mail an "@" (or
# "%40"); a phone number a "+" and a digit, or three digits, a separator and
# three more, which _PHONE_CLASSES turns into "+0" and "000 000".
# Text holding none of them cannot change, and is returned as it is.  Each
# check is a C-speed scan of bytes.  Each regular expression starts with a
# literal, which the engine looks for as a substring; one alternation of all
# the secret hints tried each alternative at every byte (twice as slow), and
# the folded hints are grouped by a part they share, so a request scans for
# the group only (seven scans, not twelve) unless that part is there.
_SECRET_LITERALS = (b"sk-", b"xox", b"eyJ")
_SECRET_HINTS = (
    re.compile(rb"A(?:Iza|KIA|SIA|BIA|CCA)"),
    re.compile(rb"g(?:h[pousr]_|ithub_pat_)"),
)
_FOLD = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ\\", b'abcdefghijklmnopqrstuvwxyz"')
#: ``(a part every hint of the group holds, the group's hints)``.
_FOLDED_HINTS: tuple[tuple[bytes, tuple[bytes, ...]], ...] = (
    (b"secret", (b"aws_secret", b"awssecret", b'secret"')),
    (b"pass", (b'passwd"', b'password"', b'passphrase"')),
    (b"credential", (b'credential"', b'credentials"')),
    (b"bearer", (b"bearer",)),
    (b'key"', (b'key"',)),
    (b'token"', (b'token"',)),
    (b'authorization"', (b'authorization"',)),
)
_PHONE_CLASSES = bytes(
    0x30 if 0x30 <= c <= 0x39 else 0x20 if c in b" .-" else c if c == 0x2B else 0x78
    for c in range(256)
)


#: The non-ASCII characters a case-blind regular expression matches an
#: ASCII letter with (dotted and dotless i, long s, the Kelvin sign), and
#: that letter: a shape's ``(?i)`` part or a field's name may be spelled
#: with one, so the hints read each as its letter.
_FOLDS_TO_ASCII = {"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"}
_FOLDS_UTF8 = tuple((c.encode("utf-8"), a.encode("ascii")) for c, a in _FOLDS_TO_ASCII.items())

# -- windows -------------------------------------------------------------------
#
# A big text is not scanned whole.  Outside a secret field, every built-in
# shape consumes only ASCII letters, digits, _RUN's punctuation and
# whitespace (and the letters of _FOLDS_TO_ASCII, in its case-blind parts),
# and looks at most one character before it and two after it, all of them
# in those runs but the one right before and the one right after.  Any
# other character (a CJK character, a byte no UTF-8 read as a surrogate, a
# brace, a comma) breaks: no match holds it, so it stays where it is pass
# after pass, and every pass of the rules changes each run between two
# breaks on its own, looking at those two only.  A run holding no
# candidate (a literal of _CANDIDATES: what a hint is for a whole text) has
# no match; the others are scanned each with the break either side (a
# window), pass after pass as a whole text is, so the output is the same,
# byte for byte, and so are the kinds found, in the same order.

#: Characters a built-in shape (not a field) may consume: ASCII letters,
#: digits, the punctuation of the shapes, every character ``\s`` is, and
#: the letters of _FOLDS_TO_ASCII.
_RUN = re.compile(
    r"[\t-\r\x1c-\x20\"%'()+\-./0-9:=@A-Z_a-z~"
    r"\x85\xa0\u0130\u0131\u017f\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u212a\u3000]*"
)
#: What to look for in a text, by the hint its bytes hold: where each match
#: of a built-in shape is, something it holds is (a hint found by its
#: bytes is found by its characters, and ``(?i)`` finds a letter of
#: _FOLDS_TO_ASCII as its hint reads it).
_CANDIDATES: Mapping[bytes, re.Pattern[str]] = {
    **{literal: re.compile(literal.decode()) for literal in _SECRET_LITERALS},
    **{hint.pattern: re.compile(hint.pattern.decode()) for hint in _SECRET_HINTS},
    b"aws_secret": re.compile(r"(?i:aws_?secret)"),
    b"awssecret": re.compile(r"(?i:aws_?secret)"),
    b"bearer": re.compile(r"(?i:bearer)"),
    b"@": re.compile("@"),
    b"%40": re.compile("%40"),
    b"+0": re.compile(r"\+[0-9]"),
    b"000 000": re.compile(r"[0-9]{3}[ .\-][0-9]{3}"),
}
#: Texts shorter than this are scanned whole: a window costs more than it saves.
_WINDOWED_FROM = 4096


@dataclass(frozen=True)
class _Scan:
    """How a text is scanned, as the hints its bytes hold tell: whole
    (any rule may match anywhere), or in windows around the candidates
    (none: no rule can match, the text is kept as it is)."""

    whole: bool = False
    candidates: tuple[re.Pattern[str], ...] = ()


_WHOLE = _Scan(whole=True)
_NONE = _Scan()


_BEARER_PREFIX = re.compile(r"(?i:bearer)(?:\s+|%20|\+)")


def _placeholder(kind: str) -> str:
    return f"[REDACTED:{kind}]"


#: What an exchange's redactor puts where a credential value the client
#: sent was (``reel_core._literals.PLACEHOLDER``).
_CREDENTIAL = _placeholder("credential")


def _is_plain_placeholder(value: str) -> bool:
    """Whether ``value`` is one placeholder without a digest (what a
    credential position holds once redacted)."""
    m = PLACEHOLDER.fullmatch(value)
    return m is not None and m.group("digest") is None


@functools.lru_cache(maxsize=4096)
def digest(salt: str, kind: str, value: str) -> str:
    """The 12 hex digits that tell ``value`` apart in a placeholder:
    scrypt (N=2**12, r=8, p=1) of the value under the cassette's salt, 6
    bytes.  Slow on purpose (see docs/redaction.md); cached per
    ``(salt, kind, value)`` so a value repeated in a body or a stream costs
    once."""
    del kind  # the kind is in the placeholder already; it keys the cache only
    return hashlib.scrypt(
        value.encode("utf-8", "surrogatepass"),
        salt=bytes.fromhex(salt),
        n=2**12,
        r=8,
        p=1,
        dklen=6,
    ).hex()


def check_salt(salt: object) -> str:
    """``salt`` if it is a redaction salt (32 lower-case hex digits), else
    :class:`ConfigError` saying what one is."""
    if not isinstance(salt, str) or not _SALT.fullmatch(salt):
        raise ConfigError(
            f'redact "salt" must be 32 lower-case hex digits (secrets.token_hex(16)), not {salt!r}'
        )
    return salt


@dataclass(frozen=True)
class Redactor:
    """Scrubs secrets (always) and PII (unless ``pii=False``) from text.

    ``extra_patterns`` maps kinds to further regular expressions;
    ``fields`` names further JSON fields / query parameters to blank;
    ``paths`` names JSON paths (``metadata.customer``, ``messages[*].name``,
    as in matching) whose values are replaced in JSON bodies.

    ``salt`` (the cassette's, 32 hex digits) turns on digests: a secret or
    PII shape found in content becomes ``[REDACTED:kind:<12 hex>]``, the
    same for the same value, different for different ones, so redaction
    never makes two requests share a match key.  Credential positions (a
    credential-named field or query parameter, ``fields``, ``paths``) never
    carry a digest.  Without a salt every placeholder is plain.
    """

    pii: bool = True
    extra_patterns: Mapping[str, str] = field(default_factory=dict, hash=False)
    fields: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    salt: str | None = None
    _pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _kinds: dict[str, str] = field(init=False, repr=False, compare=False)
    _field: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _hinted: bool = field(init=False, repr=False, compare=False)
    _json_paths: tuple[JSONPath, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))
        object.__setattr__(self, "paths", tuple(self.paths))
        if self.salt is not None:
            check_salt(self.salt)
        object.__setattr__(self, "_json_paths", tuple(parse_path(p) for p in self.paths))
        patterns = dict(SECRET_PATTERNS)
        if self.pii:
            patterns.update(PII_PATTERNS)
        for kind, pattern in self.extra_patterns.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ConfigError(f"bad redaction pattern for {kind!r}: {exc}") from None
            patterns[kind] = pattern
        groups = {kind: f"k{i}" for i, kind in enumerate(patterns)}  # any kind name is fine
        kinds = {group: kind for kind, group in groups.items()}
        joined = "|".join(f"(?P<{groups[k]}>{p})" for k, p in patterns.items())
        object.__setattr__(self, "_pattern", re.compile(joined))
        object.__setattr__(self, "_kinds", kinds)
        names = "|".join(re.escape(f) for f in self.fields)
        extra = rf'|("({names})"\s*:\s*")((?:[^"\\]|\\.)*)(")' if names else ""
        field = re.compile(_FIELD_VALUE + extra, re.IGNORECASE)
        object.__setattr__(self, "_field", field)
        # Hints cover the built-in patterns only.
        object.__setattr__(self, "_hinted", not self.extra_patterns and not self.fields)

    def placeholder(self, kind: str, value: str) -> str:
        """The placeholder for ``value`` of ``kind`` found in content:
        with its digest when the redactor has a salt."""
        if self.salt is None:
            return _placeholder(kind)
        return f"[REDACTED:{kind}:{digest(self.salt, kind, value)}]"

    def _scan(self, text: str | bytes, *, windows: bool = True) -> _Scan:
        """How ``text`` (or the bytes a text was read from) is scanned: not
        at all when no rule can match it (see ``_SECRET_HINTS``), in
        windows when only the built-in shapes can (unless ``windows`` is
        false: then whole on the first hint, which is all a short text
        needs to know)."""
        if not self._hinted:
            return _WHOLE
        if isinstance(text, str):
            data = text.encode("ascii" if text.isascii() else "utf-8", "surrogatepass")
        else:
            data = text
        if not data.isascii():
            for char, letter in _FOLDS_UTF8:
                if char in data:
                    data = data.replace(char, letter)
        # Past ASCII the hints still hold: a character that is not ASCII is
        # part of no literal, and one a case-blind part may match is read
        # as its letter above (which can only add hints).
        hints = [literal for literal in _SECRET_LITERALS if literal in data]
        hints += [hint.pattern for hint in _SECRET_HINTS if hint.search(data)]
        if hints and not windows:
            return _WHOLE
        folded = data.translate(_FOLD)
        for part, group in _FOLDED_HINTS:
            if part in folded:
                for hint in group:
                    if hint in folded:
                        if hint not in _CANDIDATES or not windows:  # a field: any character
                            return _WHOLE
                        hints.append(hint)
        if self.pii:
            hints += [hint for hint in (b"@", b"%40") if hint in data]  # %40: a URL-encoded @
            classes = data.translate(_PHONE_CLASSES)
            hints += [hint for hint in (b"+0", b"000 000") if hint in classes]
        if not hints:
            return _NONE
        return _Scan(candidates=tuple(dict.fromkeys(_CANDIDATES[hint] for hint in hints)))

    def keeps(self, *texts: str | bytes) -> bool:
        """True only when redacting each of ``texts`` provably changes
        nothing (the hints below say no built-in pattern can match): the
        caller may then skip redaction and keep what it has."""
        if self._json_paths:
            return False
        # One scan of them all: joining can only add hints, never hide one.
        parts = [t.encode("utf-8", "surrogatepass") if isinstance(t, str) else t for t in texts]
        return self._scan(b"\n".join(parts), windows=False) is _NONE

    @classmethod
    def from_settings(cls, settings: Mapping[str, object], *, pii: bool | None = None) -> Redactor:
        """A redactor from a cassette ``_meta`` ``redact`` object:
        ``{"pii": bool, "patterns": {kind: regex}, "fields": [name, ...],
        "paths": [json path, ...], "salt": "<32 hex>"}``.
        ``pii``, when given, wins over the object's own ``pii`` (the
        ``REEL_REDACT_PII`` switch); the patterns and fields are kept."""
        patterns = settings.get("patterns", {})
        fields = settings.get("fields", [])
        if not isinstance(patterns, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in patterns.items()
        ):
            raise ConfigError('redact "patterns" must map kinds to regular expressions')
        if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
            raise ConfigError('redact "fields" must be a list of field names')
        paths = settings.get("paths", [])
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
            raise ConfigError('redact "paths" must be a list of JSON paths')
        raw_salt = settings.get("salt")
        salt = None if raw_salt is None else check_salt(raw_salt)
        pii_setting = settings.get("pii", True) if pii is None else pii
        if cls is Redactor:  # one per settings: building one compiles its patterns
            return _shared(
                bool(pii_setting),
                tuple(patterns.items()),
                tuple(fields),
                tuple(paths),
                salt,
            )
        return cls(
            pii=bool(pii_setting),
            extra_patterns=patterns,
            fields=tuple(fields),
            paths=tuple(paths),
            salt=salt,
        )

    def with_salt(self, salt: str | None) -> Redactor:
        """This redactor with ``salt`` (a cassette's), when it has none of
        its own: a redactor given in code digests with the cassette's salt."""
        if salt is None or self.salt is not None:
            return self
        return _salted(self, salt)

    def text(self, text: str, found: list[str] | None = None) -> str:
        """``text`` with every secret (and PII) replaced by a placeholder.
        The kinds replaced are appended to ``found`` when given."""
        return self._scrubbed(text, self._scan(text, windows=len(text) >= _WINDOWED_FROM), found)

    def _scrubbed(self, text: str, scan: _Scan, found: list[str] | None) -> str:
        """``text`` redacted as ``scan`` (its hints) allows: the one path
        of :meth:`text` and :meth:`data`."""
        if scan is _NONE:
            return text
        if scan.whole or len(text) < _WINDOWED_FROM:
            return self._passes([text], found)[0]
        spans = self._windows(text, scan.candidates)
        pieces = self._passes([text[start:stop] for start, stop in spans], found)
        out: list[str] = []
        cursor = 0
        for (start, stop), piece in zip(spans, pieces, strict=True):
            out += (text[cursor:start], piece)
            cursor = stop
        out.append(text[cursor:])
        return "".join(out)

    def _windows(self, text: str, candidates: tuple[re.Pattern[str], ...]) -> list[tuple[int, int]]:
        """The runs of ``text`` that hold a candidate, each with the break
        either side, in order, none overlapping (see ``_RUN``).  Each
        candidate is looked for from where the last window ended: every
        search moves forward, so finding them all is linear."""
        size = len(text)
        backwards = text[::-1]

        def after(candidate: re.Pattern[str], position: int) -> int:
            m = candidate.search(text, position)
            return size if m is None else m.start()

        spans: list[tuple[int, int]] = []
        heads = [after(candidate, 0) for candidate in candidates]
        while (at := min(heads)) < size:
            start = at - (_RUN.match(backwards, size - at).end() - (size - at))  # type: ignore[union-attr]
            stop = _RUN.match(text, at).end()  # type: ignore[union-attr]
            start, stop = max(start - 1, 0), min(stop + 1, size)
            if spans and start < spans[-1][1]:  # the break between is shared
                start = spans.pop()[0]
            spans.append((start, stop))
            heads = [
                head if head >= stop else after(candidate, stop)
                for candidate, head in zip(candidates, heads, strict=True)
            ]
        return spans

    def _passes(self, texts: list[str], found: list[str] | None) -> list[str]:
        """``texts`` redacted, each pass over all of them in turn (so the
        kinds are found in the order one text's passes find them)."""

        def shape(m: re.Match[str]) -> str:
            kind = self._kinds[m.lastgroup or ""]
            matched = m.group(0)
            if kind == "phone" and sum(c.isdigit() for c in matched) not in _PHONE_DIGITS:
                return matched
            if found is not None:
                found.append(kind)
            if kind == "bearer-token":
                prefix = _BEARER_PREFIX.match(matched).group(0)  # type: ignore[union-attr]
                return prefix + self.placeholder(kind, matched[len(prefix) :])
            if kind == "aws-secret-key":
                return matched[:-40] + self.placeholder(kind, matched[-40:])
            return self.placeholder(kind, matched)

        def blank_field(m: re.Match[str]) -> str:
            groups = m.groups()
            for i in range(0, len(groups), 4):
                if groups[i] is not None:
                    name, value = groups[i + 1], groups[i + 2]
                    # A credential position: the value never tells requests
                    # apart (no digest); one already blanked is left alone,
                    # but a credential value the exchange's redactor found
                    # there becomes what any other value does (a replay
                    # with a short dummy key still matches).
                    if not value or (_is_plain_placeholder(value) and value != _CREDENTIAL):
                        return m.group(0)
                    if i < 8 and not is_credential_name(name):
                        return m.group(0)
                    if found is not None:
                        found.append("secret-field")
                    return groups[i] + _placeholder("secret-field") + groups[i + 3]
            return m.group(0)  # pragma: no cover - one alternative always matched

        # Repeat until nothing changes: a placeholder can complete a shape a
        # secret hid ("sk-ant-....b@c.de": the email's lookbehind saw the key),
        # and redaction must be idempotent.  A few passes always suffice.
        texts = list(texts)
        todo = list(range(len(texts)))
        for _ in range(8):
            changed = []
            for i in todo:
                text = texts[i]
                redacted = self._pattern.sub(shape, text)
                if '"' in redacted:
                    redacted = self._field.sub(blank_field, redacted)
                if redacted != text:
                    texts[i] = redacted
                    changed.append(i)
            if not changed:
                break
            todo = changed
        return texts

    def header_value(self, value: str, found: list[str] | None = None) -> str:
        """A response header value (its bytes read as Latin-1) as it may be
        stored: the one entry point for header values, so they get what a
        body gets (the text rules; an exchange's redactor also scrubs the
        request's credential values from its bytes, in every form)."""
        return self.text(value, found)

    def data(self, data: bytes, found: list[str] | None = None) -> bytes:
        """Redact bytes, UTF-8 or not: the one path every stored body,
        frame and message is scrubbed through.

        Bytes that are not UTF-8 as a whole (an upload, a multipart body
        with a file part, a WebSocket binary message, a protobuf) are read
        with each byte that is no part of a UTF-8 character standing for
        itself (``surrogateescape``): the text rules see every run of text
        between them, and such a byte is no letter, digit or space, so a
        secret right after one (or after a character cut short) is found as
        at the start of a text.  What is replaced becomes its placeholder,
        as in a text (the body's length changes, as a text body's does: a
        replay frames it itself); every other byte is written back as it
        came."""
        if not data:
            return data
        # The hints of the text are those of its bytes: an ASCII byte is the
        # same character either way, and a case-blind letter's bytes are
        # its own.
        scan = self._scan(data, windows=len(data) >= _WINDOWED_FROM)
        if scan is _NONE and not self._json_paths:
            return data
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = data.decode("utf-8", "surrogateescape")
            redacted = self._scrubbed(text, scan, found)
            return data if redacted == text else redacted.encode("utf-8", "surrogateescape")
        redacted = self._scrubbed(text, scan, found)
        out = data if redacted == text else redacted.encode("utf-8")
        return self._blank_paths(out, found) if self._json_paths else out

    def _blank_paths(self, data: bytes, found: list[str] | None) -> bytes:
        """A JSON body with the values at ``paths`` replaced, written back in
        the body's own formatting (compact when that is not recognised)."""
        is_json, value = parse_json(data)
        if not is_json:
            return data
        placeholder = _placeholder("json-path")
        blanked = value
        for path in self._json_paths:
            blanked = _blank(blanked, path, placeholder)
        if blanked == value:
            return data
        if found is not None:
            found.append("json-path")
        style = _json_style(data, value) or "compact"
        return _dumps(blanked, style).encode("utf-8")

    def query(
        self, pairs: Iterable[tuple[str, str]], found: list[str] | None = None
    ) -> tuple[tuple[str, str], ...]:
        """Query pairs (or form fields) with credential parameters (``key``,
        ``api_key``... see :func:`is_credential_name`) blanked, without a
        digest, and secret shapes in other values replaced."""
        out = []
        for name, value in pairs:
            if (value and is_credential_name(name, query=True)) or name in self.fields:
                if not _is_plain_placeholder(value):
                    if found is not None:
                        found.append("query-secret")
                    value = _placeholder("query-secret")
            else:
                value = self.text(value, found)
            out.append((name, value))
        return tuple(out)

    def target(self, target: str) -> str:
        """A request target (path and query) safe to log."""
        path, sep, query = target.partition("?")
        if not sep:
            return self.text(path)
        from urllib.parse import parse_qsl

        pairs = self.query(parse_qsl(query, keep_blank_values=True))
        return (
            self.text(path) + "?" + "&".join(f"{quote(k)}={quote(v, safe='[]:')}" for k, v in pairs)
        )


def _shared(
    pii: bool,
    patterns: tuple[tuple[str, str], ...],
    fields: tuple[str, ...],
    paths: tuple[str, ...],
    salt: str | None,
) -> Redactor:
    """One redactor per settings; each cassette's salt (its own) is put on
    a copy of the unsalted one, whose compiled rules it shares."""
    unsalted = _unsalted(pii, patterns, fields, paths)
    return unsalted if salt is None else _salted(unsalted, salt)


@functools.lru_cache(maxsize=64)
def _unsalted(
    pii: bool,
    patterns: tuple[tuple[str, str], ...],
    fields: tuple[str, ...],
    paths: tuple[str, ...],
) -> Redactor:
    return Redactor(pii=pii, extra_patterns=dict(patterns), fields=fields, paths=paths)


@functools.lru_cache(maxsize=64)
def _salted(redactor: Redactor, salt: str) -> Redactor:
    """``redactor`` with ``salt``: nothing it compiled depends on the salt,
    so a plain redactor's copy keeps it (building one again costs ~60 us,
    once per cassette).  (An exchange's redactor salts its base instead.)"""
    salted = copy.copy(redactor)
    object.__setattr__(salted, "salt", check_salt(salt))
    return salted


def _blank(value: Any, path: JSONPath, placeholder: str) -> Any:
    """``value`` with what ``path`` names replaced by ``placeholder``."""
    if not path:
        return placeholder
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        if head is WILDCARD:
            return {k: _blank(v, rest, placeholder) for k, v in value.items()}
        if isinstance(head, str) and head in value:
            return {**value, head: _blank(value[head], rest, placeholder)}
    if isinstance(value, list):
        if head is WILDCARD:
            return [_blank(v, rest, placeholder) for v in value]
        if isinstance(head, int) and head < len(value):
            return [*value[:head], _blank(value[head], rest, placeholder), *value[head + 1 :]]
    return value
