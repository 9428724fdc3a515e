"""Settings.from_env: the REEL_* variables an in-process binding reads, once."""

from __future__ import annotations

from pathlib import Path

import pytest

from reel_bindings._inprocess import IN_PROCESS_HINT
from reel_bindings._settings import Settings, mode_from_env, pii_from_env
from reel_bindings.httpcore import AsyncTransport, Transport
from reel_bindings.requests import Adapter
from reel_core import ConfigError, Limits, MatchConfig, MatchMode, Mode, Timing


def test_defaults_from_an_empty_environment() -> None:
    settings = Settings.from_env({})
    assert settings == Settings(mode=Mode.REPLAY, pii=True, max_body=None)
    config = settings.config()
    assert config.mode is Mode.REPLAY
    assert config.pii is None  # as the cassette says
    assert config.limits == Limits()


@pytest.mark.parametrize("value", ["0", "false", " OFF ", "No"])
def test_pii_switched_off(value: str) -> None:
    settings = Settings.from_env({"REEL_REDACT_PII": value})
    assert not settings.pii
    assert settings.config().pii is False
    assert not pii_from_env({"REEL_REDACT_PII": value})


@pytest.mark.parametrize("value", ["", "1", "yes", "on", "anything"])
def test_pii_stays_on(value: str) -> None:
    assert Settings.from_env({"REEL_REDACT_PII": value}).pii


def test_mode_from_the_environment_and_the_argument_wins() -> None:
    assert Settings.from_env({"REEL_MODE": " Auto "}).mode is Mode.AUTO
    assert Settings.from_env({"REEL_MODE": "auto"}, mode="record").mode is Mode.RECORD
    # a mode given is not overruled, and a bad REEL_MODE is then not read
    assert Settings.from_env({"REEL_MODE": "sometimes"}, mode=Mode.LIVE).mode is Mode.LIVE
    assert mode_from_env(None, {"REEL_MODE": "record"}) is Mode.RECORD


def test_a_bad_mode_lists_the_choices() -> None:
    with pytest.raises(ConfigError, match="unknown mode 'sometimes': use one of replay"):
        Settings.from_env({"REEL_MODE": "sometimes"})


def test_max_body() -> None:
    settings = Settings.from_env({"REEL_MAX_BODY": " 1024 "})
    assert settings.max_body == 1024
    assert settings.config().limits == Limits(max_body=1024)


@pytest.mark.parametrize("value", ["0", "-5", "lots", "1e6"])
def test_a_bad_max_body_names_the_variable(value: str) -> None:
    with pytest.raises(ConfigError, match=f"REEL_MAX_BODY='{value}' is not a positive number"):
        Settings.from_env({"REEL_MAX_BODY": value})


def test_config_takes_the_other_fields() -> None:
    match = MatchConfig(MatchMode.EXACT)
    config = Settings.from_env({"REEL_REDACT_PII": "0"}, mode="auto").config(
        match=match, timing=Timing.parse("fast"), hint="do this"
    )
    assert (config.mode, config.pii, config.match, config.hint) == (
        Mode.AUTO,
        False,
        match,
        "do this",
    )
    assert config.timing == Timing.parse("fast")


def test_the_in_process_bindings_build_their_config_with_the_hint(tmp_path: Path) -> None:
    """The pytest plugin hands its hint in; nothing replaces the config later."""
    cassette = tmp_path / "c.jsonl"
    cassette.write_text("")
    for binding in (
        Transport(cassette, hint="run pytest --reel-mode auto"),
        AsyncTransport(cassette, hint="run pytest --reel-mode auto"),
        Adapter(cassette, hint="run pytest --reel-mode auto"),
    ):
        assert binding.player.config.hint == "run pytest --reel-mode auto"
    assert Transport(cassette).player.config.hint == IN_PROCESS_HINT
