"""langchain-anthropic through Reel: ``ChatAnthropic``, through the proxy only.

``ChatAnthropic`` builds its own Anthropic clients (``_client`` and
``_async_client`` make them from ``base_url``, a timeout and a proxy URL); it
takes no client, so Reel cannot be put under it in-process.
"""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.upstream import FakeUpstreamThread
from tests.frameworks.matrix import (
    KEY,
    PROXIES,
    Target,
    Way,
    check,
    framework,
    lazy,
    miss,
    server_error,
)

langchain_anthropic = framework(
    "langchain_anthropic",
    reason="langchain-anthropic is not installed (pip install langchain-anthropic)",
)
client_utils = lazy("langchain_anthropic._client_utils")
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


def chat_model(target: Target, **kwargs: Any) -> Any:
    kwargs.setdefault("max_retries", 0)
    return langchain_anthropic.ChatAnthropic(
        model="claude-sonnet-4-6", base_url=target.url, api_key=KEY, max_tokens=64, **kwargs
    )


@pytest.mark.parametrize("way", PROXIES)
def test_chat(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    def drive(target: Target) -> Any:
        reply = chat_model(target).invoke("Say hello to Reel.")
        return reply.content, reply.response_metadata["id"]

    content, _ = check(fake, tmp_path, way, drive)
    assert content == "Fake reply to: Say hello to Reel."


@pytest.mark.parametrize("way", PROXIES)
def test_stream_early_break(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    def drive(target: Target) -> list[Any]:
        seen: list[Any] = []
        for chunk in chat_model(target).stream("Count one two three four five six"):
            seen.append(chunk.content)
            if len(seen) == 3:
                break
        return seen

    assert len(check(fake, tmp_path, way, drive)) == 3


@pytest.mark.slow
@pytest.mark.parametrize("way", PROXIES)
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
        return first.tool_calls, model.invoke(messages).content

    calls, answer = check(fake, tmp_path, way, drive)
    assert [c["name"] for c in calls] == ["get_weather"]
    assert "sunny in Weather in Oslo?" in str(answer)


@pytest.mark.slow
@pytest.mark.parametrize("way", PROXIES)
def test_retry_after_500(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    def drive(target: Target) -> Any:
        return chat_model(target, max_retries=2).invoke("Try again").content

    truth = check(fake, tmp_path, way, drive, script=server_error("anthropic"))
    assert truth == "Fake reply to: Try again"


@pytest.mark.slow
@pytest.mark.parametrize("way", PROXIES)
def test_async_gather(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    def drive(target: Target) -> Any:
        async def main() -> Any:
            model = chat_model(target)
            try:
                replies = await asyncio.gather(*(model.ainvoke(f"Question {n}") for n in range(4)))
            finally:
                # langchain-anthropic caches its async httpx client by base
                # URL, across event loops: closed here, in its own loop, and
                # forgotten, else the next asyncio.run finds it bound to this
                # one, closed
                await model._async_client.close()
                client_utils._get_default_async_httpx_client.cache_clear()
            return [r.content for r in replies]

        return target.run(main)

    assert check(fake, tmp_path, way, drive) == [f"Fake reply to: Question {n}" for n in range(4)]


@pytest.mark.parametrize("way", PROXIES)
def test_miss(tmp_path: Path, way: Way) -> None:
    """A miss reaches the langchain user as ``AnthropicModelNotFoundError``
    (an ``anthropic.NotFoundError``)."""
    import anthropic
    from langchain_anthropic.chat_models import AnthropicModelNotFoundError

    with miss(way, tmp_path) as target, pytest.raises(AnthropicModelNotFoundError) as raised:
        chat_model(target).invoke("Never recorded")
    assert isinstance(raised.value, anthropic.NotFoundError)
    assert raised.value.status_code == 404
    assert "no recording" in str(raised.value).lower()


def test_takes_no_client() -> None:
    """Why there is no in-process case: ``ChatAnthropic`` has no field for a
    client or an HTTP client (``ChatOpenAI`` has ``http_client``...)."""
    fields = langchain_anthropic.ChatAnthropic.model_fields
    assert not [name for name in fields if "client" in name or "http" in name]
