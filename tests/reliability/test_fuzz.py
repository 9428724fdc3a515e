"""Fuzzing the core's request parser and cassette loader.

The targets and what they check are in :mod:`tests.reliability.fuzz_targets`.
atheris (coverage-guided, libFuzzer) runs each for ``REEL_FUZZ_SECONDS``
(default 6) in a subprocess, when it is installed; hypothesis runs the same
targets on structured garbage for ``REEL_FUZZ_EXAMPLES`` examples (default
300) everywhere.  Both are bounded by default so CI runs them on every
change; raise the two variables for a long run.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.property.strategies import garbage_cassette_bytes, garbage_request_bytes, pipelines

from .fuzz_targets import cassette_bytes, client_bytes

pytestmark = pytest.mark.fuzz

ROOT = Path(__file__).resolve().parents[2]
FUZZ_SECONDS = float(os.environ.get("REEL_FUZZ_SECONDS", "6"))
EXAMPLES = int(os.environ.get("REEL_FUZZ_EXAMPLES", "300"))
HAS_ATHERIS = importlib.util.find_spec("atheris") is not None

REQUEST_SEEDS = [
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: api.openai.com\r\nContent-Type: "
    b"application/json\r\nContent-Length: 69\r\n\r\n"
    b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}\n',
    b"POST /v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&key=AIzaSyD-9tSrke72"
    b'PouQMnMX-a7eZSW0jkFMBWY HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"a":'
    b"\r\n3\r\n[1]\r\n1\r\n}\r\n0\r\n\r\n",
    b"GET /v1/models HTTP/1.0\r\n\r\n",
    b"HEAD /v1/messages HTTP/1.1\r\nHost: x\r\nanthropic-version: 2023-06-01\r\n\r\n"
    b"POST http://api.anthropic.com/v1/messages?beta=true HTTP/1.1\r\nHost: x\r\n"
    b"Content-Length: 2\r\n\r\n{}",
]


def cassette_seeds() -> list[bytes]:
    demo = ROOT / "src" / "reel_bindings" / "demo" / "demo.jsonl"
    data = demo.read_bytes()
    lines = data.split(b"\n")
    return [data, lines[0] + b"\n" + lines[1][: len(lines[1]) // 2], b"\n".join(lines[1:4])]


def write_corpus(where: Path, seeds: list[bytes]) -> Path:
    where.mkdir()
    for n, seed in enumerate(seeds):
        (where / f"seed-{n}").write_bytes(seed)
    return where


@pytest.mark.slow
@pytest.mark.skipif(
    not HAS_ATHERIS,
    reason="atheris is not installed (pip install atheris); the hypothesis runs cover "
    "the same targets",
)
def test_atheris_finds_nothing(tmp_path: Path) -> None:
    corpora = {
        "client_bytes": write_corpus(tmp_path / "requests", REQUEST_SEEDS),
        "cassette_bytes": write_corpus(tmp_path / "cassettes", cassette_seeds()),
    }
    runs = {
        name: subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.reliability._atheris",
                name,
                f"-max_total_time={max(1, round(FUZZ_SECONDS))}",
                "-timeout=10",
                "-rss_limit_mb=2048",
                "-print_final_stats=1",
                f"-artifact_prefix={tmp_path}/{name}-",
                str(corpus),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name, corpus in corpora.items()
    }
    figures = {}
    for name, proc in runs.items():
        out, _ = proc.communicate(timeout=FUZZ_SECONDS + 120)
        assert proc.returncode == 0, f"atheris found something in {name}:\n{out[-6000:]}"
        executed = re.search(r"stat::number_of_executed_units: (\d+)", out)
        assert executed is not None, out[-2000:]
        figures[name] = int(executed.group(1))
    print(f"atheris, {FUZZ_SECONDS:g} s per target: {figures} inputs")  # -s shows it
    assert all(n > 100 for n in figures.values())


BOUNDED = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.slow
@BOUNDED
@given(st.one_of(garbage_request_bytes(), pipelines().map(b"".join)))
def test_any_client_bytes(data: bytes) -> None:
    client_bytes(data)


@pytest.mark.slow
@BOUNDED
@given(garbage_cassette_bytes())
def test_any_cassette_bytes(data: bytes) -> None:
    cassette_bytes(data)


@pytest.mark.parametrize(
    "data",
    [
        b'{"x":1,"_meta":{"match":"exact"}}\n',  # found by fuzzing: validate and load disagreed
        b'\t{ "_meta" : {} }\r\n{"key":"sha256:' + b"0" * 64 + b'","id":"x"}',
        b'{"_meta":{"schema":1}}\n' + b"[" * 100_000,
    ],
)
def test_regressions(data: bytes) -> None:
    cassette_bytes(data)
