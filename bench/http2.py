"""3b. The proxy over HTTP/2: replay throughput and latency of HTTP/2 streams
(h2c with prior knowledge) and of gRPC unary calls through Reel's proxy,
against a bare h2-on-anyio server (``bench._h2.H2Fixed``) answering a fixed
response of the same size on the same backend.  As in figure 3, each
server runs in a child process pinned to a core of its own, and the load
generator (``bench._h2.load``) on the other; one connection, 1 and 16
streams in flight on it.
"""

from __future__ import annotations

from pathlib import Path

from reel_core import (
    Cassette,
    Interaction,
    MatchConfig,
    RecordedRequest,
    RecordedResponse,
)
from reel_core.tools import grpc_frame, match_key

from ._answers import PATH, REQUEST_HEADERS, answer_body, request_body
from ._common import Row, cpu_seconds, percentile, ratio, spawn, us
from ._data import Corpus
from ._h2 import H2Request, grpc_request, h2_request, load
from ._loadgen import LoadResult
from .proxy import SERVER_CPU, _proxy_args

__all__ = ["GRPC_PATH", "grpc_cassette", "h2_throughput"]

#: The gRPC method the figure calls (the xAI SDK's unary chat call).
GRPC_PATH = "/xai_api.Chat/GetCompletion"


def _grpc_message(i: int) -> bytes:
    """Call ``i``'s request message (bytes as protobuf would give them)."""
    return b"\x0a\x0bgrok-3-mini\x12" + bytes([len(m := f"question {i}".encode())]) + m


def grpc_cassette(path: Path, count: int) -> Path:
    """``count`` recorded unary gRPC calls, each answered with one message
    of ``answer_body``'s size and ``grpc-status: 0``."""
    if path.exists():
        return path
    lines = [Cassette().meta.to_line()]
    for i in range(count):
        body = grpc_frame(_grpc_message(i))
        response = RecordedResponse(
            200,
            (("content-type", "application/grpc"),),
            stream="grpc",
            frames=((0.0, grpc_frame(answer_body(i))),),
            end_ms=0.5,
            trailers=(("grpc-status", "0"),),
        )
        key = match_key("POST", GRPC_PATH, (), body, MatchConfig())
        request = RecordedRequest("POST", GRPC_PATH, (), body)
        lines.append(
            Interaction(key=key, id=f"grpc{i}", request=request, response=response).to_line()
        )
    path.write_bytes(b"".join(lines))
    return path


def _requests(url: str, protocol: str, corpus: Corpus, count: int) -> list[H2Request]:
    if protocol == "grpc":
        return [grpc_request(url, GRPC_PATH, _grpc_message(i)) for i in range(count)]
    headers = list(REQUEST_HEADERS.items())
    return [h2_request(url, PATH, request_body(i), headers) for i in corpus.non_stream(count)]


def h2_throughput(
    corpus: Corpus, backends: list[str], duration: float, rounds: int, work: Path
) -> list[Row]:
    """Reel's proxy replaying HTTP/2 (``corpus``, fast timing) and gRPC
    unary calls vs the bare h2 server; the best of ``rounds`` alternated
    runs of each."""
    body_file = work / "fixed-body.json"
    body_file.write_bytes(answer_body(0))
    calls = 200
    cassettes = {"h2": corpus.write_reel(), "grpc": grpc_cassette(work / "grpc.jsonl", calls)}
    rows: list[Row] = []
    for protocol in ("h2", "grpc"):
        for backend in backends:
            baseline_args = ["-m", "bench._servers", "h2fixed", "--backend", backend]
            baseline_args += ["--cpu", str(SERVER_CPU), "--body", str(body_file)]
            if protocol == "grpc":
                baseline_args.append("--grpc")
            reel_args = _proxy_args(cassettes[protocol], backend, "--timing", "fast")
            with spawn(baseline_args) as baseline, spawn(reel_args) as reel:
                for streams in (1, 16):
                    best: dict[str, LoadResult] = {}
                    for _ in range(rounds):
                        for name, child in (("baseline", baseline), ("reel", reel)):
                            count = calls if protocol == "grpc" else 2000
                            requests = _requests(child.url, protocol, corpus, count)
                            before = cpu_seconds(child.proc.pid)
                            result = load(
                                child.url,
                                requests,
                                connections=1,
                                streams=streams,
                                duration=duration,
                            )
                            after = cpu_seconds(child.proc.pid)
                            if before is not None and after is not None and result.latencies:
                                total = len(result.latencies) / result.duration * (duration + 0.3)
                                result.cpu_per_request = (after - before) / total
                            if result.errors:
                                raise RuntimeError(f"{name} answered {result.errors} errors")
                            if name not in best or result.rps > best[name].rps:
                                best[name] = result
                    base, ours = best["baseline"], best["reel"]
                    rows.append(
                        {
                            "protocol": "gRPC unary" if protocol == "grpc" else "HTTP/2",
                            "backend": backend,
                            "streams": streams,
                            "baseline_rps": round(base.rps),
                            "reel_rps": round(ours.rps),
                            "reel_vs_baseline": ratio(round(ours.rps), round(base.rps)),
                            "baseline_cpu_us": us(base.cpu_per_request),
                            "reel_cpu_us": us(ours.cpu_per_request),
                            "baseline_p50_us": us(percentile(base.latencies, 50)),
                            "reel_p50_us": us(percentile(ours.latencies, 50)),
                            "baseline_p99_us": us(percentile(base.latencies, 99)),
                            "reel_p99_us": us(percentile(ours.latencies, 99)),
                        }
                    )
    return rows
