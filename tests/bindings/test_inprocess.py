"""In-process bindings: timed frames, cuts, misses and modes on the httpx/httpx2
transports and the requests adapter."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import certifi
import httpx
import httpx2
import pytest
import requests

from reel_bindings._async import replay as async_replay
from reel_bindings._sync import replay as sync_replay
from reel_bindings.httpcore import AsyncTransport, Transport
from reel_bindings.requests import Adapter
from reel_core import Cassette, MissError
from tests.fakes.upstream import FRAME_DELAY_HEADER, SCENARIO_HEADER, FakeUpstreamThread

from .timing import assert_not_early, spy_sleeps

CHAT = "/v1/chat/completions"
GONE = "http://127.0.0.1:9"


def body(content: str, stream: bool = True) -> bytes:
    return json.dumps(
        {
            "model": "gpt-4o-mini",
            "stream": stream,
            "messages": [{"role": "user", "content": content}],
        }
    ).encode()


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeUpstreamThread]:
    with FakeUpstreamThread() as server:
        yield server


@pytest.fixture
def slow_stream(tmp_path: Path, fake: FakeUpstreamThread) -> Path:
    """A cassette holding one SSE stream recorded with 50 ms between frames."""
    cassette = tmp_path / "slow.jsonl"
    with httpx2.Client(transport=Transport(cassette, mode="record")) as client:
        r = client.post(
            fake.url + CHAT, content=body("one two three four"), headers={SCENARIO_HEADER: "slow"}
        )
        assert r.status_code == 200
    return cassette


def recorded_offsets(cassette: Path) -> list[float]:
    line = json.loads(cassette.read_bytes().splitlines()[1])
    return [at / 1000 for at, _ in line["response"]["frames"]]


def recorded_deadlines(cassette: Path) -> list[float]:
    """When a replay sleeps until: each frame's offset, then the stream's
    end (a deadline no later than one already passed is not slept for)."""
    (interaction,) = Cassette.loads(cassette.read_bytes(), strict=True)
    times = [at / 1000 for at, _ in interaction.response.frames]
    deadlines: list[float] = []
    for at in [*times, interaction.response.end_ms / 1000]:
        if not deadlines or at > deadlines[-1]:
            deadlines.append(at)
    return deadlines


def arrivals(chunks: Iterator[bytes], start: float) -> list[float]:
    return [time.monotonic() - start for chunk in chunks if chunk]


@pytest.mark.parametrize("family", [httpx, httpx2])
def test_sync_transport_replays_frames_on_schedule(
    slow_stream: Path, family: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = recorded_offsets(slow_stream)
    assert recorded[-1] >= 0.15  # several frames, 50 ms apart
    spy = spy_sleeps(monkeypatch, sync_replay, "sleep_until_sync")
    with family.Client(transport=Transport(slow_stream, mode="replay")) as client:  # type: ignore[attr-defined]
        start = time.monotonic()
        with client.stream("POST", GONE + CHAT, content=body("one two three four")) as r:
            actual = arrivals(r.iter_raw(), start)
    spy.assert_spaced(recorded_deadlines(slow_stream))
    assert_not_early(actual, recorded)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_async_transport_replays_frames_on_schedule(
    slow_stream: Path, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = recorded_offsets(slow_stream)
    spy = spy_sleeps(monkeypatch, async_replay, "sleep_until")

    async def run() -> list[float]:
        transport = AsyncTransport(slow_stream, mode="replay", timing="slow=2")
        async with httpx2.AsyncClient(transport=transport) as client:
            start = time.monotonic()
            async with client.stream("POST", GONE + CHAT, content=body("one two three four")) as r:
                return [time.monotonic() - start async for chunk in r.aiter_raw() if chunk]

    actual = anyio.run(run, backend=backend)
    spy.assert_spaced(recorded_deadlines(slow_stream), factor=2.0)
    assert_not_early(actual, recorded, factor=2.0)


def test_fast_timing_sleeps_not(slow_stream: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spy = spy_sleeps(monkeypatch, sync_replay, "sleep_until_sync")
    with httpx.Client(transport=Transport(slow_stream, mode="replay", timing="fast")) as client:
        r = client.post(GONE + CHAT, content=body("one two three four"))
    assert r.status_code == 200
    assert r.text.endswith("data: [DONE]\n\n")
    assert spy.deadlines == []


def test_requests_adapter_iter_lines_is_timed(
    slow_stream: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = recorded_offsets(slow_stream)
    spy = spy_sleeps(monkeypatch, sync_replay, "sleep_until_sync")
    session = requests.Session()
    session.mount("http://", Adapter(slow_stream, mode="replay"))
    start = time.monotonic()
    with session.post(GONE + CHAT, data=body("one two three four"), stream=True) as r:
        lines = [(time.monotonic() - start, line) for line in r.iter_lines() if line]
    data_lines = [line for _, line in lines if line.startswith(b"data: ")]
    assert data_lines[-1] == b"data: [DONE]"
    spy.assert_spaced(recorded_deadlines(slow_stream))
    # each event's data line arrives with its frame, never before it
    assert_not_early([at for at, line in lines if line.startswith(b"data: ")], recorded)


def test_requests_adapter_iter_content_and_content(slow_stream: Path) -> None:
    session = requests.Session()
    session.mount("http://", Adapter(slow_stream, mode="replay", timing="fast"))
    whole = session.post(GONE + CHAT, data=body("one two three four")).content
    with session.post(GONE + CHAT, data=body("one two three four"), stream=True) as r:
        pieces = list(r.iter_content(chunk_size=None))
    assert b"".join(pieces) == whole
    assert len(pieces) == len(recorded_offsets(slow_stream))


def test_cut_replays_as_a_broken_stream(tmp_path: Path, fake: FakeUpstreamThread) -> None:
    cassette = tmp_path / "cut.jsonl"
    with (
        httpx2.Client(transport=Transport(cassette, mode="record")) as client,
        pytest.raises(httpx2.RemoteProtocolError),
        client.stream(
            "POST", fake.url + CHAT, content=body("cut me"), headers={SCENARIO_HEADER: "cut"}
        ) as r,
    ):
        for _ in r.iter_raw():
            pass
    line = json.loads(cassette.read_bytes().splitlines()[1])
    assert "cut" in line["response"]
    # replay: the same frames, then the same break, in every binding
    with httpx.Client(transport=Transport(cassette, mode="replay", timing="fast")) as classic:
        got: list[bytes] = []
        with (
            pytest.raises(httpx.RemoteProtocolError, match="recorded cut"),
            classic.stream("POST", GONE + CHAT, content=body("cut me")) as replayed,
        ):
            got.extend(replayed.iter_raw())
    assert got == [data.encode() for _, data in line["response"]["frames"]]
    session = requests.Session()
    session.mount("http://", Adapter(cassette, mode="replay", timing="fast"))
    with pytest.raises(requests.exceptions.ChunkedEncodingError):
        session.post(GONE + CHAT, data=body("cut me"))


def test_upstream_refused_raises_the_clients_own_error(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    with (
        httpx2.Client(transport=Transport(cassette, mode="auto")) as client,
        pytest.raises(httpx2.ConnectError),
    ):
        client.post(GONE + CHAT, content=body("anyone?"))
    assert not cassette.exists()  # nothing recorded


def test_miss_is_a_404_report_or_raises_when_strict(tmp_path: Path) -> None:
    cassette = tmp_path / "none.jsonl"
    cassette.write_bytes(b"")
    transport = Transport(cassette, mode="replay")
    with httpx.Client(transport=transport) as client:
        r = client.post(GONE + CHAT, content=body("hello"))
    assert r.status_code == 404
    assert r.json()["error"]["type"] == "reel_miss"
    assert len(transport.misses) == 1
    with (
        httpx.Client(transport=Transport(cassette, mode="replay", strict=True)) as client,
        pytest.raises(MissError, match="no recording matches"),
    ):
        client.post(GONE + CHAT, content=body("hello"))
    session = requests.Session()
    session.mount("http://", Adapter(cassette, mode="replay", strict=True))
    with pytest.raises(MissError):
        session.post(GONE + CHAT, data=body("hello"))


def test_auto_records_misses_and_replays_hits(tmp_path: Path, fake: FakeUpstreamThread) -> None:
    cassette = tmp_path / "auto.jsonl"
    before = len(fake.requests)
    with httpx2.Client(transport=Transport(cassette, mode="auto")) as client:
        first = client.post(fake.url + CHAT, content=body("auto", stream=False)).json()
    with httpx2.Client(transport=Transport(cassette, mode="auto")) as client:
        again = client.post(fake.url + CHAT, content=body("auto", stream=False)).json()
        # a second occurrence in the same run is one more exchange: recorded too
        second = client.post(fake.url + CHAT, content=body("auto", stream=False)).json()
    assert first == again == second
    assert len(fake.requests) == before + 2
    assert len(cassette.read_bytes().splitlines()) == 3  # _meta and two recordings


def test_mode_comes_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REEL_MODE", "live")
    assert Transport(tmp_path / "x.jsonl").player.mode.value == "live"
    (tmp_path / "x.jsonl").write_bytes(b"")
    monkeypatch.delenv("REEL_MODE")
    assert Transport(tmp_path / "x.jsonl").player.mode.value == "replay"


def test_a_foreign_request_type_is_refused(tmp_path: Path) -> None:
    transport = Transport(tmp_path / "x.jsonl", mode="auto")
    with pytest.raises(TypeError, match="httpx and httpx2"):
        transport.handle_request(object())


@pytest.mark.parametrize("client", ["httpx2", "requests"])
def test_a_reader_that_stops_early_leaves_a_recording_cut_by_the_client(
    tmp_path: Path, fake: FakeUpstreamThread, client: str
) -> None:
    """With no grace the upstream is not read on: the chunk the client
    read is recorded, cut by the client."""
    cassette = tmp_path / f"{client}.jsonl"
    read_first = _first_frame_httpx2 if client == "httpx2" else _first_frame_requests
    first = read_first(cassette, fake.url, 0.0)
    assert first.startswith(b"data: ")
    line = json.loads(cassette.read_bytes().splitlines()[1])
    frames = [data.encode() for _, data in line["response"]["frames"]]
    assert b"".join(frames) == first  # what the client saw, no more
    assert "end" not in line["response"]
    assert line["response"]["cut"]["error"] == "client-closed"


@pytest.mark.parametrize("client", ["httpx2", "requests"])
def test_a_reader_that_stops_early_leaves_a_stream_that_ends_in_the_grace_whole(
    tmp_path: Path, fake: FakeUpstreamThread, client: str
) -> None:
    """The default grace (2 s) outlasts the rest of the stream (frames 50 ms
    apart): the recording reads on to its end, and is whole."""
    cassette = tmp_path / f"{client}.jsonl"
    read_first = _first_frame_httpx2 if client == "httpx2" else _first_frame_requests
    first = read_first(cassette, fake.url, None)
    line = json.loads(cassette.read_bytes().splitlines()[1])
    frames = [data.encode() for _, data in line["response"]["frames"]]
    assert b"".join(frames).startswith(first)
    assert b"".join(frames).endswith(b"data: [DONE]\n\n")
    assert "cut" not in line["response"]


#: Frames 50 ms apart: the stream does not end before the client leaves.
SLOW = {FRAME_DELAY_HEADER: "50"}


def _first_frame_httpx2(cassette: Path, url: str, grace: float | None) -> bytes:
    transport = Transport(cassette, mode="record", record_grace=grace)
    with (
        httpx2.Client(transport=transport) as client,
        client.stream("POST", url + CHAT, content=body("stop early please"), headers=SLOW) as r,
    ):
        return next(r.iter_raw())


def _first_frame_requests(cassette: Path, url: str, grace: float | None) -> bytes:
    session = requests.Session()
    session.mount("http://", Adapter(cassette, mode="record", record_grace=grace))
    with session.post(url + CHAT, data=body("stop early please"), headers=SLOW, stream=True) as r:
        first: bytes = next(r.iter_content(chunk_size=None))
        return first


# -- streamed request bodies: read once, recorded and forwarded whole -------------

FORM_BODY = b"grant_type=client_credentials&client_secret=streamed-secret-42"
FORM_TYPE = {"content-type": "application/x-www-form-urlencoded"}


def _pieces() -> Iterator[bytes]:
    yield FORM_BODY[:20]
    yield FORM_BODY[20:]


def _stored_form(cassette: Path) -> str:
    line = json.loads(cassette.read_bytes().splitlines()[-1])
    assert line["request"]["content_type"] == "application/x-www-form-urlencoded"
    text: str = line["request"]["body"]["text"]
    return text


@pytest.mark.parametrize("kind", ["file", "iterator"])
def test_requests_adapter_forwards_a_streamed_body_it_read(
    tmp_path: Path, fake: FakeUpstreamThread, kind: str
) -> None:
    import io

    cassette = tmp_path / "stream-body.jsonl"
    session = requests.Session()
    session.mount("http://", Adapter(cassette, mode="record"))
    data: io.BytesIO | Iterator[bytes] = io.BytesIO(FORM_BODY) if kind == "file" else _pieces()
    with session:
        # the timeout only guards against a hang: a body read twice used to
        # leave the upstream waiting for bytes that never came
        r = session.post(fake.url + "/oauth/token", data=data, headers=FORM_TYPE, timeout=30)
    assert r.status_code == 200
    assert fake.requests[-1].body == FORM_BODY
    assert _stored_form(cassette).endswith("client_secret=[REDACTED:query-secret]")


@pytest.mark.parametrize("family", [httpx, httpx2])
def test_transports_read_a_streamed_upload_whole(
    tmp_path: Path, fake: FakeUpstreamThread, family: object
) -> None:
    cassette = tmp_path / "stream-body.jsonl"
    client_type = family.Client  # type: ignore[attr-defined]
    with client_type(transport=Transport(cassette, mode="record")) as client:
        r = client.post(fake.url + "/oauth/token", content=_pieces(), headers=FORM_TYPE)
    assert r.status_code == 200
    assert fake.requests[-1].body == FORM_BODY
    assert _stored_form(cassette).endswith("client_secret=[REDACTED:query-secret]")


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_async_transport_reads_a_streamed_upload_whole(
    tmp_path: Path, fake: FakeUpstreamThread, backend: str
) -> None:
    cassette = tmp_path / "stream-body.jsonl"

    async def pieces() -> Any:
        for piece in _pieces():
            yield piece

    async def go() -> int:
        async with httpx2.AsyncClient(transport=AsyncTransport(cassette, mode="record")) as c:
            r = await c.post(fake.url + "/oauth/token", content=pieces(), headers=FORM_TYPE)
            return r.status_code

    assert anyio.run(go, backend=backend) == 200
    assert fake.requests[-1].body == FORM_BODY
    assert _stored_form(cassette).endswith("client_secret=[REDACTED:query-secret]")


@pytest.mark.parametrize("family", [httpx, httpx2])
def test_transports_share_one_ssl_context(
    tmp_path: Path, fake: FakeUpstreamThread, monkeypatch: pytest.MonkeyPatch, family: Any
) -> None:
    """Each SDK helper makes a transport; loading the CA roots for each
    delayed its first recorded request.  One context per process serves
    every transport's pools, and another SSL_CERT_FILE gets a context of
    its own."""
    from reel_bindings import _transport

    made: list[object] = []
    real = family.create_ssl_context

    def counting(*args: Any, **kwargs: Any) -> Any:
        made.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(family, "create_ssl_context", counting)
    monkeypatch.setattr(_transport, "_SSL_CONTEXTS", {})
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    transports = [Transport(tmp_path / f"{n}.jsonl", mode="record") for n in range(3)]
    for transport in transports:
        with family.Client(transport=transport) as client:
            r = client.post(fake.url + CHAT, content=body("ctx", stream=False))
            assert r.status_code == 200
    assert len(made) == 1
    assert all(not t._upstreams for t in transports)  # the process's pool serves them all
    first = _transport.ssl_context(family)
    roots = tmp_path / "roots.pem"
    roots.write_bytes(Path(certifi.where()).read_bytes())
    monkeypatch.setenv("SSL_CERT_FILE", str(roots))
    other = _transport.ssl_context(family)
    assert other is not first
    assert _transport.ssl_context(family) is other
    assert len(made) == 2


@pytest.mark.parametrize("binding", ["httpx", "httpx2", "requests"])
def test_each_exchange_is_noted_with_the_core_s_verdict(
    tmp_path: Path, fake: FakeUpstreamThread, binding: str
) -> None:
    """Every in-process binding's player keeps one run log, noted as each
    exchange ends with the core's verdict: recorded, hit, miss, and a
    forward whose upstream refused the connection (nothing recorded)."""
    from reel_bindings._inprocess import Binding
    from reel_core import Verdict

    cassette = tmp_path / "c.jsonl"

    def send(mode: str, url: str, content: str, **kwargs: Any) -> tuple[Binding, int | None]:
        if binding == "requests":
            adapter = Adapter(cassette, mode=mode, timing="fast", **kwargs)
            session = requests.Session()
            session.mount("http://", adapter)
            try:
                return adapter, session.post(
                    url + CHAT, data=body(content, stream=False)
                ).status_code
            except requests.exceptions.ConnectionError:
                return adapter, None
        family: Any = httpx if binding == "httpx" else httpx2
        transport = Transport(cassette, mode=mode, timing="fast", **kwargs)
        with family.Client(transport=transport) as client:
            try:
                return transport, client.post(
                    url + CHAT, content=body(content, stream=False)
                ).status_code
            except family.ConnectError:
                return transport, None

    recorder, status = send("auto", fake.url, "one")
    assert status == 200
    replayer, status = send("replay", GONE, "one")
    assert status == 200
    misser, status = send("replay", GONE, "two")
    assert status == 404
    failer, status = send("record", GONE, "three")
    assert status is None  # the client's own error
    served = [
        [s.verdict for s in b.player.runlog.last] for b in (recorder, replayer, misser, failer)
    ]
    assert served == [[Verdict.RECORDED], [Verdict.HIT], [Verdict.MISS], [Verdict.FAILED]]
    assert [s.path for s in replayer.player.runlog.last] == [CHAT]
    assert misser.misses == list(misser.player.runlog.misses)
    assert len(misser.misses) == misser.player.runlog.counts[Verdict.MISS] == 1
