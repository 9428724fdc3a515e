"""``reel view`` and ``reel diff --html``: what they write, refuse and exit with."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from reel_bindings.cli import main
from reel_core import Cassette, Config, Engine, Miss, Mode, Request, Signal

from .helpers import DEMO, chat_request, interaction, write


def page_data(page: Path) -> dict[str, Any]:
    """The list a page embeds."""
    text = page.read_text(encoding="utf-8")
    found = re.search(r'<script type="application/json" id="reel-data">(.*?)</script>', text)
    assert found is not None
    data: dict[str, Any] = json.loads(found.group(1))
    return data


def miss_report(cassette: Path, body: dict[str, Any]) -> dict[str, Any]:
    """The body Reel answers with when ``body`` misses in ``cassette``."""
    loaded = Cassette.loads(cassette.read_bytes(), name=cassette.name)
    engine = Engine(loaded, Config(mode=Mode.REPLAY))
    engine.receive_request(
        Request(
            "POST",
            "/v1/chat/completions",
            ((b"host", b"api.openai.com"), (b"content-type", b"application/json")),
            json.dumps(body).encode(),
        )
    )
    while not isinstance(event := engine.next_event(), Signal):
        if isinstance(event, Miss):
            return event.report.to_json()
    raise AssertionError("no miss")


def test_one_cassette_gives_one_page_named_after_it_here(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    cassette = tmp_path / "demo.jsonl"
    shutil.copy(DEMO, cassette)
    assert main(["view", str(cassette)]) == 0
    assert capsys.readouterr().out == "demo.html: 7 interactions from 1 cassette\n"
    assert not (tmp_path / "demo.html").exists()  # never among the cassettes
    data = page_data(tmp_path / "here" / "demo.html")
    assert data["title"] == "Reel: demo.jsonl"
    assert len(data["rows"]) == 7
    assert data["miss"] is None
    assert data["diff"] is None


def test_a_directory_means_every_cassette_in_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "sub").mkdir()
    shutil.copy(DEMO, tmp_path / "b.jsonl")
    write(tmp_path / "sub" / "a.jsonl", interaction())
    (tmp_path / "notes.txt").write_text("not a cassette")
    out = tmp_path / "all.html"
    assert main(["view", str(tmp_path), "-o", str(out), "--title", "Everything"]) == 0
    assert "8 interactions from 2 cassettes" in capsys.readouterr().out
    data = page_data(out)
    assert data["title"] == "Everything"
    assert [c["name"] for c in data["cassettes"]] == [
        str(tmp_path / "b.jsonl"),
        str(tmp_path / "sub" / "a.jsonl"),
    ]
    assert [r["cassette"] for r in data["rows"]] == [0] * 7 + [1]


@pytest.mark.parametrize("count", [1, 2])
def test_a_directory_gives_reel_view_html_here_whatever_it_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], count: int
) -> None:
    # one rule (docs/viewing.md): a directory gives reel-view.html in the
    # working directory; with one cassette in it the page was written among
    # the cassettes, as DIR/NAME.html
    cassettes = tmp_path / "cassettes"
    cassettes.mkdir()
    for n in range(count):
        write(cassettes / f"c{n}.jsonl", interaction())
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    assert main(["view", str(cassettes)]) == 0
    assert capsys.readouterr().out.startswith("reel-view.html: ")
    assert len(page_data(tmp_path / "here" / "reel-view.html")["rows"]) == count
    assert sorted(p.name for p in cassettes.iterdir()) == [f"c{n}.jsonl" for n in range(count)]


def test_several_cassettes_default_to_reel_view_html(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    one = write(tmp_path / "one.jsonl", interaction())
    assert main(["view", str(one), str(DEMO)]) == 0
    assert len(page_data(tmp_path / "reel-view.html")["rows"]) == 8


def test_an_existing_output_is_kept_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "page.html"
    out.write_text("mine")
    assert main(["view", str(DEMO), "-o", str(out)]) == 2
    assert capsys.readouterr().err == f"reel view: {out} exists: pass --force to overwrite it\n"
    assert out.read_text() == "mine"
    assert main(["view", str(DEMO), "-o", str(out), "--force"]) == 0
    assert len(page_data(out)["rows"]) == 7


@pytest.mark.parametrize(
    "argv",
    [
        ["view", "{dir}", "-o", "{dir}/c.jsonl"],
        ["view", "{dir}/c.jsonl", "-o", "{dir}/c.jsonl", "--force"],
        ["view", "{dir}/c.jsonl", "-o", "{dir}"],
        ["view", "{dir}/empty"],
        ["view", "{dir}/missing.jsonl"],
        ["view", "{dir}/c.jsonl", "--miss", "{dir}/missing.json"],
        ["view", "{dir}/c.jsonl", "--miss", "{dir}/notes.txt"],
        ["view", "{dir}/c.jsonl", "--miss", "{dir}/other.json"],
        ["view", "{dir}/c.jsonl", "-o", "{dir}/no/such/dir/p.html"],
        ["diff", "{dir}/c.jsonl", str(DEMO), "--html", "{dir}/c.jsonl", "--force"],
        ["diff", "{dir}/c.jsonl", str(DEMO), "--html", "{dir}/notes.txt"],
    ],
    ids=[
        "over-a-cassette-in-the-dir",
        "over-its-input",
        "out-is-a-dir",
        "empty-dir",
        "missing",
        "miss-missing",
        "miss-not-json",
        "miss-other-json",
        "unwritable",
        "diff-over-input",
        "diff-out-exists",
    ],
)
def test_bad_usage_is_one_line_and_exit_2(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cassette = write(tmp_path / "c.jsonl", interaction())
    before = cassette.read_bytes()
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.txt").write_text("notes")
    (tmp_path / "other.json").write_text('{"error": {"type": "rate_limit"}}')
    assert main([a.replace("{dir}", str(tmp_path)) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"reel {argv[0]}: "), err
    assert err.count("\n") == 1, err
    assert cassette.read_bytes() == before
    assert (tmp_path / "notes.txt").read_text() == "notes"
    assert not list(tmp_path.glob("*.html"))


def test_bad_lines_are_reported_the_rest_shown_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    cassette = write(tmp_path / "c.jsonl", interaction(), b"{torn\n")
    out = tmp_path / "c.html"
    assert main(["view", str(cassette)]) == 1
    assert f"reel view: {cassette}:3: skipped: " in capsys.readouterr().err
    data = page_data(out)
    assert len(data["rows"]) == 1
    assert data["cassettes"][0]["skipped"][0]["line"] == 3


def test_a_miss_report_is_shown_beside_its_closest_recording(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Say hi to Reel."}]}
    miss = tmp_path / "miss.json"
    miss.write_text(json.dumps(miss_report(DEMO, body)))
    out = tmp_path / "miss.html"
    assert main(["view", "--miss", str(miss), str(DEMO), "-o", str(out)]) == 0
    data = page_data(out)
    assert data["title"] == "Reel miss: demo.jsonl"
    shown = data["miss"]
    closest = data["rows"][shown["closest_row"]]
    assert closest["id"] == shown["closest"]["id"] == "f95b67df3fce"
    assert [d["path"] for d in shown["diff"]] == ["messages[0].content"]
    # a cassette that does not hold it: the report alone, and a warning
    other = write(tmp_path / "other.jsonl", interaction(chat_request("x")))
    capsys.readouterr()
    assert main(["view", "--miss", str(miss), str(other), "-o", str(tmp_path / "o.html")]) == 0
    assert "the closest recording f95b67df3fce is in none of" in capsys.readouterr().err
    assert page_data(tmp_path / "o.html")["miss"]["closest_row"] is None


def test_diff_html_puts_both_cassettes_side_by_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = write(
        tmp_path / "a.jsonl", interaction(chat_request("one")), interaction(chat_request("two"))
    )
    b = write(
        tmp_path / "b.jsonl",
        interaction(chat_request("two")),
        interaction(chat_request("three")),
        interaction(
            chat_request("one"),
            interaction().response.__class__(500, body=b'{"error":"boom"}'),
        ),
    )
    out = tmp_path / "d.html"
    assert main(["diff", str(a), str(b), "--html", str(out)]) == 1  # they differ, as before
    captured = capsys.readouterr()
    assert "1 added, 0 removed, 1 changed, 1 same" in captured.out
    assert f"{out}: the comparison as a page" in captured.err
    data = page_data(out)
    assert data["title"] == "Reel diff: a.jsonl -> b.jsonl"
    assert [c["name"] for c in data["cassettes"]] == [str(a), str(b)]
    diff = data["diff"]
    assert diff["summary"] == {"added": 1, "removed": 0, "changed": 1, "same": 1}
    kinds = [(e["kind"], e["a"], e["b"]) for e in diff["entries"]]
    # rows 0-1 are a's, 2-4 b's
    assert kinds == [("changed", 0, 4), ("same", 1, 2), ("added", None, 3)]
    assert "status: 200 -> 500" in diff["entries"][0]["notes"]
    # --json and --html together: both
    out.unlink()
    assert main(["diff", str(a), str(b), "--html", str(out), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["differ"] is True
    assert out.exists()
