"""What the YAML recorders' formats share: their fields read the same way.

vcrpy and Ruby VCR store headers as name -> list of values, statuses as
``{code, message}`` and text bodies as strings; HTTP dates appear in Ruby
VCR's ``recorded_at`` and in httprr's ``Date`` headers.  A field that
cannot be read raises :class:`Skip` with the one-line reason the report
gives for that entry.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

__all__ = ["Skip", "header_pairs", "http_date", "status_code", "text_bytes"]

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
#: RFC 2822 (and HTTP's IMF-fixdate): ``[Tue, ]14 Nov 2023 21:48:25 GMT``.
_DATE = re.compile(
    r"\s*(?:[A-Za-z]{3},\s*)?(\d{1,2})\s+([A-Za-z]{3})\s+(\d{4})\s+"
    r"(\d{1,2}):(\d{2})(?::(\d{2}))?\s*(GMT|UTC?|Z|[+-]\d{4})?\s*",
    re.IGNORECASE,
)


class Skip(Exception):
    """An entry that cannot be imported, and why."""


def text_bytes(text: str) -> bytes:
    """A stored text body's bytes (UTF-8; a lone surrogate kept as it was)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a "\ud800" escape
        return text.encode("utf-8", "surrogatepass")


def header_pairs(value: Any, where: str) -> tuple[tuple[str, str], ...]:
    """``name -> value or [values]`` as lower-case pairs (``None`` values dropped)."""
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise Skip(f"the {where} headers are a {type(value).__name__}, not a mapping")
    pairs = []
    for name, values in value.items():
        for item in values if isinstance(values, list) else [values]:
            if item is None:
                continue
            pairs.append((str(name).strip().lower(), str(item)))
    return tuple(pairs)


def status_code(value: Any) -> int:
    """A status stored as a number, its text, or ``{code, message}``."""
    code: Any = value.get("code") if isinstance(value, Mapping) else value
    if isinstance(code, str) and code.strip().isdigit():
        code = int(code)
    if isinstance(code, bool) or not isinstance(code, int) or not 100 <= code <= 999:
        raise Skip(f"the response status {code!r} is not an HTTP status code")
    return code


def http_date(text: str) -> float | None:
    """The epoch seconds of an RFC 2822 / HTTP date, or ``None`` (a zone
    other than GMT, UTC or a numeric offset is not read; no zone is UTC)."""
    found = _DATE.fullmatch(text)
    if not found:
        return None
    day, month, year, hour, minute, second, zone = found.groups()
    if month.lower() not in _MONTHS:
        return None
    offset = 0
    if zone and zone[0] in "+-":
        offset = (int(zone[1:3]) * 60 + int(zone[3:5])) * (-1 if zone[0] == "-" else 1)
    try:
        when = datetime(
            int(year),
            _MONTHS.index(month.lower()) + 1,
            int(day),
            int(hour),
            int(minute),
            int(second or 0),
            tzinfo=timezone(timedelta(minutes=offset)),
        )
    except ValueError:  # 31 Feb, 25:00, an offset of a day or more
        return None
    return when.timestamp()
