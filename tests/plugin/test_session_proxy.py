"""The per-test proxy is one listener per worker; each test is still its own.

The class of defect: state of one test's proxy reaching another's once the
listener outlives the test -- a connection kept alive by a client shared
across tests, a stream a test left open, a test that failed -- so that a
request of test B is served from A's cassette, a miss of A is reported in
B, or a recording lands in the wrong cassette.  The invariant (see
docs/reliability.md, "One proxy per worker"): every exchange is served,
counted and recorded by the test that was running when its connection
was accepted, and a test's end closes its connections.  Proved here on
whole pytest runs, serial and under ``-n 2``, with every hazard at once;
``tests/bindings/test_session_proxy.py`` walks generated schedules.
"""

from __future__ import annotations

import json

import pytest

from tests.fakes.upstream import FakeUpstreamThread

from .conftest import FAKE_KEY, SERIAL_AND_N2, recorded_questions

#: Each test asks its own question; a client made by the first test of the
#: module is kept in a global and used by the next ones (its pooled
#: connection was the first test's), a stream is left open, a test fails.
SUITE = """
import openai
import pytest

KEPT = []


def ask(client, question, **kw):
    return client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": question}], **kw
    )


def test_a(reel):
    client = reel.proxy_openai(max_retries=0)
    assert ask(client, "alpha").choices[0].message.content
    plain = openai.OpenAI(max_retries=0)  # unmodified code, kept for the next tests
    assert ask(plain, "alpha again").choices[0].message.content
    KEPT.append(plain)
    stream = ask(plain, "alpha stream", stream=True)
    next(iter(stream))  # left open: the test ends mid-stream
    # and kept, not dropped: dropped, its socket would be collected during
    # whichever later test the collector runs in, whose ResourceWarning
    # (an error here) would fail that test at random
    KEPT.append(stream)


def test_b(reel, reel_proxy):
    assert ask(KEPT[0], "beta").choices[0].message.content  # B's cassette, A's client
    assert ask(reel.proxy_openai(max_retries=0), "beta two").choices[0].message.content
    assert reel.misses == []


def test_c_fails(reel):
    assert ask(reel.proxy_openai(max_retries=0), "gamma").choices[0].message.content
    raise AssertionError("this test fails on its own")


def test_d(reel_proxy):
    assert ask(KEPT[0], "delta").choices[0].message.content
"""

#: The replay of the same suite where test_b asks a question it never
#: recorded (a miss: it fails B, and only B) and test_d asks A's.
MISSES = SUITE.replace('"beta two"', '"beta, unrecorded"').replace('"delta"', '"alpha"')


MODULES = ("test_suite", "test_suite_too")


@SERIAL_AND_N2
def test_each_test_keeps_its_own_exchanges(
    pytester: pytest.Pytester,
    fake: FakeUpstreamThread,
    monkeypatch: pytest.MonkeyPatch,
    workers: list[str],
) -> None:
    pytester.makepyfile(**dict.fromkeys(MODULES, SUITE))
    monkeypatch.setenv("REEL_UPSTREAM", fake.url)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    recorded = pytester.runpytest_subprocess(
        "-p", "no:randomly", *workers, "--reel-mode", "record", "--reel-record-on", "always"
    )
    recorded.assert_outcomes(passed=6, failed=2)
    for module in MODULES:  # each recording is in its own test's cassette, and only there
        assert recorded_questions(pytester, module, "test_a") == [
            "alpha",
            "alpha again",
            "alpha stream",
        ]
        assert recorded_questions(pytester, module, "test_b") == ["beta", "beta two"]
        assert recorded_questions(pytester, module, "test_c_fails") == ["gamma"]
        assert recorded_questions(pytester, module, "test_d") == ["delta"]

    fake.stop()  # a replay needs no network
    monkeypatch.delenv("OPENAI_API_KEY")
    pytester.runpytest_subprocess("-p", "no:randomly", *workers).assert_outcomes(passed=6, failed=2)

    pytester.makepyfile(**dict.fromkeys(MODULES, MISSES))
    report = pytester.path / "report.json"
    result = pytester.runpytest_subprocess("-p", "no:randomly", *workers, f"--reel-report={report}")
    result.assert_outcomes(passed=2, failed=6)
    out = result.stdout.str()
    for module in MODULES:
        # B's miss fails B and names B's cassette; D's fails D; neither leaks
        assert f"{module}/test_b.jsonl (mode replay)" in out
        assert f"{module}/test_d.jsonl (mode replay)" in out
        assert f"{module}/test_a.jsonl (mode replay)" not in out
    figures = {
        c["cassette"].split("cassettes/", 1)[1]: (c["hits"], c["misses"])
        for c in json.loads(report.read_text())["cassettes"]
    }
    assert figures == {
        f"{module}/{test}.jsonl": counts
        for module in MODULES
        for test, counts in (
            ("test_a", (3, 0)),
            ("test_b", (1, 1)),
            ("test_c_fails", (1, 0)),
            ("test_d", (0, 1)),
        )
    }
