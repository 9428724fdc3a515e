"""An in-process inner run leaves one copy of every module (tests/inner_runs.py).

The class: state of one pytest session leaking into another in the same
process.  pytester put ``sys.modules`` back after an inner run, dropping
every library module the run imported first while objects made from it
lived on; the outer run then imported a second copy.  The invariant, over
generated sets of modules: a restore gives back every module that was
there before, as it was; keeps each module imported since from outside
the inner projects' directory, the same object; and drops each one
imported from inside it.
"""

from __future__ import annotations

import importlib
import itertools
import sys
import tempfile
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from _pytest import pytester as pytester_module
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.inner import inner_ini
from tests.inner_runs import PYTESTERS, snapshots_keeping

#: Instances the inner runs below make of a library's class, handed to
#: the outer run through this module (which stays in ``sys.modules``).
MADE: list[object] = []

LIBRARY = "reel_inner_runs_library"


@pytest.fixture
def library(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A library module outside ``basetemp`` that nothing imported yet."""
    with tempfile.TemporaryDirectory() as directory:
        (Path(directory) / f"{LIBRARY}.py").write_text("class Token:\n    pass\n")
        monkeypatch.syspath_prepend(directory)
        assert LIBRARY not in sys.modules
        try:
            yield LIBRARY
        finally:
            sys.modules.pop(LIBRARY, None)
            MADE.clear()


def test_a_library_an_inner_run_imported_first_is_the_outer_runs_too(
    pytester: pytest.Pytester, library: str
) -> None:
    pytester.makeini(inner_ini())
    pytester.makepyfile(
        test_inner=f"""
        import sys

        import {library}

        def test_makes_one():
            sys.modules[{__name__!r}].MADE.append({library}.Token())
        """
    )
    pytester.runpytest_inprocess("-p", "no:reel").assert_outcomes(passed=1)
    # one copy: what the inner run made is an instance of the outer's class
    assert isinstance(MADE[0], importlib.import_module(library).Token)
    # the inner project's own module is gone: the next run with its name
    # runs its new text
    assert "test_inner" not in sys.modules
    pytester.makepyfile(test_inner="def test_again():\n    pass\n")
    result = pytester.runpytest_inprocess("-p", "no:reel", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_again PASSED*"])


#: A module of a generated run: whether it was there before the snapshot,
#: whether the run imports it (anew, or over the one before), where from
#: (the inner project's directory or outside it), and whether a package.
modules = st.lists(
    st.tuples(st.booleans(), st.booleans(), st.booleans(), st.booleans()),
    min_size=1,
    max_size=12,
)

_names = itertools.count()


def _module(name: str, root: Path, inside: bool, package: bool) -> types.ModuleType:
    module = types.ModuleType(name)
    where = str((root if inside else Path(tempfile.gettempdir()) / "elsewhere") / name)
    if package:
        module.__path__ = [where]
    else:
        module.__file__ = where + ".py"
    return module


@settings(max_examples=60, deadline=None)
@given(family=modules)
def test_a_restore_keeps_every_module_from_outside_the_inner_projects(
    family: list[tuple[bool, bool, bool, bool]],
) -> None:
    root = Path(tempfile.gettempdir()).resolve() / "reel-inner-projects"
    snapshot_class = snapshots_keeping((root,))
    names = [f"_reel_inner_probe_{next(_names)}" for _ in family]
    before = {}
    try:
        for name, (there, _, inside, package) in zip(names, family, strict=True):
            if there:
                before[name] = sys.modules[name] = _module(name, root, inside, package)
        snapshot = snapshot_class()
        imported = {}
        for name, (_, runs, inside, package) in zip(names, family, strict=True):
            if runs:
                imported[name] = sys.modules[name] = _module(name, root, inside, package)
        snapshot.restore()
        for name, (there, runs, inside, _) in zip(names, family, strict=True):
            if there:  # what was there before, as it was
                assert sys.modules[name] is before[name]
            elif runs and not inside:  # a library the run imported first: kept
                assert sys.modules[name] is imported[name]
            else:  # the inner project's, or never imported
                assert name not in sys.modules
    finally:
        for name in names:
            sys.modules.pop(name, None)


def test_pytesters_own_snapshot_dropped_the_libraries() -> None:
    # The other side: the probe above fails on pytester's own class (a
    # module from outside the inner project, imported by the run, dropped).
    name = f"_reel_inner_probe_{next(_names)}"
    snapshot = PYTESTERS()
    sys.modules[name] = _module(name, Path("/nowhere"), False, False)
    snapshot.restore()
    assert name not in sys.modules


def test_the_session_installs_the_keeping_snapshot() -> None:
    installed = pytester_module.SysModulesSnapshot
    assert installed is not PYTESTERS
    assert issubclass(installed, PYTESTERS)
    assert installed.__qualname__ == "snapshots_keeping.<locals>.Snapshot"
