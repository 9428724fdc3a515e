"""JSON paths: ``messages[*].id``, ``metadata.user_id``, ``a[0]``.

The one reading of a path a user writes (an ignored field of the match, a
redacted field of the ``_meta`` ``redact`` settings, a drift field of a
provider) and the one way a concrete path is shown (a field diff).  Used by
:mod:`reel_core._match` and :mod:`reel_core._redact` alike, so it sits
below both.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Sequence

from ._errors import ConfigError

__all__ = ["WILDCARD", "JSONPath", "Segment", "format_path", "parse_path"]


class _Wildcard(enum.Enum):
    ANY = "*"


Segment = str | int | _Wildcard
JSONPath = tuple[Segment, ...]
WILDCARD = _Wildcard.ANY

_SEGMENT = re.compile(r"\.?([^.\[\]]+)|\[(\*|\d+)\]")


def parse_path(text: str) -> JSONPath:
    """Parse ``messages[*].id`` / ``metadata.user_id`` / ``a[0]`` into segments."""
    segments: list[Segment] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _SEGMENT.match(text, pos)
        if m is None or (m.group(0).startswith(".") and pos == 0):
            raise ConfigError(
                f"bad JSON path {text!r} at character {pos + 1}: "
                "use names, [N] and [*], e.g. messages[*].id"
            )
        name, index = m.groups()
        if name is not None:
            segments.append(name)
        elif index == "*":
            segments.append(WILDCARD)
        else:
            segments.append(int(index))
        pos = m.end()
    if not segments:
        raise ConfigError("an empty JSON path ignores nothing; name a field")
    return tuple(segments)


def format_path(path: Sequence[str | int]) -> str:
    """Render concrete segments as ``messages[3].content``."""
    out = ""
    for seg in path:
        if isinstance(seg, int):
            out += f"[{seg}]"
        elif re.fullmatch(r"[^.\[\]]+", seg):
            out += f".{seg}" if out else seg
        else:
            out += f"[{json.dumps(seg)}]"
    return out or "$"
