"""A replay answers what the client saw, headers included, through every
binding and the client libraries' own use of them (issue 32, part E).

Recorded, then replayed, by each binding with the HTTP client's own logic
on top: httpx's and requests' redirect following through a 302 -> 301 ->
200 chain, ``link`` pagination followed page to page with the library's
link parsing, and a conditional request (``etag``, then ``if-none-match``
and the 304).  The replay must end where the recording did, with every
end-to-end header as the client saw it (``set-cookie`` aside, never
stored), and never reach the upstream.

Bindings: the proxy (on asyncio and on trio, with an httpx and a requests
client), the sync transport on httpx and on httpx2, the async transport on
httpx and httpx2 (on asyncio and on trio), and the requests adapter.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import anyio
import anyio.from_thread
import httpx
import httpx2
import pytest
import requests

from reel_bindings.httpcore import AsyncTransport, Transport
from reel_bindings.requests import Adapter
from reel_core import Mode
from tests.fakes.upstream import FakeUpstreamThread
from tests.fakes.web_wire import DOC_ETAG, PAGES

from .openers import proxy_on

#: Headers a replay frames itself, or never hands out again.
_NOT_COMPARED = frozenset({"content-length", "transfer-encoding", "connection", "set-cookie"})


@dataclass(frozen=True)
class Seen:
    """A response as the client library shows it, with the hops it followed."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    #: ``(status, headers)`` of each redirect followed on the way.
    history: tuple[tuple[int, tuple[tuple[str, str], ...]], ...]
    #: The ``next`` link, as the library parsed it (``None``: none).
    next: str | None


Get = Callable[[str, dict[str, str]], Seen]
Client = Callable[[Path, Mode, str], AbstractContextManager[Get]]


def _pairs(pairs: Any) -> tuple[tuple[str, str], ...]:
    out = []
    for name, value in pairs:
        name = name.decode("latin-1") if isinstance(name, bytes) else name
        value = value.decode("latin-1") if isinstance(value, bytes) else value
        out.append((name.lower(), value))
    return tuple(out)


def _from_httpx(r: Any) -> Seen:
    history = tuple((h.status_code, _pairs(h.headers.raw)) for h in r.history)
    nxt = r.links.get("next", {}).get("url")
    return Seen(r.status_code, _pairs(r.headers.raw), r.content, history, nxt)


def _from_requests(r: requests.Response) -> Seen:
    history = tuple((h.status_code, _pairs(h.headers.items())) for h in r.history)
    nxt = r.links.get("next", {}).get("url")
    return Seen(r.status_code, _pairs(r.headers.items()), r.content, history, nxt)


@contextmanager
def sync_transport(family: Any, cassette: Path, mode: Mode, url: str) -> Iterator[Get]:
    transport = Transport(cassette, mode=mode, timing="fast")
    with family.Client(transport=transport, base_url=url, follow_redirects=True) as client:
        yield lambda target, headers: _from_httpx(client.get(target, headers=headers))


@contextmanager
def async_transport(
    family: Any, backend: str, cassette: Path, mode: Mode, url: str
) -> Iterator[Get]:
    transport = AsyncTransport(cassette, mode=mode, timing="fast")

    def get(target: str, headers: dict[str, str]) -> Seen:
        async def go() -> Seen:
            async with family.AsyncClient(
                transport=transport, base_url=url, follow_redirects=True
            ) as client:
                r = await client.get(target, headers=headers)
                await r.aread()
                return _from_httpx(r)

        seen: Seen = anyio.run(go, backend=backend)
        return seen

    yield get


@contextmanager
def requests_adapter(cassette: Path, mode: Mode, url: str) -> Iterator[Get]:
    with requests.Session() as session:
        session.mount("http://", Adapter(cassette, mode=mode, timing="fast"))
        yield lambda target, headers: _from_requests(
            session.get(urljoin(url, target), headers=headers)
        )


@contextmanager
def proxy(backend: str, library: str, cassette: Path, mode: Mode, url: str) -> Iterator[Get]:
    with ExitStack() as stack:
        proxy_url = proxy_on(stack, backend, cassette, mode, url)
        if library == "httpx":
            client = stack.enter_context(httpx.Client(base_url=proxy_url, follow_redirects=True))
            yield lambda target, headers: _from_httpx(client.get(target, headers=headers))
        else:
            session = stack.enter_context(requests.Session())
            yield lambda target, headers: _from_requests(
                session.get(urljoin(proxy_url, target), headers=headers)
            )


def _bind(factory: Callable[..., AbstractContextManager[Get]], *args: Any) -> Client:
    return lambda cassette, mode, url: factory(*args, cassette, mode, url)


CLIENTS: dict[str, Client] = {
    "proxy-asyncio-httpx": _bind(proxy, "asyncio", "httpx"),
    "proxy-trio-httpx": _bind(proxy, "trio", "httpx"),
    "proxy-asyncio-requests": _bind(proxy, "asyncio", "requests"),
    "proxy-trio-requests": _bind(proxy, "trio", "requests"),
    "httpx": _bind(sync_transport, httpx),
    "httpx2": _bind(sync_transport, httpx2),
    "httpx-async-asyncio": _bind(async_transport, httpx, "asyncio"),
    "httpx-async-trio": _bind(async_transport, httpx, "trio"),
    "httpx2-async-asyncio": _bind(async_transport, httpx2, "asyncio"),
    "httpx2-async-trio": _bind(async_transport, httpx2, "trio"),
    "requests": _bind(requests_adapter),
}


def journey(get: Get) -> dict[str, list[Seen]]:
    """What an agent's tool does with a plain HTTP API: follow a redirect
    chain, page through a list by its ``link`` headers, fetch a document
    and ask again whether it changed."""
    redirect = [get("/web/redirect/302", {})]
    pages = [get("/web/items?page=1", {})]
    while pages[-1].next is not None and len(pages) <= PAGES:
        pages.append(get(pages[-1].next, {}))
    doc = get("/web/doc", {})
    etag = dict(doc.headers).get("etag", "")
    again = get("/web/doc", {"if-none-match": etag})
    return {"redirect": redirect, "pages": pages, "conditional": [doc, again]}


def _compared(seen: Seen) -> Seen:
    """``seen`` without the headers a replay frames itself or never stores."""

    def kept(headers: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        return tuple((k, v) for k, v in headers if k not in _NOT_COMPARED)

    history = tuple((status, kept(headers)) for status, headers in seen.history)
    return Seen(seen.status, kept(seen.headers), seen.body, history, seen.next)


@pytest.mark.parametrize("binding", CLIENTS)
def test_a_replay_follows_what_the_recording_followed(binding: str, tmp_path: Path) -> None:
    cassette = tmp_path / "web.jsonl"
    client = CLIENTS[binding]
    with FakeUpstreamThread() as fake:
        with client(cassette, Mode.RECORD, fake.url) as get:
            recorded = journey(get)
        sent = len(fake.requests)
        with client(cassette, Mode.REPLAY, fake.url) as get:
            replayed = journey(get)
        assert len(fake.requests) == sent, "a replay reached the upstream"

    # what the recording saw: the chain followed, three pages, a 304
    (final,) = recorded["redirect"]
    assert (final.status, [s for s, _ in final.history]) == (200, [302, 301])
    assert [json.loads(p.body)["page"] for p in recorded["pages"]] == [1, 2, 3]
    assert [d.status for d in recorded["conditional"]] == [200, 304]
    assert dict(final.headers).get("set-cookie") is not None

    # the replay saw the same, headers and all
    for name, seen in recorded.items():
        assert [_compared(s) for s in replayed[name]] == [_compared(s) for s in seen], name
    fresh = dict(replayed["conditional"][1].headers)
    assert (fresh["etag"], fresh["cache-control"]) == (
        DOC_ETAG,
        "private, max-age=60, must-revalidate",
    )
    assert "set-cookie" not in dict(replayed["redirect"][0].headers)
    assert b"set-cookie" not in cassette.read_bytes().lower()
