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
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reel_bindings._files import CassetteFile
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
    ended: list[tuple[Proxy, int]] = []
    try:
        for own, sent, between in schedule:
            proxy = _proxy(cassettes[own])
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
            assert proxy.runlog.counts[Verdict.HIT] == hits
            assert proxy.runlog.counts[Verdict.MISS] == misses
            assert [m.path for m in proxy.runlog.misses] == ["/v1/chat/completions"] * misses
            _ended(proxy)
            for _ in range(between):  # nobody's request: refused, noted nowhere
                with pytest.raises(httpx.TransportError):
                    kept.post("/v1/chat/completions", content=_body(own))
            assert proxy.runlog.total == hits + misses
            ended.append((proxy, hits + misses))
        for proxy, total in ended:  # a test's figures never move once it ended
            assert proxy.runlog.total == total
    finally:
        for response in unread:
            response.close()
        for client in clients:
            client.close()
