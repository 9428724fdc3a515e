"""A client that closes a forwarded stream early: the upstream is closed at
once (not read to its end), and in record mode the cassette keeps what came,
cut by the client (``client-closed``).

The fake upstream would stream for 30 s (a frame every 100 ms); the client
reads two frames and closes.  Every binding must close the upstream
connection (the fake counts it as a hang-up) and record the cut.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from contextlib import aclosing
from pathlib import Path
from typing import NoReturn
from urllib.parse import urlsplit

import anyio
import anyio.from_thread
import httpx
import httpx2
import pytest
import requests

from reel_bindings._upstream import AsyncUpstream
from reel_bindings.httpcore import AsyncTransport, Transport
from reel_bindings.requests import Adapter
from reel_core import Mode
from tests.fakes.upstream import (
    FRAME_DELAY_HEADER,
    FakeUpstreamThread,
    Reply,
    serve_fake,
)

from .proxy_support import interactions, options, proxied

PATH = "/v1/chat/completions"
BODY = json.dumps(
    {"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "long"}]}
).encode()
HEADERS = {"content-type": "application/json", FRAME_DELAY_HEADER: "100"}
FRAMES = tuple(b'data: {"n": %d}\n\n' % i for i in range(300))  # 30 s of stream
LONG = Reply(200, (("content-type", "text/event-stream"),), FRAMES, streamed=True)
#: How long a test waits for the upstream to see the hang-up: far less than
#: the 30 s the stream would last if it were read to its end.
PATIENCE = 15.0
#: The record grace the recording tests give (it runs out: the stream lasts
#: 30 s), where the default would keep each test 2 s longer for nothing
#: these tests check; the default's 2 s is
#: test_inprocess.py::test_a_reader_that_stops_early_leaves_a_stream_that_ends_in_the_grace_whole.
GRACE = 0.3


def assert_cut_by_the_client(cassette: Path, read: int) -> None:
    response = interactions(cassette)[0].response
    assert response.cut is not None
    assert response.cut.error == "client-closed"
    assert response.cut.detail
    frames = [data for _, data in response.frames]
    assert read <= len(frames) < len(FRAMES) // 2  # what came, not the whole stream
    assert frames == list(FRAMES[: len(frames)])


def sse_count(data: bytes) -> int:
    return data.count(b"\n\n")


def read_events(chunks: Iterable[bytes], events: int = 2) -> bytes:
    """Read ``chunks`` until ``events`` whole SSE events came, then stop."""
    got = b""
    for chunk in chunks:
        got += chunk
        if sse_count(got) >= events:
            break
    return got


# -- the proxy (asyncio and trio) -----------------------------------------------


async def hang_up_after(url: str, events: int) -> bytes:
    parts = urlsplit(url)
    assert parts.hostname
    assert parts.port
    head = (
        f"POST {PATH} HTTP/1.1\r\nhost: {parts.netloc}\r\ncontent-type: application/json\r\n"
        f"{FRAME_DELAY_HEADER}: 100\r\ncontent-length: {len(BODY)}\r\n\r\n"
    )
    got = b""
    async with await anyio.connect_tcp(parts.hostname, parts.port) as stream:
        await stream.send(head.encode() + BODY)
        while sse_count(got.partition(b"\r\n\r\n")[2]) < events:
            got += await stream.receive()
    return got


@pytest.mark.anyio
@pytest.mark.parametrize("mode", [Mode.RECORD, Mode.LIVE])
async def test_proxy_closes_the_upstream_when_the_client_leaves(tmp_path: Path, mode: Mode) -> None:
    cassette = tmp_path / "c.jsonl"
    async with serve_fake() as fake:
        fake.push_reply(LONG)
        opts = options(mode, cassette, upstream=fake.url, record_grace=GRACE)
        async with proxied(opts) as client:
            got = await hang_up_after(str(client.base_url), 2)
            assert got.startswith(b"HTTP/1.1 200 ")
            with anyio.fail_after(PATIENCE):
                while not fake.hangups:
                    await anyio.sleep(0.01)
                if mode is Mode.RECORD:
                    while cassette.read_bytes().count(b"\n") < 2:
                        await anyio.sleep(0.01)
            # the proxy serves on
            fake.push_reply(Reply(200, (("content-type", "application/json"),), (b"{}",)))
            after = await client.post("/v1/x", content=b"{}")
            assert after.status_code == 200
    assert fake.connections == 2  # the cut connection was not reused
    if mode is Mode.RECORD:
        assert_cut_by_the_client(cassette, 2)


@pytest.mark.anyio
async def test_a_client_leaving_while_the_upstream_connection_is_made_stops_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The proxy watches its client from the moment a forward first waits
    on the network: here, for a connection to the upstream that never
    comes.  The client's leaving stops the forward; nothing is recorded."""
    caplog.set_level(logging.INFO, logger="reel.proxy")
    connecting = anyio.Event()

    async def never(self: AsyncUpstream, origin: object) -> NoReturn:
        connecting.set()
        await anyio.sleep_forever()
        raise AssertionError("never connected")  # pragma: no cover

    monkeypatch.setattr(AsyncUpstream, "_connect", never)
    cassette = tmp_path / "c.jsonl"
    async with (
        serve_fake() as fake,
        proxied(options(Mode.RECORD, cassette, upstream=fake.url)) as client,
    ):
        parts = urlsplit(str(client.base_url))
        assert parts.hostname
        assert parts.port
        head = (
            f"POST {PATH} HTTP/1.1\r\nhost: {parts.netloc}\r\n"
            f"content-type: application/json\r\ncontent-length: {len(BODY)}\r\n\r\n"
        )
        with anyio.fail_after(PATIENCE):
            async with await anyio.connect_tcp(parts.hostname, parts.port) as stream:
                await stream.send(head.encode() + BODY)
                await connecting.wait()
            while not any("mid-exchange" in r.getMessage() for r in caplog.records):
                await anyio.sleep(0.01)
    assert not fake.requests
    assert interactions(cassette) == []


@pytest.mark.anyio
async def test_a_replayed_client_cut_breaks_off_where_the_client_left(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    async with serve_fake() as fake:
        fake.push_reply(LONG)
        opts = options(Mode.RECORD, cassette, upstream=fake.url, record_grace=GRACE)
        async with proxied(opts) as client:
            await hang_up_after(str(client.base_url), 2)
            with anyio.fail_after(PATIENCE):
                while cassette.read_bytes().count(b"\n") < 2:
                    await anyio.sleep(0.01)
    [line] = interactions(cassette)
    async with proxied(options(Mode.REPLAY, cassette, timing="fast")) as client:
        request = client.build_request("POST", PATH, content=BODY, headers=HEADERS)
        response = await client.send(request, stream=True)
        chunks: list[bytes] = []

        async def read() -> None:
            async for chunk in response.aiter_raw():
                chunks.append(chunk)

        with pytest.raises(httpx.RemoteProtocolError):
            await read()
        await response.aclose()
    assert b"".join(chunks) == line.response.content


# -- the in-process transports ---------------------------------------------------


@pytest.fixture
def fake() -> Iterator[FakeUpstreamThread]:
    with FakeUpstreamThread() as server:
        yield server


def wait_for_hangup(fake: FakeUpstreamThread) -> None:
    with anyio.from_thread.start_blocking_portal() as portal:

        async def wait() -> None:
            with anyio.fail_after(PATIENCE):
                while not fake.hangups:
                    await anyio.sleep(0.01)

        portal.call(wait)


@pytest.mark.parametrize("family", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_sync_transport_closes_the_upstream_when_the_response_is_closed(
    tmp_path: Path, fake: FakeUpstreamThread, family: object
) -> None:
    cassette = tmp_path / "c.jsonl"
    fake.push_reply(LONG)
    transport = Transport(cassette, mode=Mode.RECORD, record_grace=GRACE)
    with (
        family.Client(transport=transport) as client,  # type: ignore[attr-defined]
        client.stream("POST", fake.url + PATH, content=BODY, headers=HEADERS) as response,
    ):
        read_events(response.iter_raw())
        response.close()
        wait_for_hangup(fake)
    assert_cut_by_the_client(cassette, 2)


# On trio, httpx itself leaves an inner generator of its response stream to
# the garbage collector when a response is closed before its end (plain
# httpx, without Reel, warns the same).
@pytest.mark.filterwarnings(
    "ignore:Async generator 'http(x|core).*was garbage collected:ResourceWarning"
)
@pytest.mark.anyio
@pytest.mark.parametrize("family", [httpx, httpx2], ids=["httpx", "httpx2"])
async def test_async_transport_closes_the_upstream_when_the_response_is_closed(
    tmp_path: Path, family: object
) -> None:
    cassette = tmp_path / "c.jsonl"
    async with serve_fake() as fake:
        fake.push_reply(LONG)
        transport = AsyncTransport(cassette, mode=Mode.RECORD, record_grace=GRACE)
        async with family.AsyncClient(transport=transport) as client:  # type: ignore[attr-defined]
            request = client.build_request("POST", fake.url + PATH, content=BODY, headers=HEADERS)
            response = await client.send(request, stream=True)
            got = b""
            async with aclosing(response.aiter_raw()) as chunks:
                async for chunk in chunks:
                    got += chunk
                    if sse_count(got) >= 2:
                        break
            await response.aclose()
            with anyio.fail_after(PATIENCE):
                while not fake.hangups:
                    await anyio.sleep(0.01)
    assert_cut_by_the_client(cassette, 2)


def test_requests_adapter_closes_the_upstream_when_the_response_is_closed(
    tmp_path: Path, fake: FakeUpstreamThread
) -> None:
    cassette = tmp_path / "c.jsonl"
    fake.push_reply(LONG)
    session = requests.Session()
    session.mount("http://", Adapter(cassette, mode=Mode.RECORD, record_grace=GRACE))
    with session:
        response = session.post(fake.url + PATH, data=BODY, headers=HEADERS, stream=True)
        read_events(response.iter_content(chunk_size=None))
        response.close()
        wait_for_hangup(fake)
    assert_cut_by_the_client(cassette, 2)


def test_a_client_that_reads_to_the_last_event_leaves_a_whole_recording(
    tmp_path: Path, fake: FakeUpstreamThread
) -> None:
    """An SDK stops at ``[DONE]`` and closes before the body's end was read:
    the end, already on its way, is read, and the recording is whole."""
    cassette = tmp_path / "c.jsonl"
    frames = (b"data: 1\n\n", b"data: [DONE]\n\n")
    fake.push_reply(Reply(200, (("content-type", "text/event-stream"),), frames, streamed=True))
    with (
        httpx.Client(transport=Transport(cassette, mode=Mode.RECORD)) as client,
        client.stream("POST", fake.url + PATH, content=BODY, headers=HEADERS) as response,
    ):
        got = b""
        for chunk in response.iter_raw():
            got += chunk
            if got.endswith(b"[DONE]\n\n"):
                break
        response.close()
    [line] = interactions(cassette)
    assert line.response.cut is None
    assert [data for _, data in line.response.frames] == list(frames)


@pytest.mark.anyio
async def test_a_replayed_stream_the_client_drops_is_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # docs/proxy.md: every exchange is logged once, at its end; a replay
    # whose client left midway ends on a failed write, and was not logged
    cassette = tmp_path / "c.jsonl"
    frames = FRAMES[:40]
    async with serve_fake() as fake:
        fake.push_reply(Reply(200, LONG.headers, frames, streamed=True))
        async with proxied(options(Mode.RECORD, cassette, upstream=fake.url)) as client:
            headers = {**HEADERS, FRAME_DELAY_HEADER: "20"}
            assert (await client.post(PATH, content=BODY, headers=headers)).status_code == 200
    caplog.set_level(logging.INFO, logger="reel.proxy")
    async with proxied(options(Mode.REPLAY, cassette, timing="realtime")) as client:
        await hang_up_after(str(client.base_url), 2)
        with anyio.fail_after(PATIENCE):
            while not any(PATH in r.getMessage() for r in caplog.records):
                await anyio.sleep(0.01)
        await anyio.sleep(0.2)  # a second line would come now
    lines = [r.getMessage() for r in caplog.records if PATH in r.getMessage()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("replay hit (client left) POST ")
