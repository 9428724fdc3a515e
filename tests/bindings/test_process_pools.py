"""The sync transports forward through the process's pools: a transport made
for each client (as each SDK client makes one) reuses the connections the
ones before it opened, and a closed transport leaves them to the next.
Async transports keep pools of their own (an async connection belongs to
its event loop).  The requests adapter forwards through the process's
``HTTPAdapter`` alike."""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
import requests

from reel_bindings import _transport
from reel_bindings import requests as reel_requests
from reel_bindings.httpcore import AsyncTransport, Transport
from reel_bindings.requests import Adapter
from tests.fakes.upstream import FakeUpstreamThread

CHAT = "/v1/chat/completions"
FAMILIES = [httpx, httpx2]


def body(content: str, stream: bool = False) -> bytes:
    messages = [{"role": "user", "content": content}]
    return json.dumps({"model": "gpt-4o-mini", "stream": stream, "messages": messages}).encode()


def lines(cassette: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in cassette.read_bytes().splitlines()[1:]]


@pytest.fixture
def fake() -> Iterator[FakeUpstreamThread]:
    """A fake of this test's own: its connection count starts at 0."""
    with FakeUpstreamThread() as server:
        yield server


@pytest.fixture(autouse=True)
def pools() -> Iterator[None]:
    """None of the process's pools at the test's start, and those it made
    closed at its end (as the process's close at its exit)."""
    for shared in (_transport._POOLS, reel_requests._SHARED):
        shared.close_all()
    yield
    for shared in (_transport._POOLS, reel_requests._SHARED):
        shared.close_all()


def _record(family: Any, cassette: Path, url: str, content: str, stream: bool = False) -> None:
    """One request recorded (auto mode: added to ``cassette``) through a new
    transport of its own, closed after."""
    with family.Client(transport=Transport(cassette, mode="auto")) as client:
        r = client.post(url + CHAT, content=body(content, stream))
        assert r.status_code == 200
        r.read()


@pytest.mark.parametrize("family", FAMILIES)
def test_transports_made_one_after_another_share_one_connection(
    tmp_path: Path, fake: FakeUpstreamThread, family: Any
) -> None:
    cassette = tmp_path / "c.jsonl"
    for n in range(4):
        _record(family, cassette, fake.url, f"question {n}", stream=n % 2 == 1)
    assert fake.connections == 1  # a connection each before
    assert len(fake.requests) == 4
    # each is recorded whole, streams too
    recorded = lines(cassette)
    assert [r["request"]["body"]["json"]["messages"][0]["content"] for r in recorded] == [
        f"question {n}" for n in range(4)
    ]
    assert [r["response"].get("stream") for r in recorded] == [None, "sse", None, "sse"]


@pytest.mark.parametrize("family", FAMILIES)
def test_a_closed_transport_leaves_the_pool_open_for_the_next(
    tmp_path: Path, fake: FakeUpstreamThread, family: Any
) -> None:
    first = Transport(tmp_path / "a.jsonl", mode="record")
    with family.Client(transport=first) as client:
        assert client.post(fake.url + CHAT, content=body("one")).status_code == 200
    first.close()  # again: closing twice is harmless
    second = Transport(tmp_path / "b.jsonl", mode="record")
    with family.Client(transport=second) as client:
        assert client.post(fake.url + CHAT, content=body("two")).status_code == 200
    assert fake.connections == 1
    assert len(lines(tmp_path / "b.jsonl")) == 1


@pytest.mark.parametrize("family", FAMILIES)
def test_an_upstream_given_is_used_and_closed_with_the_transport(
    tmp_path: Path, fake: FakeUpstreamThread, family: Any
) -> None:
    given = family.HTTPTransport()
    transport = Transport(tmp_path / "c.jsonl", mode="record", upstream=given)
    with family.Client(transport=transport) as client:
        assert client.post(fake.url + CHAT, content=body("mine")).status_code == 200
    # the given pool's connection, not the process's: closed with the transport
    assert given._pool.connections == []
    _record(family, tmp_path / "d.jsonl", fake.url, "shared")
    assert fake.connections == 2


@pytest.mark.parametrize("family", FAMILIES)
def test_threads_making_transports_at_once_share_one_pool(
    tmp_path: Path, fake: FakeUpstreamThread, family: Any
) -> None:
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def one(n: int) -> None:
        try:
            start.wait()
            _record(family, tmp_path / f"{n}.jsonl", fake.url, f"thread {n}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(fake.requests) == 8
    assert len(_transport._POOLS) == 1  # one pool for the family, whoever made it
    assert 1 <= fake.connections <= 8  # at most one a request at once, then reused
    before = fake.connections
    _record(family, tmp_path / "after.jsonl", fake.url, "after")
    assert fake.connections == before


def test_another_ssl_context_gets_a_pool_of_its_own(
    tmp_path: Path, fake: FakeUpstreamThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pool's connections were made with its SSL context: a test that
    sets SSL_CERT_FILE gets a pool that verifies with those roots."""
    import certifi

    _record(httpx, tmp_path / "a.jsonl", fake.url, "default roots")
    roots = tmp_path / "roots.pem"
    roots.write_bytes(Path(certifi.where()).read_bytes())
    monkeypatch.setenv("SSL_CERT_FILE", str(roots))
    _record(httpx, tmp_path / "b.jsonl", fake.url, "other roots")
    assert fake.connections == 2
    context = _transport.ssl_context(httpx)
    assert _transport.process_pool(httpx, "", context) is _transport.process_pool(
        httpx, "", context
    )


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
@pytest.mark.parametrize("family", FAMILIES)
def test_a_forked_child_opens_connections_of_its_own(
    tmp_path: Path, fake: FakeUpstreamThread, family: Any
) -> None:
    """A child forked while the parent holds an idle connection must not
    write on it (both would read each other's answers)."""
    _record(family, tmp_path / "parent.jsonl", fake.url, "parent first")
    assert fake.connections == 1
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit status
        code = 1
        try:
            _record(family, tmp_path / "child.jsonl", fake.url, "child")
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert fake.connections == 2  # the child's own
    _record(family, tmp_path / "parent.jsonl", fake.url, "parent again")
    assert fake.connections == 2  # the parent's, reused
    assert [r.body for r in fake.requests] == [
        body("parent first"),
        body("child"),
        body("parent again"),
    ]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_async_transports_keep_pools_of_their_own(
    tmp_path: Path, fake: FakeUpstreamThread, backend: str
) -> None:
    async def go() -> list[Any]:
        pools: list[Any] = []
        for n in range(2):
            transport = AsyncTransport(tmp_path / f"{n}.jsonl", mode="record")
            async with httpx.AsyncClient(transport=transport) as client:
                r = await client.post(fake.url + CHAT, content=body(f"async {n}"))
                assert r.status_code == 200
            pools += transport._upstreams.values()
        return pools

    pools = anyio.run(go, backend=backend)
    assert len({id(p) for p in pools}) == 2
    assert fake.connections == 2
    assert all(p._pool.connections == [] for p in pools)  # closed with their transports


def test_the_process_pools_close_as_it_exits(tmp_path: Path, fake: FakeUpstreamThread) -> None:
    _record(httpx, tmp_path / "a.jsonl", fake.url, "before exit")
    pool = _transport.process_pool(httpx, "", _transport.ssl_context(httpx))
    assert len(_transport._POOLS) == 1
    assert len(pool._pool.connections) == 1
    _transport._POOLS.close_all()  # what atexit runs
    assert pool._pool.connections == []
    assert len(_transport._POOLS) == 0
    _record(httpx, tmp_path / "b.jsonl", fake.url, "a pool made again")
    assert fake.connections == 2


def test_a_process_exits_cleanly_with_its_pools_open(
    tmp_path: Path, fake: FakeUpstreamThread
) -> None:
    """A child interpreter that recorded through a transport it never
    closed exits cleanly: no warning, its line on disk."""
    import subprocess

    script = (
        "import httpx, sys\n"
        "from reel_bindings.httpcore import Transport\n"
        "client = httpx.Client(transport=Transport(sys.argv[1], mode='record'))\n"
        "r = client.post(sys.argv[2], content=sys.argv[3].encode())\n"
        "assert r.status_code == 200\n"
    )
    cassette, url = str(tmp_path / "x.jsonl"), fake.url + CHAT
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", script, cassette, url, body("exit").decode()],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert len(lines(tmp_path / "x.jsonl")) == 1


def _record_requests(cassette: Path, url: str, content: str, stream: bool = False) -> None:
    """One request recorded through a new session and Reel adapter, closed after."""
    with requests.Session() as session:
        session.mount("http://", Adapter(cassette, mode="auto"))
        r = session.post(url + CHAT, data=body(content, stream))
        assert r.status_code == 200
        assert r.content


def test_requests_adapters_made_one_after_another_share_one_connection(
    tmp_path: Path, fake: FakeUpstreamThread
) -> None:
    cassette = tmp_path / "c.jsonl"
    for n in range(4):
        _record_requests(cassette, fake.url, f"question {n}", stream=n % 2 == 1)
    assert fake.connections == 1  # a connection each before
    recorded = lines(cassette)
    assert [r["response"].get("stream") for r in recorded] == [None, "sse", None, "sse"]
    assert len(reel_requests._SHARED) == 1
    assert reel_requests.process_adapter() is reel_requests.process_adapter()


def test_a_requests_adapter_given_an_upstream_uses_it(
    tmp_path: Path, fake: FakeUpstreamThread
) -> None:
    given = requests.adapters.HTTPAdapter()
    with requests.Session() as session:
        session.mount("http://", Adapter(tmp_path / "c.jsonl", mode="record", upstream=given))
        assert session.post(fake.url + CHAT, data=body("mine")).status_code == 200
    assert len(reel_requests._SHARED) == 0  # the process's was never made
    _record_requests(tmp_path / "d.jsonl", fake.url, "shared")
    assert fake.connections == 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_makes_a_requests_adapter_of_its_own(
    tmp_path: Path, fake: FakeUpstreamThread
) -> None:
    _record_requests(tmp_path / "parent.jsonl", fake.url, "parent first")
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit status
        code = 1
        try:
            _record_requests(tmp_path / "child.jsonl", fake.url, "child")
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    _record_requests(tmp_path / "parent.jsonl", fake.url, "parent again")
    assert fake.connections == 2  # the child's own, then the parent's reused
    assert [r.body for r in fake.requests] == [
        body("parent first"),
        body("child"),
        body("parent again"),
    ]


def test_sdk_clients_made_per_call_share_one_connection_and_replay(
    tmp_path: Path, fake: FakeUpstreamThread
) -> None:
    """What the process's pools are for: an official SDK client made for
    each call (a helper function, a fixture per test), each with a Reel
    transport of its own, records over one connection, and replays with
    no upstream at all."""
    import anthropic
    import openai

    cassette = tmp_path / "sdk.jsonl"

    def ask_openai(question: str, mode: str) -> str:
        transport = Transport(cassette, mode=mode)
        with openai.OpenAI(
            base_url=fake.url + "/v1",
            api_key="sk-test",
            max_retries=0,
            http_client=httpx2.Client(transport=transport),
        ) as client:
            answer = client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": question}]
            )
        return answer.choices[0].message.content or ""

    def ask_anthropic(question: str, mode: str) -> str:
        transport = Transport(cassette, mode=mode)
        with anthropic.Anthropic(
            base_url=fake.url,
            api_key="sk-ant-test",
            max_retries=0,
            http_client=httpx2.Client(transport=transport),
        ) as client:
            message = client.messages.create(
                model="claude-3-5-haiku-latest",
                max_tokens=64,
                messages=[{"role": "user", "content": question}],
            )
        block = message.content[0]
        assert isinstance(block, anthropic.types.TextBlock)
        return block.text

    questions = [f"question {n}" for n in range(3)]
    recorded = [ask_openai(q, "auto") for q in questions]
    recorded += [ask_anthropic(q, "auto") for q in questions]
    assert fake.connections == 1  # six clients, six transports: one connection
    assert len(lines(cassette)) == 6
    assert all(recorded)
    fake.server.clear()
    replayed = [ask_openai(q, "replay") for q in questions]
    replayed += [ask_anthropic(q, "replay") for q in questions]
    assert replayed == recorded
    assert fake.requests == []  # replayed: nothing reached the upstream


def test_responses_left_open_do_not_starve_later_requests(
    tmp_path: Path, fake: FakeUpstreamThread
) -> None:
    """A response its user never closes holds its connection until it is
    collected.  Pools of their own never filled; the process's pool, with
    httpx's limit of 100 connections, had every request after a hundred
    such responses wait for a free one, then fail (``PoolTimeout``)."""
    held = []
    for n in range(105):
        client = httpx.Client(transport=Transport(tmp_path / "open.jsonl", mode="auto"))
        request = client.build_request("POST", fake.url + CHAT, content=body(f"open {n}", True))
        response = client.send(request, stream=True)
        assert next(response.iter_raw())  # read a little, never closed
        held.append((client, response))
    assert fake.connections == 105
    transport = Transport(tmp_path / "next.jsonl", mode="auto")
    with httpx.Client(transport=transport, timeout=httpx.Timeout(10, pool=2)) as client:
        assert client.post(fake.url + CHAT, content=body("next")).status_code == 200
    for client, response in held:
        response.close()
        client.close()
    _record(httpx, tmp_path / "after.jsonl", fake.url, "after")
    assert len(lines(tmp_path / "after.jsonl")) == 1


def test_requests_responses_left_open_do_not_starve_later_requests(
    tmp_path: Path, fake: FakeUpstreamThread
) -> None:
    """The same through the requests adapter: urllib3 keeps 10 connections
    a host and opens more rather than wait (its pools do not block)."""
    held = []
    for n in range(15):
        session = requests.Session()
        session.mount("http://", Adapter(tmp_path / "open.jsonl", mode="auto"))
        response = session.post(fake.url + CHAT, data=body(f"open {n}", True), stream=True)
        assert next(response.iter_content(16))  # read a little, never closed
        held.append((session, response))
    _record_requests(tmp_path / "next.jsonl", fake.url, "next")
    for session, response in held:
        response.close()
        session.close()
    assert len(lines(tmp_path / "next.jsonl")) == 1
