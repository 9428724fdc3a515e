"""The HTTP/1.1 connection's one reader of its client (``ClientReader``),
against a model, and a pipelined request read by a forward's watch.

Invariant (docs/reliability.md, "One reader per connection"): every byte
the client sends reaches exactly one taker, the pump (``receive``) or a
forward's watch, in the order sent; the client's end reaches every taker
from then on; the client is never read by two reads at once; a wait that
is cancelled (a client's deadline, a quiet client) loses nothing.
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import anyio
import anyio.abc
import anyio.lowlevel
import pytest
import sniffio
import trio
import trio.lowlevel
from hypothesis import given, settings
from hypothesis import strategies as st

from reel_bindings.proxy import running
from reel_bindings.proxy._forward import ClientReader, Outcome
from reel_core import Mode
from tests.fakes.upstream import serve_fake

from .proxy_support import chat_call, interactions, options


@dataclass
class Client:
    """The client's side: what it sent, and each read of it checked."""

    sent: anyio.abc.ObjectSendStream[bytes | None]
    received: anyio.abc.ObjectReceiveStream[bytes | None]
    reading: bool = False
    wanted: list[bool] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if self.reading:
            self.problems.append("two reads at once")
        self.reading = True
        try:
            item = await self.received.receive()
        finally:
            self.reading = False
        if item is None:
            raise anyio.EndOfStream
        return item


@dataclass
class Receive:
    """The pump waits for the client's next bytes, giving up after ``patience`` yields."""

    patience: int


@dataclass
class Watch:
    """A forward watches the client for ``yields`` yields, then ends."""

    yields: int


@dataclass
class Send:
    """The client sends ``data`` (``None``: it closes)."""

    data: bytes | None


ops = st.one_of(
    st.builds(Receive, st.integers(0, 4)),
    st.builds(Watch, st.integers(0, 4)),
    st.builds(Send, st.one_of(st.binary(min_size=1, max_size=3), st.none())),
)


def run(program: list[Receive | Watch | Send]) -> tuple[list[bytes], list[bytes], Client]:
    """What the pump and the watches took, in order, and the client."""
    taken: list[bytes] = []
    sent: list[bytes] = []
    ends: list[str] = []

    async def main() -> Client:
        send, receive = anyio.create_memory_object_stream[bytes | None](100)
        client = Client(send, receive)
        reader = ClientReader(cast(anyio.abc.ByteStream, client))
        with send, receive:
            await drive(client, reader, send)
        return client

    async def drive(
        client: Client, reader: ClientReader, send: anyio.abc.ObjectSendStream[bytes | None]
    ) -> None:
        closed = False
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader.run)
            for op in program:
                if isinstance(op, Send):
                    if closed:
                        continue
                    closed = op.data is None
                    if op.data is not None:
                        sent.append(op.data)
                    await send.send(op.data)
                elif isinstance(op, Receive):
                    with anyio.CancelScope() as scope:  # a client deadline, a quiet client
                        tg.start_soon(_cancel_after, scope, op.patience)
                        data = await reader.receive()
                        taken.append(data)
                        if not data:
                            ends.append("pump")
                        scope.cancel()
                else:

                    def heard(outcome: Outcome) -> None:
                        if isinstance(outcome, bytes) and outcome:
                            taken.append(outcome)
                        else:
                            ends.append("watch")

                    reader.watch(heard)
                    for _ in range(op.yields):
                        await anyio.lowlevel.checkpoint()
                    reader.unwatch()
            if not closed:
                await send.send(None)
            with anyio.fail_after(10):  # the pump takes the rest, to the end
                while data := await reader.receive():
                    taken.append(data)
            tg.cancel_scope.cancel()

    client = anyio.run(main, backend="asyncio")
    return sent, [t for t in taken if t], client


async def _cancel_after(scope: anyio.CancelScope, yields: int) -> None:
    for _ in range(yields):
        await anyio.lowlevel.checkpoint()
    scope.cancel()


@settings(max_examples=300, deadline=None)
@given(st.lists(ops, max_size=12))
def test_every_byte_reaches_one_taker_in_order(program: list[Receive | Watch | Send]) -> None:
    sent, taken, client = run(program)
    assert client.problems == []
    assert b"".join(taken) == b"".join(sent)


def test_the_end_reaches_a_watch_and_the_pump() -> None:
    heard: list[Outcome] = []

    async def main() -> bytes:
        send, receive = anyio.create_memory_object_stream[bytes | None](10)
        reader = ClientReader(cast(anyio.abc.ByteStream, Client(send, receive)))
        with send, receive:
            async with anyio.create_task_group() as tg:
                tg.start_soon(reader.run)
                reader.watch(heard.append)
                await send.send(None)
                with anyio.fail_after(10):
                    data = await reader.receive()
                reader.watch(heard.append)  # a later watch hears it at once
                tg.cancel_scope.cancel()
        return data

    assert anyio.run(main) == b""
    assert heard == [b"", b""]


pytestmark = pytest.mark.anyio


async def test_a_request_sent_during_a_forward_is_answered_and_recorded_after_it(
    tmp_path: Path,
) -> None:
    """The second request is sent once the first's answer has begun: the
    forward's watch reads it (and puts it in the session), then it is
    forwarded in turn; both answered in order, both recorded in order."""
    cassette = tmp_path / "c.jsonl"
    calls = [chat_call("first", stream=True), chat_call("second")]
    async with (
        serve_fake(frame_delay=0.01) as fake,
        running(options(Mode.RECORD, cassette, upstream=fake.url)) as url,
    ):
        parts = urlsplit(url)
        raw = [
            (
                f"POST {c.path} HTTP/1.1\r\nhost: {parts.netloc}\r\n"
                f"content-type: application/json\r\ncontent-length: {len(c.content)}\r\n\r\n"
            ).encode()
            + c.content
            for c in calls
        ]
        with socket.create_connection((parts.hostname, parts.port)) as sock:

            def exchange() -> bytes:
                sock.sendall(raw[0])
                data = sock.recv(65536)  # the first answer has begun
                assert data.startswith(b"HTTP/1.1 200"), data
                sock.sendall(raw[1])
                while data.count(b"HTTP/1.1 200") < 2 or not data.endswith(b"}\n"):
                    more = sock.recv(65536)
                    assert more, data
                    data += more
                return data

            with anyio.fail_after(20):
                data = await anyio.to_thread.run_sync(exchange)
    first, second = data.split(b"HTTP/1.1 200")[1:]
    assert first.endswith(b"\r\n0\r\n\r\n")  # the stream, whole, first
    assert b"second" in second
    assert [i.request.body for i in interactions(cassette)] == [c.content for c in calls]


async def test_a_forward_starts_no_task(tmp_path: Path) -> None:
    """Record mode on one keep-alive connection: the first request starts
    the connection's tasks (its reader of the client among them); the
    forwards after it start none (each started two before: its client's
    watch and the build of the recordings waiting)."""
    spawned = [0]
    if sniffio.current_async_library() == "asyncio":
        loop = asyncio.get_running_loop()

        def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
            spawned[0] += 1
            return asyncio.Task(coro, loop=loop, **kwargs)

        loop.set_task_factory(factory)
    else:

        class Spawned(trio.abc.Instrument):
            def task_spawned(self, task: trio.lowlevel.Task) -> None:
                spawned[0] += 1

        instrument = Spawned()
        trio.lowlevel.add_instrument(instrument)
    cassette = tmp_path / "c.jsonl"
    counts = []
    try:
        async with (
            serve_fake(frame_delay=0.001) as fake,
            running(options(Mode.RECORD, cassette, upstream=fake.url)) as url,
        ):
            parts = urlsplit(url)
            assert parts.hostname is not None
            async with await anyio.connect_tcp(parts.hostname, parts.port or 80) as client:
                for i in range(8):
                    call = chat_call(f"call {i}", stream=i % 2 == 1)
                    head = (
                        f"POST {call.path} HTTP/1.1\r\nhost: {parts.netloc}\r\n"
                        "content-type: application/json\r\n"
                        f"content-length: {len(call.content)}\r\n\r\n"
                    )
                    before = spawned[0]
                    await client.send(head.encode() + call.content)
                    data = b""
                    with anyio.fail_after(10):
                        while not data.endswith((b"}\n", b"0\r\n\r\n")):
                            data += await client.receive()
                    counts.append(spawned[0] - before)
    finally:
        if sniffio.current_async_library() == "asyncio":
            asyncio.get_running_loop().set_task_factory(None)
        else:
            trio.lowlevel.remove_instrument(instrument)
    assert counts[1:] == [0] * 7
    assert len(interactions(cassette)) == 8
