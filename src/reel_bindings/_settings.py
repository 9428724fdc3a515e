"""Every setting of every entry point, resolved once, by one table.

A setting may come from four sources.  The most specific wins, in one
order for every setting and every entry point (:data:`PRECEDENCE`):

1. a test's ``@pytest.mark.reel(...)`` marker (the pytest plugin);
2. a flag or an argument (``--reel-mode``, the proxy's ``--mode``, an
   in-process binding's ``mode=``);
3. its ``REEL_*`` environment variable;
4. an ini option (``reel_store = ...`` in pytest's configuration).

A source that does not name a setting (unset, ``None``, or blank text)
is passed over, and the first that names it wins; a value passed over is
not read, so a bad variable under a flag stops nothing.  Each setting has
one parser in :data:`SETTINGS`, and a bad value raises one
:class:`SettingError` (a :class:`reel_core.ConfigError`) naming where it
came from and what is allowed, the same from every entry point (each
binding only decides how to show it: an exception, a pytest usage error,
an argparse error).

Every entry point reads the environment here and nowhere else: the
in-process bindings, the pytest plugin, the proxy (``proxy/_options.py``,
``proxy/_tls.py``) and the ``reel`` commands (``tests/bindings/
test_settings_table.py`` fails on a ``REEL_*`` name anywhere else in the
source).  :meth:`Settings.resolve` reads the sources, :meth:`Settings.config`
builds the :class:`reel_core.Config`.  The settings are listed, with their
sources, in docs/configuration.md.
"""

from __future__ import annotations

import enum
import functools
import os
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from reel_core import Config, ConfigError, Limits, MatchMode, Mode, Timing
from reel_core.tools import (
    PARSED_LINES,
    RECORD_GRACE,
    ProtoSchema,
    check_upstream,
    parse_duration,
)

from ._hints import IN_PROCESS_HINT, hints
from ._store import Store, StoreUnavailableError
from ._store_url import is_store_url, open_store

__all__ = [
    "PRECEDENCE",
    "RECORD_ON",
    "SETTINGS",
    "Setting",
    "SettingError",
    "Settings",
    "Source",
    "check_drop_response_headers",
    "limits_from_env",
    "mode_from_env",
    "parse_grace",
    "pii_from_env",
    "port_from_env",
    "store_from_env",
    "tls_dir_from_env",
    "variable_of",
]


class Source(enum.Enum):
    """Where a setting's value came from."""

    #: A test's ``@pytest.mark.reel(...)`` marker.
    MARKER = "marker"
    #: A flag on the command line, or an argument of a binding.
    FLAG = "flag"
    #: A ``REEL_*`` environment variable.
    ENV = "env"
    #: An ini option of pytest's configuration.
    INI = "ini"
    #: None of them: the setting's default.
    DEFAULT = "default"


#: The one precedence order, most specific first.
PRECEDENCE = (Source.MARKER, Source.FLAG, Source.ENV, Source.INI)

#: Values of a switch that mean "off" (any case, spaces ignored).
OFF = ("0", "false", "no", "off")
#: When a test's recordings are kept: ``passed`` (only when it passed) or ``always``.
RECORD_ON = ("passed", "always")
#: The values of a yes/no ini option (as pytest's own ``bool`` ini reads them).
_TRUTH = dict.fromkeys(("true", "1", "yes", "on"), True) | dict.fromkeys(
    ("false", "0", "no", "off"), False
)


class SettingError(ConfigError):
    """A bad value of a setting; ``source`` says where it came from (the
    pytest plugin fails a test on its marker's, and stops the run on any
    other)."""

    def __init__(self, message: str, source: Source) -> None:
        super().__init__(message)
        self.source = source


# -- the parsers: (value, where it came from as messages name it, source) -> value --


def _mode(value: object, where: str, source: Source) -> Mode:
    if isinstance(value, Mode):
        return value
    try:
        return Mode.parse(str(value))
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _timing(value: object, where: str, source: Source) -> Timing:
    if isinstance(value, Timing):
        return value
    try:
        return Timing.parse(str(value))
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _match(value: object, where: str, source: Source) -> MatchMode:
    if isinstance(value, MatchMode):
        return value
    try:
        return MatchMode(str(value).lower())
    except ValueError:
        choices = ", ".join(m.value for m in MatchMode)
        raise ConfigError(f"{where}: unknown match mode {value!r}: use one of {choices}") from None


def _upstream(value: object, where: str, source: Source) -> str:
    if not isinstance(value, str):
        raise ConfigError(
            f"{where} takes a base URL such as 'https://api.openai.com', not {value!r}"
        )
    return check_upstream(value, where)


def _store(value: object, where: str, source: Source) -> str:
    text = os.fspath(value) if isinstance(value, (str, os.PathLike)) else str(value)
    try:
        is_store_url(text)  # a URL of no registered scheme is refused, not a directory
    except StoreUnavailableError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return text


def _store_prefix(value: object, where: str, source: Source) -> str:
    text = str(value)
    if any(c.isspace() for c in text):
        raise ConfigError(
            f"{where} is not a key prefix: give a word without spaces, e.g. myproject"
        )
    return text


def _max_body(value: object, where: str, source: Source) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise ConfigError(f"{where} {value} must be a positive number of bytes")
        return value
    try:
        max_body = int(str(value))
    except ValueError:
        max_body = 0
    if max_body < 1:
        raise ConfigError(f"{where} is not a positive number of bytes")
    return max_body


def _max_age(value: object, where: str, source: Source) -> float:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ConfigError(f"{where} takes a duration such as '7d' or seconds, not {value!r}")
    try:
        return parse_duration(value)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _record_grace(value: object, where: str, source: Source) -> float:
    if source is Source.MARKER and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise ConfigError(f"{where} takes a number of seconds, not {value!r}")
    return parse_grace(str(value), where.removesuffix("="))


def parse_grace(text: str, name: str) -> float:
    """A record grace in seconds (``2``, ``0.5``, ``0``), or a
    :class:`ConfigError` naming ``name`` (the flag or variable)."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < 3600:
        raise ConfigError(
            f"{name}={text!r} is not a number of seconds from 0 to 3600 (how long a recording "
            "reads the upstream on after the client left)"
        )
    return seconds


def _asset_threshold(value: object, where: str, source: Source) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        threshold = value
    else:
        text = str(value)
        threshold = int(text) if text.isdigit() else -1
    if threshold < 0:
        raise ConfigError(
            f"{where} is not a number of base64 characters (a payload this long or longer "
            "is kept beside the cassette; 0 keeps every one inline)"
        )
    return threshold


def _parsed_lines(value: object, where: str, source: Source) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        lines = value
    else:
        text = str(value)
        lines = int(text) if text.isdigit() else 0
    if lines < 1:
        raise ConfigError(
            f"{where} is not a positive number of lines (how many parsed cassette lines "
            f"are kept in memory, the ones used last; default {PARSED_LINES})"
        )
    return lines


def _drop_response_headers(value: object, where: str, source: Source) -> tuple[str, ...]:
    if source is Source.ENV and isinstance(value, str):  # comma-separated
        value = [name.strip() for name in value.split(",") if name.strip()]
    return check_drop_response_headers(value, where)


def check_drop_response_headers(names: object, where: str) -> tuple[str, ...]:
    """``names``, response headers never to store, lower-cased; a
    :class:`ConfigError` starting with ``where`` when it is not a list of
    header names."""
    if isinstance(names, str) or not isinstance(names, (list, tuple)):
        raise ConfigError(f"{where}: give a list of header names, like ['x-trace-id']")
    try:
        return Config(drop_response_headers=tuple(names)).drop_response_headers
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _pii(value: object, where: str, source: Source) -> bool:
    return value if isinstance(value, bool) else str(value).lower() not in OFF


def _port(value: object, where: str, source: Source) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value <= 65535:
            raise ConfigError(f"{where} {value} is not a TCP port (0-65535)")
        return value
    text = str(value)
    port = int(text) if text.isdigit() else -1
    if not 0 <= port <= 65535:
        raise ConfigError(f"{where} is not a TCP port (0-65535; 0 picks a free one)")
    return port


def _text(value: object, where: str, source: Source) -> str:
    return str(value)


def _path(value: object, where: str, source: Source) -> Path:
    return Path(value) if isinstance(value, (str, os.PathLike)) else Path(str(value))


def _record_on(value: object, where: str, source: Source) -> str:
    if value in RECORD_ON:
        return str(value)
    if source is Source.INI:
        raise ConfigError(
            f"{where}: use {' or '.join(RECORD_ON)} "
            "(passed keeps a test's recordings only when it passed)"
        )
    raise ConfigError(f"{where} takes {' or '.join(map(repr, RECORD_ON))}, not {value!r}")


def _proto_descriptor(value: object, where: str, source: Source) -> ProtoSchema:
    if isinstance(value, ProtoSchema):  # a binding handed one in
        return value
    path = _path(value, where, source)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"{where}: cannot read {str(path)!r} ({exc.strerror or exc}); give the file "
            "protoc --descriptor_set_out=FILE --include_imports writes"
        ) from None
    try:
        return _schema(data, f"{where} {str(path)!r}")
    except ImportError as exc:
        raise ConfigError(f"{where}: {exc}") from None


@functools.lru_cache(maxsize=8)
def _schema(data: bytes, name: str) -> ProtoSchema:
    """One schema per file's bytes (a setting is resolved per test)."""
    return ProtoSchema(data, name)


def _allow_misses(value: object, where: str, source: Source) -> bool:
    if isinstance(value, bool):
        return value
    allowed = _TRUTH.get(str(value).lower()) if source is Source.INI else None
    if allowed is None:
        if source is Source.INI:
            raise ConfigError(
                f"{where}: use true or false (true: a miss does not fail the test that served it)"
            )
        raise ConfigError(f"{where} takes True or False, not {value!r}")
    return allowed


def _phases(value: object, where: str, source: Source) -> bool:
    if isinstance(value, bool):
        return value
    on = _TRUTH.get(str(value).strip().lower())
    if on is None:
        raise ConfigError(f"{where} takes 1 or 0 (1: time Reel's phases in the run report)")
    return on


# -- the table -----------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """One setting: its name (a field of :class:`Settings`, the marker's
    key, the ini option's ``reel_`` suffix), its variable, its parser."""

    name: str
    #: Its ``REEL_*`` environment variable (``None``: it has none).
    variable: str | None
    parse: Callable[[object, str, Source], Any]
    #: Its variable's message shows the value (``REEL_MAX_BODY='lots' is ...``).
    shows_value: bool = False
    #: Read by every entry point (a bad variable is caught wherever Reel
    #: runs); else only by those that name it (:meth:`Settings.resolve`'s
    #: ``extra``).
    shared: bool = True
    #: Its parser reads more than the value (the store registry, a file):
    #: a result holding it is never kept for the next resolve.
    outside: bool = False


#: Every setting, in one table.
SETTINGS = (
    Setting("mode", "REEL_MODE", _mode),
    Setting("pii", "REEL_REDACT_PII", _pii),
    Setting("max_body", "REEL_MAX_BODY", _max_body, shows_value=True),
    Setting("timing", "REEL_TIMING", _timing),
    Setting("match", "REEL_MATCH", _match),
    Setting("upstream", "REEL_UPSTREAM", _upstream),
    Setting("store", "REEL_STORE", _store, outside=True),
    Setting("store_prefix", "REEL_STORE_PREFIX", _store_prefix, shows_value=True),
    Setting("max_age", "REEL_MAX_AGE", _max_age, shows_value=True),
    Setting("record_grace", "REEL_RECORD_GRACE", _record_grace),
    Setting("asset_threshold", "REEL_ASSET_THRESHOLD", _asset_threshold, shows_value=True),
    Setting("parsed_lines", "REEL_PARSED_LINES", _parsed_lines, shows_value=True),
    Setting(
        "drop_response_headers",
        "REEL_DROP_RESPONSE_HEADERS",
        _drop_response_headers,
        shows_value=True,
    ),
    Setting("proto_descriptor", "REEL_PROTO_DESCRIPTOR", _proto_descriptor, outside=True),
    # the proxy's own
    Setting("cassette", "REEL_CASSETTE", _path, shared=False),
    Setting("cassette_dir", "REEL_CASSETTE_DIR", _path, shared=False),
    Setting("host", "REEL_HOST", _text, shared=False),
    Setting("port", "REEL_PORT", _port, shows_value=True, shared=False),
    Setting("tls_dir", "REEL_TLS_DIR", _path, shared=False),
    # the pytest plugin's own
    Setting("record_on", None, _record_on, shared=False),
    Setting("allow_misses", None, _allow_misses, shared=False),
    Setting("phases", "REEL_PHASES", _phases, shared=False),
)
_BY_NAME = {setting.name: setting for setting in SETTINGS}
_SHARED = tuple(s.name for s in SETTINGS if s.shared)
#: The settings whose parse reads outside state (see :attr:`Setting.outside`).
_OUTSIDE = tuple(s.name for s in SETTINGS if s.outside)
#: Recent results of :meth:`Settings.resolve`, by every value it read.
_RESOLVED: dict[Hashable, Settings] = {}
_RESOLVED_MAX = 256


@functools.cache
def _variables(names: tuple[str, ...]) -> tuple[str, ...]:
    """The variables of settings ``names``."""
    return tuple(v for v in (_BY_NAME[n].variable for n in names) if v is not None)


def _argument(name: str) -> str:
    return f"{name}="


@dataclass(frozen=True)
class Settings:
    """What the settings' sources ask of a binding."""

    #: ``REEL_MODE`` (replay when unset).
    mode: Mode = Mode.REPLAY
    #: ``REEL_REDACT_PII`` (on unless 0/false/no/off).
    pii: bool = True
    #: ``REEL_MAX_BODY`` in bytes; ``None``: the default limit.
    max_body: int | None = None
    #: ``REEL_TIMING``; ``None``: the binding's default (the proxy's is
    #: realtime, the pytest plugin's fast; the in-process bindings take
    #: theirs as an argument).
    timing: Timing | None = None
    #: ``REEL_MATCH`` (the proxy's); ``None``: the cassette's.
    match: MatchMode | None = None
    #: ``REEL_UPSTREAM``: where forwarded requests go (``None``: the provider's host).
    upstream: str | None = None
    #: Whether ``mode`` was set (given, or by ``REEL_MODE``) rather than the default.
    mode_set: bool = False
    #: ``REEL_STORE``: where cassettes live (a directory, or a URL of a
    #: registered store: redis://, rediss://); ``None``: files, named by path.
    store: str | None = None
    #: ``REEL_STORE_PREFIX``: the Redis key prefix; ``None``: ``reel``.
    store_prefix: str | None = None
    #: ``REEL_MAX_AGE`` in seconds (``7d``...): how old a recording may be
    #: before it is stale; ``None``: as each cassette's ``_meta`` says.
    max_age: float | None = None
    #: ``REEL_RECORD_GRACE`` in seconds: how long a recording reads the
    #: upstream on after the client left; ``None``: the core's default.
    record_grace: float | None = None
    #: ``REEL_DROP_RESPONSE_HEADERS`` (comma-separated): response headers
    #: never stored, besides those Reel never stores.
    drop_response_headers: tuple[str, ...] = ()
    #: ``REEL_ASSET_THRESHOLD``: base64 payloads this long (characters) or
    #: longer are kept beside the cassette (0: none); ``None``: the
    #: cassette's ``_meta``, else the core's default.
    asset_threshold: int | None = None
    #: ``REEL_PROTO_DESCRIPTOR``: a descriptor set file, read (``None``:
    #: none): gRPC messages are matched and shown through it as JSON.
    proto_descriptor: ProtoSchema | None = None
    #: ``REEL_PARSED_LINES``: how many parsed lines each open cassette keeps
    #: in memory, the ones used last (``reel_core._parsed``); ``None``:
    #: the core's default (``PARSED_LINES``, 4,096).
    parsed_lines: int | None = None
    #: The proxy's: ``REEL_CASSETTE``, ``REEL_CASSETTE_DIR``, ``REEL_HOST``,
    #: ``REEL_PORT`` and ``REEL_TLS_DIR`` (``None``: unset).
    cassette: Path | None = None
    cassette_dir: Path | None = None
    host: str | None = None
    port: int | None = None
    tls_dir: Path | None = None
    #: The pytest plugin's: when a test's recordings are kept (``None``:
    #: ``passed``), and whether a miss fails its test.
    record_on: str | None = None
    allow_misses: bool = False
    #: The pytest plugin's phase timer (``REEL_PHASES``, ``--reel-phases``): off by default.
    phases: bool = False
    #: Where each setting resolved came from (a setting not resolved: absent).
    sources: Mapping[str, Source] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def resolve(
        cls,
        flags: Mapping[str, object] | None = None,
        env: Mapping[str, str] | None = None,
        marker: Mapping[str, object] | None = None,
        ini: Mapping[str, object] | None = None,
        *,
        flag_label: Callable[[str], str] = _argument,
        extra: Iterable[str] = (),
        only: Iterable[str] | None = None,
    ) -> Settings:
        """The settings the sources ask for, each setting's value from the
        first source in :data:`PRECEDENCE` that names it.  ``flags``,
        ``marker`` and ``ini`` are keyed by setting name; ``env`` is the
        environment (default ``os.environ``, read now).  ``flag_label``
        spells a flag as messages name it (default ``name=``, an
        argument).  The shared settings are resolved, and those in
        ``extra`` (``only``: just those named).  A bad value raises
        :class:`SettingError` naming its source.

        The same sources resolve to the same settings (a value object): a
        few recent results are kept, keyed by every value read, so a
        binding made per test reads the variables but parses nothing again
        (but for a result holding a setting whose parse reads outside state,
        a store URL's scheme or a descriptor file: parsed each time)."""
        environ = os.environ if env is None else env
        names = tuple(only) if only is not None else (*_SHARED, *extra)
        try:
            key: Hashable = (
                cls,
                names,
                flag_label,
                tuple(marker.items()) if marker else (),
                tuple(flags.items()) if flags else (),
                tuple(ini.items()) if ini else (),
                tuple(environ.get(v) for v in _variables(names)),
            )
            hash(key)
        except TypeError:  # a value that cannot be a key (a list): resolved afresh
            key = None
        else:
            known = _RESOLVED.get(key)
            if known is not None:
                return known
        settings = cls._resolve(environ, names, flags, marker, ini, flag_label)
        if key is not None and all(getattr(settings, n) is None for n in _OUTSIDE):
            if len(_RESOLVED) >= _RESOLVED_MAX:
                _RESOLVED.clear()
            _RESOLVED[key] = settings
        return settings

    @classmethod
    def _resolve(
        cls,
        environ: Mapping[str, str],
        names: tuple[str, ...],
        flags: Mapping[str, object] | None,
        marker: Mapping[str, object] | None,
        ini: Mapping[str, object] | None,
        flag_label: Callable[[str], str],
    ) -> Settings:
        # in PRECEDENCE's order; a source that names nothing is not asked
        given: list[tuple[Source, Mapping[str, object]]] = [(Source.ENV, environ)]
        if flags:
            given.insert(0, (Source.FLAG, flags))
        if marker:
            given.insert(0, (Source.MARKER, marker))
        if ini:
            given.append((Source.INI, ini))
        values: dict[str, Any] = {}
        sources: dict[str, Source] = {}
        for name in names:
            setting = _BY_NAME[name]
            for source, mapping in given:
                key = setting.variable if source is Source.ENV else name
                value = mapping.get(key) if key is not None else None
                if value is None or (isinstance(value, str) and not value.strip()):
                    continue
                if isinstance(value, str):
                    value = value.strip()
                where = _where(setting, source, value, flag_label)
                try:
                    values[name] = setting.parse(value, where, source)
                except ConfigError as exc:
                    raise SettingError(str(exc), source) from None
                sources[name] = source
                break
            else:
                sources[name] = Source.DEFAULT
        settings = cls(**values, sources=sources)
        if "mode" in values:
            settings = replace(settings, mode_set=True)
        return settings

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        mode: Mode | str | None = None,
        timing: Timing | None = None,
        match: MatchMode | None = None,
        upstream: str | None = None,
        max_body: int | None = None,
        store: str | None = None,
        store_prefix: str | None = None,
        max_age: float | None = None,
        record_grace: float | None = None,
        drop_response_headers: Sequence[str] | None = None,
        asset_threshold: int | None = None,
        proto_descriptor: object = None,
    ) -> Settings:
        """:meth:`resolve` with these arguments as the flags: a value
        given wins over its variable, which is then not read (``upstream``
        is the proxy's ``--upstream``, checked as such)."""
        flags: dict[str, object] = {
            "mode": mode,
            "timing": timing,
            "match": match,
            "upstream": upstream,
            "max_body": max_body,
            "store": store,
            "store_prefix": store_prefix,
            "max_age": max_age,
            "record_grace": record_grace,
            "drop_response_headers": drop_response_headers,
            "asset_threshold": asset_threshold,
            "proto_descriptor": proto_descriptor,
        }
        return cls.resolve(flags, environ, flag_label=_named)

    def source(self, name: str) -> Source:
        """Where setting ``name`` came from."""
        return self.sources.get(name, Source.DEFAULT)

    def open_store(self) -> Store | None:
        """The store ``store`` names (connected: a server that cannot be
        reached raises :class:`~reel_bindings._store.StoreUnavailableError`,
        an outage, not a :class:`ConfigError`; a bad URL its
        ``StoreURLError``, both); ``None`` when no store is set."""
        if self.store is None:
            return None
        store = open_store(self.store, prefix=self.store_prefix)
        store.check()
        return store

    @property
    def limits(self) -> Limits:
        return Limits() if self.max_body is None else Limits(max_body=self.max_body)

    def config(self, *, hint: str = IN_PROCESS_HINT, **fields: Any) -> Config:
        """A :class:`Config` with these settings' mode, PII switch and limits,
        and the bindings' hints with ``hint`` saying how to record a miss;
        ``fields`` set the rest (match, timing, repeat, redactor...)."""
        values: dict[str, Any] = {
            "mode": self.mode,
            "pii": None if self.pii else False,
            "limits": self.limits,
            "max_age": self.max_age,
            "record_grace": RECORD_GRACE if self.record_grace is None else self.record_grace,
            "drop_response_headers": self.drop_response_headers,
            "hints": hints(hint),
            "proto": self.proto_descriptor,
        }
        values.update(fields)  # made once: checked once
        return Config(**values)


def _named(name: str) -> str:
    """How :meth:`Settings.from_env`'s arguments are named in messages (as
    before the table: ``upstream`` as the proxy's flag)."""
    return "--upstream" if name == "upstream" else name


def _where(
    setting: Setting, source: Source, value: object, flag_label: Callable[[str], str]
) -> str:
    """The value's source as messages name it."""
    if source is Source.ENV:
        assert setting.variable is not None
        return f"{setting.variable}={value!r}" if setting.shows_value else setting.variable
    if source is Source.INI:
        return f"reel_{setting.name} = {value!r}"
    if source is Source.MARKER:
        return f"{setting.name}="
    return flag_label(setting.name)


# -- single variables, for the commands that need one ---------------------------------


def variable_of(name: str) -> str | None:
    """The ``REEL_*`` variable of setting ``name`` (``None``: it has none)."""
    return _BY_NAME[name].variable


def pii_from_env(environ: Mapping[str, str] | None = None) -> bool:
    """``REEL_REDACT_PII``: PII is redacted unless it says 0/false/no/off."""
    return Settings.resolve(env=environ, only=("pii",)).pii


def mode_from_env(mode: Mode | str | None, environ: Mapping[str, str] | None = None) -> Mode:
    """``mode`` if given, else ``REEL_MODE``, else replay."""
    return Settings.resolve({"mode": mode}, environ, only=("mode",)).mode


def limits_from_env(environ: Mapping[str, str] | None = None) -> Limits:
    """The body limit ``REEL_MAX_BODY`` sets (the default without it): the
    one limit every body is decoded to at most, read by the commands that
    decode bodies (``reel import``, ``reel check``).  A bad value raises
    :class:`ConfigError`."""
    return Settings.resolve(env=environ, only=("max_body",)).limits


def port_from_env(environ: Mapping[str, str] | None = None) -> int | None:
    """``REEL_PORT`` (the proxy's), ``None`` when unset."""
    return Settings.resolve(env=environ, only=("port",)).port


def store_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    """``REEL_STORE``, checked; ``None`` when unset."""
    return Settings.resolve(env=environ, only=("store",)).store


def tls_dir_from_env(environ: Mapping[str, str] | None = None) -> Path | None:
    """``REEL_TLS_DIR``, ``None`` when unset."""
    return Settings.resolve(env=environ, only=("tls_dir",)).tls_dir
