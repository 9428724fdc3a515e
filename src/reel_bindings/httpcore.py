"""In-process transports for httpx and httpx2 clients, sync and async.

One transport serves both client families in use today: httpx (on httpcore
1.x) and httpx2 (on httpcore2, which the current openai, anthropic and
google-genai SDKs are built on).  It answers with the response class of the
family of each request it gets, and in record mode forwards through that
family's own connection pool::

    import httpx2
    from reel_bindings.httpcore import Transport

    client = httpx2.Client(transport=Transport("tests/cassettes/chat.jsonl"))

Replayed streams are yielded frame by frame, each at its recorded offset
(``time.sleep`` in sync code, anyio in async code, on asyncio or trio).  A
miss answers the 404 miss report (SDKs raise their not-found error carrying
its message); ``strict=True`` raises :class:`reel_core.MissError` instead.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import time
from collections.abc import AsyncIterator, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any

import anyio

from reel_core import (
    Cut,
    MatchConfig,
    MissError,
    Mode,
    Redactor,
    Request,
    Step,
    Timing,
    UpstreamError,
    replay_schedule,
)

from ._clock import sleep_until, sleep_until_sync
from ._failures import CONNECT_CAUSES, Rule, classify
from ._files import CassetteFile
from ._inprocess import IN_PROCESS_HINT, Decision, Player
from ._relay import Failure, arelay, relay
from ._upstream import environment_proxies, proxy_for

__all__ = ["AsyncTransport", "Transport"]

_FAMILIES = ("httpx", "httpx2")


def _bases(name: str) -> tuple[type, ...]:
    """``name`` (a transport base class) of every client family installed."""
    bases = []
    for family in _FAMILIES:
        try:
            bases.append(getattr(importlib.import_module(family), name))
        except ImportError:  # pragma: no cover - only one family installed
            continue
    return tuple(bases) or (object,)


if TYPE_CHECKING:
    import httpx
    import httpx2

    # Subclassing both families' bases lets type checkers accept a Reel
    # transport in httpx.Client(transport=...) and httpx2.Client(transport=...).
    class _SyncBase(httpx.BaseTransport, httpx2.BaseTransport):  # type: ignore[misc]
        pass

    class _AsyncBase(httpx.AsyncBaseTransport, httpx2.AsyncBaseTransport):  # type: ignore[misc]
        pass

else:
    _SyncBase = type("_SyncBase", _bases("BaseTransport"), {})
    _AsyncBase = type("_AsyncBase", _bases("AsyncBaseTransport"), {})


def _family(request: Any) -> ModuleType:
    name = type(request).__module__.partition(".")[0]
    if name not in _FAMILIES:
        raise TypeError(
            f"reel_bindings.httpcore transports serve httpx and httpx2 requests, not {name}"
        )
    return sys.modules[name]  # imported: ``request`` is one of its objects


@functools.cache
def _streams(family: ModuleType) -> tuple[type, type]:
    """Body streams of ``family`` that close the generator under them: when a
    client closes a response it has not read to the end, the relay must hear
    of it at once to close the upstream and record the cut.  (A plain
    ``content=`` iterator is never closed, only garbage collected.)"""

    class SyncStream(family.SyncByteStream):  # type: ignore[misc, name-defined]
        def __init__(self, iterator: Iterator[bytes]) -> None:
            self._iterator = iterator

        def __iter__(self) -> Iterator[bytes]:
            return self._iterator

        def close(self) -> None:
            self._iterator.close()  # type: ignore[attr-defined]

    class AsyncStream(family.AsyncByteStream):  # type: ignore[misc, name-defined]
        def __init__(self, iterator: AsyncIterator[bytes]) -> None:
            self._iterator = iterator
            self._closed = False

        def __aiter__(self) -> AsyncIterator[bytes]:
            # Not the generator itself: httpx closes an iterator that is a
            # generator when its own is finalized (a client that broke out of
            # ``aiter_*`` and closed the response), maybe while the close
            # below still runs (it reads on for the body's end).  Only
            # ``aclose`` closes the generator, once.
            return self

        async def __anext__(self) -> bytes:
            return await self._iterator.__anext__()

        async def aclose(self) -> None:
            if not self._closed:
                self._closed = True
                await self._iterator.aclose()  # type: ignore[attr-defined]

    return SyncStream, AsyncStream


@functools.cache
def _rules(family: ModuleType) -> tuple[Rule, ...]:
    """How ``family``'s transport errors map onto :class:`UpstreamError`.
    httpcore raises one ``RemoteProtocolError`` for garbage and for a peer
    that closed the connection; only its messages tell them apart."""
    return (
        Rule(family.TimeoutException, UpstreamError.TIMEOUT),
        Rule(family.ConnectError, UpstreamError.REFUSED, CONNECT_CAUSES),
        Rule(family.ProxyError, UpstreamError.REFUSED, CONNECT_CAUSES),
        Rule(
            family.RemoteProtocolError,
            UpstreamError.PROTOCOL,
            closed=("without sending", "closed connection", "disconnected"),
        ),
        Rule(family.NetworkError, UpstreamError.RESET),  # read, write, close
    )


def _failure(family: ModuleType, exc: Exception) -> UpstreamError:
    return classify(exc, _rules(family))


def _relayed(family: ModuleType) -> Failure:
    """What the relay feeds for an exception: ``family``'s transport errors."""

    def failure(exc: Exception) -> tuple[UpstreamError, str] | None:
        if isinstance(exc, family.TransportError):
            return _failure(family, exc), str(exc)
        return None

    return failure


def _immediate_body(steps: list[Step]) -> bytes | None:
    """The whole body when a replay has nothing to wait for (one frame due at
    once, then the end): it is answered as bytes, without a frame iterator."""
    if len(steps) > 2 or any(s.until is not None or isinstance(s.event, Cut) for s in steps):
        return None
    return b"".join(s.data for s in steps)


def _core_request(request: Any, body: bytes) -> Request:
    return Request(request.method, request.url.raw_path.decode("ascii"), request.headers.raw, body)


def _cut_error(family: ModuleType, cut: Cut, request: Any) -> Exception:
    message = (
        f"peer closed connection without sending complete message body (recorded cut: {cut.error})"
    )
    if cut.error == UpstreamError.CLIENT_CLOSED.value:
        message += (
            "; the recording ends here because its client closed the response early: "
            "re-record it (REEL_MODE=record) if this client reads further"
        )
    if cut.error == "timeout":
        exc: Exception = family.ReadTimeout(message, request=request)
    else:
        exc = family.RemoteProtocolError(message, request=request)
    return exc


class _Base:
    def __init__(
        self,
        cassette: str | os.PathLike[str] | CassetteFile,
        *,
        mode: Mode | str | None = None,
        match: MatchConfig | None = None,
        timing: Timing | str = "realtime",
        repeat: bool | None = None,
        strict: bool = False,
        redactor: Redactor | None = None,
        upstream: Any = None,
        hint: str = IN_PROCESS_HINT,
    ) -> None:
        self.player = Player(
            cassette,
            mode=mode,
            match=match,
            timing=timing,
            repeat=repeat,
            redactor=redactor,
            hint=hint,
        )
        self.strict = strict
        #: The pools forwards go through, by client family and proxy URL
        #: (``""``: direct); an ``upstream`` given serves its family always.
        self._upstreams: dict[tuple[str, str], Any] = {}
        self._given: dict[str, Any] = {}
        if upstream is not None:
            self._given[type(upstream).__module__.partition(".")[0]] = upstream
        self._proxies = environment_proxies()

    def _pool(self, family: ModuleType, request: Any, make: Any) -> Any:
        """The pool a forward of ``request`` goes through: the ``upstream``
        given for its family, else one of ``make`` (the family's
        ``HTTPTransport`` or ``AsyncHTTPTransport``) through the proxy the
        environment names for its URL, if any (``HTTPS_PROXY``,
        ``HTTP_PROXY``, ``ALL_PROXY``, ``NO_PROXY``)."""
        given = self._given.get(family.__name__)
        if given is not None:
            return given
        url = request.url
        port = url.port or (443 if url.scheme == "https" else 80)
        proxy = proxy_for(url.scheme, url.host, port, self._proxies) or ""
        upstream = self._upstreams.get((family.__name__, proxy))
        if upstream is None:
            made = make(proxy=proxy) if proxy else make()
            # setdefault: threads racing here share one pool (another one
            # would hold connections that close() never closes)
            upstream = self._upstreams.setdefault((family.__name__, proxy), made)
        return upstream

    @property
    def misses(self) -> list[Any]:
        """Miss reports served so far (the pytest plugin fails tests on them)."""
        return self.player.misses

    def _check(self, decision: Decision) -> None:
        if decision.miss is not None and self.strict:
            raise MissError(decision.miss)

    def _replay_response(self, family: ModuleType, decision: Decision, content: Any) -> Any:
        assert decision.head is not None
        return family.Response(
            decision.head.status,
            headers=list(decision.head.headers),
            content=content,
            extensions={"reel": "replay"},
        )


class Transport(_Base, _SyncBase):
    """A sync transport: ``httpx.Client(transport=...)`` or ``httpx2.Client(transport=...)``."""

    def handle_request(self, request: Any) -> Any:
        family = _family(request)
        decision = self.player.decide(_core_request(request, request.read()))
        self._check(decision)
        if decision.head is None:
            return self._forward(family, request, decision)
        steps = list(replay_schedule(decision.events))
        body = _immediate_body(steps)
        if body is not None:
            return self._replay_response(family, decision, body)
        start = time.monotonic()
        return self._replay_response(family, decision, self._frames(family, request, steps, start))

    @staticmethod
    def _frames(
        family: ModuleType, request: Any, steps: list[Step], start: float
    ) -> Iterator[bytes]:
        for step in steps:
            if step.until is not None:
                sleep_until_sync(start + step.until)
            if isinstance(step.event, Cut):
                raise _cut_error(family, step.event, request)
            if not step.last:
                yield step.data

    def _upstream(self, family: ModuleType, request: Any) -> Any:
        return self._pool(family, request, family.HTTPTransport)

    def _forward(self, family: ModuleType, request: Any, decision: Decision) -> Any:
        feed = self.player.upstream(decision)
        try:
            response = self._upstream(family, request).handle_request(request)
        except family.TransportError as exc:
            feed.error(_failure(family, exc), str(exc))
            raise
        feed.head(response.status_code, response.headers.raw)
        return family.Response(
            response.status_code,
            headers=response.headers.raw,
            stream=_streams(family)[0](
                relay(iter(response.stream), feed, _relayed(family), response.close)
            ),
            extensions=response.extensions,
        )

    def close(self) -> None:
        for upstream in [*self._upstreams.values(), *self._given.values()]:
            upstream.close()

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncTransport(_Base, _AsyncBase):
    """An async transport for ``httpx.AsyncClient`` / ``httpx2.AsyncClient``,
    on asyncio or trio."""

    async def handle_async_request(self, request: Any) -> Any:
        family = _family(request)
        decision = self.player.decide(_core_request(request, await request.aread()))
        self._check(decision)
        if decision.head is None:
            return await self._forward(family, request, decision)
        steps = list(replay_schedule(decision.events))
        body = _immediate_body(steps)
        if body is not None:
            return self._replay_response(family, decision, body)
        start = anyio.current_time()
        return self._replay_response(family, decision, self._frames(family, request, steps, start))

    @staticmethod
    async def _frames(
        family: ModuleType, request: Any, steps: list[Step], start: float
    ) -> AsyncIterator[bytes]:
        for step in steps:
            if step.until is not None:
                await sleep_until(start + step.until)
            if isinstance(step.event, Cut):
                raise _cut_error(family, step.event, request)
            if not step.last:
                yield step.data

    def _upstream(self, family: ModuleType, request: Any) -> Any:
        return self._pool(family, request, family.AsyncHTTPTransport)

    async def _forward(self, family: ModuleType, request: Any, decision: Decision) -> Any:
        feed = self.player.upstream(decision)
        try:
            response = await self._upstream(family, request).handle_async_request(request)
        except family.TransportError as exc:
            feed.error(_failure(family, exc), str(exc))
            raise
        feed.head(response.status_code, response.headers.raw)
        return family.Response(
            response.status_code,
            headers=response.headers.raw,
            stream=_streams(family)[1](
                arelay(aiter(response.stream), feed, _relayed(family), response.aclose)
            ),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        for upstream in [*self._upstreams.values(), *self._given.values()]:
            await upstream.aclose()

    async def __aenter__(self) -> AsyncTransport:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
