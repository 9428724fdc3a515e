"""The ``slow`` marker (a pytest plugin of the test suite, not a test module).

The long soaks and stress runs are marked ``slow`` and deselected by
default, and so are the repeats of the plugin's end-to-end runs on Redis
and under xdist (``STORES``, ``WORKERS``: each runs on the file store in
one process every time; the Redis store and xdist have tests of their own
that always run; a repeat marked by hand, ``pytest.mark.slow(reason=...)``,
names the test that covers its path in every run), so that the README's
test command (``python3 -m pytest -n 4``) stays within about three minutes
on two cores.  They run when ``CI`` or ``REEL_FULL`` is set to a true value
(``1``, ``true``, ``yes``, ``on``): ``.ci/run`` sets ``CI=true`` and runs
that same README command, so CI runs every test.  An explicit ``-m``
decides alone (``-m slow``: only them; ``-m "slow or not slow"``:
everything).

When they run, they run first: the longest jobs started first keep two
workers busy to the end (with ``--dist worksteal``, in ``addopts``, an idle
worker takes half of what another has left), where a soak started last
would leave one worker alone with it for a minute.
"""

from __future__ import annotations

import os

import pytest

__all__ = ["STORES", "WORKERS", "full_run"]

SLOW_HELP = (
    "slow: a long soak or stress test; deselected unless CI or REEL_FULL is true (or -m selects it)"
)

#: The stores a plugin test's inner runs use: the file store, and Redis in a
#: full run.
STORES = ["files", pytest.param("redis", marks=pytest.mark.slow)]

#: The inner runs' workers: one process, and two xdist workers in a full run.
WORKERS = [
    pytest.param([], id="serial"),
    pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.slow),
]

#: The values of ``CI`` / ``REEL_FULL`` that turn the slow tests on.
TRUE = frozenset({"1", "true", "yes", "on"})


def full_run() -> bool:
    """Whether this run includes the slow tests: CI, or asked for."""
    return any(os.environ.get(name, "").strip().lower() in TRUE for name in ("CI", "REEL_FULL"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", SLOW_HELP)
    # pytest-cov's own, named here too: a run without the plugin
    # (``-p no:cov``) still knows it
    config.addinivalue_line("markers", "no_cover: disable coverage for this test.")


def _is_slow(item: pytest.Item) -> bool:
    return item.get_closest_marker("slow") is not None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if full_run() or config.getoption("markexpr"):
        items.sort(key=lambda item: not _is_slow(item))  # stable: slow ones first
        return
    slow = [item for item in items if _is_slow(item)]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not _is_slow(item)]


def pytest_report_header(config: pytest.Config) -> str:
    if full_run():
        return "slow tests: included (CI or REEL_FULL is set)"
    return "slow tests: deselected (REEL_FULL=1, CI=true or -m slow runs them)"
