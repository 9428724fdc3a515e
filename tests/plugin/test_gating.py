"""Outcome-gated recording: what a test records is kept only when it passed
(unless ``record_on="always"``); a failing, erroring or xfail test leaves its
cassette byte for byte as it was -- on the file store and on Redis, with and
without xdist."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from tests.fakes.upstream import FakeUpstreamThread
from tests.inner import inner_ini
from tests.slow import STORES, WORKERS

from .conftest import FAKE_KEY

GATE = """
import os

import httpx
import pytest

URL = os.environ["FAKE_URL"]


def ask(reel, prompt):
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": prompt}]}
    headers = {"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}
    with httpx.Client(transport=reel.transport()) as client:
        client.post(URL + "/v1/chat/completions", json=body, headers=headers).raise_for_status()


@pytest.fixture
def broken_teardown():
    yield
    raise RuntimeError("this fixture's teardown broke")


@pytest.mark.reel("gate")
def test_passes(reel):
    ask(reel, "passes")


@pytest.mark.reel("gate")
def test_fails(reel):
    ask(reel, "fails")
    assert False


@pytest.mark.reel("gate")
@pytest.mark.xfail(strict=True)
def test_xfails(reel):
    ask(reel, "xfails")
    assert False


@pytest.mark.reel("gate")
@pytest.mark.xfail(strict=False)
def test_xpasses(reel):
    ask(reel, "xpasses")


@pytest.mark.reel("gate")
def test_teardown_fails(broken_teardown, reel):
    ask(reel, "teardown")


@pytest.mark.reel("gate", record_on="always")
def test_fails_kept(reel):
    ask(reel, "always")
    assert False
"""

#: The record-mode cassette's first test fails, the second passes.
ORDER = """
import os

import httpx
import pytest

from test_gate import ask


@pytest.mark.reel("order")
def test_a_fails(reel):
    ask(reel, "a")
    assert False


@pytest.mark.reel("order")
def test_b_passes(reel):
    ask(reel, "b")
"""


def recorded(gate: pytest.Pytester, args: list[str], read: Reader) -> bytes:
    """A cassette of one recording (of test_passes), recorded by a first run."""
    result = gate.runpytest_subprocess("test_gate.py::test_passes", "--reel-mode", "auto", *args)
    result.assert_outcomes(passed=1)
    data = read("test_gate/gate.jsonl")
    assert data is not None
    assert prompts(data) == ["passes"]
    return data


Reader = Callable[[str], bytes | None]
Writer = Callable[[str, bytes], None]


@pytest.fixture(params=STORES)
def store(
    request: pytest.FixtureRequest, pytester: pytest.Pytester
) -> tuple[list[str], Reader, Writer]:
    """The inner run's store arguments, and how to read and write a
    cassette (by its name under the cassette directory) in it."""
    if request.param == "files":
        root = pytester.path / "tests/cassettes"

        def read(name: str) -> bytes | None:
            path = root / name
            return path.read_bytes() if path.exists() else None

        def write(name: str, data: bytes) -> None:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(data)

        return [], read, write
    from reel_bindings._store_url import open_store

    url: str = request.getfixturevalue("redis_url")
    redis = open_store(url)
    return ["--reel-store", url], redis.read, redis.replace


def prompts(data: bytes | None) -> list[str]:
    assert data is not None
    lines = [json.loads(line) for line in data.splitlines()]
    assert "_meta" in lines[0]
    return sorted(
        line["request"]["body"]["json"]["messages"][0]["content"]
        for line in lines[1:]
        if "request" in line
    )


@pytest.fixture
def gate(
    pytester: pytest.Pytester, fake: FakeUpstreamThread, monkeypatch: pytest.MonkeyPatch
) -> pytest.Pytester:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    pytester.makepyfile(test_gate=GATE, test_order=ORDER)
    return pytester


@pytest.mark.parametrize("workers", WORKERS)
def test_only_passed_tests_are_kept(
    gate: pytest.Pytester, store: tuple[list[str], Reader, Writer], workers: list[str]
) -> None:
    if workers:
        pytest.importorskip("xdist", reason="pip install pytest-xdist (in the test extra)")
    args, read, _ = store
    result = gate.runpytest_subprocess("test_gate.py", "--reel-mode", "auto", *args, *workers)
    result.assert_outcomes(passed=2, failed=2, xfailed=1, xpassed=1, errors=1)
    # the xpass (an xfail that passed) is not a pass either
    assert prompts(read("test_gate/gate.jsonl")) == ["always", "passes"]


def test_always_keeps_everything(
    gate: pytest.Pytester, store: tuple[list[str], Reader, Writer]
) -> None:
    args, read, _ = store
    result = gate.runpytest_subprocess(
        "test_gate.py", "--reel-mode", "auto", "--reel-record-on", "always", *args
    )
    result.assert_outcomes(passed=2, failed=2, xfailed=1, xpassed=1, errors=1)
    assert prompts(read("test_gate/gate.jsonl")) == [
        "always",
        "fails",
        "passes",
        "teardown",
        "xfails",
        "xpasses",
    ]


def test_the_ini_option(gate: pytest.Pytester, store: tuple[list[str], Reader, Writer]) -> None:
    args, read, _ = store
    gate.makeini(inner_ini("reel_record_on = always"))
    result = gate.runpytest_subprocess("test_gate.py::test_fails", "--reel-mode", "auto", *args)
    result.assert_outcomes(failed=1)
    assert prompts(read("test_gate/gate.jsonl")) == ["fails"]


@pytest.mark.parametrize("mode", ["auto", "record"])
def test_a_failing_test_leaves_the_cassette_byte_for_byte(
    gate: pytest.Pytester, store: tuple[list[str], Reader, Writer], mode: str
) -> None:
    args, read, _ = store
    old = recorded(gate, args, read)
    result = gate.runpytest_subprocess(
        "test_gate.py", "-k", "not passes and not kept", "--reel-mode", mode, *args
    )
    result.assert_outcomes(passed=1, failed=1, xfailed=1, errors=1)
    assert read("test_gate/gate.jsonl") == old


def test_record_mode_starts_afresh_at_the_first_kept_test(
    gate: pytest.Pytester, store: tuple[list[str], Reader, Writer]
) -> None:
    args, read, write = store
    write("test_order/order.jsonl", recorded(gate, args, read))
    result = gate.runpytest_subprocess("test_order.py", "--reel-mode", "record", *args)
    result.assert_outcomes(passed=1, failed=1)
    assert prompts(read("test_order/order.jsonl")) == ["b"]  # afresh: "passes" is gone


def test_a_missing_cassette_stays_missing(
    gate: pytest.Pytester, store: tuple[list[str], Reader, Writer]
) -> None:
    args, read, _ = store
    result = gate.runpytest_subprocess("test_gate.py::test_fails", "--reel-mode", "auto", *args)
    result.assert_outcomes(failed=1)
    assert read("test_gate/gate.jsonl") is None


def test_bad_settings(gate: pytest.Pytester) -> None:
    gate.makepyfile(
        test_bad="""
import pytest

@pytest.mark.reel(record_on="sometimes")
def test_bad(reel):
    pass
"""
    )
    result = gate.runpytest_subprocess("test_bad.py")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*record_on= takes 'passed' or 'always', not 'sometimes'*"])
    gate.makeini(inner_ini("reel_record_on = never"))
    result = gate.runpytest_subprocess("test_bad.py")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*reel_record_on = 'never': use passed or always*"])


@pytest.mark.parametrize("workers", WORKERS)
def test_the_run_report(
    gate: pytest.Pytester, store: tuple[list[str], Reader, Writer], workers: list[str]
) -> None:
    if workers:
        pytest.importorskip("xdist", reason="pip install pytest-xdist (in the test extra)")
    args, _, _ = store
    label = "files" if not args else f"RedisStore({args[1]!r}, prefix='reel')"
    out = gate.path / "report.json"
    result = gate.runpytest_subprocess(
        "test_gate.py", "--reel-mode", "auto", "--reel-report", str(out), "-v", *args, *workers
    )
    result.stdout.fnmatch_lines(
        [
            "*- reel report -*",
            f"tests/cassettes/test_gate/gate.jsonl ({label}): 0 hits, 0 misses, 2 recorded, "
            "0 stale, 0 superseded",
            "    dropped   POST /v1/chat/completions  [test_gate.py::test_fails]",
            "    recorded  POST /v1/chat/completions  [test_gate.py::test_passes]",
        ]
    )
    report = json.loads(out.read_text("utf-8"))
    assert report["schema"] == 1
    (cassette,) = report["cassettes"]
    assert cassette["store"] == label
    assert (cassette["recorded"], cassette["hits"]) == (2, 0)
    outcomes = {o["test"].split("::")[1]: o["outcome"] for o in cassette["outcomes"]}
    assert outcomes == {
        "test_passes": "recorded",
        "test_fails": "dropped",
        "test_xfails": "dropped",
        "test_xpasses": "dropped",
        "test_teardown_fails": "dropped",
        "test_fails_kept": "recorded",
    }
    # replayed: the two kept recordings hit, the four dropped ones miss
    result = gate.runpytest_subprocess("test_gate.py", "--reel-report", str(out), *args, *workers)
    totals = json.loads(out.read_text("utf-8"))["totals"]
    assert totals == {
        "hits": 2, "misses": 4, "recorded": 0, "stale": 0, "superseded": 0, "websocket": {}
    }  # fmt: skip


INTERRUPTED = """
import pytest

from test_gate import ask


@pytest.mark.reel("interrupted")
def test_interrupted(reel):
    ask(reel, "held")
    raise KeyboardInterrupt  # what Ctrl-C raises


@pytest.mark.reel("kept", record_on="always")
def test_interrupted_always(reel):
    ask(reel, "kept")
    raise KeyboardInterrupt
"""


def test_an_interrupted_test_keeps_nothing(
    gate: pytest.Pytester, store: tuple[list[str], Reader, Writer]
) -> None:
    """Its outcome is unknown: its held lines are dropped (unless always)."""
    args, read, _ = store
    gate.makepyfile(test_interrupted=INTERRUPTED)
    for test in ("test_interrupted", "test_interrupted_always"):
        result = gate.runpytest_subprocess(
            f"test_interrupted.py::{test}", "--reel-mode", "auto", *args
        )
        assert result.ret == pytest.ExitCode.INTERRUPTED
    assert read("test_interrupted/interrupted.jsonl") is None
    assert prompts(read("test_interrupted/kept.jsonl")) == ["kept"]
