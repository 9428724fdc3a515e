"""Simon Willison's ``llm`` through Reel, through the proxy only.

``llm``'s OpenAI models build a fresh ``openai.OpenAI`` per prompt from
their own settings (``get_client``: base URL, key, headers); no client can
be given, so Reel cannot be put under it in-process.  The openai client
reads ``OPENAI_BASE_URL``: that is how a user points ``llm`` at the proxy
(or an ``extra-openai-models.yaml`` entry with ``api_base``).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.fakes.upstream import FakeUpstreamThread
from tests.frameworks.matrix import KEY, PROXIES, Target, Way, check, framework, miss, server_error

llm = framework("llm", reason="llm is not installed (pip install llm)")


@pytest.fixture(autouse=True)
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """llm's keys, logs and plugins directory: an empty one of the test's."""
    monkeypatch.setenv("LLM_USER_PATH", str(tmp_path / "llm"))


@pytest.fixture(autouse=True)
def made(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """The OpenAI clients llm makes, one per prompt: llm never closes them
    (their sockets would be left to the garbage collector, a ResourceWarning
    in some later test); the sync ones are closed here, the async ones by
    the test in their event loop."""
    from llm.default_plugins.openai_models import _Shared

    clients: list[Any] = []
    get_client = _Shared.get_client

    def keeping(self: Any, key: Any, *, async_: bool = False) -> Any:
        client = get_client(self, key, async_=async_)  # type: ignore[no-untyped-call]
        clients.append(client)
        return client

    monkeypatch.setattr(_Shared, "get_client", keeping)
    yield clients
    for client in clients:
        if isinstance(client, openai.OpenAI):
            client.close()


@contextmanager
def pointed(target: Target) -> Iterator[None]:
    os.environ["OPENAI_BASE_URL"] = target.v1
    try:
        yield
    finally:
        del os.environ["OPENAI_BASE_URL"]


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@pytest.mark.parametrize("way", PROXIES)
def test_prompt(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    def drive(target: Target) -> Any:
        with pointed(target):
            response = llm.get_model("gpt-4o-mini").prompt("Say hello to Reel.", key=KEY)
            return response.text()

    assert check(fake, tmp_path, way, drive) == "Fake reply to: Say hello to Reel."


@pytest.mark.parametrize("way", PROXIES)
def test_stream_early_break(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    def drive(target: Target) -> Any:
        with pointed(target):
            response = llm.get_model("gpt-4o-mini").prompt("Count one two three four", key=KEY)
            seen: list[str] = []
            for chunk in response:
                seen.append(chunk)
                if len(seen) == 2:
                    break
            return seen

    assert check(fake, tmp_path, way, drive) == ["Fake", " reply"]


@pytest.mark.slow
@pytest.mark.parametrize("way", PROXIES)
def test_tool_chain(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    def drive(target: Target) -> Any:
        with pointed(target):
            model = llm.get_model("gpt-4o-mini")
            chain = model.chain("Weather in Oslo?", tools=[get_weather], key=KEY)
            return chain.text()

    assert check(fake, tmp_path, way, drive) == "The tool said: sunny in Weather in Oslo?"


@pytest.mark.slow
@pytest.mark.parametrize("way", PROXIES)
def test_retry_after_500(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    """No retry option of llm's own: the openai client's two retries do it."""

    def drive(target: Target) -> Any:
        with pointed(target):
            model = llm.get_model("gpt-4o-mini")
            return model.prompt("Try again", key=KEY, stream=False).text()

    assert check(fake, tmp_path, way, drive, script=server_error()) == "Fake reply to: Try again"


@pytest.mark.slow
@pytest.mark.parametrize("way", PROXIES)
def test_async_gather(fake: FakeUpstreamThread, tmp_path: Path, way: Way, made: list[Any]) -> None:
    def drive(target: Target) -> Any:
        async def main() -> Any:
            model = llm.get_async_model("gpt-4o-mini")
            replies = [model.prompt(f"Question {n}", key=KEY) for n in range(4)]
            try:
                return await asyncio.gather(*(r.text() for r in replies))
            finally:
                for client in made:
                    if isinstance(client, openai.AsyncOpenAI):
                        await client.close()
                made[:] = [c for c in made if not isinstance(c, openai.AsyncOpenAI)]

        with pointed(target):
            return target.run(main)

    assert check(fake, tmp_path, way, drive) == [f"Fake reply to: Question {n}" for n in range(4)]


@pytest.mark.slow
@pytest.mark.parametrize("way", PROXIES)
def test_embeddings(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    def drive(target: Target) -> Any:
        with pointed(target):
            model = llm.get_embedding_model("3-small")
            model.key = KEY
            return list(model.embed_multi(["one", "two"]))

    vectors = check(fake, tmp_path, way, drive)
    assert len(vectors) == 2
    assert vectors[0] != vectors[1]


@pytest.mark.parametrize("way", PROXIES)
def test_miss(tmp_path: Path, way: Way) -> None:
    """llm does not wrap the SDK's errors: a miss is openai's NotFoundError."""
    import openai

    with (
        miss(way, tmp_path) as target,
        pointed(target),
        pytest.raises(openai.NotFoundError) as raised,
    ):
        llm.get_model("gpt-4o-mini").prompt("Never recorded", key=KEY).text()
    assert raised.value.status_code == 404
    assert "no recording" in str(raised.value).lower()
