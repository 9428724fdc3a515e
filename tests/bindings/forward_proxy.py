"""Test doubles for proxy-environment tests: a tiny forward proxy, and a
TLS upstream whose certificate a test CA (trustme) signed.

The forward proxy takes absolute-form requests (``GET http://host/path``)
and ``CONNECT host:port`` tunnels, records each, and relays the connection
to the address ``routes`` gives for ``host:port`` -- so an upstream named
``upstream.reel.test`` (which no resolver knows) is reachable only through
it.  Once a connection is relayed, its bytes are piped both ways untouched.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import anyio.abc
import anyio.streams.tls
import trustme

from tests.fakes.upstream import DEFAULT_FRAME_DELAY, FakeUpstream

__all__ = ["ForwardProxy", "LocalCA", "Seen", "serve_forward_proxy", "serve_tls_fake"]

_GONE = (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError)


@dataclass(frozen=True)
class Seen:
    """The first request of a connection the forward proxy relayed."""

    method: str
    target: str
    proxy_authorization: str | None


@dataclass
class ForwardProxy:
    """Where it listens, where it relays ``host:port`` to, what it saw."""

    routes: dict[str, tuple[str, int]]
    port: int = 0
    seen: list[Seen] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def handle(self, client: anyio.abc.SocketStream) -> None:
        async with client:
            head = b""
            while b"\r\n\r\n" not in head:
                try:
                    head += await client.receive()
                except _GONE:
                    return
            lines = head.partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = {
                name.strip().lower(): value.strip()
                for name, _, value in (line.partition(":") for line in lines[1:])
            }
            self.seen.append(Seen(method, target, headers.get("proxy-authorization")))
            if method == "CONNECT":
                authority = target
            else:
                parts = urlsplit(target)
                authority = f"{parts.hostname}:{parts.port or 80}"
            backend = self.routes.get(authority)
            if backend is None:
                await client.send(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")
                return
            async with await anyio.connect_tcp(*backend) as upstream:
                if method == "CONNECT":
                    await client.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    rest = head.partition(b"\r\n\r\n")[2]
                    if rest:
                        await upstream.send(rest)
                else:
                    await upstream.send(head)  # as received: the absolute form
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_pipe, client, upstream, tg.cancel_scope)
                    tg.start_soon(_pipe, upstream, client, tg.cancel_scope)


async def _pipe(
    source: anyio.abc.ByteStream, sink: anyio.abc.ByteStream, done: anyio.CancelScope
) -> None:
    with suppress(*_GONE):
        while True:
            await sink.send(await source.receive())
    done.cancel()


@asynccontextmanager
async def serve_forward_proxy(routes: dict[str, tuple[str, int]]) -> AsyncIterator[ForwardProxy]:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    proxy = ForwardProxy(routes, listener.extra(anyio.abc.SocketAttribute.local_port))
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, proxy.handle, tg)
        try:
            yield proxy
        finally:
            tg.cancel_scope.cancel()


@dataclass(frozen=True)
class LocalCA:
    """A CA of the test's own: its PEM file, and a server context for names."""

    ca: trustme.CA
    pem: Path

    @classmethod
    def make(cls, directory: Path) -> LocalCA:
        ca = trustme.CA()
        pem = directory / "test-ca.pem"
        ca.cert_pem.write_to_path(str(pem))
        return cls(ca, pem)

    def server_context(self, *names: str) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.ca.issue_cert(*names).configure_cert(context)
        return context


@asynccontextmanager
async def serve_tls_fake(context: ssl.SSLContext) -> AsyncIterator[FakeUpstream]:
    """The fake upstream behind TLS on 127.0.0.1 (any free port)."""
    tcp = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = tcp.extra(anyio.abc.SocketAttribute.local_port)
    listener = anyio.streams.tls.TLSListener(tcp, context, standard_compatible=False)
    fake = FakeUpstream("127.0.0.1", port, DEFAULT_FRAME_DELAY)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, fake.handle, tg)  # type: ignore[arg-type]
        try:
            yield fake
        finally:
            tg.cancel_scope.cancel()
