"""openai-agents through Reel: an ``Agent`` run by ``Runner``.

The model is ``OpenAIChatCompletionsModel`` (or the Responses model) on the
``AsyncOpenAI`` client it is given: in-process, that client is on Reel's
transport; through the proxy, its ``base_url`` is the proxy.  Tracing is
off (``set_tracing_disabled``): it would post every run to OpenAI.
"""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

import openai
import pytest
from pydantic import BaseModel

from tests.fakes.upstream import FakeUpstreamThread
from tests.frameworks.matrix import KEY, WAYS, Target, Way, check, framework, miss, server_error

agents = framework("agents", reason="openai-agents is not installed (pip install openai-agents)")


@pytest.fixture(scope="module", autouse=True)
def no_tracing() -> None:
    agents.set_tracing_disabled(True)


class Weather(BaseModel):
    city: str
    degrees: int


@functools.cache
def weather_tool() -> Any:
    """The tool, made at its first use (:func:`framework`)."""

    @agents.function_tool  # type: ignore[untyped-decorator, unused-ignore]
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    return get_weather


def agent(target: Target, *, max_retries: int = 0, responses: bool = False, **kwargs: Any) -> Any:
    client = openai.AsyncOpenAI(
        base_url=target.v1,
        api_key=KEY,
        http_client=target.aclient(own=True),
        max_retries=max_retries,
    )
    kind = agents.OpenAIResponsesModel if responses else agents.OpenAIChatCompletionsModel
    return agents.Agent(
        name="helper", model=kind(model="gpt-4o-mini", openai_client=client), **kwargs
    )


def run(target: Target, prompt: str, **kwargs: Any) -> Any:
    async def main() -> Any:
        return (await agents.Runner.run(agent(target, **kwargs), prompt)).final_output

    return target.run(main)


@pytest.mark.parametrize("way", WAYS)
def test_run(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    truth = check(fake, tmp_path, way, lambda target: run(target, "Say hello to Reel."))
    assert truth == "Fake reply to: Say hello to Reel."


@pytest.mark.slow
@pytest.mark.parametrize("way", WAYS)
def test_responses_run(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    """The Responses API model (the SDK's default kind)."""
    truth = check(fake, tmp_path, way, lambda t: run(t, "Say hello to Reel.", responses=True))
    assert "Say hello to Reel." in truth


@pytest.mark.parametrize("way", WAYS)
def test_stream_early_break(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    """``result.cancel()`` cancels the task reading the stream.  The proxy
    reads on from its socket and records the stream whole; in-process the
    cancellation ends the body iterator under Reel, which records what came
    as the client's cut (never nothing), and replays just that."""

    def drive(target: Target) -> Any:
        async def main() -> Any:
            result = agents.Runner.run_streamed(agent(target), "Count one two three four five")
            seen: list[str] = []
            async for event in result.stream_events():
                if event.type == "raw_response_event" and hasattr(event.data, "delta"):
                    seen.append(event.data.delta)
                    if len(seen) == 2:
                        result.cancel()
                        break
            return seen

        return target.run(main)

    truth = check(fake, tmp_path, way, drive, client_cuts=way is Way.INPROCESS)
    assert truth == ["Fake", " reply"]


@pytest.mark.slow
@pytest.mark.parametrize("way", WAYS)
def test_tool_run(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    truth = check(fake, tmp_path, way, lambda t: run(t, "Weather in Oslo?", tools=[weather_tool()]))
    assert truth == "The tool said: sunny in Weather in Oslo?"


@pytest.mark.slow
@pytest.mark.parametrize("way", WAYS)
def test_structured_output(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    """``output_type`` asks for a JSON schema response format; the fake answers
    its text, which is no JSON: the SDK raises ``ModelBehaviorError``, the
    same in the replay as straight."""

    def drive(target: Target) -> Any:
        try:
            return run(target, "Oslo", output_type=Weather)
        except agents.exceptions.ModelBehaviorError as exc:
            return type(exc).__name__, str(exc)

    truth = check(fake, tmp_path, way, drive)
    assert truth[0] == "ModelBehaviorError"


@pytest.mark.slow
@pytest.mark.parametrize("way", WAYS)
def test_retry_after_500(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    truth = check(
        fake, tmp_path, way, lambda t: run(t, "Try again", max_retries=2), script=server_error()
    )
    assert truth == "Fake reply to: Try again"


@pytest.mark.slow
@pytest.mark.parametrize("way", WAYS)
def test_async_gather(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    def drive(target: Target) -> Any:
        async def main() -> Any:
            helper = agent(target)
            results = await asyncio.gather(
                *(agents.Runner.run(helper, f"Question {n}") for n in range(4))
            )
            return [r.final_output for r in results]

        return target.run(main)

    assert check(fake, tmp_path, way, drive) == [f"Fake reply to: Question {n}" for n in range(4)]


@pytest.mark.parametrize("way", WAYS)
def test_miss(tmp_path: Path, way: Way) -> None:
    """openai-agents lets the SDK's error through: a miss is openai's NotFoundError."""
    with miss(way, tmp_path) as target, pytest.raises(openai.NotFoundError) as raised:
        run(target, "Never recorded")
    assert raised.value.status_code == 404
    assert "no recording" in str(raised.value).lower()
