"""WebSocket sessions in ``reel diff`` and ``reel export``: compared message
by message; written to HAR the way DevTools write them (and read back the
same); refused by the vcrpy exporter in one line, the rest written."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from reel_bindings.cli import main
from reel_core import (
    Interaction,
    RecordedRequest,
    RecordedResponse,
    Redactor,
    Request,
    WebSocketClose,
    WebSocketRecorder,
)

from .helpers import interaction, write

TS = "2026-05-04T10:20:30.125Z"


def session(text: str = "Say hello", *, gap: float = 0.02, ident: str = "ab") -> Interaction:
    """A recorded OpenAI Realtime session: text both ways, a binary audio
    chunk, the usage, and the client's close."""
    recorder = WebSocketRecorder(
        Request("GET", "/v1/realtime?model=gpt-realtime", ()), Redactor(), opened=0.0
    )
    item = {"type": "conversation.item.create", "item": {"content": [{"text": text}]}}
    recorder.server_message(b'{"type": "session.created", "event_id": "e1"}', False, 0.001)
    recorder.client_message(json.dumps(item).encode(), False, 0.010)
    recorder.server_message(b"\x00\x01\xfe\xffaudio", True, 0.010 + gap)
    usage = {"input_tokens": 12, "output_tokens": 4}
    done = {"type": "response.done", "response": {"usage": usage}}
    recorder.server_message(json.dumps(done).encode(), False, 0.010 + 2 * gap)
    recorder.closed(1000, "bye", "client", 0.2)
    upgrade = Interaction(
        "sha256:" + ident * 32,
        ident * 6,
        RecordedRequest("GET", "/v1/realtime", (("model", "gpt-realtime"),)),
        RecordedResponse(101, (("x-request-id", "req_1"),)),
        timestamp=TS,
        provider="openai",
        endpoint="GET /v1/realtime",
    )
    return recorder.finish(upgrade)


def test_har_export_writes_devtools_websocket_messages_and_reads_them_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = session()
    source = write(tmp_path / "rt.jsonl", ws, interaction())
    assert main(["export", "har", str(source)]) == 0
    har = json.loads((tmp_path / "rt.har").read_text())
    entry, plain = har["log"]["entries"]
    assert entry["_resourceType"] == "websocket"
    assert entry["response"]["status"] == 101
    assert "_webSocketMessages" not in plain
    messages = entry["_webSocketMessages"]
    assert [(m["type"], m["opcode"]) for m in messages] == [
        ("receive", 1),
        ("send", 1),
        ("receive", 2),
        ("receive", 1),
    ]
    started = 1777890030.125  # TS in epoch seconds
    assert messages[1]["time"] == pytest.approx(started + 0.010)
    assert messages[2]["data"] == "AAH+/2F1ZGlv"  # base64, as DevTools write binary frames
    assert json.loads(messages[1]["data"])["item"]["content"][0]["text"] == "Say hello"
    assert entry["_reel"]["websocket_close"] == {
        "code": 1000,
        "reason": "bye",
        "by": "client",
        "at_ms": 200.0,
    }
    capsys.readouterr()
    back = tmp_path / "back.jsonl"
    assert main(["import", "har", str(tmp_path / "rt.har"), "-o", str(back)]) == 0
    lines = [json.loads(line) for line in back.read_text().splitlines()[1:]]
    again = [line for line in lines if line["response"]["status"] == 101]
    assert len(again) == 1
    from reel_core import read_line

    imported = read_line(json.dumps(again[0]).encode())
    assert imported.websocket == ws.websocket  # the same session, message for message
    assert imported.request == ws.request  # so it replays under the same upgrade
    assert imported.meta["tokens_in"] == 12


def test_har_import_of_a_devtools_session_without_reels_extension(tmp_path: Path) -> None:
    """A HAR saved by Chrome: absolute times, no close kept, odd frames left out."""
    har = {
        "log": {
            "version": "1.2",
            "entries": [
                {
                    "startedDateTime": "2026-05-04T10:20:30.000Z",
                    "request": {
                        "method": "GET",
                        "url": "wss://api.openai.com/v1/realtime?model=gpt-realtime",
                        "headers": [{"name": "Upgrade", "value": "websocket"}],
                    },
                    "response": {"status": 101, "headers": [], "content": {"size": 0}},
                    "_resourceType": "websocket",
                    "_webSocketMessages": [
                        {"type": "receive", "time": 1777890030.5, "opcode": 1, "data": "{}"},
                        {"type": "send", "time": 1777890031.25, "opcode": 1, "data": "hi"},
                        {"type": "receive", "time": 1777890031.5, "opcode": 9, "data": ""},
                        {"type": "receive", "time": 1777890031.75, "opcode": 2, "data": "%%"},
                        "junk",
                    ],
                }
            ],
        }
    }
    source = tmp_path / "chrome.har"
    source.write_text(json.dumps(har))
    out = tmp_path / "chrome.jsonl"
    assert main(["import", "har", str(source), "-o", str(out)]) == 0
    from reel_core import read_line

    (line,) = out.read_bytes().splitlines()[1:]
    imported = read_line(line)
    assert imported.websocket is not None
    assert [(m.sender, m.at_ms, m.data) for m in imported.websocket.messages] == [
        ("server", 500.0, b"{}"),
        ("client", 1250.0, b"hi"),
    ]
    # DevTools keep no close: none is recorded (the client ends the session)
    assert imported.websocket.close is None


def test_vcr_export_refuses_websocket_sessions_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("yaml", reason="pip install pyyaml (in the test extra)")
    source = write(tmp_path / "rt.jsonl", session(), session(ident="cd"), interaction())
    assert main(["export", "vcr", str(source)]) == 0
    captured = capsys.readouterr()
    refusals = [line for line in captured.err.splitlines() if "WebSocket" in line]
    assert refusals == [
        f"reel export vcr: {tmp_path / 'rt.yaml'}: 2 WebSocket sessions: NOT exported "
        "(vcrpy has no WebSocket; the har format keeps them)"
    ]
    assert "1 interaction" in captured.out
    text = (tmp_path / "rt.yaml").read_text()
    assert "/v1/realtime" not in text
    assert "/v1/chat/completions" in text


def test_diff_compares_websocket_sessions_message_by_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = write(tmp_path / "a.jsonl", session())
    b = write(tmp_path / "b.jsonl", session("Say goodbye"))
    same_but_slower = write(tmp_path / "c.jsonl", session(gap=0.05))
    assert main(["diff", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "messages changed" in out
    assert 'websocket.messages[1].item.content[0].text: "Say hello" -> "Say goodbye"' in out, out
    # timing alone is no difference, but its drift is shown where there is one
    assert main(["diff", str(a), str(same_but_slower)]) == 0
    assert "same: 1 interaction" in capsys.readouterr().out
    fewer = session()
    assert fewer.websocket is not None
    fewer = replace(
        fewer,
        websocket=replace(
            fewer.websocket,
            messages=fewer.websocket.messages[:3],
            close=WebSocketClose(None, "", "upstream-dropped", 150.0),
        ),
    )
    c = write(tmp_path / "d.jsonl", fewer)
    assert main(["diff", str(a), str(c), "--json"]) == 1
    (change,) = json.loads(capsys.readouterr().out)["changed"]
    response = change["response"]
    assert response["messages"] == [4, 3]
    paths = [row["path"] for row in response["websocket_diff"]]
    assert paths == ["websocket.messages[3]", "websocket.close"]
    assert main(["diff", str(same_but_slower), str(b)]) == 1
    out = capsys.readouterr().out
    assert "websocket timing: message 3 at 110 ms -> 50 ms (-60.0 ms; the largest drift)" in out


def test_diff_binary_messages_by_digest_and_a_session_against_http(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = session()
    assert ws.websocket is not None
    changed = list(ws.websocket.messages)
    changed[2] = replace(changed[2], data=b"other audio")
    changed[0] = replace(changed[0], sender="client")
    other = replace(ws, websocket=replace(ws.websocket, messages=tuple(changed)))
    assert (
        main(
            ["diff", str(write(tmp_path / "a.jsonl", ws)), str(write(tmp_path / "b.jsonl", other))]
        )
        == 1
    )
    out = capsys.readouterr().out
    assert 'websocket.messages[0].from: "server" -> "client"' in out
    assert 'websocket.messages[2]: "binary sha256:' in out
    http = replace(ws, websocket=None)
    assert main(["diff", str(write(tmp_path / "h.jsonl", http)), str(tmp_path / "a.jsonl")]) == 1
    assert "kind: an HTTP exchange -> a WebSocket session" in capsys.readouterr().out


def test_inspect_lists_and_shows_a_websocket_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write(tmp_path / "rt.jsonl", session(), interaction())
    assert main(["inspect", str(source)]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert "ws 4" in listing[1]
    assert "GET /v1/realtime" in listing[1]
    assert "ws" not in listing[2].split("/v1/chat/completions")[1]
    assert main(["inspect", str(source), "--id", "abab"]) == 0
    out = capsys.readouterr().out
    session_part = out.split("--- websocket session (4 messages)\n")[1].splitlines()
    assert session_part[1].split() == [
        "1.0",
        "+1.0",
        "<-",
        '{"type":',
        '"session.created",',
        '"event_id":',
        '"e1"}',
    ]
    assert "->" in session_part[2]
    assert "Say hello" in session_part[2]
    assert "(9 bytes of binary data)" in session_part[3]
    assert session_part[5].split() == ["200.0", "CLOSE", "1000", '"bye"', "by", "client"]


def test_inspect_json_of_a_websocket_session_and_a_session_without_close(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = session()
    assert ws.websocket is not None
    dropped = replace(ws, websocket=replace(ws.websocket, close=None))
    source = write(tmp_path / "rt.jsonl", dropped, interaction())
    assert main(["inspect", str(source), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["interactions"]
    assert [r["messages"] for r in rows] == [4, None]
    assert main(["inspect", str(source), "--id", "abab", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    messages = shown["websocket"]["messages"]
    assert [(m["from"], m["binary"], m["bytes"]) for m in messages] == [
        ("server", False, 45),
        ("client", False, 82),
        ("server", True, 9),
        ("server", False, 90),
    ]
    assert messages[2]["text"] is None
    assert messages[3]["gap_ms"] == 20.0
    assert shown["websocket"]["close"] is None
    assert main(["inspect", str(source), "--id", "abab"]) == 0
    assert capsys.readouterr().out.rstrip().splitlines()[-2].strip() == "no close recorded"
    assert main(["inspect", str(source), "--id", interaction().id, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["websocket"] is None
