"""The README's "Record your own" runs as written: its proxy commands and
its script lines, in turn, with a plain ``OpenAI()`` as ``my_script.py``.

Only what a machine needs besides is added: a free port (``--port 0``, its
URL put where the README says 7878), the fake upstream to record from
(``--upstream``: the README records from the real API) and, for the
recording only, the key the README asks for ("your real key").  The replay
runs with no OPENAI_API_KEY but what its line sets: a plain ``OpenAI()``
failed there before the README said to set one."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.fakes.upstream import FakeUpstreamThread

README = Path(__file__).resolve().parents[1] / "README.md"
SCRIPT = """\
from openai import OpenAI

client = OpenAI()
reply = client.chat.completions.create(
    model="gpt-4o-mini", messages=[{"role": "user", "content": "Say hello to Reel."}]
)
print(reply.choices[0].message.content)
"""


def record_your_own() -> list[list[str]]:
    """The words of each command of the section's shell block, comments off."""
    section = README.read_text().split("## Record your own", 1)[1]
    match = re.search(r"```sh\n(.*?)```", section, re.S)
    assert match is not None
    return [shlex.split(line, comments=True) for line in match.group(1).splitlines()]


def clean_env() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("REEL_", "OPENAI_")) and k not in ("HTTPS_PROXY", "https_proxy")
    }


@contextmanager
def proxy(words: list[str], cwd: Path, *more: str) -> Iterator[str]:
    """The README's proxy command on a free port, and the URL it printed."""
    assert words[:3] == ["python3", "-m", "reel_bindings.proxy"], words
    proc = subprocess.Popen(
        [sys.executable, *words[1:], "--port", "0", *more],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    try:
        stdout = proc.stdout
        assert stdout is not None
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.append(stdout.readline()))
        reader.start()
        reader.join(timeout=30)
        assert lines, f"the proxy printed no URL (exit status {proc.poll()})"
        yield lines[0].strip()
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def script(words: list[str], cwd: Path, url: str, **extra: str) -> str:
    """The README's ``VAR=value ... python3 my_script.py`` with 7878 made
    the proxy's port; ``extra`` variables are added first (the line wins)."""
    env = {**clean_env(), **extra}
    while "=" in words[0]:
        name, _, value = words.pop(0).partition("=")
        env[name] = value.replace("http://127.0.0.1:7878", url)
    assert words == ["python3", "my_script.py"], words
    done = subprocess.run(
        [sys.executable, "my_script.py"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_record_your_own_records_then_replays_with_no_key_but_its_own(tmp_path: Path) -> None:
    record, run_recording, replay, run_replay = record_your_own()
    assert "auto" in record
    (tmp_path / "my_script.py").write_text(SCRIPT)
    (tmp_path / "tests" / "cassettes").mkdir(parents=True)
    with FakeUpstreamThread() as fake, proxy(record, tmp_path, "--upstream", fake.url) as url:
        recorded = script(run_recording, tmp_path, url, OPENAI_API_KEY="sk-your-real-key-0000")
        assert len(fake.requests) == 1
    assert recorded.strip()
    with proxy(replay, tmp_path) as url:
        assert script(run_replay, tmp_path, url) == recorded


def test_a_plain_openai_client_needs_some_key_in_replay(tmp_path: Path) -> None:
    # what the README warns of: the SDK refuses before any request is sent
    (tmp_path / "my_script.py").write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, "my_script.py"],
        cwd=tmp_path,
        env={**clean_env(), "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "openai.OpenAIError: " in done.stderr
    assert "a\nplain `OpenAI()` raises `OpenAIError`" in README.read_text()


@pytest.mark.parametrize("line", [0, 2])
def test_the_proxy_lines_name_the_same_cassette(line: int) -> None:
    assert "tests/cassettes/chat.jsonl" in record_your_own()[line]
