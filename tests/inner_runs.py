"""An in-process inner pytest run leaves one copy of every module behind it
(a pytest plugin of the test suite, not a test module).

The class of defect: state of one pytest session leaking into another in
the same process.  pytester takes a snapshot of ``sys.modules`` when its
fixture is made and before each in-process run (``runpytest_inprocess``,
``inline_run``), and puts it back afterwards: every module imported since
is dropped.  That must drop the inner project's own modules (its test
modules and conftests: the next run may reuse their names), but it dropped
with them every library and Reel module the inner run happened to import
first (httpcore, Reel's in-process transports, the core's cold rooms),
while what was made from them lived on in modules that stay: httpx's
table of httpcore's exceptions, the names the core binds on first use, a
registry.  The outer run then imports a second copy, and ``isinstance``
between the two copies is false: after the garbage-collection test's inner
run, httpx let httpcore's ``ReadError`` through unmapped, and the session
proxy's test saw "Server disconnected" where it expected an
``httpx.TransportError``.

The invariant: after an inner run, ``sys.modules`` holds what it held
before, and each module the inner run imported from outside its own
project (outside pytest's ``basetemp``, where pytester writes the inner
projects) as the inner run left it; only the inner project's modules are
dropped.  One code path: every snapshot pytester takes (the fixture's and
each run's) is made by the class :func:`snapshots_keeping` returns,
installed here for the whole session.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
from _pytest import pytester

__all__ = ["PYTESTERS", "snapshots_keeping"]

#: pytester's own snapshot class (dropping every module imported since).
PYTESTERS = pytester.SysModulesSnapshot


def _files(module: ModuleType) -> list[str]:
    """Where ``module`` was loaded from: its file, or a package's directories."""
    found = [getattr(module, "__file__", None), *(getattr(module, "__path__", None) or ())]
    return [f for f in found if isinstance(f, str) and f]


def _under(path: str, roots: tuple[Path, ...]) -> bool:
    resolved = Path(path).resolve()
    return any(resolved.is_relative_to(root) for root in roots)


def snapshots_keeping(roots: tuple[Path, ...]) -> type[PYTESTERS]:
    """The snapshot class that drops, on restore, only the modules imported
    since it was taken from a file under one of ``roots`` (the inner
    projects), and keeps every other one."""

    class Snapshot(PYTESTERS):
        """pytester's snapshot of ``sys.modules``, keeping what an inner run
        imported from outside ``roots`` (see the module's docstring)."""

        def __init__(self, preserve: Callable[[str], bool] | None = None) -> None:
            super().__init__(preserve)
            self._before = frozenset(sys.modules)

        def restore(self) -> None:
            kept = {
                name: module
                for name, module in sys.modules.items()
                if name not in self._before and not any(_under(f, roots) for f in _files(module))
            }
            super().restore()  # what was there before, as it was
            sys.modules.update(kept)

    return Snapshot


@pytest.fixture(scope="session", autouse=True)
def _inner_runs_keep_their_libraries(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    """For the whole session, before any pytester is made: its snapshots
    drop only what was imported from under ``basetemp``."""
    roots = (tmp_path_factory.getbasetemp().resolve(),)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pytester, "SysModulesSnapshot", snapshots_keeping(roots))
        yield
