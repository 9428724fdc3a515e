"""The proxy replays byte-exact: bodies, SSE frames, errors, gzip, and timing.

Each test records through the proxy against the fake upstream, stops the
fake, then replays the cassette and compares what the client read both times.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from reel_bindings.proxy import _http11 as proxy_server
from reel_core import Mode
from tests.fakes.upstream import Reply, serve_fake

from .proxy_support import (
    Call,
    Exchange,
    anthropic_call,
    boundaries,
    chat_call,
    fetch,
    gemini_call,
    interactions,
    options,
    proxied,
    responses_call,
    upstream_reply,
)
from .timing import SLACK, assert_not_early, spy_sleeps

pytestmark = pytest.mark.anyio


async def record_then_replay(
    cassette: Path, calls: Sequence[Call], *, decoded: bool = False
) -> tuple[list[Exchange], list[Exchange], list[Reply]]:
    """Record ``calls`` through a record-mode proxy, stop the fake, replay them."""
    async with serve_fake() as fake:
        async with proxied(options(Mode.RECORD, cassette, upstream=fake.url)) as client:
            recorded = [await fetch(client, call, decoded=decoded) for call in calls]
        replies = [upstream_reply(fake, i) for i in range(len(calls))]
        assert len(fake.requests) == len(calls)
    async with proxied(options(Mode.REPLAY, cassette)) as client:
        replayed = [await fetch(client, call, decoded=decoded) for call in calls]
    return recorded, replayed, replies


STREAMS = {
    "openai-chat-stream": chat_call("Stream me a short answer", stream=True),
    "openai-tool-call-stream": chat_call("Weather in Oslo?", stream=True, tools=True),
    "openai-responses-stream": responses_call("Say hello in a few words"),
    "anthropic-stream-tool-use": anthropic_call("Weather in Bergen?", tools=True),
    "anthropic-stream-text": anthropic_call("Tell me something short"),
    "gemini-sse-crlf": gemini_call("Count to three please"),
}


@pytest.mark.parametrize("name", list(STREAMS))
async def test_sse_stream_replays_byte_and_frame_identical(tmp_path: Path, name: str) -> None:
    call = STREAMS[name]
    cassette = tmp_path / "c.jsonl"
    [rec], [rep], [reply] = await record_then_replay(cassette, [call])
    assert rec.error is None
    assert rep.error is None
    assert rec.status == rep.status == reply.status == 200
    # live: the upstream's bytes, untouched; replay: the same bytes
    assert rec.body == reply.body
    assert rep.body == rec.body
    # frame by frame: the upstream's frames, the recorded frames, the replayed ones
    assert rec.events == list(reply.frames)
    assert rep.events == rec.events
    assert len(rep.chunks) > 1  # streamed frame by frame, not buffered
    [interaction] = interactions(cassette)
    assert interaction.response.stream == "sse"
    assert [data for _, data in interaction.response.frames] == list(reply.frames)
    assert rep.headers["content-type"] == rec.headers["content-type"]
    assert "content-length" not in rep.headers
    if name == "gemini-sse-crlf":
        assert all(event.endswith(b"\r\n\r\n") for event in rep.events)
    if name == "anthropic-stream-tool-use":
        assert any(e.startswith(b"event: ping\n") for e in rep.events)
        assert sum(b"input_json_delta" in e for e in rep.events) >= 2
    if name == "openai-chat-stream":
        assert rep.events[-1] == b"data: [DONE]\n\n"
    if name == "openai-tool-call-stream":
        assert sum(b'"tool_calls"' in e for e in rep.events) >= 2


async def test_gemini_json_array_stream_replays_identical(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    call = gemini_call("Count to five slowly please", sse=False)
    [rec], [rep], [reply] = await record_then_replay(cassette, [call])
    assert rec.status == rep.status == 200
    assert rec.body == rep.body == reply.body
    assert rep.body.startswith(b"[{")
    assert rep.body.endswith(b"]")
    [interaction] = interactions(cassette)
    assert interaction.response.stream == "chunks"
    frames = [data for _, data in interaction.response.frames]
    # kept as the chunks that arrived: each an upstream frame (or a few merged in transit)
    assert boundaries(frames) <= boundaries(reply.frames)
    assert len(frames) > 1
    # replayed as a stream, never cut inside a recorded chunk's boundary set
    assert len(rep.chunks) > 1
    assert boundaries(rep.chunks) <= boundaries(reply.frames)


PLAIN = {
    "openai-chat": chat_call("A plain question"),
    "anthropic-message": anthropic_call("A plain question", stream=False),
    "gemini-generate": gemini_call("A plain question", stream=False),
}


@pytest.mark.parametrize("name", list(PLAIN))
async def test_plain_body_replays_byte_identical(tmp_path: Path, name: str) -> None:
    [rec], [rep], [reply] = await record_then_replay(tmp_path / "c.jsonl", [PLAIN[name]])
    assert rec.status == rep.status == 200
    assert rec.body == rep.body == reply.body
    assert rep.headers["content-length"] == str(len(rep.body))
    assert rep.headers["content-type"] == rec.headers["content-type"]


ERRORS = {
    "openai-429": (chat_call("x", model="fake-429"), 429),
    "openai-500": (chat_call("x", model="fake-500"), 500),
    "openai-400": (chat_call("x", model="fake-400"), 400),
    "anthropic-429": (
        Call(
            "/v1/messages",
            {"model": "fake-429", "max_tokens": 8, "messages": [{"role": "user", "content": "x"}]},
        ),
        429,
    ),
    "gemini-500": (Call("/v1beta/models/fake-500:generateContent", {"contents": []}), 500),
}


@pytest.mark.parametrize("name", list(ERRORS))
async def test_recorded_errors_replay_exactly(tmp_path: Path, name: str) -> None:
    call, status = ERRORS[name]
    cassette = tmp_path / "c.jsonl"
    [rec], [rep], [reply] = await record_then_replay(cassette, [call])
    assert rec.status == rep.status == reply.status == status
    assert rec.body == rep.body == reply.body
    assert b"error" in rep.body
    if status == 429:
        assert rec.headers["retry-after"] == rep.headers["retry-after"] == "1"
    [interaction] = interactions(cassette)
    assert interaction.response.status == status  # an error is a recording, not a miss


async def test_gzip_is_recorded_decoded_and_replayed_plain(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    gz = {"x-fake-scenario": "gzip"}
    calls = [
        chat_call("Squeeze me", headers=gz),
        chat_call("Squeeze a stream", stream=True, headers=gz),
    ]
    # record: the client gets the upstream's gzip as is (decoded by httpx)
    recorded, replayed, replies = await record_then_replay(cassette, calls, decoded=True)
    for rec, rep, reply in zip(recorded, replayed, replies, strict=True):
        assert rec.headers["content-encoding"] == "gzip"
        assert reply.header("content-encoding") == "gzip"
        assert "content-encoding" not in rep.headers
        assert rec.body == rep.body
        assert b"Squeeze" in rep.body
    plain, stream = replayed
    assert plain.headers["content-length"] == str(len(plain.body))
    assert stream.events == recorded[1].events
    assert len(stream.events) > 3
    for interaction in interactions(cassette):
        names = [name for name, _ in interaction.response.headers]
        assert "content-encoding" not in names
        assert b"Squeeze" in interaction.response.content
    # the bytes on the wire in replay are the decoded body itself
    async with proxied(options(Mode.REPLAY, cassette)) as client:
        raw = await fetch(client, calls[0])
    assert raw.body == plain.body


# ---------------------------------------------------------------------- timing


async def test_replay_timing_realtime_fast_and_slow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cassette = tmp_path / "c.jsonl"
    call = chat_call("one two three", stream=True, headers={"x-fake-scenario": "slow"})
    async with (
        serve_fake() as fake,
        proxied(options(Mode.RECORD, cassette, upstream=fake.url)) as client,
    ):
        rec = await fetch(client, call)
    [interaction] = interactions(cassette)
    offsets = [at / 1000 for at, _ in interaction.response.frames]
    end = interaction.response.end_ms / 1000
    assert len(offsets) >= 6
    assert end >= 0.25  # frames 50 ms apart
    assert rec.error is None

    # Frames never arrive before their recorded offsets (how closely they
    # follow them is measured by the streaming benchmark, not asserted here).
    spy = spy_sleeps(monkeypatch, proxy_server, "sleep_until")
    async with proxied(options(Mode.REPLAY, cassette)) as client:
        real = await fetch(client, call)
    assert real.body == rec.body
    assert_not_early(real.since_sent(), offsets)
    assert real.duration + real.waited >= end - SLACK
    assert spy.deadlines  # it slept: the frames were not sent at once

    spy.deadlines.clear()
    async with proxied(options(Mode.REPLAY, cassette, timing="fast")) as client:
        fast = await fetch(client, call)
    assert fast.body == rec.body
    assert spy.deadlines == []  # fast never sleeps

    async with proxied(options(Mode.REPLAY, cassette, timing="slow=2")) as client:
        slow = await fetch(client, call)
    assert slow.body == rec.body
    assert_not_early(slow.since_sent(), offsets, factor=2.0)
    assert slow.duration + slow.waited >= 2 * end - SLACK
