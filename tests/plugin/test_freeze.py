"""``@pytest.mark.reel(freeze=[...])``: a test records in one pytest run and
replays in another, and sees the same clock, uuid4 and random values (its
prompt holds them, so a replay matches only if they are the same)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.upstream import FakeUpstreamThread, closed_port_url
from tests.inner import inner_ini

from .conftest import FAKE_KEY

AGENT = """
import datetime
import json
import os
import random
import time
import uuid

import pytest

URL = os.environ["FAKE_URL"]
OUT = os.environ["SEEN_FILE"]


def seen():
    return {
        "time": time.time(),
        "now": datetime.datetime.now().isoformat(),
        "today": datetime.date.today().isoformat(),
        "uuid": str(uuid.uuid4()),
        "random": random.random(),
    }


def keep(name, values):
    with open(OUT, "a") as f:
        f.write(json.dumps({"test": name, **values}) + "\\n")


def ask(client, values):
    content = "It is " + json.dumps(values)
    reply = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": content}]
    )
    assert reply.choices[0].message.content


@pytest.fixture
def early():
    # a fixture of the test's own runs under the freeze too
    return time.time()


@pytest.mark.reel(freeze=["clock", "uuid", "random"])
def test_sync(reel, early):
    values = seen()
    assert values["time"] == early
    ask(reel.openai(base_url=URL + "/v1", max_retries=0), values)
    reel.frozen.advance(60)
    values["later"] = time.time()
    keep("sync", values)


@pytest.mark.anyio
@pytest.mark.reel(freeze=["clock", "uuid"])
async def test_async(reel):
    values = seen()
    del values["random"]  # not frozen here: real
    client = reel.async_openai(base_url=URL + "/v1", max_retries=0)
    async with client:
        await client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": json.dumps(values)}],
        )
    keep("async", values)


def test_outside_any_freeze(reel):
    assert abs(time.time() - datetime.datetime.now().timestamp()) < 5
    assert time.time() > 1.7e9
"""


def seen_by_test(path: Path) -> dict[str, dict[str, object]]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return {f"{row.pop('test')}{i}": row for i, row in enumerate(rows)}


def test_marker_freeze_records_then_replays_the_same_values(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini(inner_ini(keep=("anyio",)))
    pytester.makepyfile(test_agent=AGENT)
    recorded_file = pytester.path / "recorded.jsonl"
    monkeypatch.setenv("SEEN_FILE", str(recorded_file))
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    with FakeUpstreamThread() as fake:
        monkeypatch.setenv("FAKE_URL", fake.url)
        recorded = pytester.runpytest_subprocess("--reel-mode", "record", "-p", "no:randomly")
        recorded.assert_outcomes(passed=4)  # the async test on asyncio and on trio
    cassettes = pytester.path / "tests/cassettes/test_agent"
    meta = json.loads((cassettes / "test_sync.jsonl").read_text().splitlines()[0])["_meta"]
    assert sorted(meta["freeze"]) == ["clock", "random", "uuid"]
    assert (
        "freeze" not in (cassettes / "test_outside_any_freeze.jsonl").read_text()
        if (cassettes / "test_outside_any_freeze.jsonl").exists()
        else True
    )

    monkeypatch.setenv("FAKE_URL", closed_port_url())  # no upstream
    monkeypatch.delenv("OPENAI_API_KEY")
    replayed_file = pytester.path / "replayed.jsonl"
    monkeypatch.setenv("SEEN_FILE", str(replayed_file))
    monkeypatch.setenv("TZ", "Pacific/Auckland")  # another zone: the same local time
    replayed = pytester.runpytest_subprocess("-p", "no:randomly")
    replayed.assert_outcomes(passed=4)
    assert seen_by_test(replayed_file) == seen_by_test(recorded_file)
    sync = seen_by_test(recorded_file)["sync0"]
    assert sync["later"] == sync["time"] + 60  # type: ignore[operator]


def test_a_bad_freeze_marker_and_a_replay_without_bases(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_bad="""
import pytest

@pytest.mark.reel(freeze="clock")
def test_string(reel):
    pass

@pytest.mark.reel(freeze=["clocks"])
def test_unknown(reel):
    pass

@pytest.mark.reel(freeze=["clock"])
def test_no_cassette():
    pass
"""
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(errors=3)
    result.stdout.fnmatch_lines(
        [
            "*freeze= takes a list such as*not the string 'clock'*",
            "*freeze= takes clock, uuid, random (any of them), not 'clocks'*",
            "*freeze= asks for clock*run with REEL_MODE=auto*",
        ]
    )
    assert "Traceback" not in result.stdout.str()
