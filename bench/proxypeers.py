"""9. Proxy peers: Reel's proxy next to mitmproxy (``mitmdump`` server
replay) and talkback (npm), each recording and replaying the same
interactions, each server in a child process pinned to a core of its own and
the client (this process, raw sockets) on the other, as in ``bench/proxy.py``.

Per tool, in this order:

1. Record: the tool in its record mode in front of ``bench._corpus_upstream``
   records the corpus's non-stream interactions the throughput figure sends,
   and interaction 4, a 40-frame SSE stream the upstream writes frame by
   frame at its recorded offsets.  The upstream is then stopped: a replay
   that forwarded would fail.
2. Replay, all tools up at once, in interleaved rounds: requests/s, p50 and
   p99 at 1 and 16 keep-alive connections (medians of the rounds); whether
   the bodies replayed are the bytes recorded; the 40-frame stream, each
   frame timed as it completes (Reel in realtime timing, the peers as they
   replay): frames whole, separate arrivals, |offset - recorded offset| and
   the gap error; then the peak RSS of the replaying process tree.
3. Record overhead: each tool recording in front of the fake OpenAI upstream
   of ``tests/fakes`` (1 ms between frames), its TTFB and total time next to
   the same request sent straight to the upstream, interleaved (what
   ``bench/proxy.py``'s record figure does for Reel and the bare relay).

A peer that is not installed (``--quick`` installs nothing; a full run
installs them in the user's cache, ``bench/_peer_install.py``) or that
fails gets a row saying why; the run goes on.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reel_core import __version__

from ._answers import (
    PATH,
    REQUEST_HEADERS,
    STREAM_FRAMES,
    answer_body,
    is_stream,
    request_body,
    sse_frames,
)
from ._common import Row, median, percentile, spawn, us
from ._loadgen import connect, load, post_bytes, read_response
from ._peer_install import Peer, find
from ._peer_tools import Server, Tool, serving
from .proxy import _added, _interleaved
from .streaming import _frame_times_wire

__all__ = ["PeerPlan", "lead", "peer_rows"]

#: The stream every tool records and replays (``bench._data.is_stream``).
STREAM_INDEX = 4
#: Bodies compared byte for byte with what was recorded, per tool.
BODY_CHECKS = 20


@dataclass(frozen=True)
class PeerPlan:
    """How much the section measures."""

    #: Size of the corpus whose non-stream interactions are recorded and replayed.
    interactions: int
    seconds: float
    rounds: int
    streams: int
    record_requests: int
    #: Install a missing peer (a full run) or say it is not installed (--quick).
    install: bool
    #: Reel's rows: its proxy on each of these backends.
    backends: tuple[str, ...] = ("asyncio", "trio")


def _tools(work: Path, plan: PeerPlan) -> list[Tool]:
    tools = [Tool(f"reel ({b})", __version__, "reel", backend=b) for b in plan.backends]
    peers: list[Peer] = find(plan.install)
    tools += [
        Tool(p.name, p.version, p.name, command=p.command, failed=_why(p.missing)) for p in peers
    ]
    for tool in tools:
        tool.files = work / "proxypeers" / re.sub(r"\W+", "-", tool.name).strip("-")
        tool.files.mkdir(parents=True, exist_ok=True)
    return tools


def _why(missing: str) -> str:
    return f"not run: {missing}" if missing else ""


def _guard(tool: Tool, step: str, fn: Callable[..., object], *args: object) -> None:
    """``fn(*args)`` for ``tool``; a peer's failure becomes its row's
    reason.  Reel's own failures are raised: the benchmark must not hide them."""
    if tool.failed:
        return
    try:
        fn(*args)
    except Exception as exc:
        if tool.kind == "reel":
            raise
        said = " ".join(str(exc).split()).replace("|", "/")  # one table cell
        tool.failed = f"failed to {step}: {type(exc).__name__}: {said}"[:300]


def _start(
    stack: contextlib.ExitStack, servers: dict[str, Server], tool: Tool, upstream: str, mode: str
) -> None:
    servers[tool.name] = stack.enter_context(serving(tool, upstream, mode))


# -- the measurements ----------------------------------------------------------


def _send(sock: socket.socket, url: str, body: bytes) -> bytes:
    sock.sendall(post_bytes(url, PATH, body, list(REQUEST_HEADERS.items())))
    response = read_response(sock)[2]
    if not response.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"answered {response[:200]!r}")
    return response


def _record(tool: Tool, upstream: str, indices: list[int]) -> None:
    start = time.perf_counter()
    with serving(tool, upstream, "record") as server:
        sock = connect(server.url)
        try:
            for i in indices:
                _send(sock, server.url, request_body(i))
            _send(sock, server.url, request_body(STREAM_INDEX, stream=True))
        finally:
            sock.close()
    tool.figures["record_s"] = round(time.perf_counter() - start, 2)


def _body(response: bytes) -> bytes:
    """A response's body, de-chunked."""
    head, _, body = response.partition(b"\r\n\r\n")
    if b"chunked" not in head.lower():
        return body
    out = bytearray()
    while True:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            return bytes(out)
        out += rest[:size]
        body = rest[size + 2 :]


def _bodies(tool: Tool, url: str, indices: list[int]) -> None:
    step = max(1, len(indices) // BODY_CHECKS)
    checked = indices[::step][:BODY_CHECKS]
    sock = connect(url)
    try:
        same = sum(_body(_send(sock, url, request_body(i))) == answer_body(i) for i in checked)
    finally:
        sock.close()
    tool.figures["bodies_as_recorded"] = f"{same}/{len(checked)}"


def _stream(tool: Tool, url: str, streams: int) -> None:
    recorded = [at for at, _ in sse_frames(STREAM_INDEX, STREAM_FRAMES)]
    body = request_body(STREAM_INDEX, stream=True)
    offsets: list[float] = []
    gaps: list[float] = []
    frames: list[int] = []
    arrivals: list[int] = []
    for _ in range(streams):
        times, _end = _frame_times_wire(url, body)
        ms = [t * 1000 for t in times]
        frames.append(len(ms))
        arrivals.append(len(set(times)))
        offsets += [abs(t - at) for t, at in zip(ms, recorded, strict=False)]
        gaps += [
            abs((ms[k] - ms[k - 1]) - (recorded[k] - recorded[k - 1]))
            for k in range(1, min(len(ms), len(recorded)))
        ]
    tool.figures["stream_frames"] = f"{min(frames)}/{STREAM_FRAMES}"
    tool.figures["stream_arrivals"] = min(arrivals)
    tool.figures["offset_err_p50_ms"] = round(percentile(offsets, 50), 3)
    tool.figures["offset_err_p99_ms"] = round(percentile(offsets, 99), 3)
    tool.figures["gap_err_p50_ms"] = round(percentile(gaps, 50), 3)


def _load(tool: Tool, url: str, requests: list[bytes], conns: int, seconds: float) -> None:
    result = load(url, requests, connections=conns, duration=seconds)
    if result.errors:
        raise RuntimeError(f"{result.errors} of {len(result.latencies)} answers were not 200")
    tool.loads.setdefault(conns, []).append(result)


def _replay(tools: list[Tool], upstream: str, indices: list[int], plan: PeerPlan) -> None:
    with contextlib.ExitStack() as stack:
        servers: dict[str, Server] = {}
        for tool in tools:
            _guard(tool, "start replaying", _start, stack, servers, tool, upstream, "replay")
        live = [t for t in tools if not t.failed]
        requests = {
            t.name: [
                post_bytes(
                    servers[t.name].url, PATH, request_body(i), list(REQUEST_HEADERS.items())
                )
                for i in indices
            ]
            for t in live
        }
        for _ in range(plan.rounds):
            for conns in (1, 16):
                for tool in live:
                    url = servers[tool.name].url
                    step = f"replay on {conns} connections"
                    _guard(tool, step, _load, tool, url, requests[tool.name], conns, plan.seconds)
        for tool in live:
            server = servers[tool.name]
            _guard(tool, "replay the bodies", _bodies, tool, server.url, indices)
            if tool.kind != "reel":  # the peers replay with no timing: the same server
                _guard(tool, "replay the stream", _stream, tool, server.url, plan.streams)
            if not tool.failed:
                tool.figures["peak_rss_mb"] = round(server.peak_rss_kb() / 1024, 1)
    for tool in tools:  # Reel's stream: realtime timing, a server of its own
        if tool.kind == "reel":
            with serving(tool, upstream, "realtime") as server:
                _frame_times_wire(server.url, request_body(STREAM_INDEX, stream=True))  # warm
                _stream(tool, server.url, plan.streams)


_Times = tuple[list[tuple[float, float]], list[tuple[float, float]]]


def _pass(passes: list[_Times], direct: str, proxy: str, body: bytes, requests: int) -> None:
    passes.append(_interleaved(direct, proxy, body, requests))


def _record_overhead(tools: list[Tool], requests: int, rounds: int) -> None:
    upstream_args = ["-m", "tests.fakes.upstream", "--port", "0", "--frame-delay", "0.001"]
    with spawn(upstream_args) as upstream, contextlib.ExitStack() as stack:
        servers: dict[str, Server] = {}
        for tool in tools:
            _guard(tool, "start recording", _start, stack, servers, tool, upstream.url, "overhead")
        samples: dict[tuple[str, bool], list[_Times]] = {}
        per_round = max(1, requests // rounds)
        for _ in range(rounds):
            for stream in (False, True):
                body = request_body(1, stream=stream)
                for tool in tools:
                    if tool.failed:
                        continue
                    passes = samples.setdefault((tool.name, stream), [])
                    url = servers[tool.name].url
                    _guard(tool, "record", _pass, passes, upstream.url, url, body, per_round)
        for tool in tools:
            for stream in (False, True):
                done = samples.get((tool.name, stream))
                if tool.failed or not done:
                    continue
                direct = [t for p in done for t in p[0]]
                through = [t for p in done for t in p[1]]
                what = "stream" if stream else "json"
                tool.figures[f"record_added_ttfb_{what}_us"] = us(_added((direct, through), 0)[1])
                tool.figures[f"record_added_total_{what}_us"] = us(_added((direct, through), 1)[1])


def _row(tool: Tool) -> Row:
    row: Row = {"tool": tool.name, "version": tool.version}
    if tool.failed:
        row["requests_per_s_1"] = tool.failed
        return row
    for conns in (1, 16):
        runs = tool.loads.get(conns, [])
        row[f"requests_per_s_{conns}"] = round(median([r.rps for r in runs]))
        row[f"p50_us_{conns}"] = us(median([percentile(r.latencies, 50) for r in runs]))
        row[f"p99_us_{conns}"] = us(median([percentile(r.latencies, 99) for r in runs]))
    keys = (
        "peak_rss_mb",
        "bodies_as_recorded",
        "stream_frames",
        "stream_arrivals",
        "offset_err_p50_ms",
        "offset_err_p99_ms",
        "gap_err_p50_ms",
        "record_added_ttfb_json_us",
        "record_added_total_json_us",
        "record_added_ttfb_stream_us",
        "record_added_total_stream_us",
        "record_s",
    )
    row.update({k: tool.figures[k] for k in keys if k in tool.figures})
    return row


def peer_rows(work: Path, plan: PeerPlan) -> list[Row]:
    """One row per tool: Reel's proxy on each backend, mitmproxy, talkback."""
    tools = _tools(work, plan)
    indices = [i for i in range(plan.interactions) if not is_stream(i)]
    started = time.perf_counter()
    with spawn(["-m", "bench._corpus_upstream"]) as upstream:
        for tool in tools:
            _guard(tool, "record", _record, tool, upstream.url, indices)
    _log(f"recorded {len(indices) + 1} interactions each", started)
    _replay(tools, upstream.url, indices, plan)
    _log("replayed", started)
    _record_overhead(tools, plan.record_requests, plan.rounds)
    _log("record overhead measured", started)
    load_now = round(os.getloadavg()[0], 2)
    rows = [_row(t) for t in tools]
    for row in rows:
        row["load_1m"] = load_now
    return rows


def _log(what: str, since: float) -> None:
    seconds = time.perf_counter() - since
    stamp = time.strftime("%H:%M:%S")
    print(f"[bench {stamp}] proxypeers: {what} ({seconds:.1f} s)", file=sys.stderr, flush=True)


def lead(rows: list[Row]) -> list[tuple[str, str, bool | None]]:
    """Reel against each peer, read off the rows: (what, figure, whether
    Reel is ahead).  The issue's claim, kept in every full run: ahead on
    each of these."""
    reel = [r for r in rows if str(r["tool"]).startswith("reel") and "peak_rss_mb" in r]
    out: list[tuple[str, str, bool | None]] = []
    for peer in (r for r in rows if not str(r["tool"]).startswith("reel")):
        name = peer["tool"]
        if "peak_rss_mb" not in peer or not reel:
            out.append((f"Reel vs {name}", str(peer["requests_per_s_1"]), None))
            continue
        speed = [
            r[f"requests_per_s_{c}"] / peer[f"requests_per_s_{c}"] for r in reel for c in (1, 16)
        ]
        out.append(
            (
                f"Reel's requests/s over {name}'s (1 and 16 connections, each backend)",
                _span(speed),
                min(speed) > 1,
            )
        )
        memory = [peer["peak_rss_mb"] / r["peak_rss_mb"] for r in reel]
        out.append((f"{name}'s peak RSS over Reel's", _span(memory), min(memory) > 1))
        key = "record_added_ttfb_json_us"
        if key in peer and all(key in r for r in reel):
            ours = [r[key] / 1000 for r in reel]
            out.append(
                (
                    f"record mode's added TTFB, p50 (non-stream): Reel vs {name}",
                    f"{min(ours):.2f}-{max(ours):.2f} ms vs {peer[key] / 1000:.2f} ms",
                    max(ours) < peer[key] / 1000,
                )
            )
        key = "offset_err_p99_ms"
        if key in peer and all(key in r for r in reel):
            worst = max(r[key] for r in reel)
            out.append(
                (
                    f"the 40-frame stream's offset error p99: Reel vs {name}",
                    f"{worst} ms vs {peer[key]} ms ({peer['stream_arrivals']} arrivals)",
                    worst < peer[key],
                )
            )
    return out


def _span(ratios: list[float]) -> str:
    return f"{min(ratios):.2f}x-{max(ratios):.2f}x"
