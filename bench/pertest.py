"""Reel's own cost per test: a generated pytest suite replayed through the
plugin, next to the same suite answered by ``httpx.MockTransport``.

``N`` tests in ten modules; test ``i`` makes 1 to 3 OpenAI chat calls
through the official SDK (every fifth call a 40-frame stream), each test on
its own cassette (the bench corpus' lines).  The variants, each the whole
``python -m pytest -p no:cacheprovider -q`` run timed from outside:

- ``floor``: the SDK on ``httpx.MockTransport`` answering the same bodies,
  a client made per test, Reel's plugin off (``-p no:reel``);
- ``inprocess``: ``reel.openai()`` from the fixture, per test (as the docs say);
- ``proxy``: the per-test proxy, the client from ``reel.proxy_openai()``;
- ``proxy-sdk``: the per-test proxy (``reel_proxy``) and a plain
  ``openai.OpenAI()`` the test builds itself (unmodified code).

Rounds are interleaved (floor, Reel, floor, Reel...) and the medians
compared: Reel's cost per test is ``(median(variant) - median(floor)) / N``.
``-n 2`` runs the same with pytest-xdist.  Run alone::

    python bench/pertest.py --tests 300 --rounds 5 [--workers 0 --workers 2] [--src DIR]

(``python bench/run.py --only pertest`` runs it with the others' output.)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import ROOT, Row, machine, median
from bench._data import _line
from reel_core import Cassette

__all__ = ["VARIANTS", "per_test_rows", "write_suite"]

VARIANTS = ("floor", "inprocess", "proxy", "proxy-sdk")
MODULES = 10

_CONFTEST = '''
import json
import re

import httpx
import openai
import pytest

from bench._answers import answer_body, is_stream, request_value, sse_frames

_QUESTION = re.compile(rb"Question (\\d+):")


def _answer(request):
    i = int(_QUESTION.search(request.content).group(1))
    if is_stream(i):
        body = b"".join(data for _, data in sse_frames(i, 40))
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)
    return httpx.Response(200, headers={"content-type": "application/json"}, content=answer_body(i))


@pytest.fixture
def floor_client():
    http = httpx.Client(transport=httpx.MockTransport(_answer))
    client = openai.OpenAI(api_key="sk-floor", http_client=http, max_retries=0)
    yield client
    http.close()


def calls_of(i):
    """Test ``i``'s calls: 1 to 3 interactions of the corpus."""
    return [3 * i + k for k in range(1 + i % 3)]


def ask(client, j):
    value = request_value(j, stream=is_stream(j))
    if is_stream(j):
        text = "".join(
            chunk.choices[0].delta.content or ""
            for chunk in client.chat.completions.create(**value)
        )
    else:
        text = client.chat.completions.create(**value).choices[0].message.content
    assert text
'''

_TEST = {
    "floor": """
def test_{i}(floor_client):
    for j in calls_of({i}):
        ask(floor_client, j)
""",
    "inprocess": """
def test_{i}(reel):
    client = reel.openai(max_retries=0)
    for j in calls_of({i}):
        ask(client, j)
""",
    "proxy": """
def test_{i}(reel):
    client = reel.proxy_openai(max_retries=0)
    for j in calls_of({i}):
        ask(client, j)
""",
    "proxy-sdk": """
def test_{i}(reel_proxy):
    client = openai.OpenAI(max_retries=0)
    for j in calls_of({i}):
        ask(client, j)
""",
}


def calls_of(i: int) -> list[int]:
    return [3 * i + k for k in range(1 + i % 3)]


def write_suite(directory: Path, tests: int, variant: str) -> Path:
    """The suite of ``variant`` in ``directory/variant``, cassettes included."""
    root = directory / f"{variant}-{tests}"
    if (root / "pytest.ini").exists():
        return root
    (root / "tests").mkdir(parents=True, exist_ok=True)
    (root / "pytest.ini").write_text("[pytest]\naddopts = -p no:randomly\n")
    (root / "conftest.py").write_text(textwrap.dedent(_CONFTEST))
    head = Cassette().meta.to_line()
    per_module = -(-tests // MODULES)
    for m in range(MODULES):
        numbers = range(m * per_module, min(tests, (m + 1) * per_module))
        name = f"test_gen_{m:02d}"
        source = "import openai\nfrom conftest import ask, calls_of\n" + "".join(
            _TEST[variant].format(i=i) for i in numbers
        )
        (root / "tests" / f"{name}.py").write_text(source)
        if variant == "floor":
            continue
        cassettes = root / "tests" / "cassettes" / "tests" / name
        cassettes.mkdir(parents=True, exist_ok=True)
        for i in numbers:
            lines = b"".join(_line(j) for j in calls_of(i))
            (cassettes / f"test_{i}.jsonl").write_bytes(head + lines)
    return root


#: Which Reel a run times (``--src``: another checkout's ``src``, for a before/after).
SRC = ROOT / "src"


def _pytest(
    root: Path, variant: str, workers: int, *, report: Path | None = None
) -> tuple[float, float]:
    """Wall and CPU seconds of one whole pytest run of the suite at
    ``root`` (CPU: user and system of pytest and its xdist workers, which
    a loaded machine disturbs less than wall time); with ``report``,
    Reel's phase timer on and its JSON report written there."""
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"]
    # Only the plugins named load: the peers' (the ``bench`` extra) clash
    # with one another on their options (``--record-mode``).
    if variant != "floor":
        args += ["-p", "reel_bindings.pytest_plugin"]
    if workers:
        args += ["-p", "xdist.plugin", "-n", str(workers)]
    if report is not None:
        args += ["--reel-phases", f"--reel-report={report}"]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), str(ROOT), str(root)]),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    # PYTHONDONTWRITEBYTECODE: a user's runs load Reel from byte code
    for variable in (
        "REEL_MODE",
        "REEL_PHASES",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "PYTHONDONTWRITEBYTECODE",
    ):
        env.pop(variable, None)
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime
    if out.returncode != 0:
        raise RuntimeError(f"{variant} suite failed:\n{out.stdout[-4000:]}\n{out.stderr[-2000:]}")
    return seconds, cpu


def _own_ms(root: Path, variant: str, workers: int) -> dict[str, float]:
    """Reel's own milliseconds per test, by phase (one untimed run with
    the phase timer on); empty when this Reel has no timer."""
    report = root / "phases.json"
    report.unlink(missing_ok=True)
    try:
        _pytest(root, variant, workers, report=report)
    except RuntimeError:  # a Reel before the timer: --reel-phases is unknown
        return {}
    figures = json.loads(report.read_text()).get("phases")
    if not figures or not figures["tests"]:
        return {}
    tests = figures["tests"]
    own = {p: round(s * 1000 / tests, 3) for p, s in figures["seconds"].items()}
    own["total"] = round(sum(figures["seconds"].values()) * 1000 / tests, 3)
    return own


def per_test_rows(
    work: Path,
    tests: int,
    rounds: int,
    *,
    workers: Sequence[int] = (0,),
    variants: Sequence[str] = VARIANTS[1:],
    phases: bool = True,
) -> list[Row]:
    """One row per variant and worker count: the median whole-run seconds
    and Reel's cost per test above the floor (ms)."""
    roots = {v: write_suite(work, tests, v) for v in ("floor", *variants)}
    rows: list[Row] = []
    for n in workers:
        times: dict[str, list[float]] = {v: [] for v in roots}
        cpus: dict[str, list[float]] = {v: [] for v in roots}
        for _ in range(rounds):
            for v in roots:  # interleaved: each round runs every variant once
                wall, cpu = _pytest(roots[v], v, n)
                times[v].append(wall)
                cpus[v].append(cpu)
        floor, floor_cpu = median(times["floor"]), median(cpus["floor"])
        for v in roots:
            mid, cpu = median(times[v]), median(cpus[v])
            row: Row = {
                "variant": v,
                "workers": n or "serial",
                "tests": tests,
                "run_s": round(mid, 3),
                "per_test_ms": round(mid / tests * 1000, 3),
                "above_floor_ms": round((mid - floor) / tests * 1000, 3),
                "cpu_s": round(cpu, 3),
                "cpu_above_floor_ms": round((cpu - floor_cpu) / tests * 1000, 3),
                "rounds": [round(t, 3) for t in times[v]],
            }
            if v != "floor" and phases:
                own = _own_ms(roots[v], v, n)
                if own:
                    row["reel_own_ms"] = own.pop("total")
                    row["reel_phases_ms"] = ", ".join(f"{k} {v}" for k, v in own.items() if v)
            rows.append(row)
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, action="append", default=None)
    parser.add_argument("--variant", action="append", choices=VARIANTS[1:], default=None)
    parser.add_argument("--work", type=Path, default=Path("/tmp/reel-pertest"))
    parser.add_argument(
        "--src", type=Path, default=None, help="time the Reel in this src directory"
    )
    args = parser.parse_args(argv)
    if args.src is not None:
        global SRC
        SRC = args.src.resolve()
    started = machine()
    rows = per_test_rows(
        args.work,
        args.tests,
        args.rounds,
        workers=args.workers or [0],
        variants=args.variant or VARIANTS[1:],
    )
    print(json.dumps({"machine": started, "load_at_end": os.getloadavg()[0], "rows": rows}))


if __name__ == "__main__":
    main()
