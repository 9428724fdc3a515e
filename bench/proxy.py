"""The proxy over the wire, each server in a child process pinned to a core of
its own, the client (this process) on the other.

3. Replay throughput and latency on keep-alive connections (1 and 16),
   asyncio and trio, against a minimal h11-on-anyio server answering a fixed
   response of the same size on the same backend.
5. Record overhead: time to first byte and total time of requests through
   the proxy in record mode, next to the same requests sent straight to the
   same local upstream (the fake OpenAI of ``tests/fakes``) and through a
   bare h11 relay to it (what any proxy adds on this machine), interleaved.
6. Memory: peak RSS of a proxy that opened a large cassette and served
   every line of it once, next to one serving a ten-interaction cassette.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import overload

from ._answers import PATH, REQUEST_HEADERS, answer_body, is_stream, request_body
from ._common import Row, cpu_seconds, maxrss_kb, percentile, ratio, spawn, us
from ._data import Corpus
from ._loadgen import LoadResult, connect, load, post_bytes, read_response

__all__ = ["memory", "record_overhead", "throughput"]

SERVER_CPU = 1
CLIENT_CPU = 0


def _proxy_args(cassette: Path, backend: str, *extra: str) -> list[str]:
    return [
        "-m",
        "bench._servers",
        "proxy",
        "--cpu",
        str(SERVER_CPU),
        "--backend",
        backend,
        "--cassette",
        str(cassette),
        "--port",
        "0",
        "-q",
        *extra,
    ]


def _requests(url: str, corpus: Corpus, count: int) -> list[bytes]:
    return [
        post_bytes(url, PATH, request_body(i), list(REQUEST_HEADERS.items()))
        for i in corpus.non_stream(count)
    ]


def _load_row(result: LoadResult) -> dict[str, float]:
    return {
        "cpu_us": us(result.cpu_per_request),
        "rps": round(result.rps),
        "p50_us": us(percentile(result.latencies, 50)),
        "p99_us": us(percentile(result.latencies, 99)),
    }


def throughput(
    corpus: Corpus, backends: list[str], duration: float, rounds: int, work: Path
) -> list[Row]:
    """Reel's proxy replaying ``corpus`` (fast timing) vs the fixed-response
    baseline; the best of ``rounds`` alternated runs of each."""
    body_file = work / "fixed-body.json"
    body_file.write_bytes(answer_body(0))
    rows: list[Row] = []
    for backend in backends:
        baseline_args = ["-m", "bench._servers", "fixed", "--backend", backend]
        baseline_args += ["--cpu", str(SERVER_CPU), "--body", str(body_file)]
        reel_args = _proxy_args(corpus.write_reel(), backend, "--timing", "fast")
        with spawn(baseline_args) as baseline, spawn(reel_args) as reel:
            for connections in (1, 16):
                best: dict[str, LoadResult] = {}
                for _ in range(rounds):
                    for name, child in (("baseline", baseline), ("reel", reel)):
                        requests = _requests(child.url, corpus, 2000)
                        before = cpu_seconds(child.proc.pid)
                        result = load(
                            child.url, requests, connections=connections, duration=duration
                        )
                        after = cpu_seconds(child.proc.pid)
                        if before is not None and after is not None and result.latencies:
                            # CPU per request, warm-up included (it served those too)
                            total = len(result.latencies) / result.duration * (duration + 0.3)
                            result.cpu_per_request = (after - before) / total
                        if result.errors:
                            raise RuntimeError(f"{name} answered {result.errors} errors")
                        if name not in best or result.rps > best[name].rps:
                            best[name] = result
                base = _load_row(best["baseline"])
                ours = _load_row(best["reel"])
                rows.append(
                    {
                        "backend": backend,
                        "connections": connections,
                        "baseline_rps": base["rps"],
                        "reel_rps": ours["rps"],
                        "reel_vs_baseline": ratio(ours["rps"], base["rps"]),
                        "baseline_cpu_us": base["cpu_us"],
                        "reel_cpu_us": ours["cpu_us"],
                        "baseline_p50_us": base["p50_us"],
                        "reel_p50_us": ours["p50_us"],
                        "baseline_p99_us": base["p99_us"],
                        "reel_p99_us": ours["p99_us"],
                    }
                )
    return rows


def record_overhead(requests: int, work: Path, backend: str = "asyncio") -> list[Row]:
    """TTFB and total time, straight to the fake upstream, through a bare
    h11 relay (the least any forwarding proxy does) and through Reel's proxy
    recording, for a non-stream and a stream chat completion."""
    rows: list[Row] = []
    upstream_args = ["-m", "tests.fakes.upstream", "--port", "0", "--frame-delay", "0.001"]
    with spawn(upstream_args) as upstream:
        cassette = work / "recorded.jsonl"
        proxy_args = _proxy_args(cassette, backend, "--mode", "record", "--upstream", upstream.url)
        relay_args = ["-m", "bench._servers", "relay", "--cpu", str(SERVER_CPU)]
        relay_args += ["--backend", backend, "--upstream", upstream.url]
        with spawn(proxy_args) as proxy, spawn(relay_args) as relay:
            for stream in (False, True):
                body = request_body(1, stream=stream)
                # A pass each, so each proxy idles between its requests for
                # as long as the other (a CPU left idle runs slower after).
                relayed = _interleaved(upstream.url, relay.url, body, requests)
                through = _interleaved(upstream.url, proxy.url, body, requests)
                row: Row = {"request": "stream (SSE)" if stream else "non-stream"}
                for what, index in (("ttfb", 0), ("total", 1)):
                    direct, added = _added(through, index)
                    relay_added = _added(relayed, index)[1]
                    row[f"direct_{what}_p50_us"] = us(direct)
                    row[f"relay_added_{what}_p50_us"] = us(relay_added)
                    row[f"added_{what}_p50_us"] = us(added)
                    row[f"{what}_vs_relay"] = ratio(added, relay_added)
                direct_p99, proxy_p99 = (percentile([t[1] for t in side], 99) for side in through)
                row["added_total_p99_us"] = us(proxy_p99 - direct_p99)
                row["requests"] = requests
                rows.append(row)
        lines = cassette.read_bytes().count(b"\n") - 1 if cassette.exists() else 0
        if lines < 2 * (requests + 10):
            raise RuntimeError(f"the proxy recorded {lines} lines, not {2 * (requests + 10)}")
    return rows


def _interleaved(
    direct: str, proxy: str, body: bytes, requests: int
) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """(TTFB, total) of ``requests`` requests straight to ``direct`` and
    through ``proxy``, alternating, one keep-alive connection each (ten
    more first, to warm them up)."""
    headers = list(REQUEST_HEADERS.items())
    sides = [(connect(url), post_bytes(url, PATH, body, headers)) for url in (direct, proxy)]
    times: tuple[list[tuple[float, float]], list[tuple[float, float]]] = ([], [])
    try:
        for i in range(requests + 10):
            for (sock, request), out in zip(sides, times, strict=True):
                sent = time.perf_counter()
                sock.sendall(request)
                first, last, response = read_response(sock)
                if not response.startswith(b"HTTP/1.1 200"):
                    raise RuntimeError(f"{response[:200]!r} from {sock.getpeername()}")
                if i >= 10:  # the first ones warm connections and caches
                    out.append((first - sent, last - sent))
    finally:
        for sock, _ in sides:
            sock.close()
    return times


def _added(times: tuple[list[tuple[float, float]], ...], index: int) -> tuple[float, float]:
    """The direct p50 of TTFB (``index`` 0) or total (1), and what the proxy adds to it."""
    direct = percentile([t[index] for t in times[0]], 50)
    return direct, percentile([t[index] for t in times[1]], 50) - direct


class _EveryLine(Sequence[bytes]):
    """The request of each line of ``corpus`` in file order (streams too),
    made when asked for: 280,000 of them would hold 250 MB in this process."""

    def __init__(self, url: str, corpus: Corpus) -> None:
        self.url = url
        self.n = corpus.n

    def __len__(self) -> int:
        return self.n

    @overload
    def __getitem__(self, i: int) -> bytes: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[bytes]: ...

    def __getitem__(self, i: int | slice) -> bytes | Sequence[bytes]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.n))]
        body = request_body(i, stream=is_stream(i))
        return post_bytes(self.url, PATH, body, list(REQUEST_HEADERS.items()))


def memory(corpus: Corpus, small: Corpus, *, parsed_lines: int | None = None) -> Row:
    """Peak RSS of a proxy that served every line of ``corpus`` once (each
    parsed, then kept or let go: ``--parsed-lines``), next to one that
    served every line of ``small``."""
    peaks: dict[int, int] = {}
    served = errors = 0
    extra = () if parsed_lines is None else ("--parsed-lines", str(parsed_lines))
    took = 0.0
    for c in (small, corpus):
        with spawn(_proxy_args(c.write_reel(), "asyncio", "--timing", "fast", *extra)) as proxy:
            requests = _EveryLine(proxy.url, c)
            # The first request's lookup reads the digests of every line (a
            # second or so at 1 GB): answered before the load.
            sock = connect(proxy.url)
            try:
                sock.sendall(requests[0])
                read_response(sock)
            finally:
                sock.close()
            t0 = time.perf_counter()
            result = load(
                proxy.url, requests, connections=4, duration=3600.0, warmup=0.0, once=True
            )
            took = time.perf_counter() - t0
            served, errors = len(result.latencies), result.errors
            out = proxy.stop()
        peak = maxrss_kb(out)
        if peak is None:
            raise RuntimeError("the proxy did not report its peak memory")
        if errors or served < c.n:
            raise RuntimeError(f"the proxy served {served} of {c.n} lines, {errors} errors")
        peaks[c.n] = peak
    size = corpus.reel.stat().st_size
    base_mb = peaks[small.n] / 1024
    peak_mb = peaks[corpus.n] / 1024
    return {
        "interactions": corpus.n,
        "file_mb": round(size / 2**20, 1),
        "parsed_lines": "default" if parsed_lines is None else parsed_lines,
        "idle_proxy_rss_mb": round(base_mb, 1),
        "peak_rss_mb": round(peak_mb, 1),
        "added_rss_vs_file": ratio((peak_mb - base_mb) * 2**20, size),
        "requests_served": served,
        "serve_all_s": round(took, 1),
    }


def scratch() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="reel-bench-")
