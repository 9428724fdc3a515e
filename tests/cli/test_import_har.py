"""``reel import har``: HAR 1.2 archives (Polly.JS, browsers...) that then replay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reel_bindings.cli import main
from reel_core import Cassette

KEY = "sk-proj-" + "Qw3Er5Ty7U" * 4
CHAT = '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}'


def archive(*statuses: int) -> str:
    entries = [
        {
            "startedDateTime": "2025-08-14T14:45:17.130Z",
            "request": {
                "method": "POST",
                "url": "https://api.openai.com/v1/chat/completions",
                "headers": [{"name": "authorization", "value": f"Bearer {KEY}"}],
                "postData": {"mimeType": "application/json", "text": CHAT},
            },
            "response": {
                "status": status,
                "headers": [
                    {"name": "content-type", "value": "application/json"},
                    {"name": "content-encoding", "value": "gzip"},
                ],
                "content": {"mimeType": "application/json", "text": '{"n": 1}'},
            },
            "timings": {"send": 0, "wait": 321, "receive": 0},
        }
        for status in statuses
    ]
    doc = {"log": {"version": "1.2", "creator": {"name": "Polly.JS"}, "entries": entries}}
    return json.dumps(doc, indent=2)


def test_a_har_imports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "recording.har"
    source.write_text(archive(200))
    assert main(["import", "har", str(source)]) == 0
    out = tmp_path / "recording.jsonl"
    assert capsys.readouterr().out == (
        f"{source} -> {out}: 1 of 1 interaction\n"
        "  interaction 0: content-encoding gzip dropped: HAR's content.text holds the body "
        "decoded\n"
    )
    (ix,) = Cassette.loads(out.read_bytes(), strict=True)
    assert ix.provider == "openai"
    assert ix.response.body == b'{"n": 1}'
    assert ix.meta["imported"] == "har"
    assert ix.meta["ttfb_ms"] == 321.0
    assert KEY not in out.read_text()


def test_an_aborted_entry_is_reported_and_the_rest_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "recording.har"
    source.write_text(archive(0, 200))
    assert main(["import", "har", str(source)]) == 1
    captured = capsys.readouterr()
    assert captured.err == (
        f"reel import har: {source}: interaction 0: NOT converted: no HTTP response: "
        "status 0: the request was aborted or failed\n"
    )
    assert len(Cassette.loads((tmp_path / "recording.jsonl").read_bytes())) == 1


def test_a_file_that_is_no_har_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "recording.har"
    source.write_text('{"log": {"pages": []}}')
    assert main(["import", "har", str(source)]) == 2
    assert capsys.readouterr().err == (
        f'reel import har: {source}: not a HAR file: its "log" has no "entries" list '
        "(found nothing)\n"
    )
    assert not (tmp_path / "recording.jsonl").exists()


def test_auto_tells_a_har(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "recording.har"
    source.write_text(archive(200))
    out = tmp_path / "out.jsonl"
    assert main(["import", "auto", str(source), "-o", str(out), "--dry-run"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        f"{source} (dry run, not written): 1 of 1 interaction (har)"
    )
    assert not out.exists()


def test_skipped_urls_are_shown_without_credentials_or_payload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(archive(200))
    template = doc["log"]["entries"][0]
    secret_data = "data:text/plain;base64," + "SeCrEtPaYlOaD" * 20
    for url in (secret_data, "ftp://user:SeCrEt-password@ftp.example.com/file.txt"):
        doc["log"]["entries"].append({**template, "request": {**template["request"], "url": url}})
    source = tmp_path / "recording.har"
    source.write_text(json.dumps(doc))
    assert main(["import", "har", str(source)]) == 1  # two entries NOT converted
    err = capsys.readouterr().err
    assert "NOT converted: not an HTTP request: data:text/plain;base64,... (283 characters)" in err
    assert "NOT converted: not an HTTP request: ftp://***@ftp.example.com/file.txt" in err
    assert "SeCrEt" not in err
