"""The ``_meta`` line: the settings a cassette carries, and that line's form.

:class:`CassetteMeta` is a frozen value; :func:`meta_line` writes it and
:func:`meta_from_json` reads it back, saying what is wrong with a bad one
(:class:`~reel_core.SchemaVersionError` for a newer schema, with what to
install).  :func:`read_meta_line` reads a whole line, and remembers the few
lines it read lately: a suite's cassettes, one a test, were mostly written
by one Reel with one set of settings, so their ``_meta`` lines are the same
bytes and read as the same value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ._assets import ASSET_THRESHOLD, ASSETS_FROM_SCHEMA
from ._duration import parse_duration
from ._errors import CassetteError, ConfigError, SchemaVersionError
from ._freeze import Freeze, freeze_from_json, freeze_json
from ._headers import dropped_setting
from ._literals import header_names
from ._match import MatchConfig, MatchMode
from ._nesting import load_json
from ._redact import Redactor
from ._version import SCHEMA_VERSION, __version__

__all__ = ["CassetteMeta", "meta_from_json", "meta_line", "read_meta_line"]

#: A version number (PEP 440-ish), safe to put in an upgrade command.
_VERSION = re.compile(r"[0-9][0-9A-Za-z.+!]*")


@dataclass(frozen=True)
class CassetteMeta:
    """The settings of a cassette's ``_meta`` line, honoured by every replay."""

    schema: int = SCHEMA_VERSION
    match: MatchConfig = MatchConfig()
    #: The Reel version that wrote the cassette.
    writer: str = __version__
    #: In replay mode, once every recording of a request was served: serve
    #: the last one again (``True``, the default) or miss (``False``).
    repeat: bool = True
    #: How old a recording may be before it is stale, as written (``"7d"``,
    #: or seconds); ``None``: recordings never go stale (unless a test or a
    #: run sets a ``max_age``, which wins).
    max_age: str | float | None = None
    #: The base values of ``freeze=`` (``"freeze"``; see :mod:`reel_core._freeze`):
    #: the frozen clock, the ``uuid4`` and ``random`` seeds.
    freeze: Freeze = Freeze()
    #: Other settings (redaction switches, extra patterns), kept as given.
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False)

    @property
    def max_age_seconds(self) -> float | None:
        """:attr:`max_age` in seconds (checked when the line was read)."""
        return None if self.max_age is None else parse_duration(self.max_age)

    @property
    def drop_response_headers(self) -> frozenset[str]:
        """The response headers (lower case) its ``redact`` settings name
        never to store (``drop_response_headers``; checked when the line was
        read)."""
        return dropped_setting(self.extra)

    def asset_threshold(self, setting: int | None = None) -> int:
        """How long a base64 run must be to be moved into an asset (0:
        none is): the cassette's own ``"assets": {"threshold": N}``, else
        ``setting`` (``REEL_ASSET_THRESHOLD``), else
        :data:`~reel_core.ASSET_THRESHOLD`; always 0 for a cassette of a
        schema older than assets (its readers would not put them back)."""
        if self.schema < ASSETS_FROM_SCHEMA:
            return 0
        own = _asset_setting(self.extra)
        if own is not None:
            return own
        return ASSET_THRESHOLD if setting is None else setting

    def to_line(self) -> bytes:
        """The ``_meta`` line (``\\n``-terminated UTF-8 bytes)."""
        return meta_line(self)

    @classmethod
    def from_json(cls, obj: Any, name: str) -> CassetteMeta:
        """Read a parsed ``_meta`` line of cassette ``name``;
        :class:`~reel_core.CassetteError` says what is wrong."""
        return meta_from_json(obj, name)


def meta_line(meta: CassetteMeta) -> bytes:
    """The ``_meta`` line of ``meta`` (``\\n``-terminated UTF-8 bytes)."""
    line: dict[str, Any] = {
        "schema": meta.schema,
        "reel": meta.writer,
        "match": meta.match.mode.value,
    }
    if meta.match.ignore_fields:
        line["ignore_fields"] = list(meta.match.ignore_fields)
    if not meta.repeat:
        line["repeat"] = False
    if meta.max_age is not None:
        line["max_age"] = meta.max_age
    frozen = freeze_json(meta.freeze)
    if frozen:
        line["freeze"] = frozen
    line.update(meta.extra)
    return (
        json.dumps({"_meta": line}, ensure_ascii=False, separators=(",", ":")).encode(
            "utf-8", "backslashreplace"
        )
        + b"\n"
    )


def meta_from_json(obj: Any, name: str) -> CassetteMeta:
    """The settings of a parsed ``_meta`` line of cassette ``name``;
    :class:`CassetteError` (:class:`SchemaVersionError` for a newer schema)
    says what is wrong."""
    meta = obj.get("_meta") if isinstance(obj, dict) else None
    if not isinstance(meta, dict):
        raise CassetteError(name, 1, '"_meta" must be an object')
    schema = meta.get("schema", SCHEMA_VERSION)
    writer = meta.get("reel", "unknown")
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
        raise CassetteError(name, 1, f'"_meta.schema" must be a positive integer, not {schema!r}')
    if schema > SCHEMA_VERSION:
        raise SchemaVersionError(
            name,
            1,
            f"cassette schema {schema} (written by Reel {writer}) is newer than this "
            f"Reel {__version__} reads (schema {SCHEMA_VERSION} and older): "
            + _upgrade(str(writer), schema),
        )
    try:
        mode = MatchMode(meta.get("match", MatchMode.NORMALIZED.value))
        ignore = meta.get("ignore_fields", [])
        if not isinstance(ignore, list) or not all(isinstance(p, str) for p in ignore):
            raise CassetteError(name, 1, '"_meta.ignore_fields" must be a list of JSON paths')
        match = MatchConfig(mode, tuple(ignore))
    except ValueError as exc:  # ConfigError too
        raise CassetteError(name, 1, f'bad "_meta" match settings: {exc}') from None
    repeat = meta.get("repeat", True)
    if not isinstance(repeat, bool):
        raise CassetteError(
            name, 1, f'"_meta.repeat" must be true or false, not {json.dumps(repeat)}'
        )
    max_age = meta.get("max_age")
    if max_age is not None:
        try:
            if not isinstance(max_age, (str, int, float)):
                raise ConfigError(f"bad duration {json.dumps(max_age)}")
            parse_duration(max_age)
        except ConfigError as exc:
            raise CassetteError(name, 1, f'"_meta.max_age": {exc}') from None
    freeze = freeze_from_json(meta.get("freeze"), name)
    known = {"schema", "reel", "match", "ignore_fields", "repeat", "max_age", "freeze"}
    extra = {k: v for k, v in meta.items() if k not in known}
    redact = extra.get("redact", {})
    try:
        if not isinstance(redact, dict):
            raise ConfigError('"redact" must be an object')
        Redactor.from_settings(redact)
        header_names(redact)
        dropped_setting(extra)
    except ConfigError as exc:
        raise CassetteError(name, 1, f'bad "_meta" redact settings: {exc}') from None
    try:
        _asset_setting(extra)
    except ConfigError as exc:
        raise CassetteError(name, 1, f'bad "_meta" assets settings: {exc}') from None
    return CassetteMeta(
        schema=schema,
        match=match,
        writer=str(writer),
        repeat=repeat,
        max_age=max_age,
        freeze=freeze,
        extra=extra,
    )


def _asset_setting(extra: Mapping[str, Any]) -> int | None:
    """The ``"assets": {"threshold": N}`` of ``_meta`` settings (``None``
    when not set); ``ConfigError`` for a bad one."""
    assets = extra.get("assets")
    if assets is None:
        return None
    threshold = assets.get("threshold") if isinstance(assets, dict) else None
    if (
        not isinstance(assets, dict)
        or set(assets) - {"threshold"}
        or not isinstance(threshold, int)
        or isinstance(threshold, bool)
        or threshold < 0
    ):
        raise ConfigError(
            '"assets" must be {"threshold": N}, N the base64 characters from which a '
            f"payload is kept beside the cassette (0: never), not {json.dumps(assets)}"
        )
    return threshold


def _release(version: str) -> tuple[int, ...] | None:
    """The release numbers of a version (``0.10.0rc1`` -> ``(0, 10, 0)``)."""
    m = re.match(r"(\d+(?:\.\d+)*)", version)
    if m is None:
        return None
    numbers = [int(n) for n in m.group(1).split(".")]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    return tuple(numbers)


def _upgrade(writer: str, schema: int) -> str:
    """What to install to read a cassette of ``schema`` written by Reel
    ``writer``: a pin only when the writer is newer than this Reel (and is a
    version number: never whatever a hand-edited line holds)."""
    theirs, ours = _release(writer), _release(__version__)
    if _VERSION.fullmatch(writer) and theirs is not None and ours is not None and theirs > ours:
        return f"upgrade with `pip install -U 'reel-llm>={writer}'`"
    return (
        f"it needs a Reel that reads schema {schema} (`pip install -U reel-llm` gets "
        "the newest; if that is this one, the _meta line was edited: record the cassette again)"
    )


#: The values of the ``_meta`` lines read lately, by the line's bytes.  The
#: value is a function of the bytes alone (the name a cassette goes by is
#: only ever in an error, and errors are not kept), and it is frozen: its
#: ``extra`` mapping is only ever read, never changed in place.
_READ: dict[bytes, CassetteMeta] = {}
#: The same, by the line's bytes with its redaction salt cut out
#: (:func:`_unsalted`), each with the salt of the line it was read from:
#: each cassette has a salt of its own, so a suite's lines differ there.
_UNSALTED: dict[bytes, tuple[CassetteMeta, str]] = {}
#: How many are kept; more distinct lines than this clear the memo.
READ_MAX = 16
#: A salt as Reel writes one (``secrets.token_hex(16)``).
_SALT = re.compile(rb'"salt":"([0-9a-f]{32})"')


def read_meta_line(line: bytes, name: str) -> CassetteMeta:
    """:func:`meta_from_json` of the ``_meta`` line ``line`` (without its
    newline) of cassette ``name``; :class:`CassetteError` for one that is
    no JSON, or says something wrong.  The same bytes read again are the
    same value, not parsed and checked again; so are bytes that differ
    from a line read before only in the redaction salt (the value then
    carries this line's salt)."""
    known = _READ.get(line)
    if known is not None:
        return known
    cut = _unsalted(line)
    if cut is not None:
        kept = _UNSALTED.get(cut[0])
        if kept is not None:
            return _with_salt(kept[0], kept[1], cut[1])
    try:
        obj = load_json(line)
    except ValueError as exc:
        raise CassetteError(name, 1, f"the _meta line is not JSON ({exc})") from None
    meta = meta_from_json(obj, name)
    if len(_READ) >= READ_MAX:
        _READ.clear()
    _READ[line] = meta
    redact = meta.extra.get("redact")
    if cut is not None and isinstance(redact, dict) and redact.get("salt") == cut[1]:
        if len(_UNSALTED) >= READ_MAX:
            _UNSALTED.clear()
        _UNSALTED[cut[0]] = (meta, cut[1])
    return meta


def _unsalted(line: bytes) -> tuple[bytes, str] | None:
    """``line`` with its salt cut out, and the salt; ``None`` unless the
    line names ``"salt"`` once, with no escape anywhere (so no other spelling
    of that name is there either) and the salt is written as Reel writes
    one.  The one place it can then be is the redact settings' salt, which
    :func:`read_meta_line` checks on the value it keeps."""
    if b"\\" in line or line.count(b'"salt"') != 1:
        return None
    found = _SALT.search(line)
    if found is None:
        return None
    return line[: found.start(1)] + line[found.end(1) :], found.group(1).decode("ascii")


def _with_salt(meta: CassetteMeta, old: str, salt: str) -> CassetteMeta:
    """``meta``, read from a line whose salt was ``old``, as read from the
    same line with ``salt`` in its place: nothing else in it depends on it."""
    if salt == old:
        return meta
    redact = {**meta.extra["redact"], "salt": salt}
    return replace(meta, extra={**meta.extra, "redact": redact})
