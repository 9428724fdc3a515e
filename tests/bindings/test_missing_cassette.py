"""A cassette that does not exist, in replay mode: every binding refuses at
once, naming the path and how to record it, instead of answering 404s.
Auto and record mode create it; the proxy's --cassette-dir and the pytest
plugin decide per request and per test."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from reel_bindings import CassetteFile, CassetteNotFoundError
from reel_bindings.httpcore import AsyncTransport, Transport
from reel_bindings.proxy import Proxy, ProxyOptions, main, running
from reel_bindings.requests import Adapter
from reel_bindings.sdk import (
    anthropic_client,
    async_anthropic_client,
    async_openai_client,
    genai_client,
    openai_client,
)
from reel_core import CassetteError, CassetteMeta, Mode
from tests.cli.helpers import interaction
from tests.fakes.upstream import serve_fake

from .proxy_support import chat_call, fetch, options

GOOD_LINE = interaction().to_line()

IN_PROCESS: dict[str, Callable[[Path], Any]] = {
    "transport": lambda p: Transport(p, mode="replay"),
    "async-transport": lambda p: AsyncTransport(p, mode="replay"),
    "requests-adapter": lambda p: Adapter(p, mode="replay"),
    "cassette-file": lambda p: CassetteFile(p),
    "openai": lambda p: openai_client(p, mode="replay"),
    "async-openai": lambda p: async_openai_client(p, mode="replay"),
    "anthropic": lambda p: anthropic_client(p, mode="replay"),
    "async-anthropic": lambda p: async_anthropic_client(p, mode="replay"),
    "genai": lambda p: genai_client(p, mode="replay"),
    "env-replay": lambda p: Transport(p),  # REEL_MODE unset: replay
}


@pytest.mark.parametrize("build", IN_PROCESS.values(), ids=IN_PROCESS.keys())
def test_in_process_bindings_refuse_a_missing_cassette_in_replay(
    build: Callable[[Path], Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REEL_MODE", raising=False)
    path = tmp_path / "cassettes" / "chat.jsonl"
    with pytest.raises(CassetteNotFoundError) as info:
        build(path)
    err = info.value
    assert isinstance(err, CassetteError)
    assert str(err) == (
        f"{path}: no such cassette, and replay mode records nothing: record it first: "
        'run with REEL_MODE=auto (or mode="auto"), which creates it and records what is missing'
    )
    assert not path.exists()
    assert not path.parent.exists()


@pytest.mark.parametrize("mode", ["auto", "live"])
def test_other_modes_accept_a_missing_cassette(mode: str, tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    assert len(Transport(path, mode=mode).player.file.cassette) == 0
    assert not path.exists()  # auto creates it when it records
    Transport(path, mode="record")
    assert path.exists()


def test_the_proxy_refuses_a_missing_cassette_at_startup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chat.jsonl"
    with pytest.raises(CassetteNotFoundError, match="reel auto --cassette"):
        Proxy(options(Mode.REPLAY, path).config(), cassette=path)
    with pytest.raises(SystemExit) as info:
        main(["--cassette", str(path), "--port", "0"])
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert err == (
        f"reel: cannot open the cassette: {path}: no such cassette, and replay mode records "
        f"nothing: record it first with `reel auto --cassette {path}` (records what is "
        f"missing) or `reel record --cassette {path}`\n"
    )
    assert not path.exists()


@pytest.mark.anyio
async def test_running_raises_the_error_itself(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    with pytest.raises(CassetteNotFoundError):
        async with running(options(Mode.REPLAY, path)):
            pass  # pragma: no cover - never reached


def test_a_missing_cassette_directory_is_refused_at_startup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "cassettes"
    with pytest.raises(SystemExit) as info:
        main(["--cassette-dir", str(root), "--port", "0"])
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith(f"reel: cannot open the cassette: {root}: no such cassette directory")
    assert f"`reel auto --cassette-dir {root}`" in err


@pytest.mark.anyio
async def test_a_missing_cassette_in_a_directory_is_404_naming_it(tmp_path: Path) -> None:
    root = tmp_path / "cassettes"
    async with serve_fake() as fake:
        record = ProxyOptions(mode=Mode.AUTO, cassette_dir=root, upstream=fake.url, port=0)
        async with running(record) as url, httpx.AsyncClient(base_url=url) as client:
            call = chat_call("hello", headers={"x-reel-cassette": "here"})
            assert (await fetch(client, call)).status == 200
    assert (root / "here.jsonl").exists()
    replay = ProxyOptions(mode=Mode.REPLAY, cassette_dir=root, port=0)
    async with running(replay) as url, httpx.AsyncClient(base_url=url) as client:
        assert (
            await fetch(client, chat_call("hello", headers={"x-reel-cassette": "here"}))
        ).status == 200
        gone = await fetch(client, chat_call("hello", headers={"x-reel-cassette": "gone"}))
        assert gone.status == 404
        message = json.loads(gone.body)["error"]["message"]
        assert message == (
            f"{root / 'gone.jsonl'}: no such cassette, and replay mode records nothing: record "
            f"it first with `reel auto --cassette-dir {root}` (records what is missing)"
        )
    assert not (root / "gone.jsonl").exists()


@pytest.mark.anyio
async def test_an_unreadable_cassette_in_a_directory_is_a_cassette_error_not_the_clients(
    tmp_path: Path,
) -> None:
    """The client named a cassette that exists but cannot be read (here a
    directory): the answer is the refusal of a bad cassette, saying how to
    fix it, and the proxy serves the next request."""
    root = tmp_path / "cassettes"
    (root / "odd.jsonl").mkdir(parents=True)
    (root / "good.jsonl").write_bytes(GOOD_LINE)
    replay = ProxyOptions(mode=Mode.REPLAY, cassette_dir=root, port=0)
    async with running(replay) as url, httpx.AsyncClient(base_url=url) as client:
        odd = await fetch(client, chat_call("hello", headers={"x-reel-cassette": "odd"}))
        assert odd.status == 500
        error = json.loads(odd.body)["error"]
        assert error["type"] == "reel_bad_cassette"
        assert error["message"].startswith(f"{root / 'odd.jsonl'}: cannot be read (")
        assert error["message"].endswith("Fix the file, or record it again.")
        good = await fetch(client, chat_call("hello", headers={"x-reel-cassette": "good"}))
        assert good.status in (200, 404)  # served: a replay or a miss, not a failure


def _proxy_stderr(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reel_bindings.proxy", "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin"},
    )


def test_the_proxy_refuses_a_file_that_is_not_a_cassette(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("Meeting notes\n- buy milk\n")
    done = _proxy_stderr(["--cassette", str(notes)])
    assert done.returncode == 1
    assert done.stderr == (
        f"reel: cannot open the cassette: {notes}: not a Reel cassette: no line is an "
        "interaction (line 1: not a JSON line (Expecting value: line 1 column 1 (char 0)))\n"
    )
    assert done.stdout == ""


def _start_and_stop(args: list[str]) -> str:
    """Start the proxy process, wait for its URL, stop it: its stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "reel_bindings.proxy", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("http://127.0.0.1:")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:  # pragma: no cover - only when the test fails
            proc.kill()
            proc.communicate()
    return err


def test_a_skipped_line_is_a_log_line_not_a_python_warning(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    good = CassetteMeta().to_line() + GOOD_LINE
    path.write_bytes(good + b"{not json\n" + GOOD_LINE)
    err = _start_and_stop(["--cassette", str(path)])
    lines = err.splitlines()
    assert lines[0].startswith(f"reel: {path}:3: skipped: not a JSON line ("), err
    assert "Warning" not in err
    assert "warnings.warn" not in err


def test_an_empty_cassette_in_replay_is_named(tmp_path: Path) -> None:
    for data in (b"", CassetteMeta().to_line()):
        path = tmp_path / "empty.jsonl"
        path.write_bytes(data)
        err = _start_and_stop(["--cassette", str(path)])
        assert (
            f"reel: cassette {path} holds no interactions: every request will miss; "
            f"record it with `reel auto --cassette {path}`"
        ) in err.splitlines()
