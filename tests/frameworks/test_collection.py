"""Collecting the framework matrix imports no framework (``matrix.framework``):
every xdist worker collects every test module, and the frameworks cost about
9 s of CPU a process to import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Collects this directory, then prints the frameworks its modules asked for
#: and those of them that were imported.
SCRIPT = """
import json, sys
import pytest
code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "tests/frameworks"])
from tests.frameworks.matrix import FRAMEWORKS
loaded = sorted(name for name in FRAMEWORKS if name in sys.modules)
print(json.dumps({"code": int(code), "asked": sorted(FRAMEWORKS), "loaded": loaded}))
"""


def test_collecting_the_matrix_imports_no_framework() -> None:
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    result = json.loads(run.stdout.splitlines()[-1])
    assert result["code"] == 0, run.stdout + run.stderr
    assert result["asked"], run.stdout  # the check could not fail without one
    assert result["loaded"] == [], "imported while collecting: " + ", ".join(result["loaded"])
