"""``reel import ruby-vcr``: Ruby VCR cassettes that then replay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reel_bindings.cli import main
from reel_core import Cassette, Config, Engine, Frame, Mode, Replay, Request, ResponseHead, Signal

CHAT = '{"model":"qwen3","messages":[{"role":"user","content":"hi"}]}'
ANSWER = '{"choices":[{"message":{"content":"hello"}}]}'

CASSETTE = f"""---
http_interactions:
- request:
    method: post
    uri: "<OLLAMA_API_BASE>/chat/completions"
    body:
      encoding: UTF-8
      string: '{CHAT}'
    headers:
      Authorization:
      - Bearer <OLLAMA_API_KEY>
  response:
    status:
      code: 200
      message: OK
    headers:
      Content-Type:
      - application/json
    body:
      encoding: ASCII-8BIT
      string: '{ANSWER}'
  recorded_at: Tue, 14 Nov 2023 21:48:25 GMT
- request:
    method: get
    uri: https://api.openai.com/v1/models
    body:
      encoding: US-ASCII
      string: ''
    headers: {{}}
  response:
    status:
      code: 418
      message: I'm a teapot
    headers: {{}}
    body:
      encoding: UTF-8
      string: ''
  extra: !ruby/object:Net::HTTPResponse {{}}
  recorded_at: Tue, 14 Nov 2023 21:48:26 GMT
recorded_with: VCR 6.2.0
"""


def replay(cassette: Cassette, request: Request) -> tuple[int, bytes]:
    engine = Engine(cassette, Config(mode=Mode.REPLAY))
    engine.receive_request(request)
    events = []
    while not isinstance(event := engine.next_event(), Signal):
        events.append(event)
    assert isinstance(events[0], Replay), events[0]
    head = events[1]
    assert isinstance(head, ResponseHead)
    return head.status, b"".join(e.data for e in events if isinstance(e, Frame))


@pytest.mark.parametrize("fmt", ["ruby-vcr", "auto"])
def test_a_cassette_imports_and_replays(
    fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "chat.yml"
    source.write_text(CASSETTE)
    out = tmp_path / "chat.jsonl"
    assert main(["import", fmt, str(source)]) == 1  # the Ruby object is not imported
    captured = capsys.readouterr()
    by = " (ruby-vcr)" if fmt == "auto" else ""
    assert captured.out == (
        f"{source} -> {out}: 1 of 2 interactions{by}\n"
        "  interaction 0: the uri's base <OLLAMA_API_BASE> is a placeholder: the request is "
        "stored by its path /chat/completions (a path the placeholder stood for is not known)\n"
    )
    assert captured.err == (
        f"reel import {fmt}: {source}: interaction 1: NOT converted: it holds a "
        "!ruby/object:Net::HTTPResponse YAML tag, which Reel does not load "
        "(it would build an object)\n"
    )
    _, line = (json.loads(x) for x in out.read_bytes().splitlines())
    assert line["meta"]["imported"] == "ruby-vcr"
    assert line["meta"]["ttfb_ms"] is None
    assert line["ts"] == "2023-11-14T21:48:25.000Z"
    cassette = Cassette.loads(out.read_bytes(), strict=True)
    request = Request("POST", "/chat/completions", (), CHAT.encode())
    assert replay(cassette, request) == (200, ANSWER.encode())


def test_a_clean_cassette_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "chat.yml"
    source.write_text(CASSETTE.split("- request:\n    method: get")[0] + "recorded_with: VCR 6\n")
    assert main(["import", "ruby-vcr", str(source), "-o", str(tmp_path / "o.jsonl")]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            "interactions: []\n",
            'not a Ruby VCR cassette: no "http_interactions" list at the top (found dict)',
        ),
        ("http_interactions: [\n", "not YAML: "),
    ],
)
def test_a_wrong_file_exits_2_with_the_reason(
    text: str, reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "c.yml"
    source.write_text(text)
    assert main(["import", "ruby-vcr", str(source)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"reel import ruby-vcr: {source}: {reason}")
    assert err.count("\n") == 1
    assert not (tmp_path / "c.jsonl").exists()


def test_auto_names_every_format_when_it_cannot_tell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "notes.txt"
    source.write_text("http_interactions are in here somewhere\n")
    assert main(["import", "auto", str(source)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"reel import auto: {source}: cannot tell its format: name it, "
        f"`reel import FORMAT {source}` (FORMAT one of: "
    )
    named = err.rsplit("one of: ", 1)[1].rstrip(")\n").split(", ")
    assert {"httprr", "ruby-vcr", "vcr"} <= set(named)
