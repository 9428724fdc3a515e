"""Boundaries under the pytest plugin: a ``@pytest.mark.reel`` test (or one
using the ``reel`` fixture) records its tool calls on its own cassette and
replays them without running them, sync and async, functions and
generators; a tool that calls an LLM through ``reel.openai()`` is recorded
once; a swallowed miss of a call fails its test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.upstream import FakeUpstreamThread, closed_port_url
from tests.inner import inner_ini

from .conftest import FAKE_KEY

AGENT = """
import os

import pytest

from reel_bindings import boundary, tool

URL = os.environ["FAKE_URL"]


def ran(name):
    with open(os.environ["RUNS_FILE"], "a") as runs:
        runs.write(name + "\\n")


@tool
def lookup(order_id):
    ran("lookup")
    return {"id": order_id}


@tool
async def alookup(order_id):
    ran("alookup")
    return [order_id]


@boundary("pages", kind="retrieval")
def pages(n):
    ran("pages")
    yield from range(n)


@tool
async def apages(n):
    ran("apages")
    for i in range(n):
        yield i


@pytest.mark.reel
def test_sync():
    assert lookup("A-1") == {"id": "A-1"}
    assert list(pages(2)) == [0, 1]


@pytest.mark.reel
@pytest.mark.anyio
async def test_async():
    assert await alookup("A-2") == ["A-2"]
    assert [x async for x in apages(2)] == [0, 1]


def test_fixture_only(reel):
    assert lookup("A-3") == {"id": "A-3"}


def test_no_cassette():
    assert lookup("A-4") == {"id": "A-4"}


@pytest.mark.reel
def test_tool_calls_an_llm(reel):
    client = reel.openai(base_url=URL + "/v1", max_retries=0)

    @tool
    def summarize(topic):
        ran("summarize")
        reply = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": topic}]
        )
        return reply.choices[0].message.content

    assert summarize("What is Reel?") == "Fake reply to: What is Reel?"


@pytest.mark.reel
def test_swallowed_miss():
    try:
        lookup(os.environ["ORDER"])
    except Exception:
        pass
"""


def test_boundaries_record_and_replay_on_the_tests_cassette(
    pytester: pytest.Pytester, fake: FakeUpstreamThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini(inner_ini(keep=("anyio",)))  # the async test runs on anyio's plugin
    pytester.makepyfile(test_agent=AGENT)
    runs = pytester.path / "runs.txt"
    monkeypatch.setenv("RUNS_FILE", str(runs))
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.setenv("ORDER", "A-5")
    recorded = pytester.runpytest_subprocess("--reel-mode", "record")
    recorded.assert_outcomes(passed=7)  # the async test on asyncio and on trio
    ran = runs.read_text().split()
    assert sorted(ran) == sorted(
        ["lookup", "pages", *["alookup", "apages"] * 2, "lookup", "lookup", "summarize", "lookup"]
    )
    cassettes = pytester.path / "tests/cassettes/test_agent"
    assert sorted(p.name for p in cassettes.iterdir()) == [
        "test_async[asyncio].jsonl",
        "test_async[trio].jsonl",
        "test_fixture_only.jsonl",
        "test_swallowed_miss.jsonl",
        "test_sync.jsonl",
        "test_tool_calls_an_llm.jsonl",
    ]

    def calls(name: str) -> list[dict[str, object]]:
        text = (cassettes / name).read_text("utf-8")
        return [json.loads(line) for line in text.splitlines()[1:]]

    assert [c["call"] for c in calls("test_sync.jsonl")] == [
        {"name": "lookup", "kind": "tool", "args": {"order_id": "A-1"}},
        {"name": "pages", "kind": "retrieval", "args": {"n": 2}},
    ]
    (summarized,) = calls("test_tool_calls_an_llm.jsonl")  # the tool, not its HTTP
    assert summarized["result"] == {"json": "Fake reply to: What is Reel?"}
    before = {p.name: p.read_bytes() for p in cassettes.iterdir()}

    fake.stop()
    monkeypatch.setenv("FAKE_URL", closed_port_url())
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.setenv("ORDER", "A-6")
    runs.unlink()
    replayed = pytester.runpytest_subprocess()
    replayed.assert_outcomes(passed=6, failed=1)
    assert runs.read_text().split() == ["lookup"]  # test_no_cassette's: no cassette, it runs
    out = replayed.stdout.str()
    assert "test_swallowed_miss" in out
    assert "Reel: 1 request missed cassette" in out
    assert 'args.order_id: recorded "A-5", received "A-6"' in out
    assert {p.name: p.read_bytes() for p in cassettes.iterdir()} == before
    assert not Path(pytester.path / "tests/cassettes/test_agent/test_no_cassette.jsonl").exists()
