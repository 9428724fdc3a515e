"""The per-test proxy's imports, before and after: what a worker's first
proxied test imports, and the 300-test suite through the proxy.

Two measurements, each taking two ``src`` directories (``--before``, and
this checkout's ``src`` as the after) in interleaved rounds, so a busy
moment of the machine hits both alike:

- ``probe``: a fresh interpreter that has already imported what a pytest
  worker holds when its first test asks for the proxy (pytest, the SDK,
  httpx, Reel's plugin, a cassette's file, the settings) runs the
  plugin's own import block for the proxy (``ReelCassette._started_proxy``)
  and prints its wall and CPU milliseconds and the modules it loaded.
  The garbage collector stays on, as in a worker: a full collection of a
  heap holding the SDK's models costs tens of milliseconds and falls
  inside whichever import allocates past its threshold.  So the block is
  also timed with the collector off (``nogc_*``: the imports' own cost);
  each figure is the minimum and the median of the rounds.
- ``suite``: ``bench/pertest.py``'s suite, variant ``proxy``, the floor,
  before and after run in turn each round (serial and ``-n 2``), medians
  of wall and CPU time above the floor, and Reel's own phases (one more
  run each with ``--reel-phases``).

Byte code is written by an untimed first run (``PYTHONDONTWRITEBYTECODE``
is dropped from the children's environment).  Run::

    git archive <before> src | tar -x -C /tmp/before
    python bench/proxy_imports.py --before /tmp/before/src --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import pertest
from bench._common import ROOT, Row, machine

__all__ = ["probe_rows", "suite_rows"]

#: What a pytest worker holds when its first test asks for the proxy.
_HELD = (
    "import pytest, openai, httpx\n"
    "import reel_bindings.pytest_plugin, reel_bindings._files, reel_bindings._settings\n"
)
#: The plugin's import block for the proxy (``ReelCassette._started_proxy``).
_BLOCK = (
    "from reel_bindings._session_proxy import SessionProxy\n"
    "from reel_bindings._settings import Settings\n"
    "from reel_bindings._upstream import AsyncUpstream\n"
    "from reel_bindings.proxy import Proxy\n"
    "from reel_core import Mode\n"
)
_PROBE = (
    "import gc, json, sys, time\n"
    f"{_HELD}"
    "if sys.argv[1:] == ['nogc']:\n"
    "    gc.disable()\n"
    "held = set(sys.modules)\n"
    "wall, cpu = time.perf_counter(), time.process_time()\n"
    f"{_BLOCK}"
    "wall, cpu = time.perf_counter() - wall, time.process_time() - cpu\n"
    "new = sorted(set(sys.modules) - held)\n"
    "print(json.dumps({'wall_ms': wall * 1000, 'cpu_ms': cpu * 1000, 'modules': new}))\n"
)


def _env(src: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join([str(src), str(ROOT)])
    return env


def _probe(src: Path, *flags: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, *flags],
        cwd=ROOT,
        env=_env(src),
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, object] = json.loads(out.stdout.splitlines()[-1])
    return result


def _figures(values: list[float]) -> dict[str, float]:
    return {"min": round(min(values), 2), "median": round(statistics.median(values), 2)}


def probe_rows(sources: dict[str, Path], rounds: int) -> list[Row]:
    """Each source's import block: wall and CPU ms (min, median of
    ``rounds`` interleaved runs) and the modules it loads."""
    for src in sources.values():
        _probe(src)  # writes the byte code
    walls: dict[str, list[float]] = {name: [] for name in sources}
    cpus: dict[str, list[float]] = {name: [] for name in sources}
    nogc: dict[str, list[float]] = {name: [] for name in sources}
    modules: dict[str, list[str]] = {}
    for _ in range(rounds):
        for name, src in sources.items():
            result = _probe(src)
            walls[name].append(float(result["wall_ms"]))  # type: ignore[arg-type]
            cpus[name].append(float(result["cpu_ms"]))  # type: ignore[arg-type]
            modules[name] = list(result["modules"])  # type: ignore[call-overload]
            nogc[name].append(float(_probe(src, "nogc")["cpu_ms"]))  # type: ignore[arg-type]
    rows: list[Row] = []
    for name in sources:
        loaded = modules[name]
        rows.append(
            {
                "probe": name,
                "wall_ms": _figures(walls[name]),
                "cpu_ms": _figures(cpus[name]),
                "nogc_cpu_ms": _figures(nogc[name]),
                "modules": len(loaded),
                "wsproto": any(m.partition(".")[0] == "wsproto" for m in loaded),
                "rounds_wall_ms": [round(w, 1) for w in walls[name]],
            }
        )
    return rows


def suite_rows(
    sources: dict[str, Path], work: Path, tests: int, rounds: int, workers: Sequence[int]
) -> list[Row]:
    """The proxy variant of ``bench/pertest.py``'s suite for each source,
    interleaved with the floor round by round."""
    root = {
        "floor": pertest.write_suite(work, tests, "floor"),
        "proxy": pertest.write_suite(work, tests, "proxy"),
    }
    runs = [("floor", None), *((name, src) for name, src in sources.items())]
    rows: list[Row] = []
    for n in workers:
        for name, src in runs:  # untimed: byte code written
            pertest.SRC = src or pertest.SRC
            pertest._pytest(root["floor" if src is None else "proxy"], name, n)
        walls: dict[str, list[float]] = {name: [] for name, _ in runs}
        cpus: dict[str, list[float]] = {name: [] for name, _ in runs}
        phases: dict[str, list[dict[str, float]]] = {name: [] for name in sources}
        for _ in range(rounds):
            for name, src in runs:
                if src is not None:
                    pertest.SRC = src
                variant = "floor" if src is None else "proxy"
                wall, cpu = pertest._pytest(root[variant], variant, n)
                walls[name].append(wall)
                cpus[name].append(cpu)
            for name, src in sources.items():  # the phase timer's runs, interleaved too
                pertest.SRC = src
                phases[name].append(_phases(root["proxy"], n))
        floor_wall = statistics.median(walls["floor"])
        floor_cpu = statistics.median(cpus["floor"])
        for name, src in runs:
            wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
            row: Row = {
                "run": name,
                "workers": n or "serial",
                "tests": tests,
                "wall_s": round(wall, 3),
                "cpu_s": round(cpu, 3),
                "wall_above_floor_ms": round((wall - floor_wall) / tests * 1000, 3),
                "cpu_above_floor_ms": round((cpu - floor_cpu) / tests * 1000, 3),
                "rounds_wall_s": [round(t, 3) for t in walls[name]],
                "rounds_cpu_s": [round(t, 3) for t in cpus[name]],
            }
            if src is not None:
                medians = {
                    phase: round(statistics.median(p[phase] for p in phases[name]), 3)
                    for phase in phases[name][0]
                }
                row["reel_own_ms"] = medians.pop("total")
                row["reel_phases_ms"] = ", ".join(f"{k} {v}" for k, v in medians.items() if v)
            rows.append(row)
    return rows


def _phases(root: Path, workers: int) -> dict[str, float]:
    """Reel's own ms per test by phase, from one run with the phase timer
    on; ``imports`` also as the ms of one test-running process
    (``imports_per_worker``: under ``-n`` the controller imports too, and
    runs no test)."""
    report = root / "phases.json"
    report.unlink(missing_ok=True)
    pertest._pytest(root, "proxy", workers, report=report)
    figures = json.loads(report.read_text())["phases"]
    tests = figures["tests"]
    own = {p: s * 1000 / tests for p, s in figures["seconds"].items()}
    own["total"] = sum(figures["seconds"].values()) * 1000 / tests
    runners = figures.get("workers") or [figures]
    own["imports_per_worker"] = statistics.mean(w["seconds"]["imports"] * 1000 for w in runners)
    return own


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", type=Path, required=True, help="the before's src directory")
    parser.add_argument("--after", type=Path, default=ROOT / "src")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--probes", type=int, default=15)
    parser.add_argument("--tests", type=int, default=300)
    parser.add_argument("--workers", type=int, action="append", default=None)
    parser.add_argument("--only", choices=("probe", "suite"), default=None)
    parser.add_argument("--work", type=Path, default=Path("/tmp/reel-proxy-imports"))
    args = parser.parse_args(argv)
    sources = {"before": args.before.resolve(), "after": args.after.resolve()}
    report: dict[str, object] = {"machine": machine()}
    if args.only in (None, "probe"):
        report["probe"] = probe_rows(sources, args.probes)
    if args.only in (None, "suite"):
        workers = args.workers or [0, 2]
        report["suite"] = suite_rows(sources, args.work, args.tests, args.rounds, workers)
    report["load_at_end"] = os.getloadavg()[0]
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
