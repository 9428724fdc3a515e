"""The proxy speaks HTTP/2 (issue 35, item 3): h2c with prior knowledge on
the plain port, h2 by ALPN on ``--tls``, HTTP/1.1 on the same port.

The class of defect: a connection served with the wrong protocol, or a
stream of it answered with another stream's exchange.  The invariants
(docs/reliability.md, "HTTP/2 on the proxy's port"): the protocol is
decided by the connection's first bytes however they are split; every
stream of a connection gets exactly its own exchange, on its own schedule,
whatever the others do (end, reset, wait).  Both are checked on generated
input: every split of the first bytes, and mixes of 1 to 50 streams with
resets.
"""

from __future__ import annotations

import json
import random
import ssl
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import anyio.abc
import anyio.streams.stapled
import anyio.to_thread
import httpx
import pytest

from reel_bindings.proxy import Proxy, ProxyOptions, _http2, running
from reel_bindings.proxy._http11 import H2_PREFACE
from reel_bindings.proxy._tls import alpn_protocols, local_certificate
from reel_core import (
    Cassette,
    CassetteMeta,
    Engine,
    Interaction,
    MatchConfig,
    Mode,
    RecordedRequest,
    RecordedResponse,
    Request,
)
from reel_core.tools import H2Session, WebSocketLog, WebSocketMessage, grpc_frame, match_key
from tests.fakes.upstream import FRAME_DELAY_HEADER, serve_fake

from .h2_client import H2Client
from .proxy_support import chat_call, fetch, interactions, options
from .timing import assert_not_early, spy_sleeps

pytestmark = pytest.mark.anyio

SSE = "text/event-stream"


def recording(
    body: bytes,
    *,
    path: str = "/v1/chat/completions",
    frames: Sequence[tuple[float, bytes]] = (),
    response_body: bytes = b'{"ok":true}',
    content_type: str = "application/json",
    stream: str | None = None,
    trailers: tuple[tuple[str, str], ...] = (),
    id: str = "rec",
    end_after: float = 1.0,
) -> Interaction:
    """One stored exchange, keyed as the proxy keys its request (its end
    ``end_after`` ms after its last frame)."""
    if frames and stream is None:
        stream = "sse"
    response = RecordedResponse(
        200,
        (("content-type", content_type),),
        body=b"" if stream else response_body,
        stream=stream,
        frames=tuple(frames),
        end_ms=max((at for at, _ in frames), default=0.0) + end_after,
        trailers=trailers,
    )
    request = RecordedRequest("POST", path, (), body)
    key = match_key("POST", path, (), body, MatchConfig())
    return Interaction(key=key, id=id, request=request, response=response)


def assert_slept_on_schedule(deadlines: Sequence[float], offsets: Sequence[float]) -> None:
    """The deadlines a replay slept until are its recorded ``offsets``
    (seconds) after one start, in order.  A deadline already passed is not
    slept for (a loaded machine delivers late, never early): the
    deadlines may be fewer than the offsets, never others."""
    assert deadlines, "nothing was slept for"
    for first in offsets:
        start = deadlines[0] - first
        relative = [d - start for d in deadlines]
        if relative == sorted(relative) and all(
            any(abs(r - o) < 1e-6 for o in offsets) for r in relative
        ):
            return
    raise AssertionError(f"slept until {deadlines}, not the offsets {offsets} after one start")


def write_cassette(path: Path, *recorded: Interaction) -> Path:
    path.write_bytes(CassetteMeta().to_line() + b"".join(i.to_line() for i in recorded))
    return path


def body_of(n: int) -> bytes:
    return json.dumps({"model": "m", "messages": [{"role": "user", "content": f"n={n}"}]}).encode()


def h2_client(url: str, **kwargs: object) -> httpx.AsyncClient:
    """An httpx client speaking HTTP/2 only (prior knowledge over http://)."""
    return httpx.AsyncClient(
        base_url=url,
        http1=False,
        http2=True,
        timeout=30,
        trust_env=False,
        **kwargs,  # type: ignore[arg-type]
    )


# -- httpx, http2=True -----------------------------------------------------------


async def test_record_then_replay_over_http2(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    calls = [chat_call("Hello over h2"), chat_call("A stream over h2", stream=True)]
    async with (
        serve_fake() as fake,
        running(options(Mode.RECORD, cassette, upstream=fake.url)) as url,
        h2_client(url) as client,
    ):
        recorded = [await fetch(client, call) for call in calls]
        assert len(fake.requests) == 2  # forwarded upstream over HTTP/1.1
    assert [r.status for r in recorded] == [200, 200]
    stored = interactions(cassette)
    assert [json.loads(i.request.body) for i in stored] == [c.body for c in calls]
    assert stored[1].response.stream == "sse"
    async with (
        running(options(Mode.REPLAY, cassette, timing="fast")) as url,
        h2_client(url) as client,
    ):
        replayed = [await fetch(client, call) for call in calls]
        response = await client.post("/v1/chat/completions", content=calls[0].content)
    assert response.http_version == "HTTP/2"
    assert [r.body for r in replayed] == [r.body for r in recorded]
    assert replayed[1].events == recorded[1].events
    assert replayed[1].headers["content-type"].startswith(SSE)


async def test_a_streamed_replay_keeps_its_timing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    offsets = [0.0, 120.0, 300.0]
    frames = [(at, f"data: {i}\n\n".encode()) for i, at in enumerate(offsets)]
    call = chat_call("timed", stream=True)
    cassette = write_cassette(
        tmp_path / "c.jsonl",
        recording(call.content, frames=frames, content_type=SSE, end_after=50.0),
    )
    spy = spy_sleeps(monkeypatch, _http2, "sleep_until")
    async with running(options(Mode.REPLAY, cassette)) as url, h2_client(url) as client:
        got = await fetch(client, call)
    assert got.body == b"".join(data for _, data in frames)
    # the first frame is due with the head; the end 50 ms after the last
    assert_slept_on_schedule(spy.deadlines, [at / 1000 for at in [*offsets, offsets[-1] + 50.0]])
    assert_not_early(got.since_sent(), [at / 1000 for at in offsets])


async def test_a_miss_is_a_404_saying_so(tmp_path: Path) -> None:
    cassette = write_cassette(tmp_path / "c.jsonl", recording(body_of(1)))
    async with running(options(Mode.REPLAY, cassette)) as url, h2_client(url) as client:
        response = await client.post("/v1/chat/completions", content=body_of(2))
    assert response.http_version == "HTTP/2"
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["type"] == "reel_miss"
    assert "n=2" in json.dumps(error["closest"]["diff"])


async def test_a_recorded_websocket_session_is_refused_over_http2(tmp_path: Path) -> None:
    """HTTP/2 has no upgrade: a GET matching a recorded WebSocket session is
    a 400 saying so, never its 101; the connection goes on."""
    path = "/v1/realtime"
    session = WebSocketLog((WebSocketMessage("server", 5.0, b'{"type":"session.created"}'),))
    upgrade = Interaction(
        key=match_key("GET", path, (), b"", MatchConfig()),
        id="ws",
        request=RecordedRequest("GET", path, (), b""),
        response=RecordedResponse(101, (("upgrade", "websocket"),)),
        websocket=session,
    )
    cassette = write_cassette(tmp_path / "c.jsonl", upgrade, recording(body_of(1)))
    async with running(options(Mode.REPLAY, cassette)) as url, h2_client(url) as client:
        refused = await client.get(path)
        replay = await client.post("/v1/chat/completions", content=body_of(1))
    assert refused.status_code == 400
    assert refused.json()["error"]["type"] == "reel_websocket_over_http2"
    assert "HTTP/1.1" in refused.json()["error"]["message"]
    assert replay.content == b'{"ok":true}'


async def test_a_body_over_the_limit_is_its_streams_413(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cassette = write_cassette(tmp_path / "c.jsonl", recording(body_of(1)))
    async with (
        running(options(Mode.REPLAY, cassette, max_body=len(body_of(1)))) as url,
        h2_client(url) as client,
    ):
        big = await client.post("/v1/chat/completions", content=body_of(1) + b" " * 10)
        fits = await client.post("/v1/chat/completions", content=body_of(1))
    assert big.status_code == 413
    assert "--max-body" in big.json()["error"]["message"]
    assert fits.content == b'{"ok":true}'
    assert "answered 413" in caplog.text


async def test_http1_and_http2_clients_share_the_port(tmp_path: Path) -> None:
    cassette = write_cassette(tmp_path / "c.jsonl", recording(body_of(1)))
    async with (
        running(options(Mode.REPLAY, cassette)) as url,
        h2_client(url) as two,
        httpx.AsyncClient(base_url=url, trust_env=False) as one,
    ):
        r2 = await two.post("/v1/chat/completions", content=body_of(1))
        r1 = await one.post("/v1/chat/completions", content=body_of(1))
    assert (r1.http_version, r2.http_version) == ("HTTP/1.1", "HTTP/2")
    assert r1.content == r2.content == b'{"ok":true}'


# -- many streams on one connection ------------------------------------------------


def _stream_of(n: int, rng: random.Random) -> list[tuple[float, bytes]]:
    count = rng.randint(1, 4)
    at = sorted(rng.uniform(0, 80) for _ in range(count))
    return [(ms, f"data: stream {n} event {i}\n\n".encode()) for i, ms in enumerate(at)]


@pytest.mark.parametrize("seed", range(4))
async def test_concurrent_streams_each_get_their_own_replay(tmp_path: Path, seed: int) -> None:
    """A generated mix of 1-50 streams on one connection, some reset by the
    client at once or after their head: every other stream gets exactly
    its own recording, whole; the connection serves on afterwards."""
    rng = random.Random(seed)
    count = rng.randint(1, 50) if seed else 50
    streams = {n: _stream_of(n, rng) for n in range(count)}
    cassette = write_cassette(
        tmp_path / "c.jsonl",
        *(
            recording(body_of(n), frames=f, content_type=SSE, id=f"r{n}")
            for n, f in streams.items()
        ),
    )
    fate = {n: rng.choice(["whole", "whole", "reset-at-once", "reset-after-head"]) for n in streams}
    async with running(options(Mode.REPLAY, cassette)) as url, H2Client(url) as client:
        sids = {client.request(body_of(n)): n for n in streams}
        for sid, n in sids.items():
            if fate[n] == "reset-at-once":
                client.reset(sid)
        await client.flush()
        while not all(client.answers[sid].done for sid in sids) and not client.closed:
            await client.receive()
            for sid, n in sids.items():
                answer = client.answers[sid]
                if fate[n] == "reset-after-head" and answer.headers and not answer.done:
                    client.reset(sid)
            await client.flush()
        assert not client.closed
        assert client.goaway is None
        for sid, n in sids.items():
            answer = client.answers[sid]
            whole = b"".join(data for _, data in streams[n])
            if fate[n] == "whole":
                assert answer.status == 200
                assert answer.ended
                assert answer.data == whole, n
            else:
                assert whole.startswith(answer.data), n  # its own, as far as it read
        # the connection lives on: one more stream, answered
        last = client.request(body_of(0))
        await client.flush()
        await client.until_done(last)
        assert client.answers[last].data == b"".join(data for _, data in streams[0])


class _SlowWrites(anyio.abc.ByteStream):
    """A client connection whose every write takes a while (a busy
    machine's, a slow reader's)."""

    def __init__(self, inner: anyio.abc.ByteStream) -> None:
        self.inner = inner

    async def send(self, item: bytes) -> None:
        await anyio.sleep(0.05)
        await self.inner.send(item)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        return await self.inner.receive(max_bytes)

    async def send_eof(self) -> None:
        await self.inner.send_eof()

    async def aclose(self) -> None:
        await self.inner.aclose()


@dataclass
class _Timeouts:
    """The little of the proxy a write asks (its client timeout)."""

    client_timeout: float = 5.0


async def test_a_write_goes_out_whole_though_its_writer_is_cancelled() -> None:
    """A write takes every stream's bytes from the session: the task
    writing them may be cancelled meanwhile (its stream reset by the
    client, its forward's grace over), and they must still go out, or
    another stream's answer loses them (a replay's frame went missing
    under load, found by the generated mixes above)."""
    sending, receiving = anyio.create_memory_object_stream[bytes](10)
    wire = anyio.streams.stapled.StapledObjectStream(sending, receiving)
    session = H2Session(lambda: Engine(Cassette()))  # its SETTINGS wait to be written
    conn = _http2.HTTP2Connection(
        _Timeouts(),  # type: ignore[arg-type]
        _SlowWrites(wire),  # type: ignore[arg-type]
        session,
    )
    async with sending, receiving:
        async with anyio.create_task_group() as tg:
            tg.start_soon(conn.write)
            await anyio.sleep(0.01)  # the bytes are taken, the write under way
            tg.cancel_scope.cancel()
        with anyio.fail_after(5):
            written = await receiving.receive()
    assert written.startswith(b"\x00\x00")  # the server's SETTINGS frame, whole
    assert session.data_to_send() == b""


async def test_concurrent_forwards_are_each_recorded_as_their_own(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    count = 20
    got: dict[int, bytes] = {}
    async with (
        serve_fake() as fake,
        running(options(Mode.RECORD, cassette, upstream=fake.url)) as url,
        h2_client(url) as client,
    ):

        async def one(n: int) -> None:
            response = await client.post("/v1/chat/completions", content=body_of(n))
            got[n] = response.content

        async with anyio.create_task_group() as tg:
            for n in range(count):
                tg.start_soon(one, n)
    stored = {
        json.loads(i.request.body)["messages"][0]["content"]: i for i in interactions(cassette)
    }
    assert sorted(stored) == sorted(f"n={n}" for n in range(count))
    async with running(options(Mode.REPLAY, cassette)) as url, h2_client(url) as client:
        for n in range(count):
            response = await client.post("/v1/chat/completions", content=body_of(n))
            assert response.content == got[n]


async def test_a_forwarded_stream_the_client_resets_is_recorded_and_the_rest_go_on(
    tmp_path: Path,
) -> None:
    """The client resets a stream mid-answer: the forward reads its
    upstream on for the grace (the answer is recorded whole), and the
    connection's other stream is forwarded and answered meanwhile."""
    cassette = tmp_path / "c.jsonl"
    streamed = chat_call("a long stream", stream=True, headers={FRAME_DELAY_HEADER: "20"})
    async with (
        serve_fake() as fake,
        running(options(Mode.RECORD, cassette, upstream=fake.url)) as url,
        H2Client(url) as client,
    ):
        extra = tuple((k.encode(), v.encode()) for k, v in streamed.headers.items())
        headers = ((b"content-type", b"application/json"), *extra)
        left = client.request(streamed.content, headers=headers)
        await client.flush()
        while not client.answers[left].frames:
            await client.receive()
        client.reset(left)
        other = client.request(body_of(7))
        await client.flush()
        await client.until_done(other)
        assert client.answers[other].status == 200
    assert len(fake.requests) == 2
    stored = {
        json.loads(i.request.body)["messages"][0]["content"]: i for i in interactions(cassette)
    }
    assert sorted(stored) == ["a long stream", "n=7"]
    whole = stored["a long stream"].response
    assert whole.cut is None  # the upstream ended within the grace: recorded whole
    assert b"[DONE]" in b"".join(data for _, data in whole.frames)


class SeamUpstream:
    """An upstream client standing for the HTTP/2 one (``AsyncUpstream.send``
    giving ``UpstreamResponse.trailers``, read after ``chunks()`` ends):
    every request is answered with ``chunks`` and ``trailers``; ``yielded``
    counts the chunks the proxy read."""

    def __init__(
        self,
        chunks: Sequence[bytes],
        trailers: list[tuple[bytes, bytes]],
        content_type: bytes = b"application/grpc",
    ) -> None:
        self.chunks_ = list(chunks)
        self.trailers = trailers
        self.content_type = content_type
        self.yielded = 0
        self.requests: list[Request] = []

    @asynccontextmanager
    async def send(
        self,
        request: Request,
        url: str,
        *,
        waiting: Callable[[], object] | None = None,
        meanwhile: Callable[[], bool] | None = None,
        more: AsyncIterator[bytes] | None = None,
    ) -> AsyncIterator[SeamUpstream]:
        self.requests.append(request)
        if waiting is not None:
            waiting()
        yield self

    @property
    def status(self) -> int:
        return 200

    @property
    def headers(self) -> list[tuple[bytes, bytes]]:
        return [(b"content-type", self.content_type)]

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        for chunk in self.chunks_:
            await anyio.sleep(0)
            self.yielded += 1
            yield chunk

    async def aclose(self) -> None:
        pass


def _proxy_with(upstream: SeamUpstream, opts: ProxyOptions) -> Proxy:
    assert opts.cassette is not None
    return Proxy(opts.config(), cassette=opts.cassette, upstream=upstream)  # type: ignore[arg-type]


async def test_a_grpc_call_recorded_with_its_trailers_replays_to_grpcio(tmp_path: Path) -> None:
    """Through the upstream seam: a response's trailers (the HTTP/2
    upstream's) are fed to the engine before its end, recorded, and
    replayed to a real grpcio client as its status and trailing metadata."""
    grpc = pytest.importorskip("grpc", reason="gRPC replay needs grpcio: pip install grpcio")
    cassette = tmp_path / "grpc.jsonl"
    upstream = SeamUpstream(
        [grpc_frame(b"first")[:3], grpc_frame(b"first")[3:] + grpc_frame(b"second")],
        [(b"grpc-status", b"0"), (b"x-upstream", b"yes")],
    )

    def call(target: str) -> tuple[list[bytes], object, dict[str, str]]:
        with grpc.insecure_channel(target, options=[("grpc.enable_http_proxy", 0)]) as channel:
            stream = channel.unary_stream(GRPC_STREAM_PATH)(b"count", timeout=10)
            messages = list(stream)
            return messages, stream.code(), dict(stream.trailing_metadata())

    record = options(Mode.RECORD, cassette, upstream="http://127.0.0.1:9")
    async with running(record, proxy=_proxy_with(upstream, record)) as url:
        live = await anyio.to_thread.run_sync(call, url.removeprefix("http://"))
    [stored] = interactions(cassette)
    assert stored.response.stream == "grpc"
    assert stored.response.trailers == (("grpc-status", "0"), ("x-upstream", "yes"))
    assert upstream.requests[0].header("content-type") == b"application/grpc"
    async with running(options(Mode.REPLAY, cassette)) as url:
        replayed = await anyio.to_thread.run_sync(call, url.removeprefix("http://"))
    assert live == replayed
    messages, code, trailing = replayed
    assert messages == [b"first", b"second"]
    assert code == grpc.StatusCode.OK
    assert trailing["x-upstream"] == "yes"


async def test_a_forward_waits_for_a_client_that_stops_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forwarded answer larger than the client's window waits in the
    session up to ``BUFFERED_MAX``: the upstream is not read on while the
    client reads nothing, and the answer is whole once it reads."""
    cassette = tmp_path / "c.jsonl"
    piece = bytes(range(256)) * 256  # 64 KiB
    monkeypatch.setattr(_http2, "BUFFERED_MAX", 4 * len(piece))
    upstream = SeamUpstream([piece] * 64, [], content_type=b"application/octet-stream")
    record = options(Mode.RECORD, cassette, upstream="http://127.0.0.1:9")
    async with (
        running(record, proxy=_proxy_with(upstream, record)) as url,
        H2Client(url, reads=False) as client,
    ):
        sid = client.request(body_of(1))
        await client.flush()
        while len(client.answers[sid].data) < 65535:
            await client.receive()
        await anyio.sleep(0.2)  # time for the proxy to read on, were it to
        held = upstream.yielded
        assert held <= 4 + 3, held  # what it holds, and what was in flight
        await client.read_on(sid)
        await client.until_done(sid)
    assert client.answers[sid].data == piece * 64
    assert upstream.yielded == 64
    [stored] = interactions(cassette)
    assert stored.response.body == piece * 64


async def test_a_client_leaving_mid_answer_costs_nothing_but_its_exchanges(
    tmp_path: Path,
) -> None:
    """The client closes the connection while a forward streams and a
    replay waits on its schedule: the forward is recorded (read on for the
    grace), the replay stops, and the proxy serves the next connection."""
    cassette = tmp_path / "c.jsonl"
    replayed = chat_call("replayed slowly", stream=True)
    frames = [(0.0, b"data: 1\n\n"), (20_000.0, b"data: 2\n\n")]
    write_cassette(cassette, recording(replayed.content, frames=frames, content_type=SSE))
    streamed = chat_call("forwarded", stream=True, headers={FRAME_DELAY_HEADER: "20"})
    head = ((b"content-type", b"application/json"), (FRAME_DELAY_HEADER.encode(), b"20"))
    with anyio.fail_after(10):  # the replay's 20 s schedule stops with its client
        async with (
            serve_fake() as fake,
            running(options(Mode.AUTO, cassette, upstream=fake.url)) as url,
        ):
            await _leave_mid_answer(url, replayed.content, streamed.content, head)
    assert len(fake.requests) == 2
    stored = {
        json.loads(i.request.body)["messages"][0]["content"]: i for i in interactions(cassette)
    }
    assert sorted(stored) == ["forwarded", "n=3", "replayed slowly"]
    forwarded = stored["forwarded"].response
    assert b"[DONE]" in b"".join(data for _, data in forwarded.frames)


async def test_a_replay_the_client_resets_stops_at_once(tmp_path: Path) -> None:
    """A reset while a replay waits on its schedule ends it: the connection
    is idle at once (the proxy stops without waiting out the replay)."""
    call = chat_call("replayed slowly", stream=True)
    frames = [(0.0, b"data: 1\n\n"), (20_000.0, b"data: 2\n\n")]
    cassette = write_cassette(
        tmp_path / "c.jsonl", recording(call.content, frames=frames, content_type=SSE)
    )
    async with AsyncExitStack() as stack:
        with anyio.fail_after(10):
            async with running(options(Mode.REPLAY, cassette, grace=20.0)) as url:
                client = await stack.enter_async_context(H2Client(url))
                sid = client.request(call.content)
                await client.flush()
                while not client.answers[sid].frames:
                    await client.receive()
                client.reset(sid)
                await client.flush()
    assert client.answers[sid].data == b"data: 1\n\n"


async def _leave_mid_answer(
    url: str, replayed: bytes, streamed: bytes, head: tuple[tuple[bytes, bytes], ...]
) -> None:
    """One client leaves while a replay and a forward are under way; the
    next is served."""
    async with H2Client(url) as client:
        slow = client.request(replayed)
        live = client.request(streamed, headers=head)
        await client.flush()
        while not (client.answers[slow].frames and client.answers[live].frames):
            await client.receive()
    # gone: the proxy serves on
    async with H2Client(url) as again:
        sid = again.request(body_of(3))
        await again.flush()
        await again.until_done(sid)
        assert again.answers[sid].status == 200


# -- the first bytes decide ---------------------------------------------------------


def _splits(data: bytes, rng: random.Random) -> list[bytes]:
    cuts = sorted(rng.sample(range(1, len(data)), k=min(len(data) - 1, rng.randint(0, 6))))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


@pytest.mark.parametrize("seed", range(6))
async def test_the_first_bytes_decide_however_they_are_split(tmp_path: Path, seed: int) -> None:
    """The preface in pieces (a byte at a time at worst) is HTTP/2; an
    HTTP/1.1 request in pieces, even one starting like the preface
    (``P``...), is HTTP/1.1."""
    rng = random.Random(seed)
    cassette = write_cassette(tmp_path / "c.jsonl", recording(body_of(1)))
    async with running(options(Mode.REPLAY, cassette)) as url:
        # HTTP/2: the client's preface and first frames, split
        async with H2Client(url) as probe:
            pass
        client = H2Client(url)
        client.conn.initiate_connection()
        sid = client.request(body_of(1))
        wire = client.conn.data_to_send()
        assert wire.startswith(H2_PREFACE)
        pieces = [*_splits(H2_PREFACE, rng), wire[len(H2_PREFACE) :]]
        if seed == 0:
            pieces = [bytes([b]) for b in H2_PREFACE] + pieces[-1:]
        host, port = probe.host, probe.port
        async with await anyio.connect_tcp(host, port) as raw:
            client._stream = raw
            for piece in pieces:
                await raw.send(piece)
                await anyio.sleep(0.002)
            await client.until_done(sid)
        assert client.answers[sid].data == b'{"ok":true}'
        # HTTP/1.1, split the same way
        body = body_of(1)
        request = (
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body)
        ) + body
        async with await anyio.connect_tcp(host, port) as raw:
            for piece in _splits(request, rng):
                await raw.send(piece)
                await anyio.sleep(0.002)
            answer = await _read_to_end(raw)
        assert answer.startswith(b"HTTP/1.1 200")
        assert answer.endswith(b'{"ok":true}')


async def _read_to_end(stream: anyio.abc.ByteStream) -> bytes:
    data = b""
    while True:
        try:
            data += await stream.receive()
        except anyio.EndOfStream:
            return data


async def test_garbage_after_the_preface_is_a_goaway_and_the_proxy_lives_on(
    tmp_path: Path,
) -> None:
    cassette = write_cassette(tmp_path / "c.jsonl", recording(body_of(1)))
    async with running(options(Mode.REPLAY, cassette)) as url:
        async with H2Client(url) as bad:
            await bad.send_raw(b"\x00\x00\x01\x00\x00\x00\x00\x00\x00x" * 3)  # DATA on stream 0
            while not bad.closed:
                await bad.receive()
        assert bad.goaway is not None
        assert bad.goaway.error_code == 1  # PROTOCOL_ERROR
        async with H2Client(url) as good:
            sid = good.request(body_of(1))
            await good.flush()
            await good.until_done(sid)
        assert good.answers[sid].data == b'{"ok":true}'


async def test_an_idle_http2_connection_is_closed_after_the_client_timeout(
    tmp_path: Path,
) -> None:
    cassette = write_cassette(tmp_path / "c.jsonl", recording(body_of(1)))
    async with running(options(Mode.REPLAY, cassette, client_timeout=0.3)) as url:
        async with H2Client(url) as client:
            sid = client.request(body_of(1))
            await client.flush()
            await client.until_done(sid)
            with anyio.fail_after(10):
                while not client.closed:
                    await client.receive()
        assert client.answers[sid].ended


async def test_the_proxy_stops_at_once_with_an_idle_http2_connection(tmp_path: Path) -> None:
    """Shutdown closes an HTTP/2 connection with no exchange under way, as
    an idle HTTP/1.1 one: the proxy does not wait out its grace for it."""
    cassette = write_cassette(tmp_path / "c.jsonl", recording(body_of(1)))
    grace = 20.0
    async with AsyncExitStack() as stack:
        with anyio.fail_after(grace / 2):
            async with running(options(Mode.REPLAY, cassette, grace=grace)) as url:
                client = await stack.enter_async_context(H2Client(url))
                sid = client.request(body_of(1))
                await client.flush()
                await client.until_done(sid)
            # the block is left: the proxy stopped (well within its grace)
            while not client.closed:
                await client.receive()
    assert client.answers[sid].ended


async def test_the_viewer_answers_over_http2(tmp_path: Path) -> None:
    cassette = write_cassette(tmp_path / "c.jsonl", recording(body_of(1)))
    async with running(options(Mode.REPLAY, cassette, ui=True)) as url, h2_client(url) as client:
        page = await client.get("/_reel/")
        nothing = await client.get("/_reel/nothing")
        replay = await client.post("/v1/chat/completions", content=body_of(1))
    assert page.http_version == "HTTP/2"
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert nothing.status_code == 404
    assert nothing.json()["error"]["type"] == "reel_ui"
    assert replay.content == b'{"ok":true}'
    assert len(interactions(cassette)) == 1  # the viewer's request is never recorded


async def test_an_answer_the_pump_makes_to_a_grpc_call_is_a_grpc_status(tmp_path: Path) -> None:
    """The pump's own answers (the viewer's refusals here) go through the
    core's one function: a gRPC call gets a 200 with ``grpc-status`` in its
    trailers, never a JSON 404 it cannot read."""
    cassette = write_cassette(tmp_path / "c.jsonl", recording(body_of(1)))
    grpc_head = ((b"content-type", b"application/grpc"), (b"te", b"trailers"))
    async with running(options(Mode.REPLAY, cassette, ui=True)) as url, H2Client(url) as client:
        sid = client.request(grpc_frame(b"\x08\x01"), "/_reel/nothing", headers=grpc_head)
        await client.flush()
        await client.until_done(sid)
    answer = client.answers[sid]
    assert answer.status == 200
    assert answer.data == b""
    trailers = dict(answer.trailers or ())
    assert trailers[b"grpc-status"] == b"5"  # the viewer's 404: NOT_FOUND
    assert trailers[b"grpc-message"]


async def test_without_h2_an_http2_client_is_turned_away_saying_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The h2 extra missing: the preface is answered by a closed connection
    and a log line naming the install; HTTP/1.1 is served as ever, and
    ALPN offers only http/1.1."""
    import reel_core.tools

    monkeypatch.setitem(sys.modules, "h2", None)  # as if not installed
    monkeypatch.delitem(sys.modules, "reel_core._h2_session")
    monkeypatch.delitem(sys.modules, "reel_bindings.proxy._http2")
    monkeypatch.delattr(reel_core.tools, "H2Session", raising=False)
    assert alpn_protocols() == ["http/1.1"]
    cassette = write_cassette(tmp_path / "c.jsonl", recording(body_of(1)))
    async with running(options(Mode.REPLAY, cassette)) as url:
        host, port = urlsplit(url).hostname or "", urlsplit(url).port or 0
        async with await anyio.connect_tcp(host, port) as raw:
            await raw.send(H2_PREFACE + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
            assert await _read_to_end(raw) == b""
        async with httpx.AsyncClient(base_url=url, trust_env=False) as one:
            response = await one.post("/v1/chat/completions", content=body_of(1))
    assert response.content == b'{"ok":true}'
    assert "pip install 'reel-llm[h2]'" in caplog.text


# -- TLS: ALPN chooses ----------------------------------------------------------------


async def test_tls_alpn_h2_and_http1_on_the_same_port(tmp_path: Path) -> None:
    cassette = write_cassette(tmp_path / "c.jsonl", recording(body_of(1)))
    tls_dir = tmp_path / "tls"
    files = local_certificate(tls_dir)
    assert files.ca is not None
    trust = ssl.create_default_context(cafile=str(files.ca))
    opts = options(Mode.REPLAY, cassette, tls=True, tls_dir=tls_dir)
    async with running(opts) as url:
        assert url.startswith("https://")
        async with (
            httpx.AsyncClient(base_url=url, http2=True, verify=trust, trust_env=False) as two,
            httpx.AsyncClient(base_url=url, verify=trust, trust_env=False) as one,
        ):
            r2 = await two.post("/v1/chat/completions", content=body_of(1))
            r1 = await one.post("/v1/chat/completions", content=body_of(1))
            miss = await two.post("/v1/chat/completions", content=body_of(2))
    assert (r2.http_version, r1.http_version) == ("HTTP/2", "HTTP/1.1")
    assert r1.content == r2.content == b'{"ok":true}'
    assert miss.status_code == 404


# -- gRPC, a real grpcio client ------------------------------------------------------

GRPC_PATH = "/reel.test.Echo/Say"
GRPC_STREAM_PATH = "/reel.test.Echo/Count"


def _grpc_cassette(path: Path) -> Path:
    head = "application/grpc"
    unary = recording(
        grpc_frame(b"hello"),
        path=GRPC_PATH,
        frames=[(50.0, grpc_frame(b"hello back"))],
        content_type=head,
        stream="grpc",
        trailers=(("grpc-status", "0"), ("x-served-by", "reel")),
        id="unary",
        end_after=50.0,
    )
    counting = recording(
        grpc_frame(b"count"),
        path=GRPC_STREAM_PATH,
        frames=[(0.0, grpc_frame(b"one")), (100.0, grpc_frame(b"two")), (200.0, grpc_frame(b""))],
        content_type=head,
        stream="grpc",
        trailers=(("grpc-status", "0"),),
        id="counting",
        end_after=50.0,
    )
    return write_cassette(path, unary, counting)


async def test_grpc_unary_and_server_streaming_replay_to_grpcio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    grpc = pytest.importorskip("grpc", reason="gRPC replay needs grpcio: pip install grpcio")
    cassette = _grpc_cassette(tmp_path / "grpc.jsonl")
    spy = spy_sleeps(monkeypatch, _http2, "sleep_until")

    def unary(target: str) -> tuple[bytes, object, dict[str, str]]:
        with grpc.insecure_channel(target, options=[("grpc.enable_http_proxy", 0)]) as channel:
            reply, call = channel.unary_unary(GRPC_PATH).with_call(b"hello", timeout=10)
            return reply, call.code(), dict(call.trailing_metadata())

    def streaming(target: str) -> tuple[list[bytes], object]:
        with grpc.insecure_channel(target, options=[("grpc.enable_http_proxy", 0)]) as channel:
            stream = channel.unary_stream(GRPC_STREAM_PATH)(b"count", timeout=10)
            return list(stream), stream.code()

    async with running(options(Mode.REPLAY, cassette)) as url:
        target = url.removeprefix("http://")
        reply, code, trailing = await anyio.to_thread.run_sync(unary, target)
        slept, spy.deadlines = spy.deadlines, []
        messages, stream_code = await anyio.to_thread.run_sync(streaming, target)
    assert reply == b"hello back"
    assert code == grpc.StatusCode.OK
    assert trailing["x-served-by"] == "reel"
    assert messages == [b"one", b"two", b""]
    assert stream_code == grpc.StatusCode.OK
    # each call on its recorded schedule: the unary one's message at 50 ms
    # (and its end), the stream's messages at 0, 100 and 200 ms (and its end)
    assert_slept_on_schedule(slept, [0.05, 0.1])
    assert_slept_on_schedule(spy.deadlines, [0.0, 0.1, 0.2, 0.25])


async def test_a_grpc_miss_is_not_found_to_grpcio(tmp_path: Path) -> None:
    grpc = pytest.importorskip("grpc", reason="gRPC replay needs grpcio: pip install grpcio")
    cassette = _grpc_cassette(tmp_path / "grpc.jsonl")

    def call(target: str) -> tuple[object, str]:
        with grpc.insecure_channel(target, options=[("grpc.enable_http_proxy", 0)]) as channel:
            say = channel.unary_unary(GRPC_PATH)
            try:
                say(b"goodbye", timeout=10)
            except grpc.RpcError as exc:
                return exc.code(), exc.details()
        raise AssertionError("the miss was answered as a hit")

    async with running(options(Mode.REPLAY, cassette)) as url:
        code, details = await anyio.to_thread.run_sync(call, url.removeprefix("http://"))
    assert code == grpc.StatusCode.NOT_FOUND
    assert "Reel miss" in details
    assert "unary" in details  # the closest recording, named


# -- gRPC sessions (client-streaming, bidirectional) ------------------------------------

SESSION_PATH = "/pkg.Chat/Talk"


def _session_cassette(path: Path, messages: list[bytes], answers: list[bytes], bidi: bool) -> Path:
    """A client-streaming or bidirectional call recorded as a session,
    through the core's seam (tests/core/test_h2_grpc_session.py)."""
    from tests.core.test_h2_grpc_session import record_through_h2

    cassette = Cassette("c.jsonl")
    record_through_h2(cassette, messages, answers, bidi=bidi)
    assert cassette.interactions()[0].grpc is not None
    path.write_bytes(cassette.dumps())
    return path


async def test_grpc_sessions_replay_to_grpcio_gated_by_its_messages(tmp_path: Path) -> None:
    """A client-streaming call answers after its last message, a
    bidirectional one message by message, as recorded; a message the
    recording does not have ends the call NOT_FOUND."""
    grpc = pytest.importorskip("grpc", reason="gRPC replay needs grpcio: pip install grpcio")
    summed = _session_cassette(tmp_path / "sum.jsonl", [b"1", b"2", b"3"], [b"sum=6"], False)
    talked = _session_cassette(tmp_path / "talk.jsonl", [b"hi", b"bye"], [b"A", b"B"], True)

    def calls(target: str, bidi: bool) -> tuple[object, ...]:
        with grpc.insecure_channel(target, options=[("grpc.enable_http_proxy", 0)]) as channel:
            if not bidi:
                summing = channel.stream_unary(SESSION_PATH)
                total, call = summing.with_call(iter([b"1", b"2", b"3"]), timeout=10)
                return total, call.code()
            talk = channel.stream_stream(SESSION_PATH)
            answers = list(talk(iter([b"hi", b"bye"]), timeout=10))
            try:
                list(talk(iter([b"hi", b"who?"]), timeout=10))
            except grpc.RpcError as exc:
                return answers, exc.code(), exc.details()
            raise AssertionError("a changed message was answered")

    async with running(options(Mode.REPLAY, summed)) as url:
        total, code = await anyio.to_thread.run_sync(calls, url.removeprefix("http://"), False)
    assert (total, code) == (b"sum=6", grpc.StatusCode.OK)
    async with running(options(Mode.REPLAY, talked)) as url:
        answers, code, details = await anyio.to_thread.run_sync(
            calls, url.removeprefix("http://"), True
        )
    assert answers == [b"A", b"B"]
    assert code == grpc.StatusCode.NOT_FOUND
    assert str(details).startswith("Reel miss: gRPC session")
