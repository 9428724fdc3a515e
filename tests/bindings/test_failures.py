"""Each HTTP library's exceptions map onto UpstreamError by type, at the
edge of the binding that calls it: real failures (a name that does not
resolve, a refused port, a server that closes, resets, sends garbage or
stalls, a TLS handshake that fails), raised by each library itself, and
the exception types that are hard to provoke, built by hand."""

from __future__ import annotations

import http.client
import socket
import socketserver
import ssl
import struct
import threading
from collections.abc import Callable, Iterator
from types import ModuleType

import anyio
import httpx
import httpx2
import pytest
import requests
import urllib3.exceptions

from reel_bindings import _failures, _transport
from reel_bindings import requests as reel_requests
from reel_bindings._upstream import CONNECT_RULES, _connect_failure
from reel_core import UpstreamError

E = UpstreamError

#: What each fault is, whichever library met it.
FAULTS = {
    "dns": E.DNS,
    "refused": E.REFUSED,
    "tls": E.TLS,
    "close": E.CLOSED,
    "partial": E.CLOSED,
    "garbage": E.PROTOCOL,
    "reset": E.RESET,
    "stall": E.TIMEOUT,
}


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock: socket.socket = self.request
        behaviour = self.server.behaviour  # type: ignore[attr-defined]
        if behaviour == "tls":  # a TLS client's hello gets the connection closed
            return
        sock.recv(65536)
        if behaviour == "partial":
            sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nabc")
        elif behaviour == "garbage":
            sock.sendall(b"NOT HTTP\r\n\r\n")
        elif behaviour == "reset":
            sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nabc")
            # linger 0: the close sends a reset, not a FIN
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
        elif behaviour == "stall":
            self.server.release.wait()  # type: ignore[attr-defined]


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    block_on_close = False


@pytest.fixture(scope="module")
def urls() -> Iterator[dict[str, str]]:
    servers = []
    found = {"dns": "http://reel-no-such-host.invalid/"}
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    found["refused"] = f"http://127.0.0.1:{free.getsockname()[1]}/"
    free.close()
    for behaviour in ("tls", "close", "partial", "garbage", "reset", "stall"):
        server = _Server(("127.0.0.1", 0), _Handler)
        server.behaviour = behaviour  # type: ignore[attr-defined]
        server.release = threading.Event()  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        scheme = "https" if behaviour == "tls" else "http"
        found[behaviour] = f"{scheme}://127.0.0.1:{server.server_address[1]}/"
    yield found
    for server in servers:
        server.release.set()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()


def _timeout(fault: str) -> float:
    """Only the stall waits for the timeout: a short one keeps it quick. Every
    other fault fails on its own, and a loaded machine may take longer than
    that short timeout to do a TLS handshake (which would read as a stall)."""
    return 0.3 if fault == "stall" else 30.0


def _raised(call: Callable[[], object]) -> Exception:
    try:
        call()
    except Exception as exc:
        return exc
    raise AssertionError("no exception")


@pytest.mark.parametrize("family", [httpx, httpx2], ids=lambda f: f.__name__)
@pytest.mark.parametrize("fault", FAULTS)
def test_httpx_failures_map_by_type(urls: dict[str, str], family: ModuleType, fault: str) -> None:
    def call() -> None:
        with family.Client(timeout=_timeout(fault)) as client:
            client.get(urls[fault]).read()

    exc = _raised(call)
    assert isinstance(exc, family.TransportError)
    assert _transport.failure_of(family, exc) is FAULTS[fault], repr(exc)


@pytest.mark.anyio
@pytest.mark.parametrize("family", [httpx, httpx2], ids=lambda f: f.__name__)
@pytest.mark.parametrize("fault", FAULTS)
async def test_httpx_async_failures_map_by_type(
    urls: dict[str, str], family: ModuleType, fault: str
) -> None:
    async def call() -> None:
        async with family.AsyncClient(timeout=_timeout(fault)) as client:
            await (await client.get(urls[fault])).aread()

    with pytest.raises(family.TransportError) as raised:
        await call()
    assert _transport.failure_of(family, raised.value) is FAULTS[fault], repr(raised.value)


@pytest.mark.parametrize("fault", FAULTS)
def test_requests_failures_map_by_type(urls: dict[str, str], fault: str) -> None:
    def call() -> None:
        with requests.Session() as session:
            session.get(urls[fault], timeout=_timeout(fault)).close()

    exc = _raised(call)
    assert reel_requests._failure(exc) is FAULTS[fault], repr(exc)


@pytest.mark.parametrize("fault", ["partial", "reset"])
def test_urllib3_failures_mid_body_map_by_type(urls: dict[str, str], fault: str) -> None:
    """What the requests adapter's relay sees: urllib3's own, unwrapped."""
    with requests.Session() as session:
        response = session.get(urls[fault], stream=True, timeout=_timeout(fault))
        exc = _raised(lambda: b"".join(response.raw.stream(65536, decode_content=False)))
        response.close()
    assert isinstance(exc, (urllib3.exceptions.HTTPError, OSError))
    assert reel_requests._failure(exc) is FAULTS[fault], repr(exc)


def _req(family: ModuleType) -> object:
    return family.Request("GET", "http://upstream.test/")


@pytest.mark.parametrize("family", [httpx, httpx2], ids=lambda f: f.__name__)
@pytest.mark.parametrize(
    ("name", "cause", "error"),
    [
        ("ConnectTimeout", None, E.TIMEOUT),
        ("ReadTimeout", None, E.TIMEOUT),
        ("WriteTimeout", None, E.TIMEOUT),
        ("PoolTimeout", None, E.TIMEOUT),
        ("ConnectError", ConnectionRefusedError(111, "refused"), E.REFUSED),
        ("ConnectError", socket.gaierror(-2, "Name or service not known"), E.DNS),
        ("ConnectError", ssl.SSLCertVerificationError("certificate verify failed"), E.TLS),
        ("ProxyError", None, E.REFUSED),
        ("ReadError", ConnectionResetError(104, "reset"), E.RESET),
        ("WriteError", BrokenPipeError(32, "broken pipe"), E.RESET),
        ("CloseError", None, E.RESET),
        ("RemoteProtocolError", None, E.PROTOCOL),
        ("LocalProtocolError", None, E.PROTOCOL),
        ("UnsupportedProtocol", None, E.PROTOCOL),
        ("TransportError", None, E.PROTOCOL),
    ],
)
def test_every_httpx_exception_type(
    family: ModuleType, name: str, cause: BaseException | None, error: UpstreamError
) -> None:
    exc = getattr(family, name)("it failed", request=_req(family))
    exc.__cause__ = cause
    assert _transport.failure_of(family, exc) is error


@pytest.mark.parametrize(
    ("exc", "error"),
    [
        (requests.ConnectTimeout("x"), E.TIMEOUT),
        (requests.ReadTimeout("x"), E.TIMEOUT),
        (requests.exceptions.SSLError("x"), E.TLS),
        (requests.exceptions.ProxyError("x"), E.REFUSED),
        (requests.ConnectionError(ConnectionResetError(104, "reset")), E.RESET),
        (requests.ConnectionError("x"), E.REFUSED),
        (requests.exceptions.ChunkedEncodingError("x"), E.PROTOCOL),
        (requests.exceptions.ContentDecodingError("x"), E.PROTOCOL),
        (requests.exceptions.InvalidURL("x"), E.PROTOCOL),
        (urllib3.exceptions.ReadTimeoutError(None, "/", "read timed out"), E.TIMEOUT),  # type: ignore[arg-type]
        (urllib3.exceptions.ConnectTimeoutError("x"), E.TIMEOUT),
        (urllib3.exceptions.NewConnectionError(None, "refused"), E.REFUSED),  # type: ignore[arg-type]
        (urllib3.exceptions.NameResolutionError("h", None, socket.gaierror()), E.DNS),  # type: ignore[arg-type]
        (urllib3.exceptions.SSLError("x"), E.TLS),
        (urllib3.exceptions.ProtocolError("broken", http.client.IncompleteRead(b"")), E.CLOSED),
        (urllib3.exceptions.ProtocolError("broken", ConnectionResetError()), E.RESET),
        (urllib3.exceptions.ProtocolError("aborted", http.client.BadStatusLine("")), E.PROTOCOL),
        (urllib3.exceptions.DecodeError("x"), E.PROTOCOL),
        (ConnectionRefusedError(), E.REFUSED),
        (ConnectionResetError(), E.RESET),
        (TimeoutError(), E.TIMEOUT),
        (OSError("broken"), E.RESET),
    ],
    ids=repr,
)
def test_every_requests_exception_type(exc: BaseException, error: UpstreamError) -> None:
    assert reel_requests._failure(exc) is error


@pytest.mark.parametrize(
    ("exc", "error", "detail"),
    [
        (socket.gaierror(-2, "Name or service not known"), E.DNS, "not known"),
        (ssl.SSLCertVerificationError("certificate verify failed"), E.TLS, "--ca"),
        (anyio.BrokenResourceError(), E.TLS, "TLS handshake failed"),
        (ConnectionRefusedError(111, "Connection refused"), E.REFUSED, "refused"),
        (OSError("All connection attempts failed"), E.REFUSED, "attempts failed"),
    ],
    ids=repr,
)
def test_proxy_connect_failures_map_by_type(
    exc: BaseException, error: UpstreamError, detail: str
) -> None:
    assert _failures.classify(exc, CONNECT_RULES) is error
    failure = _connect_failure(exc, " (through x)")
    assert failure is not None
    assert failure.error is error
    assert detail in failure.detail
    assert failure.detail.count("(through x)") == 1


def test_an_unknown_exception_is_a_protocol_failure() -> None:
    class Odd(Exception):
        pass

    assert _transport.failure_of(httpx, Odd("?")) is E.PROTOCOL
    assert reel_requests._failure(Odd("?")) is E.PROTOCOL
    assert _failures.classify(Odd("?"), CONNECT_RULES) is E.PROTOCOL
    assert _connect_failure(Odd("?")) is None  # not a connection failure: raised as it is


def test_a_chain_that_loops_ends() -> None:
    first, second = OSError("a"), OSError("b")
    first.__cause__, second.__cause__ = second, first
    assert list(_failures.chain(first)) == [first, second]
