"""What the httpx/httpx2 transports share, sync and async: the client
families, their body streams, the mapping of their exceptions, the replayed
response.  ``_async/transport.py`` holds ``AsyncTransport``;
``_sync/transport.py``, generated from it, ``Transport``; both are
re-exported by ``reel_bindings.httpcore``.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import weakref
from collections.abc import AsyncIterator, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

from reel_core import (
    Abort,
    Cut,
    Forward,
    Replay,
    Request,
    ResponseHead,
    UpstreamError,
)
from reel_core.tools import accept_encoding

from ._files import CassetteFile
from ._inprocess import Binding, Decision, given_upstream
from ._options import BindingOptions, Options
from ._per_process import PerProcess
from ._proxy_env import environment_proxies, proxy_for
from ._relay import Failure

__all__ = [
    "Base",
    "async_stream",
    "core_request",
    "cut_error",
    "decodable",
    "family_of",
    "relayed",
    "routed",
    "ssl_context",
    "sync_stream",
]

_FAMILIES = ("httpx", "httpx2")
#: The extensions of a replayed response (httpx copies them).
_REPLAYED = {"reel": "replay"}
#: How many recordings' responses a transport keeps (all go when full).
_HEADS_KEPT = 4096
#: What a response built with ``content=`` holds, in httpx and httpx2 (pinned
#: by ``tests/bindings/test_warm_replay.py``): a later play of the same
#: recording copies them.  Those in ``_FRESH`` are made afresh for each play.
_RESPONSE_STATE = frozenset(
    {
        "_content",
        "_decoder",
        "_num_bytes_downloaded",
        "_request",
        "default_encoding",
        "extensions",
        "headers",
        "history",
        "is_closed",
        "is_stream_consumed",
        "next_request",
        "status_code",
        "stream",
    }
)
_FRESH = frozenset({"headers", "extensions", "history"})
#: Set for each play: those made afresh, the body stream (made from the
#: recorded body) and the decoder (done with once the body is read: shared).
_OWN = _FRESH | {"stream", "_decoder"}
#: Those of a recording's own: the others are the same in every response
#: built with ``content=`` whose body needs no decoding (see
#: :func:`_from_template`).
_RECORDING_OWN = _OWN | {"status_code", "_content"}
#: By response class (a client family's): what its responses hold whatever
#: their recording (``_RECORDING_OWN`` left ``None``, the identity decoder
#: shared), once a response made from it was found to hold exactly what
#: httpx built for the same recording; ``None`` once it did not (httpx
#: builds every first play then).
_TEMPLATES: dict[type, dict[str, Any] | None] = {}
_Pairs = tuple[tuple[bytes, bytes], ...]


if TYPE_CHECKING:
    import anyio
    import httpx
    import httpx2
    from typing_extensions import Unpack

    from ._failures import Rule

    # Subclassing both families' bases lets type checkers accept a Reel
    # transport in httpx.Client(transport=...) and httpx2.Client(transport=...).
    class SyncBase(httpx.BaseTransport, httpx2.BaseTransport):  # type: ignore[misc]
        _process_pools = True

    class AsyncBase(httpx.AsyncBaseTransport, httpx2.AsyncBaseTransport):  # type: ignore[misc]
        _process_pools = False

else:

    class SyncBase:
        """What ``httpx.BaseTransport`` gives at run time, without importing
        httpx or httpx2: a client family is imported by the first request of
        that family (its objects come from the module already loaded), never
        by importing or making a transport.  Clients only call the transport
        protocol (``handle_request``, ``close``, ``__enter__``/``__exit__``),
        which the transports define; they never check its class."""

        #: Forwards go through the process's pools (see :func:`process_pool`).
        _process_pools = True

    class AsyncBase:
        """``httpx.AsyncBaseTransport`` at run time: see :class:`SyncBase`."""

        #: An async pool's connections belong to the event loop they were
        #: opened on (and test runners give each test a loop of its own):
        #: each async transport keeps pools of its own, closed with it.
        _process_pools = False


def family_of(request: Any) -> ModuleType:
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
            #: Set when the generator is closed; made by the first close.
            self._closed: anyio.Event | None = None
            #: Reads under way (a cancelled one may still read on, shielded),
            #: and what a close waiting for them waits on.
            self._reads = 0
            self._read: anyio.Event | None = None

        def __aiter__(self) -> AsyncIterator[bytes]:
            # Not the generator itself: httpx closes an iterator that is a
            # generator when its own is finalized (a client that broke out of
            # ``aiter_*`` and closed the response), maybe while the close
            # below still runs (it reads on for the body's end).  Only
            # ``aclose`` closes the generator, once.
            return self

        async def __anext__(self) -> bytes:
            self._reads += 1
            try:
                return await self._iterator.__anext__()
            finally:
                self._reads -= 1
                if self._read is not None:
                    self._read.set()

        async def aclose(self) -> None:
            # Closed once; a second close (the transport's, and httpx's
            # finalizer of ``aiter_*``) returns when the first is done: it
            # may read on for the grace, on a pool the transport then closes.
            # A read under way in another task (cancelled, reading on for
            # the grace) ends first: the generator cannot be closed under it.
            import anyio  # here: a sync program never loads it

            if self._closed is not None:
                await self._closed.wait()
                return
            self._closed = anyio.Event()
            try:
                while self._reads:
                    self._read = anyio.Event()
                    await self._read.wait()
                await self._iterator.aclose()  # type: ignore[attr-defined]
            finally:
                self._closed.set()

    return SyncStream, AsyncStream


def sync_stream(family: ModuleType) -> type:
    """``family``'s sync body stream that closes the relay under it."""
    return _streams(family)[0]


def async_stream(family: ModuleType) -> type:
    """``family``'s async body stream that closes the relay under it."""
    return _streams(family)[1]


@functools.cache
def _rules(family: ModuleType) -> tuple[Rule, ...]:
    """How ``family``'s transport errors map onto :class:`UpstreamError`.
    httpcore raises one ``RemoteProtocolError`` for garbage and for a peer
    that closed the connection; only its messages tell them apart.
    (``_failures`` imports ssl and http.client for its cause tables: a
    failure needs them, the import of a transport does not.)"""
    from ._failures import CONNECT_CAUSES, Rule

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


def failure_of(family: ModuleType, exc: Exception) -> UpstreamError:
    from ._failures import classify

    return classify(exc, _rules(family))


def relayed(family: ModuleType) -> Failure:
    """What the relay feeds for an exception: ``family``'s transport errors."""

    def failure(exc: Exception) -> tuple[UpstreamError, str] | None:
        if isinstance(exc, family.TransportError):
            return failure_of(family, exc), str(exc)
        return None

    return failure


_SSL_CONTEXTS: dict[tuple[str, str | None, str | None], Any] = {}


def ssl_context(family: ModuleType) -> Any:
    """``family``'s default SSL context (certifi's roots, or the
    ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` the environment names), made once
    per process and environment and shared by every transport's pools.
    Loading the roots costs 20 to 130 ms, and each SDK helper makes a
    transport of its own: that time landed on the first recorded
    request of each (its time to first byte).  A context is safe to share;
    each pool still has its own connections."""
    key = (family.__name__, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    context = _SSL_CONTEXTS.get(key)
    if context is None:
        # setdefault: threads racing here share one
        context = _SSL_CONTEXTS.setdefault(key, family.create_ssl_context())
    return context


#: The pools of the sync transports' forwards, by client family, proxy URL
#: and SSL context (see :func:`process_pool`).
_POOLS: PerProcess[Any] = PerProcess(lambda pool: pool.close())


def process_pool(family: ModuleType, proxy: str, verify: Any, http2: bool = False) -> Any:
    """The process's pool of ``family``'s sync connections through
    ``proxy`` (``""``: direct) with SSL context ``verify`` (and HTTP/2
    offered, ``http2``), shared by every sync transport.

    An SDK client makes a transport of its own, and a test suite makes a
    client per test (or per call): with a pool each, every recorded
    request through a new transport opened a connection of its own, a TCP
    and TLS handshake before its first byte (0.4-0.8 ms on a loopback
    here, tens of milliseconds to a provider).  A transport closed leaves
    the process's pools open, for the next; they close as the process
    exits, and a forked child starts with none (:class:`PerProcess`).

    It opens as many connections as requests are under way at once, as a
    pool each did between them: a response its user never closed holds
    its connection until collected, and with httpx's limit of 100 a
    process's hundredth such response would have every later request
    wait and fail (``PoolTimeout``).  At most 20 idle ones are kept."""
    limits = family.Limits(max_connections=None, max_keepalive_connections=20)

    def make() -> Any:
        return _made(family.HTTPTransport, proxy, verify=verify, limits=limits, http2=http2)

    # the context itself in the key (hashed by identity): alive as long as its pool
    return _POOLS.get((family.__name__, proxy, verify, http2), make)


def _made(make: Any, proxy: str, **kwargs: Any) -> Any:
    """A pool from ``make`` (``HTTPTransport``, ``AsyncHTTPTransport``)
    through ``proxy`` (``""``: direct); one asked for HTTP/2 without the h2
    package is an ``ImportError`` saying what to install."""
    if proxy:
        kwargs["proxy"] = proxy
    if not kwargs.get("http2"):
        kwargs.pop("http2", None)  # as before: a family that predates the keyword
        return make(**kwargs)
    try:
        return make(**kwargs)
    except ImportError as exc:
        raise ImportError(
            "http2=True forwards over HTTP/2 with httpx's h2 package: "
            "pip install 'reel-llm[h2]' (or 'httpx[http2]')"
        ) from exc


def _from_template(
    family: ModuleType, template: dict[str, Any], head: ResponseHead, content: bytes
) -> Any:
    """What ``family.Response(status, headers=..., content=...)`` builds for
    a body that needs no decoding, made from ``template`` (see
    ``_first_play``): its headers with the ``Content-Length`` httpx adds to
    a body that has none, the body read already."""
    headers = list(head.headers)
    if content and not any(name.lower() == b"content-length" for name, _ in headers):
        headers.append((b"Content-Length", b"%d" % len(content)))
    response = family.Response.__new__(family.Response)
    state = response.__dict__
    state.update(template)
    state["status_code"] = head.status
    state["headers"] = family.Headers(headers)
    state["extensions"] = dict(_REPLAYED)
    state["history"] = []
    state["stream"] = family.ByteStream(content)
    state["_content"] = content
    return response


#: Compared by their contents, not with ``==`` (see :func:`_checked_template`).
_COMPARED_APART = frozenset({"headers", "stream", "_decoder"})


def _checked_template(
    family: ModuleType, head: ResponseHead, content: bytes, built: Any
) -> dict[str, Any] | None:
    """The template of ``family``'s responses, taken from ``built`` (httpx's
    own build of a body needing no decoding), if a response made from it
    for the same recording holds exactly what ``built`` does; else ``None``."""
    state = getattr(built, "__dict__", None)
    if state is None or state.keys() != _RESPONSE_STATE:
        return None
    template = {name: None if name in _RECORDING_OWN else value for name, value in state.items()}
    template["_decoder"] = state["_decoder"]  # the identity decoder: no state
    made = vars(_from_template(family, template, head, content))
    alike = (
        made.keys() == state.keys()
        and all(made[name] == state[name] for name in state.keys() - _COMPARED_APART)
        and made["headers"].raw == state["headers"].raw
        and type(made["stream"]) is type(state["stream"])
        and b"".join(made["stream"]) == b"".join(state["stream"])
        and type(made["_decoder"]) is type(state["_decoder"])
    )
    return template if alike else None


def decodable(request: Any) -> Any:
    """``request`` as it goes upstream: its ``accept-encoding`` cut to the
    codings this install decodes (the core's :func:`reel_core.accept_encoding`;
    no body is stored in one Reel cannot read).  Changed in place: the
    client's ``response.request`` shows what was sent."""
    value = request.headers.get("accept-encoding")
    if value is not None:
        wanted = accept_encoding(value.encode("latin-1")).decode("latin-1")
        if wanted != value:
            request.headers["accept-encoding"] = wanted
    return request


def core_request(request: Any, body: bytes) -> Request:
    return Request(request.method, request.url.raw_path.decode("ascii"), request.headers.raw, body)


def routed(family: ModuleType, request: Any, forward: Forward) -> Any:
    """``request`` as it goes upstream: itself, or, when the binding was
    given an upstream base URL (``forward.url`` is set), a copy sent there,
    its ``Host`` that of the new URL."""
    if forward.url is None:
        return request
    url = family.URL(forward.url)
    headers = [(b"Host", url.netloc)]
    headers += [(k, v) for k, v in request.headers.raw if k.lower() != b"host"]
    return family.Request(
        request.method,
        url,
        headers=headers,
        stream=request.stream,
        extensions=request.extensions,
    )


def cut_error(family: ModuleType, cut: Cut, request: Any) -> Exception:
    message = (
        f"peer closed connection without sending complete message body (recorded cut: {cut.error})"
    )
    if cut.error == Abort.CLIENT_CLOSED.value:
        message += (
            "; the recording ends here because its client closed the response early: "
            "re-record it (REEL_MODE=record) if this client reads further"
        )
    if cut.error == "timeout":
        exc: Exception = family.ReadTimeout(message, request=request)
    else:
        exc = family.RemoteProtocolError(message, request=request)
    return exc


class Base(Binding):
    """The transports' own part: the pools forwards go through."""

    #: Whether forwards go through the process's pools (sync transports)
    #: or pools of the transport's own (async ones): set by the base.
    _process_pools: ClassVar[bool]

    def __init__(
        self,
        cassette: str | os.PathLike[str] | CassetteFile,
        options: Options | None = None,
        **kwargs: Unpack[BindingOptions],
    ) -> None:
        given = Options.of(kwargs, options)
        upstream = given.upstream
        # a sync transport forwards through a sync pool, an async one an async one
        sync = self._process_pools
        base, pool = given_upstream(
            upstream,
            "an httpx transport (httpx.HTTPTransport(...))"
            if sync
            else "an httpx async transport (httpx.AsyncHTTPTransport(...))",
            hasattr(upstream, "handle_request" if sync else "handle_async_request"),
        )
        if base is not upstream:  # the pool given stays the binding's, not the player's
            given = dataclasses.replace(given, upstream=base)
        super().__init__(cassette, given)
        #: The pools forwards go through, by client family and proxy URL
        #: (``""``: direct); an ``upstream`` pool given serves its family always.
        self._upstreams: dict[tuple[str, str], Any] = {}
        self._given: dict[str, Any] = {}
        if pool is not None:
            self._given[type(pool).__module__.partition(".")[0]] = pool
        #: The ``*_PROXY`` variables, read at the first forward (a replay
        #: never forwards: building a transport reads none of them).
        self._proxies: dict[str, str] | None = None
        #: The bodies of the forwarded responses not yet garbage: closing
        #: the transport closes those still open (see ``close``).
        self._streams: weakref.WeakSet[Any] = weakref.WeakSet()
        #: What the first play of a recording replayed whole answered, for
        #: its later plays (see ``_replay_response``): by ``(client family,
        #: id of the recording's head)``, ``(body, status, headers)`` and the
        #: response's values; the response's headers and decoder by
        #: ``(client family, recorded headers, body length)``.
        self._heads: dict[tuple[str, int], tuple[bytes, int, _Pairs]] = {}
        self._values: dict[tuple[str, int], dict[str, Any]] = {}
        self._shared: dict[tuple[str, _Pairs, int], tuple[Any, Any]] = {}
        #: Whether an async transport's forwards keep their upstream
        #: connections open for its next requests.  Off for one whose
        #: client outlives its event loop (a client made once for many
        #: tests, each with a loop of its own): a connection belongs to the
        #: loop that opened it, and is closed with its response instead.
        self.keep_alive = True

    def _pool(self, family: ModuleType, request: Any) -> Any:
        """The pool a forward of ``request`` goes through: the ``upstream``
        given for its family, else one through the proxy the environment
        names for its URL, if any (``HTTPS_PROXY``, ``HTTP_PROXY``,
        ``ALL_PROXY``, ``NO_PROXY``): the process's for a sync transport
        (:func:`process_pool`), else an ``AsyncHTTPTransport`` of the
        transport's own; made with ``http2=True`` when the binding was
        asked for HTTP/2 (``http2=``)."""
        given = self._given.get(family.__name__)
        if given is not None:
            return given
        url = request.url
        port = url.port or (443 if url.scheme == "https" else 80)
        if self._proxies is None:
            self._proxies = environment_proxies()
        proxy = proxy_for(url.scheme, url.host, port, self._proxies) or ""
        http2 = self.player.options.http2
        if self._process_pools:
            return process_pool(family, proxy, ssl_context(family), http2)
        upstream = self._upstreams.get((family.__name__, proxy))
        if upstream is None:
            verify = ssl_context(family)
            kept = {} if self.keep_alive else {"limits": family.Limits(max_keepalive_connections=0)}
            made = _made(family.AsyncHTTPTransport, proxy, verify=verify, http2=http2, **kept)
            # setdefault: threads racing here share one pool (another one
            # would hold connections that close() never closes)
            upstream = self._upstreams.setdefault((family.__name__, proxy), made)
        return upstream

    def _first_play(self, family: ModuleType, head: ResponseHead, content: bytes) -> Any:
        """The response of a recording's first play: httpx's own build
        (``content=``), or, for a body that needs no decoding, one made
        from the values every such response holds (:data:`_TEMPLATES`),
        which skips httpx reading the body through its decoders (43 of
        the 53 µs a build cost).  The first such response of a family is
        built both ways and compared attribute by attribute: a version of
        httpx that builds otherwise has every response built by httpx."""
        plain = not any(name.lower() == b"content-encoding" for name, _ in head.headers)
        template = _TEMPLATES.get(family.Response) if plain else None
        if template is not None:
            return _from_template(family, template, head, content)
        response = family.Response(
            head.status, headers=list(head.headers), content=content, extensions=_REPLAYED
        )
        if plain and family.Response not in _TEMPLATES:
            _TEMPLATES[family.Response] = _checked_template(family, head, content, response)
        return response

    def _replay_response(self, family: ModuleType, decision: Decision, content: Any) -> Any:
        head = decision.head
        if type(content) is not bytes or not isinstance(decision.event, Replay):
            return family.Response(
                head.status, headers=list(head.headers), content=content, extensions=_REPLAYED
            )
        # A whole body replayed: its first play is built as ``content=``
        # builds it (httpx adds a ``Content-Length`` if none, reads the body
        # through its decoders: a gzip body is decoded).  Reading it again
        # for each later play took 13 of the 15 µs a response cost, and gives
        # the same values: a later play copies the first's attributes, with
        # those a client or its user may change (headers, extensions,
        # history) made afresh and a body stream of its own.
        # What is kept is walked by the garbage collector on every full
        # collection, so a recording keeps values only (bytes, strings,
        # numbers: the collector stops tracking them); keeping the first
        # response's own objects (six a recording) made first plays slower.
        # Its headers and decoder (done with once the body is read) depend
        # on the recorded headers and the body's length alone: recordings
        # alike share them.
        family_name = family.__name__
        key = (family_name, id(head))
        kept = self._heads.get(key)
        # the same body, status and headers: the same response (whatever
        # the head's identity: a head gone, another may take its id)
        if (
            kept is not None
            and kept[0] is content
            and kept[1] == head.status
            and kept[2] == head.headers
        ):
            values = self._values.get(key)  # None: another thread just cleared them
            shared = self._shared.get((family_name, head.headers, len(content)))
            if values is not None and shared is not None:
                response = family.Response.__new__(family.Response)
                state = response.__dict__
                state.update(values)
                state["headers"] = family.Headers(shared[0])
                state["extensions"] = dict(_REPLAYED)
                state["history"] = []
                state["stream"] = family.ByteStream(content)
                state["_decoder"] = shared[1]
                return response
        response = self._first_play(family, head, content)
        state = getattr(response, "__dict__", None)
        # else a version of httpx this was not checked on: built each time
        if state is not None and state.keys() == _RESPONSE_STATE:
            if len(self._heads) >= _HEADS_KEPT or len(self._shared) >= _HEADS_KEPT:
                self._heads.clear()
                self._values.clear()
                self._shared.clear()
            # None keeps the order of those set for each play
            values = {name: None if name in _OWN else value for name, value in state.items()}
            # apart: a tuple holding a dict stays tracked
            self._values[key] = values
            self._heads[key] = (content, head.status, head.headers)
            shared_key = (family_name, head.headers, len(content))
            if shared_key not in self._shared:
                self._shared[shared_key] = (family.Headers(response.headers), state["_decoder"])
        return response
