"""The per-test proxy keeps a stream its test left early whole.

A test that breaks out of a stream and ends at once stops its proxy while
the recording still reads the rest of the stream (the record grace): the
proxy's stop lets it finish, as the proxy does on SIGTERM.
"""

from __future__ import annotations

import json

import pytest

from tests.fakes.upstream import FakeUpstreamThread

from .conftest import FAKE_KEY

LEFT = """
import openai


def test_left_early(reel_proxy):
    client = openai.OpenAI(max_retries=0)
    stream = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "one two three four five six seven"}],
        stream=True,
        extra_headers={"x-fake-frame-delay-ms": "20"},
    )
    for _ in stream:
        break
    stream.close()
    client.close()
"""


def test_a_stream_left_early_is_recorded_whole(
    pytester: pytest.Pytester, fake: FakeUpstreamThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_left=LEFT)
    monkeypatch.setenv("REEL_UPSTREAM", fake.url)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    pytester.runpytest_subprocess("--reel-mode", "record").assert_outcomes(passed=1)
    cassette = pytester.path / "tests/cassettes/test_left/test_left_early.jsonl"
    (line,) = [json.loads(text) for text in cassette.read_text("utf-8").splitlines()[1:]]
    assert "cut" not in line["response"]
    assert line["response"]["frames"][-1][1] == "data: [DONE]\n\n"
