"""Where the proxy peers live: mitmproxy in a virtualenv of its own and
talkback in an npm prefix, both in the user's cache directory,
``${XDG_CACHE_HOME:-~/.cache}/reel-bench/peers`` (``REEL_BENCH_PEERS`` moves
it): outside the work tree, which tools walk for ``.py`` files (mitmproxy's
virtualenv holds 130 MB of them), and shared by every checkout.

mitmproxy pins its own h11, h2 and wsproto, so it never shares an
environment with Reel: it gets a virtualenv of its own, made the first time
a full run needs it.  talkback is an npm package, installed with
``npm install --prefix``.  A peer that cannot be had (no network, no npm, no
node) is a reason, never an exception: its row says "not run: why".
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MITMPROXY", "TALKBACK", "Peer", "find"]

#: The versions measured (a new one is a new row in the docs, not a silent change).
MITMPROXY = "mitmproxy==11.0.2"
TALKBACK = "talkback@4.2.0"

_INSTALL_TIMEOUT = 600.0


@dataclass(frozen=True)
class Peer:
    """A peer ready to run (``command`` starts it), or why not (``missing``)."""

    name: str
    version: str
    command: tuple[str, ...] = ()
    missing: str = ""


def _root() -> Path:
    if os.environ.get("REEL_BENCH_PEERS"):
        return Path(os.environ["REEL_BENCH_PEERS"])
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "reel-bench" / "peers"


def _run(command: list[str]) -> str:
    """Run an install step; the reason it failed, or ``""``."""
    try:
        out = subprocess.run(
            command, capture_output=True, text=True, timeout=_INSTALL_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{type(exc).__name__}: {exc}"
    if out.returncode == 0:
        return ""
    lines = [line for line in (out.stderr + out.stdout).splitlines() if line.strip()]
    # the first error line says why (npm's last one only where its log went)
    errors = [line for line in lines if "error" in line.lower() and "log" not in line.lower()]
    return (errors or lines[-1:] or [f"exit {out.returncode}"])[0].strip()[:200]


def _mitmproxy(install: bool) -> Peer:
    version = MITMPROXY.split("==")[1]
    venv = _root() / "mitmproxy"
    mitmdump = venv / "bin" / "mitmdump"
    if not mitmdump.exists():
        if not install:
            return Peer("mitmproxy", version, missing=_not_installed(venv))
        python = venv / "bin" / "python"
        why = _run([sys.executable, "-m", "venv", "--clear", str(venv)]) or _run(
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", MITMPROXY]
        )
        if why or not mitmdump.exists():
            shutil.rmtree(venv, ignore_errors=True)  # no half install taken for a whole one
            return Peer("mitmproxy", version, missing=f"pip install {MITMPROXY} failed: {why}")
    return Peer("mitmproxy", version, command=(str(mitmdump),))


def _talkback(install: bool) -> Peer:
    version = TALKBACK.split("@")[1]
    prefix = _root() / "talkback"
    node = shutil.which("node")
    if node is None:
        return Peer("talkback", version, missing="node is not on PATH")
    runner = Path(__file__).resolve().parent / "_talkback.js"
    command = (node, str(runner), str(prefix / "node_modules"))
    if (prefix / "node_modules" / "talkback" / "package.json").exists():
        return Peer("talkback", version, command=command)
    if not install:
        return Peer("talkback", version, missing=_not_installed(prefix))
    npm = shutil.which("npm")
    if npm is None:
        return Peer("talkback", version, missing="npm is not on PATH")
    why = _run([npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", TALKBACK])
    if why or not (prefix / "node_modules" / "talkback").exists():
        return Peer("talkback", version, missing=f"npm install {TALKBACK} failed: {why}")
    return Peer("talkback", version, command=command)


def _not_installed(where: Path) -> str:
    return (
        f"not installed in {where} (--quick installs no peer: "
        "`python bench/run.py --only proxypeers` installs it once)"
    )


def find(install: bool) -> list[Peer]:
    """mitmproxy and talkback, installed first when ``install`` and missing."""
    return [_mitmproxy(install), _talkback(install)]
