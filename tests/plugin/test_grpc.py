"""The ``reel`` fixture's gRPC helpers: ``reel.xai()`` / ``reel.async_xai()``
(xAI's SDK on Reel's channel) and ``reel.grpc_channel()``, recorded against
the fake xAI server, replayed with it stopped and no key set; a miss the
test swallows still fails it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.secrets import GRPC_KEY, recoverable

pytest.importorskip("grpc", reason="the plugin's gRPC helpers need grpcio")
pytest.importorskip("xai_sdk", reason="the plugin's xAI helpers need xai-sdk")

from tests.fakes.xai_grpc import FakeXai

TESTS = """
import asyncio
import contextlib
import os

import grpc
from xai_sdk.chat import user

HOST = {"api_host": os.environ["XAI_HOST"], "use_insecure_channel": True}


def test_chat_and_stream(reel):
    client = reel.xai(**HOST)
    chat = client.chat.create(model="grok-4", messages=[user("What is Reel?")])
    assert chat.sample().content == "Reel heard: What is Reel?"
    streamed = client.chat.create(model="grok-4", messages=[user("Stream it")])
    assert [c.content for _, c in streamed.stream()] == ["Reel he", "ard: St", "ream it"]
    assert reel.misses == []


def test_async(reel):
    async def run():
        client = reel.async_xai(**HOST)
        try:
            chat = client.chat.create(model="grok-4", messages=[user("Async?")])
            return (await chat.sample()).content
        finally:
            await client.close()

    assert asyncio.run(run()) == "Reel heard: Async?"


def test_grpc_channel(reel):
    channel = reel.grpc_channel(grpc.insecure_channel(os.environ["XAI_HOST"]))
    assert channel.player in reel._players
"""

SWALLOWED = """
import contextlib
import os

import grpc
from xai_sdk.chat import user


def test_swallows_the_miss(reel):
    client = reel.xai(api_host=os.environ["XAI_HOST"], use_insecure_channel=True)
    with contextlib.suppress(grpc.RpcError):  # a fallback, a retry, a friendly message
        client.chat.create(model="grok-4", messages=[user("never recorded")]).sample()
"""


def _lines(path: Path) -> list[dict[str, object]]:
    parsed = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    return [line for line in parsed if "_meta" not in line]


def test_xai_records_then_replays_without_the_server(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_xai=TESTS)
    with FakeXai(GRPC_KEY) as fake:
        monkeypatch.setenv("XAI_HOST", fake.address)
        monkeypatch.setenv("XAI_API_KEY", GRPC_KEY)
        recorded = pytester.runpytest_subprocess("--reel-mode", "record")
        recorded.assert_outcomes(passed=3)
        assert fake.calls == {"GetCompletion": 2, "GetCompletionChunk": 1}
    monkeypatch.delenv("XAI_API_KEY")
    cassettes = pytester.path / "tests/cassettes/test_xai"
    assert len(_lines(cassettes / "test_chat_and_stream.jsonl")) == 2
    assert len(_lines(cassettes / "test_async.jsonl")) == 1
    for cassette in cassettes.iterdir():
        assert recoverable(GRPC_KEY, cassette.read_bytes()) == []
    replayed = pytester.runpytest_subprocess()  # replay: the server is gone, no key
    replayed.assert_outcomes(passed=3)


def test_a_swallowed_grpc_miss_fails_the_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_swallowed=SWALLOWED)
    monkeypatch.setenv("XAI_HOST", "127.0.0.1:9")
    cassettes = pytester.path / "tests/cassettes/test_swallowed"
    cassettes.mkdir(parents=True)
    (cassettes / "test_swallows_the_miss.jsonl").write_text('{"_meta":{"schema":3}}\n')
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*Reel: 1 request missed cassette*", "*/xai_api.Chat/GetCompletion*"]
    )
