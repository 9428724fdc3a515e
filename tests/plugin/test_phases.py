"""The phase timer: Reel's own time in a run, reported apart when asked.

Off by default (no section, no ``phases`` in the JSON, the hooks on a
shared no-op); ``--reel-phases`` or ``REEL_PHASES=1`` turns it on, and
under xdist every worker's figures reach the controller's report.
"""

from __future__ import annotations

import gc
import json

import pytest

from reel_bindings import pytest_plugin
from reel_bindings._phases import PHASES, PhaseTimer, merged, render_phases

#: What the xdist controller has imported at its end (``controller.json``).
CONTROLLER_MODULES = """
import json
import sys


def pytest_unconfigure(config):
    if not hasattr(config, "workerinput"):
        with open("controller.json", "w") as f:
            json.dump(sorted(sys.modules), f)
"""

SUITE = """
import httpx


def test_one(reel):
    reel.openai()
    with httpx.Client(transport=reel.transport()) as client:
        assert client.get("https://api.openai.com/v1/models").status_code == 404


def test_two(reel):
    reel.transport()


def test_no_reel():
    pass
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "n2"])
def test_the_phases_are_reported_when_asked(pytester: pytest.Pytester, workers: list[str]) -> None:
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeconftest(CONTROLLER_MODULES)
    report = pytester.path / "report.json"
    result = pytester.runpytest_subprocess(
        *workers, "--reel-phases", f"--reel-report={report}", "-o", "reel_allow_misses=true"
    )
    result.assert_outcomes(passed=3)
    out = result.stdout.str()
    assert "reel phases" in out
    assert "of Reel's own in 2 tests" in out
    for phase in PHASES:
        assert f"  {phase} " in out
    figures = json.loads(report.read_text())["phases"]
    assert figures["tests"] == 2
    assert figures["processes"] == (3 if workers else 1)
    assert len(figures["workers"]) == (2 if workers else 0)
    seconds = figures["seconds"]
    assert set(seconds) == set(PHASES)
    for phase in ("imports", "setup", "open", "bindings", "teardown", "report"):
        assert seconds[phase] > 0, phase
    assert seconds["proxy"] == 0
    if workers:  # the controller runs no test: it imports no binding a test uses
        controller = json.loads((pytester.path / "controller.json").read_text())
        assert "reel_bindings.pytest_plugin" in controller
        assert "reel_bindings._inprocess" not in controller
        assert "reel_bindings.httpcore" not in controller


def test_the_variable_turns_it_on_and_a_bad_value_stops_the_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    monkeypatch.setenv("REEL_PHASES", "1")
    result = pytester.runpytest_subprocess("-o", "reel_allow_misses=true")
    result.assert_outcomes(passed=3)
    assert "reel phases" in result.stdout.str()
    monkeypatch.setenv("REEL_PHASES", "sometimes")
    result = pytester.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "REEL_PHASES takes 1 or 0" in result.stderr.str()


def test_off_by_default(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=SUITE)
    report = pytester.path / "report.json"
    result = pytester.runpytest_subprocess(
        f"--reel-report={report}", "-o", "reel_allow_misses=true"
    )
    result.assert_outcomes(passed=3)
    assert "reel phases" not in result.stdout.str()
    assert "phases" not in json.loads(report.read_text())
    # off, every hook's timing is the one shared no-op context
    assert pytest_plugin._TIMER is None
    assert pytest_plugin._phase("setup") is pytest_plugin._phase("open")


def test_a_phase_timed_inside_another_is_left_out_of_it() -> None:
    timer = PhaseTimer()
    clock = iter([0.0, 1.0, 3.0, 6.0])  # setup from 0 to 6, open from 1 to 3
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("reel_bindings._phases.time.perf_counter", lambda: next(clock))
        with timer.timed("setup"), timer.timed("open"):
            pass
    assert timer.seconds["setup"] == 4.0
    assert timer.seconds["open"] == 2.0
    figures = merged([timer.to_json(), timer.to_json()])
    assert figures["seconds"]["setup"] == 8.0
    assert figures["processes"] == 2
    lines = render_phases({**figures, "tests": 4})
    assert lines[0].startswith("reel phases: 12000.0 ms of Reel's own in 4 tests, 2 processes")
    assert "  open          4000.0 ms  1000.000 ms/test" in lines


def test_a_collection_counts_as_gc_not_as_the_phase_it_fell_in() -> None:
    timer = PhaseTimer()
    try:
        # open runs from 1 to 9; a collection from 3 to 7 inside it, one from
        # 10 to 12 outside every phase
        clock = iter([1.0, 3.0, 7.0, 9.0, 10.0, 12.0])
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("reel_bindings._phases.time.perf_counter", lambda: next(clock))
            with timer.timed("open"):
                timer._collector("start", {"generation": 2})
                timer._collector("stop", {"generation": 2})
            timer._collector("start", {"generation": 0})
            timer._collector("stop", {"generation": 0})
        assert timer.seconds["open"] == 4.0
        assert timer.seconds["gc"] == 4.0
    finally:
        timer.close()


def test_the_timer_watches_the_real_collector_until_closed() -> None:
    timer = PhaseTimer()
    try:
        with timer.timed("setup"):
            gc.collect()
        assert timer.seconds["gc"] > 0
        assert timer.seconds["setup"] >= 0
    finally:
        timer.close()
    assert timer._collector not in gc.callbacks
    timer.close()  # twice: nothing left to stop
