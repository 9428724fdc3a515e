"""Freshness through the pytest plugin: max_age per test, per run (flag,
variable, ini), stale replays reported (and failing the run under
--reel-strict-age), stale recordings re-recorded in auto mode with the drift
of their new shape reported -- on the file store and on Redis, serial and
with xdist."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import pytest

from tests.fakes.upstream import FakeUpstreamThread
from tests.fakes.wire import Reply
from tests.inner import inner_ini
from tests.slow import STORES, WORKERS

from .conftest import FAKE_KEY

TESTS = """
import os

import httpx
import pytest

URL = os.environ["FAKE_URL"]


def ask(reel, prompt):
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": prompt}]}
    headers = {"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}
    with httpx.Client(transport=reel.transport()) as client:
        return client.post(URL + "/v1/chat/completions", json=body, headers=headers).json()


@pytest.mark.reel("fresh")
def test_one(reel):
    ask(reel, "one")


@pytest.mark.reel("fresh")
def test_two(reel):
    ask(reel, "two")


@pytest.mark.reel("fresh", max_age="100w")
def test_lenient(reel):
    ask(reel, "lenient")
"""

#: A month ago: stale under 7d, fresh under the lenient test's 100w.
OLD = (datetime.now(timezone.utc) - timedelta(days=30)).isoformat(timespec="milliseconds")

Reader = Callable[[str], bytes | None]
Writer = Callable[[str, bytes], None]


@pytest.fixture(params=STORES)
def store(
    request: pytest.FixtureRequest, pytester: pytest.Pytester
) -> tuple[list[str], Reader, Writer]:
    if request.param == "files":
        root = pytester.path / "tests/cassettes"

        def read(name: str) -> bytes | None:
            path = root / name
            return path.read_bytes() if path.exists() else None

        def write(name: str, data: bytes) -> None:
            (root / name).write_bytes(data)

        return [], read, write
    from reel_bindings._store_url import open_store

    url: str = request.getfixturevalue("redis_url")
    redis = open_store(url)
    return ["--reel-store", url], redis.read, redis.replace


@pytest.fixture
def project(
    pytester: pytest.Pytester, fake: FakeUpstreamThread, monkeypatch: pytest.MonkeyPatch
) -> pytest.Pytester:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    pytester.makepyfile(test_fresh=TESTS)
    return pytester


def lines(data: bytes | None) -> list[dict[str, object]]:
    assert data is not None
    return [json.loads(line) for line in data.splitlines()[1:] if line.strip()]


def prompt(line: dict[str, object]) -> str:
    request = line["request"]
    assert isinstance(request, dict)
    return str(request["body"]["json"]["messages"][0]["content"])


def aged(project: pytest.Pytester, store: tuple[list[str], Reader, Writer]) -> bytes:
    """The cassette recorded by a first run, every line stamped in 2020."""
    args, read, write = store
    result = project.runpytest_subprocess("--reel-mode", "auto", *args)
    result.assert_outcomes(passed=3)
    data = read("test_fresh/fresh.jsonl")
    assert data is not None
    meta, *rest = data.split(b"\n")
    stamped = [meta]
    for raw in rest:
        if raw:
            obj = json.loads(raw)
            obj["ts"] = OLD
            stamped.append(json.dumps(obj, separators=(",", ":")).encode())
    old = b"\n".join(stamped) + b"\n"
    write("test_fresh/fresh.jsonl", old)
    return old


@pytest.mark.parametrize("workers", WORKERS)
def test_replay_reports_stale_recordings_and_strict_age_fails_the_run(
    project: pytest.Pytester,
    fake: FakeUpstreamThread,
    store: tuple[list[str], Reader, Writer],
    workers: list[str],
) -> None:
    if workers:
        pytest.importorskip("xdist", reason="pip install pytest-xdist (in the test extra)")
    args, read, _ = store
    old = aged(project, store)
    fake.stop()  # a replay needs no network
    report = project.path / "report.json"
    result = project.runpytest_subprocess(
        "--reel-max-age", "7d", "--reel-report", str(report), *args, *workers
    )
    result.assert_outcomes(passed=3)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "*fresh.jsonl (*): 3 hits, 0 misses, 0 recorded, 2 stale, 0 superseded",
            "*stale     POST /v1/chat/completions: recorded *d ago, max_age 7d  "
            "?test_fresh.py::test_one?",
        ]
    )
    data = json.loads(report.read_text())
    assert data["totals"]["stale"] == 2
    assert sorted(s["test"] for s in data["stale"]) == [
        "test_fresh.py::test_one",
        "test_fresh.py::test_two",
    ]
    assert {s["recorded"] for s in data["stale"]} == {OLD}
    assert {s["max_age_seconds"] for s in data["stale"]} == {7 * 86400}
    assert read("test_fresh/fresh.jsonl") == old  # replay writes nothing

    strict = project.runpytest_subprocess(
        "--reel-max-age", "7d", "--reel-strict-age", *args, *workers
    )
    strict.assert_outcomes(passed=3)
    assert strict.ret == 1
    strict.stdout.fnmatch_lines(["*2 stale recordings served: the run fails (--reel-strict-age)*"])


def test_auto_re_records_stale_recordings_and_reports_drift(
    project: pytest.Pytester, fake: FakeUpstreamThread, store: tuple[list[str], Reader, Writer]
) -> None:
    args, read, _ = store
    aged(project, store)
    new_shape = json.dumps(
        {"id": "chatcmpl-2", "object": "chat.completion", "choices": [], "brand_new": 1}
    ).encode()
    fake.push_reply(Reply(200, (("content-type", "application/json"),), (new_shape,)))
    report = project.path / "report.json"
    result = project.runpytest_subprocess(
        "test_fresh.py::test_one",
        "test_fresh.py::test_lenient",
        "--reel-mode",
        "auto",
        "--reel-max-age",
        "7d",
        "--reel-report",
        str(report),
        *args,
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*fresh.jsonl (*): 1 hits, 0 misses, 1 recorded, 0 stale, 1 superseded",
            "*drift     POST /v1/chat/completions: *+ brand_new: number*- usage: object*",
        ]
    )
    got = lines(read("test_fresh/fresh.jsonl"))
    assert [(prompt(line), line.get("gen", 0)) for line in got] == [
        ("one", 0),
        ("two", 0),
        ("lenient", 0),  # the marker's 100w wins over the run's 7d: kept
        ("one", 1),
    ]
    data = json.loads(report.read_text())
    assert data["totals"]["superseded"] == 1
    [drift] = data["drift"]
    assert drift["test"] == "test_fresh.py::test_one"
    assert drift["old"]["id"] == got[0]["id"]
    assert drift["new"]["id"] == got[3]["id"]
    assert "+ brand_new: number" in drift["changes"]
    assert "- usage.total_tokens: number" in drift["changes"]

    # the next replay serves the new line, fresh
    fake.stop()
    replay = project.runpytest_subprocess(
        "test_fresh.py::test_one", "--reel-max-age", "7d", "--reel-strict-age", *args
    )
    replay.assert_outcomes(passed=1)
    assert replay.ret == 0


def test_a_failing_test_supersedes_nothing(
    project: pytest.Pytester, fake: FakeUpstreamThread, store: tuple[list[str], Reader, Writer]
) -> None:
    args, read, _ = store
    old = aged(project, store)
    failing = """

@pytest.mark.reel("fresh", max_age="1d")
def test_fails(reel):
    ask(reel, "one")
    assert False
"""
    project.makepyfile(test_fresh=TESTS + failing)
    result = project.runpytest_subprocess("test_fresh.py::test_fails", "--reel-mode", "auto", *args)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*0 hits, 0 misses, 0 recorded, 0 stale, 0 superseded*"])
    assert read("test_fresh/fresh.jsonl") == old


@pytest.mark.parametrize(
    ("how", "value"),
    [("env", "7d"), ("ini", "7d")],
)
def test_the_run_max_age_from_the_environment_and_the_ini(
    project: pytest.Pytester,
    store: tuple[list[str], Reader, Writer],
    monkeypatch: pytest.MonkeyPatch,
    how: str,
    value: str,
) -> None:
    args, _, _ = store
    aged(project, store)
    if how == "env":
        monkeypatch.setenv("REEL_MAX_AGE", value)
    else:
        project.makeini(inner_ini(f"reel_max_age = {value}"))
    result = project.runpytest_subprocess("test_fresh.py::test_one", *args)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*1 hits, 0 misses, 0 recorded, 1 stale, 0 superseded*"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--reel-max-age", "soon"], "--reel-max-age: bad duration 'soon'"),
        (["--reel-max-age", "0s"], "--reel-max-age: bad duration '0s': it must be more than zero"),
    ],
)
def test_a_bad_run_max_age_stops_the_run(
    project: pytest.Pytester, args: list[str], message: str
) -> None:
    result = project.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])


def test_bad_max_age_in_the_environment_ini_and_marker(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REEL_MAX_AGE", "a while")
    result = project.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*REEL_MAX_AGE='a while': bad duration*"])
    monkeypatch.delenv("REEL_MAX_AGE")
    project.makeini(inner_ini("reel_max_age = never"))
    result = project.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*reel_max_age = 'never': bad duration*"])
    project.makeini(inner_ini())
    project.makepyfile(
        test_marker="""
import pytest

@pytest.mark.reel(max_age="-3d")
def test_a(reel):
    pass

@pytest.mark.reel(max_age=["7d"])
def test_b(reel):
    pass
"""
    )
    result = project.runpytest_subprocess("test_marker.py")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        [
            "*@pytest.mark.reel: max_age=: bad duration '-3d'*",
            "*@pytest.mark.reel: max_age= takes a duration such as '7d' or seconds, not ?'7d'?*",
        ]
    )


def test_the_proxy_of_a_test_reports_stale_replays(
    project: pytest.Pytester, fake: FakeUpstreamThread, store: tuple[list[str], Reader, Writer]
) -> None:
    args, _, _ = store
    project.makepyfile(
        test_proxied="""
import os

import httpx
import pytest


@pytest.mark.reel("proxied", proxy=True, upstream=os.environ["FAKE_URL"], max_age="1h")
def test_proxied(reel):
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "p"}]}
    headers = {"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}
    url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
    httpx.post(url, json=body, headers=headers).raise_for_status()
"""
    )
    first = project.runpytest_subprocess("test_proxied.py", "--reel-mode", "auto", *args)
    first.assert_outcomes(passed=1)
    _, read, write = store
    data = read("test_proxied/proxied.jsonl")
    assert data is not None
    meta, line = data.splitlines()
    obj = json.loads(line)
    obj["ts"] = OLD
    write("test_proxied/proxied.jsonl", meta + b"\n" + json.dumps(obj).encode() + b"\n")
    result = project.runpytest_subprocess("test_proxied.py", *args)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*1 hits, 0 misses, 0 recorded, 1 stale, 0 superseded*"])
