"""``reel validate``: every bad line, with its number."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from reel_bindings.cli import main

from .helpers import DEMO, chat_request, interaction, write


def test_a_valid_cassette(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(DEMO)]) == 0
    assert capsys.readouterr().out == f"{DEMO}: ok, 7 interactions (schema 1)\n"


def test_every_bad_line_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = interaction()
    path = write(
        tmp_path / "c.jsonl",
        good,
        b"{not json\n",
        interaction(chat_request("2")).to_line().replace(b'"status":200', b'"status":"200"'),
        b'{"_meta": {}}\n',
        b'{"key": "sha256:abc"}',  # the last line, cut short
    )
    assert main(["validate", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == f"{path}: 4 bad lines, 1 interaction ok\n"
    err = captured.err.splitlines()
    assert err[0].startswith(f"{path}:3: not a JSON line (")
    assert err[1] == f'{path}:4: "response.status" must be an integer from 100 to 999'
    assert err[2] == f"{path}:5: a _meta line must be the first line"
    # whole JSON is no torn line, even last
    assert err[3] == f'{path}:6: "key" must be "sha256:" and 64 lowercase hex digits'
    path.write_bytes(path.read_bytes() + b'\n{"key": "sha256:ab')
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-1].endswith("(a torn last line: a write cut short)")


def test_a_bad_meta_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(b'{"_meta": {"match": "sideways"}}\n' + interaction().to_line())
    assert main(["validate", str(path)]) == 2  # unreadable, as for every command
    err = capsys.readouterr().err
    assert err.startswith(f'{path}:1: bad "_meta" match settings: ')


def test_a_newer_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(b'{"_meta": {"schema": 7, "reel": "3.0"}}\n{"anything": 1}\n')
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1  # the lines of a newer schema are not judged
    assert "cassette schema 7 (written by Reel 3.0) is newer" in err[0]


def test_warnings_for_duplicate_ids_and_stale_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = interaction(chat_request("one"))
    two = replace(interaction(chat_request("two")), id=one.id)
    stale = replace(interaction(chat_request("three")), request=chat_request("edited"))
    path = write(tmp_path / "c.jsonl", one, two, stale)
    assert main(["validate", str(path)]) == 0  # warnings only
    captured = capsys.readouterr()
    assert captured.out == f"{path}: ok, 3 interactions (schema 3)\n"
    assert captured.err.splitlines() == [
        f"{path}:3: warning: id {one.id} is also used on line 2",
        f"{path}:4: warning: the key is not the key of this request under match=normalized "
        "(edited by hand?): it will not match; re-record it",
    ]


def test_several_files_one_unreadable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.jsonl"
    assert main(["validate", str(DEMO), str(missing)]) == 2
    captured = capsys.readouterr()
    assert "ok, 7 interactions" in captured.out
    assert f"reel validate: {missing}: no such file" in captured.err
