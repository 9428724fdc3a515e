"""langchain-openai through Reel: ``ChatOpenAI`` and ``OpenAIEmbeddings``.

In-process through the clients it accepts (``http_client``,
``http_async_client``); through the proxy by ``base_url``.
"""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tests.fakes.upstream import FakeUpstreamThread
from tests.frameworks.matrix import (
    KEY,
    WAYS,
    Target,
    Way,
    check,
    framework,
    lazy,
    miss,
    server_error,
)

langchain_openai = framework(
    "langchain_openai", reason="langchain-openai is not installed (pip install langchain-openai)"
)
langchain_messages = lazy("langchain_core.messages")
langchain_tools = lazy("langchain_core.tools")


@functools.cache
def weather_tool() -> Any:
    """The tool, made at its first use (:func:`framework`)."""

    @langchain_tools.tool  # type: ignore[untyped-decorator, unused-ignore]
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    return get_weather


class Weather(BaseModel):
    city: str
    degrees: int


def chat_model(target: Target, **kwargs: Any) -> Any:
    kwargs.setdefault("max_retries", 0)
    return langchain_openai.ChatOpenAI(
        model="gpt-4o-mini",
        base_url=target.v1,
        api_key=KEY,
        http_client=target.client(),
        **kwargs,
    )


def achat_model(target: Target, **kwargs: Any) -> Any:
    """A model for async calls, on an async client made in the running loop
    (langchain's default one is cached across event loops: a second
    ``asyncio.run`` finds it bound to the first, closed one)."""
    return langchain_openai.ChatOpenAI(
        model="gpt-4o-mini",
        base_url=target.v1,
        api_key=KEY,
        http_async_client=target.aclient(own=True),
        max_retries=0,
        **kwargs,
    )


@pytest.mark.parametrize("way", WAYS)
def test_chat(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    def drive(target: Target) -> Any:
        reply = chat_model(target).invoke("Say hello to Reel.")
        return reply.content, reply.response_metadata["id"]

    content, _ = check(fake, tmp_path, way, drive)
    assert content == "Fake reply to: Say hello to Reel."


@pytest.mark.parametrize("way", WAYS)
def test_stream_early_break(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    """The user stops after two chunks: the recording is still whole."""

    def drive(target: Target) -> list[Any]:
        seen: list[Any] = []
        for chunk in chat_model(target).stream("Count one two three four five six"):
            seen.append(chunk.content)
            if len(seen) == 3:
                break
        return seen

    assert check(fake, tmp_path, way, drive) == ["", "Fake", " reply"]


@pytest.mark.slow
@pytest.mark.parametrize("way", WAYS)
def test_tool_loop(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    def drive(target: Target) -> Any:
        model = chat_model(target).bind_tools([weather_tool()])
        messages: list[Any] = [langchain_messages.HumanMessage("Weather in Oslo?")]
        first = model.invoke(messages)
        messages.append(first)
        for call in first.tool_calls:
            messages.append(
                langchain_messages.ToolMessage(
                    weather_tool().invoke(call["args"]), tool_call_id=call["id"]
                )
            )
        final = model.invoke(messages)
        return first.tool_calls, final.content

    calls, answer = check(fake, tmp_path, way, drive)
    assert [c["name"] for c in calls] == ["get_weather"]
    assert answer == "The tool said: sunny in Weather in Oslo?"


@pytest.mark.slow
@pytest.mark.parametrize("way", WAYS)
def test_structured_output(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    def drive(target: Target) -> Any:
        model = chat_model(target).with_structured_output(Weather, method="function_calling")
        return model.invoke("Weather in Oslo?")

    assert check(fake, tmp_path, way, drive) == Weather(city="Weather in Oslo?", degrees=42)


@pytest.mark.slow
@pytest.mark.parametrize("way", WAYS)
def test_retry_after_500(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    def drive(target: Target) -> Any:
        return chat_model(target, max_retries=2).invoke("Try again").content

    assert check(fake, tmp_path, way, drive, script=server_error()) == "Fake reply to: Try again"


@pytest.mark.slow
@pytest.mark.parametrize("way", WAYS)
def test_async_gather(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    def drive(target: Target) -> Any:
        async def main() -> Any:
            model = achat_model(target)
            replies = await asyncio.gather(*(model.ainvoke(f"Question {n}") for n in range(4)))
            return [r.content for r in replies]

        return target.run(main)

    assert check(fake, tmp_path, way, drive) == [f"Fake reply to: Question {n}" for n in range(4)]


@pytest.mark.slow
@pytest.mark.parametrize("way", WAYS)
def test_async_stream_early_break(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    """Four concurrent streams, each left after its second chunk."""

    def drive(target: Target) -> Any:
        async def one(model: Any, n: int) -> list[Any]:
            seen: list[Any] = []
            async for chunk in model.astream(f"Stream number {n} of four"):
                seen.append(chunk.content)
                if len(seen) == 2:
                    break
            return seen

        async def main() -> Any:
            model = achat_model(target)
            return await asyncio.gather(*(one(model, n) for n in range(4)))

        return target.run(main)

    assert check(fake, tmp_path, way, drive) == [["", "Fake"]] * 4


@pytest.mark.slow
@pytest.mark.parametrize("way", WAYS)
def test_embeddings(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    def drive(target: Target) -> Any:
        embeddings = langchain_openai.OpenAIEmbeddings(
            model="text-embedding-3-small",
            base_url=target.v1,
            api_key=KEY,
            http_client=target.client(),
            # else it fetches tiktoken's encoding from the network to count tokens
            check_embedding_ctx_length=False,
            max_retries=0,
        )
        return embeddings.embed_documents(["one", "two"])

    vectors = check(fake, tmp_path, way, drive)
    assert len(vectors) == 2
    assert vectors[0] != vectors[1]


@pytest.mark.parametrize("way", WAYS)
def test_miss(tmp_path: Path, way: Way) -> None:
    """A miss reaches the langchain user as ``OpenAIModelNotFoundError`` (an
    ``openai.NotFoundError``): "model not found", where no recording is."""
    import openai
    from langchain_openai.chat_models.base import OpenAIModelNotFoundError

    with miss(way, tmp_path) as target, pytest.raises(OpenAIModelNotFoundError) as raised:
        chat_model(target).invoke("Never recorded")
    assert isinstance(raised.value, openai.NotFoundError)
    assert raised.value.status_code == 404
    assert "no recording" in str(raised.value).lower()
