"""xAI's SDK (``xai-sdk`` from PyPI) through the proxy (issue 35, item 6):
the SDK dials the proxy with h2c (``use_insecure_channel=True``), the proxy
forwards each gRPC call upstream over HTTP/2 to the fake xAI server (the
SDK's own stubs, tests/fakes/xai_grpc.py) and records it; then the calls
replay with the server gone: chat, a streamed answer on its schedule and a
tool call; a miss as the SDK raises it; the key never on disk (the run's
secret scan).  The SDK is blocking: it runs in a worker thread, against the
proxy on the test's backend."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from reel_core import Mode
from tests.secrets import GRPC_KEY

from .proxy_support import interactions, options

grpc = pytest.importorskip("grpc", reason="the xAI SDK's tests need grpcio")
pytest.importorskip("xai_sdk", reason="the xAI SDK's tests need xai-sdk: pip install xai-sdk")

import xai_sdk  # noqa: E402

from reel_bindings.proxy import running  # noqa: E402
from reel_bindings.sdk import REPLAY_KEY  # noqa: E402
from tests.fakes.xai_grpc import CHUNKS, FakeXai, answer  # noqa: E402

from .test_grpc_xai import conversation  # noqa: E402

pytestmark = pytest.mark.anyio


def _client(url: str, key: str) -> Any:
    return xai_sdk.Client(
        api_key=key, api_host=url.removeprefix("http://"), use_insecure_channel=True
    )


async def _talk(url: str, key: str) -> dict[str, Any]:
    return await anyio.to_thread.run_sync(lambda: conversation(_client(url, key)))


async def test_the_xai_sdk_records_through_the_proxy_then_replays_with_the_server_gone(
    tmp_path: Path,
) -> None:
    cassette = tmp_path / "xai.jsonl"
    with FakeXai(GRPC_KEY) as fake:
        record = options(Mode.RECORD, cassette, upstream=f"http://{fake.address}")
        async with running(record) as url:
            recorded = await _talk(url, GRPC_KEY)
        assert sum(fake.calls.values()) == 3  # each call reached the server
    async with running(options(Mode.REPLAY, cassette)) as url:
        replayed = await _talk(url, REPLAY_KEY)
    times = replayed.pop("times")
    recorded.pop("times")
    assert replayed == recorded
    assert recorded["content"] == answer("What is Reel?")
    assert "".join(recorded["chunks"]) == answer("Stream it")
    assert len(recorded["chunks"]) == CHUNKS
    assert recorded["tool"] == ("get_weather", {"city": "Paris"})
    stored = interactions(cassette)
    assert [i.response.stream for i in stored] == ["grpc", "grpc", "grpc"]
    assert all(dict(i.response.trailers)["grpc-status"] == "0" for i in stored)
    # the streamed answer replays on its recorded schedule: never early
    (stream,) = [i for i in stored if i.request.path.endswith("/GetCompletionChunk")]
    offsets = [at / 1000 for at, _ in stream.response.frames]
    assert offsets[-1] > 0
    assert all(got >= due - 0.005 for got, due in zip(times, offsets, strict=True))
    assert GRPC_KEY not in cassette.read_text()  # (and the run's scan finds it nowhere)


async def test_a_miss_through_the_proxy_is_what_the_sdk_raises(tmp_path: Path) -> None:
    cassette = tmp_path / "xai.jsonl"
    with FakeXai(GRPC_KEY) as fake:
        record = options(Mode.RECORD, cassette, upstream=f"http://{fake.address}")
        async with running(record) as url:
            await _talk(url, GRPC_KEY)

    def ask(url: str) -> Any:
        client = _client(url, REPLAY_KEY)
        from xai_sdk.chat import user

        with pytest.raises(grpc.RpcError) as raised:
            client.chat.create(model="grok-4", messages=[user("Something else")]).sample()
        return raised.value

    async with running(options(Mode.REPLAY, cassette)) as url:
        error = await anyio.to_thread.run_sync(ask, url)
    assert error.code() is grpc.StatusCode.NOT_FOUND
    assert "Reel miss" in error.details()
    assert "closest recording" in error.details()
    assert "differs at body" in error.details()  # the diff, as far as bytes tell it


async def test_an_imported_pydantic_ai_cassette_replays_through_the_proxy(tmp_path: Path) -> None:
    """pydantic-ai's xAI cassette (the corpus copy), imported with ``reel
    import pydantic-xai-grpc``, answers the SDK's own stubs through the
    proxy: the call the stub serializes is the one recorded, the answer the
    recorded message with its status (the migration page's promise)."""
    from xai_sdk.proto.v6 import chat_pb2, chat_pb2_grpc

    from tests.core.formats.test_pydantic_xai_grpc import FILES, REQUEST_RAW

    cassette = tmp_path / "imported.jsonl"
    reel = [sys.executable, "-c", "from reel_bindings._cli import main; main()"]
    command = [*reel, "import", "pydantic-xai-grpc", str(FILES[0]), "-o", str(cassette)]
    imported = subprocess.run(command, capture_output=True, text=True, check=False)
    assert imported.returncode == 0, imported.stderr

    def call(url: str) -> tuple[Any, Any]:
        with grpc.insecure_channel(url.removeprefix("http://")) as channel:
            stub = chat_pb2_grpc.ChatStub(channel)
            request = chat_pb2.GetCompletionsRequest.FromString(REQUEST_RAW)
            response, call = stub.GetCompletion.with_call(request)
            return response, call

    async with running(options(Mode.REPLAY, cassette)) as url:
        response, done = await anyio.to_thread.run_sync(call, url)
    assert response.outputs[0].message.content.startswith("Paris is the capital of France.")
    assert done.code() is grpc.StatusCode.OK
