"""A prototype of the proxy's upstream client on httpcore's
``AsyncConnectionPool`` (issue #15, item 8), for the record-overhead
figure only: ``REEL_BENCH_UPSTREAM=httpcore`` makes ``bench._servers
proxy`` use it instead of ``reel_bindings._upstream.AsyncUpstream``.

It keeps the same interface (``send(request, url)`` yielding a response
with ``status``, ``headers`` and ``chunks()``), forwards the same headers,
and maps httpcore's exceptions onto ``UpstreamFailure``.  Proxies from the
environment go through ``AsyncHTTPProxy``; nothing else of ours (``--ca``
is the same SSL context) is needed.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpcore

from reel_bindings._upstream import (
    UpstreamFailure,
    environment_proxies,
    forward_headers,
    proxy_for,
    ssl_context,
)
from reel_core import Request, UpstreamError

__all__ = ["HttpcoreUpstream"]

_ERRORS: tuple[tuple[type[Exception], UpstreamError], ...] = (
    (httpcore.TimeoutException, UpstreamError.TIMEOUT),
    (httpcore.ConnectError, UpstreamError.REFUSED),
    (httpcore.RemoteProtocolError, UpstreamError.CLOSED),
    (httpcore.NetworkError, UpstreamError.RESET),
    (httpcore.ProtocolError, UpstreamError.PROTOCOL),
)


def _failure(exc: Exception) -> UpstreamFailure:
    for kind, error in _ERRORS:
        if isinstance(exc, kind):
            return UpstreamFailure(error, str(exc))
    return UpstreamFailure(UpstreamError.PROTOCOL, str(exc))


class _Response:
    def __init__(self, response: httpcore.Response) -> None:
        self.status = response.status
        self.headers = list(response.headers)
        self._response = response

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        try:
            async for chunk in self._response.aiter_stream():
                yield chunk
        except httpcore.TimeoutException as exc:
            raise _failure(exc) from None
        except (httpcore.NetworkError, httpcore.ProtocolError) as exc:
            raise _failure(exc) from None


class HttpcoreUpstream:
    """The proxy's upstream on httpcore connection pools."""

    def __init__(
        self,
        *,
        connect_timeout: float = 10.0,
        read_timeout: float = 120.0,
        max_connections: int = 100,
        ca: str | os.PathLike[str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._ssl = ssl_context(ca)
        self._timeouts = {"connect": connect_timeout, "read": read_timeout, "write": read_timeout}
        self._timeouts["pool"] = connect_timeout
        self._max = max_connections
        self.proxies = environment_proxies(environ)
        self._pools: dict[str, Any] = {}

    def _pool(self, url: httpcore.URL) -> Any:
        host = url.host.decode("ascii")
        port = url.port or (443 if url.scheme == b"https" else 80)
        proxy = proxy_for(url.scheme.decode("ascii"), host, port, self.proxies) or ""
        pool = self._pools.get(proxy)
        if pool is None:
            if proxy:
                pool = httpcore.AsyncHTTPProxy(
                    proxy, ssl_context=self._ssl, max_connections=self._max
                )
            else:
                pool = httpcore.AsyncConnectionPool(
                    ssl_context=self._ssl, max_connections=self._max
                )
            self._pools[proxy] = pool
        return pool

    @asynccontextmanager
    async def send(
        self, request: Request, url: str, *, waiting: Callable[[], object] | None = None
    ) -> AsyncIterator[_Response]:
        # httpcore has no hook between writing the request and reading the
        # head: ``waiting`` (the proxy's watch on its client, its recordings
        # waiting) runs before the request is sent.
        target = httpcore.URL(url)
        headers = forward_headers(request, url)
        if waiting is not None:
            waiting()
        try:
            async with self._pool(target).stream(
                request.method.encode("ascii"),
                target,
                headers=headers,
                content=request.body,
                extensions={"timeout": self._timeouts},
            ) as response:
                yield _Response(response)
        except UpstreamFailure:
            raise
        except (httpcore.TimeoutException, httpcore.NetworkError, httpcore.ProtocolError) as exc:
            raise _failure(exc) from None
        except httpcore.UnsupportedProtocol as exc:
            raise UpstreamFailure(UpstreamError.PROTOCOL, str(exc)) from None

    async def aclose(self) -> None:
        for pool in self._pools.values():
            await pool.aclose()
