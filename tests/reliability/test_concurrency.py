"""Load: a timed soak of the proxy on each backend, and many processes and
threads recording into one cassette through the in-process transports.

The soak runs ``REEL_SOAK_SECONDS`` (default 60) per backend: 200
concurrent clients mixing hits, misses (auto mode: forwarded and recorded)
and streams against a proxy subprocess.  Every answer is checked byte for
byte; errors must be 0 and the lines recorded must be exactly the misses.
The figures are printed (``-s``) and quoted in ``docs/reliability.md``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.abc
import h11
import httpx
import pytest

from reel_bindings.proxy import running
from reel_core import Mode
from tests.bindings.proxy_support import Call, Exchange, chat_call, fetch, options
from tests.fakes.upstream import FakeUpstreamThread, serve_fake
from tests.inner import inner_ini

from ._support import check_cassette, connect, proxy_process, record

SOAK_SECONDS = float(os.environ.get("REEL_SOAK_SECONDS", "60"))
CLIENTS = 200
HITS = 20


def prompt(body: bytes) -> str:
    content: str = json.loads(body)["messages"][0]["content"]
    return content


@dataclass
class Soak:
    requests: int = 0
    hits: int = 0
    misses: int = 0
    streams: int = 0
    errors: list[str] = field(default_factory=list)
    #: Seconds from sending a request to the end of its answer, by kind.
    hit_latencies: list[float] = field(default_factory=list)
    miss_latencies: list[float] = field(default_factory=list)
    #: What each miss was answered (checked against the cassette afterwards).
    miss_bodies: dict[str, bytes] = field(default_factory=dict)


async def exchange(
    stream: anyio.abc.SocketStream, conn: h11.Connection, call: Call
) -> tuple[int, bytes]:
    """One request on a kept-alive connection: the status and the body."""
    content = call.content
    headers = [("host", "soak"), ("content-type", "application/json")]
    headers.append(("content-length", str(len(content))))
    await stream.send(
        conn.send(h11.Request(method="POST", target=call.path, headers=headers))
        + conn.send(h11.Data(data=content))
        + conn.send(h11.EndOfMessage())
    )
    status = 0
    body = b""
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await stream.receive())
        elif isinstance(event, h11.Response):
            status = event.status_code
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            conn.start_next_cycle()
            return status, body
        else:
            raise AssertionError(f"unexpected {event!r}")


async def soak(
    urls: tuple[str, str], hits: list[Call], expected: dict[str, bytes], seconds: float
) -> Soak:
    """``CLIENTS`` clients, each with its own kept-alive connection to each
    proxy (``urls``: the one replaying the hits, the one recording the
    misses; raw h11: an HTTP client library would cost more CPU than the
    proxies), each sending its next request as soon as the last is answered."""
    result = Soak()
    deadline = anyio.current_time() + seconds

    async def client_loop(worker: int) -> None:
        n = worker
        streams: list[anyio.abc.SocketStream | None] = [None, None]
        conns = [h11.Connection(h11.CLIENT), h11.Connection(h11.CLIENT)]
        while anyio.current_time() < deadline:
            n += 1
            miss = n % 4 == 0
            if miss:
                call = chat_call(f"soak miss {worker}-{n}", stream=(n // 4) % 2 == 1)
            else:
                call = hits[n % len(hits)]
            start = anyio.current_time()
            which = int(miss)
            try:
                stream = streams[which]
                if stream is None:
                    stream = streams[which] = await connect(urls[which])
                    conns[which] = h11.Connection(h11.CLIENT)
                with anyio.fail_after(60):
                    status, body = await exchange(stream, conns[which], call)
            except Exception as exc:  # counted, never raised: the run goes on
                result.errors.append(f"{call.path}: {exc!r}")
                if streams[which] is not None:
                    await streams[which].aclose()  # type: ignore[union-attr]
                streams[which] = None
                continue
            latencies = result.miss_latencies if miss else result.hit_latencies
            latencies.append(anyio.current_time() - start)
            result.requests += 1
            result.streams += bool(call.body and call.body.get("stream"))
            key = prompt(call.content)
            if status != 200:
                result.errors.append(f"{key}: {status}")
            elif miss:
                result.misses += 1
                result.miss_bodies[key] = body
            elif body != expected[key]:
                result.errors.append(f"{key}: replayed body differs")
            else:
                result.hits += 1
        for stream in streams:
            if stream is not None:
                await stream.aclose()

    async with anyio.create_task_group() as tg:
        for worker in range(CLIENTS):
            tg.start_soon(client_loop, worker)
    return result


@contextmanager
def fake_process() -> Iterator[str]:
    """The fake upstream in a process of its own; its URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.upstream", "--port", "0"],
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


@pytest.mark.slow
@pytest.mark.soak
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_soak(tmp_path: Path, backend: str) -> None:
    """Replay and recording under load, side by side: a proxy in replay mode
    serves the hits (each recording as often as it is asked: replay repeats
    the last), and a proxy in auto mode records the misses.  (One auto-mode
    proxy would serve each recording once, then record every later ask.)"""
    cassette = tmp_path / "soak.jsonl"
    recording = tmp_path / "misses.jsonl"
    hits = [chat_call(f"soak hit {n} " + "word " * n, stream=n % 2 == 1) for n in range(HITS)]
    anyio.run(record, cassette, hits)
    expected = {prompt(i.request.body): i.response.content for i in check_cassette(cassette)}
    # four processes on two cores: the clients, two proxies, the fake upstream
    with fake_process() as upstream:
        replay_args = ["--backend", backend, "--mode", "replay", "--cassette", str(cassette)]
        auto_args = ["--backend", backend, "--mode", "auto", "--cassette", str(recording)]
        with (
            proxy_process([*replay_args, "-q"]) as replayer,
            proxy_process([*auto_args, "--upstream", upstream, "-q"]) as recorder,
        ):
            urls = (replayer.url, recorder.url)
            result = anyio.run(soak, urls, hits, expected, SOAK_SECONDS)
            for proxy in (replayer, recorder):
                proxy.proc.send_signal(signal.SIGTERM)
                assert proxy.proc.wait(timeout=60) == 0
    recorded = check_cassette(recording)

    def ms(latencies: list[float], at: float) -> float:
        ordered = sorted(latencies)
        return round(ordered[min(len(ordered) - 1, int(len(ordered) * at))] * 1000, 1)

    figures = {
        "backend": backend,
        "seconds": SOAK_SECONDS,
        "clients": CLIENTS,
        "requests": result.requests,
        "per_second": round(result.requests / SOAK_SECONDS),
        "hits": result.hits,
        "misses_recorded": result.misses,
        "streams": result.streams,
        "errors": len(result.errors),
        "lines_recorded": len(recorded),
        "hit_p50_ms": ms(result.hit_latencies, 0.5),
        "hit_p99_ms": ms(result.hit_latencies, 0.99),
        "miss_p50_ms": ms(result.miss_latencies, 0.5),
        "miss_p99_ms": ms(result.miss_latencies, 0.99),
    }
    print(f"soak: {json.dumps(figures)}")  # -s shows it; quoted in docs/reliability.md
    assert result.errors == []
    assert result.requests > CLIENTS
    assert len(recorded) == len(result.miss_bodies) == result.misses
    for interaction in recorded:
        assert interaction.response.content == result.miss_bodies[prompt(interaction.request.body)]
    assert replayer.stderr == recorder.stderr == ""  # -q: not one warning or error logged


# ------------------------------------------------- processes and threads

WORKERS = 4
TESTS = 16
THREADS = 8
PER_THREAD = 10

INNER = f"""
import json, os, threading

import anyio, httpx, httpx2, pytest, requests

from reel_bindings.httpcore import AsyncTransport, Transport
from reel_bindings.requests import Adapter

CASSETTE = os.environ["SHARED_CASSETTE"]
FAKE = os.environ["FAKE_URL"]


def body(test, thread, n):
    prompt = f"test {{test}} thread {{thread}} request {{n}}"
    stream = n % 2 == 1
    return json.dumps({{"model": "gpt-4o-mini", "stream": stream,
                       "messages": [{{"role": "user", "content": prompt}}]}}).encode()


def sender(kind):
    # a function sending one request body, and one closing what it opened
    if kind in ("httpx", "httpx2"):
        family = httpx if kind == "httpx" else httpx2
        client = family.Client(transport=Transport(CASSETTE, mode="auto"), base_url=FAKE)
        return lambda data: client.post("/v1/chat/completions", content=data).content, client.close
    if kind == "requests":
        session = requests.Session()
        session.mount("http://", Adapter(CASSETTE, mode="auto"))
        url = FAKE + "/v1/chat/completions"
        return lambda data: session.post(url, data=data).content, session.close
    return None, lambda: None  # async: one loop and one transport per thread


async def post_all(test, t, failures):
    async with AsyncTransport(CASSETTE, mode="auto") as transport:
        async with httpx.AsyncClient(transport=transport, base_url=FAKE) as client:
            for n in range({PER_THREAD}):
                got = await client.post("/v1/chat/completions", content=body(test, t, n))
                if b"chatcmpl-" not in got.content:
                    failures.append(got.content[:200])


@pytest.mark.parametrize("test", range({TESTS}))
def test_record(test):
    send, close = sender(["httpx", "httpx2", "requests", "async"][test % 4])
    failures = []

    def thread(t):
        if send is None:
            anyio.run(post_all, test, t, failures)
            return
        for n in range({PER_THREAD}):
            try:
                assert b"chatcmpl-" in send(body(test, t, n))
            except Exception as exc:
                failures.append(repr(exc))

    threads = [threading.Thread(target=thread, args=(t,)) for t in range({THREADS})]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    close()
    assert failures == []
"""


@pytest.mark.slow
def test_processes_and_threads_record_into_one_cassette(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """4 xdist workers run 16 tests; each test's 8 threads record 10
    requests each through one in-process transport (httpx, httpx2,
    requests, async httpx in turn), all into one cassette: 1280 lines, every
    one whole and valid, none lost, none twice."""
    pytest.importorskip("xdist", reason="pip install pytest-xdist (in the test extra)")
    cassette = pytester.path / "shared.jsonl"
    monkeypatch.setenv("SHARED_CASSETTE", str(cassette))
    for variable in ("REEL_MODE", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER"):
        monkeypatch.delenv(variable, raising=False)
    pytester.makeini(inner_ini())
    pytester.makepyfile(test_shared=INNER)
    with FakeUpstreamThread() as fake:
        monkeypatch.setenv("FAKE_URL", fake.url)
        result = pytester.runpytest_subprocess("-n", str(WORKERS))
        forwarded = len(fake.requests)
    result.assert_outcomes(passed=TESTS)
    recorded = check_cassette(cassette)
    prompts = [prompt(i.request.body) for i in recorded]
    expected = {
        f"test {s} thread {t} request {n}"
        for s in range(TESTS)
        for t in range(THREADS)
        for n in range(PER_THREAD)
    }
    total = TESTS * THREADS * PER_THREAD
    print(f"concurrent appends: {WORKERS} processes x {THREADS} threads, {len(prompts)} lines")
    assert forwarded == total
    assert len(prompts) == total
    assert set(prompts) == expected
    assert all(i.response.status == 200 for i in recorded)
    assert cassette.read_bytes().count(b'{"_meta"') == 1


@pytest.mark.anyio
async def test_auto_mode_records_concurrent_misses_of_one_request_once_each(
    tmp_path: Path,
) -> None:
    """The same unrecorded request from 20 clients at once: each is
    forwarded (none is served half-recorded) and each answer recorded;
    identical recordings are then replayed in recorded order."""
    cassette = tmp_path / "c.jsonl"
    call = chat_call("twenty at once", stream=True)
    async with serve_fake() as fake:
        async with (
            running(options(Mode.AUTO, cassette, upstream=fake.url)) as url,
            httpx.AsyncClient(base_url=url, timeout=10) as client,
        ):
            results: list[Exchange] = []

            async def one() -> None:
                results.append(await fetch(client, call))

            async with anyio.create_task_group() as tg:
                for _ in range(20):
                    tg.start_soon(one)
        forwarded = len(fake.requests)
    assert all(r.status == 200 and r.error is None for r in results)
    assert len({r.body for r in results}) == 1
    recorded = check_cassette(cassette)
    assert len(recorded) == forwarded
    assert len({i.id for i in recorded}) == forwarded  # ids: key, key-2, key-3...
