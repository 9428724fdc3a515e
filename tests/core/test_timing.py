from __future__ import annotations

import pytest

from reel_core import ConfigError, Timing
from reel_core.tools import TimingMode


def test_default_is_realtime() -> None:
    t = Timing()
    assert t.mode is TimingMode.REALTIME
    assert t.factor == 1.0
    assert str(t) == "realtime"
    assert t.schedule(1.25) == 1.25


@pytest.mark.parametrize(
    ("text", "mode", "factor", "shown"),
    [
        ("realtime", TimingMode.REALTIME, 1.0, "realtime"),
        ("fast", TimingMode.FAST, 1.0, "fast"),
        ("  FAST ", TimingMode.FAST, 1.0, "fast"),
        ("slow=2", TimingMode.SLOW, 2.0, "slow=2"),
        ("SLOW=0.5", TimingMode.SLOW, 0.5, "slow=0.5"),
        ("slow=1e1", TimingMode.SLOW, 10.0, "slow=10"),
    ],
)
def test_parse(text: str, mode: TimingMode, factor: float, shown: str) -> None:
    t = Timing.parse(text)
    assert t == Timing(mode, factor)
    assert str(t) == shown
    assert Timing.parse(str(t)) == t


@pytest.mark.parametrize(
    "text", ["slow=0", "slow=-1", "slow=abc", "slow=", "slow=inf", "slow=nan", "slow=-inf"]
)
def test_parse_bad_factor(text: str) -> None:
    with pytest.raises(ConfigError, match="slow=N needs a positive number"):
        Timing.parse(text)


@pytest.mark.parametrize("text", ["slow", "fast=2", "realtime=1", "", "turbo", "=2"])
def test_parse_bad_name(text: str) -> None:
    with pytest.raises(ConfigError, match="use realtime, fast or slow=N"):
        Timing.parse(text)


@pytest.mark.parametrize("factor", [0.0, -1.0, float("nan")])
def test_factor_must_be_positive(factor: float) -> None:
    with pytest.raises(ConfigError, match="timing factor must be positive"):
        Timing(TimingMode.SLOW, factor)


def test_schedule_per_mode() -> None:
    assert Timing(TimingMode.REALTIME).schedule(0.3) == 0.3
    assert Timing(TimingMode.FAST).schedule(0.3) == 0.0
    assert Timing(TimingMode.SLOW, 3.0).schedule(0.5) == 1.5
    # offsets stay absolute: the schedule of a later frame is never earlier
    slow = Timing(TimingMode.SLOW, 2.0)
    offsets = [0.0, 0.01, 0.5, 0.5, 2.0]
    deadlines = [slow.schedule(o) for o in offsets]
    assert deadlines == sorted(deadlines)
    assert deadlines == [0.0, 0.02, 1.0, 1.0, 4.0]


def test_timing_is_a_hashable_value() -> None:
    assert {Timing.parse("slow=2"), Timing(TimingMode.SLOW, 2.0)} == {Timing(TimingMode.SLOW, 2)}
