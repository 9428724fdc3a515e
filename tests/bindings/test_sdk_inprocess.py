"""The official SDKs on the in-process transports (reel_bindings.sdk): what they
return live (record mode, against the fake upstream) they return again on
replay with no upstream at all -- sync and async, asyncio and trio where the
SDK supports it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import anyio
import openai
import pytest

from reel_bindings.sdk import (
    anthropic_client,
    async_anthropic_client,
    async_openai_client,
    genai_client,
    openai_client,
)
from reel_core import MissError
from tests.fakes.upstream import FakeUpstreamThread
from tests.secrets import INPROCESS_KEY

GONE = "http://127.0.0.1:9"  # nothing listens: a replay that reached out would fail
MESSAGES = [{"role": "user", "content": "What is Reel?"}]
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
ANTHROPIC_TOOL = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeUpstreamThread]:
    with FakeUpstreamThread() as server:
        yield server


def key(mode: str) -> str | None:
    """A key to record with; replay needs none (the helpers pass a placeholder)."""
    return INPROCESS_KEY if mode == "record" else None


def twice(
    tmp_path: Path, fake: FakeUpstreamThread, run: Callable[[Path, str, str], Any]
) -> tuple[Any, Any]:
    """``run(cassette, mode, base_url)`` live (record), then on replay."""
    cassette = tmp_path / "sdk.jsonl"
    live = run(cassette, "record", fake.url)
    seen = len(fake.requests)
    again = run(cassette, "replay", GONE)
    assert len(fake.requests) == seen, "replay reached the upstream"
    return live, again


# -- OpenAI -----------------------------------------------------------------------


def async_openai(cassette: Path, mode: str, base: str) -> Any:
    """An async OpenAI client on ``cassette`` (fast timing, no retries)."""
    return async_openai_client(
        cassette, mode=mode, timing="fast", base_url=base + "/v1", max_retries=0, api_key=key(mode)
    )


def openai_calls(client: Any) -> list[Any]:
    out: list[Any] = [client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)]
    stream = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
    )
    out.append([chunk.model_dump() for chunk in stream])
    tools = client.chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES, tools=[TOOL], stream=True
    )
    arguments = "".join(
        call.function.arguments or ""
        for chunk in tools
        for choice in chunk.choices
        for call in choice.delta.tool_calls or ()
    )
    out.append(json.loads(arguments))
    for model in ("fake-429", "fake-500", "fake-400"):
        with pytest.raises(openai.APIStatusError) as info:
            client.chat.completions.create(model=model, messages=MESSAGES)
        out.append((type(info.value).__name__, info.value.status_code, info.value.message))
    return [item.model_dump() if hasattr(item, "model_dump") else item for item in out]


def test_openai_sync(tmp_path: Path, fake: FakeUpstreamThread) -> None:
    def run(cassette: Path, mode: str, base: str) -> Any:
        client = openai_client(
            cassette,
            mode=mode,
            timing="fast",
            base_url=base + "/v1",
            max_retries=0,
            api_key=key(mode),
        )
        with client:
            return openai_calls(client)

    live, again = twice(tmp_path, fake, run)
    assert live == again
    assert live[3][:2] == ("RateLimitError", 429)


async def openai_async_calls(client: Any) -> list[Any]:
    async with client:
        return await _openai_async_calls(client)


async def _openai_async_calls(client: Any) -> list[Any]:
    out: list[Any] = [
        (await client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)).model_dump()
    ]
    stream = await client.chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES, stream=True
    )
    async with stream:
        out.append([chunk.model_dump() async for chunk in stream])
    with pytest.raises(openai.RateLimitError) as info:
        await client.chat.completions.create(model="fake-429", messages=MESSAGES)
    out.append(info.value.message)
    return out


# The openai SDK stops iterating its own async generators at [DONE] without
# closing them; trio's finalizer then warns about them (not Reel's generators).
SDK_ASYNCGEN = pytest.mark.filterwarnings(
    "ignore:Async generator 'openai._streaming:ResourceWarning",
    "ignore:Async generator 'httpx2._models.Response.aiter_bytes':ResourceWarning",
    "ignore::pytest.PytestUnraisableExceptionWarning",
)


@pytest.mark.parametrize("backend", ["asyncio", pytest.param("trio", marks=SDK_ASYNCGEN)])
def test_openai_async(tmp_path: Path, fake: FakeUpstreamThread, backend: str) -> None:
    def run(cassette: Path, mode: str, base: str) -> Any:
        client = async_openai(cassette, mode, base)
        return anyio.run(openai_async_calls, client, backend=backend)

    live, again = twice(tmp_path, fake, run)
    assert live == again
    assert len(live[1]) > 3


# -- uploads: multipart bodies, a fresh boundary on every call ------------------

TRAINING = b'{"messages": [{"role": "user", "content": "hi"}]}\n'
AUDIO = bytes(range(256)) * 8  # binary: stored as sent, keyed by digest


def openai_uploads(client: Any) -> list[Any]:
    made = client.files.create(file=("train.jsonl", TRAINING), purpose="fine-tune")
    heard = client.audio.transcriptions.create(model="whisper-1", file=("talk.wav", AUDIO))
    return [made.model_dump(), heard.model_dump()]


def test_openai_uploads_record_in_auto_mode_and_replay(
    tmp_path: Path, fake: FakeUpstreamThread
) -> None:
    def run(cassette: Path, mode: str, base: str) -> Any:
        client = openai_client(
            cassette,
            mode=mode,
            timing="fast",
            base_url=base + "/v1",
            max_retries=0,
            api_key="sk-test-" + "k" * 24,
        )
        with client:
            return openai_uploads(client)

    cassette = tmp_path / "uploads.jsonl"
    live = run(cassette, "auto", fake.url)
    seen = len(fake.requests)
    assert len(cassette.read_bytes().splitlines()) == 3  # _meta and two uploads
    again = run(cassette, "replay", GONE)  # new boundaries: still every one a hit
    assert len(fake.requests) == seen
    assert live == again
    assert live[0]["filename"] == "train.jsonl"
    assert live[0]["bytes"] == len(TRAINING)
    assert f"{len(AUDIO)} bytes" in live[1]["text"]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_openai_async_uploads_replay(
    tmp_path: Path, fake: FakeUpstreamThread, backend: str
) -> None:
    async def uploads(client: Any) -> list[Any]:
        async with client:
            made = await client.files.create(file=("train.jsonl", TRAINING), purpose="fine-tune")
            heard = await client.audio.transcriptions.create(
                model="whisper-1", file=("talk.wav", AUDIO)
            )
        return [made.model_dump(), heard.model_dump()]

    def run(cassette: Path, mode: str, base: str) -> Any:
        client = async_openai(cassette, mode, base)
        return anyio.run(uploads, client, backend=backend)

    live, again = twice(tmp_path, fake, run)
    assert live == again


def test_openai_miss_and_strict(tmp_path: Path) -> None:
    cassette = tmp_path / "empty.jsonl"
    cassette.write_bytes(b"")
    client = openai_client(cassette, mode="replay", base_url=GONE + "/v1", max_retries=0)
    with pytest.raises(openai.NotFoundError, match="Reel miss"):
        client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    strict = openai_client(
        cassette, mode="replay", strict=True, base_url=GONE + "/v1", max_retries=0
    )
    with pytest.raises(MissError) as info:
        strict.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    assert info.value.report.path == "/v1/chat/completions"


# -- Anthropic --------------------------------------------------------------------


def anthropic_calls(client: Any) -> list[Any]:
    out: list[Any] = [
        client.messages.create(
            model="claude-sonnet-4-6", max_tokens=128, messages=MESSAGES
        ).model_dump()
    ]
    with client.messages.stream(
        model="claude-sonnet-4-6", max_tokens=128, messages=MESSAGES
    ) as stream:
        out.append("".join(stream.text_stream))
        out.append(stream.get_final_message().model_dump())
    with client.messages.stream(
        model="claude-sonnet-4-6", max_tokens=128, messages=MESSAGES, tools=[ANTHROPIC_TOOL]
    ) as stream:
        final = stream.get_final_message()
    out.append([block.model_dump() for block in final.content])
    with pytest.raises(anthropic.RateLimitError) as info:
        client.messages.create(model="fake-429", max_tokens=16, messages=MESSAGES)
    out.append(info.value.message)
    return out


def test_anthropic_sync(tmp_path: Path, fake: FakeUpstreamThread) -> None:
    def run(cassette: Path, mode: str, base: str) -> Any:
        client = anthropic_client(
            cassette, mode=mode, timing="fast", base_url=base, max_retries=0, api_key=key(mode)
        )
        with client:
            return anthropic_calls(client)

    live, again = twice(tmp_path, fake, run)
    assert live == again
    assert any(block["type"] == "tool_use" for block in live[3])


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_anthropic_async(tmp_path: Path, fake: FakeUpstreamThread, backend: str) -> None:
    async def calls(client: Any) -> list[Any]:
        async with client:
            return await inner(client)

    async def inner(client: Any) -> list[Any]:
        message = await client.messages.create(
            model="claude-sonnet-4-6", max_tokens=128, messages=MESSAGES
        )
        async with client.messages.stream(
            model="claude-sonnet-4-6", max_tokens=128, messages=MESSAGES
        ) as stream:
            text = "".join([piece async for piece in stream.text_stream])
        return [message.model_dump(), text]

    def run(cassette: Path, mode: str, base: str) -> Any:
        client = async_anthropic_client(
            cassette, mode=mode, timing="fast", base_url=base, max_retries=0, api_key=key(mode)
        )
        return anyio.run(calls, client, backend=backend)

    live, again = twice(tmp_path, fake, run)
    assert live == again
    assert live[1]


# -- Gemini -----------------------------------------------------------------------


def test_genai_sync(tmp_path: Path, fake: FakeUpstreamThread) -> None:
    def run(cassette: Path, mode: str, base: str) -> Any:
        with genai_client(
            cassette, mode=mode, timing="fast", base_url=base, api_key=key(mode)
        ) as client:
            whole = client.models.generate_content(
                model="gemini-2.5-flash", contents="What is Reel?"
            )
            pieces = [
                chunk.text
                for chunk in client.models.generate_content_stream(
                    model="gemini-2.5-flash", contents="What is Reel?"
                )
            ]
            return [whole.text, whole.usage_metadata.model_dump(), pieces]

    live, again = twice(tmp_path, fake, run)
    assert live == again
    assert len(live[2]) > 1


def test_genai_async_on_asyncio(tmp_path: Path, fake: FakeUpstreamThread) -> None:
    # google-genai's async client calls asyncio.get_running_loop(): asyncio only.
    async def calls(client: Any) -> list[Any]:
        async with client.aio:
            return await inner(client)

    async def inner(client: Any) -> list[Any]:
        whole = await client.aio.models.generate_content(
            model="gemini-2.5-flash", contents="What is Reel?"
        )
        stream = await client.aio.models.generate_content_stream(
            model="gemini-2.5-flash", contents="What is Reel?"
        )
        return [whole.text, [chunk.text async for chunk in stream]]

    def run(cassette: Path, mode: str, base: str) -> Any:
        client = genai_client(cassette, mode=mode, timing="fast", base_url=base, api_key=key(mode))
        return anyio.run(calls, client, backend="asyncio")

    live, again = twice(tmp_path, fake, run)
    assert live == again
