"""A small HTTP/1.1 load generator on raw sockets (no dependency, no event
loop: one thread, ``selectors``), and blocking clients that time each byte.

The load generator keeps ``connections`` keep-alive connections busy, one
request in flight on each (no pipelining), and times every request from its
send to the last byte of its response.  Per request it costs ~15 us of
Python, several times less than the servers it drives, so on two cores (it
on one, the server on the other) the server is what is measured.
"""

from __future__ import annotations

import selectors
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

__all__ = ["LoadResult", "connect", "load", "post_bytes", "read_response"]


def connect(url: str) -> socket.socket:
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def post_bytes(url: str, path: str, body: bytes, headers: Sequence[tuple[str, str]] = ()) -> bytes:
    """A keep-alive POST request, serialized."""
    host = urlsplit(url).netloc
    lines = [f"POST {path} HTTP/1.1", f"host: {host}", f"content-length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _complete(buf: bytearray) -> int:
    """The length of the whole response at the start of ``buf``, or 0."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return 0
    head = bytes(buf[:end]).lower()
    at = head.find(b"\r\ncontent-length:")
    if at >= 0:
        stop = head.find(b"\r\n", at + 2)
        length = int(head[at + 17 : stop if stop >= 0 else len(head)])
        total = end + 4 + length
        return total if len(buf) >= total else 0
    if b"chunked" in head:
        terminator = buf.find(b"\r\n0\r\n\r\n", end)
        if terminator < 0 and buf.startswith(b"0\r\n\r\n", end + 4):
            return end + 9
        return terminator + 7 if terminator >= 0 else 0
    return 0


@dataclass
class LoadResult:
    """What one load run measured (latencies in seconds)."""

    duration: float
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    #: The server's CPU seconds per request, when measured.
    cpu_per_request: float = float("nan")

    @property
    def rps(self) -> float:
        return len(self.latencies) / self.duration if self.duration else 0.0


@dataclass
class _Conn:
    sock: socket.socket
    buf: bytearray = field(default_factory=bytearray)
    sent: float = 0.0
    next: int = 0


def load(
    url: str,
    requests: Sequence[bytes],
    *,
    connections: int,
    duration: float,
    warmup: float = 0.3,
    once: bool = False,
) -> LoadResult:
    """Keep ``connections`` connections busy with ``requests`` (round robin)
    for ``warmup`` + ``duration`` seconds; time the last ``duration``.
    ``once``: send each request once, and stop when all were answered
    (or the time is up)."""
    selector = selectors.DefaultSelector()
    conns = []
    clock = time.perf_counter
    for i in range(connections):
        conn = _Conn(connect(url), next=i)
        conns.append(conn)
        selector.register(conn.sock, selectors.EVENT_READ, conn)
    count = len(requests)
    start = clock()
    measure_from = start + warmup
    stop = measure_from + duration
    result = LoadResult(duration)
    busy = 0
    for conn in conns:
        if once and conn.next >= count:
            continue
        conn.sent = clock()
        conn.sock.sendall(requests[conn.next % count])
        busy += 1
    try:
        while busy:
            now = clock()
            if now >= stop:
                break
            for key, _ in selector.select(timeout=stop - now):
                conn = key.data
                data = conn.sock.recv(1 << 18)
                if not data:
                    raise ConnectionError("the server closed a keep-alive connection")
                conn.buf += data
                size = _complete(conn.buf)
                if not size:
                    continue
                done = clock()
                if not conn.buf.startswith(b"HTTP/1.1 200"):
                    result.errors += 1
                del conn.buf[:size]
                if done >= measure_from:
                    result.latencies.append(done - conn.sent)
                conn.next += connections
                if once and conn.next >= count:
                    busy -= 1
                    continue
                conn.sent = clock()
                conn.sock.sendall(requests[conn.next % count])
    finally:
        for conn in conns:
            selector.unregister(conn.sock)
            conn.sock.close()
        selector.close()
    result.duration = min(clock(), stop) - measure_from
    return result


def read_response(sock: socket.socket) -> tuple[float, float, bytes]:
    """Read one response; returns (time of its first byte, time of its last,
    the response bytes)."""
    buf = bytearray()
    first = 0.0
    while True:
        data = sock.recv(1 << 18)
        now = time.perf_counter()
        if not data:
            raise ConnectionError("closed mid-response")
        if not buf:
            first = now
        buf += data
        size = _complete(buf)
        if size:
            return first, now, bytes(buf[:size])
