"""A bidirectional gRPC call through ``reel.grpc_channel()``: recorded as a
session, replayed with the server stopped; a client message the recording
does not have is a miss the test swallows, and it still fails the test,
its report in the run's output like every miss."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("grpc", reason="the plugin's gRPC helpers need grpcio")

from tests.bindings.grpc_server import CHAT, ScriptedServer, Turn

TURNS = [Turn((b"one",), final=(b"bye",), tag="a"), Turn((b"two",), tag="b")]

TESTS = f"""
import contextlib
import os

import grpc

TURNS = {[t.message() for t in TURNS]!r}


def chat(reel, messages):
    channel = reel.grpc_channel(grpc.insecure_channel(os.environ["GRPC_HOST"]))
    call = channel.stream_stream({CHAT!r})(iter(messages))
    return list(call), call.code()


def test_chat(reel):
    assert chat(reel, TURNS) == ([b"one", b"two", b"bye"], grpc.StatusCode.OK)
"""

SWALLOWED = f"""
import contextlib
import os

import grpc

TURNS = {[t.message() for t in TURNS]!r}


def test_chat(reel):
    channel = reel.grpc_channel(grpc.insecure_channel(os.environ["GRPC_HOST"]))
    with contextlib.suppress(grpc.RpcError):  # a fallback, a retry, a friendly message
        list(channel.stream_stream({CHAT!r})(iter([TURNS[0], b"changed"])))
"""


def test_a_session_records_replays_and_a_swallowed_miss_fails_the_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_chat=TESTS)
    with ScriptedServer() as server:
        monkeypatch.setenv("GRPC_HOST", server.address)
        pytester.runpytest_subprocess("--reel-mode", "record").assert_outcomes(passed=1)
        assert server.calls["Chat"] == 1
    cassette = pytester.path / "tests/cassettes/test_chat/test_chat.jsonl"
    (line,) = [json.loads(x) for x in cassette.read_text().splitlines()[1:]]
    assert line["response"]["stream"] == "grpc-session"
    monkeypatch.setenv("GRPC_HOST", "127.0.0.1:9")  # nothing listens
    pytester.runpytest_subprocess().assert_outcomes(passed=1)
    pytester.makepyfile(test_chat=SWALLOWED)
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*Reel: 1 request missed cassette*",
            f"*gRPC session {line['id']} left its recording: client message 1*",
        ]
    )
