"""What every benchmark shares: statistics, the machine, child processes."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = [
    "ROOT",
    "Child",
    "Row",
    "best_of",
    "cpu_seconds",
    "machine",
    "percentile",
    "pin_to_cpu",
    "pinned",
    "ratio",
    "spawn",
    "us",
]

#: The project root (bench/.. ): child processes run from here.
ROOT = Path(__file__).resolve().parent.parent

Row = dict[str, Any]


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0-100) of ``values``, interpolated."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """The fastest of ``repeat`` timed calls, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def us(seconds: float) -> float:
    """Seconds as microseconds, rounded for a table."""
    return round(seconds * 1e6, 1)


def ratio(a: float, b: float, digits: int = 2) -> float:
    """``a / b`` rounded (``nan`` when ``b`` is zero)."""
    return round(a / b, digits) if b else float("nan")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    if sys.platform == "darwin":
        try:
            out = subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True
            )
            return out.stdout.strip() or platform.processor()
        except OSError:
            pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # pragma: no cover - Windows
        load = float("nan")
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "os": platform.platform(),
        "load_average_at_start": round(load, 2),
    }


def _cpus() -> list[int]:
    listed = os.environ.get("REEL_BENCH_CPUS", "")
    if listed:
        return [int(c) for c in listed.split(",")]
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return []


def pin_to_cpu(index: int | None) -> None:
    """Keep this process on CPU ``index`` of the run's CPUs (Linux), so a
    server and its client each have a core of their own; a no-op elsewhere
    or on one core."""
    cpus = _cpus()
    if index is None or len(cpus) < 2 or not hasattr(os, "sched_setaffinity"):
        return
    os.environ["REEL_BENCH_CPUS"] = ",".join(map(str, cpus))  # children pick from all
    with contextlib.suppress(OSError):  # a CPU set the scheduler refuses: run unpinned
        os.sched_setaffinity(0, {cpus[index % len(cpus)]})


@contextmanager
def pinned(index: int) -> Iterator[None]:
    """This process on CPU ``index`` for the ``with`` block."""
    if not hasattr(os, "sched_getaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    pin_to_cpu(index)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


class Child:
    """A child process that printed a URL (or other first line) when ready."""

    def __init__(self, proc: subprocess.Popen[str], first_line: str) -> None:
        self.proc = proc
        self.first_line = first_line

    @property
    def url(self) -> str:
        return self.first_line

    def stop(self, timeout: float = 20.0) -> str:
        """SIGTERM (or stdin closed), wait; returns what it printed after its first line."""
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        return out or ""


@contextmanager
def spawn(
    args: Sequence[str], *, env: dict[str, str] | None = None, ready_timeout: float = 120.0
) -> Iterator[Child]:
    """Run ``python args...`` from the project root; wait for its first
    stdout line; stop it (SIGTERM) on leaving."""
    command = [sys.executable, *args]
    environment = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
        env=environment,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + ready_timeout
    line = ""
    while not line and time.monotonic() < deadline:
        line = proc.stdout.readline().strip()
        if not line and proc.poll() is not None:
            raise RuntimeError(
                f"{' '.join(args)} exited with {proc.returncode} before it was ready"
            )
    child = Child(proc, line)
    try:
        yield child
    finally:
        child.stop()


def run_json(args: Sequence[str], *, timeout: float = 900.0) -> Any:
    """Run ``python args...`` from the project root; its last stdout line is JSON."""
    out = subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time a process used so far (Linux ``/proc``), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


_MAXRSS = re.compile(r"maxrss_kb=(\d+)")


def maxrss_kb(text: str) -> int | None:
    """The ``maxrss_kb=N`` a child printed when it stopped."""
    found = _MAXRSS.findall(text)
    return int(found[-1]) if found else None
