"""The real provider SDKs parse what the fake answers, errors included.

Sync clients talk to :class:`FakeUpstreamThread` (its loop on asyncio and on
trio); async clients to :func:`serve_fake` under anyio's plugin.  Retries are
off so the error tests are fast.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from tests.fakes.openai_wire import embedding_vector
from tests.fakes.upstream import (
    FakeUpstreamThread,
    ToolSpec,
    reply_text,
    serve_fake,
    text_pieces,
    tool_arguments,
)

WEATHER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
WEATHER = ToolSpec("get_weather", WEATHER_SCHEMA)
USER = "What is the weather in Oslo?"


def drain(items: Iterable[object]) -> None:
    for _ in items:
        pass


def openai_client(fake: FakeUpstreamThread) -> openai.OpenAI:
    return openai.OpenAI(base_url=fake.url + "/v1", api_key="sk-test", max_retries=0)


def anthropic_client(fake: FakeUpstreamThread) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=fake.url, api_key="sk-ant-test", max_retries=0)


def genai_client(url: str) -> genai.Client:
    return genai.Client(api_key="AIza-test", http_options={"base_url": url})


# ---------------------------------------------------------------------- openai


def test_openai_chat(threaded_fake: FakeUpstreamThread) -> None:
    with openai_client(threaded_fake) as client:
        completion = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": USER}]
        )
    assert completion.choices[0].message.content == reply_text(USER)
    assert completion.usage is not None
    assert completion.usage.completion_tokens == len(text_pieces(reply_text(USER)))
    auth = threaded_fake.requests[0].header("authorization")
    assert auth == "Bearer sk-test"


def test_openai_chat_stream(threaded_fake: FakeUpstreamThread) -> None:
    with openai_client(threaded_fake) as client:
        stream = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": USER}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == reply_text(USER)
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens > 0


def test_openai_tool_call_stream(threaded_fake: FakeUpstreamThread) -> None:
    tool: openai.types.chat.ChatCompletionToolParam = {
        "type": "function",
        "function": {"name": WEATHER.name, "parameters": WEATHER_SCHEMA},
    }
    with openai_client(threaded_fake) as client:
        stream = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": USER}],
            tools=[tool],
            stream=True,
        )
        arguments = ""
        names = []
        for chunk in stream:
            for call in chunk.choices[0].delta.tool_calls or []:
                assert call.function is not None
                arguments += call.function.arguments or ""
                if call.function.name:
                    names.append(call.function.name)
    assert names == [WEATHER.name]
    assert json.loads(arguments) == tool_arguments(WEATHER, USER)


@pytest.mark.parametrize(
    ("model", "error"),
    [
        ("fake-429", openai.RateLimitError),
        ("fake-500", openai.InternalServerError),
        ("fake-400", openai.BadRequestError),
        ("fake-401", openai.AuthenticationError),
    ],
)
def test_openai_errors(
    threaded_fake: FakeUpstreamThread, model: str, error: type[openai.APIStatusError]
) -> None:
    with openai_client(threaded_fake) as client, pytest.raises(error) as caught:
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": "x"}])
    assert isinstance(caught.value.body, dict)
    assert len(threaded_fake.requests) == 1  # no retries


def test_openai_stream_error(threaded_fake: FakeUpstreamThread) -> None:
    with openai_client(threaded_fake) as client, pytest.raises(openai.APIError):
        drain(
            client.chat.completions.create(
                model="fake-stream-error", messages=[{"role": "user", "content": "x"}], stream=True
            )
        )


def test_openai_responses_and_embeddings(threaded_fake: FakeUpstreamThread) -> None:
    with openai_client(threaded_fake) as client:
        response = client.responses.create(model="gpt-5-nano", input=USER)
        with client.responses.stream(model="gpt-5-nano", input=USER) as stream:
            deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
            final = stream.get_final_response()
        embedding = client.embeddings.create(model="text-embedding-3-small", input="abc")
    assert response.output_text == reply_text(USER)
    assert "".join(deltas) == final.output_text == reply_text(USER)
    assert threaded_fake.requests[-1].json()["encoding_format"] == "base64"
    assert embedding.data[0].embedding == embedding_vector("abc")


# On trio the SDK stops at [DONE] and leaves its inner async generators to the
# garbage collector, which trio reports; that is the SDK's business, not the fake's.
@pytest.mark.filterwarnings("ignore:Async generator:ResourceWarning")
@pytest.mark.anyio
async def test_async_openai_stream() -> None:
    async with serve_fake() as fake:
        client = openai.AsyncOpenAI(base_url=fake.url + "/v1", api_key="sk-test", max_retries=0)
        async with client:
            stream = await client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": USER}], stream=True
            )
            async with stream:
                text = "".join([c.choices[0].delta.content or "" async for c in stream])
    assert text == reply_text(USER)


# ------------------------------------------------------------------- anthropic


def test_anthropic_messages(threaded_fake: FakeUpstreamThread) -> None:
    with anthropic_client(threaded_fake) as client:
        message = client.messages.create(
            model="claude-test", max_tokens=64, messages=[{"role": "user", "content": USER}]
        )
    assert message.content[0].type == "text"
    assert message.content[0].text == reply_text(USER)
    assert message.stop_reason == "end_turn"
    request = threaded_fake.requests[0]
    # this SDK sends the key as a bearer token; older ones used x-api-key
    keys = {request.header("authorization"), request.header("x-api-key")}
    assert keys & {"Bearer sk-ant-test", "sk-ant-test"}


def test_anthropic_stream_helper(threaded_fake: FakeUpstreamThread) -> None:
    with (
        anthropic_client(threaded_fake) as client,
        client.messages.stream(
            model="claude-test", max_tokens=64, messages=[{"role": "user", "content": USER}]
        ) as stream,
    ):
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == reply_text(USER)
    assert final.usage.output_tokens == len(text_pieces(text))


def test_anthropic_raw_stream_with_tool(threaded_fake: FakeUpstreamThread) -> None:
    tool: anthropic.types.ToolParam = {"name": WEATHER.name, "input_schema": WEATHER_SCHEMA}
    with anthropic_client(threaded_fake) as client:
        events = list(
            client.messages.create(
                model="claude-test",
                max_tokens=64,
                messages=[{"role": "user", "content": USER}],
                tools=[tool],
                stream=True,
            )
        )
        with client.messages.stream(
            model="claude-test",
            max_tokens=64,
            messages=[{"role": "user", "content": USER}],
            tools=[tool],
        ) as stream:
            final = stream.get_final_message()
    partial = "".join(
        e.delta.partial_json
        for e in events
        if e.type == "content_block_delta" and e.delta.type == "input_json_delta"
    )
    assert json.loads(partial) == tool_arguments(WEATHER, USER)
    uses = [b for b in final.content if b.type == "tool_use"]
    assert [(u.name, u.input) for u in uses] == [(WEATHER.name, tool_arguments(WEATHER, USER))]
    assert final.stop_reason == "tool_use"


@pytest.mark.parametrize(
    ("model", "error"),
    [
        ("fake-429", anthropic.RateLimitError),
        ("fake-500", anthropic.InternalServerError),
        ("fake-400", anthropic.BadRequestError),
        ("fake-529", anthropic.OverloadedError),
    ],
)
def test_anthropic_errors(
    threaded_fake: FakeUpstreamThread, model: str, error: type[anthropic.APIStatusError]
) -> None:
    with anthropic_client(threaded_fake) as client, pytest.raises(error):
        client.messages.create(
            model=model, max_tokens=8, messages=[{"role": "user", "content": "x"}]
        )
    assert len(threaded_fake.requests) == 1


def test_anthropic_stream_error_event(threaded_fake: FakeUpstreamThread) -> None:
    with anthropic_client(threaded_fake) as client, pytest.raises(anthropic.APIStatusError) as e:
        drain(
            client.messages.create(
                model="claude-test",
                max_tokens=8,
                messages=[{"role": "user", "content": "x"}],
                stream=True,
                extra_headers={"x-fake-scenario": "stream-error"},
            )
        )
    assert "overloaded_error" in str(e.value)


@pytest.mark.anyio
async def test_async_anthropic_stream() -> None:
    async with serve_fake() as fake:
        client = anthropic.AsyncAnthropic(base_url=fake.url, api_key="sk-ant-test", max_retries=0)
        async with (
            client,
            client.messages.stream(
                model="claude-test",
                max_tokens=64,
                messages=[{"role": "user", "content": USER}],
            ) as stream,
        ):
            text = "".join([t async for t in stream.text_stream])
    assert text == reply_text(USER)


# ---------------------------------------------------------------------- gemini


def test_gemini_generate_content(threaded_fake: FakeUpstreamThread) -> None:
    with genai_client(threaded_fake.url) as client:
        response = client.models.generate_content(model="gemini-2.0-flash", contents=USER)
    assert response.text == reply_text(USER)
    assert response.usage_metadata is not None
    assert response.usage_metadata.candidates_token_count == len(text_pieces(reply_text(USER)))
    request = threaded_fake.requests[0]
    assert request.path.endswith("/models/gemini-2.0-flash:generateContent")
    assert request.header("x-goog-api-key") == "AIza-test"


def test_gemini_generate_content_stream(threaded_fake: FakeUpstreamThread) -> None:
    with genai_client(threaded_fake.url) as client:
        chunks = list(
            client.models.generate_content_stream(model="gemini-2.0-flash", contents=USER)
        )
    assert [c.text for c in chunks] == text_pieces(reply_text(USER))
    assert threaded_fake.requests[0].query == {"alt": ["sse"]}


def test_gemini_function_call(threaded_fake: FakeUpstreamThread) -> None:
    declaration = genai_types.FunctionDeclaration(
        name=WEATHER.name, parameters_json_schema=WEATHER_SCHEMA
    )
    config = genai_types.GenerateContentConfig(
        tools=[genai_types.Tool(function_declarations=[declaration])]
    )
    with genai_client(threaded_fake.url) as client:
        response = client.models.generate_content(
            model="gemini-2.0-flash", contents=USER, config=config
        )
    calls = response.function_calls or []
    assert [(c.name, c.args) for c in calls] == [(WEATHER.name, tool_arguments(WEATHER, USER))]


@pytest.mark.parametrize(
    ("model", "error", "code"),
    [
        ("fake-429", genai_errors.ClientError, 429),
        ("fake-500", genai_errors.ServerError, 500),
        ("fake-400", genai_errors.ClientError, 400),
    ],
)
def test_gemini_errors(
    threaded_fake: FakeUpstreamThread, model: str, error: type[genai_errors.APIError], code: int
) -> None:
    with genai_client(threaded_fake.url) as client, pytest.raises(error) as caught:
        client.models.generate_content(model=model, contents="x")
    assert caught.value.code == code
    assert len(threaded_fake.requests) == 1


# google-genai's async client calls asyncio.get_running_loop(): asyncio only.
@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_async_gemini_stream(anyio_backend: str) -> None:
    async with serve_fake() as fake:
        client = genai_client(fake.url)
        try:
            stream = await client.aio.models.generate_content_stream(
                model="gemini-2.0-flash", contents=USER
            )
            texts = [c.text async for c in stream]
        finally:
            await client.aio.aclose()
            client.close()
    assert texts == text_pieces(reply_text(USER))
