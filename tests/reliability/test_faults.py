"""Faults around the proxy: clients that vanish, disks that fill or turn
read-only, and SIGTERM with many exchanges in flight.

After each: no partial or duplicated cassette line, and the proxy (or a new
one on the same cassette) serves.  (One client hanging up mid-stream, and
SIGTERM with one stream open, are in ``tests/bindings``.)
"""

from __future__ import annotations

import functools
import json
import logging
import signal
import socket
import struct
import threading
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.abc
import httpx
import pytest

from reel_bindings.proxy import Proxy, running
from reel_core import Mode
from tests.bindings.proxy_support import Call, Exchange, chat_call, fetch, options
from tests.fakes.upstream import FakeUpstreamThread, respond, serve_fake

from ._support import check_cassette, connect, proxy_process, record, wire_request

BACKENDS = ["asyncio", "trio"]


def prompt(request_body: bytes) -> str:
    content: str = json.loads(request_body)["messages"][0]["content"]
    return content


def abort(stream: anyio.abc.SocketStream) -> None:
    """Make the coming close a TCP RST."""
    raw = stream.extra(anyio.abc.SocketAttribute.raw_socket)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


async def wait_idle(proxy: Proxy) -> None:
    """Until the proxy has no connection open (every exchange finished)."""
    with anyio.fail_after(10):
        while proxy.active:
            await anyio.sleep(0.02)


async def hang_up(url: str, call: Call, when: str, *, rst: bool) -> None:
    """Send ``call``, then leave: right away, after the first byte of the
    answer, after its head, or after its first SSE frame; closing cleanly
    or with a reset."""
    marker = {"sent": b"", "first byte": b"H", "head": b"\r\n\r\n", "first frame": b"data: "}[when]
    async with await connect(url) as stream:
        await stream.send(wire_request(call))
        got = b""
        while marker not in got:
            got += await stream.receive()
        if rst:
            abort(stream)


# ------------------------------------------------------------ vanishing clients


@pytest.mark.anyio
async def test_clients_vanishing_anywhere_while_recording(tmp_path: Path) -> None:
    """24 clients record at once in auto mode and each leaves at its own
    point (before the head, after it, mid-stream; cleanly or with a reset).
    The proxy closes each upstream as its client leaves: nothing is forwarded
    twice, each line on disk is whole or cut by its client (what came: a
    prefix of the upstream's answer), and the proxy serves on."""
    cassette = tmp_path / "c.jsonl"
    points = ["sent", "first byte", "head", "first frame"]
    calls: list[tuple[Call, str, bool]] = []
    for n in range(24):
        stream = n % 3 != 0
        when = points[n % 4] if stream else points[n % 3]
        call = chat_call(
            f"vanishing client {n}: " + "word " * (4 + n % 9),
            stream=stream,
            headers={"x-fake-frame-delay-ms": "15"},
        )
        calls.append((call, when, n % 2 == 1 and when != "sent"))
    async with serve_fake() as fake:
        opts = options(Mode.AUTO, cassette, upstream=fake.url)
        proxy = Proxy(opts.config(), cassette=cassette)
        async with running(opts, proxy=proxy) as url:
            with anyio.fail_after(20):
                async with anyio.create_task_group() as tg:
                    for call, when, rst in calls:
                        tg.start_soon(functools.partial(hang_up, url, call, when, rst=rst))
            await wait_idle(proxy)
            forwarded = len(fake.requests)
            after = chat_call("a client that stays", stream=True)
            async with httpx.AsyncClient(base_url=url, timeout=10) as client:
                stays = await fetch(client, after)
        replies = {prompt(r.body): respond(r) for r in fake.requests}
        assert forwarded <= len(calls)  # each forwarded once at most
        assert len(replies) == len(fake.requests)
    assert proxy.write_errors == 0
    recorded = check_cassette(cassette)
    names = [prompt(i.request.body) for i in recorded]
    assert len(names) == len(set(names))  # each on disk once at most
    assert set(names) <= set(replies)
    for interaction in recorded:
        reply = replies[prompt(interaction.request.body)].body
        content = interaction.response.content
        if interaction.response.cut is None:
            assert content == reply
        else:
            assert interaction.response.cut.error == "client-closed"
            assert reply.startswith(content)
    assert stays.status == 200
    assert stays.error is None
    assert stays.body == replies[prompt(after.content)].body


@pytest.mark.anyio
async def test_clients_vanishing_mid_replay_leave_nothing_behind(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    calls = [chat_call(f"replayed stream {n} " + "word " * 12, stream=True) for n in range(6)]
    await record(cassette, calls)
    before = cassette.read_bytes()
    opts = options(Mode.REPLAY, cassette)
    proxy = Proxy(opts.config(), cassette=cassette)
    async with running(opts, proxy=proxy) as url:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                for n in range(30):
                    call = calls[n % 6]
                    when = ["sent", "first byte", "head", "first frame"][n % 4]
                    rst = n % 2 == 1 and when != "sent"
                    tg.start_soon(functools.partial(hang_up, url, call, when, rst=rst))
        await wait_idle(proxy)  # no connection task left over
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            results: list[Exchange] = []

            async def whole(call: Call) -> None:
                results.append(await fetch(client, call))

            async with anyio.create_task_group() as tg:
                for call in calls:
                    tg.start_soon(whole, call)
    assert all(r.status == 200 and r.error is None for r in results)
    assert cassette.read_bytes() == before


# --------------------------------------------------------------- the disk


FIRST = chat_call("recorded before the disk trouble")
LOST = chat_call("answered while the disk is in trouble", stream=True)
AFTER = chat_call("recorded once the trouble is over", stream=True)


def fill_disk(path: Path, saved: Path) -> None:
    """Writes to ``path`` now fail with ENOSPC, from the kernel: it is /dev/full."""
    path.rename(saved)
    path.symlink_to("/dev/full")


def make_unwritable(path: Path, saved: Path) -> None:
    """``path`` turns into something no file can be appended to (EISDIR)."""
    path.rename(saved)
    path.mkdir()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize(
    ("trouble", "error"),
    [(fill_disk, "No space left on device"), (make_unwritable, "Is a directory")],
    ids=["disk-full", "not-writable"],
)
@pytest.mark.anyio
async def test_a_write_that_fails_loses_one_exchange_loudly_and_serving_goes_on(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    trouble: Callable[[Path, Path], None],
    error: str,
) -> None:
    cassette = tmp_path / "c.jsonl"
    saved = tmp_path / "saved.jsonl"
    # recorded twice: each later ask is a hit, served once per recording
    await record(cassette, [FIRST, FIRST])
    async with serve_fake() as fake:
        opts = options(Mode.AUTO, cassette, upstream=fake.url)
        proxy = Proxy(opts.config(), cassette=cassette)
        async with (
            running(opts, proxy=proxy) as url,
            httpx.AsyncClient(base_url=url, timeout=10) as client,
        ):
            trouble(cassette, saved)
            lost = await fetch(client, LOST)
            # the line is written after the client has the end of the answer;
            # the next answer on the same connection comes after that write
            assert (await fetch(client, FIRST)).status == 200
            assert proxy.write_errors == 1
            if cassette.is_dir():
                cassette.rmdir()
            else:
                cassette.unlink()
            saved.rename(cassette)
            after = await fetch(client, AFTER)
            hit = await fetch(client, FIRST)
        replies = {prompt(r.body): respond(r) for r in fake.requests}
    # the client got the upstream's whole answer: what it says is true
    assert lost.status == 200
    assert lost.error is None
    assert lost.body == replies[prompt(LOST.content)].body
    assert after.status == hit.status == 200
    assert proxy.write_errors == 1
    recorded = check_cassette(cassette)
    assert [prompt(i.request.body) for i in recorded] == [
        prompt(FIRST.content),
        prompt(FIRST.content),
        prompt(AFTER.content),
    ]
    [message] = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert str(cassette) in message
    assert error in message
    assert "NOT recorded" in message


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_read_only_cassette_loses_one_exchange_loudly(tmp_path: Path, backend: str) -> None:
    """A cassette file and directory made read-only while the proxy records
    (a real EACCES: as root the proxy runs without the capabilities that
    ignore permissions).  The exchange is answered, not recorded, said in
    the log; once writable again recording goes on."""
    root = tmp_path / "cassettes"
    root.mkdir()
    cassette = root / "c.jsonl"
    # FIRST recorded twice: each ask of it below is a hit (served once per recording)
    anyio.run(functools.partial(record, cassette, [FIRST, FIRST]), backend=backend)
    with FakeUpstreamThread(backend=backend) as fake:
        args = ["--backend", backend, "--mode", "auto", "--cassette", str(cassette)]
        with (
            proxy_process([*args, "--upstream", fake.url], read_only_means_read_only=True) as p,
            httpx.Client(base_url=p.url, timeout=10) as client,
        ):
            first = client.post(FIRST.path, content=FIRST.content)
            cassette.chmod(0o444)
            root.chmod(0o555)
            try:
                lost = client.post(LOST.path, content=LOST.content)
                # the line is written after the client has the end of the
                # answer; the next answer on the connection comes after that
                assert client.post(FIRST.path, content=FIRST.content).status_code == 200
            finally:
                root.chmod(0o755)
                cassette.chmod(0o644)
            after = client.post(AFTER.path, content=AFTER.content)
            # asked again, the lost exchange is forwarded and recorded this time
            again = client.post(LOST.path, content=LOST.content)
            p.proc.send_signal(signal.SIGTERM)
            assert p.proc.wait(timeout=30) == 0
        replies = [respond(r) for r in fake.requests]
    assert [prompt(r.body) for r in fake.requests] == [
        prompt(c.content) for c in (LOST, AFTER, LOST)
    ]
    assert [r.status_code for r in (first, lost, after, again)] == [200] * 4
    assert lost.content == replies[0].body
    recorded = check_cassette(cassette)
    assert [prompt(i.request.body) for i in recorded] == [
        prompt(c.content) for c in (FIRST, FIRST, AFTER, LOST)
    ]
    assert f"could not write {cassette} (Permission denied)" in p.stderr
    assert "NOT recorded" in p.stderr


# ------------------------------------------------------------------- SIGTERM


@pytest.mark.parametrize("backend", BACKENDS)
def test_sigterm_with_many_exchanges_in_flight(tmp_path: Path, backend: str) -> None:
    """SIGTERM while 16 exchanges are open: streams that end within the
    grace end whole and are on disk; longer ones and a stalled one are cut
    and not recorded; the proxy exits 0; every line is whole; a new proxy
    replays every finished one."""
    cassette = tmp_path / "c.jsonl"
    grace = 1.0
    calls: list[Call] = []
    for n in range(16):
        delay = 20 if n % 2 == 0 else 400  # 10-odd frames: ~0.3 s or ~5 s
        headers = {"x-fake-frame-delay-ms": str(delay)}
        if n == 15:
            headers = {"x-fake-scenario": "stall"}
        calls.append(chat_call(f"in flight {n} " + "word " * 10, stream=True, headers=headers))
    results: dict[int, tuple[bytes, Exception | None]] = {}
    with FakeUpstreamThread(backend=backend) as fake:
        args = ["--backend", backend, "--mode", "record", "--cassette", str(cassette)]
        with (
            proxy_process([*args, "--upstream", fake.url, "--grace", str(grace)]) as p,
            httpx.Client(base_url=p.url, timeout=30, limits=httpx.Limits(max_connections=32)) as c,
        ):
            started = threading.Barrier(len(calls) + 1, timeout=30)

            def stream(n: int) -> None:
                call = calls[n]
                chunks: list[bytes] = []
                error: Exception | None = None
                with c.stream("POST", call.path, content=call.content, headers=call.headers) as r:
                    started.wait()  # the head is in
                    try:
                        for chunk in r.iter_raw():
                            chunks.append(chunk)
                    except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
                        error = exc
                results[n] = (b"".join(chunks), error)

            threads = [threading.Thread(target=stream, args=(n,)) for n in range(len(calls))]
            for t in threads:
                t.start()
            started.wait()  # every exchange is open and under way
            p.proc.send_signal(signal.SIGTERM)
            assert p.proc.wait(timeout=grace + 20) == 0
            for t in threads:
                t.join(timeout=30)
        replies = {prompt(r.body): respond(r) for r in fake.requests}
    finished = {
        prompt(calls[n].content)
        for n, (body, error) in results.items()
        if error is None and body == replies[prompt(calls[n].content)].body
    }
    assert len(results) == len(calls)
    assert finished == {prompt(calls[n].content) for n in range(0, 16, 2)}
    recorded = check_cassette(cassette)
    assert sorted(prompt(i.request.body) for i in recorded) == sorted(finished)
    assert all(i.response.cut is None for i in recorded)
    assert "SIGTERM: finishing open exchanges" in p.stderr
    assert "Traceback" not in p.stderr

    async def replay() -> list[Exchange]:
        async with (
            running(options(Mode.REPLAY, cassette, timing="fast")) as url,
            httpx.AsyncClient(base_url=url, timeout=10) as client,
        ):
            return [await fetch(client, calls[n]) for n in range(0, 16, 2)]

    for n, got in zip(range(0, 16, 2), anyio.run(replay, backend=backend), strict=True):
        assert got.status == 200
        assert got.body == replies[prompt(calls[n].content)].body
