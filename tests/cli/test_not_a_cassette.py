"""Files that are not cassettes, or not in UTF-8, and lines that are not
interactions: every command refuses them clearly, with a non-zero exit, and
nothing that reports on secrets passes a file still holding one."""

from __future__ import annotations

from pathlib import Path

import pytest

from reel_bindings.cli import main
from reel_core import CassetteMeta

from .helpers import DEMO, interaction, write

OPENAI_KEY = "sk-proj-" + "a1B2" * 8
NOTES = b"Meeting notes\n- buy milk\n"

READERS = [
    ["inspect", "{f}"],
    ["inspect", "{f}", "--json"],
    ["cost", "{f}"],
    ["diff", "{f}", str(DEMO)],
    ["diff", str(DEMO), "{f}"],
    ["diff", "{f}", str(DEMO), "--html", "{f}.html"],
    ["view", "{f}"],
    ["view", str(DEMO), "{f}", "-o", "{f}.html"],
    ["validate", "{f}"],
    ["redact", "{f}"],
    ["redact", "--dry-run", "{f}"],
    ["check", "{f}"],
]


def _run(argv: list[str], path: Path) -> int:
    return main([a.replace("{f}", str(path)) for a in argv])


def _command(argv: list[str]) -> str:
    return argv[0]


@pytest.mark.parametrize("argv", READERS, ids=" ".join)
@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (NOTES, "not a Reel cassette: no line is an interaction (line 1: not a JSON line"),
        (
            b'{"a":1}\n{"b":2}\n',
            "not a Reel cassette: no line is an interaction "
            '(line 1: not an interaction (no "request"',
        ),
        (DEMO.read_bytes().decode().encode("utf-16"), "this file is UTF-16, not UTF-8"),
        (DEMO.read_bytes().decode().encode("utf-16-le"), "this file is UTF-16, not UTF-8"),
    ],
    ids=["text", "other-json", "utf16-bom", "utf16"],
)
def test_a_file_that_is_not_a_cassette_is_refused(
    argv: list[str],
    data: bytes,
    reason: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(data)
    assert _run(argv, path) == 2
    captured = capsys.readouterr()
    assert f"reel {_command(argv)}: {path}: {reason}" in captured.err
    assert "skipped" not in captured.err  # one refusal, not a warning per line
    assert "0 interactions" not in captured.out
    assert "nothing to redact" not in captured.out
    assert path.read_bytes() == data  # nothing written
    assert not list(tmp_path.glob("*.html"))


def test_check_reports_the_secrets_of_a_file_that_is_not_a_cassette(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_bytes(b"notes\nmy key " + OPENAI_KEY.encode() + b"\n")
    for argv in (["check", "{f}"], ["redact", "--dry-run", "{f}"], ["redact", "{f}"]):
        assert _run(argv, path) == 2
        captured = capsys.readouterr()
        assert f"{path}:2: openai-key in a line that is not an interaction" in captured.out
        assert f"{path}: not a Reel cassette" in captured.err


def test_an_empty_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "empty.jsonl"
    for data in (b"", b"\n \n"):
        path.write_bytes(data)
        assert main(["validate", str(path)]) == 1
        captured = capsys.readouterr()
        assert captured.out == f"{path}: empty: no _meta line and no interactions\n"
        # an empty file is an empty cassette to the commands that read one
        assert main(["inspect", str(path)]) == 0
        assert capsys.readouterr().err == "0 interactions, $0\n"
        assert main(["check", str(path)]) == 0
    # only a _meta line: an empty cassette Reel wrote (a recording of nothing)
    write(path)
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: ok, 0 interactions (schema 3)\n"


def test_a_line_of_other_json_is_not_an_interaction(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "c.jsonl", interaction(), b'{"a":1}\n')
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert err == (
        f'{path}:3: not an interaction (no "request" or "response"): is this a Reel cassette?\n'
    )


def test_a_line_not_in_utf8_names_the_byte(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = interaction().to_line().replace(b"Say hi", b"Say h\xe9")
    path = write(tmp_path / "c.jsonl", interaction(), line)
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    at = line.index(b"\xe9") + 1
    assert (
        err == f"{path}:3: not UTF-8 at byte {at} of the line (0xe9): re-save the file as UTF-8\n"
    )


@pytest.mark.parametrize(
    ("meta", "reason"),
    [
        (b'{"_meta": {"match": "sideways"}}\n', 'bad "_meta" match settings'),
        (b'{"_meta": {"schema": 7, "reel": "99.0"}}\n', "cassette schema 7"),
    ],
)
def test_validate_exits_2_on_a_bad_or_newer_meta_like_inspect(
    meta: bytes, reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(meta + interaction().to_line())
    assert main(["inspect", str(path)]) == 2
    assert reason in capsys.readouterr().err
    assert main(["validate", str(path)]) == 2
    assert reason in capsys.readouterr().err


def test_redact_never_passes_a_secret_on_a_line_it_cannot_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    torn = b'{"request": "' + OPENAI_KEY.encode() + b'"}\n'
    path = write(tmp_path / "c.jsonl", interaction(), torn, interaction(id="x2"))
    original = path.read_bytes()
    assert main(["check", str(path)]) == 1
    checked = capsys.readouterr().out
    assert checked == f"{path}:3: openai-key in a line that is not an interaction\n"

    assert main(["redact", "--dry-run", str(path)]) == 1
    captured = capsys.readouterr()
    assert "nothing to redact" not in captured.out
    assert captured.out.splitlines() == [
        f"{path}: nothing it can redact (3 lines); 1 secret shape left in a line that is "
        "not an interaction: edit it by hand",
        f"  {path}:3: openai-key in a line that is not an interaction",
    ]
    assert main(["redact", str(path)]) == 1
    assert f"  {path}:3: openai-key in a line that is not an interaction" in (
        capsys.readouterr().out
    )
    assert path.read_bytes() == original


def test_redact_replaces_what_it_can_and_still_fails_on_what_it_cannot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from .test_redact import secret_interaction

    torn = b'{"note": "' + OPENAI_KEY.encode()
    path = write(tmp_path / "c.jsonl", secret_interaction(), torn, meta=CassetteMeta())
    assert main(["redact", str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{path}: replaced 5 (")
    assert out[0].endswith(
        "; 1 secret shape left in a line that is not an interaction: edit it by hand"
    )
    assert out[1:] == [f"  {path}:3: openai-key in a line that is not an interaction"]
    assert main(["check", str(path)]) == 1
    assert capsys.readouterr().out == f"{path}:3: openai-key in a line that is not an interaction\n"


def test_the_match_key_of_a_damaged_line_is_no_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    damaged = interaction().to_line().replace(b'"status":200', b'"status":"200"')
    path = write(tmp_path / "c.jsonl", interaction(id="ok"), damaged)
    assert main(["check", str(path)]) == 0
    assert main(["redact", "--dry-run", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: nothing to redact (2 lines)\n"
