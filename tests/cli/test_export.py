"""``reel export har``: a cassette out as HAR 1.2, and back in with ``reel import har``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reel_bindings.cli import main
from reel_core import Cassette

from .helpers import interaction


def cassette(path: Path, *lines: bytes) -> Path:
    path.write_bytes(b"".join(lines))
    return path


def test_export_then_import_gives_the_same_interactions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = cassette(tmp_path / "chat.jsonl", interaction().to_line())
    assert main(["export", "har", str(source)]) == 0
    assert capsys.readouterr().out == f"{source} -> {tmp_path / 'chat.har'}: 1 interaction\n"
    har = json.loads((tmp_path / "chat.har").read_text())
    assert har["log"]["version"] == "1.2"
    (entry,) = har["log"]["entries"]
    assert entry["request"]["url"].startswith("https://api.openai.com/")
    back = tmp_path / "back.jsonl"
    assert main(["import", "har", str(tmp_path / "chat.har"), "-o", str(back)]) == 0
    (before,) = Cassette.loads(source.read_bytes())
    (after,) = Cassette.loads(back.read_bytes())
    assert (after.key, after.request, after.response) == (
        before.key,
        before.request,
        before.response,
    )


def test_bad_lines_are_reported_and_the_rest_exported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = cassette(tmp_path / "c.jsonl", interaction().to_line(), b'{"key": 1}\n')
    out = tmp_path / "out.har"
    assert main(["export", "har", str(source), "-o", str(out), "--base-url", "http://x"]) == 1
    captured = capsys.readouterr()
    assert f"reel export har: {source}:2: NOT exported:" in captured.err
    (entry,) = json.loads(out.read_text())["log"]["entries"]
    assert entry["request"]["url"].startswith("http://x/")
    assert main(["export", "har", str(source), "-o", str(out)]) == 2
    assert f"{out} exists: pass --force to overwrite it" in capsys.readouterr().err
    assert main(["export", "har", str(source), "-o", str(source)]) == 2
    assert "would overwrite the cassette" in capsys.readouterr().err
    assert main(["export", "har", str(tmp_path / "nope.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err
