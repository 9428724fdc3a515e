"""``python -m reel_bindings.proxy`` as a process: graceful shutdown and the command line.

The proxy runs on each backend (``--backend asyncio|trio``) in a subprocess,
with the fake upstream in a thread of the test process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from reel_bindings.proxy import build_parser, parse_options
from reel_core import Mode, Timing
from tests.fakes.upstream import FakeUpstreamThread, respond

from .proxy_support import chat_call, interactions

BACKENDS = ["asyncio", "trio"]


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("REEL_")}


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reel_bindings.proxy", *args],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
        check=False,
    )


@contextmanager
def proxy_process(args: Sequence[str]) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """The proxy in a subprocess and the URL it printed first; killed if still running."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "reel_bindings.proxy", "--port", "0", *args],
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
        assert lines[0].startswith("http://127.0.0.1:"), lines
        yield proc, lines[0].strip()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


def stream_then_terminate(
    client: httpx.Client, proc: subprocess.Popen[str], headers: dict[str, str], prompt: str
) -> tuple[bytes, Exception | None]:
    """Start a stream, send SIGTERM once its first chunk is in, read what follows."""
    call = chat_call(prompt, stream=True, headers=headers)
    chunks: list[bytes] = []
    error: Exception | None = None
    with client.stream(
        "POST",
        call.path,
        content=call.content,
        headers={"content-type": "application/json", **call.headers},
    ) as response:
        assert response.status_code == 200
        try:
            for chunk in response.iter_raw():
                if not chunks:
                    proc.send_signal(signal.SIGTERM)
                chunks.append(chunk)
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            error = exc
    return b"".join(chunks), error


def check_whole_lines(cassette: Path) -> None:
    data = cassette.read_bytes()
    assert data.endswith(b"\n")
    for line in data.splitlines():
        json.loads(line)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sigterm_lets_an_open_stream_finish(tmp_path: Path, backend: str) -> None:
    cassette = tmp_path / "c.jsonl"
    with FakeUpstreamThread(backend=backend) as fake:
        args = ["--backend", backend, "--mode", "record", "--cassette", str(cassette)]
        with (
            proxy_process([*args, "--upstream", fake.url]) as (proc, url),
            httpx.Client(base_url=url, timeout=30) as client,
        ):
            # a finished exchange, leaving an idle keep-alive connection behind
            first = client.post("/v1/chat/completions", json={"model": "gpt-4o-mini"})
            assert first.status_code == 200
            body, error = stream_then_terminate(
                client, proc, {"x-fake-scenario": "slow"}, "one two three four"
            )
            assert proc.wait(timeout=30) == 0
        reply = respond(fake.requests[-1])
    assert error is None
    assert body == reply.body  # finished within the grace period
    check_whole_lines(cassette)
    recorded = interactions(cassette)
    assert len(recorded) == 2
    assert recorded[1].response.content == reply.body
    assert recorded[1].response.cut is None
    _, stderr = proc.communicate()
    assert "finishing open exchanges" in stderr
    assert "SIGTERM" in stderr


@pytest.mark.parametrize("backend", BACKENDS)
def test_sigterm_cuts_a_stream_that_outlasts_the_grace(tmp_path: Path, backend: str) -> None:
    cassette = tmp_path / "c.jsonl"
    with FakeUpstreamThread(backend=backend) as fake:
        args = ["--backend", backend, "--mode", "record", "--cassette", str(cassette)]
        with (
            proxy_process([*args, "--upstream", fake.url, "--grace", "0.3"]) as (proc, url),
            httpx.Client(base_url=url, timeout=30) as client,
        ):
            first = client.post("/v1/chat/completions", json={"model": "gpt-4o-mini"})
            assert first.status_code == 200
            body, error = stream_then_terminate(
                client,
                proc,
                {"x-fake-frame-delay-ms": "250"},
                "a long answer of many words that takes seconds to stream",
            )
            assert proc.wait(timeout=30) == 0
        reply = respond(fake.requests[-1])
    assert isinstance(error, (httpx.RemoteProtocolError, httpx.ReadError))
    assert body
    assert reply.body.startswith(body)
    assert body != reply.body
    check_whole_lines(cassette)
    recorded = interactions(cassette)
    # the finished exchange is on disk; the cut one is not half-written
    assert recorded[0].request.body == b'{"model":"gpt-4o-mini"}'
    # (a stream the proxy itself cut at shutdown is no upstream behaviour to replay)
    assert len(recorded) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_sigterm_as_soon_as_the_url_is_printed_stops_cleanly(tmp_path: Path, backend: str) -> None:
    """The signal handler is in place before the URL goes out (a supervisor
    may stop the proxy the moment it has read it)."""
    for _ in range(3):
        with proxy_process(["--backend", backend]) as (proc, _url):
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0


def test_help_documents_every_flag_and_variable() -> None:
    done = run_cli("--help")
    assert done.returncode == 0
    out = done.stdout
    for action in build_parser()._actions:
        for flag in action.option_strings:
            assert flag in out, flag
    for variable in (
        "REEL_MODE",
        "REEL_CASSETTE",
        "REEL_CASSETTE_DIR",
        "REEL_TIMING",
        "REEL_MATCH",
        "REEL_UPSTREAM",
        "REEL_HOST",
        "REEL_PORT",
        "REEL_REDACT_PII",
        "REEL_DROP_RESPONSE_HEADERS",
        "REEL_PROTO_DESCRIPTOR",
    ):
        assert variable in out, variable
    for mode in Mode:
        assert mode.value in out


def test_the_help_in_the_docs_is_the_real_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/proxy.md shows ``--help`` as printed on an 80-column terminal;
    regenerate it with ``COLUMNS=80 python -m reel_bindings.proxy --help``."""
    monkeypatch.setenv("COLUMNS", "80")
    page = (Path(__file__).parents[2] / "docs" / "proxy.md").read_text("utf-8")
    assert build_parser().format_help() in page


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--mode", "record"], "--cassette"),
        (["--mode", "auto"], "--cassette"),
        (["--timing", "sometimes"], "slow=N"),
        (["--port", "70000"], "70000"),
    ],
)
def test_bad_command_lines_exit_2_with_a_message(args: list[str], message: str) -> None:
    done = run_cli(*args)
    assert done.returncode == 2
    assert message in done.stderr
    assert done.stdout == ""


def test_environment_variables_are_read_and_flags_win(tmp_path: Path) -> None:
    env = {
        "REEL_MODE": "auto",
        "REEL_CASSETTE": str(tmp_path / "env.jsonl"),
        "REEL_TIMING": "slow=2",
        "REEL_UPSTREAM": "http://127.0.0.1:9",
        "REEL_PORT": "0",
        "REEL_HOST": "::1",
        "REEL_REDACT_PII": "0",
    }
    opts = parse_options([], environ=env)
    assert opts.mode is Mode.AUTO
    assert opts.cassette == tmp_path / "env.jsonl"
    assert opts.timing == Timing.parse("slow=2")
    assert opts.upstream == "http://127.0.0.1:9"
    assert (opts.port, opts.host, opts.pii) == (0, "::1", False)
    flags = parse_options(["--mode", "replay", "--timing", "fast", "--port", "1234"], environ=env)
    assert flags.mode is Mode.REPLAY
    assert flags.timing == Timing.parse("fast")
    assert flags.port == 1234
    # no cassette in replay: the demo cassette shipped with Reel
    assert parse_options([], environ={}).cassette is not None
