"""Record against the fake upstream, then replay with no upstream at all --
through the fixture's in-process helpers and through its per-test proxy with
unmodified SDK code; and a miss fails its test even when the code swallowed it."""

from __future__ import annotations

import json
import types
from pathlib import Path

import attrs
import pytest

from reel_bindings import pytest_plugin
from tests.fakes.upstream import FakeUpstreamThread, closed_port_url
from tests.inner import inner_ini

from .conftest import FAKE_KEY, SCRUBBED, provider_variables
from .session import InnerProject, outcomes, passed


def stop(fake: FakeUpstreamThread, monkeypatch: pytest.MonkeyPatch) -> None:
    """No upstream from here on: a replay that reached out would fail."""
    fake.stop()
    monkeypatch.setenv("FAKE_URL", closed_port_url())


def lines(path: Path) -> list[dict[str, object]]:
    """A cassette's interaction lines (every line must be JSON)."""
    parsed = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    return [line for line in parsed if "_meta" not in line]


INPROCESS = """
import os

import anyio
import httpx
import pytest

URL = os.environ["FAKE_URL"]
MESSAGES = [{"role": "user", "content": "What is Reel?"}]
ANSWER = "Fake reply to: What is Reel?"


def test_openai(reel):
    client = reel.openai(base_url=URL + "/v1", max_retries=0)
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    assert reply.choices[0].message.content == ANSWER
    stream = client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == ANSWER
    assert reel.misses == []


def test_stream_left_after_its_first_chunk(reel):
    client = reel.openai(base_url=URL + "/v1", max_retries=0)
    stream = client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, stream=True)
    next(iter(stream))  # and dropped: the upstream is closed, what came is recorded


def test_anthropic_and_genai_share_a_cassette(reel):
    claude = reel.anthropic(base_url=URL, max_retries=0)
    message = claude.messages.create(model="claude-sonnet-4-6", max_tokens=64, messages=MESSAGES)
    assert message.content[0].text == ANSWER
    gemini = reel.genai(base_url=URL)
    assert gemini.models.generate_content(model="gemini-2.5-flash", contents="What is Reel?").text


def test_httpx_and_requests(reel):
    body = {"model": "gpt-4o-mini", "messages": MESSAGES}
    with httpx.Client(transport=reel.transport()) as client:
        reply = client.post(URL + "/v1/chat/completions", json=body)
    assert reply.json()["choices"][0]["message"]["content"] == ANSWER
    session = reel.requests_session()
    again = session.post(URL + "/v1/chat/completions", json=body).json()
    assert again["choices"][0]["message"]["content"] == ANSWER


@pytest.mark.anyio
async def test_async_openai(reel):
    client = reel.async_openai(base_url=URL + "/v1", max_retries=0)
    async with client:
        reply = await client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    assert reply.choices[0].message.content == ANSWER
    async with httpx.AsyncClient(transport=reel.async_transport()) as raw:
        body = {"model": "gpt-4o-mini", "messages": MESSAGES}
        again = await raw.post(URL + "/v1/chat/completions", json=body)
    assert again.json()["choices"][0]["message"]["content"] == ANSWER
"""


#: The in-process suite's tests (its async test runs on asyncio and on trio).
INPROCESS_TESTS = (
    "test_openai",
    "test_stream_left_after_its_first_chunk",
    "test_anthropic_and_genai_share_a_cassette",
    "test_httpx_and_requests",
    "test_async_openai[asyncio]",
    "test_async_openai[trio]",
)


@attrs.frozen
class Runs:
    """The module's suites recorded in one inner run and replayed in another."""

    project: InnerProject
    recorded: pytest.RunResult
    replayed: pytest.RunResult
    #: what each suite sent upstream while recording: the in-process suite
    #: to ``$FAKE_URL``, the proxy's to ``$REEL_UPSTREAM`` (two fakes)
    inprocess_requests: int
    proxy_requests: int
    #: each module's cassettes as the record run left them, by file name
    before: dict[str, dict[str, bytes]]
    #: every path under ``tests/`` after the record run
    recorded_files: set[Path]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """INPROCESS and PROXY recorded against the fakes, then replayed with
    neither fake, no key and no ``REEL_UPSTREAM``, MISSES beside them (one
    run each: a run costs a fresh interpreter and the three SDKs)."""
    project = InnerProject.create(
        tmp_path_factory.mktemp("record_replay"),
        inner_ini(keep=("anyio",)),  # the async test runs on anyio's plugin
        [*SCRUBBED, *provider_variables()],
    )
    project.write(test_inproc=INPROCESS, test_proxy=PROXY)
    keys = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OUTER_OPENAI_API_KEY")
    with FakeUpstreamThread() as fake, FakeUpstreamThread() as upstream:
        project.env["FAKE_URL"] = fake.url
        project.env["REEL_UPSTREAM"] = upstream.url  # where the proxy records from
        project.env.update(dict.fromkeys(keys, FAKE_KEY))
        recorded = project.run("--reel-mode", "record")
    recorded.assert_outcomes(passed=9)
    root = project.path / "tests/cassettes"
    before = {
        module: {p.name: p.read_bytes() for p in (root / module).iterdir()}
        for module in ("test_inproc", "test_proxy")
    }
    recorded_files = {p.relative_to(project.path) for p in project.path.rglob("tests/**/*")}

    project.env["FAKE_URL"] = closed_port_url()  # a replay that reached out would fail
    for variable in ("REEL_UPSTREAM", *keys):
        del project.env[variable]
    project.write(test_misses=MISSES)
    replayed = project.run()  # replay is the default
    replayed.assert_outcomes(passed=10, failed=3, errors=1)
    return Runs(
        project,
        recorded,
        replayed,
        len(fake.requests),
        len(upstream.requests),
        before,
        recorded_files,
    )


def test_inprocess_helpers_record_then_replay_without_upstream(runs: Runs) -> None:
    # the async test runs on asyncio and on trio
    assert outcomes(runs.recorded, "test_inproc") == passed(*INPROCESS_TESTS)
    cassettes = runs.project.path / "tests/cassettes/test_inproc"
    before = runs.before["test_inproc"]
    assert sorted(before) == [
        "test_anthropic_and_genai_share_a_cassette.jsonl",
        "test_async_openai[asyncio].jsonl",
        "test_async_openai[trio].jsonl",
        "test_httpx_and_requests.jsonl",
        "test_openai.jsonl",
        "test_stream_left_after_its_first_chunk.jsonl",
    ]
    assert len(lines(cassettes / "test_anthropic_and_genai_share_a_cassette.jsonl")) == 2
    assert runs.inprocess_requests == 11
    (dropped,) = lines(cassettes / "test_stream_left_after_its_first_chunk.jsonl")
    # cut by the client (unless the rest had come with the one more read)
    response: dict[str, object] = dropped["response"]  # type: ignore[assignment]
    if "cut" in response:
        assert response["cut"]["error"] == "client-closed"  # type: ignore[index]
    else:
        assert response["frames"][-1][1] == "data: [DONE]\n\n"  # type: ignore[index]
    salts = {json.loads(c.splitlines()[0])["_meta"]["redact"]["salt"] for c in before.values()}
    assert len(salts) == len(before)  # a salt of its own for each new cassette

    # replayed with no upstream and no key
    assert outcomes(runs.replayed, "test_inproc") == passed(*INPROCESS_TESTS)
    assert {p.name: p.read_bytes() for p in cassettes.iterdir()} == before


PROXY = """
import os

import anthropic
import openai
import pytest
from google import genai

MESSAGES = [{"role": "user", "content": "What is Reel?"}]
ANSWER = "Fake reply to: What is Reel?"


@pytest.mark.reel(proxy=True)
def test_marker_points_the_sdks_at_the_proxy():
    # Code under test, unmodified: each SDK reads its base URL and key variables.
    # (Each client closed: an open one's socket, collected in a later test of
    # this run, is an unraisable ResourceWarning there.)
    with openai.OpenAI(max_retries=0) as client:
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
        assert reply.choices[0].message.content == ANSWER
        stream = client.chat.completions.create(
            model="gpt-4o-mini", messages=MESSAGES, stream=True
        )
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == ANSWER
    with anthropic.Anthropic(max_retries=0) as claude:
        message = claude.messages.create(
            model="claude-sonnet-4-6", max_tokens=64, messages=MESSAGES
        )
        assert message.content[0].text == ANSWER
    with genai.Client() as gemini:
        answer = gemini.models.generate_content(model="gemini-2.5-flash", contents="What is Reel?")
        assert answer.text


def test_fixture(reel_proxy, reel):
    assert os.environ["OPENAI_BASE_URL"] == reel_proxy + "/v1"
    assert os.environ["ANTHROPIC_BASE_URL"] == reel_proxy
    assert os.environ["GOOGLE_GEMINI_BASE_URL"] == reel_proxy
    assert reel.proxy_url == reel_proxy
    client = openai.OpenAI(max_retries=0)
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    assert reply.choices[0].message.content == ANSWER
    client.close()


def test_environment_is_restored():
    for variable in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "GOOGLE_GEMINI_BASE_URL"):
        assert variable not in os.environ
    assert os.environ.get("OPENAI_API_KEY") == os.environ.get("OUTER_OPENAI_API_KEY")
"""


def test_unmodified_sdk_code_through_the_per_test_proxy(runs: Runs) -> None:
    tests = ("test_marker_points_the_sdks_at_the_proxy", "test_fixture")
    every = (*tests, "test_environment_is_restored")
    assert outcomes(runs.recorded, "test_proxy") == passed(*every)
    assert runs.proxy_requests == 5  # the marked test's four and the fixture's one
    assert sorted(runs.before["test_proxy"]) == sorted(f"{test}.jsonl" for test in tests)
    cassettes = runs.project.path / "tests/cassettes/test_proxy"
    marked = lines(cassettes / "test_marker_points_the_sdks_at_the_proxy.jsonl")
    assert [line["provider"] for line in marked] == ["openai", "openai", "anthropic", "gemini"]
    assert len(lines(cassettes / "test_fixture.jsonl")) == 1
    assert not (cassettes / "test_environment_is_restored.jsonl").exists()

    # replayed with no upstream; placeholders are set in replay mode, for no key
    assert outcomes(runs.replayed, "test_proxy") == passed(*every)
    assert {p.name: p.read_bytes() for p in cassettes.iterdir()} == runs.before["test_proxy"]


MISSES = """
import os

import openai
import pytest

MESSAGES = [{"role": "user", "content": "not recorded"}]


def test_swallowed_inprocess(reel):
    client = reel.openai(base_url=os.environ["FAKE_URL"] + "/v1", max_retries=0)
    try:
        client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    except openai.NotFoundError:
        pass  # the code under test "handles" it


def test_swallowed_through_the_proxy(reel_proxy):
    with openai.OpenAI(max_retries=0) as client:
        try:
            client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
        except openai.APIError:
            pass


def test_raised(reel):
    reel.openai(max_retries=0).chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)


@pytest.fixture
def calls_at_teardown(reel):
    yield
    try:
        reel.openai(max_retries=0).models.list()
    except openai.NotFoundError:
        pass


def test_miss_in_a_fixture_teardown(calls_at_teardown):
    pass
"""


def test_a_miss_fails_the_test_even_when_swallowed(runs: Runs) -> None:
    assert outcomes(runs.replayed, "test_misses") == {
        "test_swallowed_inprocess": ["failed"],
        "test_swallowed_through_the_proxy": ["failed"],
        "test_raised": ["failed"],
        "test_miss_in_a_fixture_teardown": ["passed", "error"],
    }
    missing = "tests/cassettes/test_misses/test_swallowed_inprocess.jsonl"
    out = runs.replayed.stdout
    out.fnmatch_lines(
        [
            "*_ test_swallowed_inprocess _*",
            f"Reel: 1 request missed cassette {missing} (mode replay). A miss fails the test "
            "even when the code under test handled the error.",
            "",
            "Reel miss: no recording matches for POST /v1/chat/completions in cassette *",
            f"  cassette: */{missing} (0 interactions)",
            "  mode: replay, match: normalized, key: sha256:*",
            "  closest: none (the cassette has no recordings)",
            f"  to record it: the cassette {missing} does not exist yet; record it with "
            "`pytest test_misses.py::test_swallowed_inprocess --reel-mode record`",
        ],
        consecutive=True,
    )
    out.fnmatch_lines(
        [
            "*_ test_swallowed_through_the_proxy _*",
            "Reel: 1 request missed cassette *through_the_proxy.jsonl (mode replay)*",
            "",
            "Reel miss: no recording matches for POST /v1/chat/completions *",
        ],
        consecutive=True,
    )
    out.fnmatch_lines(
        [
            "*_ test_raised _*",
            "E * openai.NotFoundError: *Reel miss: no recording matches*",
            "*- Captured reel misses call -*",
            "Reel: 1 request missed cassette *test_raised.jsonl*",
        ]
    )
    out.fnmatch_lines(
        [
            "*ERROR at teardown of test_miss_in_a_fixture_teardown*",
            "Reel: 1 request missed cassette *test_miss_in_a_fixture_teardown.jsonl*",
            "",
            "Reel miss: no recording matches for GET /v1/models *",
        ],
        consecutive=True,
    )
    # replay writes nothing (the cassettes the first run recorded are all there is)
    written = {p.relative_to(runs.project.path) for p in runs.project.path.rglob("tests/**/*")}
    assert written == runs.recorded_files


def test_a_miss_in_a_recorded_cassette_says_how_to_record_it(
    pytester: pytest.Pytester, fake: FakeUpstreamThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(
        test_prompt="""
        import os

        def test_prompt(reel):
            client = reel.openai(base_url=os.environ["FAKE_URL"] + "/v1", max_retries=0)
            prompt = os.environ["PROMPT"]
            messages = [{"role": "user", "content": prompt}]
            reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
            assert reply.choices[0].message.content == "Fake reply to: " + prompt
        """
    )
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.setenv("PROMPT", "first")
    pytester.runpytest_inprocess("--reel-mode", "record").assert_outcomes(passed=1)
    stop(fake, monkeypatch)
    monkeypatch.setenv("PROMPT", "second")
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*  closest: * POST /v1/chat/completions (similarity *)",
            '    messages[0].content: recorded "first", received "second"',
            "  to record it: run `pytest test_prompt.py::test_prompt --reel-mode auto` to record "
            "what is missing (or `pytest test_prompt.py::test_prompt --reel-mode record` to "
            "re-record the whole cassette)",
        ]
    )


def test_recording_read_to_the_end_costs_no_garbage_collection(
    pytester: pytest.Pytester, fake: FakeUpstreamThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plugin collects garbage at a test's end only while a relay is left
    mid-body (a stream dropped unread must finish recording before the pools
    close); a full collection costs ~20 ms a test where the SDKs are loaded."""
    pytester.makepyfile(
        test_whole="""
        import os

        import httpx

        def test_whole(reel):
            body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
            headers = {"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}
            url = os.environ["FAKE_URL"] + "/v1/chat/completions"
            with httpx.Client(transport=reel.transport()) as client:
                client.post(url, json=body, headers=headers).raise_for_status()
                streamed = {**body, "stream": True}
                with client.stream("POST", url, json=streamed, headers=headers) as r:
                    assert b"[DONE]" in r.read()
        """
    )
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    collections: list[tuple[object, ...]] = []

    def collect(*args: object) -> int:
        collections.append(args)
        return 0

    monkeypatch.setattr(pytest_plugin, "gc", types.SimpleNamespace(collect=collect))
    pytester.runpytest_inprocess("--reel-mode", "record").assert_outcomes(passed=1)
    assert collections == []
    lines = (pytester.path / "tests/cassettes/test_whole/test_whole.jsonl").read_text().splitlines()
    assert len(lines) == 3  # the header and both exchanges, whole
