"""The one seam to the network in record and live modes: send a request
upstream and stream the response back, with failures mapped onto
:class:`reel_core.UpstreamError` at this edge.

The client is h11 over anyio streams (TLS through anyio, checked against
the system's CAs, certifi's bundle as httpcore does, and ``--ca``), with
keep-alive connections kept per origin.  It honours the proxy environment
variables (``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``, ``NO_PROXY``, in
either case) the way urllib and httpx read them: an ``http://`` upstream is
asked of the proxy in absolute form, an ``https://`` one through a
``CONNECT`` tunnel.  It is this small because it sits on the proxy's path in record
mode: a general client (httpcore) cost ~0.15 ms a request more, spent on
locks, trace hooks and one event-loop pass per write, and it wrote the
request head and body apart, which costs the upstream a second wake-up.
Here the request goes out in one write and nothing waits on the loop
before it does.

A request that needs HTTP/2 (gRPC: :func:`reel_core.tools.is_grpc` on its
``content-type``) goes through ``_upstream_h2.py`` instead (the ``h2``
extra): one multiplexed connection per origin, h2c with prior knowledge for
``http://``, ALPN ``h2`` over TLS for ``https://``, and a ``CONNECT`` tunnel
through a proxy in the way for both (no proxy forwards h2c in absolute
form).  Its responses carry their trailers (:attr:`UpstreamResponse.trailers`).
"""

from __future__ import annotations

import base64
import functools
import os
import socket
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from urllib.parse import unquote, urlsplit

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.streams.tls
import h11

from reel_core import Request, UpstreamError
from reel_core.tools import HOP_BY_HOP, accept_encoding, is_grpc, shown_url

from ._failures import CONNECT_CAUSES, Rule, classify
from ._proxy_env import environment_proxies, proxy_for
from ._upstream_parts import Once as _Once
from ._upstream_parts import Origin as _Origin
from ._upstream_parts import UpstreamFailure
from ._upstream_parts import readable as _readable

if TYPE_CHECKING:
    from ._upstream_h2 import H2Pool

__all__ = [
    "TLS_HINT",
    "AsyncUpstream",
    "UpstreamFailure",
    "UpstreamResponse",
    "environment_proxies",
    "forward_headers",
    "proxy_for",
]

#: Headers never forwarded: one-hop headers, and Reel's own.  ``expect``
#: too: the proxy answered a ``100-continue`` itself, and sends the body
#: with the head.
_DROP = HOP_BY_HOP | {b"host", b"content-length", b"expect"}
#: Bytes asked of the socket per read.
_READ_SIZE = 65536
#: The largest response head read (h11's default is 16 KiB; httpcore's 100).
_MAX_HEAD = 100 * 1024


def forward_headers(request: Request, url: str) -> list[tuple[bytes, bytes]]:
    """The request's headers as sent upstream: credentials intact, one-hop
    and ``x-reel-*`` headers dropped, ``host`` and ``content-length`` set,
    ``accept-encoding`` cut to the codings this install decodes (the core's
    :func:`reel_core.accept_encoding`: no body is stored in one Reel
    cannot read)."""
    headers = [(b"host", _host(url))]
    headers += [
        (k, accept_encoding(v) if k == b"accept-encoding" else v)
        for k, v in request.headers
        if k not in _DROP and not k.startswith(b"x-reel-")
    ]
    if request.body or request.method in ("POST", "PUT", "PATCH"):
        headers.append((b"content-length", str(len(request.body)).encode()))
    return headers


class UpstreamResponse(Protocol):
    """An upstream's response: its head, and its body read with ``chunks()``."""

    status: int
    headers: list[tuple[bytes, bytes]]
    #: The response's trailers (HTTP/2), set once ``chunks()`` is read to its
    #: end; empty for HTTP/1.1 and when none came.
    trailers: list[tuple[bytes, bytes]]

    def chunks(self) -> AsyncGenerator[bytes, None]: ...


@functools.lru_cache(maxsize=1024)
def _host(url: str) -> bytes:
    """The ``host`` header for ``url`` (remembered: a proxy forwards to
    the same few URLs over and over)."""
    return urlsplit(url).netloc.rpartition("@")[2].encode("ascii")  # never the userinfo


@functools.lru_cache(maxsize=1024)
def _origin(url: str) -> tuple[_Origin, str]:
    """The origin of ``url`` and the request target (path and query),
    remembered like :func:`_host` (a bad URL raises each time)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise UpstreamFailure(UpstreamError.PROTOCOL, f"not an http(s) URL: {shown_url(url)}")
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:  # a port that is not a number
        raise UpstreamFailure(UpstreamError.PROTOCOL, f"bad port in {shown_url(url)}") from None
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return (scheme, parts.hostname, port), target


#: Added to every TLS failure: what to set when the upstream's certificate
#: is signed by a CA Reel does not know (a corporate proxy, a private CA).
TLS_HINT = (
    "if a corporate proxy or a private CA signs the upstream's certificate, give the CA "
    "bundle with the proxy's --ca FILE, or set SSL_CERT_FILE (or SSL_CERT_DIR)"
)


def ssl_context(
    ca: str | os.PathLike[str] | None = None, *, alpn: str = "http/1.1"
) -> ssl.SSLContext:
    """What upstream certificates are checked against: the system's CAs
    (OpenSSL reads ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` for them),
    certifi's bundle, and ``ca`` (a PEM file) when given; ``alpn`` the one
    protocol offered (``h2`` for HTTP/2)."""
    context = ssl.create_default_context()
    try:
        import certifi
    except ImportError:  # pragma: no cover - certifi comes with httpcore
        pass
    else:
        context.load_verify_locations(certifi.where())
    if ca is not None:
        context.load_verify_locations(os.fspath(ca))
    context.set_alpn_protocols([alpn])
    return context


class _Proxy:
    """An HTTP proxy in the way: where it is, and its credentials."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme.lower() != "http" or not parts.hostname:
            raise UpstreamFailure(
                UpstreamError.PROTOCOL,
                f"the proxy {shown_url(url)} is not an http:// proxy, the only kind the proxy's "
                "upstream client speaks; point HTTPS_PROXY/HTTP_PROXY at one",
            )
        self.url = shown_url(url)
        self.host = parts.hostname
        try:
            self.port = parts.port or 80
        except ValueError:
            raise UpstreamFailure(UpstreamError.PROTOCOL, f"bad port in {self.url}") from None
        self.headers: list[tuple[bytes, bytes]] = []
        if parts.username is not None:
            secret = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            token = base64.b64encode(secret.encode("utf-8")).decode("ascii")
            self.headers.append((b"proxy-authorization", f"Basic {token}".encode("ascii")))


class _Connection:
    """One keep-alive HTTP/1.1 connection to an origin."""

    def __init__(self, stream: anyio.abc.ByteStream, origin: _Origin) -> None:
        self.stream = stream
        self.origin = origin
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=_MAX_HEAD)
        sock: socket.socket | None = stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
        self._readable = None if sock is None else _readable(sock)
        self._eof = False

    def usable(self) -> bool:
        """Whether this idle connection can carry the next request."""
        return self._readable is not None and not self._readable()

    async def meanwhile(self, work: Callable[[], bool]) -> None:
        """Call ``work`` until it returns False or the answer's first bytes
        are there to read, letting other tasks run between two calls.  The
        socket is polled, not read: anyio reads a connection only while a
        task receives from it, so what the upstream sent waits there (a
        stream without a socket to poll, such as a test's, does no work)."""
        ready = self._readable
        if ready is None:
            return
        while not ready() and work():
            await anyio.lowlevel.checkpoint()

    async def next_event(self, timeout: float | None) -> h11.Event:
        """The next response event, reading as needed; raises
        :class:`UpstreamFailure`.  Each read may take ``timeout`` seconds
        (``None``: the caller's cancel scope bounds them)."""
        while True:
            waiting = self.h11.their_state is h11.SEND_RESPONSE  # no response byte yet
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                if self._eof:
                    raise UpstreamFailure(UpstreamError.CLOSED, _closed(waiting, exc)) from None
                raise UpstreamFailure(UpstreamError.PROTOCOL, str(exc)) from None
            if event is not h11.NEED_DATA:
                assert not isinstance(event, type)  # PAUSED comes after a whole response only
                return event
            if timeout is None:
                self.h11.receive_data(await self._receive())
                continue
            with anyio.move_on_after(timeout) as scope:
                data = await self._receive()
            if scope.cancelled_caught:
                raise UpstreamFailure(UpstreamError.TIMEOUT, "read timed out")
            self.h11.receive_data(data)

    async def _receive(self) -> bytes:
        try:
            return await self.stream.receive(_READ_SIZE)
        except anyio.EndOfStream:
            self._eof = True
            return b""
        except (anyio.BrokenResourceError, OSError) as exc:
            raise UpstreamFailure(UpstreamError.RESET, _reason(exc, "reset")) from None

    def reusable(self) -> bool:
        """After a response: whether the connection may carry another."""
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
            self.h11.start_next_cycle()
            return True
        return False

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            await anyio.aclose_forcefully(self.stream)


async def _tunnel(
    stream: anyio.abc.ByteStream, proxy: _Proxy, where: str, host: str, port: int
) -> None:
    """Ask ``proxy`` for a tunnel to ``host:port`` (``CONNECT``)."""
    authority = (f"[{host}]" if ":" in host else host) + f":{port}"
    conn = h11.Connection(h11.CLIENT)
    ask = h11.Request(
        method="CONNECT",
        target=authority,
        headers=[(b"host", authority.encode("ascii")), *proxy.headers],
    )
    await stream.send((conn.send(ask) or b"") + (conn.send(h11.EndOfMessage()) or b""))
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError as exc:
            raise UpstreamFailure(
                UpstreamError.PROTOCOL, f"the proxy's answer to CONNECT is not HTTP: {exc}{where}"
            ) from None
        if event is h11.NEED_DATA:
            try:
                conn.receive_data(await stream.receive(_READ_SIZE))
            except anyio.EndOfStream:
                conn.receive_data(b"")
            continue
        if isinstance(event, h11.InformationalResponse):
            continue
        if isinstance(event, h11.Response) and 200 <= event.status_code < 300:
            return
        if isinstance(event, h11.Response):
            status = f"{event.status_code} {event.reason.decode('latin-1')}".strip()
            hint = " (check the credentials in the proxy URL)" if event.status_code == 407 else ""
            raise UpstreamFailure(
                UpstreamError.REFUSED,
                f"the proxy refused to tunnel to {authority}: {status}{hint}{where}",
            )
        raise UpstreamFailure(  # ConnectionClosed
            UpstreamError.CLOSED, f"the proxy closed the connection instead of tunnelling{where}"
        )


def _closed(waiting: bool, exc: h11.RemoteProtocolError) -> str:
    if waiting:
        return "the upstream closed the connection without sending a response"
    return f"the upstream closed the connection mid-response: {exc}"


def _reason(exc: BaseException, default: str) -> str:
    cause = exc.__cause__ or exc.__context__ or exc
    return str(cause) or str(exc) or default


async def _write(connection: _Connection, data: bytes) -> None:
    """Write ``data`` (under the caller's timeout).  A failed write is not
    the failure: the server may have answered and closed before reading it
    all (a 413, say); what it answered, or why not, is read next."""
    with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        await connection.stream.send(data)


class _Response:
    def __init__(self, connection: _Connection, head: h11.Response, read_timeout: float) -> None:
        self.status = head.status_code
        self.headers = list(head.headers.raw_items())
        self.trailers: list[tuple[bytes, bytes]] = []  # HTTP/1.1: none
        self._connection = connection
        self._timeout = read_timeout
        self.complete = False

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        while True:
            event = await self._connection.next_event(self._timeout)
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self.complete = True
                return
            else:  # pragma: no cover - h11 gives nothing else mid-response
                raise UpstreamFailure(UpstreamError.PROTOCOL, f"unexpected {event!r}")


#: How a failed connection attempt of this client maps onto
#: :class:`UpstreamError` (its reads and writes that fail are a reset).
CONNECT_RULES = (
    Rule(socket.gaierror, UpstreamError.DNS),
    Rule((ssl.SSLError, ssl.CertificateError), UpstreamError.TLS),
    Rule(anyio.BrokenResourceError, UpstreamError.TLS),  # the TLS handshake broke off
    Rule(OSError, UpstreamError.REFUSED, CONNECT_CAUSES),
)


def _connect_failure(exc: BaseException, where: str = "") -> UpstreamFailure | None:
    """What a failed connection attempt raises (``None``: the exception
    itself, not a failure of the connection); ``where`` names a proxy on
    the way."""
    if isinstance(exc, UpstreamFailure):
        return exc
    if not isinstance(exc, (OSError, anyio.BrokenResourceError)):
        return None
    error = classify(exc, CONNECT_RULES)
    if error is UpstreamError.TLS:
        reason = str(exc) if isinstance(exc, OSError) else ""
        reason = reason or _reason(exc, "the TLS handshake failed")
        return UpstreamFailure(error, f"{reason}{where}; {TLS_HINT}")
    if error is UpstreamError.DNS:
        return UpstreamFailure(error, str(exc) + where)
    return UpstreamFailure(error, _reason(exc, "connection refused") + where)


#: Which variable names the proxy for a scheme key of :func:`environment_proxies`.
_VARIABLES = {"http": "HTTP_PROXY", "https": "HTTPS_PROXY", "all": "ALL_PROXY"}


class AsyncUpstream:
    """Keep-alive connections to upstreams, on the running anyio backend."""

    def __init__(
        self,
        *,
        connect_timeout: float = 10.0,
        read_timeout: float = 120.0,
        max_connections: int = 100,
        ca: str | os.PathLike[str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        """``ca``: a PEM bundle of CAs trusted besides the usual ones.
        ``environ``: where the proxy variables are read (default
        ``os.environ``), at the first forward: a replay never forwards."""
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.max_connections = max_connections
        self.ca = None if ca is None else Path(ca)
        self._environ = environ
        self._proxies: dict[str, str] | None = None
        self._idle: dict[_Origin, list[_Connection]] = {}
        self._open = 0
        self._freed: anyio.Event | None = None
        self._ssl: ssl.SSLContext | None = None
        self._ssl_h2: ssl.SSLContext | None = None
        self._h2: H2Pool | None = None

    @property
    def proxies(self) -> dict[str, str]:
        """``{scheme: proxy URL}`` from the ``*_PROXY`` variables (see
        :func:`environment_proxies`), read when first asked."""
        if self._proxies is None:
            self._proxies = environment_proxies(self._environ)
        return self._proxies

    def _route(self, origin: _Origin) -> tuple[_Proxy, str] | None:
        """The proxy to reach ``origin`` through, and the variable naming it."""
        scheme, host, port = origin
        url = proxy_for(scheme, host, port, self.proxies)
        if url is None:
            return None
        variable = _VARIABLES[scheme if self.proxies.get(scheme) else "all"]
        return _Proxy(url), variable

    def _context(self, alpn: str = "http/1.1") -> ssl.SSLContext:
        context = self._ssl if alpn == "http/1.1" else self._ssl_h2
        if context is None:
            try:
                context = ssl_context(self.ca, alpn=alpn)
            except (OSError, ssl.SSLError) as exc:
                raise UpstreamFailure(
                    UpstreamError.TLS, f"cannot load the CA bundle {self.ca} (--ca): {exc}"
                ) from None
            if alpn == "http/1.1":
                self._ssl = context
            else:
                self._ssl_h2 = context
        return context

    def _h2_pool(self) -> H2Pool:
        """The HTTP/2 connections (made on the first request that needs one)."""
        if self._h2 is None:
            try:
                from ._upstream_h2 import H2Pool
            except ImportError as exc:
                raise UpstreamFailure(UpstreamError.PROTOCOL, str(exc)) from None
            self._h2 = H2Pool(
                functools.partial(self._open_stream, alpn="h2"),
                connect_timeout=self.connect_timeout,
                read_timeout=self.read_timeout,
            )
        return self._h2

    @asynccontextmanager
    async def send(
        self,
        request: Request,
        url: str,
        *,
        waiting: Callable[[], object] | None = None,
        meanwhile: Callable[[], bool] | None = None,
        more: Callable[[], Awaitable[bytes | None]] | None = None,
    ) -> AsyncIterator[UpstreamResponse]:
        """Send ``request`` to ``url``; yields the response whose body is
        read with ``chunks()``.  Raises :class:`UpstreamFailure`.

        ``more``, for a gRPC request only (HTTP/2): ``request.body`` is the
        body's start (a call's first message), and each piece awaiting
        ``more()`` gives goes after it as it comes, while the response
        streams back (a client-streaming or bidirectional call); ``None``
        ends the request.

        ``waiting`` is called once, when the request first waits on the
        network: before a new connection is made, else once the request
        is written (an idle connection reused).  Until then nothing waits,
        so a caller leaves there what the request does not need before it
        goes (the proxy starts watching its client).

        ``meanwhile`` is work to do while the answer is on its way, in
        steps: once the request is written (HTTP/1.1), it is called until
        it returns False (nothing is left) or the answer's first bytes are
        there to read, other tasks running between two calls; the answer
        waits for one step at most (the proxy builds the recordings
        waiting).  No task and no cancel scope of its own: the caller's.
        The request is written and its answer's head read under one
        timeout, ``read_timeout``: one cancel scope, not two."""
        origin, target = _origin(url)
        headers = forward_headers(request, url)
        if is_grpc(request.header("content-type")):  # HTTP/2 only
            if more is not None:  # the body's length is not known: no content-length
                headers = [(k, v) for k, v in headers if k != b"content-length"]
            pool = self._h2_pool()
            hook = _Once(waiting)
            sent = pool.send(request.method, origin, target, headers, request.body, hook, more)
            async with sent as h2:
                yield h2
            return
        if more is not None:
            raise ValueError("a request body sent as it comes goes over HTTP/2 (gRPC) only")
        route = self._route(origin)
        if route is not None and origin[0] == "http":
            # through an HTTP proxy: the absolute form, and its credentials
            target = f"http://{urlsplit(url).netloc.rpartition('@')[2]}{target}"
            headers += route[0].headers
        try:
            head = h11.Request(method=request.method, target=target, headers=headers)
        except h11.LocalProtocolError as exc:
            raise UpstreamFailure(UpstreamError.PROTOCOL, str(exc)) from None
        hook = _Once(waiting)
        connection = await self._take(origin, hook)
        response: _Response | None = None
        try:
            # One write for the whole request: the upstream wakes up once.
            data = connection.h11.send(head) or b""
            if request.body:
                data += connection.h11.send(h11.Data(data=request.body)) or b""
            data += connection.h11.send(h11.EndOfMessage()) or b""
            written = False
            with anyio.move_on_after(self.read_timeout) as scope:
                await _write(connection, data)
                written = True
                hook()
                if meanwhile is not None:
                    await connection.meanwhile(meanwhile)
                event = await connection.next_event(None)
                while isinstance(event, h11.InformationalResponse):  # 100 Continue, 103...
                    event = await connection.next_event(None)
            if scope.cancelled_caught:
                what = "read" if written else "write"
                raise UpstreamFailure(UpstreamError.TIMEOUT, f"{what} timed out")
            if not isinstance(event, h11.Response):  # pragma: no cover - h11 allows no other
                raise UpstreamFailure(UpstreamError.PROTOCOL, f"unexpected {event!r}")
            response = _Response(connection, event, self.read_timeout)
            yield response
        finally:
            if response is not None and response.complete and connection.reusable():
                self._idle.setdefault(origin, []).append(connection)
                self._wake()
            else:
                await self._discard(connection)

    async def dial(self, url: str) -> tuple[anyio.abc.ByteStream, str]:
        """A connection of its own to ``url``'s origin (a WebSocket session
        holds it as long as it lasts: it is neither pooled nor counted in
        ``max_connections``), and the ``Host`` to name.  The same routing as
        :meth:`send`: TLS for ``https``, the CA bundle, a proxy from the
        environment (always a ``CONNECT`` tunnel: an upgraded connection is
        not an exchange a proxy can forward).  Raises :class:`UpstreamFailure`."""
        origin, _target = _origin(url)
        return await self._open_stream(origin), urlsplit(url).netloc.rpartition("@")[2]

    async def _open_stream(
        self, origin: _Origin, *, alpn: str = "http/1.1"
    ) -> anyio.abc.ByteStream:
        """A connection to ``origin`` of the caller's own (:meth:`dial`, the
        HTTP/2 pool): TLS offering ``alpn`` for ``https``, a proxy from the
        environment always through a ``CONNECT`` tunnel.  Raises
        :class:`UpstreamFailure`."""
        scheme, host, port = origin
        route = self._route(origin)
        where = "" if route is None else f" (through the proxy {route[0].url}, from {route[1]})"
        with anyio.move_on_after(self.connect_timeout):
            try:
                stream: anyio.abc.ByteStream
                if route is not None:
                    proxy = route[0]
                    try:
                        stream = await anyio.connect_tcp(proxy.host, proxy.port)
                    except OSError as exc:
                        raise UpstreamFailure(
                            classify(exc, CONNECT_RULES),
                            f"cannot reach the proxy: {_reason(exc, 'connection refused')}{where}",
                        ) from None
                    try:
                        await _tunnel(stream, proxy, where, host, port)
                        if scheme == "https":
                            stream = await anyio.streams.tls.TLSStream.wrap(
                                stream, hostname=host, ssl_context=self._context(alpn)
                            )
                    except BaseException:
                        await anyio.aclose_forcefully(stream)
                        raise
                elif scheme == "https":
                    stream = await anyio.connect_tcp(
                        host, port, ssl_context=self._context(alpn), tls_hostname=host
                    )
                else:
                    stream = await anyio.connect_tcp(host, port)
            except BaseException as exc:
                failure = _connect_failure(exc, where)
                if failure is None:
                    raise  # a cancellation (the connect timeout's own), or a bug
                raise failure from None
            return stream
        raise UpstreamFailure(
            UpstreamError.TIMEOUT, f"connecting to {host}:{port} timed out{where}"
        )

    async def _take(self, origin: _Origin, waiting: _Once) -> _Connection:
        """An idle connection to ``origin`` (the latest used), else a new one
        once fewer than ``max_connections`` are open (``waiting`` is called
        before the request waits for one)."""
        while True:
            idle = self._idle.get(origin)
            while idle:
                connection = idle.pop()
                if connection.usable():
                    return connection
                await self._discard(connection)  # the server closed it while idle
            waiting()
            if self._open < self.max_connections:
                return await self._connect(origin)
            spare = next((c for idle in self._idle.values() for c in idle), None)
            if spare is not None:  # an idle connection elsewhere makes room
                self._idle[spare.origin].remove(spare)
                await self._discard(spare)
                continue
            if self._freed is None:
                self._freed = anyio.Event()
            with anyio.move_on_after(self.connect_timeout) as waited:
                await self._freed.wait()
            if waited.cancelled_caught:
                raise UpstreamFailure(
                    UpstreamError.TIMEOUT,
                    f"no free connection in {self.connect_timeout:g} s "
                    f"({self.max_connections} are busy)",
                )

    async def _connect(self, origin: _Origin) -> _Connection:
        scheme, host, port = origin
        route = self._route(origin)
        where = "" if route is None else f" (through the proxy {route[0].url}, from {route[1]})"
        self._open += 1
        with anyio.move_on_after(self.connect_timeout):
            try:
                stream: anyio.abc.ByteStream
                if route is not None:
                    stream = await self._through(route[0], where, origin)
                elif scheme == "https":
                    stream = await anyio.connect_tcp(
                        host, port, ssl_context=self._context(), tls_hostname=host
                    )
                else:
                    stream = await anyio.connect_tcp(host, port)
            except BaseException as exc:
                self._freeing()
                failure = _connect_failure(exc, where)
                if failure is None:
                    raise  # a cancellation (the connect timeout's own), or a bug
                raise failure from None
            return _Connection(stream, origin)
        raise UpstreamFailure(
            UpstreamError.TIMEOUT, f"connecting to {host}:{port} timed out{where}"
        )

    async def _through(self, proxy: _Proxy, where: str, origin: _Origin) -> anyio.abc.ByteStream:
        """A connection to ``origin`` through ``proxy``: the proxy's own for
        an http upstream; a ``CONNECT`` tunnel, then TLS, for an https one."""
        scheme, host, port = origin
        try:
            stream: anyio.abc.ByteStream = await anyio.connect_tcp(proxy.host, proxy.port)
        except OSError as exc:
            raise UpstreamFailure(
                classify(exc, CONNECT_RULES),
                f"cannot reach the proxy: {_reason(exc, 'connection refused')}{where}",
            ) from None
        if scheme == "http":
            return stream
        try:
            await _tunnel(stream, proxy, where, host, port)
            return await anyio.streams.tls.TLSStream.wrap(
                stream, hostname=host, ssl_context=self._context()
            )
        except BaseException:
            await anyio.aclose_forcefully(stream)
            raise

    def _freeing(self) -> None:
        """One connection fewer is open."""
        self._open -= 1
        self._wake()

    def _wake(self) -> None:
        """Wake the requests waiting for a connection: one was closed or put back."""
        if self._freed is not None:
            self._freed.set()
            self._freed = None

    async def _discard(self, connection: _Connection) -> None:
        self._freeing()
        await connection.aclose()

    @property
    def unused(self) -> bool:
        """Nothing was opened, or all of it was closed: :meth:`aclose`
        would have nothing to do (a replay never forwards)."""
        return self._open == 0 and self._h2 is None

    async def aclose(self) -> None:
        if self._h2 is not None:
            await self._h2.aclose()
        idle = [c for connections in self._idle.values() for c in connections]
        self._idle.clear()
        for connection in idle:
            await self._discard(connection)
