"""The proxy's one timer: clients that keep it waiting are closed by it.

Each connection keeps its client's deadline as a number; one timer per
proxy, run beside the first connection opened until the last one ends,
looks every ``Proxy.tick`` and cancels the connections whose deadline
passed while they wait for their client.  A partial request is answered
408, an idle connection closed quietly, ``shutdown_idle`` closes idle ones
at once.  No assertion here is on elapsed time: the timer's looks are
spied on (the deadlines and the clock readings are exact numbers), and a
``fail_after`` only bounds a hang.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.abc
import anyio.lowlevel
import pytest

import reel_bindings.proxy._server as server
from reel_bindings.proxy import Proxy
from reel_bindings.proxy._http11 import HTTP11Connection
from reel_core import (
    Cassette,
    Config,
    Interaction,
    MatchConfig,
    RecordedRequest,
    RecordedResponse,
    Timing,
)
from reel_core.tools import match_key

pytestmark = pytest.mark.anyio

PATH = "/v1/chat/completions"
BODY = json.dumps({"model": "m", "messages": []}).encode()
WHOLE = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
    b"content-length: " + str(len(BODY)).encode() + b"\r\n\r\n" + BODY
)
HALF_HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Ty"
ANSWER = b'{"answer": 42}'


def cassette(tmp_path: Path) -> Path:
    """A cassette answering ``BODY`` with ``ANSWER``."""
    key = match_key("POST", PATH, (), BODY, MatchConfig())
    response = RecordedResponse(200, (("content-type", "application/json"),), body=ANSWER)
    interaction = Interaction(key, key[7:19], RecordedRequest("POST", PATH, (), BODY), response)
    path = tmp_path / "c.jsonl"
    path.write_bytes(Cassette().meta.to_line() + interaction.to_line())
    return path


def proxy(tmp_path: Path, client_timeout: float) -> Proxy:
    config = Config(timing=Timing.parse("fast"))
    return Proxy(config, cassette=cassette(tmp_path), client_timeout=client_timeout)


class Client(anyio.abc.ByteStream):
    """The proxy's side of a client connection, in memory: the test feeds
    bytes (``give``) and ends its side (``hang_up``); the proxy's writes
    are kept, and ``closed`` is set when the proxy closes the connection."""

    def __init__(self) -> None:
        self._send, self._receive = anyio.create_memory_object_stream[bytes](16)
        self.written = b""
        self.closed = anyio.Event()

    async def give(self, data: bytes) -> None:
        await self._send.send(data)

    def hang_up(self) -> None:
        self._send.close()

    async def receive(self, max_bytes: int = 65536) -> bytes:
        try:
            return await self._receive.receive()
        except anyio.EndOfStream:
            return b""

    async def send(self, item: bytes) -> None:
        await anyio.lowlevel.checkpoint()
        self.written += item

    async def send_eof(self) -> None:
        await anyio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        self._send.close()
        self._receive.close()
        self.closed.set()


class Looks:
    """A spy on the timer's looks at the deadlines: for each, the clock
    reading and the deadline of every connection waiting then."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seen: list[tuple[float, list[float]]] = []
        self.started = 0
        real_expire: Callable[[Proxy, float], None] = Proxy._expire
        real_time = Proxy._time

        def expire(proxy: Proxy, now: float) -> None:
            self.seen.append((now, sorted(conn.deadline for conn in proxy._waiting)))
            real_expire(proxy, now)

        async def time(proxy: Proxy, scope: anyio.CancelScope) -> None:
            self.started += 1
            await real_time(proxy, scope)

        monkeypatch.setattr(Proxy, "_expire", expire)
        monkeypatch.setattr(Proxy, "_time", time)


class Clock:
    """The proxy's ``time.monotonic``, standing still until the test moves
    it (``time.time`` stays real): deadlines pass when the test says, however
    slow a loaded machine runs the connections before that."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = 1000.0
        self.time = time.time
        monkeypatch.setattr(server, "time", self)

    def monotonic(self) -> float:
        return self.now


async def cut_off(served: Proxy, client: Client) -> None:
    """Serve ``client``, which sends half a request head, until the proxy
    closes it (within five seconds)."""
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(served.handle, client)
            await client.give(HALF_HEAD)
            await client.closed.wait()


async def wait_written(client: Client, data: bytes) -> None:
    while data not in client.written:
        await anyio.sleep(0.001)


async def test_a_deadline_passing_between_two_looks_is_acted_on_at_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    looks = Looks(monkeypatch)
    clock = Clock(monkeypatch)
    served = proxy(tmp_path, client_timeout=0.2)
    client = Client()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(served.handle, client)
            await client.give(HALF_HEAD)
            while len(looks.seen) < 2:  # the timer looks, the deadline ahead
                await anyio.sleep(0.001)
            assert not client.closed.is_set()
            clock.now += 0.2  # the deadline passes between two looks
            await client.closed.wait()
    assert client.written.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    assert b"--client-timeout" in client.written
    # the looks before saw the deadline ahead; the one that closed it, past
    deadline = looks.seen[-1][1][0]
    assert all(now < deadline for now, _ in looks.seen[:-1])
    assert looks.seen[-1][0] >= deadline
    assert served._timer is None  # gone with the last connection
    assert served.active == 0


async def test_a_connection_that_ends_before_its_deadline_stops_the_timer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    looks = Looks(monkeypatch)
    served = proxy(tmp_path, client_timeout=60)  # a tick of a second
    client = Client()
    with anyio.fail_after(5):  # the handler does not wait out a tick
        async with anyio.create_task_group() as tg:
            tg.start_soon(served.handle, client)
            await client.give(WHOLE)
            await wait_written(client, ANSWER)
            client.hang_up()
    assert client.written.startswith(b"HTTP/1.1 200 ")
    assert looks.started == 1
    assert looks.seen == []  # ended before the timer's first look
    assert served._timer is None
    # the next connection starts a timer of its own, which closes it
    served.client_timeout = 0.05
    served.tick = 0.005
    late = Client()
    await cut_off(served, late)
    assert late.written.startswith(b"HTTP/1.1 408 ")
    assert looks.started == 2


async def test_many_connections_share_one_timer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """40 idle connections are closed quietly, 40 with half a request are
    answered 408, once their deadline passed, while a client that sends
    whole requests is served; the timer started with the first connection
    keeps going after that one ended, until the last."""
    looks = Looks(monkeypatch)
    clock = Clock(monkeypatch)
    served = proxy(tmp_path, client_timeout=0.3)
    idle = [Client() for _ in range(40)]
    partial = [Client() for _ in range(40)]
    first, normal = Client(), Client()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(served.handle, first)  # it hosts the timer
            await first.give(WHOLE)
            await wait_written(first, ANSWER)
            for client in [*idle, *partial, normal]:
                tg.start_soon(served.handle, client)
            while served.active < 82:
                await anyio.sleep(0.001)
            first.hang_up()
            await first.closed.wait()
            for client in partial:
                await client.give(HALF_HEAD)
            for _ in range(3):
                normal.written = b""
                await normal.give(WHOLE)
                await wait_written(normal, ANSWER)
            normal.hang_up()
            await normal.closed.wait()
            # every partial head has been read (its deadline counts from it)
            while _heads_read(served) < 40:
                await anyio.sleep(0.001)
            assert len(served._waiting) == 80  # none closed before its deadline
            assert not any(client.closed.is_set() for client in [*idle, *partial])
            clock.now += 0.3
            for client in [*idle, *partial]:
                await client.closed.wait()
    assert looks.started == 1
    assert looks.seen[-1][0] == clock.now  # the look that closed them
    assert normal.written.startswith(b"HTTP/1.1 200 ")
    assert all(client.written == b"" for client in idle)
    assert all(client.written.startswith(b"HTTP/1.1 408 ") for client in partial)
    assert served._timer is None
    assert served.active == 0
    assert not served._waiting


async def test_shutdown_while_the_timer_sleeps_closes_waiting_connections_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a tick of a second and deadlines a minute away, shutdown_idle
    closes, quietly and without waiting for the timer, a connection idle
    between requests and one that has sent only part of its next request's
    head (as before the timer: the request has not begun for the proxy)."""
    looks = Looks(monkeypatch)
    served = proxy(tmp_path, client_timeout=60)
    idle, partial = Client(), Client()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for client in (idle, partial):
                tg.start_soon(served.handle, client)
            await partial.give(HALF_HEAD)
            while len(served._waiting) < 2:
                await anyio.sleep(0.001)
            served.shutdown_idle()
            await idle.closed.wait()
            await partial.closed.wait()
    assert looks.seen == []  # the timer never looked
    assert idle.written == partial.written == b""
    assert served._timer is None


async def test_a_client_timeout_shorter_than_the_tick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    looks = Looks(monkeypatch)
    served = proxy(tmp_path, client_timeout=0.0002)
    assert served.tick == server.TICK_MIN > served.client_timeout
    idle, partial = Client(), Client()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(served.handle, idle)
            tg.start_soon(served.handle, partial)
            await partial.give(HALF_HEAD)
            await idle.closed.wait()
            await partial.closed.wait()
    assert idle.written == b""
    assert partial.written.startswith(b"HTTP/1.1 408 ")
    assert b"within 0.0002 s" in partial.written
    assert looks.seen  # closed by the timer, at its first look at each


@pytest.mark.parametrize(
    ("client_timeout", "tick"),
    [(60.0, server.TICK_MAX), (2.0, 0.2), (0.0, server.TICK_MIN), (float("inf"), 1.0)],
)
def test_the_tick_is_a_tenth_of_the_timeout_within_bounds(
    tmp_path: Path, client_timeout: float, tick: float
) -> None:
    assert proxy(tmp_path, client_timeout).tick == pytest.approx(tick)


def _heads_read(served: Proxy) -> int:
    """How many of the connections the timer watches have read a request's first byte."""
    waiting = [conn for conn in served._waiting if isinstance(conn, HTTP11Connection)]
    return sum(bool(conn.exchange.first_byte) for conn in waiting)
