"""Every binding as one function: a cassette, a mode and an upstream URL in,
``send(call) -> reply`` out (not a test module).

Bindings: the proxy (on asyncio and on trio), the sync transport on httpx
and on httpx2, the async transport on httpx and httpx2 (each on asyncio and
on trio), and the requests adapter.  Replay timing is ``fast``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import httpx
import httpx2
import requests

from reel_bindings.httpcore import AsyncTransport, Transport
from reel_bindings.proxy import ProxyOptions, running
from reel_bindings.requests import Adapter
from reel_core import Mode, Timing

__all__ = ["BINDINGS", "Call", "Opener", "Reply", "Send"]


@dataclass(frozen=True)
class Call:
    """One request: ``target`` is the path and query."""

    method: str
    target: str
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    #: ``(lowercase name, value)`` as received, repeats kept (not compared:
    #: a test asks for them).
    headers: tuple[tuple[str, str], ...] = field(default=(), compare=False)


def _raw(pairs: Any) -> tuple[tuple[str, str], ...]:
    return tuple((k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in pairs)


Send = Callable[[Call], Reply]
Opener = Callable[[Path, Mode, str], AbstractContextManager[Send]]


@contextmanager
def sync_transport(family: Any, cassette: Path, mode: Mode, url: str) -> Iterator[Send]:
    with family.Client(transport=Transport(cassette, mode=mode, timing="fast")) as client:

        def send(call: Call) -> Reply:
            r = client.request(
                call.method, url + call.target, content=call.body, headers=call.headers
            )
            return Reply(r.status_code, r.read(), _raw(r.headers.raw))

        yield send


@contextmanager
def async_transport(
    family: Any, backend: str, cassette: Path, mode: Mode, url: str
) -> Iterator[Send]:
    transport = AsyncTransport(cassette, mode=mode, timing="fast")

    def send(call: Call) -> Reply:
        async def go() -> Reply:
            async with family.AsyncClient(transport=transport) as client:
                r = await client.request(
                    call.method, url + call.target, content=call.body, headers=call.headers
                )
                return Reply(r.status_code, await r.aread(), _raw(r.headers.raw))

        result: Reply = anyio.run(go, backend=backend)
        return result

    yield send


@contextmanager
def requests_adapter(cassette: Path, mode: Mode, url: str) -> Iterator[Send]:
    session = requests.Session()
    session.mount("http://", Adapter(cassette, mode=mode, timing="fast"))
    with session:

        def send(call: Call) -> Reply:
            r = session.request(
                call.method, url + call.target, data=call.body, headers=call.headers
            )
            pairs = r.headers.items()  # a name once: requests keeps a dict
            return Reply(r.status_code, r.content, tuple((k.lower(), v) for k, v in pairs))

        yield send


def proxy_on(stack: ExitStack, backend: str, cassette: Path, mode: Mode, url: str) -> str:
    """Start a proxy (fast timing) on ``backend`` in a thread of its own,
    stopped when ``stack`` closes; its URL."""
    options = ProxyOptions(
        backend=backend,
        mode=mode,
        cassette=cassette,
        upstream=url,
        port=0,
        timing=Timing.parse("fast"),
    )
    portal = stack.enter_context(anyio.from_thread.start_blocking_portal(backend))
    proxy_url: str = stack.enter_context(portal.wrap_async_context_manager(running(options)))
    return proxy_url


@contextmanager
def proxy(backend: str, cassette: Path, mode: Mode, url: str) -> Iterator[Send]:
    with ExitStack() as stack:
        proxy_url = proxy_on(stack, backend, cassette, mode, url)
        client = stack.enter_context(httpx.Client())

        def send(call: Call) -> Reply:
            r = client.request(
                call.method, proxy_url + call.target, content=call.body, headers=call.headers
            )
            return Reply(r.status_code, r.read(), _raw(r.headers.raw))

        yield send


def _bind(factory: Callable[..., AbstractContextManager[Send]], *args: Any) -> Opener:
    return lambda cassette, mode, url: factory(*args, cassette, mode, url)


BINDINGS: dict[str, Opener] = {
    "proxy-asyncio": _bind(proxy, "asyncio"),
    "proxy-trio": _bind(proxy, "trio"),
    "httpx": _bind(sync_transport, httpx),
    "httpx2": _bind(sync_transport, httpx2),
    "httpx-async-asyncio": _bind(async_transport, httpx, "asyncio"),
    "httpx2-async-trio": _bind(async_transport, httpx2, "trio"),
    "httpx2-async-asyncio": _bind(async_transport, httpx2, "asyncio"),
    "httpx-async-trio": _bind(async_transport, httpx, "trio"),
    "requests": _bind(requests_adapter),
}
