"""Helpers for the reliability suite: raw connections, response parsing, cassette checks.

Not a test module.  The proxy helpers of ``tests/bindings/proxy_support.py``
(``chat_call``, ``fetch``, ``options``, ``proxied``) are reused as they are;
what is here talks to the proxy below the level of an HTTP client: half
requests, pipelined requests, raw bytes that no client library would send.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.abc
import h11

from reel_core import Cassette, Interaction, Mode
from tests.bindings.proxy_support import Call, fetch, proxied
from tests.bindings.proxy_support import options as proxy_options
from tests.fakes.upstream import serve_fake

__all__ = [
    "Parsed",
    "ProxyProcess",
    "check_cassette",
    "clean_env",
    "connect",
    "head_bytes",
    "hostport",
    "parse_responses",
    "proxy_process",
    "raw_exchange",
    "read_until_closed",
    "record",
    "wire_request",
]


def hostport(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname is not None
    assert parts.port is not None
    return parts.hostname, parts.port


async def connect(url: str) -> anyio.abc.SocketStream:
    host, port = hostport(url)
    return await anyio.connect_tcp(host, port)


_GONE = (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError)


async def read_until_closed(stream: anyio.abc.ByteStream) -> bytes:
    """Everything the peer sends until it closes (or resets) the connection."""
    out = b""
    while True:
        try:
            out += await stream.receive()
        except _GONE:
            return out
        except OSError:  # a reset reported as the OS error (asyncio on some paths)
            return out


async def raw_exchange(url: str, data: bytes, *, timeout: float = 10) -> bytes:
    """Send ``data`` on a fresh connection; everything answered until the proxy closes."""
    with anyio.fail_after(timeout):
        async with await connect(url) as stream:
            # the proxy may answer and close before it read everything
            with suppress(*_GONE):
                await stream.send(data)
            return await read_until_closed(stream)


def head_bytes(
    method: str,
    target: str | bytes,
    headers: Sequence[tuple[str | bytes, str | bytes]] = (),
    *,
    version: bytes = b"HTTP/1.1",
) -> bytes:
    """A request line and headers as raw bytes (anything goes: no validation)."""

    def b(value: str | bytes) -> bytes:
        return value.encode("latin-1") if isinstance(value, str) else value

    lines = [b(method) + b" " + b(target) + b" " + version]
    lines += [b(k) + b": " + b(v) for k, v in headers]
    return b"\r\n".join(lines) + b"\r\n\r\n"


def wire_request(call: Call, *, target: str | None = None, version: bytes = b"HTTP/1.1") -> bytes:
    """``call`` as the bytes of one HTTP request (``content-length`` framed)."""
    headers: list[tuple[str | bytes, str | bytes]] = [("host", "api.openai.com")]
    headers += [("content-type", "application/json"), ("content-length", str(len(call.content)))]
    headers += list(call.headers.items())
    return head_bytes(call.method, target or call.path, headers, version=version) + call.content


@dataclass
class Parsed:
    """One response read back from raw bytes."""

    status: int
    headers: dict[str, str]
    body: bytes
    http_version: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def parse_responses(data: bytes, *, closed: bool = True) -> list[Parsed]:
    """Every complete response in ``data`` (answers to POST requests, in order).

    A response framed by the connection close (HTTP/1.0) counts as complete
    when ``closed``.
    """
    out: list[Parsed] = []
    while data:
        conn = h11.Connection(h11.CLIENT)
        conn.send(h11.Request(method="POST", target="/", headers=[("host", "x")]))
        conn.send(h11.EndOfMessage())
        conn.receive_data(data)
        if closed:
            conn.receive_data(b"")
        status = 0
        version = b""
        headers: dict[str, str] = {}
        body = b""
        while True:
            event = conn.next_event()
            if isinstance(event, h11.Response):
                status = event.status_code
                version = event.http_version
                headers = {k.decode(): v.decode("latin-1") for k, v in event.headers}
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                out.append(Parsed(status, headers, body, version))
                break
            else:  # NEED_DATA, PAUSED or ConnectionClosed: nothing complete left
                return out
        data, _ = conn.trailing_data
    return out


def check_cassette(path: Path) -> list[Interaction]:
    """Every line of the cassette whole, one ``_meta`` line first, no line
    written twice; the interactions (strictly loaded)."""
    data = path.read_bytes()
    assert data.endswith(b"\n"), "the last line is torn"
    lines = data.splitlines()
    assert b'"_meta"' in lines[0]
    assert all(b'"_meta"' not in line[:10] for line in lines[1:])
    for line in lines:
        json.loads(line)  # whole JSON, UTF-8
    assert len(set(lines)) == len(lines), "a line was written twice"
    cassette = Cassette.loads(data, name=str(path), strict=True)
    cassette.validate()
    return list(cassette)


async def record(cassette: Path, calls: Sequence[Call]) -> None:
    """Record ``calls`` (in order) into ``cassette`` through a proxy and the fake."""
    async with (
        serve_fake() as fake,
        proxied(proxy_options(Mode.RECORD, cassette, upstream=fake.url)) as client,
    ):
        for call in calls:
            await fetch(client, call)


# ------------------------------------------------------------ subprocesses

#: Run the proxy as root without the capabilities that let root ignore file
#: permissions (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER), so that
#: a read-only file or directory is read-only for it as for anyone else.
_DROP_DAC = """
import ctypes, os, runpy, sys
libc = ctypes.CDLL(None, use_errno=True)
for cap in (1, 2, 3):
    if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
        raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")
os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
"""


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("REEL_")}


@dataclass
class ProxyProcess:
    proc: subprocess.Popen[str]
    url: str
    #: What the proxy logged, once it exited.
    stderr: str = ""


@contextmanager
def proxy_process(
    args: Sequence[str], *, read_only_means_read_only: bool = False
) -> Iterator[ProxyProcess]:
    """``python -m reel_bindings.proxy`` on a free port, and the URL it printed.

    With ``read_only_means_read_only`` a root process drops the capabilities
    that bypass file permissions first (anyone else needs nothing dropped).
    Killed if still running at the end of the block; then its log is read.
    """
    command = [sys.executable, "-m", "reel_bindings.proxy", "--port", "0", *args]
    if read_only_means_read_only and os.geteuid() == 0:
        command = [sys.executable, "-c", _DROP_DAC, *command[1:]]
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env()
    )
    running = ProxyProcess(proc, "")
    try:
        stdout = proc.stdout
        assert stdout is not None
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.append(stdout.readline()))
        reader.start()
        reader.join(timeout=30)
        assert lines, f"the proxy printed no URL (exit status {proc.poll()})"
        assert lines[0].startswith("http://"), lines
        running.url = lines[0].strip()
        yield running
    finally:
        if proc.poll() is None:
            proc.kill()
        _, running.stderr = proc.communicate(timeout=30)
