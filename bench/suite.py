"""A whole test suite, side by side (``python bench/run.py --only suite``).

The same generated pytest suite (``bench.suite_gen``, ``bench.suite_calls``:
``N`` tests, each with its own cassette of 1 to 5 OpenAI SDK calls, a fifth
of them streamed, a tenth retried after a 429 or 500) is wired to each tool:

- ``reel``: Reel's plugin in process (``reel.openai()`` from the fixture);
- ``reel-proxy``: Reel's plugin with the per-test proxy
  (``@pytest.mark.reel(proxy=True)``; per test, the test's own
  ``openai.OpenAI()``; shared, the client the plugin offers,
  ``reel.proxy_openai()``);
- ``vcrpy`` (pytest-recording), ``cassetter`` (its plugin), each through
  its ``vcr`` marker matching method, URI and body;
- ``agenttape`` (its plugin): it records no OpenAI stream, so it runs the
  stream-free variant of the suite, next to Reel and the floor on the same;
- ``floor``: the same suite with the SDK answered by ``httpx2.MockTransport``
  (the OpenAI SDK speaks httpx2): what pytest and the SDK cost alone.

Each tool records its own cassettes of the same calls against one fake
upstream (``bench.suite_upstream``, a child process); then the upstream is
turned into a tripwire at the same URL, and every replay run is checked: it
passed all ``N`` tests and the tripwire counted 0 requests, or the section
stops with what went wrong.  Replays are timed as whole ``pytest`` runs
(wall time, serial and with ``-n 2``), every configuration once per round,
the order rotated from round to round; the figures are medians of the
rounds.  A tool's cost per test is its median over the floor's, same
variant, wiring and workers, divided by ``N``; ``*_vs_reel`` divides it by
Reel's (in process).

Reel's own cost is split by a profiled run (``split_rows``): cProfile of
Reel's serial per-test suite, each Reel function's time counted where it is
entered from outside Reel (pytest's hooks and fixtures, the SDK's
transport calls), and the plugin's import in a fresh interpreter after
pytest and the SDK (what each xdist worker pays again).
"""

from __future__ import annotations

import importlib.util
import json
import os
import pstats
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._common import ROOT, Row, median, ratio, spawn
from .suite_calls import calls_of
from .suite_gen import TOOLS, Tool, write_suite

__all__ = ["SuitePlan", "SuiteRun"]

#: The tools of each variant of the suite, the floor first.
VARIANTS: dict[str, tuple[str, ...]] = {
    "streams": ("floor", "reel", "reel-proxy", "vcrpy", "cassetter"),
    "no-streams": ("floor", "reel", "agenttape"),
}
WIRINGS = ("per-test", "shared")
#: What a run of a generated suite may take before it counts as hung.
RUN_TIMEOUT = 900.0
#: Not passed to a generated suite's runs.  ``PYTHONDONTWRITEBYTECODE``:
#: a user's runs load Reel from byte code, as the peers installed in
#: site-packages are (without it, every run compiled Reel's edited modules).
_SCRUBBED = (
    "PYTEST_ADDOPTS",
    "PYTEST_PLUGINS",
    "PYTHONDONTWRITEBYTECODE",
    "REEL_MODE",
    "REEL_STORE",
    "REEL_TIMING",
)


@dataclass(frozen=True)
class SuitePlan:
    """How much of the suite section a run measures."""

    sizes: tuple[int, ...]
    rounds: int
    #: ``0``: serial; ``2``: ``-n 2``.
    workers: tuple[int, ...] = (0, 2)
    wirings: tuple[str, ...] = WIRINGS
    #: Profile Reel's rows for the cost split.
    split: bool = True
    #: Fresh interpreters timing the plugin's import (the best counts).
    import_repeat: int = 5


@dataclass(frozen=True)
class Config:
    """One timed configuration: a tool on a variant, wired one way, run
    serially or on workers."""

    tool: str
    variant: str
    wiring: str
    workers: int

    @property
    def label(self) -> str:
        run = f"-n {self.workers}" if self.workers else "serial"
        return f"{self.tool} ({self.variant}, {self.wiring}, {run})"


class SuiteError(RuntimeError):
    """A generated suite did not run as it must (a test failed, or a
    replay reached the upstream): the section's figures would be wrong."""


@dataclass
class SuiteRun:
    """The suite section of one benchmark run, in ``work``."""

    work: Path
    plan: SuitePlan
    rows: list[Row] = field(default_factory=list)
    split: list[Row] = field(default_factory=list)
    #: The same figures in CPU time (user and system, the run's processes
    #: together), which a loaded machine disturbs far less than wall time.
    cpu_rows: list[Row] = field(default_factory=list)
    #: Load averages read after each round (the machine's other work), by size.
    loads: dict[int, list[float]] = field(default_factory=dict)

    def measure(self) -> list[Row]:
        for n in self.plan.sizes:
            self._size(n)
        return self.rows

    # -- one size ---------------------------------------------------------------

    def _size(self, n: int) -> None:
        base = self.work / f"suite-{n}"
        missing = {
            name: f"{tool.needs} is not installed (pip install 'reel-llm[bench]')"
            for name, tool in TOOLS.items()
            if tool.needs and importlib.util.find_spec(tool.needs) is None
        }
        with spawn(["-m", "bench.suite_upstream"]) as upstream:
            env = _environment(upstream.url)
            dirs: dict[tuple[str, str], Path] = {}
            for variant, tools in VARIANTS.items():
                for name in tools:
                    if name in missing:
                        continue
                    tool = TOOLS[name]
                    directory = base / f"{variant}-{name}"
                    write_suite(directory, tool, n, streams=variant == "streams")
                    if tool.record_flags is not None:
                        _say(f"{n} tests: {name} records ({variant})")
                        _control(upstream.url, "record")
                        _record(directory, tool, n, env, upstream.url)
                    dirs[variant, name] = directory
            _control(upstream.url, "tripwire")
            configs = [
                Config(name, variant, wiring, workers)
                for (variant, name) in dirs
                for wiring in self.plan.wirings
                for workers in self.plan.workers
            ]
            times: dict[Config, list[Timed]] = {c: [] for c in configs}
            for r in range(self.plan.rounds):
                _say(f"{n} tests: round {r + 1} of {self.plan.rounds} ({len(configs)} runs)")
                order = configs[r % len(configs) :] + configs[: r % len(configs)]
                if r % 2:
                    order.reverse()
                for config in order:
                    directory = dirs[config.variant, config.tool]
                    times[config].append(
                        _replay(directory, TOOLS[config.tool], n, config, env, upstream.url)
                    )
                self.loads.setdefault(n, []).append(round(os.getloadavg()[0], 2))
            split = []
            if self.plan.split and ("streams", "reel") in dirs:
                reel, floor = dirs["streams", "reel"], dirs["streams", "floor"]
                split = _split(reel, floor, n, env, upstream.url, self.plan.import_repeat)
        rows = self._rows(n, {c: [t.wall for t in ts] for c, ts in times.items()}, missing)
        self.rows.extend(rows)
        cpu = self._rows(n, {c: [t.cpu for t in ts] for c, ts in times.items()}, missing)
        self.cpu_rows.extend(cpu)
        # the profiled shares applied to the unprofiled cost (serial, per-test;
        # CPU time, which the machine's other work moves least)
        measured = [
            r["reel_ms"]
            for r in cpu
            if (r["variant"], r["wiring"], r["run"]) == ("streams", "per-test", "serial")
        ]
        for row in split:
            if measured and isinstance(row["share"], float) and "est_ms_per_test" not in row:
                row["est_ms_per_test"] = round(row["share"] * measured[0], 3)
        self.split.extend(split)

    def _rows(self, n: int, times: dict[Config, list[float]], missing: dict[str, str]) -> list[Row]:
        calls = sum(len(calls_of(t)) for t in range(n))
        walls = {c: median(ts) for c, ts in times.items()}
        rows = []
        for variant, tools in VARIANTS.items():
            for wiring in self.plan.wirings:
                for workers in self.plan.workers:
                    floor = walls.get(Config("floor", variant, wiring, workers))
                    if floor is None:
                        continue
                    row: Row = {
                        "tests": n,
                        "calls": calls,
                        "variant": variant,
                        "wiring": wiring,
                        "run": f"-n {workers}" if workers else "serial",
                        "floor_s": round(floor, 2),
                    }
                    above: dict[str, float] = {}
                    for name in tools[1:]:
                        wall = walls.get(Config(name, variant, wiring, workers))
                        if wall is None:
                            row[f"{name}_ms"] = f"not run: {missing.get(name, 'unknown')}"
                            continue
                        above[name] = (wall - floor) / n * 1000
                        row[f"{name}_ms"] = round(above[name], 2)
                    for name in tools[2:]:
                        if name in above and "reel" in above:
                            row[f"{name}_vs_reel"] = ratio(above[name], above["reel"])
                    row["rounds"] = len(times[Config("floor", variant, wiring, workers)])
                    row["load"] = max(self.loads.get(n, [float("nan")]))
                    rows.append(row)
        return rows


# -- running the generated suites ------------------------------------------------


def _say(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] suite: {message}", file=sys.stderr, flush=True)


def _environment(upstream: str) -> dict[str, str]:
    """The environment every run of a generated suite gets: the SDK pointed
    at the upstream (or the tripwire in its place), a key, no plugin but
    those named."""
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    path = os.environ.get("PYTHONPATH", "")
    env.update(
        {
            "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), path) if p),
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "OPENAI_API_KEY": "sk-suite-bench-0000000000000000000000000000",
            "OPENAI_BASE_URL": f"{upstream}/v1",
            "REEL_UPSTREAM": upstream,
        }
    )
    return env


def _control(upstream: str, what: str) -> dict[str, Any]:
    request = urllib.request.Request(f"{upstream}/_suite/{what}", method="POST", data=b"")
    with urllib.request.urlopen(request, timeout=30) as response:
        figures: dict[str, Any] = json.loads(response.read())
    return figures


def _args(tool: Tool, workers: int) -> list[str]:
    args = [sys.executable, "-m", "pytest", "-q"]
    if tool.plugin:
        args += ["-p", tool.plugin]
    if workers:
        args += ["-p", "xdist.plugin", "-n", str(workers)]
    return args


@dataclass(frozen=True)
class Timed:
    """One run's wall time, and the CPU time (user and system) of its
    processes (pytest, and its xdist workers, each waited for)."""

    wall: float
    cpu: float


def _cpu() -> float:
    """CPU seconds of this process's children so far (NaN without ``resource``)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return float("nan")
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _run(
    directory: Path, args: list[str], n: int, env: dict[str, str], what: str
) -> tuple[Timed, str]:
    cpu = _cpu()
    start = time.perf_counter()
    done = subprocess.run(
        args, cwd=directory, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT
    )
    elapsed = Timed(time.perf_counter() - start, _cpu() - cpu)
    summary = done.stdout.strip().splitlines()[-1:] or [""]
    if done.returncode != 0 or f"{n} passed" not in summary[0]:
        tail = (done.stdout + done.stderr)[-3000:]
        raise SuiteError(
            f"{what} in {directory} did not pass its {n} tests (exit {done.returncode}); "
            f"run it by hand there: {' '.join(args[1:])}\n{tail}"
        )
    return elapsed, done.stdout


def _record(directory: Path, tool: Tool, n: int, env: dict[str, str], upstream: str) -> None:
    assert tool.record_flags is not None
    args = [*_args(tool, 0), *tool.record_flags]
    _run(directory, args, n, {**env, "SUITE_WIRING": "per-test"}, f"recording {tool.name}")
    served = _control(upstream, "record")["served"]
    if not served:
        raise SuiteError(f"recording {tool.name} sent nothing to the fake upstream")


def _replay(
    directory: Path, tool: Tool, n: int, config: Config, env: dict[str, str], upstream: str
) -> Timed:
    elapsed, _ = _run(
        directory,
        _args(tool, config.workers),
        n,
        {**env, "SUITE_WIRING": config.wiring},
        f"replaying {config.label}",
    )
    tripped = _control(upstream, "tripwire")["count"]  # read and zeroed
    if tripped:
        raise SuiteError(
            f"replaying {config.label} sent {tripped} request(s) to the upstream: "
            "a replay must never reach the network"
        )
    return elapsed


# -- Reel's own cost, split -------------------------------------------------------

_END_OF_RUN = {"pytest_terminal_summary", "pytest_sessionfinish", "pytest_unconfigure"}
_FIXTURES = {"reel", "reel_proxy", "_reel_marker_proxy", "_reel_marker_freeze", "_reel_calls"}
_REEL = (os.sep + "reel_core" + os.sep, os.sep + "reel_bindings" + os.sep)


def _is_reel(filename: str) -> bool:
    return any(part in filename for part in _REEL)


def _category(filename: str, name: str, calls: int) -> str:
    if filename.endswith("pytest_plugin.py"):
        if name in _END_OF_RUN:
            return "end-of-run report"
        if name in _FIXTURES:
            return "fixtures (setup, teardown)"
        if name.startswith("pytest_"):
            return (
                "plugin hooks"
                if calls > 1
                else "run start (pytest_configure: settings, the core's imports)"
            )
        return "client build (reel.openai())"
    return "requests (transport, replayed body)"


def _outside(caller: tuple[str, int, str], callee: str) -> bool:
    """Whether a call edge enters Reel from outside: pytest, the SDK, the
    test.  Dataclass ``__init__`` (``<string>``) is inside whoever made the
    value; a builtin (``~``: ``next``, ``send``) enters Reel only when it
    resumes the plugin's hook wrappers and fixtures for pytest."""
    filename = caller[0]
    if _is_reel(filename) or filename == "<string>":
        return False
    return filename != "~" or callee.endswith("pytest_plugin.py")


def entry_times(stats: pstats.Stats) -> dict[str, float]:
    """Seconds spent in Reel, by category: each Reel function's cumulative
    time from the callers outside Reel (where pytest, the SDK or the test
    enter it), imports left out (measured apart); ``cassette open`` is the
    cumulative time of ``CassetteFile.__init__``, taken out of the
    category that opened it (the fixture)."""
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]  # pstats' table
    out: dict[str, float] = {}
    opened = 0.0
    for (filename, _line, name), (_cc, nc, _tt, _ct, callers) in raw.items():
        if not _is_reel(filename) or name == "<module>":
            continue
        if name == "__init__" and filename.endswith("_files.py"):
            opened += sum(edge[3] for edge in callers.values())
        outside = sum(edge[3] for caller, edge in callers.items() if _outside(caller, filename))
        if outside:
            key = _category(filename, name, nc)
            out[key] = out.get(key, 0.0) + outside
    if opened:
        out["cassette open"] = opened
        fixture = "fixtures (setup, teardown)"
        out[fixture] = max(0.0, out.get(fixture, 0.0) - opened)
    return out


def _profile(
    directory: Path, tool: Tool, n: int, env: dict[str, str], upstream: str
) -> tuple[float, pstats.Stats]:
    out = directory / "suite.prof"
    args = _args(tool, 0)
    profiled = [args[0], "-m", "cProfile", "-o", str(out), *args[1:]]
    elapsed, _ = _run(directory, profiled, n, {**env, "SUITE_WIRING": "per-test"}, "profiling")
    if _control(upstream, "tripwire")["count"]:
        raise SuiteError("the profiled replay reached the upstream")
    return elapsed.cpu, pstats.Stats(str(out))


def _import_ms(env: dict[str, str], repeat: int) -> float:
    """The plugin's import (with the SDK helpers and the core they load), in
    a fresh interpreter that already imported pytest and the SDK: the best
    of ``repeat``, ms."""
    code = (
        "import time, pytest, openai, httpx2; t = time.perf_counter(); "
        "import reel_bindings.pytest_plugin, reel_bindings.sdk; "
        "print(time.perf_counter() - t)"
    )
    best = float("inf")
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        best = min(best, float(out.stdout.strip()))
    return best * 1000


def _split(
    reel: Path, floor: Path, n: int, env: dict[str, str], upstream: str, repeat: int
) -> list[Row]:
    """Reel's cost per test split into its parts (a profiled serial run of
    the per-test suite, next to the floor's profiled the same way)."""
    reel_s, stats = _profile(reel, TOOLS["reel"], n, env, upstream)
    floor_s, _ = _profile(floor, TOOLS["floor"], n, env, upstream)
    parts = entry_times(stats)
    own = sum(parts.values())
    rows: list[Row] = [
        {
            "tests": n,
            "part": "the whole run, over the floor's",
            "profiled_ms_per_test": round((reel_s - floor_s) / n * 1000, 3),
            "share": 1.0,
            "note": f"CPU: Reel {reel_s:.2f} s, floor {floor_s:.2f} s (both profiled)",
        },
        {
            "tests": n,
            "part": "Reel's own functions (the parts below)",
            "profiled_ms_per_test": round(own / n * 1000, 3),
            "share": round(own / (reel_s - floor_s), 2) if reel_s > floor_s else "",
            "note": "the rest: the SDK and pytest working around Reel, the profiler",
        },
    ]
    for part, seconds in sorted(parts.items(), key=lambda kv: -kv[1]):
        rows.append(
            {
                "tests": n,
                "part": part,
                "profiled_ms_per_test": round(seconds / n * 1000, 3),
                "share": round(seconds / (reel_s - floor_s), 2) if reel_s > floor_s else "",
                "note": "",
            }
        )
    imported = _import_ms(env, repeat)
    rows.append(
        {
            "tests": n,
            "part": "imports (plugin and core, a process)",
            "profiled_ms_per_test": "",
            "share": "",
            "est_ms_per_test": round(imported / n, 3),
            "note": f"{imported:.1f} ms a process, unprofiled: once serial, once in each "
            "worker under -n",
        }
    )
    return rows
