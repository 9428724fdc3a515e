"""A client made once for many tests (``shared_openai()``, ``shared_transport()``)
records and replays each test on its own cassette.

The class of defect: a client that outlives a test carrying that test's
cassette into the next one (a recording in the wrong cassette, a miss
reported in another test, a replay from another test's recording), a
request sent when no test uses Reel served from whichever cassette was
last open, or a test that records through a client made for replay
sending the placeholder key upstream (its 401 recorded as the truth).
The invariant (docs/reliability.md, "A client shared by tests"): a
request through a shared transport is served by the test running when it
is sent, exactly as through that test's ``reel.transport()``; with no
test using Reel running, it fails with what to do; a forwarding test never
sends the replay placeholder upstream.
"""

from __future__ import annotations

import json

import pytest

from tests.fakes.upstream import FakeUpstreamThread

from .conftest import FAKE_KEY, recorded_questions

#: Two modules share one sync client, one async client and one raw httpx2
#: client, made at import; a test fails on its own; a thread asks too.
SUITE = """
import asyncio
import os
import threading

import httpx2
import pytest
import trio

from reel_bindings.pytest_plugin import (
    shared_async_openai,
    shared_openai,
    shared_transport,
)

URL = os.environ["FAKE_URL"]
CLIENT = shared_openai(base_url=URL + "/v1", max_retries=0)
ASYNC = shared_async_openai(base_url=URL + "/v1", max_retries=0)
RAW = httpx2.Client(transport=shared_transport())


def ask(client, question, **kw):
    return client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": question}], **kw
    )


def test_a(reel):
    assert ask(CLIENT, "alpha").choices[0].message.content
    stream = ask(CLIENT, "alpha stream", stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream)


def test_b(reel):
    async def main():
        return await ASYNC.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "beta"}]
        )

    assert asyncio.run(main()).choices[0].message.content
    answers = []

    def work():
        try:
            answers.append(ask(CLIENT, "beta thread").choices[0].message.content)
        except Exception as exc:  # a miss: the SDK's 404
            answers.append(exc)

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    assert isinstance(answers[0], str), answers[0]
    assert reel.misses == []


@pytest.mark.reel
def test_c_marked_fails():
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "gamma"}]}
    key = os.environ.get("OPENAI_API_KEY", "unset")
    answer = RAW.post(
        URL + "/v1/chat/completions", json=body, headers={"authorization": "Bearer " + key}
    )
    assert answer.status_code == 200, answer.text
    raise AssertionError("this test fails on its own")


@pytest.mark.reel
def test_d_trio():
    async def main():
        return await ASYNC.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "delta"}]
        )

    assert trio.run(main).choices[0].message.content  # the same client, on trio
"""

#: The replay of the same suite where test_b's thread asks a question it
#: never recorded (a miss: it fails B, and only B).
MISSES = SUITE.replace('"beta thread"', '"beta, unrecorded"')

MODULES = ("test_shared", "test_shared_too")

#: Under xdist a shared client is still one per process, and each worker runs
#: the serial case's path; what only ``-n 2`` adds (the workers' tallies
#: merged into the controller's report) is proved in every run by
#: ``tests/plugin/test_session_proxy.py``'s n2 case, so this one repeats it in
#: a full run only (``tests/slow.py``).
REPEATED = (
    "repeats the serial case in each xdist worker; the workers' report merge is "
    "tests/plugin/test_session_proxy.py::test_each_test_keeps_its_own_exchanges[n2]"
)
WORKERS = pytest.mark.parametrize(
    "workers",
    [
        pytest.param([], id="serial"),
        pytest.param(
            ["-n", "2", "--dist", "loadfile"], id="n2", marks=pytest.mark.slow(reason=REPEATED)
        ),
    ],
)


@WORKERS
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
        assert recorded_questions(pytester, module, "test_a") == ["alpha", "alpha stream"]
        assert recorded_questions(pytester, module, "test_b") == ["beta", "beta thread"]
        assert recorded_questions(pytester, module, "test_c_marked_fails") == ["gamma"]
        assert recorded_questions(pytester, module, "test_d_trio") == ["delta"]
        for test in ("test_a", "test_b", "test_c_marked_fails", "test_d_trio"):
            text = (pytester.path / f"tests/cassettes/{module}/{test}.jsonl").read_text()
            assert FAKE_KEY not in text

    fake.stop()  # a replay needs no network and no key
    monkeypatch.delenv("OPENAI_API_KEY")
    pytester.runpytest_subprocess("-p", "no:randomly", *workers).assert_outcomes(passed=6, failed=2)

    pytester.makepyfile(**dict.fromkeys(MODULES, MISSES))
    report = pytester.path / "report.json"
    result = pytester.runpytest_subprocess("-p", "no:randomly", *workers, f"--reel-report={report}")
    result.assert_outcomes(passed=4, failed=4)
    out = result.stdout.str()
    for module in MODULES:
        assert f"{module}/test_b.jsonl (mode replay)" in out  # B's miss, in B
        assert f"{module}/test_a.jsonl (mode replay)" not in out
    figures = {
        c["cassette"].split("cassettes/", 1)[1]: (c["hits"], c["misses"])
        for c in json.loads(report.read_text())["cassettes"]
    }
    assert figures == {
        f"{module}/{test}.jsonl": counts
        for module in MODULES
        for test, counts in (
            ("test_a", (2, 0)),
            ("test_b", (1, 1)),
            ("test_c_marked_fails", (1, 0)),
            ("test_d_trio", (1, 0)),
        )
    }


def test_a_request_outside_a_test_using_reel_says_what_to_do(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_outside="""
        import httpx2
        import pytest

        from reel_bindings.pytest_plugin import shared_openai, shared_transport

        CLIENT = shared_openai(max_retries=0)
        RAW = httpx2.Client(transport=shared_transport())


        def test_without_reel():
            RAW.get("https://api.openai.com/v1/models")


        @pytest.fixture(scope="module")
        def early():
            return RAW.get("https://api.openai.com/v1/models")


        def test_module_fixture(reel, early):
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.assert_outcomes(failed=1, errors=1)
    out = result.stdout.str()
    assert out.count("NoTestRunning") >= 2
    assert "give the test the `reel` fixture or mark it @pytest.mark.reel" in out
    assert not (pytester.path / "tests/cassettes").exists() or not any(
        (pytester.path / "tests/cassettes").rglob("*.jsonl")
    )


def test_a_recording_test_never_sends_the_replay_placeholder(
    pytester: pytest.Pytester, fake: FakeUpstreamThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a replay run without a key: the shared client gets the placeholder;
    # a test its marker makes record must not send it upstream
    monkeypatch.setenv("REEL_UPSTREAM", fake.url)
    pytester.makepyfile(
        test_placeholder="""
        import os

        import pytest

        from reel_bindings.pytest_plugin import shared_openai

        CLIENT = shared_openai(base_url=os.environ["FAKE_URL"] + "/v1", max_retries=0)


        @pytest.mark.reel(mode="record")
        def test_records():
            CLIENT.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
            )
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "AuthenticationError" in out  # the engine's refusal: a 401 of Reel's own
    assert "Reel did not send POST /v1/chat/completions upstream" in out
    assert "Set the provider's key variable" in out
    assert fake.requests == []
    cassette = pytester.path / "tests/cassettes/test_placeholder/test_records.jsonl"
    assert not cassette.exists() or len(cassette.read_text().splitlines()) <= 1


def test_outside_a_pytest_run_the_helpers_say_so() -> None:
    from reel_bindings import pytest_plugin

    saved = list(pytest_plugin._RUN_CONFIGS)
    pytest_plugin._RUN_CONFIGS.clear()
    try:
        with pytest.raises(RuntimeError, match=r"reel_bindings\.sdk's helpers"):
            pytest_plugin.shared_openai()
    finally:
        pytest_plugin._RUN_CONFIGS.extend(saved)
