"""The REEL_* environment variables, read once into one frozen value.

:meth:`Settings.from_env` reads the variables an in-process binding uses,
checks them (a :class:`reel_core.ConfigError` naming the variable and what
is allowed) and :meth:`Settings.config` builds the :class:`reel_core.Config`
from them.  The variables are listed in docs/configuration.md.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from reel_core import Config, ConfigError, Limits, Mode

__all__ = ["Settings", "mode_from_env", "pii_from_env"]

#: Values of a switch that mean "off" (any case, spaces ignored).
OFF = ("0", "false", "no", "off")


def pii_from_env(environ: Mapping[str, str] | None = None) -> bool:
    """``REEL_REDACT_PII``: PII is redacted unless it says 0/false/no/off."""
    env = os.environ if environ is None else environ
    return env.get("REEL_REDACT_PII", "1").strip().lower() not in OFF


def mode_from_env(mode: Mode | str | None, environ: Mapping[str, str] | None = None) -> Mode:
    """``mode`` if given, else ``REEL_MODE``, else replay."""
    if isinstance(mode, Mode):
        return mode
    env = os.environ if environ is None else environ
    return Mode.parse(mode or env.get("REEL_MODE") or "replay")


def _max_body(env: Mapping[str, str]) -> int | None:
    text = env.get("REEL_MAX_BODY", "").strip()
    if not text:
        return None
    try:
        max_body = int(text)
    except ValueError:
        max_body = 0
    if max_body < 1:
        raise ConfigError(f"REEL_MAX_BODY={text!r} is not a positive number of bytes")
    return max_body


@dataclass(frozen=True)
class Settings:
    """What the environment asks of an in-process binding."""

    #: ``REEL_MODE`` (replay when unset).
    mode: Mode = Mode.REPLAY
    #: ``REEL_REDACT_PII`` (on unless 0/false/no/off).
    pii: bool = True
    #: ``REEL_MAX_BODY`` in bytes; ``None``: the default limit.
    max_body: int | None = None

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        mode: Mode | str | None = None,
    ) -> Settings:
        """The settings of ``environ`` (default ``os.environ``, read now).
        A ``mode`` given wins over ``REEL_MODE``, which is then not read.
        Raises :class:`ConfigError` for a bad value."""
        env = os.environ if environ is None else environ
        return cls(mode=mode_from_env(mode, env), pii=pii_from_env(env), max_body=_max_body(env))

    @property
    def limits(self) -> Limits:
        return Limits() if self.max_body is None else Limits(max_body=self.max_body)

    def config(self, **fields: Any) -> Config:
        """A :class:`Config` with these settings' mode, PII switch and limits;
        ``fields`` set the rest (match, timing, repeat, redactor, hint...)."""
        return replace(
            Config(mode=self.mode, pii=None if self.pii else False, limits=self.limits), **fields
        )
