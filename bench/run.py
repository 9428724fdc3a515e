"""Reel benchmarks (``nox -s bench``; ``--quick`` for a smoke run).

Each figure is measured next to its baseline in the same run and reported as
a ratio.  Results go to bench/results/latest.md and latest.json with the
machine they ran on.  No figure here is asserted: targets are read, not
tested.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from reel_core import (
    Cassette,
    Config,
    EndOfResponse,
    Interaction,
    MatchConfig,
    Mode,
    RecordedRequest,
    RecordedResponse,
    Request,
    Session,
    match_key,
)

RESULTS = Path(__file__).parent / "results"


def make_cassette(n: int, *, body_kb: int = 2) -> bytes:
    """``n`` distinct chat interactions of realistic size, every tenth a stream."""
    config = MatchConfig()
    filler = "lorem ipsum dolor sit amet " * (body_kb * 1024 // 27)
    lines = [Cassette().meta.to_line()]
    for i in range(n):
        body = json.dumps(
            {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"question {i}"}]}
        ).encode()
        request = RecordedRequest("POST", "/v1/chat/completions", (), body)
        key = match_key("POST", "/v1/chat/completions", (), body, config)
        if i % 10 == 0:
            frames = tuple(
                (float(j), f'data: {{"choices":[{{"delta":{{"content":"w{j} "}}}}]}}\n\n'.encode())
                for j in range(40)
            )
            response = RecordedResponse(
                200,
                (("content-type", "text/event-stream"),),
                stream="sse",
                frames=frames,
                end_ms=41.0,
            )
        else:
            answer = {"id": f"chatcmpl-{i}", "choices": [{"message": {"content": filler}}]}
            response = RecordedResponse(
                200, (("content-type", "application/json"),), body=json.dumps(answer).encode()
            )
        lines.append(Interaction(key, key[7:19], request, response).to_line())
    return b"".join(lines)


def best_of(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def json_loads_every_line(data: bytes) -> list[object]:
    return [json.loads(line) for line in data.split(b"\n") if line]


def bench_open(sizes: list[int], repeat: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for n in sizes:
        data = make_cassette(n)
        split = best_of(partial(data.split, b"\n"), repeat)
        loads = best_of(partial(json_loads_every_line, data), repeat)
        reel = best_of(partial(Cassette.loads, data), repeat)
        rows.append(
            {
                "interactions": n,
                "mb": round(len(data) / 1e6, 1),
                "read_split_ms": round(split * 1000, 2),
                "json_loads_ms": round(loads * 1000, 2),
                "reel_ms": round(reel * 1000, 2),
                "reel_vs_split": round(reel / split, 2),
                "json_loads_vs_reel": round(loads / reel, 1),
            }
        )
    return rows


def bench_lookup(sizes: list[int], requests: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for n in sizes:
        cassette = Cassette.loads(make_cassette(n))
        config = Config(mode=Mode.REPLAY)
        bodies = [
            json.dumps(
                {
                    "model": "gpt-4o-mini",
                    "messages": [{"role": "user", "content": f"question {i % n}"}],
                }
            ).encode()
            for i in range(requests)
        ]
        per = []
        for body in bodies:
            start = time.perf_counter()
            session = Session(cassette, config)
            session.receive_request(Request("POST", "/v1/chat/completions", (), body))
            while not isinstance(session.next_event(), EndOfResponse):
                pass
            per.append(time.perf_counter() - start)
        rows.append(
            {
                "interactions": n,
                "p50_us": round(statistics.median(per) * 1e6, 1),
                "mean_us": round(statistics.fmean(per) * 1e6, 1),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    args = parser.parse_args()
    sizes = [10, 1_000] if args.quick else [10, 1_000, 10_000, 100_000]
    results = {
        "machine": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "open": bench_open(sizes[1:] if len(sizes) > 2 else sizes, repeat=3),
        "core_lookup": bench_lookup(sizes, requests=200 if args.quick else 2000),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "latest.json").write_text(json.dumps(results, indent=2) + "\n")
    md = ["# Reel benchmark results", "", f"Machine: {results['machine']}", ""]
    for section in ("open", "core_lookup"):
        rows = results[section]
        assert isinstance(rows, list)
        md += [f"## {section}", "", "| " + " | ".join(rows[0]) + " |"]
        md += ["|" + "---|" * len(rows[0])]
        md += ["| " + " | ".join(str(v) for v in row.values()) + " |" for row in rows]
        md.append("")
    (RESULTS / "latest.md").write_text("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
