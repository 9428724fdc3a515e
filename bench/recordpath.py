"""Record mode's cost per forwarded request, Reel against a bare relay, in
interleaved rounds: the before/after of the record path (``recordguard``).

    python -m bench.recordpath                        # 5 rounds of 300 requests
    python -m bench.recordpath --src OTHER/src        # this tree's proxy and OTHER's
    python -m bench.recordpath --stream --rounds 3    # a 40-frame SSE stream too
    python -m bench.recordpath --profile /tmp/prof    # each proxy under cProfile

One fake upstream (``tests.fakes``), one bare h11 relay
(``bench._servers relay``) and one Reel proxy in record mode per source
tree, each server pinned to the same core, this process and the upstream
to the other (as section 5 of ``bench/run.py`` runs them).  Each round
takes every server in turn, in an order rotated round by round, for
``--requests`` requests alternated with as many sent straight to the
upstream (section 5's ``_interleaved``), and notes for each server:

- the p50 time it adds to the time to first byte and to the total;
- its CPU time per request (``/proc``: what a busy machine disturbs least);
- Reel's added time over the relay's of the same round (the guard's ratio).

Each figure is then the median of the rounds, with the lowest and highest
beside it: the spread a loaded machine gives.  Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

from ._answers import request_body
from ._common import ROOT, Child, cpu_seconds, machine, percentile, pinned, ratio, spawn, us
from .proxy import CLIENT_CPU, SERVER_CPU, _added, _interleaved

__all__ = ["main", "measure"]


def _servers(
    stack: ExitStack,
    upstream: str,
    sources: list[Path],
    work: Path,
    backend: str,
    profile: Path | None,
) -> dict[str, Child]:
    """The relay, and a proxy in record mode for each source tree."""
    relay = ["-m", "bench._servers", "relay", "--cpu", str(SERVER_CPU)]
    children = {
        "relay": stack.enter_context(spawn([*relay, "--backend", backend, "--upstream", upstream]))
    }
    for i, src in enumerate(sources):
        name = "reel" if i == 0 else f"reel{i}:{src.parent.name}"
        args = ["-m", "bench._servers", "proxy", "--cpu", str(SERVER_CPU), "--backend", backend]
        args += ["--cassette", str(work / f"recorded-{i}.jsonl"), "--port", "0", "-q"]
        args += ["--mode", "record", "--upstream", upstream]
        if profile is not None:
            profile.mkdir(parents=True, exist_ok=True)
            args = ["-m", "cProfile", "-o", str(profile / f"proxy-{i}.prof"), *args]
        env = {"PYTHONPATH": os.pathsep.join([str(src), str(ROOT)])}
        children[name] = stack.enter_context(spawn(args, env=env))
    return children


def _rotated(names: list[str], by: int) -> Iterator[str]:
    for i in range(len(names)):
        yield names[(i + by) % len(names)]


def measure(
    sources: list[Path],
    *,
    requests: int = 300,
    rounds: int = 5,
    stream: bool = False,
    backend: str = "asyncio",
    profile: Path | None = None,
) -> dict[str, object]:
    """Every round's figures of every server, and their medians (see the module)."""
    kinds = [False, True] if stream else [False]
    per_round: dict[str, dict[str, list[float]]] = {}
    with ExitStack() as stack, pinned(CLIENT_CPU):
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="reel-recordpath-")))
        args = ["-m", "tests.fakes.upstream", "--port", "0", "--frame-delay", "0.001"]
        upstream = stack.enter_context(spawn(args))
        children = _servers(stack, upstream.url, sources, work, backend, profile)
        names = list(children)
        for r in range(rounds):
            for kind in kinds:
                body = request_body(1, stream=kind)
                label = "stream" if kind else "non-stream"
                relay_added: dict[str, float] = {}
                for name in _rotated(names, r):
                    child = children[name]
                    before = cpu_seconds(child.proc.pid)
                    times = _interleaved(upstream.url, child.url, body, requests)
                    after = cpu_seconds(child.proc.pid)
                    figures = per_round.setdefault(f"{label} {name}", {})
                    for what, index in (("ttfb", 0), ("total", 1)):
                        added = _added(times, index)[1]
                        figures.setdefault(f"added_{what}_us", []).append(us(added))
                        if name == "relay":
                            relay_added[what] = added
                    if before is not None and after is not None:
                        cpu = (after - before) / (requests + 10)
                        figures.setdefault("cpu_us", []).append(us(cpu))
                    p50 = percentile([t[1] for t in times[1]], 50)
                    figures.setdefault("total_p50_us", []).append(us(p50))
                for name in names:
                    if name == "relay":
                        continue
                    figures = per_round[f"{label} {name}"]
                    for what in ("ttfb", "total"):
                        mine = figures[f"added_{what}_us"][-1] / 1e6
                        figures.setdefault(f"{what}_vs_relay", []).append(
                            ratio(mine, relay_added[what])
                        )
    summary = {
        row: {
            key: {
                "median": round(statistics.median(values), 2),
                "min": min(values),
                "max": max(values),
            }
            for key, values in figures.items()
        }
        for row, figures in per_round.items()
    }
    return {"machine": machine(), "rounds": per_round, "summary": summary}


def _table(result: dict[str, object]) -> str:
    summary = result["summary"]
    assert isinstance(summary, dict)
    keys = ["added_ttfb_us", "added_total_us", "ttfb_vs_relay", "total_vs_relay", "cpu_us"]
    lines = ["| server | " + " | ".join(keys) + " |", "|---|" + "---|" * len(keys)]
    for row, figures in summary.items():
        cells = []
        for key in keys:
            f = figures.get(key)
            cells.append("-" if f is None else f"{f['median']} ({f['min']}-{f['max']})")
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300, help="per server per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--stream", action="store_true", help="a 40-frame SSE stream too")
    parser.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    parser.add_argument(
        "--src",
        type=Path,
        action="append",
        default=[],
        help="another tree's src to time beside this one's (repeatable)",
    )
    parser.add_argument("--profile", type=Path, help="write each proxy's cProfile here")
    parser.add_argument("--json", type=Path, help="write every round's figures here")
    args = parser.parse_args(argv)
    sources = [ROOT / "src", *(s.resolve() for s in args.src)]
    result = measure(
        sources,
        requests=args.requests,
        rounds=args.rounds,
        stream=args.stream,
        backend=args.backend,
        profile=args.profile,
    )
    info = result["machine"]
    assert isinstance(info, dict)
    start, end = info["load_average_at_start"], os.getloadavg()[0]
    print(f"load average at start: {start}, {end:.2f} at the end")
    print("median (lowest-highest) of the rounds:")
    print(_table(result))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
