"""litellm through Reel: its OpenAI provider and its Anthropic provider.

In-process, the OpenAI provider takes an OpenAI client (``client=``) built
on Reel's transport; through the proxy, ``api_base`` is the proxy.  The
Anthropic provider takes no OpenAI or Anthropic client and ignores
``litellm.client_session``: it posts with litellm's own ``HTTPHandler``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

from reel_bindings.httpcore import Transport
from tests.fakes.upstream import FakeUpstreamThread
from tests.frameworks.matrix import (
    KEY,
    PROXIES,
    WAYS,
    Target,
    Way,
    check,
    framework,
    lazy,
    miss,
    server_error,
)

pytestmark = [
    # pydantic, on the TypedDicts litellm builds models of lazily (its
    # message types, its Copilot login) on its first calls: one warning a
    # TypedDict, for its `ReadOnly` items
    pytest.mark.filterwarnings(
        "ignore:Items? .* on TypedDict class '\\w+' (is|are) using the `ReadOnly` qualifier."
        " Pydantic will not protect items from any mutation on dictionary instances.:UserWarning"
    ),
]

litellm = framework("litellm", reason="litellm is not installed (pip install litellm)")
client_cleanup = lazy("litellm.llms.custom_httpx.async_client_cleanup")


@pytest.fixture(scope="module", autouse=True)
def forgotten_clients() -> Iterator[None]:
    """litellm caches the SDK clients it makes (ten minutes) and never closes
    them on its own: closed after the module, else their sockets are left to
    the garbage collector (a ResourceWarning in some later test)."""
    litellm.telemetry = False
    yield
    forget_clients()
    # what litellm leaves besides (an event loop it never closes) is
    # collected here, its ResourceWarnings with it, not in a later test
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


def forget_clients() -> None:
    """Close and forget the clients litellm cached."""
    cache = litellm.in_memory_llm_clients_cache
    clients = list(cache.cache_dict.values())
    cache.flush_cache()

    async def close_all() -> None:
        for client in clients:
            close = getattr(client, "close", None)
            if close is None:
                continue
            # an async client's connections belong to the loop of its test,
            # gone: closing them may say so, and there is nothing else to do
            with contextlib.suppress(RuntimeError):
                done = close()
                if inspect.isawaitable(done):
                    await done

    asyncio.run(close_all())


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def where(target: Target, *, max_retries: int = 0) -> dict[str, Any]:
    """The arguments that point litellm's OpenAI provider at ``target``."""
    if target.inprocess:
        client = openai.OpenAI(
            base_url=target.v1, api_key=KEY, http_client=target.client(), max_retries=max_retries
        )
        return {"client": client}
    return {"api_base": target.v1, "api_key": KEY, "max_retries": max_retries}


def awhere(target: Target) -> dict[str, Any]:
    """The async twin of :func:`where`: an ``AsyncOpenAI`` of the test's,
    made and closed in the loop of :meth:`Target.run`, through the proxy
    too (one litellm made itself would be cached past its event loop, and
    its sockets left to the garbage collector)."""
    client = openai.AsyncOpenAI(
        base_url=target.v1, api_key=KEY, http_client=target.aclient(own=True), max_retries=0
    )
    return {"client": client}


def user(prompt: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": prompt}]


@pytest.mark.parametrize("way", WAYS)
def test_completion(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    def drive(target: Target) -> Any:
        reply = litellm.completion(
            model="openai/gpt-4o-mini", messages=user("Say hello to Reel."), **where(target)
        )
        return reply.id, reply.choices[0].message.content

    _, content = check(fake, tmp_path, way, drive)
    assert content == "Fake reply to: Say hello to Reel."


@pytest.mark.slow
@pytest.mark.parametrize("way", WAYS)
def test_stream_early_break(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    def drive(target: Target) -> Any:
        seen: list[Any] = []
        for chunk in litellm.completion(
            model="openai/gpt-4o-mini",
            messages=user("Count one two three four five six"),
            stream=True,
            **where(target),
        ):
            seen.append(chunk.choices[0].delta.content)
            if len(seen) == 3:
                break
        return seen

    assert len(check(fake, tmp_path, way, drive)) == 3


@pytest.mark.slow
@pytest.mark.parametrize("way", WAYS)
def test_tool_loop(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    def drive(target: Target) -> Any:
        messages: list[Any] = user("Weather in Oslo?")
        first = (
            litellm.completion(
                model="openai/gpt-4o-mini", messages=messages, tools=[WEATHER_TOOL], **where(target)
            )
            .choices[0]
            .message
        )
        messages.append(first.model_dump())
        calls = [(c.id, c.function.name, c.function.arguments) for c in first.tool_calls]
        for call_id, _, _ in calls:
            messages.append({"role": "tool", "tool_call_id": call_id, "content": "sunny"})
        final = litellm.completion(
            model="openai/gpt-4o-mini", messages=messages, tools=[WEATHER_TOOL], **where(target)
        )
        return calls, final.choices[0].message.content

    calls, answer = check(fake, tmp_path, way, drive)
    assert [name for _, name, _ in calls] == ["get_weather"]
    assert answer == "The tool said: sunny"


@pytest.mark.slow
@pytest.mark.parametrize("way", WAYS)
def test_retry_after_500(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    def drive(target: Target) -> Any:
        reply = litellm.completion(
            model="openai/gpt-4o-mini", messages=user("Try again"), **where(target, max_retries=2)
        )
        return reply.choices[0].message.content

    assert check(fake, tmp_path, way, drive, script=server_error()) == "Fake reply to: Try again"


@pytest.mark.slow
@pytest.mark.parametrize("way", WAYS)
def test_async_gather(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    def drive(target: Target) -> Any:
        async def main() -> Any:
            try:
                replies = await asyncio.gather(
                    *(
                        litellm.acompletion(
                            model="openai/gpt-4o-mini",
                            messages=user(f"Question {n}"),
                            **awhere(target),
                        )
                        for n in range(4)
                    )
                )
            finally:
                # the first async call makes async clients of litellm's own
                # (logging, other providers), cached past this event loop:
                # litellm's cleanup closes them in it
                await client_cleanup.close_litellm_async_clients()
            return [r.choices[0].message.content for r in replies]

        return target.run(main)

    assert check(fake, tmp_path, way, drive) == [f"Fake reply to: Question {n}" for n in range(4)]


@pytest.mark.slow
@pytest.mark.parametrize("way", WAYS)
def test_embedding(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    def drive(target: Target) -> Any:
        reply = litellm.embedding(
            model="openai/text-embedding-3-small", input=["one", "two"], **where(target)
        )
        return [item["embedding"] for item in reply.data]

    vectors = check(fake, tmp_path, way, drive)
    assert len(vectors) == 2
    assert vectors[0] != vectors[1]


def claude(target: Target, prompt: str, **kwargs: Any) -> Any:
    return litellm.completion(
        model="anthropic/claude-sonnet-4-6",
        messages=user(prompt),
        api_base=target.url,
        api_key=KEY,
        max_tokens=64,
        **kwargs,
    )


@pytest.mark.slow
@pytest.mark.parametrize("way", PROXIES)
def test_anthropic_completion(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    truth = check(
        fake, tmp_path, way, lambda t: claude(t, "Say hello to Reel.").choices[0].message.content
    )
    assert truth == "Fake reply to: Say hello to Reel."


@pytest.mark.parametrize("way", PROXIES)
def test_anthropic_stream_early_break(fake: FakeUpstreamThread, tmp_path: Path, way: Way) -> None:
    def drive(target: Target) -> Any:
        seen: list[Any] = []
        for chunk in claude(target, "Count one two three four five six", stream=True):
            seen.append(chunk.choices[0].delta.content)
            if len(seen) == 3:
                break
        return seen

    assert len(check(fake, tmp_path, way, drive)) == 3


@pytest.mark.parametrize("way", WAYS)
def test_miss(tmp_path: Path, way: Way) -> None:
    """litellm maps the 404 of a miss to its own ``NotFoundError``."""
    with miss(way, tmp_path) as target, pytest.raises(litellm.exceptions.NotFoundError) as raised:
        litellm.completion(model="openai/gpt-4o-mini", messages=user("Never"), **where(target))
    assert raised.value.status_code == 404
    assert "no recording" in str(raised.value).lower()


def test_client_session_serves_the_openai_provider_only(
    fake: FakeUpstreamThread, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``litellm.client_session`` on Reel (replaying an empty cassette): the
    OpenAI provider's call is Reel's miss; the Anthropic provider's goes
    past it, straight to the provider."""
    forget_clients()  # an OpenAI client cached by an earlier test has no session
    cassette = tmp_path / "empty.jsonl"
    cassette.write_bytes(b"")
    session = httpx2.Client(transport=Transport(cassette, mode="replay"))
    # by name: the module itself, not its lazy stand-in (whose __dict__ is its own)
    monkeypatch.setattr("litellm.client_session", session)
    before = len(fake.requests)
    with pytest.raises(litellm.exceptions.NotFoundError):
        litellm.completion(
            model="openai/gpt-4o-mini",
            messages=user("Never"),
            api_base=fake.url + "/v1",
            api_key=KEY,
            max_retries=0,
        )
    assert len(fake.requests) == before
    reply = claude(Target(fake.url), "Past Reel")
    assert reply.choices[0].message.content == "Fake reply to: Past Reel"
    assert len(fake.requests) == before + 1
    session.close()
