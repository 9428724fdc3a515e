"""Recording through the proxy: the client has its whole answer before the
recording work starts, and a recording that cannot be built is reported."""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import pytest

from reel_bindings.proxy import Proxy, running
from reel_core import Interaction, Mode
from reel_core._record import Recorder
from tests.fakes.upstream import respond, serve_fake

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
    end = Recorder.end

    def spy(self: Recorder, now: float) -> Interaction:
        # what the client could read now (nobody reads its socket yet)
        seen.append(client.recv(1 << 20, socket.MSG_PEEK | socket.MSG_DONTWAIT))
        return end(self, now)

    monkeypatch.setattr(Recorder, "end", spy)
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
            patch.setattr(Recorder, "end", broken)
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
