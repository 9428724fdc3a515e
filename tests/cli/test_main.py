"""The ``reel`` entry point: help, version, usage errors, the proxy modes,
and the installed console script."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import reel_bindings._cli
import reel_bindings.proxy
from reel_bindings.cli import main
from reel_bindings.cli._common import Progress

from .helpers import DEMO, write

COMMANDS = ("inspect", "cost", "diff", "redact", "check", "validate", "import")


def test_help_lists_every_command_and_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in (*COMMANDS, "record", "replay", "auto", "live"):
        assert command in out
    assert "exit status: 0 success; 1" in out


def test_each_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    for command in (*COMMANDS[:-1], "import vcr"):
        assert main([*command.split(), "--help"]) == 0
        assert "Exit status:" in capsys.readouterr().out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("reel ")


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: reel" in capsys.readouterr().err


def test_unknown_command_and_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["frobnicate"]) == 2
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err
    assert main(["inspect", str(DEMO), "--nope"]) == 2
    assert "unrecognized arguments: --nope" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["inspect", "{missing}"],
        ["cost", "{missing}"],
        ["diff", "{missing}", str(DEMO)],
        ["diff", str(DEMO), "{missing}"],
        ["redact", "{missing}"],
        ["check", "{missing}"],
        ["validate", "{missing}"],
        ["import", "vcr", "{missing}"],
    ],
)
def test_a_missing_file_exits_2_naming_it(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.jsonl"
    assert main([a.replace("{missing}", str(missing)) for a in argv]) == 2
    err = capsys.readouterr().err
    command = "import vcr" if argv[0] == "import" else argv[0]
    assert err.startswith(f"reel {command}: ")
    assert f"{missing}: no such file" in err


def test_a_directory_is_not_a_cassette(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(tmp_path)]) == 2
    assert "is a directory, not a cassette file" in capsys.readouterr().err


def test_a_newer_schema_is_refused_with_the_upgrade_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "new.jsonl"
    path.write_text('{"_meta":{"schema":99,"reel":"9.0"}}\n')
    assert main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:1: cassette schema 99" in err
    assert "pip install -U" in err


@pytest.mark.parametrize("mode", ["record", "replay", "auto", "live"])
def test_proxy_modes_go_to_the_proxy_unchanged(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[list[str], str | None]] = []

    def fake(argv: list[str], *, prog: str | None = None) -> None:
        seen.append((list(argv), prog))

    monkeypatch.setattr(reel_bindings.proxy, "main", fake)
    assert main([mode, "--port", "0", "--cassette", "x.jsonl"]) == 0
    assert seen == [(["--mode", mode, "--port", "0", "--cassette", "x.jsonl"], f"reel {mode}")]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["record", "--port", "nope"], "reel record: error: argument --port: invalid int value"),
        (["auto"], "reel auto: error: --mode auto writes a cassette: name it with --cassette"),
        (["replay", "--bogus"], "reel replay: error: unrecognized arguments: --bogus"),
    ],
)
def test_proxy_mode_usage_errors_name_the_reel_command(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: reel {argv[0]} ")
    assert message in err
    assert "reel_bindings.proxy" not in err


def test_the_old_entry_point_is_the_new_main() -> None:
    assert reel_bindings._cli.main is main


def _reel() -> str:
    script = Path(sys.executable).with_name("reel")
    found = str(script) if script.exists() else shutil.which("reel")
    if found is None:
        pytest.skip("the reel console script is not installed")
    return found


def test_the_installed_script(tmp_path: Path) -> None:
    reel = _reel()
    done = subprocess.run(
        [reel, "inspect", str(DEMO), "--json"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["interactions"]) == 7
    dirty = write(tmp_path / "dirty.jsonl", b'{"oops": "sk-proj-' + b"a1" * 15 + b'"}\n')
    done = subprocess.run([reel, "check", str(dirty)], capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert f"{dirty}:2: openai-key" in done.stdout
    done = subprocess.run([reel], capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert "usage: reel" in done.stderr


class _Terminal(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_progress_only_on_a_terminal() -> None:
    files = [Path("a.jsonl"), Path("b.jsonl")]
    quiet = _Terminal(tty=False)
    assert list(Progress(2, stream=quiet, delay=0.0).track(files)) == files
    assert quiet.getvalue() == ""
    loud = _Terminal(tty=True)
    progress = Progress(2, stream=loud, delay=0.0)
    progress.step(1, "b.jsonl")
    progress.done()
    assert loud.getvalue() == "\r\x1b[K[1/2] b.jsonl\r\x1b[K"
