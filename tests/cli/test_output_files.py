"""Every command that writes an output file (view, diff --html, export,
import, pull) writes it one way (``write_output``): never over one of its
inputs however the output is spelled -- the same path, a ``..`` spelling, a
symbolic link, a hard link (same device and inode) -- not even with
``--force``; and by renaming a temporary file over the name given, never
through a link.  ``reel redact`` rewrites the file a link names, and keeps
the link."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from reel_bindings.cli import main
from reel_bindings.proxy import DEMO_CASSETTE
from tests.inner import inner_ini

from .helpers import interaction, write
from .test_redact import OPENAI_KEY, secret_interaction


def _har(path: Path) -> Path:
    entry = {
        "startedDateTime": "2025-08-14T14:45:17.130Z",
        "request": {
            "method": "POST",
            "url": "https://api.openai.com/v1/chat/completions",
            "headers": [],
            "postData": {"mimeType": "application/json", "text": '{"model": "gpt-4o-mini"}'},
        },
        "response": {
            "status": 200,
            "headers": [{"name": "content-type", "value": "application/json"}],
            "content": {"mimeType": "application/json", "text": '{"n": 1}'},
        },
    }
    path.write_text(json.dumps({"log": {"version": "1.2", "entries": [entry]}}))
    return path


#: Each writing command: (its input files made in a directory, the argv
#: writing OUT from them).
Command = Callable[[Path], tuple[list[Path], Callable[[Path], list[str]]]]


def _view(d: Path) -> tuple[list[Path], Callable[[Path], list[str]]]:
    c = write(d / "c.jsonl", interaction())
    return [c], lambda out: ["view", str(c), "-o", str(out), "--force"]


def _view_miss(d: Path) -> tuple[list[Path], Callable[[Path], list[str]]]:
    c = write(d / "c.jsonl", interaction())
    report = d / "miss.json"
    report.write_text(json.dumps({"error": {"type": "reel_miss", "message": "m"}}))
    return [report], lambda out: ["view", str(c), "--miss", str(report), "-o", str(out), "--force"]


def _diff(d: Path) -> tuple[list[Path], Callable[[Path], list[str]]]:
    a = write(d / "a.jsonl", interaction())
    b = write(d / "b.jsonl", interaction(id="other0000001"))
    return [a, b], lambda out: ["diff", str(a), str(b), "--html", str(out), "--force"]


def _export(d: Path) -> tuple[list[Path], Callable[[Path], list[str]]]:
    c = write(d / "c.jsonl", interaction())
    return [c], lambda out: ["export", "har", str(c), "-o", str(out), "--force"]


def _import(d: Path) -> tuple[list[Path], Callable[[Path], list[str]]]:
    source = _har(d / "rec.har")
    return [source], lambda out: ["import", "har", str(source), "-o", str(out), "--force"]


COMMANDS: dict[str, Command] = {
    "view": _view,
    "view --miss": _view_miss,
    "diff --html": _diff,
    "export": _export,
    "import": _import,
}


def _spellings(target: Path) -> dict[str, Path]:
    """Names of ``target`` other than the one it was made with."""
    d = target.parent
    (d / "sub").mkdir(exist_ok=True)
    hard = d / "hard.out"
    os.link(target, hard)
    soft = d / "soft.out"
    soft.symlink_to(target)
    return {
        "same path": target,
        "dot-dot": d / "sub" / ".." / target.name,
        "symlink": soft,
        "hard link": hard,
    }


@pytest.mark.parametrize("spelling", ["same path", "dot-dot", "symlink", "hard link"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_no_command_writes_over_its_input(
    command: str, spelling: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs, argv = COMMANDS[command](tmp_path)
    for target in inputs:
        before = target.read_bytes(), target.stat().st_ino
        out = _spellings(target)[spelling]
        assert main(argv(out)) == 2, capsys.readouterr()
        err = capsys.readouterr().err
        assert "the output would overwrite the" in err
        assert "name another with -o" in err
        assert (target.read_bytes(), target.stat().st_ino) == before
        for extra in ("hard.out", "soft.out"):
            (tmp_path / extra).unlink()


@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_output_link_is_replaced_not_written_through(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _inputs, argv = COMMANDS[command](tmp_path)
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("keep me")
    soft = tmp_path / "soft.out"
    soft.symlink_to(elsewhere)
    hard = tmp_path / "hard.out"
    os.link(elsewhere, hard)
    for out in (soft, hard):
        assert main(argv(out)) in (0, 1), capsys.readouterr()
        assert not out.is_symlink()
        assert out.read_text() != "keep me"
    assert elsewhere.read_text() == "keep me"
    assert elsewhere.stat().st_nlink == 1  # the hard link was renamed over, not written
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".reel-tmp")]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_without_force_an_existing_output_or_dangling_link_is_kept(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _inputs, argv = COMMANDS[command](tmp_path)
    dangling = tmp_path / "dangling.out"
    dangling.symlink_to(tmp_path / "nowhere")
    assert main([a for a in argv(dangling) if a != "--force"]) == 2
    assert "exists: pass --force to overwrite it" in capsys.readouterr().err
    assert dangling.is_symlink()
    assert not (tmp_path / "nowhere").exists()


def test_pull_replaces_a_link_and_needs_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "demo.jsonl").write_bytes(DEMO_CASSETTE.read_bytes())
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("keep me")
    link = tmp_path / "link.jsonl"
    link.symlink_to(elsewhere)
    assert main(["pull", str(store), "demo.jsonl", "-o", str(link)]) == 2
    assert "pass --force" in capsys.readouterr().err
    assert main(["pull", str(store), "demo.jsonl", "-o", str(link), "--force"]) == 0
    assert not link.is_symlink()
    assert link.read_bytes() == DEMO_CASSETTE.read_bytes()
    assert elsewhere.read_text() == "keep me"


def test_redact_rewrites_the_file_a_link_names(tmp_path: Path) -> None:
    real = write(tmp_path / "real.jsonl", secret_interaction())
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    assert main(["redact", str(link)]) == 0
    assert link.is_symlink()  # the link is kept...
    assert OPENAI_KEY not in real.read_text()  # ...and the file it names is redacted


def test_redact_says_a_hard_link_keeps_the_lines_as_they_were(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "c.jsonl", secret_interaction())
    other = tmp_path / "other.jsonl"
    os.link(path, other)
    assert main(["redact", str(path)]) == 1  # found: secrets left under another name
    assert OPENAI_KEY not in path.read_text()
    assert OPENAI_KEY in other.read_text()
    assert f"{path}: 1 other hard link(s) to it still hold the lines" in capsys.readouterr().err


def test_the_pytest_report_is_renamed_into_place(pytester: pytest.Pytester) -> None:
    pytester.makeini(inner_ini())  # the bench's peers' plugins clash when both are installed
    pytester.makepyfile("def test_nothing():\n    pass\n")
    elsewhere = pytester.path / "elsewhere.txt"
    elsewhere.write_text("keep me")
    report = pytester.path / "report.json"
    report.symlink_to(elsewhere)
    pytester.runpytest_subprocess("-p", "reel", "--reel-report", str(report)).assert_outcomes(
        passed=1
    )
    assert not report.is_symlink()
    json.loads(report.read_text())
    assert elsewhere.read_text() == "keep me"
