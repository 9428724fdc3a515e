"""Smoke-test the built distributions, away from the checkout.

``python scripts/smoke_wheel.py DIST_DIR`` takes the one wheel and the one
sdist in ``DIST_DIR`` (``python -m build`` writes them to ``dist/``) and:

- checks the sdist holds the sources, the packaged demo cassette and
  ``pyproject.toml``;
- installs the wheel, and pytest, into a fresh virtual environment (in a
  temporary directory, run from there: nothing is imported from ``src/``);
- runs ``reel --help``;
- starts the proxy (``python -m reel_bindings.proxy --port 0``: the demo
  cassette shipped in the wheel, replay mode), posts the demo's recorded
  request with urllib, checks the recorded answer, stops the proxy with
  SIGINT and checks that it exits 0;
- checks pytest finds the plugin by its entry point (``pytest --help``
  lists ``--reel-mode``).

So a file missing from the wheel, a broken entry point or a dependency
left out of ``pyproject.toml`` fails CI instead of hiding behind the
editable install.  Exits 1 naming what failed.  ``.ci/run`` calls it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
import venv
from pathlib import Path

#: The demo's first recording: what the README's curl sends.
DEMO_REQUEST = {
    "model": "gpt-4o-mini",
    "messages": [{"role": "user", "content": "Say hello to Reel."}],
}
DEMO_ANSWER = "Say hello to Reel."

#: What an sdist must hold besides the packages' own modules.
SDIST_FILES = (
    "pyproject.toml",
    "README.md",
    "src/reel_bindings/demo/demo.jsonl",
    "src/reel_bindings/py.typed",
    "src/reel_core/__init__.py",
)


class SmokeError(Exception):
    """One check failed: the message says which and what was seen."""


def _one(dist: Path, pattern: str) -> Path:
    found = sorted(dist.glob(pattern))
    if len(found) != 1:
        raise SmokeError(f"expected one {pattern} in {dist}, found {[p.name for p in found]}")
    return found[0]


def check_sdist(sdist: Path) -> None:
    with tarfile.open(sdist) as tar:
        names = {name.partition("/")[2] for name in tar.getnames()}
    missing = [name for name in SDIST_FILES if name not in names]
    if missing:
        raise SmokeError(f"{sdist.name} lacks {missing}")
    print(f"ok: {sdist.name} holds {', '.join(SDIST_FILES)}")


def _run(args: list[str], cwd: Path) -> str:
    out = subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SmokeError(
            f"{' '.join(args)} exited {out.returncode}:\n{out.stdout[-2000:]}{out.stderr[-2000:]}"
        )
    text: str = out.stdout
    return text


def make_venv(home: Path, wheel: Path) -> Path:
    """A fresh venv holding the wheel (and its dependencies) and pytest;
    its ``bin`` directory."""
    venv.EnvBuilder(with_pip=True).create(home)
    bin_dir = home / ("Scripts" if os.name == "nt" else "bin")
    pip = [str(bin_dir / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    _run([*pip, str(wheel), "pytest"], cwd=home)
    where = _run(
        [str(bin_dir / "python"), "-c", "import reel_bindings; print(reel_bindings.__file__)"],
        cwd=home,
    ).strip()
    if not Path(where).resolve().is_relative_to(home.resolve()):
        raise SmokeError(f"reel_bindings was imported from {where}, not from the fresh venv")
    print(f"ok: {wheel.name} installed in a fresh venv ({where})")
    return bin_dir


def check_cli(bin_dir: Path, cwd: Path) -> None:
    text = _run([str(bin_dir / "reel"), "--help"], cwd=cwd)
    for word in ("record", "replay", "inspect"):
        if word not in text:
            raise SmokeError(f"`reel --help` does not mention {word!r}:\n{text}")
    print("ok: reel --help")


def check_proxy(bin_dir: Path, cwd: Path) -> None:
    """The proxy, on the demo cassette packaged in the wheel, answers the
    demo's request, then stops cleanly on SIGINT."""
    proc = subprocess.Popen(
        [str(bin_dir / "python"), "-m", "reel_bindings.proxy", "--port", "0", "-q"],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://127.0.0.1:"):
            proc.kill()
            raise SmokeError(f"the proxy did not start: {url!r}\n{proc.communicate()[1][-2000:]}")
        request = urllib.request.Request(
            url + "/v1/chat/completions",
            data=json.dumps(DEMO_REQUEST).encode(),
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            status, body = response.status, response.read()
        answer = json.loads(body)["choices"][0]["message"]["content"]
        if status != 200 or DEMO_ANSWER not in answer:
            raise SmokeError(f"the proxy answered {status}: {body[:500]!r}")
        print(f"ok: the proxy at {url} answered the demo request from the packaged cassette")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise SmokeError("the proxy did not stop within 30 s of SIGINT") from None
    if code != 0:
        raise SmokeError(f"the proxy exited {code} on SIGINT")
    print("ok: the proxy stopped on SIGINT (exit 0)")


def check_plugin(bin_dir: Path, cwd: Path) -> None:
    text = _run([str(bin_dir / "python"), "-m", "pytest", "--help"], cwd=cwd)
    if "--reel-mode" not in text:
        raise SmokeError(f"`pytest --help` lists no --reel-mode: the plugin was not found\n{text}")
    print("ok: pytest finds the reel plugin (pytest11 entry point)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dist", type=Path, help="the directory holding the wheel and sdist")
    args = parser.parse_args(argv)
    dist = args.dist.resolve()
    try:
        wheel = _one(dist, "*.whl")
        check_sdist(_one(dist, "*.tar.gz"))
        with tempfile.TemporaryDirectory(prefix="reel-smoke-") as scratch:
            home = Path(scratch)
            bin_dir = make_venv(home / "venv", wheel)
            check_cli(bin_dir, home)
            check_proxy(bin_dir, home)
            check_plugin(bin_dir, home)
    except SmokeError as exc:
        print(f"smoke test failed: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
