"""Upstream faults, routing, cassette directories and bad client input."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import anyio.abc
import httpx
import pytest

from reel_bindings.proxy import ProxyOptions, running
from reel_core import Mode
from tests.fakes.upstream import CUT_AFTER, FRAME_DELAY_HEADER, closed_port_url, serve_fake

from .proxy_support import Call, chat_call, fetch, interactions, options, proxied, upstream_reply
from .timing import SLACK

pytestmark = pytest.mark.anyio


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@asynccontextmanager
async def silent_upstream() -> AsyncIterator[str]:
    """A server that accepts connections and reads requests but never answers."""

    async def hold(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            try:
                while True:
                    await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, hold)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            tg.cancel_scope.cancel()


# ---------------------------------------------------------- upstream faults


async def test_refused_upstream_is_502_and_nothing_recorded(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    closed = closed_port_url()
    async with proxied(options(Mode.RECORD, cassette, upstream=closed)) as client:
        got = await fetch(client, chat_call("anyone there?"))
    assert got.status == 502
    error = got.json()["error"]
    assert error["type"] == "reel_upstream_error"
    assert error["failure"] == "refused"
    assert "could not reach the upstream" in error["message"]
    assert "refused" in error["message"]
    assert error["message"].endswith(
        f"Forwards go to {closed}: check that it is reachable, or name another "
        "base URL with REEL_UPSTREAM=URL (the proxy's --upstream URL)."
    )
    assert interactions(cassette) == []


async def test_silent_upstream_times_out_as_504_and_nothing_recorded(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    async with silent_upstream() as url:
        opts = options(Mode.RECORD, cassette, upstream=url, upstream_timeout=0.3)
        async with proxied(opts) as client:
            with anyio.fail_after(10):
                got = await fetch(client, chat_call("hello?", stream=True))
    assert got.status == 504
    error = got.json()["error"]
    assert error["failure"] == "timeout"
    assert "timeout" in error["message"]
    assert interactions(cassette) == []


async def test_stall_after_the_head_is_a_recorded_timeout_cut(tmp_path: Path) -> None:
    """The fake's ``stall`` sends its head, then nothing: a cut, not a 504."""
    cassette = tmp_path / "c.jsonl"
    call = chat_call("stall", stream=True, headers={"x-fake-scenario": "stall"})
    async with serve_fake() as fake:
        opts = options(Mode.RECORD, cassette, upstream=fake.url, upstream_timeout=0.3)
        async with proxied(opts) as client:
            with anyio.fail_after(10):
                rec = await fetch(client, call)
    assert rec.status == 200
    assert rec.error is not None
    [interaction] = interactions(cassette)
    assert interaction.response.cut is not None
    assert interaction.response.cut.error == "timeout"
    async with proxied(options(Mode.REPLAY, cassette)) as client:
        rep = await fetch(client, call)
    assert rep.status == 200
    assert rep.error is not None
    # the replay breaks off where the recording did, never sooner
    assert rep.duration + rep.waited >= interaction.response.cut.at_ms / 1000 - SLACK


@pytest.mark.parametrize(("scenario", "stream"), [("cut", True), ("reset", True), ("cut", False)])
async def test_cut_stream_is_seen_live_and_replayed_at_the_same_place(
    tmp_path: Path, scenario: str, stream: bool
) -> None:
    cassette = tmp_path / "c.jsonl"
    call = chat_call(
        "one two three four five six seven",
        stream=stream,
        headers={"x-fake-scenario": scenario},
    )
    async with serve_fake() as fake:
        async with proxied(options(Mode.RECORD, cassette, upstream=fake.url)) as client:
            rec = await fetch(client, call)
            # the proxy goes on serving after the upstream broke
            after = await fetch(client, chat_call("still there?"))
        reply = upstream_reply(fake, 0)
    assert after.status == 200
    assert rec.status == 200
    assert isinstance(rec.error, (httpx.RemoteProtocolError, httpx.ReadError))
    if stream:
        assert rec.events == list(reply.frames[:CUT_AFTER])
    else:
        assert rec.body == reply.body[: len(reply.body) // 2]
    line = cassette.read_bytes().splitlines()[1]
    assert b'"cut":{' in line
    [interaction, _] = interactions(cassette)
    cut = interaction.response.cut
    assert cut is not None
    assert cut.error == ("reset" if scenario == "reset" else "closed")
    assert interaction.response.content == rec.body

    async with proxied(options(Mode.REPLAY, cassette)) as client:
        rep = await fetch(client, call)
        again = await fetch(client, chat_call("still there?"))
    assert rep.status == 200
    assert isinstance(rep.error, (httpx.RemoteProtocolError, httpx.ReadError))
    assert rep.body == rec.body
    if stream:
        assert rep.events == rec.events
    assert rep.duration + rep.waited >= cut.at_ms / 1000 - SLACK  # where it was cut, not sooner
    assert again.status == 200


@pytest.mark.parametrize(
    ("scenario", "failure"), [("garbage", "protocol"), ("close-early", "closed")]
)
async def test_broken_upstream_answer_is_502(tmp_path: Path, scenario: str, failure: str) -> None:
    cassette = tmp_path / "c.jsonl"
    call = chat_call("broken", stream=True, headers={"x-fake-scenario": scenario})
    async with (
        serve_fake() as fake,
        proxied(options(Mode.RECORD, cassette, upstream=fake.url)) as client,
    ):
        got = await fetch(client, call)
        after = await fetch(client, chat_call("fine"))
    assert got.status == 502
    error = got.json()["error"]
    assert error["failure"] == failure
    assert failure in error["message"]
    assert after.status == 200
    assert [i.response.status for i in interactions(cassette)] == [200]


async def hang_up_mid_stream(url: str, call: Call) -> bytes:
    """Send ``call`` on a raw connection, read until the first frame is in, hang up."""
    parts = urlsplit(url)
    assert parts.hostname is not None
    assert parts.port is not None
    head = (
        f"{call.method} {call.path} HTTP/1.1\r\nhost: {parts.netloc}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(call.content)}\r\n\r\n"
    )
    got = b""
    with anyio.fail_after(10):
        async with await anyio.connect_tcp(parts.hostname, parts.port) as stream:
            await stream.send(head.encode() + call.content)
            while b"data: " not in got:
                got += await stream.receive()
    return got


async def test_client_leaving_mid_stream_closes_the_upstream_and_records_a_cut(
    tmp_path: Path,
) -> None:
    cassette = tmp_path / "c.jsonl"
    call = chat_call("one two three four five six", stream=True, headers={FRAME_DELAY_HEADER: "50"})
    async with serve_fake() as fake:
        # no grace: the cut is recorded at once (with one, the recording reads
        # on for it first: tests/bindings/test_proxy_recordings.py)
        opts = options(Mode.RECORD, cassette, upstream=fake.url, record_grace=0.0)
        async with proxied(opts) as client:
            partial = await hang_up_mid_stream(str(client.base_url), call)
            assert partial.startswith(b"HTTP/1.1 200 ")
            # the proxy stops reading the upstream and records what came
            with anyio.fail_after(10):
                while cassette.read_bytes().count(b"\n") < 2:
                    await anyio.sleep(0.01)
            after = await fetch(client, chat_call("next"))
        reply = upstream_reply(fake, 0)
    assert after.status == 200
    recorded = interactions(cassette)[0]
    assert recorded.response.cut is not None
    assert recorded.response.cut.error == "client-closed"
    content = recorded.response.content
    assert content
    assert reply.body.startswith(content)
    assert len(content) < len(reply.body)
    # a replay breaks off where the client left; a replay client hanging up
    # mid-stream leaves the proxy serving
    async with proxied(options(Mode.REPLAY, cassette)) as client:
        await hang_up_mid_stream(str(client.base_url), call)
        replayed = await fetch(client, call)
    assert replayed.body == content
    assert replayed.error is not None


# ------------------------------------------------------------------ routing


async def test_unknown_path_without_upstream_is_421(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    async with serve_fake() as fake:
        async with proxied(options(Mode.AUTO, cassette)) as client:
            got = await fetch(client, Call("/api/chat", {"model": "llama3", "messages": []}))
            tags = await fetch(client, Call("/api/tags", method="GET"))
        assert fake.requests == []
    assert got.status == 421
    error = got.json()["error"]
    assert error["type"] == "reel_no_upstream"
    assert "--upstream" in error["message"]
    assert "/api/chat" in error["message"]
    assert tags.status == 421
    assert not cassette.exists()  # auto mode writes only what it records


async def test_unknown_path_with_upstream_is_forwarded(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    async with serve_fake() as fake:
        async with proxied(options(Mode.AUTO, cassette, upstream=fake.url)) as client:
            got = await fetch(client, Call("/api/chat", {"model": "llama3"}))
        assert [r.path for r in fake.requests] == ["/api/chat"]
    assert got.status == 404  # the fake's own answer, recorded like any other
    assert [i.request.path for i in interactions(cassette)] == ["/api/chat"]


def dir_options(root: Path, mode: Mode, upstream: str | None = None) -> ProxyOptions:
    return ProxyOptions(mode=mode, cassette_dir=root, upstream=upstream, port=0)


async def test_cassette_dir_header_selects_and_creates_cassettes(tmp_path: Path) -> None:
    root = tmp_path / "cassettes"
    alpha = chat_call("for alpha", headers={"x-reel-cassette": "alpha"})
    beta = chat_call("for beta", headers={"x-reel-cassette": "team/beta.jsonl"})
    plain = chat_call("for the default")
    async with serve_fake() as fake:
        async with proxied(dir_options(root, Mode.AUTO, fake.url)) as client:
            for call in (alpha, beta, plain):
                assert (await fetch(client, call)).status == 200
        # x-reel-* headers are Reel's own: never forwarded
        assert all(r.header("x-reel-cassette") is None for r in fake.requests)
    assert files_under(root) == {"alpha.jsonl", "team", "team/beta.jsonl", "default.jsonl"}
    assert [i.request.body for i in interactions(root / "alpha.jsonl")] == [alpha.content]
    assert [i.request.body for i in interactions(root / "team/beta.jsonl")] == [beta.content]
    assert [i.request.body for i in interactions(root / "default.jsonl")] == [plain.content]
    # each new cassette got its own redaction salt
    salts = {
        json.loads((root / name).read_bytes().splitlines()[0])["_meta"]["redact"]["salt"]
        for name in ("alpha.jsonl", "team/beta.jsonl", "default.jsonl")
    }
    assert len(salts) == 3

    async with proxied(dir_options(root, Mode.REPLAY)) as client:
        hit = await fetch(client, alpha)
        wrong = await fetch(client, Call(alpha.path, alpha.body, {"x-reel-cassette": "team/beta"}))
        fresh = await fetch(client, Call(alpha.path, alpha.body, {"x-reel-cassette": "nowhere"}))
    assert hit.status == 200
    assert wrong.status == 404
    assert wrong.json()["error"]["cassette"] == str(root / "team/beta.jsonl")
    assert fresh.status == 404
    assert not (root / "nowhere.jsonl").exists()  # replay writes nothing


@pytest.mark.parametrize("name", ["../x", "/etc/passwd", "a/../../b", "..", ".hidden", "a//b"])
async def test_bad_cassette_names_are_400(tmp_path: Path, name: str) -> None:
    root = tmp_path / "cassettes"
    root.mkdir()
    before = files_under(tmp_path)
    async with serve_fake() as fake:
        async with proxied(dir_options(root, Mode.AUTO, fake.url)) as client:
            got = await fetch(client, chat_call("escape", headers={"x-reel-cassette": name}))
            ok = await fetch(client, chat_call("stay", headers={"x-reel-cassette": "ok"}))
        assert len(fake.requests) == 1  # only the good one
    assert got.status == 400
    error = got.json()["error"]
    assert error["type"] == "reel_bad_cassette"
    assert "bad cassette name" in error["message"]
    assert ok.status == 200
    assert files_under(tmp_path) == before | {"cassettes/ok.jsonl"}
    assert not Path("/etc/passwd.jsonl").exists()


# --------------------------------------------------------- bad client input


async def raw_exchange(url: str, data: bytes) -> bytes:
    """Send ``data`` on a fresh connection; everything the proxy answers until it closes."""
    parts = urlsplit(url)
    assert parts.hostname is not None
    assert parts.port is not None
    out = b""
    with anyio.fail_after(10):
        async with await anyio.connect_tcp(parts.hostname, parts.port) as stream:
            # the proxy may answer and close before reading everything
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await stream.send(data)
            while True:
                try:
                    out += await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return out


BAD_INPUT = {
    "malformed-request-line": (b"THIS IS NOT HTTP AT ALL\r\n\r\n", 400, b"reel_bad_request"),
    "binary-junk": (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400, b""),
    "connect": (
        b"CONNECT api.openai.com:443 HTTP/1.1\r\nHost: api.openai.com:443\r\n\r\n",
        405,
        b"not a tunnelling proxy",
    ),
    "oversized-head": (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Big: "
        + b"a" * (100 * 1024)
        + b"\r\n\r\n",
        431,
        b"limit",
    ),
}


async def test_bad_client_input_is_answered_and_serving_goes_on(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    call = chat_call("alive", stream=True, headers={"x-fake-frame-delay-ms": "30"})
    async with (
        serve_fake() as fake,
        proxied(options(Mode.RECORD, cassette, upstream=fake.url)) as client,
    ):
        recorded = await fetch(client, call)
    async with (
        running(options(Mode.REPLAY, cassette)) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        # a stream in flight on another connection is not disturbed
        async with anyio.create_task_group() as tg:
            results = []

            async def stream() -> None:
                results.append(await fetch(client, call))

            tg.start_soon(stream)
            for name, (data, status, text) in BAD_INPUT.items():
                answer = await raw_exchange(url, data)
                assert answer.startswith(f"HTTP/1.1 {status} ".encode()), (name, answer[:200])
                assert b"connection: close" in answer.lower()
                assert text in answer, name
                # and a fresh client is served right after
                assert (await fetch(client, call)).body == recorded.body
        assert results[0].body == recorded.body
        assert results[0].error is None


async def test_idle_client_is_dropped_after_client_timeout(tmp_path: Path) -> None:
    (tmp_path / "none.jsonl").write_bytes(b"")
    opts = options(Mode.REPLAY, tmp_path / "none.jsonl", client_timeout=0.2)
    async with running(opts) as url:
        parts = urlsplit(url)
        assert parts.hostname is not None
        assert parts.port is not None
        with anyio.fail_after(5):
            async with await anyio.connect_tcp(parts.hostname, parts.port) as stream:
                await stream.send(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
                # half a request: answered 408 when the timeout runs out, then closed
                answer = b""
                with suppress(anyio.EndOfStream, anyio.BrokenResourceError):
                    while True:  # until the proxy closes
                        answer += await stream.receive()
                assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
        async with httpx.AsyncClient(base_url=url) as client:
            miss = await fetch(client, chat_call("after"))
    assert miss.status == 404
    assert (tmp_path / "none.jsonl").read_bytes() == b""  # nothing written


class _GoneClient:
    """A client stream whose peer reset the connection: shutdown fails with
    ENOTCONN (what trio raises), reads find it gone."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    async def send_eof(self) -> None:
        raise self.error

    async def receive(self, max_bytes: int = 65536) -> bytes:
        raise self.error


@pytest.mark.anyio
@pytest.mark.parametrize(
    "error",
    [OSError(107, "Transport endpoint is not connected"), anyio.BrokenResourceError()],
    ids=["enotconn", "broken"],
)
async def test_lingering_after_an_error_answer_survives_a_client_already_gone(
    error: BaseException,
) -> None:
    from reel_bindings.proxy._http11 import _linger

    await _linger(_GoneClient(error), 1.0)  # type: ignore[arg-type]
