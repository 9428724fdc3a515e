from __future__ import annotations

import dataclasses

import pytest

from reel_core import (
    Config,
    ConfigError,
    Hints,
    Limits,
    MatchConfig,
    Mode,
    Redactor,
    Timing,
)


@pytest.mark.parametrize(
    ("text", "mode"),
    [
        ("replay", Mode.REPLAY),
        ("AUTO", Mode.AUTO),
        (" record\n", Mode.RECORD),
        ("Live", Mode.LIVE),
    ],
)
def test_mode_parse(text: str, mode: Mode) -> None:
    assert Mode.parse(text) is mode


@pytest.mark.parametrize("text", ["", "replays", "rec", "none"])
def test_mode_parse_lists_the_choices(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        Mode.parse(text)
    message = str(info.value)
    assert repr(text) in message
    for mode in Mode:
        assert mode.value in message
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__


def test_which_modes_record() -> None:
    assert {m for m in Mode if m.records} == {Mode.AUTO, Mode.RECORD}


def test_config_defaults() -> None:
    c = Config()
    assert c.mode is Mode.REPLAY
    assert c.match is None
    assert c.timing == Timing()
    assert c.repeat is None  # the cassette decides (repeat by default)
    assert c.redactor is None
    assert c.limits == Limits()
    assert c.hints == Hints()
    assert "REEL_" not in c.hints.miss  # the core names no binding's variable
    assert "--" not in c.hints.miss  # nor flag
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.mode = Mode.LIVE  # type: ignore[misc]


def test_config_is_a_value() -> None:
    a = Config(Mode.AUTO, MatchConfig(), Timing.parse("fast"), False, Redactor(pii=False))
    b = Config(Mode.AUTO, MatchConfig(), Timing.parse("fast"), False, Redactor(pii=False))
    assert a == b
    assert a != Config(Mode.RECORD)
