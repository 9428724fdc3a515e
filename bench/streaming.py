"""4. Streaming fidelity: a recorded 200-frame SSE stream replayed in
realtime through the proxy (a child process) and through the async
transport (in process), timed by the client as each frame completes; and
fast mode's frames per second through the proxy, next to a bare anyio
server writing the same frames (same backend, same client).  And a big
stream (50 MB) replayed in fast mode through the proxy, next to the async
transport replaying it in process, with a small request served on another
connection while it streams.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import anyio
import h2.config
import h2.connection
import h2.events
import h2.settings
import h11
import httpx

from reel_bindings._clock import sleep_until
from reel_bindings.httpcore import AsyncTransport

from ._answers import BASE_URL, PATH, REQUEST_HEADERS, sse_frames
from ._common import Row, percentile, ratio, spawn
from ._data import write_big_stream_cassette, write_stream_cassette
from ._h2 import h2_request
from ._loadgen import connect, post_bytes, read_response
from .proxy import SERVER_CPU, _proxy_args

__all__ = ["big_stream", "fast_mode", "fidelity"]

FRAMES = 200
GAP_MS = 10.0


def _frame_times_wire(url: str, body: bytes) -> tuple[list[float], float]:
    """Offsets (s) at which each frame was whole at the client, from the
    response head; and the offset of the response's end."""
    sock = connect(url)
    conn = h11.Connection(h11.CLIENT)
    host = url.split("//", 1)[1]
    headers = [("host", host), ("content-length", str(len(body))), *REQUEST_HEADERS.items()]
    out = conn.send(h11.Request(method="POST", target=PATH, headers=headers)) or b""
    out += (conn.send(h11.Data(data=body)) or b"") + (conn.send(h11.EndOfMessage()) or b"")
    sock.sendall(out)
    head = 0.0
    pending = b""
    times: list[float] = []
    try:
        while True:
            data = sock.recv(1 << 16)
            now = time.perf_counter()
            conn.receive_data(data)
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    break
                if isinstance(event, h11.Response):
                    head = now
                elif isinstance(event, h11.Data):
                    pending += bytes(event.data)
                    while (cut := pending.find(b"\n\n")) >= 0:
                        pending = pending[cut + 2 :]
                        times.append(now - head)
                elif isinstance(event, h11.EndOfMessage):
                    return times, now - head
                else:
                    raise RuntimeError(f"unexpected {event!r} from the proxy")
    finally:
        sock.close()


async def _frame_times_transport(path: Path, body: bytes) -> tuple[list[float], float]:
    transport = AsyncTransport(path, mode="replay", timing="realtime")
    async with httpx.AsyncClient(transport=transport) as client:
        url = BASE_URL + PATH
        async with client.stream("POST", url, content=body, headers=REQUEST_HEADERS) as response:
            head = time.perf_counter()
            pending = b""
            times: list[float] = []
            async for chunk in response.aiter_raw():
                now = time.perf_counter()
                pending += chunk
                while (cut := pending.find(b"\n\n")) >= 0:
                    pending = pending[cut + 2 :]
                    times.append(now - head)
            return times, time.perf_counter() - head


def _row(
    via: str,
    backend: str,
    rounds: Sequence[Sequence[tuple[list[float], float]]],
    recorded: list[float],
) -> Row:
    """The figures of the best round (lowest p99): a round disturbed by the
    machine's other load is dropped, as the throughput figures keep the
    better of their runs.  Every round's p99 is listed."""
    rows = [_round(runs, recorded) for runs in rounds]
    best = min(rows, key=lambda r: r["offset_p99_ms"])
    return {
        "via": via,
        "backend": backend,
        "streams": len(rounds[0]),
        "frames": len(recorded) - 1,
        "recorded_ms": round(recorded[-1], 1),
        **best,
        "rounds_p99_ms": " / ".join(str(r["offset_p99_ms"]) for r in rows),
    }


def _round(runs: Sequence[tuple[list[float], float]], recorded: list[float]) -> Row:
    errors: list[float] = []
    duration_errors: list[float] = []
    end = recorded[-1] / 1000
    for times, total in runs:
        if len(times) != len(recorded) - 1:
            raise RuntimeError(f"{len(times)} frames, recorded {len(recorded) - 1}")
        errors += [abs(t - at / 1000) for t, at in zip(times, recorded, strict=False)]
        duration_errors.append(abs(total - end) / end)
    return {
        "offset_p50_ms": round(percentile(errors, 50) * 1000, 3),
        "offset_p99_ms": round(percentile(errors, 99) * 1000, 3),
        "offset_max_ms": round(max(errors) * 1000, 3),
        "duration_error_pct": round(max(duration_errors) * 100, 3),
    }


async def _clock_only(recorded: list[float]) -> tuple[list[float], float]:
    """The deadlines alone: Reel's sleep_until on the same offsets, no I/O."""
    start = anyio.current_time()
    times = []
    for at in recorded[:-1]:
        await sleep_until(start + at / 1000)
        times.append(anyio.current_time() - start)
    await sleep_until(start + recorded[-1] / 1000)
    return times, anyio.current_time() - start


def fidelity(work: Path, backends: list[str], streams: int, rounds: int) -> list[Row]:
    """Each frame's |actual - recorded| offset, as the client sees it, in
    ``rounds`` rounds of ``streams`` streams (the vias alternate)."""
    cassette = work / "stream-200.jsonl"
    body, recorded = write_stream_cassette(cassette, FRAMES, GAP_MS)
    vias = ("proxy", "AsyncTransport", "deadlines alone (reference)")
    measured: dict[tuple[str, str], list[list[tuple[list[float], float]]]] = {}
    for backend in backends:
        with spawn(_proxy_args(cassette, backend, "--timing", "realtime")) as proxy:
            _frame_times_wire(proxy.url, body)  # warm the proxy (its first replay parses)
            for _ in range(rounds):
                for via in vias:
                    if via == "proxy":
                        runs = [_frame_times_wire(proxy.url, body) for _ in range(streams)]
                    elif via == "AsyncTransport":
                        runs = [
                            anyio.run(_frame_times_transport, cassette, body, backend=backend)
                            for _ in range(streams)
                        ]
                    else:
                        runs = [
                            anyio.run(_clock_only, recorded, backend=backend)
                            for _ in range(streams)
                        ]
                    measured.setdefault((via, backend), []).append(runs)
    return [
        _row(via, backend, measured[(via, backend)], recorded)
        for via in vias
        for backend in backends
    ]


def _fps(url: str, request: bytes, frames: int, duration: float) -> float:
    sock = connect(url)
    try:
        sock.sendall(request)
        read_response(sock)  # warm
        count = 0
        start = time.perf_counter()
        while time.perf_counter() - start < duration:
            sock.sendall(request)
            _, _, response = read_response(sock)
            if not response.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"answered {response[:200]!r}")
            count += 1
        return count * frames / (time.perf_counter() - start)
    finally:
        sock.close()


def fast_mode(work: Path, backends: list[str], duration: float) -> list[Row]:
    """Frames per second of the 200-frame stream in fast mode: the proxy vs a
    bare anyio server writing the same frames (one write each)."""
    cassette = work / "stream-200.jsonl"
    body, _ = write_stream_cassette(cassette, FRAMES, GAP_MS)
    frames_file = work / "frames.json"
    frames = [data.decode() for _, data in sse_frames(0, FRAMES, GAP_MS)]
    frames_file.write_text(json.dumps(frames))
    rows: list[Row] = []
    for backend in backends:
        bare_args = ["-m", "bench._servers", "stream", "--backend", backend]
        bare_args += ["--cpu", str(SERVER_CPU), "--frames", str(frames_file)]
        with (
            spawn(bare_args) as bare,
            spawn([*bare_args, "--one-write"]) as one_write,
            spawn(_proxy_args(cassette, backend, "--timing", "fast")) as proxy,
        ):
            headers = list(REQUEST_HEADERS.items())
            fps = {"bare": 0.0, "one_write": 0.0, "reel": 0.0}
            for _ in range(2):  # alternated; the better of two each
                for name, child in (("bare", bare), ("one_write", one_write), ("reel", proxy)):
                    request = post_bytes(child.url, PATH, body, headers)
                    fps[name] = max(fps[name], _fps(child.url, request, FRAMES, duration / 3))
        rows.append(
            {
                "backend": backend,
                "bare_anyio_fps": round(fps["bare"]),
                "reel_fps": round(fps["reel"]),
                "reel_vs_bare": ratio(fps["reel"], fps["bare"]),
                "bare_one_write_fps": round(fps["one_write"]),
                "reel_vs_one_write": ratio(fps["reel"], fps["one_write"]),
            }
        )
    return rows


_CHUNKED_END = b"\r\n0\r\n\r\n"


def _read_chunked(sock: socket.socket) -> int:
    """Read one chunked response to its end (the head included); returns
    the bytes read.  Only the tail is searched: linear in the size."""
    total = 0
    tail = b""
    while True:
        data = sock.recv(1 << 18)
        if not data:
            raise ConnectionError("closed mid-response")
        total += len(data)
        tail = (tail + data)[-len(_CHUNKED_END) :]
        if tail == _CHUNKED_END:
            return total


def _h2_stream(url: str, body: bytes) -> tuple[float, int]:
    """One POST over HTTP/2 (h2c with prior knowledge, the windows opened
    wide, each DATA frame acknowledged as it comes): seconds to its end and
    the body bytes received."""
    sock = connect(url)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: _WINDOW})
    conn.increment_flow_control_window(_WINDOW - 65_535)
    head, data = h2_request(url, PATH, body, list(REQUEST_HEADERS.items()))
    start = time.perf_counter()
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, head)
    conn.send_data(sid, data, end_stream=True)
    sock.sendall(conn.data_to_send())
    size = 0
    try:
        while True:
            chunk = sock.recv(1 << 18)
            if not chunk:
                raise ConnectionError("closed mid-response")
            for event in conn.receive_data(chunk):
                if isinstance(event, h2.events.DataReceived):
                    size += len(event.data)
                    conn.acknowledge_received_data(event.flow_controlled_length, sid)
                elif isinstance(event, h2.events.StreamEnded):
                    return time.perf_counter() - start, size
                elif isinstance(event, h2.events.StreamReset):
                    raise RuntimeError(f"the proxy reset the stream ({event.error_code!r})")
            if out := conn.data_to_send():
                sock.sendall(out)
    finally:
        sock.close()


#: The HTTP/2 client's windows: as wide as HTTP/2 allows (a reader that
#: keeps up, as the HTTP/1.1 one does).
_WINDOW = 2**31 - 1


def _cpu_seconds(pid: int) -> float:
    """The CPU time (user and system) process ``pid`` used so far (Linux;
    ``nan`` elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _inprocess_seconds(path: Path, body: bytes) -> tuple[float, int]:
    transport = AsyncTransport(path, mode="replay", timing="fast")
    async with httpx.AsyncClient(transport=transport) as client:
        start = time.perf_counter()
        size = 0
        async with client.stream(
            "POST", BASE_URL + PATH, content=body, headers=REQUEST_HEADERS
        ) as response:
            async for chunk in response.aiter_raw():
                size += len(chunk)
        return time.perf_counter() - start, size


def _big_round(cassette: Path, backend: str, big: bytes, small: bytes, size: int) -> Row:
    """One round of :func:`big_stream` on ``backend``: the stream through a
    fresh proxy over HTTP/1.1 (a small request timed meanwhile) and over
    HTTP/2 (each the line's first play: its parse included), and in
    process."""
    headers = list(REQUEST_HEADERS.items())
    with spawn(_proxy_args(cassette, backend, "--timing", "fast")) as proxy:
        other = connect(proxy.url)
        stream = connect(proxy.url)
        try:
            other.sendall(post_bytes(proxy.url, PATH, small, headers))
            read_response(other)  # warm: the cassette is indexed, the small line parsed
            cpu = _cpu_seconds(proxy.proc.pid)
            start = time.perf_counter()
            stream.sendall(post_bytes(proxy.url, PATH, big, headers))
            first = stream.recv(1 << 16)  # the stream is under way
            asked = time.perf_counter()
            other.sendall(post_bytes(proxy.url, PATH, small, headers))
            _, answered, response = read_response(other)
            if not response.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"answered {response[:200]!r}")
            received = len(first) + _read_chunked(stream)
            seconds = time.perf_counter() - start
            cpu = _cpu_seconds(proxy.proc.pid) - cpu
        finally:
            stream.close()
            other.close()
    if received < size:
        raise RuntimeError(f"the proxy sent {received} bytes of a {size}-byte stream")
    with spawn(_proxy_args(cassette, backend, "--timing", "fast")) as proxy:
        h2_seconds, got = _h2_stream(proxy.url, big)
    if got != size:
        raise RuntimeError(f"the proxy sent {got} bytes of a {size}-byte stream over HTTP/2")
    inprocess, got = anyio.run(_inprocess_seconds, cassette, big, backend=backend)
    if got != size:
        raise RuntimeError(f"the transport replayed {got} bytes of {size}")
    return {
        "backend": backend,
        "proxy_s": seconds,
        "proxy_cpu_s": cpu,
        "proxy_h2_s": h2_seconds,
        "small_ms": (answered - asked) * 1000,
        "inprocess_s": inprocess,
    }


def big_stream(work: Path, backends: list[str], megabytes: float, rounds: int = 1) -> list[Row]:
    """A stream of ``megabytes`` MB replayed in fast mode: seconds and MB/s
    through the proxy over HTTP/1.1 (a raw socket client; the proxy's CPU
    time beside it) and over HTTP/2 (h2), and through the async transport
    in process; and the time a small request on a second connection takes
    while the stream is under way (the stream's client reads nothing
    meanwhile, so the proxy is in the middle of writing it).  ``rounds``
    rounds, the backends taking turns in each; each figure is the median
    of its rounds."""
    cassette = work / f"stream-{megabytes:g}mb.jsonl"
    big, small, size = write_big_stream_cassette(cassette, megabytes)
    runs: dict[str, list[Row]] = {backend: [] for backend in backends}
    for i in range(rounds):
        for backend in backends if i % 2 == 0 else backends[::-1]:
            runs[backend].append(_big_round(cassette, backend, big, small, size))
    rows: list[Row] = []
    for backend, measured in runs.items():

        def median(name: str, measured: list[Row] = measured) -> float:
            return float(statistics.median(r[name] for r in measured))

        seconds, inprocess = median("proxy_s"), median("inprocess_s")
        h2_seconds = median("proxy_h2_s")
        rows.append(
            {
                "backend": backend,
                "stream_mb": round(size / 1e6, 1),
                "rounds": rounds,
                "proxy_s": round(seconds, 2),
                "proxy_mb_per_s": round(size / 1e6 / seconds, 1),
                "rounds_proxy_mb_per_s": " / ".join(
                    f"{size / 1e6 / r['proxy_s']:.1f}" for r in measured
                ),
                "proxy_cpu_s": round(median("proxy_cpu_s"), 2),
                "proxy_h2_mb_per_s": round(size / 1e6 / h2_seconds, 1),
                "small_request_during_ms": round(median("small_ms"), 2),
                "inprocess_s": round(inprocess, 2),
                "inprocess_mb_per_s": round(size / 1e6 / inprocess, 1),
                "proxy_vs_inprocess": ratio(seconds, inprocess),
            }
        )
    return rows
