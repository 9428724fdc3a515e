"""The plugin's session proxy: one listener, each test's :class:`Proxy` in turn.

The class of defect: an exchange of one test served, counted or failed by
another test's proxy, once the listener outlives its tests (a client's
kept-alive connection, a response left unread, a request sent between two
tests).  The invariant, over generated schedules of tests and requests: a
request sent while test T is served is answered from T's cassette and
noted in T's run log only; a request sent while no test is served is
refused (its connection closed) and noted nowhere; a test's end leaves no
connection of its own open.  The whole-run version (pytest, ``-n 2``) is
tests/plugin/test_session_proxy.py.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reel_bindings._files import CassetteFile
from reel_bindings._runlog import RunLog
from reel_bindings._session_proxy import SessionProxy
from reel_bindings._settings import Settings
from reel_bindings._upstream import AsyncUpstream
from reel_bindings.proxy import Proxy
from reel_core import Cassette, Mode, Verdict
from tests.core._helpers import interaction

#: How many tests a schedule may hold; each has its own cassette.
TESTS = 4


def _body(test: int) -> bytes:
    return json.dumps(
        {"model": "m", "messages": [{"role": "user", "content": f"t{test}"}]}
    ).encode()


@pytest.fixture(scope="module")
def cassettes(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("session-proxy")
    paths = []
    for test in range(TESTS):
        line = interaction(
            body=_body(test), response_body=f'{{"answer":"t{test}"}}'.encode(), id=f"t{test}"
        ).to_line()
        path = root / f"t{test}.jsonl"
        path.write_bytes(Cassette().meta.to_line() + line)
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def session() -> Iterator[SessionProxy]:
    proxy = SessionProxy()
    try:
        yield proxy
    finally:
        proxy.close()


def _proxy(path: Path) -> Proxy:
    config = Settings.from_env({}, mode=Mode.REPLAY).config(routing=True)
    file = CassetteFile(str(path), mode=Mode.REPLAY)
    return Proxy(config, cassette=file, upstream=AsyncUpstream(), report=True)


def _ended(proxy: Proxy) -> None:
    """Every connection of ``proxy``'s test ends (a quiet test's end shuts
    their sockets down and goes on: the loop ends them as it gets to them)."""
    deadline = time.monotonic() + 5
    while proxy.active and time.monotonic() < deadline:
        time.sleep(0.001)
    assert proxy.active == 0


#: A request: whose question it asks, on the client kept across tests or a
#: fresh one, and whether its response is left unread.
requests = st.tuples(st.integers(0, TESTS - 1), st.booleans(), st.booleans())
#: A test: which cassette it serves, its requests, and the requests sent
#: after it ends, before the next one starts (on the kept client).
schedules = st.lists(
    st.tuples(st.integers(0, TESTS - 1), st.lists(requests, max_size=4), st.integers(0, 1)),
    min_size=1,
    max_size=5,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(schedule=schedules)
def test_every_exchange_is_its_tests(
    session: SessionProxy, cassettes: list[Path], schedule: list[tuple[int, list[Any], int]]
) -> None:
    url = session.start()
    kept = httpx.Client(base_url=url, timeout=10)
    clients = [kept]
    unread: list[httpx.Response] = []
    ended: list[tuple[Proxy, RunLog, int]] = []
    try:
        for own, sent, between in schedule:
            proxy = _proxy(cassettes[own])
            log = proxy.runlog  # sealed at the test's end: what it reports
            hits = misses = 0
            with session.serving(proxy, grace=0.0):
                for asked, on_kept, leave in sent:
                    client = kept if on_kept else httpx.Client(base_url=url, timeout=10)
                    clients.append(client)
                    request = client.build_request(
                        "POST", "/v1/chat/completions", content=_body(asked)
                    )
                    response = client.send(request, stream=True)
                    if asked == own:
                        hits += 1
                        assert response.status_code == 200
                        assert "x-reel-miss" not in response.headers
                    else:
                        misses += 1
                        assert response.status_code == 404
                        assert "x-reel-miss" in response.headers
                    if leave:
                        unread.append(response)
                        continue
                    body = response.read()
                    response.close()
                    if asked == own:
                        assert body == f'{{"answer":"t{own}"}}'.encode()
            # the test's figures are its own, and its connections are gone
            assert log.counts[Verdict.HIT] == hits
            assert log.counts[Verdict.MISS] == misses
            assert [m.path for m in log.misses] == ["/v1/chat/completions"] * misses
            _ended(proxy)
            for _ in range(between):  # nobody's request: refused, noted nowhere
                with pytest.raises(httpx.TransportError):
                    kept.post("/v1/chat/completions", content=_body(own))
            assert log.total == hits + misses
            assert proxy.runlog.total == 0  # nobody's request was noted after its end
            ended.append((proxy, log, hits + misses))
        for proxy, log, total in ended:  # a test's figures never move once it ended
            _ended(proxy)
            assert log.total == total
    finally:
        for response in unread:
            response.close()
        for client in clients:
            client.close()


# -- how a test's end stops it ---------------------------------------------------

#: What every cassette of the race below answers, each with its own name.
RACE = b'{"model":"m","messages":[{"role":"user","content":"race"}]}'


def _counted(session: SessionProxy, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The hand-offs to the loop from now on (``portal.call``)."""
    assert session._portal is not None
    calls: list[object] = []
    real = session._portal.call

    def call(func: Any, *args: Any) -> Any:
        calls.append(func)
        return real(func, *args)

    monkeypatch.setattr(session._portal, "call", call)
    return calls


def _settled(proxy: Proxy) -> None:
    """The loop has ended every exchange of ``proxy`` (the client may read
    an answer before the loop notes it and waits for the next request)."""
    deadline = time.monotonic() + 5
    while not proxy.between_requests() and time.monotonic() < deadline:
        time.sleep(0.001)


def test_a_quiet_test_ends_without_waiting_for_the_loop(
    session: SessionProxy, cassettes: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replay whose client read its answers (or left one unread: the
    proxy wrote it whole) ends on its own thread; the kept client's
    connection is closed before the next test, which it reaches at once."""
    url = session.start()
    calls = _counted(session, monkeypatch)
    with httpx.Client(base_url=url, timeout=10) as kept:
        for own in [0, 1, 2, 3, 0]:
            proxy = _proxy(cassettes[own])
            log = proxy.runlog
            with session.serving(proxy, grace=0.0):
                response = kept.post("/v1/chat/completions", content=_body(own))
                assert response.json() == {"answer": f"t{own}"}
                left = kept.send(
                    kept.build_request("POST", "/v1/chat/completions", content=_body(own)),
                    stream=True,
                )  # left unread: its bytes are the client's already
                _settled(proxy)
            assert left.read() == f'{{"answer":"t{own}"}}'.encode()
            left.close()
            assert log.counts[Verdict.HIT] == 2
            _ended(proxy)
    assert calls == []


def test_a_test_ending_mid_answer_is_stopped_on_the_loop(
    session: SessionProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream still being played when its test ends is not quiet: the
    loop cuts it (the replay's grace is none), and the client sees the cut."""
    line = interaction(
        body=_body(0),
        headers=(("content-type", "text/event-stream"),),
        stream="sse",
        frames=[(0.0, b"data: one\n\n"), (5000.0, b"data: two\n\n")],
        end_ms=5000.0,
        id="slow",
    ).to_line()
    path = tmp_path / "slow.jsonl"
    path.write_bytes(Cassette().meta.to_line() + line)
    url = session.start()
    calls = _counted(session, monkeypatch)
    with httpx.Client(base_url=url, timeout=10) as client:
        proxy = _proxy(path)
        started = time.monotonic()
        with session.serving(proxy, grace=0.0):
            request = client.build_request("POST", "/v1/chat/completions", content=_body(0))
            response = client.send(request, stream=True)
            chunks = response.iter_raw()
            assert next(chunks) == b"data: one\n\n"
        with pytest.raises(httpx.TransportError):  # cut: the second frame never comes
            b"".join(chunks)
        response.close()
    assert len(calls) == 1
    assert proxy.active == 0
    assert time.monotonic() - started < 4  # cut at the test's end, not played on


def test_requests_racing_a_tests_end_are_never_the_next_tests(
    session: SessionProxy, tmp_path: Path
) -> None:
    """Tests back to back while another thread keeps sending on its own
    kept client: every answer comes from a test that was being served at
    some time between the request's send and its answer (never from the
    one before it nor the one after it), a request between two tests is
    refused or cut, never served by nobody's proxy; each test's own
    requests, on a client kept across tests, reach that test at once; and
    a test's figures do not move once it ended."""
    paths = []
    for test in range(3):
        line = interaction(body=RACE, response_body=f'{{"answer":"r{test}"}}'.encode()).to_line()
        path = tmp_path / f"r{test}.jsonl"
        path.write_bytes(Cassette().meta.to_line() + line)
        paths.append(path)
    url = session.start()
    stop = threading.Event()
    answered: list[tuple[float, float, str]] = []

    def hammer() -> None:
        with httpx.Client(base_url=url, timeout=10) as client:
            while not stop.is_set():
                sent = time.monotonic()
                try:
                    response = client.post("/v1/chat/completions", content=RACE)
                except httpx.TransportError:
                    continue  # refused between tests, or cut at a test's end
                answered.append((sent, time.monotonic(), response.json()["answer"]))

    windows: list[tuple[float, float, str, Proxy, RunLog, int]] = []
    thread = threading.Thread(target=hammer)
    thread.start()
    try:
        with httpx.Client(base_url=url, timeout=10) as kept:
            for number in range(60):
                own = number % 3
                proxy = _proxy(paths[own])
                log = proxy.runlog
                entered = time.monotonic()
                with session.serving(proxy, grace=0.0):
                    response = kept.post("/v1/chat/completions", content=RACE)
                    assert response.json() == {"answer": f"r{own}"}
                    time.sleep(0.002 * (number % 4))
                windows.append((entered, time.monotonic(), f"r{own}", proxy, log, log.total))
    finally:
        stop.set()
        thread.join()
    assert answered  # the race was run
    for sent, got, answer in answered:
        assert any(
            name == answer and entered <= got and sent <= left
            for entered, left, name, _, _, _ in windows
        ), (sent, got, answer)
    for _, _, _, proxy, log, total in windows:
        _ended(proxy)
        assert log.total == total


def test_the_sdk_client_is_copied_once_per_options(session: SessionProxy) -> None:
    """``reel.proxy_openai()``'s copies: one per set of options, the
    same object for the tests asking the same, a fresh one for options
    that cannot be a key."""
    first = session.openai(api_key="sk-a", max_retries=0)
    assert session.openai(api_key="sk-a", max_retries=0) is first
    other = session.openai(api_key="sk-b", max_retries=0)
    assert other is not first
    assert (first.api_key, other.api_key, first.max_retries) == ("sk-a", "sk-b", 0)
    timeout = httpx.Timeout(3.0)  # no hash
    timed = session.openai(api_key="sk-a", timeout=timeout)
    assert timed is not session.openai(api_key="sk-a", timeout=timeout)
    assert timed.timeout == timeout
