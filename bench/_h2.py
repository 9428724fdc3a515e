"""HTTP/2 for the benchmarks: the bare server (the peer) and the load generator.

``H2Fixed`` is the peer of the proxy's HTTP/2 replay figures: the least an
HTTP/2 server does, python-hyper's h2 on anyio (asyncio or trio), answering
every stream with one fixed response as soon as its request ended: JSON
under the headers the recorded answers carry, or with ``grpc`` a gRPC
answer (one length-prefixed message, then the ``grpc-status: 0`` trailers).
No matching, no cassette, one write per read's worth of answers.

``load`` keeps ``streams`` requests in flight on each of ``connections``
HTTP/2 connections (h2c with prior knowledge), h2 on a blocking socket in
one thread, and times each from its send to its stream's end.  h2's client
costs more Python per request than ``_loadgen``'s HTTP/1.1 one; it is the
same for both servers, and the figure is their ratio.
"""

from __future__ import annotations

import selectors
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import anyio
import anyio.abc
import h2.config
import h2.connection
import h2.events
import h2.exceptions

from ._answers import RESPONSE_HEADERS
from ._loadgen import LoadResult, connect

__all__ = ["H2Fixed", "grpc_request", "h2_request", "load"]

#: One request: its header list and its body.
H2Request = tuple[list[tuple[bytes, bytes]], bytes]


class H2Fixed:
    """A bare h2 server answering every stream with one fixed response."""

    def __init__(self, body: bytes, *, grpc: bool = False) -> None:
        if grpc:
            self.head = [(b":status", b"200"), (b"content-type", b"application/grpc")]
            self.body = b"\x00" + len(body).to_bytes(4, "big") + body
            self.trailers: list[tuple[bytes, bytes]] | None = [(b"grpc-status", b"0")]
        else:
            self.head = [(b":status", b"200")]
            self.head += [(k.encode(), v.encode()) for k, v in RESPONSE_HEADERS]
            self.head.append((b"content-length", str(len(body)).encode()))
            self.body, self.trailers = body, None

    async def handle(self, stream: anyio.abc.SocketStream) -> None:
        config = h2.config.H2Configuration(client_side=False, header_encoding=None)
        conn = h2.connection.H2Connection(config=config)
        conn.initiate_connection()
        try:
            await stream.send(conn.data_to_send())
            while True:
                try:
                    data = await stream.receive(65536)
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    return
                for event in conn.receive_data(data):
                    if isinstance(event, h2.events.DataReceived):
                        size = event.flow_controlled_length or 0
                        conn.acknowledge_received_data(size, event.stream_id or 0)
                    elif isinstance(event, h2.events.StreamEnded):
                        self._answer(conn, event.stream_id or 0)
                out = conn.data_to_send()
                if out:
                    await stream.send(out)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, h2.exceptions.ProtocolError):
            return
        finally:
            await anyio.aclose_forcefully(stream)

    def _answer(self, conn: h2.connection.H2Connection, sid: int) -> None:
        conn.send_headers(sid, self.head)
        if self.trailers is None:
            conn.send_data(sid, self.body, end_stream=True)
        else:
            conn.send_data(sid, self.body)
            conn.send_headers(sid, self.trailers, end_stream=True)


def h2_request(url: str, path: str, body: bytes, headers: Sequence[tuple[str, str]]) -> H2Request:
    """A POST of ``body`` as an HTTP/2 header list and body."""
    head = [
        (b":method", b"POST"),
        (b":path", path.encode()),
        (b":scheme", b"http"),
        (b":authority", urlsplit(url).netloc.encode()),
        *[(k.encode(), v.encode()) for k, v in headers],
    ]
    return head, body


def grpc_request(url: str, path: str, message: bytes) -> H2Request:
    """A unary gRPC call of ``message`` as grpcio sends it."""
    headers = [("content-type", "application/grpc"), ("te", "trailers")]
    return h2_request(url, path, b"\x00" + len(message).to_bytes(4, "big") + message, headers)


@dataclass
class _Conn:
    sock: socket.socket
    h2: h2.connection.H2Connection
    #: Each open stream's send time.
    sent: dict[int, float] = field(default_factory=dict)
    #: Each open stream's status (an error unless 200, and a gRPC status 0).
    ok: dict[int, bool] = field(default_factory=dict)
    next: int = 0


def load(
    url: str,
    requests: Sequence[H2Request],
    *,
    connections: int,
    streams: int,
    duration: float,
    warmup: float = 0.3,
) -> LoadResult:
    """Keep ``streams`` requests in flight on each of ``connections``
    connections for ``warmup`` + ``duration`` seconds; time the last
    ``duration``."""
    selector = selectors.DefaultSelector()
    clock = time.perf_counter
    count = len(requests)
    conns: list[_Conn] = []
    for i in range(connections):
        config = h2.config.H2Configuration(client_side=True, header_encoding=None)
        conn = _Conn(connect(url), h2.connection.H2Connection(config=config), next=i)
        conn.h2.initiate_connection()
        conn.h2.increment_flow_control_window(1 << 24)
        conns.append(conn)
        selector.register(conn.sock, selectors.EVENT_READ, conn)

    def send(conn: _Conn) -> None:
        head, body = requests[conn.next % count]
        conn.next += connections
        sid = conn.h2.get_next_available_stream_id()
        conn.h2.send_headers(sid, head)
        conn.h2.send_data(sid, body, end_stream=True)
        conn.sent[sid] = clock()
        conn.ok[sid] = False

    start = clock()
    measure_from = start + warmup
    stop = measure_from + duration
    result = LoadResult(duration)
    for conn in conns:
        for _ in range(streams):
            send(conn)
        conn.sock.sendall(conn.h2.data_to_send())
    try:
        while (now := clock()) < stop:
            for key, _ in selector.select(timeout=stop - now):
                conn = key.data
                data = conn.sock.recv(1 << 18)
                if not data:
                    raise ConnectionError("the server closed an HTTP/2 connection")
                for event in conn.h2.receive_data(data):
                    sid = getattr(event, "stream_id", 0)
                    if isinstance(event, h2.events.ResponseReceived):
                        conn.ok[sid] = dict(event.headers or ()).get(b":status") == b"200"
                    elif isinstance(event, h2.events.TrailersReceived):
                        status = dict(event.headers or ()).get(b"grpc-status")
                        conn.ok[sid] = conn.ok[sid] and status == b"0"
                    elif isinstance(event, h2.events.DataReceived):
                        size = event.flow_controlled_length or 0
                        conn.h2.acknowledge_received_data(size, sid)
                    elif isinstance(event, h2.events.StreamEnded):
                        done = clock()
                        sent = conn.sent.pop(sid)
                        if not conn.ok.pop(sid):
                            result.errors += 1
                        if done >= measure_from:
                            result.latencies.append(done - sent)
                        send(conn)
                conn.sock.sendall(conn.h2.data_to_send())
    finally:
        for conn in conns:
            selector.unregister(conn.sock)
            conn.sock.close()
        selector.close()
    result.duration = min(clock(), stop) - measure_from
    return result
