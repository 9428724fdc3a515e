"""A miss the code under test swallows still fails its test, on every binding
the ``reel`` fixture builds; the answer to a miss says so in ``x-reel-miss``
(and a real 404, recorded and replayed, neither carries it nor fails); a
test or a project that means to miss says so (``allow_misses``).

Frameworks turn the miss's 404 into their own errors and act on them
(langchain's ``OpenAIModelNotFoundError``, pydantic-ai's ``FallbackModel``
falls back on ``ModelNotFoundError``): the test passes on the fallback while
its recording is missing.  Each binding here swallows the SDK's or the HTTP
library's error as such code does; the plugin must fail the test anyway,
naming the request and the closest recording with its diff.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import re
import textwrap
from pathlib import Path

import attrs
import pytest

from reel_bindings.pytest_plugin import ReelCassette
from reel_core import Mode, Timing
from tests.fakes.upstream import FakeUpstreamThread, closed_port_url
from tests.inner import inner_ini
from tests.secrets import GATEWAY_TOKEN, GEMINI_KEY, OPENAI_KEY

from .conftest import FAKE_KEY, SCRUBBED, provider_variables
from .session import InnerProject, outcomes, passed

HEAD = """
import contextlib
import os

import anthropic
import httpx
import openai
import pytest
import requests
from google.genai import errors as genai_errors

URL = os.environ["FAKE_URL"]
swallowed = contextlib.suppress  # what a fallback, a retry or a friendly message does


def messages():
    return [{"role": "user", "content": os.environ["PROMPT"]}]


def body():
    return {"model": "gpt-4o-mini", "messages": messages()}
"""

#: One test per binding the ``reel`` fixture builds, each swallowing the
#: error its library raises on a 404 (its name is the binding's).
SWALLOWERS = {
    "openai": """
        def test_openai(reel):
            client = reel.openai(base_url=URL + "/v1", max_retries=0)
            with swallowed(openai.NotFoundError):
                client.chat.completions.create(model="gpt-4o-mini", messages=messages())
        """,
    "async_openai": """
        @pytest.mark.anyio
        async def test_async_openai(reel):
            async with reel.async_openai(base_url=URL + "/v1", max_retries=0) as client:
                with swallowed(openai.NotFoundError):
                    await client.chat.completions.create(model="gpt-4o-mini", messages=messages())
        """,
    "anthropic": """
        def test_anthropic(reel):
            client = reel.anthropic(base_url=URL, max_retries=0)
            with swallowed(anthropic.NotFoundError):
                client.messages.create(
                    model="claude-sonnet-4-6", max_tokens=64, messages=messages()
                )
        """,
    "async_anthropic": """
        @pytest.mark.anyio
        async def test_async_anthropic(reel):
            async with reel.async_anthropic(base_url=URL, max_retries=0) as client:
                with swallowed(anthropic.NotFoundError):
                    await client.messages.create(
                        model="claude-sonnet-4-6", max_tokens=64, messages=messages()
                    )
        """,
    "genai": """
        def test_genai(reel):
            client = reel.genai(base_url=URL)
            with swallowed(genai_errors.ClientError):
                client.models.generate_content(
                    model="gemini-2.5-flash", contents=os.environ["PROMPT"]
                )
        """,
    "transport": """
        def test_transport(reel):
            with httpx.Client(transport=reel.transport()) as client:
                reply = client.post(URL + "/v1/chat/completions", json=body())
            if reply.status_code == 404:
                pass  # an HTTP library raises nothing: the code looks at the status
        """,
    "async_transport": """
        @pytest.mark.anyio
        async def test_async_transport(reel):
            async with httpx.AsyncClient(transport=reel.async_transport()) as client:
                reply = await client.post(URL + "/v1/chat/completions", json=body())
            with swallowed(httpx.HTTPStatusError):
                reply.raise_for_status()
        """,
    "requests_adapter": """
        def test_requests_adapter(reel):
            session = requests.Session()
            session.mount("http://", reel.requests_adapter())
            with swallowed(requests.HTTPError):
                session.post(URL + "/v1/chat/completions", json=body()).raise_for_status()
        """,
    "requests_session": """
        def test_requests_session(reel):
            reply = reel.requests_session().post(URL + "/v1/chat/completions", json=body())
            assert reply.status_code in (200, 404)
        """,
    "proxy_url": """
        def test_proxy_url(reel_proxy):
            # unmodified code: the SDK reads OPENAI_BASE_URL, set to the proxy
            # (closed: an open client's socket, collected in a later test of the
            # inner run, is an unraisable ResourceWarning there)
            with openai.OpenAI(max_retries=0) as sdk, swallowed(openai.NotFoundError):
                sdk.chat.completions.create(model="gpt-4o-mini", messages=messages())
            with httpx.Client() as client:  # and a plain HTTP client at the proxy's URL
                client.post(reel_proxy + "/v1/chat/completions", json=body())
        """,
    "proxy_openai": """
        def test_proxy_openai(reel):
            # the worker's SDK client at the proxy, over plain HTTP
            client = reel.proxy_openai(max_retries=0)
            with swallowed(openai.NotFoundError):
                client.chat.completions.create(model="gpt-4o-mini", messages=messages())
        """,
}

#: The fixture's gRPC bindings: their swallowing tests are in test_grpc.py
#: (they need grpcio and xai-sdk, and a gRPC server to record from).
GRPC_BINDINGS = {"xai", "async_xai", "grpc_channel", "aio_grpc_channel"}

#: The public names of ``ReelCassette`` that are no binding.
NOT_BINDINGS = {
    "path",
    "display",
    "mode",
    "timing",
    "match",
    "repeat",
    "upstream",
    "file",
    "hint",
    "max_age",
    "record_grace",
    "drop_response_headers",
    "proto_descriptor",
    "allow_misses",
    "frozen",
    "misses",
    "websocket_misses",
}

RECORDED = "What is Reel?"
CHANGED = "What is Reel, again?"


def test_every_binding_of_the_fixture_has_a_swallowing_test() -> None:
    """A binding added to the fixture without a row here fails: its misses
    must be shown to fail the test too."""
    cassette = ReelCassette(
        path=Path("x.jsonl"),
        mode=Mode.REPLAY,
        timing=Timing(),
        match=None,
        repeat=None,
        upstream=None,
        file=None,  # type: ignore[arg-type]  # only its attributes are read
        hint="",
        stack=contextlib.ExitStack(),
    )
    names = {n for n, _ in inspect.getmembers(ReelCassette) if not n.startswith("_")}
    names |= {n for n in vars(cassette) if not n.startswith("_")}
    assert names - NOT_BINDINGS == set(SWALLOWERS) | GRPC_BINDINGS


def _inner(*tests: str) -> str:
    return HEAD + "".join("\n\n" + textwrap.dedent(t) for t in tests)


#: The inner project's conftest: its async tests run on asyncio and on trio.
ANYIO_CONFTEST = """
import pytest

@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request):
    return request.param
"""


def ids_of(*sources: str) -> list[str]:
    """The test ids of these tests (an async one runs on asyncio and trio)."""
    ids = []
    for source in sources:
        name = re.search(r"def (test_\w+)", source)
        assert name is not None, source
        backends = ("[asyncio]", "[trio]") if "anyio" in source else ("",)
        ids += [name[1] + backend for backend in backends]
    return ids


def sections(output: str) -> dict[str, str]:
    """The failures and errors of a run's output, by test name (``test_x[trio]``)."""
    found: dict[str, str] = {}
    block = name = None
    for line in output.splitlines():
        heading = re.fullmatch(r"={3,} (.*?) ={3,}", line)
        head = re.fullmatch(r"_{3,} (?:ERROR at \w+ of )?(\S+) _{3,}", line)
        if heading:
            block, name = heading.group(1), None
        elif head and block in ("FAILURES", "ERRORS"):
            name = head.group(1)
            found[name] = ""
        elif name is not None:
            found[name] += line + "\n"
    return found


REAL_404 = """
def test_real_404_inprocess(reel):
    client = reel.openai(base_url=URL + "/v1", max_retries=0)
    with pytest.raises(openai.NotFoundError) as caught:
        client.models.list()
    assert "x-reel-miss" not in caught.value.response.headers
    assert caught.value.response.json()["error"]["type"] != "reel_miss"


def test_real_404_proxy(reel_proxy):
    reply = httpx.get(reel_proxy + "/v1/models")
    assert reply.status_code == 404
    assert "x-reel-miss" not in reply.headers
    assert reply.json()["error"]["type"] != "reel_miss"
"""


SECRETIVE = """
def secretive():
    key = os.environ["SECRET_KEY"]
    token = os.environ["SECRET_TOKEN"]
    keys = os.environ["SECRET_OPENAI"] + " and " + token
    content = os.environ["PROMPT"] + ": my keys are " + keys
    return {
        "url": "/v1/chat/completions?key=" + key,
        "json": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": content}]},
        "headers": {"authorization": "Bearer " + token},
    }


def test_secret_inprocess(reel):
    request = secretive()
    with httpx.Client(transport=reel.transport()) as client:
        client.post(URL + request.pop("url"), **request)


def test_secret_proxy(reel_proxy):
    request = secretive()
    with httpx.Client() as client:
        client.post(reel_proxy + request.pop("url"), **request)
"""


#: Credentials a request of test_secret sends (from the environment: never
#: in a file the inner run reads).
SECRETS = {"SECRET_KEY": GEMINI_KEY, "SECRET_TOKEN": GATEWAY_TOKEN, "SECRET_OPENAI": OPENAI_KEY}


@attrs.frozen
class Runs:
    """The swallowing, real-404 and secretive suites recorded in one inner
    run, and replayed with another prompt beside MARKED in another."""

    project: InnerProject
    recorded: pytest.RunResult
    replayed: pytest.RunResult
    #: every path under ``tests/`` after the record run
    recorded_files: set[Path]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """One pair of inner runs for the module's replays of a changed prompt
    (a run costs a fresh interpreter and every SDK: seconds)."""
    project = InnerProject.create(
        tmp_path_factory.mktemp("misses"),
        inner_ini(keep=("anyio",)),
        [*SCRUBBED, *provider_variables()],
    )
    project.write(
        conftest=ANYIO_CONFTEST,
        test_bindings=_inner(*SWALLOWERS.values()),
        test_real=_inner(REAL_404),
        test_secret=_inner(SECRETIVE),
    )
    keys = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY")
    project.env.update(SECRETS)
    with FakeUpstreamThread() as fake:
        project.env["FAKE_URL"] = fake.url
        project.env["REEL_UPSTREAM"] = fake.url  # where the proxy records from
        project.env.update(dict.fromkeys(keys, FAKE_KEY))
        project.env["PROMPT"] = RECORDED
        recorded = project.run("--reel-mode", "record")
    recorded_files = {p.relative_to(project.path) for p in project.path.rglob("tests/**/*")}

    project.env["FAKE_URL"] = closed_port_url()
    for variable in ("REEL_UPSTREAM", *keys):
        del project.env[variable]
    project.env["PROMPT"] = CHANGED
    project.write(test_marked=_inner(MARKED))
    # -rA: where pytest shows a passed test's output (test_marked's allowed misses)
    replayed = project.run("-rA")
    return Runs(project, recorded, replayed, recorded_files)


def test_swallowed_misses_fail_on_every_binding_and_a_real_404_does_not(runs: Runs) -> None:
    """Recorded, then replayed with another prompt: each binding's swallowed
    miss fails its test naming the request and the closest recording with
    its diff; the report shows no credential of the request; a real 404,
    recorded and replayed, is a hit."""
    recorded, replayed = runs.recorded, runs.replayed
    bindings = ids_of(*SWALLOWERS.values())
    assert len(bindings) == len(SWALLOWERS) + sum("anyio" in t for t in SWALLOWERS.values())
    secretive = ["test_secret_inprocess", "test_secret_proxy"]
    real = ["test_real_404_inprocess", "test_real_404_proxy"]
    assert outcomes(recorded, "test_bindings") == passed(*bindings)
    assert outcomes(recorded, "test_real") == passed(*real)
    assert outcomes(recorded, "test_secret") == passed(*secretive)
    for name in real:
        cassette = runs.project.path / "tests/cassettes/test_real" / f"{name}.jsonl"
        (line,) = [json.loads(x) for x in cassette.read_text("utf-8").splitlines()[1:]]
        assert line["response"]["status"] == 404  # the fake's own 404, recorded

    assert outcomes(replayed, "test_bindings") == {name: ["failed"] for name in bindings}
    assert outcomes(replayed, "test_real") == passed(*real)  # the real 404s pass
    # (an error at a teardown once showed here in a loaded CI run: the inner
    # run's own words say which, when it happens again)
    assert outcomes(replayed, "test_secret") == {name: ["failed"] for name in secretive}, (
        replayed.stdout.str()[-8000:]
    )
    failures = sections(replayed.stdout.str())
    # and test_marked's one failure (its own test reads it)
    assert set(failures) == {*bindings, *secretive, "test_not_allowed"}
    del failures["test_not_allowed"]
    for name in ("test_secret_inprocess", "test_secret_proxy"):
        text = failures.pop(name)
        assert "Reel miss: no recording matches for POST /v1/chat/completions in cassette" in text
        assert re.search(r"  closest: \w+ POST /v1/chat/completions ", text), text
        assert f'    messages[0].content: recorded "{RECORDED}: my keys are ' in text
    output = replayed.stdout.str() + replayed.stderr.str()
    for secret in SECRETS.values():
        assert secret not in output
    for name, text in failures.items():
        binding = name.removeprefix("test_").split("[")[0]
        assert binding in SWALLOWERS, name
        requests = 2 if binding == "proxy_url" else 1  # the SDK's, and the plain client's
        s = "" if requests == 1 else "s"
        missed = f"tests/cassettes/test_bindings/{name}.jsonl"
        assert text.startswith(
            f"Reel: {requests} request{s} missed cassette {missed} (mode replay). "
            "A miss fails the test even when the code under test handled the error.\n"
        ), text
        if binding in ("anthropic", "async_anthropic"):
            path, field = "/v1/messages", "messages[0].content"
        elif binding == "genai":
            path = "/v1/models/gemini-2.5-flash:generateContent"
            field = "contents[0].parts[0].text"
        else:
            path, field = "/v1/chat/completions", "messages[0].content"
        # the request, redacted, and the closest recording with its diff, per miss
        assert text.count(f"Reel miss: no recording matches for POST {path} in cassette") == (
            requests
        )
        closest = re.findall(
            rf"  closest: (\w+) POST {re.escape(path)} \(similarity [\d.]+\)", text
        )
        assert len(closest) == requests, text
        diff = f'    {field}: recorded "{RECORDED}", received "{CHANGED}"'
        assert text.count(diff + "\n") == requests, text


MARKED = """
@pytest.mark.reel(allow_misses=True)
def test_inprocess(reel):
    with httpx.Client(transport=reel.transport()) as client:
        reply = client.post(URL + "/v1/chat/completions", json=body())
    assert reply.status_code == 404
    (miss,) = reel.misses
    assert reply.headers["x-reel-miss"] == miss.key
    assert reply.json()["error"]["key"] == miss.key
    with swallowed(requests.HTTPError):
        reel.requests_session().get(URL + "/v1/models").raise_for_status()
    got = reel.requests_session().get(URL + "/v1/models")  # the adapter's answer
    assert got.headers["x-reel-miss"] == reel.misses[-1].key
    assert len(reel.misses) == 3


@pytest.mark.reel(allow_misses=True)
@pytest.mark.anyio
async def test_async_sdk(reel):
    async with reel.async_openai(base_url=URL + "/v1", max_retries=0) as client:
        with pytest.raises(openai.NotFoundError) as caught:
            await client.chat.completions.create(model="gpt-4o-mini", messages=messages())
    assert caught.value.response.headers["x-reel-miss"] == reel.misses[0].key


@pytest.mark.reel(allow_misses=True)
def test_proxy(reel_proxy, reel):
    with openai.OpenAI(max_retries=0) as sdk, pytest.raises(openai.NotFoundError) as caught:
        sdk.chat.completions.create(model="gpt-4o-mini", messages=messages())
    assert caught.value.response.headers["x-reel-miss"] == reel.misses[0].key
    head = httpx.head(reel_proxy + "/v1/models")
    assert head.status_code == 404
    assert head.headers["x-reel-miss"] == reel.misses[1].key


@pytest.mark.reel(allow_misses=False)
def test_not_allowed(reel):
    with httpx.Client(transport=reel.transport()) as client:
        assert "x-reel-miss" in client.get(URL + "/v1/models").headers
"""


def test_the_miss_answer_says_it_is_a_miss_and_allow_misses_lets_a_test_look(
    runs: Runs,
) -> None:
    """``x-reel-miss`` carries the missed key through every binding; with
    ``allow_misses=True`` a test may look at its misses and pass (replayed
    with no cassette of its own, no upstream and no key)."""
    # the async test on asyncio and trio
    allowed = ("test_inprocess", "test_async_sdk[asyncio]", "test_async_sdk[trio]", "test_proxy")
    assert outcomes(runs.replayed, "test_marked") == {
        **passed(*allowed),
        "test_not_allowed": ["failed"],
    }
    out = runs.replayed.stdout.str()
    failures = sections(out)
    assert failures["test_not_allowed"].startswith("Reel: 1 request missed cassette")
    # an allowed miss is still shown, where pytest shows a passed test's output
    assert re.search(
        r"-+ Captured reel misses call -+\nReel: 2 requests missed cassette "
        r"\S+test_proxy.jsonl \(mode replay\)\. Misses are allowed for this test "
        r"\(allow_misses\): it is not failed\.",
        out,
    ), out
    # replay writes nothing (the cassettes the record run wrote are all there is)
    written = {p.relative_to(runs.project.path) for p in runs.project.path.rglob("tests/**/*")}
    assert written == runs.recorded_files
    assert not (runs.project.path / "tests/cassettes/test_marked").exists()


def test_the_ini_option_allows_misses_and_the_marker_wins(pytester: pytest.Pytester) -> None:
    pytester.makeini(inner_ini("reel_allow_misses = true"))
    pytester.makepyfile(
        test_ini=_inner(
            """
            def test_allowed(reel):
                with swallowed(openai.NotFoundError):
                    reel.openai(max_retries=0).models.list()

            @pytest.mark.reel(allow_misses=False)
            def test_not_allowed(reel):
                with swallowed(openai.NotFoundError):
                    reel.openai(max_retries=0).models.list()

            @pytest.mark.reel(allow_misses="yes")
            def test_bad_marker(reel):
                pass
            """
        )
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1, failed=1, errors=1)
    failures = sections(result.stdout.str())
    assert failures["test_not_allowed"].startswith("Reel: 1 request missed cassette")
    assert (
        "@pytest.mark.reel: allow_misses= takes True or False, not 'yes'"
        in (failures["test_bad_marker"])
    )


def test_a_bad_ini_value_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini(inner_ini("reel_allow_misses = sometimes"))
    pytester.makepyfile(test_x="def test_x(): pass")
    result = pytester.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*reel_allow_misses = 'sometimes': use true or false (true: a miss does not fail "
            "the test that served it)*"
        ]
    )
