"""Where a test's cassette is, and which mode and timing it runs with."""

from __future__ import annotations

import pytest

from tests.inner import inner_ini

PATHS = """
import pytest


def test_default(reel, request):
    root = request.config.rootpath
    assert reel.path == root / "tests/cassettes/test_paths/test_default.jsonl"


@pytest.mark.parametrize("model", ["gpt-4o/mini", "a b", "x:y*z"])
def test_param(reel, model):
    assert reel.path.parent.name == "test_paths"
    safe = {"gpt-4o/mini": "gpt-4o-mini", "a b": "a-b", "x:y*z": "x-y-z"}[model]
    assert reel.path.name == f"test_param[{safe}].jsonl"


class TestGroup:
    def test_method(self, reel):
        assert reel.path.name == "TestGroup.test_method.jsonl"


@pytest.mark.reel("shared")
def test_named(reel, request):
    assert reel.path == request.config.rootpath / "tests/cassettes/test_paths/shared.jsonl"


@pytest.mark.reel(cassette="sub/other.json")
def test_named_kw(reel):
    assert reel.path.parts[-3:] == ("test_paths", "sub", "other.json")


@pytest.mark.reel("shared")
class TestMarked:
    @pytest.mark.reel("closer")
    def test_closest_wins(self, reel):
        assert reel.path.name == "closer.jsonl"

    def test_class_marker(self, reel):
        assert reel.path.name == "shared.jsonl"
"""


def test_default_paths(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_paths=PATHS)
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=9)
    # Replay opens cassettes, it never creates them.
    assert not (pytester.path / "tests").exists()


def test_cassette_dir_ini_option(pytester: pytest.Pytester) -> None:
    pytester.makeini(inner_ini("reel_cassette_dir = recorded/llm"))
    pytester.makepyfile(
        test_ini="""
        def test_where(reel, request):
            expected = request.config.rootpath / "recorded/llm/test_ini/test_where.jsonl"
            assert reel.path == expected
        """
    )
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["reel: mode replay (default), timing fast (default), *"])


MODES = """
import os

import pytest


def test_plain(reel):
    assert reel.mode.value == os.environ["EXPECT_PLAIN_MODE"]
    assert str(reel.timing) == os.environ["EXPECT_PLAIN_TIMING"]


@pytest.mark.reel(mode="live", timing="realtime")
def test_marked(reel):
    assert reel.mode.value == os.environ["EXPECT_MARKED_MODE"]
    assert str(reel.timing) == "realtime"  # the marker's timing wins, as its mode
"""


@pytest.mark.parametrize(
    ("option", "env", "plain", "marked"),
    [
        # one order for every setting: the marker, the flag, the variable
        # nothing set: replay (the marked test: the marker's mode)
        ([], {}, ("replay", "fast"), "live"),
        # $REEL_MODE and $REEL_TIMING: every test whose marker names neither
        ([], {"REEL_MODE": "AUTO", "REEL_TIMING": "slow=2"}, ("auto", "slow=2"), "live"),
        # the command line wins over the environment, the marker over both
        (
            ["--reel-mode", "record", "--reel-timing", "realtime"],
            {"REEL_MODE": "auto", "REEL_TIMING": "slow=2"},
            ("record", "realtime"),
            "live",
        ),
    ],
    ids=["defaults", "environment", "command-line"],
)
def test_mode_and_timing_precedence(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    option: list[str],
    env: dict[str, str],
    plain: tuple[str, str],
    marked: str,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("EXPECT_PLAIN_MODE", plain[0])
    monkeypatch.setenv("EXPECT_PLAIN_TIMING", plain[1])
    monkeypatch.setenv("EXPECT_MARKED_MODE", marked)
    pytester.makepyfile(test_modes=MODES)
    result = pytester.runpytest_inprocess(*option)
    result.assert_outcomes(passed=2)


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        ([], {"REEL_MODE": "replya"}, "*REEL_MODE: unknown mode 'replya'*"),
        (["--reel-timing", "slow"], {}, "*--reel-timing: bad timing 'slow'*"),
        (["--reel-mode", "fast"], {}, "*argument --reel-mode: invalid choice: 'fast'*"),
    ],
)
def test_bad_global_settings_stop_the_run(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    env: dict[str, str],
    message: str,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    pytester.makepyfile(test_nothing="def test_nothing(): pass")
    result = pytester.runpytest_inprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_bad_marker_arguments_fail_the_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_bad="""
        import pytest

        @pytest.mark.reel(mode="sometimes")
        def test_mode(reel):
            pass

        @pytest.mark.reel(match="approximately")
        def test_match(reel):
            pass

        @pytest.mark.reel(casette="x")
        def test_typo(reel):
            pass

        @pytest.mark.reel(timing="slow=0")
        def test_timing(reel):
            pass

        @pytest.mark.reel(match="fuzzy", ignore_fields=["a["])
        def test_path(reel):
            pass
        """
    )
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(errors=5)
    result.stdout.fnmatch_lines(
        [
            "*@pytest.mark.reel: mode=: unknown mode 'sometimes'*",
            "*@pytest.mark.reel: match='approximately': use one of exact, normalized*",
            "*@pytest.mark.reel: unknown argument(s) casette; use allow_misses, cassette, *",
            "*@pytest.mark.reel: timing=: bad timing 'slow=0'*",
            # a ConfigError is a ValueError too: it is not taken for a bad match name
            "*@pytest.mark.reel: bad JSON path 'a[' at character 2*",
        ],
        consecutive=False,
    )


BAD_VARIABLES = [
    ("REEL_MODE", "replya"),
    ("REEL_TIMING", "slow=0"),
    ("REEL_MAX_BODY", "lots"),
    ("REEL_MATCH", "approximately"),
]


def _message(variable: str, value: str) -> str:
    """The one wording of a bad variable (the settings parser's)."""
    from reel_bindings._settings import Settings
    from reel_core import ConfigError

    with pytest.raises(ConfigError) as info:
        Settings.from_env({variable: value})
    message = str(info.value)
    assert message.startswith(variable)  # it names the variable
    return message


@pytest.mark.parametrize(("variable", "value"), BAD_VARIABLES)
def test_a_bad_variable_says_the_same_from_every_entry_point(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    variable: str,
    value: str,
) -> None:
    from reel_bindings.httpcore import Transport
    from reel_bindings.proxy import parse_options
    from reel_bindings.requests import Adapter
    from reel_core import ConfigError

    message = _message(variable, value)
    # the proxy (and `reel MODE`): a usage error, exit 2
    with pytest.raises(SystemExit) as exit_info:
        parse_options([], environ={variable: value})
    assert exit_info.value.code == 2
    assert f"error: {message}\n" in capsys.readouterr().err
    # the in-process bindings: a ConfigError
    monkeypatch.setenv(variable, value)
    cassette = pytester.path / "c.jsonl"
    cassette.write_bytes(b"")
    for build in (Transport, Adapter):
        with pytest.raises(ConfigError) as info:
            build(cassette)
        assert str(info.value) == message
    # the pytest plugin: the run stops at once with it
    pytester.makepyfile(test_nothing="def test_nothing(): pass")
    result = pytester.runpytest_inprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"ERROR: {message}" in result.stderr.lines


MARKED_MISS = """
import httpx
import pytest


@pytest.mark.reel(mode="replay")
def test_marked_miss(reel):
    with httpx.Client(transport=reel.transport()) as client:
        client.post("https://api.openai.com/v1/chat/completions", json={"model": "m"})
"""


def test_a_miss_under_a_marked_mode_says_to_change_the_marker(pytester: pytest.Pytester) -> None:
    """The marker wins over --reel-mode, so the usual advice (rerun with
    --reel-mode auto) would change nothing: the miss says so."""
    pytester.makepyfile(test_marked=MARKED_MISS)
    result = pytester.runpytest_inprocess("--reel-mode", "auto")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*its marker's mode= wins over --reel-mode: set @pytest.mark.reel(mode='auto')*"]
    )
    result.stdout.no_fnmatch_line("*--reel-mode auto` to record*")
