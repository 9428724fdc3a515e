"""What a fresh interpreter holds in ``sys.modules`` after running some code.

The import checks (``tests/core/test_sans_io.py``,
``tests/bindings/test_imports.py``) judge by this, not by timing.  The
interpreter runs isolated (``-I``: no ``PYTHONPATH``, no user site) and
imports Reel from the checkout this run imports it from, not from the one
an editable install points at (a worktree's tests check the worktree).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import reel_core

__all__ = ["SRC", "modules_after"]

#: The ``src`` directory this run imports Reel from.
SRC = str(Path(reel_core.__file__).resolve().parent.parent)


def modules_after(code: str) -> set[str]:
    """The modules loaded once ``code`` ran in a fresh interpreter."""
    script = (
        f"import json, sys\nsys.path.insert(0, {SRC!r})\n{code}\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", script], capture_output=True, check=True, text=True
    )
    loaded: list[str] = json.loads(out.stdout.splitlines()[-1])
    return set(loaded)
