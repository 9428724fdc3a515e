"""The ``slow`` marker (tests/slow.py): deselected by default, run under CI
or REEL_FULL, and an explicit ``-m`` decides alone."""

from __future__ import annotations

import pytest

from tests.inner import inner_ini

SUITE = """
import pytest

@pytest.mark.slow
def test_a_soak():
    pass

def test_quick():
    pass

@pytest.mark.slow
class TestStress:
    def test_one(self):
        pass
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for name in ("CI", "REEL_FULL"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(test_suite=SUITE)
    # the inner runs' ini: without it every installed plugin loads (in the dev
    # venv cassetter's and pytest-recording's options clash)
    pytester.makeini(inner_ini())
    return pytester


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess("-p", "tests.slow", "-p", "no:cacheprovider", *args)


def test_slow_tests_are_deselected_by_default(suite: pytest.Pytester) -> None:
    result = _run(suite)
    assert result.parseoutcomes() == {"passed": 1, "deselected": 2}
    result.stdout.fnmatch_lines(["slow tests: deselected (REEL_FULL=1, CI=true or -m slow*"])


@pytest.mark.parametrize(("name", "value"), [("CI", "true"), ("REEL_FULL", "1")])
def test_ci_or_reel_full_runs_them(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    result = _run(suite)
    assert result.parseoutcomes() == {"passed": 3}
    result.stdout.fnmatch_lines(["slow tests: included*"])


def test_they_run_first(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    result = _run(suite, "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "test_suite.py::test_a_soak",
            "test_suite.py::TestStress::test_one",
            "test_suite.py::test_quick",
        ]
    )


def test_a_false_value_does_not(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "false")
    monkeypatch.setenv("REEL_FULL", "0")
    assert _run(suite).parseoutcomes() == {"passed": 1, "deselected": 2}


def test_an_explicit_marker_expression_decides(suite: pytest.Pytester) -> None:
    assert _run(suite, "-m", "slow").parseoutcomes() == {"passed": 2, "deselected": 1}
