"""pydantic-ai through Reel: an ``Agent`` on ``OpenAIChatModel``.

In-process, ``OpenAIProvider(http_client=...)`` takes the httpx2 client on
Reel's transport (or ``openai_client=`` an ``AsyncOpenAI`` built on it);
through the proxy, the provider's ``base_url`` is the proxy.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import openai
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

pydantic_ai = framework(
    "pydantic_ai", reason="pydantic-ai is not installed (pip install pydantic-ai-slim[openai])"
)
openai_models = lazy("pydantic_ai.models.openai")
openai_providers = lazy("pydantic_ai.providers.openai")


class Weather(BaseModel):
    city: str
    degrees: int


def model(target: Target, *, max_retries: int = 0) -> Any:
    client = openai.AsyncOpenAI(
        base_url=target.v1,
        api_key=KEY,
        http_client=target.aclient(own=True),
        max_retries=max_retries,
    )
    return openai_models.OpenAIChatModel(
        "gpt-4o-mini", provider=openai_providers.OpenAIProvider(openai_client=client)
    )


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def run(target: Target, prompt: str, **agent: Any) -> Any:
    async def main() -> Any:
        result = await pydantic_ai.Agent(model(target), **agent).run(prompt)
        return result.output

    return target.run(main)


@pytest.mark.parametrize("way", WAYS)
def test_run(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    truth = check(fake, tmp_path, way, lambda target: run(target, "Say hello to Reel."))
    assert truth == "Fake reply to: Say hello to Reel."


@pytest.mark.slow
@pytest.mark.parametrize("way", WAYS)
def test_stream_early_break(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    def drive(target: Target) -> Any:
        async def main() -> Any:
            agent = pydantic_ai.Agent(model(target))
            seen: list[str] = []
            async with agent.run_stream("Count one two three four five six") as result:
                async for text in result.stream_text(delta=True, debounce_by=None):
                    seen.append(text)
                    if len(seen) == 2:
                        break
            return seen

        return target.run(main)

    assert check(fake, tmp_path, way, drive) == ["Fake", " reply"]


@pytest.mark.slow
@pytest.mark.parametrize("way", WAYS)
def test_tool_run(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    truth = check(fake, tmp_path, way, lambda t: run(t, "Weather in Oslo?", tools=[get_weather]))
    assert truth == "The tool said: sunny in Weather in Oslo?"


@pytest.mark.parametrize("way", WAYS)
def test_structured_output(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    truth = check(fake, tmp_path, way, lambda t: run(t, "Oslo", output_type=Weather))
    assert truth == Weather(city="Oslo", degrees=42)


@pytest.mark.slow
@pytest.mark.parametrize("way", WAYS)
def test_retry_after_500(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    def drive(target: Target) -> Any:
        async def main() -> Any:
            agent = pydantic_ai.Agent(model(target, max_retries=2))
            return (await agent.run("Try again")).output

        return target.run(main)

    assert check(fake, tmp_path, way, drive, script=server_error()) == "Fake reply to: Try again"


@pytest.mark.slow
@pytest.mark.parametrize("way", WAYS)
def test_async_gather(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    def drive(target: Target) -> Any:
        async def main() -> Any:
            agent = pydantic_ai.Agent(model(target))
            results = await asyncio.gather(*(agent.run(f"Question {n}") for n in range(4)))
            return [r.output for r in results]

        return target.run(main)

    assert check(fake, tmp_path, way, drive) == [f"Fake reply to: Question {n}" for n in range(4)]


@pytest.mark.parametrize("way", WAYS)
def test_miss(tmp_path: Path, way: Way) -> None:
    """A miss is pydantic-ai's ``ModelNotFoundError`` (a ``ModelHTTPError``
    with status 404): a ``FallbackModel`` falls back on it."""
    from pydantic_ai.exceptions import ModelHTTPError, ModelNotFoundError

    with miss(way, tmp_path) as target, pytest.raises(ModelNotFoundError) as raised:
        run(target, "Never recorded")
    assert isinstance(raised.value, ModelHTTPError)
    assert raised.value.status_code == 404
    assert "no recording" in str(raised.value.body).lower()
