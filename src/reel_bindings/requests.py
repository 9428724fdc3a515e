"""A transport adapter for ``requests`` sessions (mounted, never patched)::

    import requests
    from reel_bindings.requests import Adapter

    session = requests.Session()
    session.mount("https://", Adapter("tests/cassettes/chat.jsonl"))
    session.mount("http://", session.adapters["https://"])

With ``stream=True``, ``iter_content`` and ``iter_lines`` yield replayed
frames at their recorded offsets.  A miss answers the 404 miss report;
``strict=True`` raises :class:`reel_core.MissError` instead.  In record
mode an adapter forwards through the process's ``HTTPAdapter`` (a session
made per test reuses the connections of the ones before it; see
:func:`process_adapter`), or the ``upstream=`` given.  Needs the
``requests`` package (not a dependency of Reel).
"""

from __future__ import annotations

import dataclasses
import os
import socket
import ssl
import time
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from reel_core import Cut, Event, Request, UpstreamError
from reel_core.tools import ContentDecoder

from ._failures import CONNECT_CAUSES, EXCHANGE_CAUSES, Rule, classify
from ._files import CassetteFile
from ._inprocess import Binding, Upstreaming, given_upstream
from ._options import BindingOptions, Options
from ._per_process import PerProcess
from ._sync.relay import relay
from ._sync.replay import frames
from ._transport import decodable

if TYPE_CHECKING:
    from typing_extensions import Unpack

try:
    import requests
    from requests.adapters import BaseAdapter, HTTPAdapter
    from requests.structures import CaseInsensitiveDict
    from requests.utils import get_encoding_from_headers
    from urllib3 import exceptions as urllib3_errors
    from urllib3.exceptions import HTTPError as Urllib3Error
    from urllib3.exceptions import ProtocolError
except ImportError as exc:  # pragma: no cover - exercised without requests installed
    raise ImportError(
        "reel_bindings.requests needs the requests package: pip install requests"
    ) from exc

__all__ = ["Adapter", "process_adapter"]

#: The process's adapter for forwards, once made (see :func:`process_adapter`).
_SHARED: PerProcess[HTTPAdapter] = PerProcess(HTTPAdapter.close)


def process_adapter() -> HTTPAdapter:
    """The process's ``HTTPAdapter``, which every Reel adapter forwards
    through unless given an ``upstream=`` of its own.

    A session made per test (or per call) mounts a Reel adapter of its own:
    with an ``HTTPAdapter`` each, every recorded request through a new one
    opened a connection of its own (a TCP, and to a provider a TLS,
    handshake before its first byte).  Its pools are keyed by scheme, host,
    port and TLS settings, as any session's are.  A closed adapter leaves it
    open for the next; it closes as the process exits, and a forked child
    makes its own (:class:`PerProcess`)."""
    return _SHARED.get("requests", HTTPAdapter)


#: How requests' exceptions (and urllib3's, and the socket's under them)
#: map onto :class:`UpstreamError`, first match first.  urllib3's
#: ``NewConnectionError`` is a ``ConnectTimeoutError`` and requests'
#: ``ConnectTimeout`` a ``ConnectionError``: the order tells them apart.
_RULES = (
    Rule(
        (requests.exceptions.SSLError, urllib3_errors.SSLError, ssl.SSLError, ssl.CertificateError),
        UpstreamError.TLS,
    ),
    Rule((urllib3_errors.NameResolutionError, socket.gaierror), UpstreamError.DNS),
    Rule(urllib3_errors.NewConnectionError, UpstreamError.REFUSED, CONNECT_CAUSES),
    Rule((requests.Timeout, urllib3_errors.TimeoutError, TimeoutError), UpstreamError.TIMEOUT),
    # refused, unresolved, or broken before the response's head
    Rule(requests.ConnectionError, UpstreamError.REFUSED, CONNECT_CAUSES + EXCHANGE_CAUSES),
    # broken mid-body
    Rule(
        (requests.exceptions.ChunkedEncodingError, urllib3_errors.ProtocolError),
        UpstreamError.PROTOCOL,
        EXCHANGE_CAUSES,
    ),
    Rule((requests.RequestException, Urllib3Error), UpstreamError.PROTOCOL),
    Rule(ConnectionRefusedError, UpstreamError.REFUSED),
    Rule(OSError, UpstreamError.RESET, EXCHANGE_CAUSES),
)


def _failure(exc: BaseException) -> UpstreamError:
    return classify(exc, _RULES)


def _relayed(exc: Exception) -> tuple[UpstreamError, str] | None:
    """What the relay feeds for an exception: urllib3's, and the socket's."""
    if isinstance(exc, (Urllib3Error, OSError)):
        return _failure(exc), str(exc)
    return None


def _body_bytes(body: object) -> bytes:
    if body is None:
        return b""
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode("utf-8")
    if hasattr(body, "read"):
        data = body.read()
        return data if isinstance(data, bytes) else str(data).encode("utf-8")
    return b"".join(c if isinstance(c, bytes) else str(c).encode() for c in body)  # type: ignore[attr-defined]


def _cut_error(cut: Cut) -> ProtocolError:
    return ProtocolError(f"Connection broken: recorded cut ({cut.error})", cut.detail)


class _ReplayRaw:
    """What ``response.raw`` is for a replay: frames on their schedule (the
    sync transport's, ``_sync/replay.py``)."""

    def __init__(self, events: Iterable[Event], start: float) -> None:
        self._events = events
        self._start = start
        self.closed = False

    def stream(self, amt: int = 65536, decode_content: bool = True) -> Iterator[bytes]:
        yield from frames(self._events, self._start, _cut_error)
        self.closed = True

    def read(self, amt: int | None = None, decode_content: bool = True) -> bytes:
        return b"".join(self.stream())

    def release_conn(self) -> None:
        self.closed = True

    def close(self) -> None:
        self.closed = True


class _RelayRaw:
    """``response.raw`` of a forward: the upstream's bytes, fed to the core
    as they pass (encoded), given to the client decoded when it asks."""

    def __init__(self, raw: Any, feed: Upstreaming, encoding: str) -> None:
        self._raw = raw
        self._feed = feed
        self._encoding = encoding
        self._active: Generator[bytes, None, None] | None = None
        self.closed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)

    def stream(self, amt: int = 65536, decode_content: bool = True) -> Iterator[bytes]:
        self._active = self._stream(amt, decode_content)
        return self._active

    def _stream(self, amt: int, decode_content: bool) -> Generator[bytes, None, None]:
        decoder = ContentDecoder(self._encoding if decode_content else "identity")
        chunks = relay(self._raw.stream(amt, decode_content=False), self._feed, _relayed)
        try:
            for chunk in chunks:
                out = decoder.decode(chunk)
                if out:
                    yield out
        finally:
            chunks.close()  # a reader that stopped early: the relay records the rest
        tail = decoder.flush()
        if tail:
            yield tail
        self.closed = True

    def read(self, amt: int | None = None, decode_content: bool = True) -> bytes:
        return b"".join(self.stream(decode_content=decode_content))

    def release_conn(self) -> None:
        self._raw.release_conn()

    def close(self) -> None:
        if self._active is not None:
            self._active.close()  # a reader that stopped early: record the rest
        self.closed = True
        self._raw.close()


def _fields(headers: Sequence[tuple[bytes, bytes]]) -> dict[str, str]:
    """Replayed headers as requests shows a live response's: a name once,
    the values of a repeated one (two ``link`` headers, ``vary``) joined
    with ``", "`` in their order, as urllib3 joins them.  (The core hands
    them out lower-cased.)"""
    fields = {k.decode("latin-1"): v.decode("latin-1") for k, v in headers}
    if len(fields) == len(headers):  # nearly every response: no name twice
        return fields
    fields = {}
    for k, v in headers:
        name, value = k.decode("latin-1"), v.decode("latin-1")
        fields[name] = f"{fields[name]}, {value}" if name in fields else value
    return fields


class Adapter(Binding, BaseAdapter):
    """A ``requests`` transport adapter backed by a cassette."""

    def __init__(
        self,
        cassette: str | os.PathLike[str] | CassetteFile,
        options: Options | None = None,
        **kwargs: Unpack[BindingOptions],
    ) -> None:
        given = Options.of(kwargs, options)
        if given.http2:
            raise ValueError(
                "the requests adapter speaks HTTP/1.1 only (urllib3 has no HTTP/2): "
                "http2=True is for the httpx transports (reel_bindings.httpcore)"
            )
        upstream = given.upstream
        base, pool = given_upstream(
            upstream,
            "a requests adapter (requests.adapters.HTTPAdapter()) to forward through",
            isinstance(upstream, BaseAdapter),
        )
        super().__init__(cassette, dataclasses.replace(given, upstream=base))
        self._upstream = pool if isinstance(pool, BaseAdapter) else None

    def send(
        self,
        request: requests.PreparedRequest,
        stream: bool = False,
        timeout: Any = None,
        verify: bool | str = True,
        cert: Any = None,
        proxies: Mapping[str, str] | None = None,
    ) -> requests.Response:
        url = urlsplit(request.url or "/")
        target = (url.path or "/") + (f"?{url.query}" if url.query else "")
        body = _body_bytes(request.body)
        if request.body is not None and not isinstance(request.body, bytes):
            # a file or an iterator is read once: what goes upstream is what was read
            request.body = body
        headers = [(k, v) for k, v in request.headers.items()]
        decision = self.player.decide(
            Request(
                request.method or "GET",
                target,
                tuple(
                    (k.encode("latin-1"), v.encode("latin-1") if isinstance(v, str) else v)
                    for k, v in headers
                ),
                body,
            )
        )
        if isinstance(decision, Upstreaming):
            return self._forward(request, decision, stream, timeout, verify, cert, proxies)
        self._check(decision)
        response = requests.Response()
        response.status_code = decision.head.status
        response.headers = CaseInsensitiveDict(_fields(decision.head.headers))
        response.encoding = get_encoding_from_headers(response.headers)
        response.raw = _ReplayRaw(decision.events, time.monotonic())
        response.reason = ""
        response.url = request.url or ""
        response.request = request
        response.connection = self  # type: ignore[assignment]  # what build_response does
        if not stream:
            response.content  # noqa: B018 - read it now, as HTTPAdapter users expect
        return response

    def _forward(
        self,
        request: requests.PreparedRequest,
        feed: Upstreaming,
        stream: bool,
        timeout: Any,
        verify: bool | str,
        cert: Any,
        proxies: Mapping[str, str] | None,
    ) -> requests.Response:
        upstream = self._upstream if self._upstream is not None else process_adapter()
        if feed.forward.url is not None:  # an upstream base URL given: sent there
            request = request.copy()
            request.url = feed.forward.url
            request.headers.pop("Host", None)
        try:
            response = upstream.send(
                decodable(request),
                stream=True,
                timeout=timeout,
                verify=verify,
                cert=cert,
                proxies=proxies,
            )
        except (requests.RequestException, OSError) as exc:
            feed.error(_failure(exc), str(exc))
            raise
        feed.head(
            response.status_code,
            [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.raw.headers.items()],
        )
        encoding = response.headers.get("content-encoding", "identity")
        response.raw = _RelayRaw(response.raw, feed, encoding)
        if not stream:
            response.content  # noqa: B018
        return response

    def close(self) -> None:
        self._unfreeze()
        if self._upstream is not None:
            self._upstream.close()
