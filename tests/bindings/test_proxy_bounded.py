"""The proxy records a stream cut inside one long event, and goes on serving.

A stream that ends 2 MB inside one server-sent event (an image streamed as
one base64 ``data:`` line) used to freeze the proxy: cutting the recorded
body into events read the unfinished tail again from each of its bytes, at
100 % CPU, and no other client was served.  Cutting is linear now
(tests/property/test_scaling.py proves it for the family); this is the
example, end to end.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc
import pytest

from reel_core import Mode

from .proxy_support import chat_call, fetch, interactions, options, proxied

pytestmark = pytest.mark.anyio

#: A few whole events, then one that the upstream's close cuts 2 MB in.
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
EVENTS = b'data: {"n": 1}\n\n' * 3
TAIL = b'data: {"b64_json": "' + b"QUJD" * (2 * 1024 * 1024 // 4)


@asynccontextmanager
async def cutting_upstream() -> AsyncIterator[str]:
    """An upstream that answers each request with EVENTS, then TAIL in 4 KB
    writes, then closes the connection (the body is close-delimited)."""

    async def answer(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            received = b""
            while b"\r\n\r\n" not in received:
                received += await stream.receive()
            head, _, body = received.partition(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.lower().split(b"\r\n")
                if line.startswith(b"content-length:")
            )
            while len(body) < length:
                body += await stream.receive()
            await stream.send(HEAD + EVENTS)
            for i in range(0, len(TAIL), 4096):
                await stream.send(TAIL[i : i + 4096])

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, answer)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            tg.cancel_scope.cancel()


async def test_a_stream_cut_inside_a_long_event_is_recorded_and_serving_goes_on(
    tmp_path: Path,
) -> None:
    cassette = tmp_path / "c.jsonl"
    async with (
        cutting_upstream() as upstream,
        proxied(options(Mode.RECORD, cassette, upstream=upstream)) as client,
    ):
        first = await fetch(client, chat_call("draw", stream=True))
        # recording the first did not freeze the proxy: the next is served
        second = await fetch(client, chat_call("draw again", stream=True))
    for answer in (first, second):
        assert answer.status == 200
        assert answer.body == EVENTS + TAIL
    recorded = interactions(cassette)
    assert len(recorded) == 2
    for interaction in recorded:
        frames = [frame for _, frame in interaction.response.frames]
        assert frames[:3] == [b'data: {"n": 1}\n\n'] * 3
        assert b"".join(frames[3:]) == TAIL  # the unfinished event, kept whole
