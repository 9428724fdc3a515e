"""Forwarded requests honour the proxy environment (HTTPS_PROXY, HTTP_PROXY,
ALL_PROXY, NO_PROXY, any case) and the CA settings (--ca, SSL_CERT_FILE);
a TLS failure says which of these to set.

The upstream is named ``upstream.reel.test``, which no resolver knows: only
the test's forward proxy can reach it, so a 200 proves the proxy was used
and a ``dns`` failure that it was bypassed.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio.from_thread
import httpx
import httpx2
import pytest
import requests

from reel_bindings._proxy_env import environment_proxies, proxy_for
from reel_bindings.httpcore import AsyncTransport, Transport
from reel_bindings.requests import Adapter
from reel_core import Mode
from tests.fakes.upstream import FakeUpstreamThread, serve_fake

from .forward_proxy import LocalCA, serve_forward_proxy, serve_tls_fake
from .proxy_support import chat_call, fetch, interactions, options, proxied

NAME = "upstream.reel.test"
VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "REQUEST_METHOD")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


# -- which proxy, if any (no I/O) ----------------------------------------------


@pytest.mark.parametrize(
    ("environ", "url", "proxy"),
    [
        ({}, "https://api.openai.com", None),
        ({"HTTPS_PROXY": "http://p:3128"}, "https://api.openai.com", "http://p:3128"),
        ({"HTTPS_PROXY": "http://p:3128"}, "http://api.openai.com", None),
        ({"HTTP_PROXY": "http://p:3128"}, "http://api.openai.com", "http://p:3128"),
        ({"https_proxy": "p:3128"}, "https://api.openai.com", "http://p:3128"),
        ({"HTTPS_PROXY": "http://up", "https_proxy": "http://low"}, "https://a.com", "http://low"),
        ({"ALL_PROXY": "http://all"}, "https://a.com", "http://all"),
        ({"ALL_PROXY": "http://all", "HTTPS_PROXY": "http://s"}, "https://a.com", "http://s"),
        ({"HTTPS_PROXY": "http://p", "NO_PROXY": "*"}, "https://a.com", None),
        ({"HTTPS_PROXY": "http://p", "NO_PROXY": "a.com"}, "https://a.com", None),
        ({"HTTPS_PROXY": "http://p", "NO_PROXY": "a.com"}, "https://api.a.com", None),
        ({"HTTPS_PROXY": "http://p", "NO_PROXY": ".a.com"}, "https://api.a.com", None),
        ({"HTTPS_PROXY": "http://p", "NO_PROXY": "b.com, .a.com"}, "https://x.a.com", None),
        ({"HTTPS_PROXY": "http://p", "NO_PROXY": "a.com"}, "https://aa.com", "http://p"),
        ({"HTTPS_PROXY": "http://p", "NO_PROXY": "a.com:443"}, "https://a.com", None),
        ({"HTTPS_PROXY": "http://p", "NO_PROXY": "a.com:8443"}, "https://a.com", "http://p"),
        ({"HTTPS_PROXY": "http://p", "no_proxy": "A.COM"}, "https://a.com", None),
        ({"HTTPS_PROXY": "http://p", "NO_PROXY": "[::2]"}, "https://[::2]", None),
        ({"HTTPS_PROXY": "http://p"}, "https://localhost:8443", None),  # loopback: direct
        ({"HTTPS_PROXY": "http://p"}, "https://127.0.0.1", None),
        ({"HTTP_PROXY": "http://p"}, "http://[::1]:80", None),
        ({"HTTP_PROXY": "http://p", "REQUEST_METHOD": "GET"}, "http://a.com", None),  # CGI
        ({"HTTP_PROXY": "http://p", "http_proxy": ""}, "http://a.com", None),
    ],
)
def test_which_proxy_the_environment_names(
    environ: dict[str, str], url: str, proxy: str | None
) -> None:
    parsed = httpx.URL(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    assert proxy_for(parsed.scheme, parsed.host, port, environment_proxies(environ)) == proxy


# -- the proxy's upstream client -------------------------------------------------


@pytest.mark.anyio
async def test_http_upstream_goes_through_http_proxy_in_absolute_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cassette = tmp_path / "c.jsonl"
    async with serve_fake() as fake:
        route = {f"{NAME}:{fake.port}": ("127.0.0.1", fake.port)}
        async with serve_forward_proxy(route) as forward:
            monkeypatch.setenv("http_proxy", forward.url.replace("://", "://user:p%40ss@"))
            monkeypatch.setenv("NO_PROXY", "example.com")  # names another host
            upstream = f"http://{NAME}:{fake.port}"
            async with proxied(options(Mode.RECORD, cassette, upstream=upstream)) as client:
                got = await fetch(client, chat_call("through the proxy"))
    assert got.status == 200
    assert [(s.method, s.target) for s in forward.seen] == [
        ("POST", f"{upstream}/v1/chat/completions")
    ]
    assert forward.seen[0].proxy_authorization == "Basic dXNlcjpwQHNz"  # user:p@ss
    assert fake.requests[0].target == f"{upstream}/v1/chat/completions"
    assert len(interactions(cassette)) == 1


@pytest.mark.anyio
@pytest.mark.parametrize("no_proxy", [NAME, ".reel.test", "reel.test", "*", f"{NAME}:PORT"])
async def test_no_proxy_bypasses_the_proxy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_proxy: str
) -> None:
    async with serve_fake() as fake:
        route = {f"{NAME}:{fake.port}": ("127.0.0.1", fake.port)}
        async with serve_forward_proxy(route) as forward:
            monkeypatch.setenv("HTTP_PROXY", forward.url)
            monkeypatch.setenv("no_proxy", no_proxy.replace("PORT", str(fake.port)))
            upstream = f"http://{NAME}:{fake.port}"
            async with proxied(options(Mode.LIVE, tmp_path / "c.jsonl", upstream=upstream)) as c:
                got = await fetch(c, chat_call("direct"))
    assert forward.seen == []
    assert got.status == 502  # straight to a name no resolver knows
    assert got.json()["error"]["failure"] == "dns"


@pytest.mark.anyio
@pytest.mark.parametrize("trust", ["--ca", "SSL_CERT_FILE"])
async def test_https_upstream_goes_through_a_connect_tunnel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trust: str
) -> None:
    ca = LocalCA.make(tmp_path)
    cassette = tmp_path / "c.jsonl"
    async with (
        serve_tls_fake(ca.server_context(NAME)) as fake,
        serve_forward_proxy({f"{NAME}:443": ("127.0.0.1", fake.port)}) as forward,
    ):
        monkeypatch.setenv("HTTPS_PROXY", forward.url)
        if trust == "SSL_CERT_FILE":
            monkeypatch.setenv("SSL_CERT_FILE", str(ca.pem))
        given = ca.pem if trust == "--ca" else None
        opts = options(Mode.RECORD, cassette, upstream=f"https://{NAME}", ca=given)
        async with proxied(opts) as client:
            first = await fetch(client, chat_call("tunnelled"))
            second = await fetch(client, chat_call("again, same tunnel"))
    assert (first.status, second.status) == (200, 200)
    assert [(s.method, s.target) for s in forward.seen] == [("CONNECT", f"{NAME}:443")]
    assert [r.path for r in fake.requests] == ["/v1/chat/completions"] * 2
    assert len(interactions(cassette)) == 2


@pytest.mark.anyio
async def test_a_tls_failure_says_what_to_set(tmp_path: Path) -> None:
    ca = LocalCA.make(tmp_path)  # a CA nobody trusts
    async with serve_tls_fake(ca.server_context("localhost")) as fake:
        upstream = f"https://localhost:{fake.port}"
        async with proxied(options(Mode.LIVE, tmp_path / "c.jsonl", upstream=upstream)) as c:
            got = await fetch(c, chat_call("untrusted"))
    assert got.status == 502
    error = got.json()["error"]
    assert error["failure"] == "tls"
    assert "--ca FILE" in error["message"]
    assert "SSL_CERT_FILE" in error["message"]
    assert fake.requests == []


@pytest.mark.anyio
async def test_a_refused_tunnel_names_the_proxy_and_its_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serve_forward_proxy({}) as forward:  # knows no route: answers 502
        monkeypatch.setenv("ALL_PROXY", forward.url)
        opts = options(Mode.LIVE, tmp_path / "c.jsonl", upstream=f"https://{NAME}")
        async with proxied(opts) as client:
            got = await fetch(client, chat_call("nowhere"))
    assert got.status == 502
    message = got.json()["error"]["message"]
    assert f"the proxy refused to tunnel to {NAME}:443: 502 Bad Gateway" in message
    assert f"through the proxy {forward.url}, from ALL_PROXY" in message


# -- the in-process transports --------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("family", [httpx, httpx2], ids=["httpx", "httpx2"])
async def test_async_transport_goes_through_the_environment_proxy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, family: object
) -> None:
    ca = LocalCA.make(tmp_path)
    body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
    async with (
        serve_fake() as plain,
        serve_tls_fake(ca.server_context(NAME)) as tls,
        serve_forward_proxy(
            {f"{NAME}:80": ("127.0.0.1", plain.port), f"{NAME}:443": ("127.0.0.1", tls.port)}
        ) as forward,
    ):
        monkeypatch.setenv("HTTP_PROXY", forward.url)
        monkeypatch.setenv("HTTPS_PROXY", forward.url)
        monkeypatch.setenv("SSL_CERT_FILE", str(ca.pem))
        transport = AsyncTransport(tmp_path / "c.jsonl", mode=Mode.RECORD)
        async with family.AsyncClient(transport=transport) as client:  # type: ignore[attr-defined]
            for scheme in ("http", "https"):
                reply = await client.post(f"{scheme}://{NAME}/v1/chat/completions", content=body)
                assert reply.status_code == 200
        monkeypatch.setenv("NO_PROXY", NAME)
        direct = AsyncTransport(tmp_path / "d.jsonl", mode=Mode.LIVE)
        async with family.AsyncClient(transport=direct) as client:  # type: ignore[attr-defined]
            with pytest.raises(family.ConnectError):  # type: ignore[attr-defined]
                await client.post(f"http://{NAME}/v1/chat/completions", content=body)
    assert [(s.method, s.target) for s in forward.seen] == [
        ("POST", f"http://{NAME}/v1/chat/completions"),
        ("CONNECT", f"{NAME}:443"),
    ]
    assert len(plain.requests) == len(tls.requests) == 1


@pytest.mark.parametrize("binding", ["httpx", "httpx2", "requests"])
def test_sync_bindings_go_through_the_environment_proxy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, binding: str
) -> None:
    body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
    url = f"http://{NAME}/v1/chat/completions"
    with (
        FakeUpstreamThread() as fake,
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(
            serve_forward_proxy({f"{NAME}:80": ("127.0.0.1", fake.server.port)})
        ) as forward,
    ):
        monkeypatch.setenv("HTTP_PROXY", forward.url)
        cassette = tmp_path / "c.jsonl"
        if binding == "requests":
            session = requests.Session()
            session.mount("http://", Adapter(cassette, mode=Mode.RECORD))
            with session:
                status = session.post(url, data=body).status_code
        else:
            family = httpx if binding == "httpx" else httpx2
            transport = Transport(cassette, mode=Mode.RECORD)
            with family.Client(transport=transport) as client:
                status = client.post(url, content=body).status_code
    assert status == 200
    assert [(s.method, s.target) for s in forward.seen] == [("POST", url)]
    assert len(interactions(cassette)) == 1
