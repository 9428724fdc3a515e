"""The suite benchmark's harness (``bench/suite*.py``) and the guards of
``bench/run.py``: what makes their figures trustworthy, never a figure.

- every call of the generated suite has one answer, the same from the fake
  upstream and from the floor's MockTransport, through the real OpenAI SDK
  (its retries included, waiting a millisecond, not its default backoff);
- a replay that reaches the upstream stops the section, even when its tests
  pass: the tripwire counts it;
- the guards read PASS, FAIL or NOT RUN off a run's figures, at their bounds;
- the profile split counts Reel's time where pytest, the SDK or the test
  enter it, never twice.
"""

from __future__ import annotations

import cProfile
import dataclasses
import json
import os
import pstats
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from bench import run as bench_run
from bench import suite, suite_calls, suite_upstream
from bench.suite_gen import TOOLS, Tool, write_suite
from hypothesis import given
from hypothesis import strategies as st

tests = st.integers(min_value=0, max_value=100_000)


@given(tests)
def test_every_call_has_one_answer(test: int) -> None:
    calls = suite_calls.calls_of(test)
    assert 1 <= len(calls) <= 5
    no_streams = suite_calls.calls_of(test, streams=False)
    assert [(c.index, c.retry) for c in no_streams] == [(c.index, c.retry) for c in calls]
    assert not any(c.stream for c in no_streams)
    for call in calls:
        assert not (call.stream and call.retry), "a call streams or retries, not both"
        body = json.dumps(
            {
                "model": suite_calls.MODEL,
                "messages": [{"role": "user", "content": suite_calls._question(call)}],
                "stream": call.stream,
            }
        ).encode()
        status, headers, content = suite_calls.answer(body, 0)
        if call.retry is not None:
            assert status == call.retry
            assert ("retry-after-ms", "1") in headers
            status, headers, content = suite_calls.answer(body, 1)
        assert status == 200
        text = suite_calls.reply_text(test, call.index)
        if call.stream:
            frames = [f for f in content.decode().split("\n\n") if f]
            assert frames[-1] == "data: [DONE]"
            pieces = [json.loads(f.removeprefix("data: ")) for f in frames[:-1]]
            assert "".join(p["choices"][0]["delta"]["content"] for p in pieces) == text
        else:
            assert json.loads(content)["choices"][0]["message"]["content"] == text


def test_the_suite_streams_a_fifth_and_retries_some() -> None:
    calls = [c for t in range(1_000) for c in suite_calls.calls_of(t)]
    streamed = sum(c.stream for c in calls) / len(calls)
    retried = [c.retry for c in calls if c.retry]
    assert 0.15 <= streamed <= 0.25
    assert {429, 500} <= set(retried)
    assert 2.5 <= len(calls) / 1_000 <= 3.5


def test_the_floor_answers_every_call_through_the_sdk() -> None:
    """The floor's MockTransport through the real SDK: each test's answers
    check, and a retried call is asked twice (the SDK retried it)."""
    handler = suite_calls.mock_handler()
    asked: list[bytes] = []

    def counting(request: httpx2.Request) -> Any:
        asked.append(request.read())
        return handler(request)

    client = openai.OpenAI(
        api_key="sk-test", http_client=httpx2.Client(transport=httpx2.MockTransport(counting))
    )
    for test in range(40):
        suite_calls.ask(client, test)
    expected = sum(1 + (c.retry is not None) for t in range(40) for c in suite_calls.calls_of(t))
    assert len(asked) == expected


@pytest.mark.parametrize("module", ["bench._answers", "bench.suite_calls", "bench.suite_upstream"])
def test_what_a_floor_imports_holds_none_of_reel(module: str) -> None:
    """The helpers a generated suite's conftest and fake upstream import
    (the floor's too) import no Reel: Reel's imports count as Reel's, in
    every process (a floor that imported the core would hide them)."""
    root = Path(__file__).resolve().parents[2]
    script = (
        f"import sys; sys.path.insert(0, {str(root)!r}); import {module}; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('reel_core', 'reel_bindings')))"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", script], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_a_wrong_answer_fails_the_test() -> None:
    def wrong(request: httpx2.Request) -> httpx2.Response:
        body = request.read()
        status, headers, content = suite_calls.answer(body.replace(b"test 3 ", b"test 4 "), 1)
        return httpx2.Response(status, headers=headers, content=content)

    client = openai.OpenAI(
        api_key="sk-test", http_client=httpx2.Client(transport=httpx2.MockTransport(wrong))
    )
    with pytest.raises(AssertionError, match=r"call 3\.0"):
        suite_calls.ask(client, 3)


@pytest.fixture
def upstream(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    # the fake upstream's state is the module's: each test starts from a
    # fresh one (another test in this worker may have left it a tripwire)
    monkeypatch.setattr(suite_upstream, "STATE", suite_upstream._State())
    server = ThreadingHTTPServer(("127.0.0.1", 0), suite_upstream._Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def _post(url: str, body: bytes) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_the_tripwire_counts_every_request(upstream: str) -> None:
    body = json.dumps({"messages": [{"content": "Suite test 0 call 0"}]}).encode()
    assert suite._control(upstream, "record")["tripwire"] is False
    assert _post(f"{upstream}/v1/chat/completions", body)[0] == 200
    assert suite._control(upstream, "tripwire")["count"] == 0
    status, _ = _post(f"{upstream}/v1/chat/completions", body)
    assert status == 418
    assert _post(f"{upstream}/v1/anything", b"")[0] == 418
    assert suite._control(upstream, "tripwire")["count"] == 2  # read, then zeroed
    assert suite._control(upstream, "tripwire")["count"] == 0


#: A "tool" whose tests pass on the floor's answers but also send one
#: request each to the upstream, as a replay that leaks would.
_LEAKY = Tool(
    name="leaky",
    plugin=None,
    record_flags=None,
    mark="[]",
    fixtures="",
    body=(
        "import httpx2\n\n"
        "httpx2.post(os.environ['OPENAI_BASE_URL'] + '/chat/completions', content=b'{}')\n"
        "return suite_wiring.mock_client()"
    ),
    shared="return mock_client()",
)


@pytest.mark.parametrize("tool", [_LEAKY, TOOLS["floor"]], ids=["leaky", "floor"])
def test_a_replay_that_reaches_the_upstream_stops_the_section(
    tool: Tool, upstream: str, tmp_path: Path
) -> None:
    directory = write_suite(tmp_path / tool.name, tool, 2, streams=True)
    env = suite._environment(upstream)
    suite._control(upstream, "tripwire")
    config = suite.Config(tool.name, "streams", "per-test", 0)
    if tool is TOOLS["floor"]:
        timed = suite._replay(directory, tool, 2, config, env, upstream)
        assert timed.wall > 0
        assert timed.cpu > 0
        return
    with pytest.raises(suite.SuiteError, match="sent 2 request"):
        suite._replay(directory, tool, 2, config, env, upstream)


def test_a_failing_suite_stops_the_section(upstream: str, tmp_path: Path) -> None:
    # a plain client: the tripwire answers it 418, so the tests fail
    body = "import openai\n\nreturn openai.OpenAI()"
    plain = dataclasses.replace(TOOLS["floor"], name="plain", body=body)
    directory = write_suite(tmp_path / "plain", plain, 2, streams=False)
    env = suite._environment(upstream)
    suite._control(upstream, "tripwire")
    config = suite.Config("plain", "no-streams", "per-test", 0)
    with pytest.raises(suite.SuiteError, match="did not pass its 2 tests"):
        suite._replay(directory, plain, 2, config, env, upstream)


# -- the guards ------------------------------------------------------------------


def _record_row(ttfb: float, total: float, ttfb_vs: float, total_vs: float) -> dict[str, Any]:
    return {
        "added_ttfb_p50_us": ttfb,
        "added_total_p50_us": total,
        "ttfb_vs_relay": ttfb_vs,
        "total_vs_relay": total_vs,
    }


@pytest.mark.parametrize(
    ("worst", "passed"), [(1.0, True), (2.5, True), (2.51, False), (9.0, False)]
)
def test_first_play_guard(worst: float, passed: bool) -> None:
    rows = [{"reel_vs_floor": 1.1}, {"reel_vs_floor": worst}]
    (first, *_) = bench_run.guards({"replay": rows})
    assert first["passed"] is passed
    assert first["figure"] == f"{max(1.1, worst)}x"


@pytest.mark.parametrize(
    ("row", "added", "relay"),
    [
        (_record_row(900, 1500, 1.2, 2.0), True, True),
        (_record_row(1501, 700, 1.2, 1.4), False, True),
        (_record_row(700, 800, 2.01, 1.0), True, False),
    ],
)
def test_record_guards_take_the_worst_figure(row: dict[str, Any], added: bool, relay: bool) -> None:
    quiet = _record_row(100, 100, 1.0, 1.0)
    _, by_added, by_relay = bench_run.guards({"record": [quiet, row]})
    assert (by_added["passed"], by_relay["passed"]) == (added, relay)


def test_the_relay_ratio_leaves_out_a_streams_total_but_not_its_time() -> None:
    # a stream's total: a few hundred us over 40 ms of the upstream's sleeps,
    # which a difference of medians cannot resolve; its TTFB and the absolute
    # guard still count
    stream = {**_record_row(900, 1400, 1.5, 9.0), "request": "stream (SSE)"}
    plain = {**_record_row(400, 450, 1.4, 1.6), "request": "non-stream"}
    _, by_added, by_relay = bench_run.guards({"record": [plain, stream]})
    assert by_relay["passed"] is True
    assert by_relay["figure"] == "1.6x (non-stream total)"
    assert by_added["figure"] == "1.40 ms (stream (SSE) total)"
    slow = {**stream, "ttfb_vs_relay": 2.2}
    _, _, by_relay = bench_run.guards({"record": [plain, slow]})
    assert (by_relay["passed"], by_relay["figure"]) == (False, "2.2x (stream (SSE) ttfb)")


def test_guards_not_measured_say_so() -> None:
    lines = bench_run.guard_lines(bench_run.guards({}))
    assert len(lines) == 3
    assert all(line.startswith("NOT RUN") and "--only" in line for line in lines)
    failed = bench_run.guards({"replay": [{"reel_vs_floor": 3.0}]})
    assert bench_run.guard_lines(failed)[0].startswith("FAIL")


# -- Reel's cost split ------------------------------------------------------------

_PLUGIN = os.path.join("x", "reel_bindings", "pytest_plugin.py")
_FILES = os.path.join("x", "reel_bindings", "_files.py")
_TRANSPORT = os.path.join("x", "reel_bindings", "_sync", "transport.py")
_CORE = os.path.join("x", "reel_core", "_engine.py")
_PYTEST = os.path.join("x", "_pytest", "fixtures.py")
_HTTPX = os.path.join("x", "httpx2", "_client.py")


def _stats(table: dict[Any, Any]) -> pstats.Stats:
    profile = cProfile.Profile()
    profile.enable()
    profile.disable()
    stats = pstats.Stats(profile)
    stats.stats = table  # type: ignore[attr-defined]  # pstats' own table
    return stats


def _edge(ct: float) -> tuple[int, int, float, float]:
    return (1, 1, 0.0, ct)


def test_the_split_counts_entries_once() -> None:
    fixture = (_PLUGIN, 1, "reel")
    opened = (_FILES, 1, "__init__")
    handle = (_TRANSPORT, 1, "handle_request")
    decide = (_CORE, 1, "decide")
    configure = (_PLUGIN, 2, "pytest_configure")
    table = {
        # pytest resumes the fixture through next(): 3 s, 1 of it opening the cassette
        fixture: (2, 2, 0.5, 3.0, {("~", 0, "<built-in method builtins.next>"): _edge(3.0)}),
        opened: (1, 1, 0.2, 1.0, {fixture: _edge(1.0)}),
        # the SDK's client calls the transport: 2 s, the engine inside it
        handle: (4, 4, 0.5, 2.0, {(_HTTPX, 1, "_send_single_request"): _edge(2.0)}),
        decide: (4, 4, 1.5, 1.5, {handle: _edge(1.5), ("<string>", 1, "__init__"): _edge(0.1)}),
        # once per run
        configure: (1, 1, 0.1, 0.4, {(_PYTEST, 1, "_multicall"): _edge(0.4)}),
        (_PLUGIN, 3, "<module>"): (1, 1, 0.1, 0.3, {(_PYTEST, 1, "import"): _edge(0.3)}),
        (_CORE, 9, "__hash__"): (9, 9, 0.1, 0.1, {("~", 0, "<method 'get'>"): _edge(0.1)}),
    }
    parts = suite.entry_times(_stats(table))
    assert parts == {
        "fixtures (setup, teardown)": pytest.approx(2.0),
        "cassette open": pytest.approx(1.0),
        "requests (transport, replayed body)": pytest.approx(2.0),
        "run start (pytest_configure: settings, the core's imports)": pytest.approx(0.4),
    }
