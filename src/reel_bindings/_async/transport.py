"""The in-process transport for httpx and httpx2 clients.

``_async/transport.py`` (``AsyncTransport``) is the source;
``_sync/transport.py`` (``Transport``) is generated from it by
``scripts/gen_sync.py``: edit the async one, then run the script.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import anyio

from .._async.relay import arelay
from .._async.replay import aframes
from .._inprocess import Upstreaming
from .._transport import (
    AsyncBase,
    Base,
    async_stream,
    core_request,
    cut_error,
    decodable,
    failure_of,
    family_of,
    relayed,
    routed,
)

__all__ = ["AsyncTransport"]


class AsyncTransport(Base, AsyncBase):
    """Reel's transport for httpx and httpx2 clients: ``AsyncTransport``
    for their ``AsyncClient`` (on asyncio or trio), ``Transport`` for their
    ``Client``."""

    async def handle_async_request(self, request: Any) -> Any:
        family = family_of(request)
        decision = self.player.decide(core_request(request, await request.aread()))
        if isinstance(decision, Upstreaming):
            return await self._forward(family, request, decision)
        self._check(decision)
        if decision.body is not None:  # nothing to wait for: one body
            return self._replay_response(family, decision, decision.body)
        start = anyio.current_time()
        played = aframes(decision.events, start, lambda cut: cut_error(family, cut, request))
        return self._replay_response(family, decision, played)

    async def _forward(self, family: ModuleType, request: Any, feed: Upstreaming) -> Any:
        request = routed(family, request, feed.forward)
        try:
            pool = self._pool(family, request)
            response = await pool.handle_async_request(decodable(request))
        except family.TransportError as exc:
            feed.error(failure_of(family, exc), str(exc))
            raise
        feed.head(response.status_code, response.headers.raw)
        relaying = arelay(response.stream, feed, relayed(family), response.aclose)
        stream = async_stream(family)(relaying)
        self._streams.add(stream)
        return family.Response(
            response.status_code,
            headers=response.headers.raw,
            stream=stream,
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        self._unfreeze()
        # A response its client left unclosed (a stream it stopped reading
        # and dropped) is left now, before its pool closes under it: the
        # recording reads on for the grace, as when the client closes it.
        # (A replay left none: the set is not walked, which costs more.)
        for stream in list(self._streams) if self._streams else ():
            await stream.aclose()
        for upstream in [*self._upstreams.values(), *self._given.values()]:
            await upstream.aclose()

    async def __aenter__(self) -> AsyncTransport:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
