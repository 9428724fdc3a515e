"""instructor through Reel: structured output on the OpenAI client it wraps.

In-process, the OpenAI client it is given is on Reel's transport; through
the proxy, that client's ``base_url`` is the proxy.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import openai
import pytest
from pydantic import BaseModel

from tests.fakes.upstream import FakeUpstreamThread
from tests.frameworks.matrix import KEY, WAYS, Target, Way, check, framework, miss, server_error

instructor = framework("instructor", reason="instructor is not installed (pip install instructor)")


class Weather(BaseModel):
    city: str
    degrees: int


def patched(target: Target, *, max_retries: int = 0) -> Any:
    client = openai.OpenAI(
        base_url=target.v1, api_key=KEY, http_client=target.client(), max_retries=max_retries
    )
    return instructor.from_openai(client)


def ask(client: Any, prompt: str) -> Any:
    return seen(
        client.chat.completions.create(
            model="gpt-4o-mini",
            response_model=Weather,
            messages=[{"role": "user", "content": prompt}],
        )
    )


def seen(parsed: Any) -> tuple[Weather, dict[str, Any]]:
    """What a user has of an answer: the object (instructor returns it as a
    fresh subclass of the response model each call, which pydantic never
    finds equal to another: compared as a ``Weather``) and the raw completion."""
    return Weather(**parsed.model_dump()), parsed._raw_response.model_dump()


@pytest.mark.parametrize("way", WAYS)
def test_structured_output(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    truth = check(fake, tmp_path, way, lambda target: ask(patched(target), "Oslo"))
    assert truth[0] == Weather(city="Oslo", degrees=42)


@pytest.mark.slow
@pytest.mark.parametrize("way", WAYS)
def test_partial_stream_early_break(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    """``create_partial`` streams growing objects; the user stops at the second."""

    def drive(target: Target) -> Any:
        seen: list[Any] = []
        for partial in patched(target).chat.completions.create_partial(
            model="gpt-4o-mini",
            response_model=Weather,
            messages=[{"role": "user", "content": "Weather in Bergen and more words"}],
        ):
            seen.append(partial.model_dump())
            if len(seen) == 2:
                break
        return seen

    assert len(check(fake, tmp_path, way, drive)) == 2


@pytest.mark.slow
@pytest.mark.parametrize("way", WAYS)
def test_retry_after_500(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    def drive(target: Target) -> Any:
        return ask(patched(target, max_retries=2), "Oslo")

    truth = check(fake, tmp_path, way, drive, script=server_error())
    assert truth[0] == Weather(city="Oslo", degrees=42)


@pytest.mark.slow
@pytest.mark.parametrize("way", WAYS)
def test_async_gather(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    def drive(target: Target) -> Any:
        async def main() -> Any:
            client = instructor.from_openai(
                openai.AsyncOpenAI(
                    base_url=target.v1,
                    api_key=KEY,
                    http_client=target.aclient(own=True),
                    max_retries=0,
                )
            )
            answers = await asyncio.gather(
                *(
                    client.chat.completions.create(
                        model="gpt-4o-mini",
                        response_model=Weather,
                        messages=[{"role": "user", "content": f"City {n}"}],
                    )
                    for n in range(4)
                )
            )
            return [seen(answer) for answer in answers]

        return target.run(main)

    truth = check(fake, tmp_path, way, drive)
    assert [weather for weather, _ in truth] == [
        Weather(city=f"City {n}", degrees=42) for n in range(4)
    ]


@pytest.mark.parametrize("way", WAYS)
def test_miss(tmp_path: Path, way: Way) -> None:
    """instructor wraps the SDK's error: a miss is its
    ``InstructorRetryException`` caused by openai's NotFoundError."""
    from instructor.core import InstructorRetryException

    with miss(way, tmp_path) as target, pytest.raises(InstructorRetryException) as raised:
        ask(patched(target), "Never recorded")
    cause = raised.value.__cause__
    assert isinstance(cause, openai.NotFoundError)
    assert cause.status_code == 404
    assert "no recording" in str(cause).lower()
