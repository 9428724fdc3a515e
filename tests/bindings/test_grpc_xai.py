"""xAI's SDK (``xai-sdk`` from PyPI) in process, through Reel's gRPC channel
(reel_bindings.sdk.xai_client / async_xai_client): chat, a streamed answer
and a tool call, recorded against the fake xAI server (tests/fakes/xai_grpc.py,
the SDK's own stubs) and replayed with the server stopped and no key set;
a miss as the SDK raises it; no key on disk."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.secrets import GRPC_KEY, recoverable

grpc = pytest.importorskip("grpc", reason="the xAI SDK's tests need grpcio")
pytest.importorskip("xai_sdk", reason="the xAI SDK's tests need xai-sdk: pip install xai-sdk")

from xai_sdk.chat import tool, user  # noqa: E402

from reel_bindings.sdk import REPLAY_KEY, async_xai_client, xai_client  # noqa: E402
from tests.fakes.xai_grpc import CHUNKS, FakeXai, answer  # noqa: E402

WEATHER = tool(
    "get_weather",
    "Weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}},
)


@pytest.fixture
def fake() -> Iterator[FakeXai]:
    with FakeXai(GRPC_KEY) as server:
        yield server


@pytest.fixture
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XAI_API_KEY", raising=False)
    monkeypatch.delenv("REEL_MODE", raising=False)


def live(fake: FakeXai) -> dict[str, Any]:
    """The SDK client's arguments to reach the fake."""
    return {"api_key": GRPC_KEY, "api_host": fake.address, "use_insecure_channel": True}


def conversation(client: Any) -> dict[str, Any]:
    """Chat, a streamed answer (with each chunk's time) and a tool call."""
    chat = client.chat.create(model="grok-4", messages=[user("What is Reel?")])
    said = chat.sample()
    start = time.monotonic()
    chunks, times = [], []
    for _response, chunk in client.chat.create(
        model="grok-4", messages=[user("Stream it")]
    ).stream():
        chunks.append(chunk.content)
        times.append(time.monotonic() - start)
    called = client.chat.create(
        model="grok-4", messages=[user("Weather in Paris?")], tools=[WEATHER]
    ).sample()
    (call,) = called.tool_calls
    return {
        "content": said.content,
        "finish": said.finish_reason,
        "usage": said.usage.total_tokens,
        "chunks": chunks,
        "times": times,
        "tool": (call.function.name, json.loads(call.function.arguments)),
    }


async def aconversation(client: Any) -> dict[str, Any]:
    chat = client.chat.create(model="grok-4", messages=[user("What is Reel?")])
    said = await chat.sample()
    start = time.monotonic()
    chunks, times = [], []
    streamed = client.chat.create(model="grok-4", messages=[user("Stream it")])
    async for _response, chunk in streamed.stream():
        chunks.append(chunk.content)
        times.append(time.monotonic() - start)
    called = await client.chat.create(
        model="grok-4", messages=[user("Weather in Paris?")], tools=[WEATHER]
    ).sample()
    (call,) = called.tool_calls
    return {
        "content": said.content,
        "finish": said.finish_reason,
        "usage": said.usage.total_tokens,
        "chunks": chunks,
        "times": times,
        "tool": (call.function.name, json.loads(call.function.arguments)),
    }


def _same(recorded: dict[str, Any], replayed: dict[str, Any], cassette: Path) -> None:
    times = replayed.pop("times")
    recorded.pop("times")
    assert replayed == recorded
    assert recorded["content"] == answer("What is Reel?")
    assert "".join(recorded["chunks"]) == answer("Stream it")
    assert len(recorded["chunks"]) == CHUNKS
    assert recorded["tool"] == ("get_weather", {"city": "Paris"})
    # the stream replays on its recorded schedule: a sleep never ends early
    # (a loaded machine only makes a chunk later), each chunk no sooner than
    # its recorded offset
    lines = [json.loads(line) for line in cassette.read_text().splitlines()[1:]]
    (stream,) = [line for line in lines if line["endpoint"].endswith("GetCompletionChunk")]
    offsets = [at / 1000 for at, _ in stream["response"]["frames"]]
    assert offsets[-1] > 0  # the server's gaps were recorded
    assert all(got >= due for got, due in zip(times, offsets, strict=True))


def test_sync_client_records_then_replays_with_the_server_gone(
    fake: FakeXai, tmp_path: Path, no_key: None
) -> None:
    cassette = tmp_path / "xai.jsonl"
    client = xai_client(cassette, mode="record", **live(fake))
    recorded = conversation(client)
    client.close()
    assert fake.calls == {"GetCompletion": 2, "GetCompletionChunk": 1}
    fake.stop()
    client = xai_client(cassette)  # replay: no key, no server, the SDK's default host
    replayed = conversation(client)
    client.close()
    assert fake.calls == {"GetCompletion": 2, "GetCompletionChunk": 1}
    _same(recorded, replayed, cassette)


def test_async_client_records_then_replays_with_the_server_gone(
    fake: FakeXai, tmp_path: Path, no_key: None
) -> None:
    cassette = tmp_path / "axai.jsonl"

    async def run(**kwargs: Any) -> dict[str, Any]:
        client = async_xai_client(cassette, **kwargs)
        try:
            return await aconversation(client)
        finally:
            await client.close()

    recorded = asyncio.run(run(mode="record", **live(fake)))
    fake.stop()
    replayed = asyncio.run(run())
    assert fake.calls == {"GetCompletion": 2, "GetCompletionChunk": 1}
    _same(recorded, replayed, cassette)


def test_one_cassette_serves_both_clients(fake: FakeXai, tmp_path: Path, no_key: None) -> None:
    cassette = tmp_path / "shared.jsonl"
    client = xai_client(cassette, mode="record", **live(fake))
    recorded = conversation(client)
    client.close()
    fake.stop()

    async def run() -> dict[str, Any]:
        client = async_xai_client(cassette)
        try:
            return await aconversation(client)
        finally:
            await client.close()

    _same(recorded, asyncio.run(run()), cassette)


def test_a_miss_is_what_the_sdk_raises(fake: FakeXai, tmp_path: Path, no_key: None) -> None:
    cassette = tmp_path / "miss.jsonl"
    client = xai_client(cassette, mode="record", **live(fake))
    client.chat.create(model="grok-4", messages=[user("What is Reel?")]).sample()
    client.close()
    client = xai_client(cassette)
    with pytest.raises(grpc.RpcError) as raised:
        client.chat.create(model="grok-4", messages=[user("What is Reel, again?")]).sample()
    error = raised.value
    assert error.code() is grpc.StatusCode.NOT_FOUND
    assert "no recording matches for POST /xai_api.Chat/GetCompletion" in error.details()
    assert "closest: " in error.details()
    client.close()

    async def arun() -> Any:
        aclient = async_xai_client(cassette)
        try:
            with pytest.raises(grpc.aio.AioRpcError) as araised:
                await aclient.chat.create(model="grok-4", messages=[user("Other")]).sample()
            return araised.value
        finally:
            await aclient.close()

    aerror = asyncio.run(arun())
    assert aerror.code() is grpc.StatusCode.NOT_FOUND
    assert "closest: " in aerror.details()


def test_a_recorded_error_status_replays(fake: FakeXai, tmp_path: Path, no_key: None) -> None:
    cassette = tmp_path / "error.jsonl"
    client = xai_client(cassette, mode="record", **live(fake))
    with pytest.raises(grpc.RpcError) as recorded:
        client.chat.create(model="grok-4", messages=[user("please fail")]).sample()
    client.close()
    fake.stop()
    client = xai_client(cassette)
    with pytest.raises(grpc.RpcError) as replayed:
        client.chat.create(model="grok-4", messages=[user("please fail")]).sample()
    client.close()
    for raised in (recorded.value, replayed.value):
        assert raised.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert raised.details() == "the fake refuses: please fail"
        assert ("x-fake-reason", "asked") in [tuple(m) for m in raised.trailing_metadata()]


def test_the_placeholder_key_is_passed_only_in_replay(
    tmp_path: Path, no_key: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "k.jsonl").write_text('{"_meta":{"schema":3}}\n')
    client = xai_client(tmp_path / "k.jsonl")
    assert client._api_channel.channel_metadata[0] == ("authorization", f"Bearer {REPLAY_KEY}")
    client.close()
    with pytest.raises(ValueError, match="XAI_API_KEY"):  # the SDK's own error
        xai_client(tmp_path / "k.jsonl", mode="record")
    monkeypatch.setenv("XAI_API_KEY", GRPC_KEY)
    client = xai_client(tmp_path / "k.jsonl")  # a key set: the SDK reads it itself
    assert client._api_channel.channel_metadata[0] == ("authorization", f"Bearer {GRPC_KEY}")
    client.close()


@pytest.mark.parametrize("kind", ["sync", "aio"])
def test_no_key_on_disk_even_when_the_server_echoes_it(
    kind: str, fake: FakeXai, tmp_path: Path, no_key: None
) -> None:
    """The SDK adds the key below Reel (its own interceptor); the helper
    tells the channel, so a key the server echoes in a message, in a streamed
    answer's chunk, or in trailing metadata is scrubbed.  (One the server
    spreads over several messages is not: docs/redaction.md, "Not found".)"""
    cassette = tmp_path / f"echo-{kind}.jsonl"
    prompt = [user("echo-key please")]

    def run_sync() -> tuple[str, str]:
        client = xai_client(cassette, mode="record", **live(fake))
        said = client.chat.create(model="grok-4", messages=prompt).sample().content
        streamed = ""
        for response, _chunk in client.chat.create(model="grok-4", messages=prompt).stream():
            streamed = response.content
        client.close()
        return said, streamed

    async def run_aio() -> tuple[str, str]:
        client = async_xai_client(cassette, mode="record", **live(fake))
        try:
            said = (await client.chat.create(model="grok-4", messages=prompt).sample()).content
            streamed = ""
            async for response, _chunk in client.chat.create(
                model="grok-4", messages=prompt
            ).stream():
                streamed = response.content
            return said, streamed
        finally:
            await client.close()

    said, streamed = run_sync() if kind == "sync" else asyncio.run(run_aio())
    assert GRPC_KEY in said  # the echo came
    assert GRPC_KEY in streamed
    written = cassette.read_bytes()
    assert recoverable(GRPC_KEY, written) == []
    assert written.count(b"[REDACTED:credential]") >= 2  # the trailers' echoes
    lines = [json.loads(line) for line in written.splitlines()[1:]]
    frames = [f for line in lines for _, f in line["response"]["frames"]]
    assert len(lines) == 2
    assert len(frames) == 1 + CHUNKS


def test_an_imported_pydantic_ai_cassette_replays_through_the_sdks_stubs(tmp_path: Path) -> None:
    """A cassette in the proxy's shape (``reel import pydantic-xai-grpc``,
    the corpus copy) replays through the in-process channel and the SDK's
    own stubs: the request the SDK serializes is the one recorded."""
    from xai_sdk.proto.v6 import chat_pb2, chat_pb2_grpc

    from reel_bindings.grpc import channel
    from tests.core.formats.test_pydantic_xai_grpc import FILES, REQUEST_RAW

    source = FILES[0]
    cassette = tmp_path / "imported.jsonl"
    reel = [sys.executable, "-c", "from reel_bindings._cli import main; main()"]
    done = subprocess.run(
        [*reel, "import", "pydantic-xai-grpc", str(source), "-o", str(cassette)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    chan = channel(grpc.insecure_channel("127.0.0.1:9"), cassette, mode="replay")
    stub = chat_pb2_grpc.ChatStub(chan)
    request = chat_pb2.GetCompletionsRequest.FromString(REQUEST_RAW)
    assert request.SerializeToString() == REQUEST_RAW
    response, call = stub.GetCompletion.with_call(request)
    chan.close()
    assert response.outputs[0].message.content.startswith("Paris is the capital of France.")
    assert call.code() is grpc.StatusCode.OK
