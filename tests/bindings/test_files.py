"""Cassette files: locked appends from threads and processes, torn lines."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from reel_bindings import CassetteFile
from reel_bindings import _files as files
from reel_core import (
    Cassette,
    CassetteError,
    CassetteMeta,
    Interaction,
    MatchConfig,
    MatchMode,
    Mode,
    RecordedRequest,
    RecordedResponse,
)
from reel_core.tools import CassetteWarning, match_key


def line_for(writer: str, n: int, size: int = 2000) -> bytes:
    body = json.dumps({"writer": writer, "n": n, "pad": "x" * size}).encode()
    key = match_key("POST", "/v1/x", (), body, MatchConfig())
    request = RecordedRequest("POST", "/v1/x", (), body)
    return Interaction(key, key[7:19], request, RecordedResponse(200, (), b"ok")).to_line()


WRITER = """
import sys
from reel_bindings import CassetteFile
from reel_bindings import _files as files
from reel_core import Mode
sys.path.insert(0, {tests!r})
from bindings.test_files import line_for
file = CassetteFile({path!r}, mode=Mode.AUTO)
for n in range({count}):
    file.append(line_for({name!r}, n))
"""


def check(path: Path, expected: set[tuple[str, int]]) -> None:
    data = path.read_bytes()
    assert data.count(b'{"_meta"') == 1
    cassette = Cassette.loads(data, strict=True)
    seen = []
    for interaction in cassette:
        body = json.loads(interaction.request.body)
        seen.append((body["writer"], body["n"]))
    assert len(seen) == len(expected)
    assert set(seen) == expected


def test_threads_append_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    file = CassetteFile(path, mode=Mode.AUTO)

    def write(name: str) -> None:
        for n in range(100):
            file.append(line_for(name, n))

    threads = [threading.Thread(target=write, args=(f"t{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(path, {(f"t{i}", n) for i in range(8) for n in range(100)})


def test_processes_append_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    tests = str(Path(__file__).parents[1])
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WRITER.format(tests=tests, path=str(path), count=150, name=f"p{i}"),
            ]
        )
        for i in range(4)
    ]
    for p in procs:
        assert p.wait(timeout=120) == 0
    check(path, {(f"p{i}", n) for i in range(4) for n in range(150)})


def test_torn_last_line_is_skipped_and_the_next_append_starts_afresh(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    file = CassetteFile(path, mode=Mode.AUTO)
    file.append(line_for("a", 0))
    whole = line_for("a", 1)
    with path.open("ab") as f:
        f.write(whole[: len(whole) // 2])  # a crash mid-write
    with pytest.warns(CassetteWarning, match="torn last line"):
        reopened = CassetteFile(path, mode=Mode.AUTO)
    assert len(reopened.cassette) == 1
    reopened.append(line_for("a", 2))
    with pytest.warns(CassetteWarning, match=r":3: skipped"):
        cassette = Cassette.loads(path.read_bytes(), strict=False)
    assert [json.loads(i.request.body)["n"] for i in cassette] == [0, 2]


def test_record_mode_starts_afresh(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    CassetteFile(path, mode=Mode.AUTO).append(line_for("old", 0))
    file = CassetteFile(path, mode=Mode.RECORD)
    assert len(file.cassette) == 0
    assert path.read_bytes().startswith(b'{"_meta"')
    assert path.read_bytes().count(b"\n") == 1


def test_replay_mode_never_writes(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"")  # an empty file: an empty cassette
    file = CassetteFile(path, mode=Mode.REPLAY)
    with pytest.raises(RuntimeError, match="not written in replay mode"):
        file.append(line_for("a", 0))
    assert path.read_bytes() == b""
    missing = CassetteFile(tmp_path / "missing.jsonl", mode=Mode.REPLAY, missing_ok=True)
    with pytest.raises(RuntimeError, match="not written in replay mode"):
        missing.append(line_for("a", 0))
    assert not (tmp_path / "missing.jsonl").exists()


def test_append_refuses_a_line_that_is_not_one_line(tmp_path: Path) -> None:
    file = CassetteFile(tmp_path / "c.jsonl", mode=Mode.AUTO)
    with pytest.raises(ValueError, match="one"):
        file.append(b'{"a":1}')
    with pytest.raises(ValueError, match="one"):
        file.append(b'{"a":1}\n{"b":2}\n')


def test_record_mode_keeps_the_cassettes_own_settings(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    meta = b'{"_meta":{"schema":1,"reel":"0.1","match":"exact","redact":{"fields":["ticket"]}}}\n'
    path.write_bytes(meta + line_for("old", 0))
    file = CassetteFile(path, mode=Mode.RECORD)
    assert len(file.cassette) == 0
    assert file.cassette.meta.match == MatchConfig(MatchMode.EXACT)
    # a cassette without a salt, started afresh, gets one (its lines are new)
    redact = file.cassette.meta.extra["redact"]
    assert redact["fields"] == ["ticket"]
    assert re.fullmatch("[0-9a-f]{32}", redact["salt"])
    first = path.read_bytes().splitlines()[0]
    assert b'"match":"exact"' in first
    assert b'"redact":{"fields":["ticket"],"salt":"' in first


def _salt(file: CassetteFile) -> object:
    return file.cassette.meta.extra.get("redact", {}).get("salt")


@pytest.mark.parametrize("mode", [Mode.AUTO, Mode.RECORD, Mode.REPLAY])
def test_a_new_cassette_gets_a_fresh_salt(tmp_path: Path, mode: Mode) -> None:
    # replay refuses a missing cassette (CassetteNotFoundError), not a new one
    missing_ok = mode is Mode.REPLAY
    one = CassetteFile(tmp_path / "a.jsonl", mode=mode, missing_ok=missing_ok)
    two = CassetteFile(tmp_path / "b.jsonl", mode=mode, missing_ok=missing_ok)
    assert isinstance(_salt(one), str)
    assert re.fullmatch("[0-9a-f]{32}", str(_salt(one)))
    assert _salt(one) != _salt(two)  # random, per cassette
    (tmp_path / "empty.jsonl").write_bytes(b"")  # an empty file is a new cassette too
    assert _salt(CassetteFile(tmp_path / "empty.jsonl", mode=mode)) is not None


@pytest.mark.parametrize(
    "content", [b"\n", b" \t\r\n", b"\xef\xbb\xbf", b"\xef\xbb\xbf\r\n\r\n", b"\n" * 70_000]
)
def test_a_blank_file_is_a_new_cassette(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "blank.jsonl"
    path.write_bytes(content)
    file = CassetteFile(path, mode=Mode.AUTO, strict=True)
    assert len(file.cassette) == 0
    assert _salt(file) is not None


def test_a_file_with_one_byte_past_its_blanks_is_read(tmp_path: Path) -> None:
    path = tmp_path / "nearly.jsonl"
    path.write_bytes(b"\n" * 70_000 + b" x\n")
    with pytest.raises(CassetteError, match=r"nearly.jsonl:70001: not a JSON line"):
        CassetteFile(path, mode=Mode.AUTO, strict=True)


def test_the_salt_is_written_with_the_first_line_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    file = CassetteFile(path, mode=Mode.AUTO, meta=CassetteMeta(match=MatchConfig(MatchMode.EXACT)))
    salt = _salt(file)
    file.append(line_for("a", 0))
    assert f'"redact":{{"salt":"{salt}"}}'.encode() in path.read_bytes().splitlines()[0]
    for mode in (Mode.AUTO, Mode.REPLAY, Mode.RECORD):  # reopening keeps it
        assert _salt(CassetteFile(path, mode=mode)) == salt
    assert _salt(CassetteFile(path, mode=Mode.RECORD)) == salt


def test_a_legacy_cassette_keeps_having_no_salt(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(b'{"_meta":{"schema":1}}\n' + line_for("old", 0))
    file = CassetteFile(path, mode=Mode.AUTO)
    assert _salt(file) is None
    file.append(line_for("new", 1))
    assert b"salt" not in path.read_bytes()
    path.write_bytes(line_for("old", 0))  # no _meta line at all
    assert _salt(CassetteFile(path, mode=Mode.AUTO)) is None


@pytest.mark.parametrize("theirs", ["0" * 32, None])
def test_a_cassette_another_process_created_first_lends_its_salt(
    tmp_path: Path, theirs: str | None
) -> None:
    path = tmp_path / "c.jsonl"
    mine = CassetteFile(path, mode=Mode.AUTO)  # the file is missing: a salt of its own
    redact = {"redact": {"salt": theirs}} if theirs else {}
    other = CassetteMeta(extra=redact)
    path.write_bytes(other.to_line() + line_for("other", 0))  # another process was first
    mine.append(line_for("mine", 1))
    assert _salt(mine) == theirs  # later recordings agree with the file
    assert path.read_bytes().count(b"_meta") == 1
    mine.append(line_for("mine", 2))
    assert _salt(mine) == theirs
    # a garbled first line is left for loading to report
    path.write_bytes(b'{"_meta": 5}\n')
    late = CassetteFile(tmp_path / "d.jsonl", mode=Mode.AUTO)
    late.path = path
    salt = _salt(late)
    late.append(line_for("late", 3))
    assert _salt(late) == salt


def test_strict_opening_parses_every_line(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    key = "sha256:" + "0" * 64
    path.write_bytes(line_for("a", 0) + b'{"key":"' + key.encode() + b'","id":x}\n')
    assert len(CassetteFile(path, mode=Mode.REPLAY).cassette) == 2  # indexed only
    with pytest.raises(CassetteError, match=r":2: not a JSON line"):
        CassetteFile(path, mode=Mode.REPLAY, strict=True)


# -- a large cassette: indexed in pieces, its lines read from the file --------


@pytest.fixture
def on_demand(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every cassette file counts as large, read in small pieces."""
    monkeypatch.setattr(files, "ON_DEMAND_FROM", 0)
    monkeypatch.setattr(files, "PIECE", 5000)  # a line of line_for is 2.3 KB


def _write(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(CassetteMeta().to_line() + b"".join(lines))


@pytest.mark.usefixtures("on_demand")
def test_a_large_cassette_reads_as_a_small_one(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    long = line_for("long", 0, size=20_000)  # longer than a piece
    _write(path, [line_for("a", n) for n in range(7)] + [long, b"junk\n", line_for("b", 0)])
    with pytest.warns(CassetteWarning, match=r"c\.jsonl:10: skipped: not a JSON line"):
        large = CassetteFile(path, mode=Mode.REPLAY).cassette
    assert isinstance(large._lines.sources[0], files.FileLines)
    with pytest.warns(CassetteWarning):
        small = Cassette.loads(path.read_bytes(), strict=False)
    assert [i.id for i in large] == [i.id for i in small]
    assert list(large) == list(small)
    assert len(large) == 9


@pytest.mark.usefixtures("on_demand")
def test_strict_opening_of_a_large_cassette_parses_every_line(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    key = "sha256:" + "0" * 64
    path.write_bytes(line_for("a", 0) + b'{"key":"' + key.encode() + b'","id":x}\n')
    assert len(CassetteFile(path, mode=Mode.REPLAY).cassette) == 2  # indexed only
    with pytest.raises(CassetteError, match=r":2: not a JSON line"):
        CassetteFile(path, mode=Mode.REPLAY, strict=True)


@pytest.mark.usefixtures("on_demand")
def test_a_large_cassette_cut_short_while_open_answers_a_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    lines = [line_for("a", n) for n in range(3)]
    _write(path, lines)
    cassette = CassetteFile(path, mode=Mode.REPLAY).cassette
    first = next(iter(cassette))  # parsed now: kept
    with path.open("r+b") as f:  # rewritten in place, shorter
        f.truncate(len(CassetteMeta().to_line()) + len(lines[0]) + 10)
    keying = MatchConfig()
    assert cassette.play(first.key, keying) == first
    last = json.loads(lines[2])["key"]
    with pytest.raises(CassetteError, match=r":4: the cassette file was cut short"):
        cassette.play(last, keying)


@pytest.mark.usefixtures("on_demand")
def test_a_large_cassette_that_grows_while_open(tmp_path: Path) -> None:
    """Lines this process appends are served from memory; lines another
    writer appends after the open are not seen (as for a small cassette),
    and the lines read on demand stay right."""
    path = tmp_path / "c.jsonl"
    _write(path, [line_for("a", n) for n in range(3)])
    file = CassetteFile(path, mode=Mode.AUTO)
    other = CassetteFile(path, mode=Mode.AUTO)
    other.append(line_for("other", 0))
    mine = Cassette.loads(line_for("mine", 0)).interactions()[0]
    file.cassette.add(mine)
    file.append(mine.to_line())
    writers = [json.loads(i.request.body)["writer"] for i in file.cassette]
    assert writers == ["a", "a", "a", "mine"]
    reopened = CassetteFile(path, mode=Mode.REPLAY).cassette
    assert [json.loads(i.request.body)["writer"] for i in reopened] == [
        "a",
        "a",
        "a",
        "other",
        "mine",
    ]


def test_file_lines_read_slices_and_search(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    lines = files.FileLines(path)
    assert len(lines) == 10
    assert lines[2:5] == b"234"
    assert lines[5:5] == b""
    assert lines[8:100] == b"89"
    assert lines.find(b"45", 0, 10) == 4
    assert lines.find(b"45", 5, 10) == -1
    assert lines.startswith(b"23", 2, 10)
    assert not lines.startswith(b"23", 2, 3)
    assert list(lines.pieces(4)) == [(0, b"0123456789")]  # no newline: one piece
    lines.close()
    with pytest.raises(ValueError, match="cannot read the cassette file again"):
        lines[0:1]


def test_file_lines_pieces_end_at_newlines(tmp_path: Path) -> None:
    path = tmp_path / "f"
    data = b"ab\ncdefgh\ni\n\njk"
    path.write_bytes(data)
    pieces = list(files.FileLines(path).pieces(4))
    assert b"".join(p for _, p in pieces) == data
    assert all(p.endswith(b"\n") for _, p in pieces[:-1])
    assert len(pieces) == 4  # "ab", then "cdefgh" longer than a piece
    assert [data[o : o + len(p)] for o, p in pieces] == [p for _, p in pieces]


def test_a_small_cassette_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    _write(path, [line_for("a", 0)])
    assert type(CassetteFile(path, mode=Mode.REPLAY).cassette._lines.sources[0]) is bytes
