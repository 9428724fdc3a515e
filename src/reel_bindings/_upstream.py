"""The one seam to the network in record and live modes: send a request
upstream and stream the response back, with the HTTP library's exceptions
mapped onto :class:`reel_core.UpstreamError` at this edge."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Protocol
from urllib.parse import urlsplit

import httpcore

from reel_core import Request, UpstreamError
from reel_core._http import HOP_BY_HOP

__all__ = ["AsyncUpstream", "UpstreamFailure", "UpstreamResponse", "forward_headers"]

#: Headers never forwarded: one-hop headers, and Reel's own.
_DROP = HOP_BY_HOP | {b"host", b"content-length"}


class UpstreamFailure(Exception):
    """The upstream failed; ``error`` says how (already mapped)."""

    def __init__(self, error: UpstreamError, detail: str) -> None:
        super().__init__(f"{error.value}: {detail}")
        self.error = error
        self.detail = detail


def classify(exc: Exception) -> UpstreamError:
    """Map an exception of the HTTP library underneath (httpcore, httpx, httpx2,
    requests/urllib3) onto an :class:`UpstreamError`, by type name and message."""
    name = type(exc).__name__
    text = str(exc).lower()
    if "timeout" in name.lower():
        return UpstreamError.TIMEOUT
    if name in ("ConnectError", "ConnectionError", "NewConnectionError", "ConnectionRefusedError"):
        if any(s in text for s in ("name or service", "nodename", "getaddrinfo", "resolv")):
            return UpstreamError.DNS
        if any(s in text for s in ("ssl", "certificate", "tls", "handshake")):
            return UpstreamError.TLS
        return UpstreamError.REFUSED
    if name in ("ReadError", "WriteError", "NetworkError", "ConnectionResetError"):
        return UpstreamError.RESET
    if name in ("ChunkedEncodingError", "ProtocolError", "IncompleteRead") and (
        "reset" in text or "broken" in text
    ):
        return UpstreamError.RESET
    if name in (
        "RemoteProtocolError",
        "ChunkedEncodingError",
        "ProtocolError",
        "IncompleteRead",
    ) and ("closed" in text or "incomplete" in text or "without sending" in text):
        return UpstreamError.CLOSED
    return UpstreamError.PROTOCOL


def forward_headers(request: Request, url: str) -> list[tuple[bytes, bytes]]:
    """The request's headers as sent upstream: credentials intact, one-hop
    and ``x-reel-*`` headers dropped, ``host`` and ``content-length`` set."""
    netloc = urlsplit(url).netloc.encode("ascii")
    headers = [(b"host", netloc)]
    headers += [
        (k, v) for k, v in request.headers if k not in _DROP and not k.startswith(b"x-reel-")
    ]
    if request.body or request.method in ("POST", "PUT", "PATCH"):
        headers.append((b"content-length", str(len(request.body)).encode()))
    return headers


class UpstreamResponse(Protocol):
    status: int
    headers: list[tuple[bytes, bytes]]

    def chunks(self) -> AsyncIterator[bytes]: ...


class _Response:
    def __init__(self, response: httpcore.Response) -> None:
        self.status = response.status
        self.headers = list(response.headers)
        self._response = response

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.aiter_stream():
                yield chunk
        except httpcore.TimeoutException as exc:
            raise UpstreamFailure(UpstreamError.TIMEOUT, str(exc) or "read timed out") from None
        except (httpcore.NetworkError, httpcore.ProtocolError) as exc:
            raise UpstreamFailure(classify(exc), str(exc) or type(exc).__name__) from None


class AsyncUpstream:
    """An httpcore connection pool (TLS, keep-alive) on the running backend."""

    def __init__(self, *, connect_timeout: float = 10.0, read_timeout: float = 120.0) -> None:
        self._pool = httpcore.AsyncConnectionPool(max_connections=100, retries=0)
        self._timeouts = {
            "connect": connect_timeout,
            "read": read_timeout,
            "write": read_timeout,
            "pool": connect_timeout,
        }

    @asynccontextmanager
    async def send(self, request: Request, url: str) -> AsyncIterator[UpstreamResponse]:
        """Send ``request`` to ``url``; yields the response whose body is
        read with ``chunks()``.  Raises :class:`UpstreamFailure`."""
        try:
            async with self._pool.stream(
                request.method,
                url,
                headers=forward_headers(request, url),
                content=request.body,
                extensions={"timeout": self._timeouts},
            ) as response:
                yield _Response(response)
        except httpcore.TimeoutException as exc:
            raise UpstreamFailure(UpstreamError.TIMEOUT, str(exc) or "timed out") from None
        except (httpcore.NetworkError, httpcore.ProtocolError, httpcore.UnsupportedProtocol) as exc:
            raise UpstreamFailure(classify(exc), str(exc) or type(exc).__name__) from None

    async def aclose(self) -> None:
        await self._pool.aclose()
