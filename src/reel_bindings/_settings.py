"""The REEL_* environment variables, read once into one frozen value.

Every entry point reads the environment here and nowhere else: the
in-process bindings, the pytest plugin, the proxy (``proxy/_options.py``)
and the ``reel`` commands.  Each variable has one parser below, and a bad
value raises one :class:`reel_core.ConfigError` whose message names the
variable and what it accepts, the same from every entry point (each
binding only decides how to show it: an exception, a pytest usage error,
an argparse error).  A value given by the caller (a flag, an argument)
wins over its variable, which is then not read.

:meth:`Settings.from_env` reads them and :meth:`Settings.config` builds
the :class:`reel_core.Config`.  The variables are listed in
docs/configuration.md.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from reel_core import (
    RECORD_GRACE,
    Config,
    ConfigError,
    Limits,
    MatchMode,
    Mode,
    Timing,
    check_upstream,
    parse_duration,
)

from ._store import Store, StoreUnavailableError
from ._store_url import check_store, is_store_url, open_store

__all__ = [
    "Settings",
    "check_drop_response_headers",
    "limits_from_env",
    "mode_from_env",
    "parse_grace",
    "pii_from_env",
    "port_from_env",
]

#: Values of a switch that mean "off" (any case, spaces ignored).
OFF = ("0", "false", "no", "off")


def _text(env: Mapping[str, str], variable: str) -> str:
    return env.get(variable, "").strip()


def pii_from_env(environ: Mapping[str, str] | None = None) -> bool:
    """``REEL_REDACT_PII``: PII is redacted unless it says 0/false/no/off."""
    env = os.environ if environ is None else environ
    return _text(env, "REEL_REDACT_PII").lower() not in OFF


def _mode(env: Mapping[str, str]) -> Mode | None:
    text = _text(env, "REEL_MODE")
    if not text:
        return None
    try:
        return Mode.parse(text)
    except ConfigError as exc:
        raise ConfigError(f"REEL_MODE: {exc}") from None


def mode_from_env(mode: Mode | str | None, environ: Mapping[str, str] | None = None) -> Mode:
    """``mode`` if given, else ``REEL_MODE``, else replay."""
    if isinstance(mode, Mode):
        return mode
    if mode:
        return Mode.parse(mode)
    return _mode(os.environ if environ is None else environ) or Mode.REPLAY


def _max_body(env: Mapping[str, str]) -> int | None:
    text = _text(env, "REEL_MAX_BODY")
    if not text:
        return None
    try:
        max_body = int(text)
    except ValueError:
        max_body = 0
    if max_body < 1:
        raise ConfigError(f"REEL_MAX_BODY={text!r} is not a positive number of bytes")
    return max_body


def limits_from_env(environ: Mapping[str, str] | None = None) -> Limits:
    """The body limit ``REEL_MAX_BODY`` sets (the default without it): the
    one limit every body is decoded to at most, read by the commands that
    decode bodies (``reel import``, ``reel check``).  A bad value raises
    :class:`ConfigError`."""
    max_body = _max_body(os.environ if environ is None else environ)
    return Limits() if max_body is None else Limits(max_body=max_body)


def _asset_threshold(env: Mapping[str, str]) -> int | None:
    text = _text(env, "REEL_ASSET_THRESHOLD")
    if not text:
        return None
    threshold = int(text) if text.isdigit() else -1
    if threshold < 0:
        raise ConfigError(
            f"REEL_ASSET_THRESHOLD={text!r} is not a number of base64 characters (a payload "
            "this long or longer is kept beside the cassette; 0 keeps every one inline)"
        )
    return threshold


def _timing(env: Mapping[str, str]) -> Timing | None:
    text = _text(env, "REEL_TIMING")
    if not text:
        return None
    try:
        return Timing.parse(text)
    except ConfigError as exc:
        raise ConfigError(f"REEL_TIMING: {exc}") from None


def _match(env: Mapping[str, str]) -> MatchMode | None:
    text = _text(env, "REEL_MATCH")
    if not text:
        return None
    try:
        return MatchMode(text.lower())
    except ValueError:
        choices = ", ".join(m.value for m in MatchMode)
        raise ConfigError(
            f"REEL_MATCH: unknown match mode {text!r}: use one of {choices}"
        ) from None


def _upstream(env: Mapping[str, str]) -> str | None:
    text = _text(env, "REEL_UPSTREAM")
    return check_upstream(text, "REEL_UPSTREAM") if text else None


def _store(env: Mapping[str, str]) -> str | None:
    text = _text(env, "REEL_STORE")
    if not text:
        return None
    try:
        is_store_url(text)
    except StoreUnavailableError as exc:
        raise ConfigError(f"REEL_STORE: {exc}") from None
    return text


def _store_prefix(env: Mapping[str, str]) -> str | None:
    text = _text(env, "REEL_STORE_PREFIX")
    if not text:
        return None
    if any(c.isspace() for c in text):
        raise ConfigError(
            f"REEL_STORE_PREFIX={text!r} is not a key prefix: give a word without spaces, "
            "e.g. myproject"
        )
    return text


def _max_age(env: Mapping[str, str]) -> float | None:
    text = _text(env, "REEL_MAX_AGE")
    if not text:
        return None
    try:
        return parse_duration(text)
    except ConfigError as exc:
        raise ConfigError(f"REEL_MAX_AGE={text!r}: {exc}") from None


def _record_grace(env: Mapping[str, str]) -> float | None:
    text = _text(env, "REEL_RECORD_GRACE")
    if not text:
        return None
    return parse_grace(text, "REEL_RECORD_GRACE")


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


def _drop_response_headers(env: Mapping[str, str]) -> tuple[str, ...]:
    text = _text(env, "REEL_DROP_RESPONSE_HEADERS")
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    return check_drop_response_headers(names, f"REEL_DROP_RESPONSE_HEADERS={text!r}")


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


def port_from_env(environ: Mapping[str, str] | None = None) -> int | None:
    """``REEL_PORT`` (the proxy's), ``None`` when unset."""
    text = _text(os.environ if environ is None else environ, "REEL_PORT")
    if not text:
        return None
    port = int(text) if text.isdigit() else -1
    if not 0 <= port <= 65535:
        raise ConfigError(f"REEL_PORT={text!r} is not a TCP port (0-65535; 0 picks a free one)")
    return port


@dataclass(frozen=True)
class Settings:
    """What the environment asks of every binding."""

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
    #: ``REEL_STORE``: where cassettes live (a directory, or a redis:// or
    #: rediss:// URL); ``None``: files, named by path.
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
    ) -> Settings:
        """The settings of ``environ`` (default ``os.environ``, read now).
        A value given wins over its variable, which is then not read
        (``upstream`` is the proxy's ``--upstream``, checked as such).
        Raises :class:`ConfigError` for a bad value."""
        env = os.environ if environ is None else environ
        given_mode = mode_from_env(mode, {}) if mode else _mode(env)
        return cls(
            mode=given_mode or Mode.REPLAY,
            pii=pii_from_env(env),
            max_body=max_body if max_body is not None else _max_body(env),
            timing=timing if timing is not None else _timing(env),
            match=match if match is not None else _match(env),
            upstream=check_upstream(upstream) if upstream else _upstream(env),
            mode_set=given_mode is not None,
            store=store or _store(env),
            store_prefix=store_prefix or _store_prefix(env),
            max_age=max_age if max_age is not None else _max_age(env),
            record_grace=record_grace if record_grace is not None else _record_grace(env),
            drop_response_headers=(
                check_drop_response_headers(drop_response_headers, "drop_response_headers")
                if drop_response_headers is not None
                else _drop_response_headers(env)
            ),
            asset_threshold=(
                asset_threshold if asset_threshold is not None else _asset_threshold(env)
            ),
        )

    def open_store(self) -> Store | None:
        """The store ``store`` names (connected: a server that cannot be
        reached raises :class:`~reel_bindings._store.StoreUnavailableError`,
        a :class:`ConfigError`); ``None`` when no store is set."""
        if self.store is None:
            return None
        store = open_store(self.store, prefix=self.store_prefix)
        check_store(store)
        return store

    @property
    def limits(self) -> Limits:
        return Limits() if self.max_body is None else Limits(max_body=self.max_body)

    def config(self, **fields: Any) -> Config:
        """A :class:`Config` with these settings' mode, PII switch and limits;
        ``fields`` set the rest (match, timing, repeat, redactor, hint...)."""
        return replace(
            Config(
                mode=self.mode,
                pii=None if self.pii else False,
                limits=self.limits,
                max_age=self.max_age,
                record_grace=RECORD_GRACE if self.record_grace is None else self.record_grace,
                drop_response_headers=self.drop_response_headers,
            ),
            **fields,
        )
