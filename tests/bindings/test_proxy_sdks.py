"""The official SDKs, pointed at the proxy, see the same thing in record and replay.

Each test runs one SDK scenario through a record-mode proxy (fake upstream
behind it), stops the fake, runs it again through a replay-mode proxy and
compares the results.  Retries are off everywhere.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anthropic
import anyio.to_thread
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors

from reel_bindings.proxy import running
from reel_core import Mode
from tests.fakes.upstream import ToolSpec, reply_text, serve_fake, text_pieces, tool_arguments
from tests.secrets import SDK_ANTHROPIC_KEY, SDK_GEMINI_KEY, SDK_OPENAI_KEY

from .proxy_support import WEATHER_SCHEMA, interactions, options

pytestmark = pytest.mark.anyio

# On trio the OpenAI SDK stops at [DONE] and leaves its inner async generators
# to the garbage collector, which trio reports; that is the SDK's business.
sdk_leaves_async_generators = pytest.mark.filterwarnings("ignore:Async generator:ResourceWarning")

T = TypeVar("T")
USER = "What is the weather in Oslo?"
WEATHER = ToolSpec("get_weather", WEATHER_SCHEMA)


async def record_and_replay(cassette: Path, scenario: Callable[[str], Awaitable[T]]) -> tuple[T, T]:
    """``scenario(proxy_url)`` through a recording proxy, then through a replaying one."""
    async with serve_fake() as fake:
        async with running(options(Mode.RECORD, cassette, upstream=fake.url)) as url:
            recorded = await scenario(url)
        assert fake.requests
    async with running(options(Mode.REPLAY, cassette)) as url:
        replayed = await scenario(url)
    assert interactions(cassette)
    return recorded, replayed


# ---------------------------------------------------------------------- openai


def openai_client(url: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=url + "/v1", api_key=SDK_OPENAI_KEY, max_retries=0)


async def test_openai_chat(tmp_path: Path) -> None:
    async def chat(url: str) -> dict[str, Any]:
        async with openai_client(url) as client:
            completion = await client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": USER}]
            )
        assert completion.choices[0].message.content == reply_text(USER)
        return completion.model_dump()

    recorded, replayed = await record_and_replay(tmp_path / "c.jsonl", chat)
    assert replayed == recorded


async def test_openai_uploads_in_auto_mode_then_replay(tmp_path: Path) -> None:
    training = b'{"messages": [{"role": "user", "content": "hi"}]}\n'
    audio = bytes(range(256)) * 8

    async def uploads(url: str) -> list[dict[str, Any]]:
        async with openai_client(url) as client:
            made = await client.files.create(file=("train.jsonl", training), purpose="fine-tune")
            heard = await client.audio.transcriptions.create(
                model="whisper-1", file=("talk.wav", audio)
            )
        return [made.model_dump(), heard.model_dump()]

    cassette = tmp_path / "uploads.jsonl"
    async with serve_fake() as fake:
        async with running(options(Mode.AUTO, cassette, upstream=fake.url)) as url:
            recorded = await uploads(url)
        assert len(fake.requests) == 2
    async with running(options(Mode.REPLAY, cassette)) as url:
        replayed = await uploads(url)  # the SDK draws new boundaries: still hits
    assert replayed == recorded
    assert [ix.request.content_type for ix in interactions(cassette)] == [
        "multipart/form-data",
        "multipart/form-data",
    ]


@sdk_leaves_async_generators
async def test_openai_chat_stream(tmp_path: Path) -> None:
    async def stream(url: str) -> list[dict[str, Any]]:
        async with openai_client(url) as client:
            chunks = await client.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": USER}],
                stream=True,
                stream_options={"include_usage": True},
            )
            async with chunks:
                got = [chunk async for chunk in chunks]
        text = "".join(c.choices[0].delta.content or "" for c in got if c.choices)
        assert text == reply_text(USER)
        return [c.model_dump() for c in got]

    recorded, replayed = await record_and_replay(tmp_path / "c.jsonl", stream)
    assert replayed == recorded
    assert recorded[-1]["usage"] is not None


@sdk_leaves_async_generators
async def test_openai_tool_call_stream(tmp_path: Path) -> None:
    tool: openai.types.chat.ChatCompletionToolParam = {
        "type": "function",
        "function": {"name": WEATHER.name, "parameters": WEATHER_SCHEMA},
    }

    async def calls(url: str) -> tuple[list[str], str]:
        names: list[str] = []
        arguments = ""
        async with openai_client(url) as client:
            chunks = await client.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": USER}],
                tools=[tool],
                stream=True,
            )
            async with chunks:
                async for chunk in chunks:
                    for call in chunk.choices[0].delta.tool_calls or []:
                        assert call.function is not None
                        arguments += call.function.arguments or ""
                        if call.function.name:
                            names.append(call.function.name)
        return names, arguments

    recorded, replayed = await record_and_replay(tmp_path / "c.jsonl", calls)
    assert replayed == recorded
    names, arguments = replayed
    assert names == [WEATHER.name]
    assert json.loads(arguments) == tool_arguments(WEATHER, USER)


@pytest.mark.parametrize(
    ("model", "error", "status"),
    [
        ("fake-429", openai.RateLimitError, 429),
        ("fake-500", openai.InternalServerError, 500),
        ("fake-400", openai.BadRequestError, 400),
    ],
)
async def test_openai_errors(
    tmp_path: Path, model: str, error: type[openai.APIStatusError], status: int
) -> None:
    async def fail(url: str) -> tuple[type[BaseException], int, str, object, str | None]:
        async with openai_client(url) as client:
            with pytest.raises(openai.APIStatusError) as caught:
                await client.chat.completions.create(
                    model=model, messages=[{"role": "user", "content": "x"}]
                )
        exc = caught.value
        retry_after = exc.response.headers.get("retry-after")
        return type(exc), exc.status_code, exc.message, exc.body, retry_after

    recorded, replayed = await record_and_replay(tmp_path / "c.jsonl", fail)
    assert replayed == recorded
    assert recorded[0] is error
    assert recorded[1] == status
    if status == 429:
        assert recorded[4] == "1"


# ------------------------------------------------------------------- anthropic


def anthropic_client(url: str) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=url, api_key=SDK_ANTHROPIC_KEY, max_retries=0)


async def test_anthropic_message(tmp_path: Path) -> None:
    async def create(url: str) -> dict[str, Any]:
        async with anthropic_client(url) as client:
            message = await client.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=64,
                messages=[{"role": "user", "content": USER}],
            )
        block = message.content[0]
        assert block.type == "text"
        assert block.text == reply_text(USER)
        return message.model_dump()

    recorded, replayed = await record_and_replay(tmp_path / "c.jsonl", create)
    assert replayed == recorded


async def test_anthropic_stream_with_tool_use(tmp_path: Path) -> None:
    tool: anthropic.types.ToolParam = {"name": WEATHER.name, "input_schema": WEATHER_SCHEMA}

    async def stream(url: str) -> tuple[list[dict[str, Any]], str, dict[str, Any]]:
        async with anthropic_client(url) as client:
            raw = await client.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=64,
                messages=[{"role": "user", "content": USER}],
                tools=[tool],
                stream=True,
            )
            events = [event async for event in raw]
            async with client.messages.stream(
                model="claude-sonnet-4-6",
                max_tokens=64,
                messages=[{"role": "user", "content": "Just talk"}],
            ) as helper:
                text = "".join([piece async for piece in helper.text_stream])
                final = await helper.get_final_message()
        return [e.model_dump() for e in events], text, final.model_dump()

    recorded, replayed = await record_and_replay(tmp_path / "c.jsonl", stream)
    assert replayed == recorded
    events, text, final = replayed
    partial = "".join(
        e["delta"]["partial_json"]
        for e in events
        if e["type"] == "content_block_delta" and e["delta"]["type"] == "input_json_delta"
    )
    assert json.loads(partial) == tool_arguments(WEATHER, USER)
    assert text == reply_text("Just talk")
    assert final["usage"]["output_tokens"] == len(text_pieces(text))


async def test_anthropic_rate_limit(tmp_path: Path) -> None:
    async def fail(url: str) -> tuple[type[BaseException], int, str, str | None]:
        async with anthropic_client(url) as client:
            with pytest.raises(anthropic.APIStatusError) as caught:
                await client.messages.create(
                    model="fake-429", max_tokens=8, messages=[{"role": "user", "content": "x"}]
                )
        exc = caught.value
        return type(exc), exc.status_code, exc.message, exc.response.headers.get("retry-after")

    recorded, replayed = await record_and_replay(tmp_path / "c.jsonl", fail)
    assert replayed == recorded
    assert recorded[:2] == (anthropic.RateLimitError, 429)
    assert recorded[3] == "1"


# ---------------------------------------------------------------------- gemini


def genai_client(url: str) -> genai.Client:
    return genai.Client(api_key=SDK_GEMINI_KEY, http_options={"base_url": url})


def gemini_sync(url: str) -> tuple[dict[str, Any], list[dict[str, Any]], tuple[object, ...]]:
    """generate_content, generate_content_stream and a 429, with the sync client."""
    with genai_client(url) as client:
        response = client.models.generate_content(model="gemini-2.5-flash", contents=USER)
        chunks = list(
            client.models.generate_content_stream(model="gemini-2.5-flash", contents="Stream it")
        )
        with pytest.raises(genai_errors.ClientError) as caught:
            client.models.generate_content(model="fake-429", contents="x")
    assert response.text == reply_text(USER)
    assert [c.text for c in chunks] == text_pieces(reply_text("Stream it"))
    exc = caught.value
    failure = (type(exc), exc.code, exc.status, exc.message)
    skip = {"sdk_http_response"}  # transport details (headers) are not the payload
    return (
        response.model_dump(exclude=skip),
        [c.model_dump(exclude=skip) for c in chunks],
        failure,
    )


async def test_gemini_sync_client_in_a_thread(tmp_path: Path) -> None:
    async def run(url: str) -> tuple[dict[str, Any], list[dict[str, Any]], tuple[object, ...]]:
        return await anyio.to_thread.run_sync(gemini_sync, url)

    recorded, replayed = await record_and_replay(tmp_path / "c.jsonl", run)
    assert replayed == recorded
    assert recorded[2][1] == 429


# google-genai's async client calls asyncio.get_running_loop(): asyncio only.
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_gemini_async_client(tmp_path: Path, anyio_backend: str) -> None:

    async def run(url: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        client = genai_client(url)
        try:
            response = await client.aio.models.generate_content(
                model="gemini-2.5-flash", contents=USER
            )
            stream = await client.aio.models.generate_content_stream(
                model="gemini-2.5-flash", contents="Stream it"
            )
            chunks = [chunk async for chunk in stream]
        finally:
            await client.aio.aclose()
            client.close()
        assert response.text == reply_text(USER)
        assert [c.text for c in chunks] == text_pieces(reply_text("Stream it"))
        skip = {"sdk_http_response"}
        return response.model_dump(exclude=skip), [c.model_dump(exclude=skip) for c in chunks]

    recorded, replayed = await record_and_replay(tmp_path / "c.jsonl", run)
    assert replayed == recorded


# ---------------------------------------------------------------- the placeholder


@pytest.mark.parametrize("mode", [Mode.RECORD, Mode.AUTO, Mode.LIVE])
async def test_no_sdk_sends_the_replay_placeholder_upstream(tmp_path: Path, mode: Mode) -> None:
    """Each SDK, given Reel's replay placeholder for its key (as a client made
    in a replay run without one is), through a proxy that forwards: a 401 of
    Reel's own saying what to do, nothing sent upstream, nothing recorded."""
    from reel_core.tools import REPLAY_KEY

    cassette = tmp_path / "c.jsonl"
    async with serve_fake() as fake:
        async with running(options(mode, cassette, upstream=fake.url)) as url:
            oa = openai.AsyncOpenAI(base_url=url + "/v1", api_key=REPLAY_KEY, max_retries=0)
            with pytest.raises(openai.AuthenticationError, match="replay placeholder"):
                await oa.chat.completions.create(
                    model="gpt-4o-mini", messages=[{"role": "user", "content": USER}]
                )
            await oa.close()
            claude = anthropic.AsyncAnthropic(base_url=url, api_key=REPLAY_KEY, max_retries=0)
            with pytest.raises(anthropic.AuthenticationError, match="replay placeholder"):
                await claude.messages.create(
                    model="claude-sonnet-4-6",
                    max_tokens=16,
                    messages=[{"role": "user", "content": USER}],
                )
            await claude.close()

            def gemini() -> None:  # the sync client: its async one runs on asyncio only
                with genai.Client(api_key=REPLAY_KEY, http_options={"base_url": url}) as client:
                    client.models.generate_content(model="gemini-2.5-flash", contents=USER)

            with pytest.raises(genai_errors.ClientError, match="replay placeholder"):
                await anyio.to_thread.run_sync(gemini)
        assert fake.requests == []
    assert not cassette.exists() or interactions(cassette) == []
