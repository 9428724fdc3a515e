"""``reel import nock``: nock recordings (Node.js) that then replay."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from reel_bindings.cli import main
from reel_core import Cassette, Config, Engine, Frame, Mode, Replay, Request, ResponseHead, Signal

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
ANSWER = b'{"id":"chatcmpl-1","choices":[{"message":{"content":"hello"}}]}'
PACKED = gzip.compress(ANSWER, mtime=0)
RECORDING = [
    {
        "scope": "https://api.openai.com:443",
        "method": "POST",
        "path": "/v1/chat/completions",
        "body": CHAT,
        "status": 200,
        "response": [PACKED[:12].hex(), PACKED[12:].hex()],
        "rawHeaders": ["Content-Type", "application/json", "Content-Encoding", "gzip"],
        "responseIsBinary": False,
    },
    {"scope": "https://api.openai.com:443", "path": "/v1/models", "status": "200"},
]


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


@pytest.mark.parametrize("fmt", ["nock", "auto"])
def test_a_recording_imports_and_replays(
    fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "chat.json"
    source.write_text(json.dumps(RECORDING, indent=4))
    out = tmp_path / "out.jsonl"
    assert main(["import", fmt, str(source), "-o", str(out)]) == 1  # one definition lacks a method
    captured = capsys.readouterr()
    by = " (nock)" if fmt == "auto" else ""
    assert captured.out == (
        f"{source} -> {out}: 1 of 2 interactions{by}\n"
        "  interaction 0: the request body was stored as parsed JSON: re-serialized compact "
        "(as JSON.stringify writes it), not necessarily the bytes sent\n"
    )
    assert captured.err == (
        f"reel import {fmt}: {source}: interaction 1: NOT converted: the definition has no "
        "method: nock could not replay it\n"
    )
    cassette = Cassette.loads(out.read_bytes(), strict=True)
    (ix,) = cassette
    assert (ix.provider, ix.meta["imported"]) == ("openai", "nock")
    request = Request("POST", "/v1/chat/completions", (), json.dumps(CHAT).encode())
    assert replay(cassette, request) == (200, ANSWER)


def test_a_file_that_is_no_nock_recording_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "chat.json"
    source.write_text('{"scope": "https://api.openai.com:443", "method": "GET"}')
    assert main(["import", "nock", str(source)]) == 2
    assert capsys.readouterr().err == (
        f"reel import nock: {source}: not a nock recording: the file holds a JSON object, not "
        "an array of definitions\n"
    )
    assert not (tmp_path / "chat.jsonl").exists()
