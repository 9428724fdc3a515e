"""The best of a few timings: what the scaling tests compare (a ratio of
two such, never a wall-clock bound; the machine's other work only ever
slows a try down, so the fastest is the closest to the code's own cost)."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["best_of"]


def best_of(run: Callable[[], object], tries: int = 5) -> float:
    """The shortest of ``tries`` timings of ``run()``, in seconds."""
    times = []
    for _ in range(tries):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)
