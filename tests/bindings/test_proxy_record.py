"""Recording through the proxy: the client has its whole answer before the
recording work starts, and a recording that cannot be built is reported."""

from __future__ import annotations

import json
import logging
import math
import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import httpx
import pytest

from reel_bindings.proxy import Proxy, _http11, running
from reel_core import Mode, PendingRecording, Recorded
from reel_core._record import Recorder
from tests.fakes.upstream import respond, serve_fake
from tests.fakes.wire import SCENARIO_HEADER

from .proxy_support import chat_call, fetch, interactions, options, proxied

pytestmark = pytest.mark.anyio


def raw_request(url: str, stream: bool) -> bytes:
    call = chat_call("one two three", stream=stream)
    head = (
        f"POST {call.path} HTTP/1.1\r\nhost: {urlsplit(url).netloc}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(call.content)}\r\n\r\n"
    )
    return head.encode() + call.content


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
async def test_the_client_has_the_whole_answer_before_the_recording_is_built(
    tmp_path: Path, stream: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    cassette = tmp_path / "c.jsonl"
    seen: list[bytes] = []
    finish = Recorder._finish

    def spy(self: Recorder, now: float) -> None:
        # what the client could read now (nobody reads its socket yet)
        seen.append(client.recv(1 << 20, socket.MSG_PEEK | socket.MSG_DONTWAIT))
        finish(self, now)

    monkeypatch.setattr(Recorder, "_finish", spy)
    async with serve_fake(frame_delay=0.001) as fake:
        opts = options(Mode.RECORD, cassette, upstream=fake.url)
        proxy = Proxy(opts.config(), cassette=cassette)
        async with running(opts, proxy=proxy) as url:
            parts = urlsplit(url)
            with socket.create_connection((parts.hostname, parts.port)) as client:
                client.sendall(raw_request(url, stream))
                with anyio.fail_after(10):
                    while cassette.read_bytes().count(b"\n") < 2:  # the line is appended
                        await anyio.sleep(0.005)
        body = respond(fake.requests[0]).body
    [answer] = seen
    assert answer.startswith(b"HTTP/1.1 200 ")
    if stream:
        assert answer.endswith(b"\r\n0\r\n\r\n")  # the chunked body's end
    else:
        assert answer.endswith(body)
    assert len(interactions(cassette)) == 1


async def test_a_recording_that_cannot_be_built_is_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: Recorder, now: float) -> None:
        raise RuntimeError("the recorder broke")

    cassette = tmp_path / "c.jsonl"
    async with (
        serve_fake() as fake,
        proxied(options(Mode.RECORD, cassette, upstream=fake.url)) as client,
    ):
        with monkeypatch.context() as patch:
            patch.setattr(Recorder, "_finish", broken)
            got = await fetch(client, chat_call("lost", stream=True))
            with anyio.fail_after(5):  # the line is built after the client's answer
                while not any("NOT recorded" in r.message for r in caplog.records):
                    await anyio.sleep(0.005)
        after = await fetch(client, chat_call("kept"))
        replies = [respond(r) for r in fake.requests]
    # the client was answered in full; the failure is logged with its cause
    assert got.status == 200
    assert got.error is None
    assert got.body == replies[0].body
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert any(
        r.exc_info and "the recorder broke" in str(r.exc_info[1]) and "NOT recorded" in r.message
        for r in errors
    )
    # the proxy goes on recording, on the same connection
    assert not any("internal error" in r.message for r in errors)
    assert after.status == 200
    assert [i.response.content for i in interactions(cassette)] == [replies[1].body]


# -- recordings built off the connection's way (record mode) -----------------------


def recorded_prompts(cassette: Path) -> list[str]:
    """The prompt of each recording on disk, in file order."""
    if not cassette.exists():
        return []
    return [json.loads(i.request.body)["messages"][0]["content"] for i in interactions(cassette)]


async def lines_written(cassette: Path, count: int, within: float = 10) -> list[str]:
    """The recorded prompts once ``count`` lines are on disk (waited for:
    a line lands a moment after the answer, or later in record mode)."""
    with anyio.fail_after(within):
        while len(prompts := recorded_prompts(cassette)) < count:
            await anyio.sleep(0.001)
    return prompts


async def test_record_mode_builds_a_recording_once_the_next_request_went_upstream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client's next request does not wait for the previous recording:
    it is built once that request was written upstream, in order with the
    recordings of other connections, and a connection's recordings are on
    disk when it closes."""
    monkeypatch.setattr(_http11, "SETTLE_AFTER", 60.0)  # no quiet client here
    cassette = tmp_path / "c.jsonl"
    async with (
        serve_fake() as fake,
        running(options(Mode.RECORD, cassette, upstream=fake.url)) as url,
        httpx.AsyncClient(base_url=url, timeout=30, trust_env=False) as first,
        httpx.AsyncClient(base_url=url, timeout=30, trust_env=False) as second,
    ):
        assert (await fetch(first, chat_call("a"))).status == 200
        assert recorded_prompts(cassette) == []  # answered, not built yet
        # built while the next request, on any connection, is with the
        # upstream (a step at a time: done as that forward ends, a moment
        # after its client has the answer)
        assert (await fetch(second, chat_call("b", stream=True))).status == 200
        assert await lines_written(cassette, 1) == ["a"]
        assert (await fetch(first, chat_call("c"))).status == 200
        assert await lines_written(cassette, 2) == ["a", "b"]
        await first.aclose()  # its connection ends: "c" goes to disk
        assert await lines_written(cassette, 3) == ["a", "b", "c"]
        replies = [respond(r) for r in fake.requests]
    assert [i.response.content for i in interactions(cassette)] == [r.body for r in replies]


async def test_an_answer_does_not_wait_for_the_recording_built_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recording of "a" is built while "b" is with the upstream, a step
    at a time: "b"'s answer reaches its client between two steps.  Here the
    build of "a" takes as many steps as it takes for "b" to be answered
    (10 s at most): built at once, it would hold the proxy, and "b"'s
    client, for all of them."""
    monkeypatch.setattr(_http11, "SETTLE_AFTER", 60.0)  # not built at quiet time
    answered: list[str] = []
    building: list[PendingRecording] = []
    finished_after: list[list[str]] = []
    step = PendingRecording.step
    deadline = math.inf

    def slow_step(self: PendingRecording) -> Recorded | None:
        nonlocal deadline
        if not building:
            building.append(self)  # "a"'s, the first recording built
            deadline = time.monotonic() + 10
        if self is building[0] and not answered and time.monotonic() < deadline:
            return None  # one more step: "b" has no answer yet
        recorded = step(self)
        if recorded is not None and self is building[0]:
            finished_after.append(list(answered))
        return recorded

    monkeypatch.setattr(PendingRecording, "step", slow_step)
    cassette = tmp_path / "c.jsonl"
    async with (
        serve_fake() as fake,
        running(options(Mode.RECORD, cassette, upstream=fake.url)) as url,
        httpx.AsyncClient(base_url=url, timeout=30, trust_env=False) as client,
    ):
        assert (await fetch(client, chat_call("a"))).status == 200
        got = await fetch(client, chat_call("b", stream=True))
        answered.append("b")
        assert got.status == 200
        assert await lines_written(cassette, 1) == ["a"]
        replies = [respond(r) for r in fake.requests]
    assert finished_after == [["b"]]  # "b" was answered while "a" was being built
    assert b"".join(got.chunks) == replies[1].body
    assert [i.response.content for i in interactions(cassette)] == [r.body for r in replies]


async def test_record_mode_writes_a_quiet_clients_recording_soon(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    async with (
        serve_fake() as fake,
        proxied(options(Mode.RECORD, cassette, upstream=fake.url)) as client,
    ):
        assert (await fetch(client, chat_call("a", stream=True))).status == 200
        # the connection stays open and idle
        assert await lines_written(cassette, 1) == ["a"]


async def test_stopping_the_proxy_writes_the_recordings_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_http11, "SETTLE_AFTER", 60.0)
    cassette = tmp_path / "c.jsonl"
    async with (
        serve_fake() as fake,
        proxied(options(Mode.RECORD, cassette, upstream=fake.url)) as client,
    ):
        for prompt in ("a", "b"):
            assert (await fetch(client, chat_call(prompt))).status == 200
        # "b" waits: its client is still there
        assert await lines_written(cassette, 1) == ["a"]
    assert recorded_prompts(cassette) == ["a", "b"]  # the proxy stopped: written


async def test_record_mode_records_an_upstream_cut_whole_when_the_connection_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_http11, "SETTLE_AFTER", 60.0)
    cassette = tmp_path / "c.jsonl"
    async with (
        serve_fake() as fake,
        proxied(options(Mode.RECORD, cassette, upstream=fake.url)) as client,
    ):
        call = chat_call("cut", stream=True, headers={SCENARIO_HEADER: "cut"})
        got = await fetch(client, call)
        assert got.error is not None  # the client saw the cut (its connection closed)
        await lines_written(cassette, 1)
        sent = b"".join(got.chunks)
    [cut] = interactions(cassette)
    assert cut.response.cut is not None
    assert b"".join(data for _, data in cut.response.frames) in sent  # as far as it went


async def test_auto_mode_writes_a_recording_before_reading_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replay is the truth: in auto mode (which may replay what it
    recorded) a recording is appended as its answer ends, not deferred to
    the client's next request or its quiet time (60 s here), so a replaying
    proxy asked for the same request then, on another connection, serves
    it.  (The client can have the answer's last byte a moment before the
    proxy's task resumes to append the line: the wait allows that moment.)"""
    monkeypatch.setattr(_http11, "SETTLE_AFTER", 60.0)
    cassette = tmp_path / "c.jsonl"
    async with (
        serve_fake() as fake,
        proxied(options(Mode.AUTO, cassette, upstream=fake.url)) as recording,
    ):
        prompts: list[str] = []
        for stream in (False, True):
            call = chat_call(f"once {stream}", stream=stream)
            recorded = await fetch(recording, call)  # its connection stays open
            prompts.append(f"once {stream}")
            assert await lines_written(cassette, len(prompts), within=5) == prompts
            async with proxied(options(Mode.REPLAY, cassette)) as replaying:
                replayed = await fetch(replaying, call)
            assert replayed.status == 200
            assert b"".join(replayed.chunks) == b"".join(recorded.chunks)
        assert len(fake.requests) == 2
