"""Settings.from_env: the REEL_* variables an in-process binding reads, once."""

from __future__ import annotations

from pathlib import Path

import pytest

from reel_bindings._hints import IN_PROCESS_HINT
from reel_bindings._settings import (
    SettingError,
    Settings,
    mode_from_env,
    pii_from_env,
    port_from_env,
)
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
    assert (config.mode, config.pii, config.match, config.hints.miss) == (
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
        assert binding.player.config.hints.miss == "run pytest --reel-mode auto"
    assert Transport(cassette).player.config.hints.miss == IN_PROCESS_HINT


def test_timing_match_and_upstream_from_the_environment() -> None:
    settings = Settings.from_env(
        {"REEL_TIMING": " Slow=2 ", "REEL_MATCH": "EXACT", "REEL_UPSTREAM": "http://u:1"}
    )
    assert settings.timing == Timing.parse("slow=2")
    assert settings.match is MatchMode.EXACT
    assert settings.upstream == "http://u:1"
    assert not settings.mode_set
    assert Settings.from_env({"REEL_MODE": "replay"}).mode_set
    empty = Settings.from_env({"REEL_TIMING": " ", "REEL_MATCH": "", "REEL_UPSTREAM": ""})
    assert (empty.timing, empty.match, empty.upstream) == (None, None, None)


def test_a_value_given_wins_and_its_variable_is_not_read() -> None:
    bad = {
        "REEL_MODE": "x",
        "REEL_TIMING": "x",
        "REEL_MATCH": "x",
        "REEL_MAX_BODY": "x",
        "REEL_UPSTREAM": "http://env",
    }
    settings = Settings.from_env(
        bad,
        mode="auto",
        timing=Timing.parse("fast"),
        match=MatchMode.FUZZY,
        upstream="http://flag",
        max_body=5,
    )
    assert settings.mode is Mode.AUTO
    assert settings.mode_set
    assert settings.timing == Timing.parse("fast")
    assert (settings.match, settings.upstream, settings.max_body) == (
        MatchMode.FUZZY,
        "http://flag",
        5,
    )


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("REEL_TIMING", "soon", "REEL_TIMING: bad timing 'soon': use realtime, fast or slow=N"),
        ("REEL_MATCH", "close", "REEL_MATCH: unknown match mode 'close': use one of exact, "),
        ("REEL_MODE", "sometimes", "REEL_MODE: unknown mode 'sometimes'"),
    ],
)
def test_a_bad_variable_is_named_with_the_choices(variable: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.from_env({variable: value})
    assert str(info.value).startswith(message)


def test_port_from_env() -> None:
    assert port_from_env({}) is None
    assert port_from_env({"REEL_PORT": " 0 "}) == 0
    assert port_from_env({"REEL_PORT": "65535"}) == 65535
    for bad in ("65536", "-1", "http", "1.5"):
        with pytest.raises(ConfigError, match=f"REEL_PORT='{bad}' is not a TCP port"):
            port_from_env({"REEL_PORT": bad})


def test_the_proxy_says_a_bad_reel_port(capsys: pytest.CaptureFixture[str]) -> None:
    from reel_bindings.proxy import parse_options

    with pytest.raises(SystemExit) as info:
        parse_options([], environ={"REEL_PORT": "http"})
    assert info.value.code == 2
    assert "REEL_PORT='http' is not a TCP port" in capsys.readouterr().err
    assert parse_options(["--port", "9"], environ={"REEL_PORT": "http"}).port == 9  # flag wins
    assert parse_options([], environ={"REEL_PORT": "0"}).port == 0


def test_max_age_from_the_environment_and_the_proxy_flag() -> None:
    from reel_bindings._settings import Settings
    from reel_bindings.proxy._options import parse_options
    from reel_core import ConfigError

    assert Settings.from_env({"REEL_MAX_AGE": "7d"}).max_age == 7 * 86400
    assert Settings.from_env({"REEL_MAX_AGE": "7d"}).config().max_age == 7 * 86400
    assert Settings.from_env({}).max_age is None
    with pytest.raises(ConfigError, match="REEL_MAX_AGE='later': bad duration"):
        Settings.from_env({"REEL_MAX_AGE": "later"})
    options = parse_options(["--max-age", "12h"], {"REEL_MAX_AGE": "7d"})
    assert options.max_age == 12 * 3600  # the flag wins
    assert options.config().max_age == 12 * 3600
    assert parse_options([], {"REEL_MAX_AGE": "7d"}).config().max_age == 7 * 86400
    with pytest.raises(SystemExit) as exc:
        parse_options(["--max-age", "0s"], {})
    assert exc.value.code == 2


def test_drop_response_headers_from_the_environment_the_flag_and_the_bindings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from reel_bindings.proxy._options import parse_options

    env = {"REEL_DROP_RESPONSE_HEADERS": " X-Trace-Id, server ,"}
    assert Settings.from_env(env).drop_response_headers == ("server", "x-trace-id")
    assert Settings.from_env(env).config().drop_response_headers == ("server", "x-trace-id")
    assert Settings.from_env({}).config().drop_response_headers == ()
    given = Settings.from_env(env, drop_response_headers=["Via"])  # the variable is not read
    assert given.drop_response_headers == ("via",)
    with pytest.raises(ConfigError, match="REEL_DROP_RESPONSE_HEADERS='a b': drop_response_"):
        Settings.from_env({"REEL_DROP_RESPONSE_HEADERS": "a b"})
    with pytest.raises(ConfigError, match="drop_response_headers: give a list of header names"):
        Settings.from_env({}, drop_response_headers="x-a")
    options = parse_options(["--drop-response-header", "Via", "--drop-response-header", "x-a"], env)
    assert options.config().drop_response_headers == ("via", "x-a")  # the flags win
    assert parse_options([], env).config().drop_response_headers == ("server", "x-trace-id")
    with pytest.raises(SystemExit) as exc:
        parse_options(["--drop-response-header", "a:b"], {})
    assert exc.value.code == 2
    assert "--drop-response-header: drop_response_headers must name" in capsys.readouterr().err
    cassette = tmp_path / "c.jsonl"
    for binding in (Transport, AsyncTransport, Adapter):
        made = binding(cassette, mode="auto", drop_response_headers=["ETag"])
        assert made.player.config.drop_response_headers == ("etag",)


def test_a_store_scheme_unregistered_since_is_refused_again() -> None:
    """Settings are kept between resolves only when nothing outside their
    values decides them: a scheme registered for one resolve and gone for
    the next is refused the second time (it once came back from the cache)."""
    from reel_bindings import _store

    saved = dict(_store._SCHEMES)
    try:
        _store.register_store("gone", lambda url, **_: _store.MemoryStore(), example="gone://X")
        given = {"store": "gone://plugged"}
        assert Settings.resolve(given, {}).store == "gone://plugged"
        del _store._SCHEMES["gone"]
        with pytest.raises(SettingError, match=r"store=: unknown store gone://plugged"):
            Settings.resolve(given, {})
    finally:
        _store._SCHEMES.clear()
        _store._SCHEMES.update(saved)


def test_a_descriptor_file_changed_since_is_read_again(tmp_path: Path) -> None:
    """A descriptor set rewritten between two resolves (a test regenerating
    it) is the one the second resolve reads."""
    pytest.importorskip("google.protobuf", reason="descriptor sets need protobuf")
    from tests.protos import TINY_METHOD, tiny_set, xai_set

    path = tmp_path / "set.pb"
    path.write_bytes(tiny_set())
    first = Settings.resolve({"proto_descriptor": str(path)}, {}).proto_descriptor
    path.write_bytes(xai_set())
    second = Settings.resolve({"proto_descriptor": str(path)}, {}).proto_descriptor
    assert first is not None
    assert second is not None
    assert first.message_reader(TINY_METHOD) is not None
    assert second.message_reader(TINY_METHOD) is None
