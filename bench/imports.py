"""0. Import cost: ``import X`` in a fresh interpreter, best of several, in
ms (``python -X importtime``'s cumulative figure for ``X``: the
interpreter's own start-up is not counted), with the client families it
pulled in.  httpx and httpx2 alone are the reference: what an import of
the transports cost while it imported both up front.

Byte-code caches are written by a first, untimed import (the child runs
without ``PYTHONDONTWRITEBYTECODE``): what is timed is loading, as a test
suite's second run sees it, not compiling.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from ._common import ROOT, Row

__all__ = ["MODULES", "import_rows"]

#: What is timed, in this order: Reel's packages, then the references.
MODULES = ("reel_core", "reel_bindings.httpcore", "reel_bindings.requests", "httpx", "httpx2")

#: The families (and their pools) an import must not pull in unused.
FAMILIES = ("httpx", "httpx2", "httpcore", "httpcore2", "requests")

_PROBE = (
    "import json, sys\n"
    "import {module}\n"
    "print(json.dumps(sorted({{m.partition('.')[0] for m in sys.modules}})))"
)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT / "src")  # this checkout, installed or not
    return env


def _once(module: str) -> tuple[float, list[str]]:
    """One import of ``module`` in a fresh interpreter: its ms, and the
    top-level packages loaded then."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", _PROBE.format(module=module)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env=_env(),
    )
    micros = None
    for line in out.stderr.splitlines():
        fields = line.split("|")
        if len(fields) == 3 and fields[2].strip() == module:
            micros = int(fields[1])
    if micros is None:
        raise RuntimeError(f"no -X importtime line for {module}:\n{out.stderr[-2000:]}")
    loaded: list[str] = json.loads(out.stdout.splitlines()[-1])
    return micros / 1000, loaded


def import_rows(repeat: int) -> list[Row]:
    """Each of :data:`MODULES`: best of ``repeat`` imports (interleaved, so
    a busy moment of the machine hits every module alike)."""
    for module in MODULES:
        _once(module)  # writes the byte-code caches
    best = dict.fromkeys(MODULES, float("inf"))
    loaded: dict[str, list[str]] = {}
    for _ in range(repeat):
        for module in MODULES:
            ms, loaded[module] = _once(module)
            best[module] = min(best[module], ms)
    rows: list[Row] = []
    for module in MODULES:
        families = [f for f in FAMILIES if f in loaded[module] and f != module]
        rows.append(
            {
                "module": module,
                "import_ms": round(best[module], 1),
                "vs_reel_core": round(best[module] / best["reel_core"], 2),
                "families_imported": ", ".join(families) or "none",
            }
        )
    return rows
