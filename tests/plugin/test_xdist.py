"""Under pytest-xdist, tests on several workers record and replay one shared
cassette: every line whole, none lost, none twice."""

from __future__ import annotations

import json

import pytest

from tests.fakes.upstream import FakeUpstreamThread, closed_port_url

from .conftest import FAKE_KEY

pytest.importorskip("xdist", reason="pip install pytest-xdist (in the test extra)")

TESTS = 12

SHARED = f"""
import os

import pytest


@pytest.mark.reel("shared")
@pytest.mark.parametrize("n", range({TESTS}))
def test_shared(reel, n):
    client = reel.openai(base_url=os.environ["FAKE_URL"] + "/v1", max_retries=0)
    prompt = f"question {{n}}"
    messages = [{{"role": "user", "content": prompt}}]
    stream = client.chat.completions.create(model="gpt-4o-mini", messages=messages, stream=True)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == "Fake reply to: " + prompt
"""


@pytest.mark.slow
def test_workers_share_one_cassette(
    pytester: pytest.Pytester, fake: FakeUpstreamThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_shared=SHARED)
    cassette = pytester.path / "tests/cassettes/test_shared/shared.jsonl"
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)

    def prompts() -> list[str]:
        raw = cassette.read_bytes()
        assert raw.endswith(b"\n")
        lines = [json.loads(line) for line in raw.splitlines()]  # every line whole
        assert "_meta" in lines[0]
        assert all("_meta" not in line for line in lines[1:])
        return sorted(
            line["request"]["body"]["json"]["messages"][0]["content"] for line in lines[1:]
        )

    expected = sorted(f"question {n}" for n in range(TESTS))
    # An old recording: record mode starts the cassette afresh once per run
    # (the first test to open it), and every test after that adds to it.
    cassette.parent.mkdir(parents=True)
    cassette.write_text('{"_meta":{"schema":1,"match":"normalized"}}\n{"key":"sha256:old"}\n')
    result = pytester.runpytest_subprocess("-n", "4", "--reel-mode", "record")
    result.assert_outcomes(passed=TESTS)
    assert prompts() == expected
    recorded = cassette.read_bytes()

    # auto: every worker sees what the others recorded (it loads under the lock).
    pytester.runpytest_subprocess("-n", "4", "--reel-mode", "auto").assert_outcomes(passed=TESTS)
    assert cassette.read_bytes() == recorded

    fake.stop()
    monkeypatch.setenv("FAKE_URL", closed_port_url())
    monkeypatch.delenv("OPENAI_API_KEY")
    pytester.runpytest_subprocess("-n", "4").assert_outcomes(passed=TESTS)
    assert cassette.read_bytes() == recorded
    assert not list(cassette.parent.glob("*.lock"))
