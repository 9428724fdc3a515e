"""``Expect: 100-continue``: the proxy tells a waiting client to send its body.

curl sends the header with any body over 1 KB and waits (a second) for the
interim ``100 Continue`` before sending the body.  These clients are raw
sockets that wait for it, however long: without it they would hang.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import anyio.abc
import pytest

from reel_bindings.proxy import running
from reel_core import Mode
from tests.fakes.upstream import serve_fake

from .proxy_support import interactions, options

pytestmark = pytest.mark.anyio

CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
BODY = json.dumps(
    {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "long " * 400}]}
).encode()


def head(host: str, length: int, *, close: bool = False) -> bytes:
    lines = [
        "POST /v1/chat/completions HTTP/1.1",
        f"host: {host}",
        "content-type: application/json",
        f"content-length: {length}",
        "expect: 100-continue",
    ]
    if close:
        lines.append("connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def read_until(stream: anyio.abc.ByteStream, got: bytes, end: bytes) -> bytes:
    while end not in got:
        got += await stream.receive()
    return got


async def read_to_close(stream: anyio.abc.ByteStream, got: bytes) -> bytes:
    while True:
        try:
            got += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return got


async def test_a_client_waiting_for_100_continue_gets_it(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    async with (
        serve_fake() as fake,
        running(options(Mode.RECORD, cassette, upstream=fake.url)) as url,
    ):
        parts = urlsplit(url)
        assert parts.hostname
        assert parts.port
        with anyio.fail_after(20):  # without the 100 the client would wait for ever
            async with await anyio.connect_tcp(parts.hostname, parts.port) as stream:
                await stream.send(head(parts.netloc, len(BODY)))
                got = await read_until(stream, b"", b"\r\n\r\n")
                assert got.startswith(CONTINUE)  # before the body was sent
                await stream.send(BODY)
                answer = await read_until(stream, got[len(CONTINUE) :], b"Fake reply to:")
                assert answer.startswith(b"HTTP/1.1 200 ")
                # the same connection carries another such request
                await stream.send(head(parts.netloc, len(BODY), close=True))
                again = await read_until(stream, b"", b"\r\n\r\n")
                assert again.startswith(CONTINUE)
                await stream.send(BODY)
                final = await read_to_close(stream, again[len(CONTINUE) :])
                assert final.startswith(b"HTTP/1.1 200 ")
    assert [r.body for r in fake.requests] == [BODY, BODY]
    assert all(r.header("expect") is None for r in fake.requests)  # one hop's business
    assert len(interactions(cassette)) == 2


async def test_a_body_over_the_limit_is_refused_without_100_continue(tmp_path: Path) -> None:
    (tmp_path / "c.jsonl").write_bytes(b"")  # an empty cassette: replay refuses a missing one
    opts = options(Mode.REPLAY, tmp_path / "c.jsonl", max_body=100)
    async with running(opts) as url:
        parts = urlsplit(url)
        assert parts.hostname
        assert parts.port
        with anyio.fail_after(20):
            async with await anyio.connect_tcp(parts.hostname, parts.port) as stream:
                await stream.send(head(parts.netloc, len(BODY)))
                got = await read_to_close(stream, b"")
    assert got.startswith(b"HTTP/1.1 413 ")
    assert CONTINUE not in got
