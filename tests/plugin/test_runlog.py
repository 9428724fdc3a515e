"""The plugin reads its bindings' run logs: a test's misses, and the run
report's counts and outcomes.  A test that misses more often than a run log
keeps is still failed and counted in full (each binding keeps its first
hundred misses, and says how many more there were)."""

from __future__ import annotations

import json
import textwrap

import pytest

from .test_misses import sections

MANY = """
import httpx
import pytest


@pytest.mark.reel(cassette="empty.jsonl")
def test_many_misses(reel):
    with httpx.Client(transport=reel.transport()) as client:
        for n in range(150):
            body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": str(n)}]}
            assert client.post("http://api.test/v1/chat/completions", json=body).status_code == 404
    with httpx.Client(transport=reel.transport()) as client:
        body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "again"}]}
        assert client.post("http://api.test/v1/chat/completions", json=body).status_code == 404
    assert len(reel.misses) == 101  # the first hundred of one transport, the other's one
"""


def test_misses_past_what_a_run_log_keeps_are_counted_and_fail_the_test(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_many=textwrap.dedent(MANY))
    report = pytester.path / "report.json"
    result = pytester.runpytest_subprocess("--reel-report", str(report))
    result.assert_outcomes(failed=1)
    failure = sections(result.stdout.str())["test_many_misses"]
    assert failure.startswith("Reel: 151 requests missed cassette")
    assert failure.count("Reel miss: no recording matches") == 101
    assert "(50 more not shown: each binding keeps its first 100.)" in failure
    (cassette,) = json.loads(report.read_text("utf-8"))["cassettes"]
    assert cassette["misses"] == 151
    assert [o["outcome"] for o in cassette["outcomes"]] == ["miss"] * 151
