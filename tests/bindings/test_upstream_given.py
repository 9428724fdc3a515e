"""``upstream`` means one thing in every binding: a base URL every forward
goes to, its path kept, checked when the binding starts by the one
:func:`reel_core.check_upstream` (issue 31, part 5).

A URL with no scheme, another scheme, no host... is refused at start with
what to pass: the proxy's ``--upstream`` and ``REEL_UPSTREAM`` exit 2 (the
pytest plugin's marker and variable: tests/plugin/test_upstream.py), the
in-process bindings raise.  Before, the proxy started and answered every
forward 502, and a transport ignored the string (recording against the
request's own host: a real provider) and then crashed on close."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import anyio
import httpx
import httpx2
import pytest
import requests
from requests.adapters import HTTPAdapter

from reel_bindings.httpcore import AsyncTransport, Transport
from reel_bindings.proxy import parse_options
from reel_bindings.requests import Adapter
from reel_core import Cassette, ConfigError
from tests.fakes.upstream import FakeUpstreamThread

#: A provider's real URL: what the client asks for; the given upstream gets it.
REAL = "https://api.openai.com/v1/chat/completions?api-version=1"
BAD = [
    ("api.openai.com", "https://api.openai.com"),
    ("localhost:8080", "http://localhost:8080"),
    ("ftp://x", "https://x"),
    ("http://", "https://api.openai.com"),
    ("https://host:99999", "https://host"),
    ("https://host/v1?key=1", "https://host/v1"),
]


def body(content: str) -> bytes:
    return json.dumps(
        {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": content}]}
    ).encode()


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeUpstreamThread]:
    with FakeUpstreamThread() as server:
        yield server


@pytest.mark.parametrize(("url", "fixed"), BAD)
def test_the_proxy_flag_refuses_a_bad_upstream_at_start(
    url: str, fixed: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        parse_options(["--upstream", url], environ={})
    assert info.value.code == 2
    assert f"pass --upstream {fixed} " in capsys.readouterr().err


@pytest.mark.parametrize(("url", "fixed"), BAD)
def test_reel_upstream_is_refused_at_start_too(
    url: str, fixed: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        parse_options([], environ={"REEL_UPSTREAM": url})
    assert info.value.code == 2
    assert f"pass REEL_UPSTREAM={fixed} " in capsys.readouterr().err


def test_a_good_upstream_is_taken_as_given() -> None:
    assert parse_options(["--upstream", "http://127.0.0.1:9/v1"], environ={}).upstream == (
        "http://127.0.0.1:9/v1"
    )
    env = {"REEL_UPSTREAM": " https://gateway.example/openai "}
    assert parse_options([], environ=env).upstream == "https://gateway.example/openai"
    # the flag wins, and the variable is then not read (nor checked)
    env = {"REEL_UPSTREAM": "nonsense"}
    assert parse_options(["--upstream", "https://a.example"], environ=env).upstream == (
        "https://a.example"
    )


@pytest.mark.parametrize("make", [Transport, AsyncTransport, Adapter])
@pytest.mark.parametrize(("url", "fixed"), BAD)
def test_an_in_process_binding_refuses_a_bad_upstream(
    tmp_path: Path, make: type, url: str, fixed: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"pass upstream='{fixed}' ")):
        make(tmp_path / "c.jsonl", mode="record", upstream=url)


@pytest.mark.parametrize("make", [Transport, AsyncTransport, Adapter])
@pytest.mark.parametrize("thing", [b"https://x", Path("https://x"), 8080, httpx.URL("https://x")])
def test_an_in_process_binding_refuses_what_is_neither_url_nor_pool(
    tmp_path: Path, make: type, thing: object
) -> None:
    with pytest.raises(TypeError, match="upstream= takes a base URL such as"):
        make(tmp_path / "c.jsonl", mode="record", upstream=thing)


def _sent_to_fake(fake: FakeUpstreamThread, before: int, cassette: Path) -> None:
    """The one request went to the fake, under its Host, path and query
    kept, and its exchange is recorded."""
    assert len(fake.requests) == before + 1
    got = fake.requests[-1]
    assert got.target == "/v1/chat/completions?api-version=1"
    assert dict(got.headers)["host"] == fake.url.removeprefix("http://")
    recorded = Cassette.loads(cassette.read_bytes())
    [only] = recorded.interactions()
    assert only.request.path == "/v1/chat/completions"


@pytest.mark.parametrize("family", [httpx, httpx2])
def test_the_sync_transport_forwards_to_a_given_url(
    tmp_path: Path, fake: FakeUpstreamThread, family: ModuleType
) -> None:
    cassette, before = tmp_path / "c.jsonl", len(fake.requests)
    with family.Client(transport=Transport(cassette, mode="record", upstream=fake.url)) as client:
        assert client.post(REAL, content=body("sync")).status_code == 200
    _sent_to_fake(fake, before, cassette)


@pytest.mark.parametrize("family", [httpx, httpx2])
def test_the_async_transport_forwards_to_a_given_url(
    tmp_path: Path, fake: FakeUpstreamThread, family: ModuleType, anyio_backend: str
) -> None:
    cassette, before = tmp_path / "c.jsonl", len(fake.requests)

    async def main() -> None:
        transport = AsyncTransport(cassette, mode="record", upstream=fake.url)
        async with family.AsyncClient(transport=transport) as client:
            assert (await client.post(REAL, content=body("async"))).status_code == 200

    anyio.run(main, backend=anyio_backend)
    _sent_to_fake(fake, before, cassette)


def test_the_requests_adapter_forwards_to_a_given_url(
    tmp_path: Path, fake: FakeUpstreamThread
) -> None:
    cassette, before = tmp_path / "c.jsonl", len(fake.requests)
    with requests.Session() as session:
        session.mount("https://", Adapter(cassette, mode="record", upstream=fake.url))
        assert session.post(REAL, data=body("requests")).status_code == 200
    _sent_to_fake(fake, before, cassette)


def test_a_pool_given_is_still_a_pool(tmp_path: Path) -> None:
    # the other meaning upstream= keeps: the library's own transport or adapter
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(200, json={"ok": True})

    transport = Transport(tmp_path / "c.jsonl", mode="live", upstream=httpx.MockTransport(answer))
    with httpx.Client(transport=transport) as client:
        assert client.post(REAL, content=body("pool")).json() == {"ok": True}
    assert seen == [REAL]
    adapter = HTTPAdapter()
    Adapter(tmp_path / "d.jsonl", mode="live", upstream=adapter).close()
