"""Durations as people write them (``90s``, ``30m``, ``12h``, ``7d``, ``2w``):
the ``max_age`` of a cassette, a test or a run."""

from __future__ import annotations

import re

from ._errors import ConfigError

__all__ = ["parse_duration"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)([smhdw])")


def parse_duration(text: str | int | float) -> float:
    """Seconds in ``text``: a number and a unit (s, m, h, d, w), e.g.
    ``"7d"``, ``"1.5h"``; a bare number (or an ``int``/``float``) is seconds.
    Zero, negative or unreadable durations raise :class:`ConfigError`."""
    if isinstance(text, bool):
        raise ConfigError(f"bad duration {text!r}: give e.g. 90s, 30m, 12h, 7d or 2w")
    if isinstance(text, (int, float)):
        seconds = float(text)
    else:
        value = text.strip().lower()
        match = _DURATION.fullmatch(value)
        if match is not None:
            seconds = float(match.group(1)) * _UNITS[match.group(2)]
        elif re.fullmatch(r"[0-9]+(?:\.[0-9]+)?", value):
            seconds = float(value)
        else:
            raise ConfigError(
                f"bad duration {text!r}: give a number and a unit (s, m, h, d or w), "
                "e.g. 90s, 30m, 12h, 7d or 2w"
            )
    if not seconds > 0 or seconds == float("inf"):
        raise ConfigError(f"bad duration {text!r}: it must be more than zero and finite")
    return seconds
