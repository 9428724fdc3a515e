"""``reel import``: the command over every format: auto, directories, --dry-run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reel_bindings.cli import main
from reel_core import Cassette, Redactor
from reel_core.tools import import_formats, import_sources

from .test_import_vcr import cassette_yaml, exchange


def vcr_file(path: Path, *bodies: str) -> Path:
    items = [exchange(json.dumps({"model": "m", "messages": [{"content": b}]})) for b in bodies]
    path.write_text(cassette_yaml(*items))
    return path


def test_auto_tells_a_vcrpy_cassette_and_dry_run_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = vcr_file(tmp_path / "chat.yaml", "a", "b")
    assert main(["import", "auto", str(source), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out == f"{source} (dry run, not written): 2 of 2 interactions (vcr)\n"
    assert not (tmp_path / "chat.jsonl").exists()
    assert main(["import", "auto", str(source)]) == 0
    assert len(Cassette.loads((tmp_path / "chat.jsonl").read_bytes(), strict=True)) == 2


def test_auto_names_the_formats_when_it_cannot_tell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "notes.txt"
    source.write_text("just some text\n")
    assert main(["import", "auto", str(source)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"reel import auto: {source}: cannot tell its format: name it,")
    assert "FORMAT one of: " in err
    assert ", ".join(import_formats()) in err


def test_a_directory_for_a_format_of_files_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "in").mkdir()
    vcr_file(tmp_path / "in" / "a.yaml", "a")
    assert main(["import", "vcr", str(tmp_path / "in")]) == 2
    err = capsys.readouterr().err
    assert "is a directory, and vcr cassettes are files: name the files" in err


def test_a_directory_of_recordings_becomes_one_cassette(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    vcr = import_formats()["vcr"]
    monkeypatch.setattr(vcr, "DIRECTORY", "*.yaml", raising=False)
    root = tmp_path / "recordings"
    root.mkdir()
    vcr_file(root / "b.yaml", "two", "three")
    vcr_file(root / "a.yaml", "one")
    (root / "c.yaml").write_text("not: a cassette\n")
    (root / "index.sqlite").write_bytes(b"SQLite format 3\0")  # not matched: skipped quietly
    assert main(["import", "vcr", str(root)]) == 1  # c.yaml could not be
    captured = capsys.readouterr()
    assert captured.out.startswith(f"{root} -> {tmp_path / 'recordings.jsonl'}: 3 of 4 ")
    assert f"{root}: c.yaml: NOT converted: not a vcrpy cassette" in captured.err
    loaded = Cassette.loads((tmp_path / "recordings.jsonl").read_bytes(), strict=True)
    prompts = [json.loads(ix.request.body)["messages"][0]["content"] for ix in loaded]
    assert prompts == ["one", "two", "three"]  # the files in name order
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["import", "auto", str(empty)]) == 2
    err = capsys.readouterr().err
    assert "no recordings in this directory: looked for " in err
    assert "*.yaml (vcr)" in err  # and each other format that reads directories


def test_import_sources_numbers_entries_across_files_and_labels_them() -> None:
    first = cassette_yaml(exchange(), exchange()).encode()
    second = cassette_yaml({"request": "no"}).encode()
    report = import_sources(
        "vcr", [("one.yaml", first), ("junk.json", b"{"), ("two.yaml", second)], Redactor()
    )
    assert report.sources == [0, 1]
    assert report.interactions[1].id == report.interactions[0].id + "-2"
    assert [source for source, _ in report.failures] == [2, 3]
    assert report.label(0) == "one.yaml: interaction 0"
    assert report.label(2) == "junk.json"
    assert report.failures[0][1].startswith("not JSON")
    assert report.label(3) == "two.yaml: interaction 0"
    assert report.label(9) == "interaction 9"


def test_importing_the_same_source_twice_gives_byte_identical_output(tmp_path: Path) -> None:
    """A prompt holding an e-mail is redacted with a salted digest: the
    salt comes from the source, so the output does not change."""
    source = vcr_file(tmp_path / "chat.yaml", "write to ann@example.com", "again")
    assert main(["import", "vcr", str(source), "-o", str(tmp_path / "one.jsonl")]) == 0
    assert main(["import", "vcr", str(source), "-o", str(tmp_path / "two.jsonl")]) == 0
    one = (tmp_path / "one.jsonl").read_bytes()
    assert one == (tmp_path / "two.jsonl").read_bytes()
    assert b"ann@example.com" not in one
    assert b"[REDACTED:email:" in one  # digested with the derived salt
    other = vcr_file(tmp_path / "other.yaml", "write to ann@example.com", "again!")
    assert main(["import", "vcr", str(other), "-o", str(tmp_path / "three.jsonl")]) == 0
    salts = [
        Cassette.loads((tmp_path / n).read_bytes()).meta.extra["redact"]["salt"]
        for n in ("one.jsonl", "three.jsonl")
    ]
    assert salts[0] != salts[1]  # another source, another salt
