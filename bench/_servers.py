"""The servers the benchmarks run in child processes.

``python -m bench._servers fixed --backend B --body FILE``
    The baseline of the proxy throughput figures: a minimal HTTP/1.1 server,
    h11 on anyio (asyncio or trio), answering every request with one fixed
    response on keep-alive connections: FILE's bytes as the body, under the
    headers the recorded answers carry (``bench._data.RESPONSE_HEADERS``),
    so both servers write responses of the same shape.

``python -m bench._servers stream --backend B --frames FILE [--one-write]``
    The baseline of the fast-mode streaming figure: answers every request
    with the SSE frames in FILE (a JSON list of strings), chunked, one
    socket write per frame as fast as it can (all in one write with
    ``--one-write``).

``python -m bench._servers relay --backend B --upstream URL``
    The peer of the record-mode figures: the least a forwarding proxy does,
    h11 on anyio, no recording.  Each client connection gets a keep-alive
    connection to URL of its own; each request is passed on whole, and
    each event of the response (head, chunk, end) is written to the client
    as it arrives.

``python -m bench._servers ws --backend B --frames FILE [--fast]``
    The peer of the WebSocket replay figures: a bare wsproto server on
    anyio that accepts any upgrade and plays the session in FILE (a JSON
    list of ``{from, at, text}``) as a replayer must at the least: each
    server message once the client message before it came, at its recorded
    offset from that message (Reel's ``sleep_until``; none with ``--fast``),
    one write each; no matching, no cassette.

``python -m bench._servers h2fixed --backend B --body FILE [--grpc]``
    The baseline of the proxy's HTTP/2 figures: a bare h2 server on anyio
    (``bench._h2.H2Fixed``) answering every stream with FILE's bytes as
    the body, or with ``--grpc`` as one gRPC message and its trailers.

``python -m bench._servers proxy ARGS...``
    Reel's proxy (``python -m reel_bindings.proxy ARGS...``).

Each prints its URL when it listens, stops on SIGTERM, and then prints
``maxrss_kb=N`` (its peak resident memory).  ``--cpu N`` keeps it on CPU N.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import anyio.abc
import h11
import wsproto
import wsproto.events as ws_events
from wsproto.utilities import LocalProtocolError

from reel_bindings._clock import sleep_until

from ._answers import RESPONSE_HEADERS
from ._common import pin_to_cpu
from ._h2 import H2Fixed

__all__ = ["main"]


async def _serve(handler: _Handler | _Relay | _WebSocket | H2Fixed) -> None:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    print(f"http://127.0.0.1:{port}", flush=True)
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, handler.handle, tg)
            async for _ in signals:
                tg.cancel_scope.cancel()
                return


class _Handler:
    """One h11 connection per client; answers each request with ``respond``."""

    def __init__(self, head: h11.Response, frames: Sequence[bytes]) -> None:
        self.head = head
        self.frames = [h11.Data(data=f) for f in frames]

    async def handle(self, stream: anyio.abc.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    try:
                        data = await stream.receive(65536)
                    except (anyio.EndOfStream, anyio.BrokenResourceError):
                        data = b""
                    conn.receive_data(data)
                    continue
                if isinstance(event, h11.EndOfMessage):
                    await self.respond(conn, stream)
                    if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                        return
                    conn.start_next_cycle()
                elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                    return
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, h11.ProtocolError):
            return
        finally:
            await anyio.aclose_forcefully(stream)

    async def respond(self, conn: h11.Connection, stream: anyio.abc.SocketStream) -> None:
        raise NotImplementedError


class _Fixed(_Handler):
    async def respond(self, conn: h11.Connection, stream: anyio.abc.SocketStream) -> None:
        data = conn.send(self.head) or b""
        for frame in self.frames:
            data += conn.send(frame) or b""
        await stream.send(data + (conn.send(h11.EndOfMessage()) or b""))


class _OneWrite(_Handler):
    """The stream's frames, all in one write (what Reel's fast mode does)."""

    async def respond(self, conn: h11.Connection, stream: anyio.abc.SocketStream) -> None:
        data = conn.send(self.head) or b""
        for frame in self.frames:
            data += conn.send(frame) or b""
        await stream.send(data + (conn.send(h11.EndOfMessage()) or b""))


class _Stream(_Handler):
    async def respond(self, conn: h11.Connection, stream: anyio.abc.SocketStream) -> None:
        await stream.send(conn.send(self.head) or b"")
        for frame in self.frames:
            await stream.send(conn.send(frame) or b"")
        await stream.send(conn.send(h11.EndOfMessage()) or b"")


class _Relay:
    """Passes each request to ``upstream`` and relays the response as it comes."""

    def __init__(self, upstream: str) -> None:
        url = urlsplit(upstream)
        if url.scheme != "http" or not url.hostname or not url.port:
            raise SystemExit(f"relay: --upstream must be http://HOST:PORT, not {upstream!r}")
        self.host, self.port = url.hostname, url.port

    async def handle(self, client: anyio.abc.SocketStream) -> None:
        try:
            async with client, await anyio.connect_tcp(self.host, self.port) as upstream:
                server, to_upstream = h11.Connection(h11.SERVER), h11.Connection(h11.CLIENT)
                while await self._exchange(server, client, to_upstream, upstream):
                    server.start_next_cycle()
                    to_upstream.start_next_cycle()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError, h11.ProtocolError):
            return

    async def _exchange(
        self,
        server: h11.Connection,
        client: anyio.abc.SocketStream,
        to_upstream: h11.Connection,
        upstream: anyio.abc.SocketStream,
    ) -> bool:
        """One request and its response; False when the connection is done."""
        event = await _next(server, client)
        if not isinstance(event, h11.Request):
            return False
        data = to_upstream.send(event) or b""
        while not isinstance(event, h11.EndOfMessage):
            event = await _next(server, client)
            if not isinstance(event, (h11.Data, h11.EndOfMessage)):
                return False
            data += to_upstream.send(event) or b""
        await upstream.send(data)
        while True:
            event = await _next(to_upstream, upstream)
            if not isinstance(event, (h11.Response, h11.Data, h11.EndOfMessage)):
                return False
            if isinstance(event, h11.Response):
                event = h11.Response(
                    status_code=event.status_code, headers=event.headers, reason=event.reason
                )
            await client.send(server.send(event) or b"")
            if isinstance(event, h11.EndOfMessage):
                return to_upstream.our_state is h11.DONE and server.our_state is h11.DONE


async def _next(conn: h11.Connection, stream: anyio.abc.SocketStream) -> object:
    """The next h11 event of ``conn``, reading ``stream`` as needed."""
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        try:
            conn.receive_data(await stream.receive(65536))
        except anyio.EndOfStream:
            conn.receive_data(b"")


class _WebSocket:
    """A session played to each client, gated by its messages (see above)."""

    def __init__(self, script: list[dict[str, object]], fast: bool) -> None:
        self.fast = fast
        #: (client messages before it, seconds after the last of them, text)
        self.steps: list[tuple[int, float, str]] = []
        clients, anchor = 0, 0.0
        for m in script:
            at = float(str(m["at"])) / 1000
            if m["from"] == "client":
                clients, anchor = clients + 1, at
            else:
                self.steps.append((clients, at - anchor, str(m["text"])))

    async def handle(self, stream: anyio.abc.SocketStream) -> None:
        ws = wsproto.WSConnection(wsproto.ConnectionType.SERVER)
        arrivals: list[float] = []
        news = anyio.Event()
        lock = anyio.Lock()

        async def send(event: ws_events.Event) -> None:
            async with lock:
                await stream.send(ws.send(event))

        async def reader(tg: anyio.abc.TaskGroup) -> None:
            nonlocal news
            while True:
                try:
                    data = await stream.receive(65536)
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    data = b""
                now = anyio.current_time()
                ws.receive_data(data or None)
                for event in ws.events():
                    if isinstance(event, ws_events.Request):
                        await send(ws_events.AcceptConnection())
                        tg.start_soon(writer)
                    elif isinstance(event, ws_events.TextMessage) and event.message_finished:
                        arrivals.append(now)
                        news.set()
                        news = anyio.Event()
                    elif isinstance(event, ws_events.Ping):
                        await send(event.response())
                    elif isinstance(event, ws_events.CloseConnection):
                        await send(event.response())
                        tg.cancel_scope.cancel()
                        return
                if not data:
                    tg.cancel_scope.cancel()
                    return

        async def writer() -> None:
            for clients, after, text in self.steps:
                while len(arrivals) < clients:
                    await news.wait()
                if not self.fast:
                    await sleep_until(arrivals[clients - 1] + after)
                await send(ws_events.TextMessage(data=text))

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(reader, tg)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, LocalProtocolError):
            pass
        finally:
            await anyio.aclose_forcefully(stream)


def _rss() -> None:
    """Print this process's peak resident memory.  On Linux from
    /proc/self/status (VmHWM): ru_maxrss keeps the peak of the parent this
    process was forked from, across exec."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    print(f"maxrss_kb={int(line.split()[1])}", flush=True)
                    return
    except OSError:
        pass
    scale = 1 if sys.platform != "darwin" else 1024  # macOS reports bytes
    print(f"maxrss_kb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // scale}", flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    kind = args.pop(0)
    if kind == "proxy":
        parser = argparse.ArgumentParser()
        parser.add_argument("--cpu", type=int)
        ours, rest = parser.parse_known_args(args)
        pin_to_cpu(ours.cpu)
        from reel_bindings.proxy import main as proxy_main

        if os.environ.get("REEL_BENCH_UPSTREAM") == "httpcore":  # the item-8 prototype
            import reel_bindings.proxy

            from ._httpcore_upstream import HttpcoreUpstream

            reel_bindings.proxy.AsyncUpstream = HttpcoreUpstream  # type: ignore[assignment, attr-defined]

        try:
            proxy_main(rest)
        finally:
            _rss()
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    parser.add_argument("--cpu", type=int)
    parser.add_argument("--body", type=Path)
    parser.add_argument("--frames", type=Path)
    parser.add_argument("--one-write", action="store_true", help="stream: all frames in one write")
    parser.add_argument("--upstream", help="relay: where to pass requests (http://HOST:PORT)")
    parser.add_argument("--fast", action="store_true", help="ws: no deadlines")
    parser.add_argument("--grpc", action="store_true", help="h2fixed: answer as gRPC")
    opts = parser.parse_args(args)
    pin_to_cpu(opts.cpu)
    handler: _Handler | _Relay | _WebSocket | H2Fixed
    if kind == "relay":
        handler = _Relay(opts.upstream or "")
    elif kind == "fixed":
        body = opts.body.read_bytes()
        head = h11.Response(
            status_code=200,
            headers=[*RESPONSE_HEADERS, ("content-length", str(len(body)))],
        )
        handler = _Fixed(head, [body])
    elif kind == "stream":
        frames = [f.encode() for f in json.loads(opts.frames.read_text())]
        head = h11.Response(
            status_code=200,
            headers=[("content-type", "text/event-stream"), ("transfer-encoding", "chunked")],
        )
        handler = (_OneWrite if opts.one_write else _Stream)(head, frames)
    elif kind == "h2fixed":
        handler = H2Fixed(opts.body.read_bytes(), grpc=opts.grpc)
    elif kind == "ws":
        handler = _WebSocket(json.loads(opts.frames.read_text()), opts.fast)
    else:
        raise SystemExit(f"unknown server {kind!r}")
    try:
        anyio.run(_serve, handler, backend=opts.backend)
    finally:
        _rss()


if __name__ == "__main__":
    main()
