"""The pytest plugin's phase timer: where Reel's own time in a run goes.

Off by default.  ``--reel-phases`` (or ``REEL_PHASES=1``) turns it on for
a run: the plugin then adds up the wall time of each of its phases, in
each process (every xdist worker sends its figures to the controller),
and the run report shows them (the terminal's ``reel phases`` section,
and ``"phases"`` in ``--reel-report`` JSON).  Off, the plugin's only cost
is a test of one module global per hook.

The phases, each counting its own time (a phase timed inside another,
such as ``open`` inside ``setup``, is left out of it):

- ``imports``: importing Reel's core and the bindings the fixture uses,
  once per process (timed at configure, before anything uses them);
- ``configure``: the plugin's configure hook (the run's settings, its store);
- ``setup``: the ``reel`` fixture's setup;
- ``open``: opening each test's cassette (reading and indexing its lines);
- ``bindings``: what the fixture's helpers build (transports, SDK clients);
- ``proxy``: starting a test's proxy (the worker's listener the first time);
- ``call``: the check of a test's misses after its call;
- ``teardown``: the fixture's teardown, the held recordings' write included;
- ``report``: each test's figures for the run report, and the report itself;
- ``gc``: the garbage collector's pauses that fell inside those phases,
  taken out of the phase they fell in.  A full collection walks the whole
  heap (pytest's, the SDK's, the user's) for tens of milliseconds; landing
  in one phase of one process, it would read as that phase's cost, and
  change from run to run with where the collector's threshold is crossed.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import wraps
from typing import Any, TypeVar

__all__ = ["PHASES", "PhaseTimer", "render_phases", "timed_method"]

PHASES = (
    "imports",
    "configure",
    "setup",
    "open",
    "bindings",
    "proxy",
    "call",
    "teardown",
    "report",
    "gc",
)

#: What ``imports`` times: the modules the fixture and its helpers use.
IMPORTED = (
    "reel_core",
    "reel_core.tools",
    "reel_bindings._settings",
    "reel_bindings._files",
    "reel_bindings._store",
    "reel_bindings._inprocess",
    "reel_bindings._runlog",
    "reel_bindings.httpcore",
    "reel_bindings.sdk",
)


class PhaseTimer:
    """Seconds spent in each phase by one process, and how many tests ran."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.tests = 0
        #: The phase being timed, if any, and since when (its own time so far
        #: is in ``seconds``: a phase timed inside it pauses it).
        self._running: str | None = None
        self._since = 0.0
        self._collecting = 0.0  # when the collection under way started
        gc.callbacks.append(self._collector)

    def close(self) -> None:
        """Stop watching the collector (the run's end)."""
        if self._collector in gc.callbacks:
            gc.callbacks.remove(self._collector)

    def _collector(self, stage: str, info: Mapping[str, Any]) -> None:
        """A collection's pause, moved from the phase it fell in to ``gc``.
        Any thread's: while one collects, none runs (the proxy's loop
        thread collecting holds up the test's thread too).  One the other
        thread runs just as a phase ends may be counted in both."""
        now = time.perf_counter()
        if stage == "start":
            self._collecting = now
        elif self._running is not None:
            paused = now - max(self._collecting, self._since)
            if paused > 0:
                self.seconds["gc"] += paused
                self._since += paused  # the running phase's own time leaves it out

    @contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        """Add the time of the block to ``phase``, less the time of the
        phases timed inside it (each phase counts its own time only)."""
        now = time.perf_counter()
        outer = self._running
        if outer is not None:
            self.seconds[outer] += now - self._since
        self._running, self._since = phase, now
        try:
            yield
        finally:
            now = time.perf_counter()
            self.seconds[phase] += now - self._since
            self._running, self._since = outer, now

    def import_all(self) -> None:
        """Import :data:`IMPORTED` now, timed as ``imports``."""
        import importlib

        with self.timed("imports"):
            for name in IMPORTED:
                importlib.import_module(name)

    def to_json(self) -> dict[str, Any]:
        return {"seconds": dict(self.seconds), "tests": self.tests, "processes": 1}


def merged(figures: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The figures of several processes (an xdist controller's workers) added up."""
    total: dict[str, Any] = {"seconds": dict.fromkeys(PHASES, 0.0), "tests": 0, "processes": 0}
    for one in figures:
        for phase, seconds in one["seconds"].items():
            total["seconds"][phase] = total["seconds"].get(phase, 0.0) + seconds
        total["tests"] += one["tests"]
        total["processes"] += one["processes"]
    return total


def render_phases(figures: Mapping[str, Any]) -> list[str]:
    """The terminal's lines: each phase's milliseconds in all, and per test."""
    seconds = figures["seconds"]
    tests = figures["tests"]
    processes = figures["processes"]
    total = sum(seconds.values())
    head = (
        f"reel phases: {total * 1000:.1f} ms of Reel's own in {tests} test"
        f"{'' if tests == 1 else 's'}, {processes} process{'' if processes == 1 else 'es'}"
    )
    if tests:
        head += f" ({total * 1000 / tests:.3f} ms per test)"
    lines = [head]
    for phase in PHASES:
        ms = seconds.get(phase, 0.0) * 1000
        per = f"  {ms / tests:8.3f} ms/test" if tests else ""
        lines.append(f"  {phase:<10}{ms:10.1f} ms{per}")
    return lines


F = TypeVar("F", bound=Callable[..., Any])


def timed_method(phase: str, timer: Callable[[], PhaseTimer | None]) -> Callable[[F], F]:
    """A method whose calls count in ``phase`` when ``timer()`` gives a timer."""

    def decorate(method: F) -> F:
        @wraps(method)
        def run(*args: Any, **kwargs: Any) -> Any:
            clock = timer()
            if clock is None:
                return method(*args, **kwargs)
            with clock.timed(phase):
                return method(*args, **kwargs)

        return run  # type: ignore[return-value]

    return decorate
