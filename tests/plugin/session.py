"""One inner pytest session for several tests of a module.

pytester starts a fresh interpreter for every inner run: pytest, the plugin
and the SDKs a suite imports (about 1 to 2.5 s of CPU a run), however small
the suite.  Where several tests of a module each record a tiny suite and
replay it, a module-scoped fixture writes all their suites into one
:class:`InnerProject`, records them in one run and replays them in another,
and each test asserts on its own suite's outcomes (test by test), output
and cassettes.  The runs are pytester's: ``python -m pytest`` in the
project's directory with the inner runs' ini, the directory first on
``PYTHONPATH``, ``HOME`` there, and the outer run's Reel, pytest and
provider variables left out (``SCRUBBED``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import attrs
import pytest

__all__ = ["InnerProject", "outcomes", "passed"]


@attrs.define(eq=False)
class InnerProject:
    """A directory of inner test modules and the environment its runs get
    (set and unset between runs, as a test's ``monkeypatch`` would)."""

    path: Path
    env: dict[str, str]
    runs: int = 0

    @classmethod
    def create(cls, path: Path, ini: str, scrubbed: list[str]) -> InnerProject:
        env = {k: v for k, v in os.environ.items() if k not in scrubbed}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(path), env.get("PYTHONPATH")]))
        env["HOME"] = env["USERPROFILE"] = str(path)
        (path / "pytest.ini").write_text(ini, "utf-8")
        return cls(path, env)

    def write(self, **modules: str) -> None:
        """Write test modules (``name=source``, as ``pytester.makepyfile``)."""
        for name, source in modules.items():
            (self.path / f"{name}.py").write_text(source, "utf-8")

    def run(self, *args: str) -> pytest.RunResult:
        """``pytest -v *args`` in a subprocess (``-v``: :func:`outcomes`
        reads each test's outcome from its line)."""
        self.runs += 1
        basetemp = self.path / f"runpytest-{self.runs}"
        command = [sys.executable, "-m", "pytest", f"--basetemp={basetemp}", "-v", *args]
        start = time.monotonic()
        done = subprocess.run(
            command,
            cwd=self.path,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
        )
        duration = time.monotonic() - start
        out, err = done.stdout.splitlines(), done.stderr.splitlines()
        return pytest.RunResult(done.returncode, out, err, duration)


#: A test's line in ``-v`` output: ``test_x.py::test_y[id] PASSED [ 50%]``.
_LINE = re.compile(r"^(test_\w+)\.py::(\S+) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b")


def outcomes(result: pytest.RunResult, module: str) -> dict[str, list[str]]:
    """Each test of *module* (``test_x``) in *result*, with its outcomes in
    order (a test whose teardown errs has two: ``passed``, ``error``)."""
    found: dict[str, list[str]] = {}
    for line in result.outlines:
        match = _LINE.match(line)
        if match and match[1] == module:
            found.setdefault(match[2], []).append(match[3].lower())
    return found


def passed(*tests: str) -> dict[str, list[str]]:
    """What :func:`outcomes` gives for these tests, each passed."""
    return {test: ["passed"] for test in tests}
