"""Redaction: what never reaches a cassette.

Request headers are never stored at all; response headers only from
:data:`RESPONSE_HEADER_ALLOWLIST`.  Bodies, queries and stream frames are
scrubbed for secret shapes and (unless turned off) PII, each replaced by a
placeholder naming its kind, ``[REDACTED:openai-key]``.  Placeholders match
no pattern, so redaction is idempotent; it runs before the match key is
computed, so a live request carrying a secret matches its redacted
recording.  What is forwarded upstream is never touched.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from ._body import _dumps, _json_style, parse_json
from ._errors import LocalProtocolError
from ._match import WILDCARD, JSONPath, parse_path

__all__ = [
    "RESPONSE_HEADER_ALLOWLIST",
    "SECRET_PATTERNS",
    "Redactor",
    "keep_response_header",
]

#: Response headers worth keeping: they carry no secret and SDKs read them.
RESPONSE_HEADER_ALLOWLIST = frozenset(
    {
        "content-type",
        "content-encoding",
        "retry-after",
        "retry-after-ms",
        "x-request-id",
        "request-id",
        "openai-model",
        "openai-organization-id",
        "openai-processing-ms",
        "openai-version",
        "anthropic-organization-id",
        "x-goog-request-id",
        "x-should-retry",
        "cf-ray",
    }
)
_ALLOWED_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-", "ratelimit-")


def keep_response_header(name: str) -> bool:
    """Whether a response header may be stored (never ``set-cookie``)."""
    name = name.lower()
    return name in RESPONSE_HEADER_ALLOWLIST or name.startswith(_ALLOWED_PREFIXES)


#: Secret shapes, most specific first: kind -> regular expression.
SECRET_PATTERNS: Mapping[str, str] = {
    "anthropic-key": r"sk-ant-[A-Za-z0-9_\-]{16,}",
    "openai-key": r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
    "google-key": r"AIza[0-9A-Za-z_\-]{35}",
    "github-token": r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})",
    "aws-access-key": r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}(?![A-Z0-9])",
    "aws-secret-key": (
        r"(?i:aws_?secret_?access_?key|aws_?secret)[\"']?\s*[:=]\s*[\"']?"
        r"(?-i:[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"
    ),
    "slack-token": r"xox[abposr]-[A-Za-z0-9\-]{10,}",
    "jwt": r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
    # The separator may be URL-encoded (a header dumped into a query string).
    "bearer-token": r"(?i:bearer)(?:\s+|%20|\+)(?:[A-Za-z0-9._~+/\-]|%[0-9A-Fa-f]{2}){16,}=*",
}

#: PII shapes, redacted unless turned off (``REEL_REDACT_PII=0``).
PII_PATTERNS: Mapping[str, str] = {
    "email": (
        r"(?<![\w.+-])[A-Za-z0-9._%+\-]+(?:@|%40)"  # the @ may be URL-encoded
        r"[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}"
    ),
    # Not inside a longer run of digit groups (UUIDs, version strings, ids):
    # no digit group, "-" or "." may touch either end.
    "phone": (
        r"(?<![\w+.\-])(?:\+\d{1,3}[ .\-]?)?(?:\(\d{2,4}\)[ .\-]?|\d{2,4}[ .\-])"
        r"\d{3,4}[ .\-]\d{3,4}(?![\w\-]|\.\d)"
    ),
}

#: JSON fields and query parameters whose string values are secrets.
SECRET_FIELD = r"(?:[A-Za-z0-9]*[_\-])?(?:api[_\-]?key|apikey|key|secret|token|password|passwd)"
_QUERY_SECRET = re.compile(rf"(?i){SECRET_FIELD}")
_FIELD_VALUE = re.compile(
    rf'(?i)("{SECRET_FIELD}"\s*:\s*")((?:[^"\\]|\\.)*)(")'
    rf'|(\\"{SECRET_FIELD}\\"\s*:\s*\\")((?:[^"\\]|\\[^"])*)(\\")'
)


# A necessary condition for any built-in pattern to match ASCII text, checked
# before the combined regular expression (which costs ~150 us on a 1 KB chat
# request): every secret shape holds a match of _SECRET_HINT; the (?i) shapes
# and every secret field (its name then a quote, or a backslash and a quote)
# hold one of _FOLDED_HINTS once folded by _FOLD (lower case, a backslash
# read as a quote); an e-mail an "@" (or "%40"); a phone number three digits,
# a separator and three more, which _PHONE_CLASSES turns into "000 000".
# Text holding none of them cannot change, and is returned as it is.  Each
# check is a C-speed scan of bytes; a regular expression per check would
# cost several times more.
_SECRET_HINT = re.compile(rb"sk-|AIza|gh[pousr]_|github_pat_|AKIA|ASIA|ABIA|ACCA|xox|eyJ")
_FOLD = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ\\", b'abcdefghijklmnopqrstuvwxyz"')
_FOLDED_HINTS = (
    b"aws_secret",
    b"awssecret",
    b"bearer",
    *(name + b'"' for name in (b"key", b"secret", b"token", b"passwd", b"password")),
)
_PHONE_CLASSES = bytes(
    0x30 if 0x30 <= c <= 0x39 else 0x20 if c in b" .-" else 0x78 for c in range(256)
)


_BEARER_PREFIX = re.compile(r"(?i:bearer)(?:\s+|%20|\+)")


def _placeholder(kind: str) -> str:
    return f"[REDACTED:{kind}]"


@dataclass(frozen=True)
class Redactor:
    """Scrubs secrets (always) and PII (unless ``pii=False``) from text.

    ``extra_patterns`` maps kinds to further regular expressions;
    ``fields`` names further JSON fields / query parameters to blank;
    ``paths`` names JSON paths (``metadata.customer``, ``messages[*].name``,
    as in matching) whose values are replaced in JSON bodies.
    """

    pii: bool = True
    extra_patterns: Mapping[str, str] = field(default_factory=dict, hash=False)
    fields: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    _pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _kinds: dict[str, str] = field(init=False, repr=False, compare=False)
    _field: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _hinted: bool = field(init=False, repr=False, compare=False)
    _json_paths: tuple[JSONPath, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))
        object.__setattr__(self, "paths", tuple(self.paths))
        object.__setattr__(self, "_json_paths", tuple(parse_path(p) for p in self.paths))
        patterns = dict(SECRET_PATTERNS)
        if self.pii:
            patterns.update(PII_PATTERNS)
        for kind, pattern in self.extra_patterns.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise LocalProtocolError(f"bad redaction pattern for {kind!r}: {exc}") from None
            patterns[kind] = pattern
        groups = {kind: f"k{i}" for i, kind in enumerate(patterns)}  # any kind name is fine
        kinds = {group: kind for kind, group in groups.items()}
        joined = "|".join(f"(?P<{groups[k]}>{p})" for k, p in patterns.items())
        object.__setattr__(self, "_pattern", re.compile(joined))
        object.__setattr__(self, "_kinds", kinds)
        names = "|".join(re.escape(f) for f in self.fields)
        extra = rf'|("(?:{names})"\s*:\s*")((?:[^"\\]|\\.)*)(")' if names else ""
        field = re.compile(_FIELD_VALUE.pattern + extra, re.IGNORECASE)
        object.__setattr__(self, "_field", field)
        # Hints cover the built-in patterns only.
        object.__setattr__(self, "_hinted", not self.extra_patterns and not self.fields)

    def _may_match(self, text: str | bytes) -> bool:
        """False only when no pattern can match ``text`` (see ``_SECRET_HINT``)."""
        if not self._hinted or not text.isascii():
            return True
        data = text.encode("ascii") if isinstance(text, str) else text
        if _SECRET_HINT.search(data):
            return True
        folded = data.translate(_FOLD)
        if any(map(folded.__contains__, _FOLDED_HINTS)):
            return True
        if not self.pii:
            return False
        if b"@" in data or b"%40" in data:  # an e-mail, maybe URL-encoded
            return True
        return b"000 000" in data.translate(_PHONE_CLASSES)

    def keeps(self, *texts: str | bytes) -> bool:
        """True only when redacting each of ``texts`` provably changes
        nothing (the hints below say no built-in pattern can match): the
        caller may then skip redaction and keep what it has."""
        if self._json_paths:
            return False
        # One scan of them all: joining can only add hints, never hide one.
        parts = [t.encode("utf-8", "surrogatepass") if isinstance(t, str) else t for t in texts]
        return not self._may_match(b"\n".join(parts))

    @classmethod
    def from_settings(cls, settings: Mapping[str, object], *, pii: bool | None = None) -> Redactor:
        """A redactor from a cassette ``_meta`` ``redact`` object:
        ``{"pii": bool, "patterns": {kind: regex}, "fields": [name, ...],
        "paths": [json path, ...]}``.
        ``pii``, when given, wins over the object's own ``pii`` (the
        ``REEL_REDACT_PII`` switch); the patterns and fields are kept."""
        patterns = settings.get("patterns", {})
        fields = settings.get("fields", [])
        if not isinstance(patterns, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in patterns.items()
        ):
            raise LocalProtocolError('redact "patterns" must map kinds to regular expressions')
        if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
            raise LocalProtocolError('redact "fields" must be a list of field names')
        paths = settings.get("paths", [])
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
            raise LocalProtocolError('redact "paths" must be a list of JSON paths')
        pii_setting = settings.get("pii", True) if pii is None else pii
        if cls is Redactor:  # one per settings: building one compiles its patterns
            return _shared(bool(pii_setting), tuple(patterns.items()), tuple(fields), tuple(paths))
        return cls(
            pii=bool(pii_setting), extra_patterns=patterns, fields=tuple(fields), paths=tuple(paths)
        )

    def text(self, text: str, found: list[str] | None = None) -> str:
        """``text`` with every secret (and PII) replaced by a placeholder.
        The kinds replaced are appended to ``found`` when given."""

        def shape(m: re.Match[str]) -> str:
            kind = self._kinds[m.lastgroup or ""]
            if found is not None:
                found.append(kind)
            if kind == "bearer-token":
                return _BEARER_PREFIX.match(m.group(0)).group(0) + _placeholder(kind)  # type: ignore[union-attr]
            if kind == "aws-secret-key":
                return m.group(0)[:-40] + _placeholder(kind)
            return _placeholder(kind)

        def blank_field(m: re.Match[str]) -> str:
            groups = m.groups()
            for i in range(0, len(groups), 3):
                if groups[i] is not None:
                    value = groups[i + 1]
                    if value.startswith("[REDACTED:") or not value:
                        return m.group(0)
                    if found is not None:
                        found.append("secret-field")
                    return groups[i] + _placeholder("secret-field") + groups[i + 2]
            return m.group(0)  # pragma: no cover - one alternative always matched

        if not self._may_match(text):
            return text
        # Repeat until nothing changes: a placeholder can complete a shape a
        # secret hid ("sk-ant-....b@c.de": the email's lookbehind saw the key),
        # and redaction must be idempotent.  A few passes always suffice.
        for _ in range(8):
            redacted = self._pattern.sub(shape, text)
            if '"' in redacted:
                redacted = self._field.sub(blank_field, redacted)
            if redacted == text:
                break
            text = redacted
        return text

    def data(self, data: bytes, found: list[str] | None = None) -> bytes:
        """Redact bytes: UTF-8 text is scrubbed, other bytes kept as they are."""
        if not data:
            return data
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return data
        redacted = self.text(text, found)
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
        """Query pairs with secret parameters (``key``, ``api_key``...) and
        secret shapes in values replaced."""
        out = []
        for name, value in pairs:
            if (value and _QUERY_SECRET.fullmatch(name)) or name in self.fields:
                if not value.startswith("[REDACTED:"):
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


@functools.lru_cache(maxsize=64)
def _shared(
    pii: bool,
    patterns: tuple[tuple[str, str], ...],
    fields: tuple[str, ...],
    paths: tuple[str, ...],
) -> Redactor:
    return Redactor(pii=pii, extra_patterns=dict(patterns), fields=fields, paths=paths)


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
