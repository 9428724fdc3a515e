"""The proxy never loses a recording, and records a stream that ended whole.

Regression tests for the two ways recordings were lost or damaged in
ordinary use (the stress test in ``tests/reliability/test_recording_stress.py``
checks the rule over many interleavings):

- in record mode, a client that closed a stream early while another
  keep-alive connection was active lost its exchange (the recording queue
  was emptied under a forward that waited for its answer);
- a client that stops reading at ``data: [DONE]`` (as the OpenAI SDK does)
  raced the body's end: the stream was recorded as cut by the client.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import anyio.abc
import h11
import pytest

from reel_bindings.proxy import _proxy, running
from reel_core import Mode
from tests.fakes.upstream import FRAME_DELAY_HEADER, serve_fake

from .proxy_support import chat_call, interactions, options, sse_events

pytestmark = pytest.mark.anyio


class Client:
    """A keep-alive client on raw h11 (an SDK's connection pool, minus the
    pool): a stream read up to ``[DONE]`` closes the connection, as httpx
    does with a response closed before its end; the next call opens a new one."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.stream: anyio.abc.SocketStream | None = None
        self.conn = h11.Connection(h11.CLIENT)

    async def call(
        self,
        prompt: str,
        *,
        stream: bool,
        enough: bytes = b"data: [DONE]",
        headers: tuple[tuple[str, str], ...] = (),
    ) -> bytes:
        if self.stream is None:
            self.stream = await anyio.connect_tcp(self.host, self.port)
            self.conn = h11.Connection(h11.CLIENT)
        call = chat_call(prompt, stream=stream)
        head = [("host", "x"), ("content-type", "application/json")]
        head += [("content-length", str(len(call.content))), *headers]
        await self.stream.send(
            self.conn.send(h11.Request(method="POST", target=call.path, headers=head))
            + self.conn.send(h11.Data(data=call.content))
            + self.conn.send(h11.EndOfMessage())
        )
        body = b""
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA:
                self.conn.receive_data(await self.stream.receive())
            elif isinstance(event, h11.Data):
                body += event.data
                if stream and enough in body:
                    await self.close()  # as the SDK: the end is not waited for
                    return body
            elif isinstance(event, h11.EndOfMessage):
                self.conn.start_next_cycle()
                return body

    async def close(self) -> None:
        if self.stream is not None:
            await self.stream.aclose()
            self.stream = None


@pytest.mark.parametrize("mode", [Mode.RECORD, Mode.AUTO])
async def test_streams_closed_at_done_beside_other_connections_are_all_recorded_whole(
    tmp_path: Path, mode: Mode
) -> None:
    cassette = tmp_path / "c.jsonl"
    seen: dict[str, bytes] = {}
    async with serve_fake() as fake:
        opts = options(mode, cassette, upstream=fake.url)
        async with running(opts) as url:

            async def one(n: int) -> None:
                client = Client(url)
                for i in range(4):  # keep-alive between two calls that are not streams
                    prompt = f"client {n} call {i}"
                    seen[prompt] = await client.call(prompt, stream=bool((n + i) % 3))
                await client.close()

            async with anyio.create_task_group() as tg:
                for n in range(10):
                    tg.start_soon(one, n)
    recorded = interactions(cassette)
    prompts = [json.loads(i.request.body or b"")["messages"][0]["content"] for i in recorded]
    assert sorted(prompts) == sorted(seen)  # every exchange, once
    for interaction in recorded:
        assert interaction.response.cut is None  # every stream ended: recorded whole
    streams = [i for i in recorded if i.response.frames]
    assert len(streams) == sum(1 for body in seen.values() if b"[DONE]" in body)
    for interaction in streams:
        body = b"".join(data for _, data in interaction.response.frames)
        assert sse_events(body)[-1].startswith(b"data: [DONE]")


async def leave_a_long_stream(url: str) -> bytes:
    """Read a 30 s stream's first event (and part of the next), then leave."""
    return await Client(url).call(
        "tell me a long story " * 40,
        stream=True,
        enough=b"\n\ndata: ",
        headers=((FRAME_DELAY_HEADER, "50"),),
    )


def assert_cut_as_seen(cassette: Path, got: bytes) -> None:
    """The line holds what the proxy had sent the client when it left,
    cut by the client: all the client read, no whole stream."""
    (interaction,) = interactions(cassette)
    assert interaction.response.cut is not None
    assert interaction.response.cut.error == "client-closed"
    body = b"".join(data for _, data in interaction.response.frames)
    assert body.startswith(got[: got.rindex(b"\n\n") + 2])
    assert len(sse_events(body)) < 20  # not the 30 s stream


async def test_a_client_that_leaves_a_long_stream_gets_its_cut_recorded_as_it_saw_it(
    tmp_path: Path,
) -> None:
    """The grace runs out (the stream would last 30 s): the cut is the
    client's, and the line holds what the client was sent, no more."""
    cassette = tmp_path / "c.jsonl"
    async with serve_fake() as fake:
        opts = options(Mode.RECORD, cassette, upstream=fake.url, record_grace=0.3)
        async with running(opts) as url:
            got = await leave_a_long_stream(url)
            with anyio.fail_after(10):
                while not cassette.read_bytes().count(b"\n") >= 2:  # _meta, then the line
                    await anyio.sleep(0.05)
    assert_cut_as_seen(cassette, got)


async def test_a_proxy_stopped_while_the_grace_runs_records_what_the_client_saw(
    tmp_path: Path,
) -> None:
    cassette = tmp_path / "c.jsonl"
    async with serve_fake() as fake:
        # stopped with a shutdown grace (``--grace``) far shorter than the
        # record grace: the forward is cancelled while it reads on
        opts = options(Mode.RECORD, cassette, upstream=fake.url, record_grace=60, grace=0.2)
        proxy = _proxy(opts)
        async with running(opts, proxy=proxy) as url:
            got = await leave_a_long_stream(url)
            with anyio.fail_after(10):
                while not proxy._recordings.blocked:  # the place is held: the grace runs
                    await anyio.sleep(0.01)
        # stopped: the 60 s grace was not waited for
    assert_cut_as_seen(cassette, got)
