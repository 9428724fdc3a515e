"""WebSocket sessions under the plugin: the per-test proxy records and
replays them, a session that stops on a client message it does not match
fails the test with the miss (message index, field diff) even when the code
under test swallowed the close, and the run report counts the sessions
(terminal summary, ``--reel-report``, merged across xdist workers)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.fakes.realtime import FakeRealtime, serve_realtime
from tests.slow import WORKERS

from .conftest import FAKE_KEY

REALTIME = """
import os

import openai
import pytest


def turn(text):
    client = openai.OpenAI(max_retries=0)
    events = []
    with client.realtime.connect(model="gpt-realtime") as connection:
        events.append(connection.recv().type)
        connection.send({"type": "session.update",
                         "session": {"type": "realtime", "instructions": "Be brief."}})
        connection.send({"type": "conversation.item.create", "item": {
            "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": text}]}})
        connection.send({"type": "response.create"})
        for event in connection:
            events.append(event.type)
            if event.type in ("response.done", "error"):
                break
    return events


@pytest.mark.reel(proxy=True)
@pytest.mark.filterwarnings("ignore:connect\\\\(\\\\) must be used as a context manager")
def test_realtime():
    try:
        events = turn(os.environ.get("INNER_TEXT", "Say hello"))
    except Exception:
        return  # the code under test swallows whatever happens
    assert events
"""


@pytest.fixture
def realtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeRealtime]:
    with serve_realtime() as fake:
        monkeypatch.setenv("REEL_UPSTREAM", fake.url)
        monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
        yield fake


@pytest.mark.parametrize("workers", WORKERS)
def test_a_websocket_miss_fails_the_test_and_sessions_are_reported(
    pytester: pytest.Pytester,
    realtime: FakeRealtime,
    monkeypatch: pytest.MonkeyPatch,
    workers: list[str],
) -> None:
    if workers:
        pytest.importorskip("xdist", reason="pip install pytest-xdist (in the test extra)")
    pytester.makepyfile(test_rt=REALTIME)
    report = pytester.path / "report.json"
    recorded = pytester.runpytest_subprocess(
        "--reel-mode", "record", "--reel-report", str(report), *workers
    )
    recorded.assert_outcomes(passed=1)
    assert realtime.sessions == 1
    data = json.loads(report.read_text("utf-8"))
    assert data["totals"]["websocket"] == {"recorded": 1}
    (cassette,) = data["cassettes"]
    assert [(o["kind"], o["outcome"]) for o in cassette["outcomes"]] == [("websocket", "recorded")]

    replayed = pytester.runpytest_subprocess("--reel-report", str(report), *workers)
    replayed.assert_outcomes(passed=1)
    replayed.stdout.fnmatch_lines(["*0 stale, 0 superseded; WebSocket sessions: 1 hit"])
    assert json.loads(report.read_text("utf-8"))["totals"]["websocket"] == {"hit": 1}

    monkeypatch.setenv("INNER_TEXT", "Say goodbye")
    missed = pytester.runpytest_subprocess("--reel-report", str(report), "-v", *workers)
    missed.assert_outcomes(failed=1)
    missed.stdout.fnmatch_lines(
        [
            "*Reel: 1 WebSocket session missed cassette tests/cassettes/test_rt/test_realtime.jsonl"
            " (mode replay)*",
            "*WebSocket session *: client message 1 (websocket.messages*): does not match*",
            '*message.item.content[[]0[]].text: changed (recorded "Say hello", '
            'received "Say goodbye")',
            "*re-record it with `pytest test_rt.py::test_realtime --reel-mode record`*",
            "*miss      GET /v1/realtime (WebSocket)  [[]test_rt.py::test_realtime[]]",
        ]
    )
    totals = json.loads(report.read_text("utf-8"))["totals"]
    assert (totals["misses"], totals["websocket"]) == (1, {"miss": 1})

    # allowed, the miss is shown and counted, and the test passes
    allowed = pytester.runpytest_subprocess("-o", "reel_allow_misses=true", "-rP", *workers)
    allowed.assert_outcomes(passed=1)
    allowed.stdout.fnmatch_lines(
        [
            "Reel: 1 WebSocket session missed cassette tests/cassettes/test_rt/test_realtime.jsonl"
            " (mode replay). Misses are allowed for this test (allow_misses): it is not failed.",
            "*0 hits, 1 misses*",
        ]
    )
    assert realtime.sessions == 1  # replays never reached the upstream
