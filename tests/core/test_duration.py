"""max_age durations: one parser, a clear error."""

from __future__ import annotations

import pytest

from reel_core import ConfigError
from reel_core.tools import parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("30m", 1800),
        ("12h", 43200),
        ("7d", 604800),
        ("2w", 1209600),
        (" 1.5H ", 5400),
        ("45", 45),
        (60, 60),
        (0.5, 0.5),
    ],
)
def test_durations(text: str | float, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text", ["", "d", "7 days", "-1d", "1y", "7d2h", "nan", True, 0, -5, "0s", float("inf")]
)
def test_bad_durations(text: object) -> None:
    with pytest.raises(ConfigError, match="bad duration"):
        parse_duration(text)  # type: ignore[arg-type]
