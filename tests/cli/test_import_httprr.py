"""``reel import httprr``: Go httprr traces (plain or gzip) that then replay."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from reel_bindings.cli import main
from reel_core import Cassette, Config, Engine, Frame, Mode, Replay, Request, ResponseHead, Signal

CHAT = b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}'
ANSWER = b'{"choices":[{"message":{"content":"hello"}}]}'
REQUEST = (
    b"POST https://api.openai.com/v1/chat/completions HTTP/1.1\r\nHost: api.openai.com\r\n"
    b"Content-Length: %d\r\nContent-Type: application/json\r\n\r\n%s" % (len(CHAT), CHAT)
)
RESPONSE = (
    b"HTTP/2.0 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
)
RESPONSE += b"%x\r\n%s\r\n0\r\n\r\n" % (len(ANSWER), ANSWER)
TRACE = b"httprr trace v1\n%d %d\n%s%s" % (len(REQUEST), len(RESPONSE), REQUEST, RESPONSE)


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


@pytest.mark.parametrize(
    ("fmt", "name", "data"),
    [
        ("httprr", "TestChat.httprr", TRACE),
        ("auto", "TestChat.httprr", TRACE),
        ("auto", "TestChat.httprr.gz", gzip.compress(TRACE, mtime=0)),
    ],
)
def test_a_trace_imports_and_replays(
    fmt: str, name: str, data: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / name
    source.write_bytes(data)
    out = tmp_path / "out.jsonl"
    assert main(["import", fmt, str(source), "-o", str(out)]) == 0
    by = " (httprr)" if fmt == "auto" else ""
    assert capsys.readouterr().out == f"{source} -> {out}: 1 of 1 interaction{by}\n"
    _, line = (json.loads(x) for x in out.read_bytes().splitlines())
    assert line["meta"]["imported"] == "httprr"
    assert line["provider"] == "openai"
    cassette = Cassette.loads(out.read_bytes(), strict=True)
    request = Request("POST", "/v1/chat/completions", (), CHAT)
    assert replay(cassette, request) == (200, ANSWER)


def test_a_wrong_file_exits_2_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "t.httprr"
    source.write_bytes(b"httprr trace v0\n0 0\n")
    assert main(["import", "httprr", str(source)]) == 2
    assert capsys.readouterr().err == (
        f"reel import httprr: {source}: not an httprr trace: the first line is "
        "b'httprr trace v0', not b'httprr trace v1'\n"
    )
    assert not (tmp_path / "t.jsonl").exists()


def test_a_corrupt_record_is_reported_and_the_rest_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "t.httprr"
    source.write_bytes(TRACE + b"7 x\n")
    assert main(["import", "httprr", str(source)]) == 1
    captured = capsys.readouterr()
    assert captured.out == f"{source} -> {tmp_path / 't.jsonl'}: 1 of 2 interactions\n"
    assert captured.err == (
        f"reel import httprr: {source}: interaction 1: NOT converted: the trace is corrupt at "
        f"byte {len(TRACE)}: b'7 x' is no 'N M' record line; the rest of the file is not read\n"
    )
