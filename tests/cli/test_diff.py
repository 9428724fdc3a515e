"""``reel diff A B``: added, removed, changed; exit 1 when they differ."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from reel_bindings.cli import main
from reel_core import RecordedRequest, RecordedResponse

from .helpers import DEMO, anthropic_stream, chat_body, chat_request, interaction, write


def diff_json(capsys: pytest.CaptureFixture[str], a: Path, b: Path, code: int) -> Any:
    assert main(["diff", str(a), str(b), "--json"]) == code
    return json.loads(capsys.readouterr().out)


def sse(frames: list[bytes], step: float = 10.0, start: float = 0.0) -> RecordedResponse:
    timed = tuple((start + step * i, f) for i, f in enumerate(frames))
    return RecordedResponse(
        200,
        (("content-type", "text/event-stream"),),
        stream="sse",
        frames=timed,
        end_ms=timed[-1][0] + 1,
    )


def test_a_cassette_is_the_same_as_itself(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", str(DEMO), str(DEMO)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "same: 7 interactions"
    data = diff_json(capsys, DEMO, DEMO, 0)
    assert data == {
        "a": str(DEMO),
        "b": str(DEMO),
        "same": 7,
        "added": [],
        "removed": [],
        "changed": [],
        "differ": False,
    }


def test_added_removed_and_a_changed_response(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kept = interaction(chat_request("kept"))
    gone = interaction(chat_request("gone"))
    new = interaction(chat_request("new"))
    old_answer = interaction(
        chat_request("q"), RecordedResponse(200, body=b'{"choices":[{"text":"yes"}],"n":1}')
    )
    new_answer = replace(
        old_answer, response=RecordedResponse(500, body=b'{"choices":[{"text":"no"}]}')
    )
    a = write(tmp_path / "a.jsonl", kept, gone, old_answer)
    b = write(tmp_path / "b.jsonl", new, kept, new_answer)
    assert main(["diff", str(a), str(b)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"--- {a} (3 interactions)"
    assert out[1] == f"+++ {b} (3 interactions)"
    assert out[2] == f"- {gone.id}  POST /v1/chat/completions  (200)"
    assert out[3] == f"+ {new.id}  POST /v1/chat/completions  (200)"
    assert out[4] == f"~ {old_answer.id}  POST /v1/chat/completions  response changed"
    assert out[5:] == [
        "    status: 200 -> 500",
        '    body.choices[0].text: "yes" -> "no"',
        "    body.n: removed (was 1)",
        "1 added, 1 removed, 1 changed, 1 same",
    ]
    data = diff_json(capsys, a, b, 1)
    assert [e["id"] for e in data["added"]] == [new.id]
    assert [e["id"] for e in data["removed"]] == [gone.id]
    (change,) = data["changed"]
    assert change["paired_by"] == "key"
    assert change["request"] == []
    assert change["response"]["status"] == [200, 500]
    assert change["response"]["body"] == [
        {"path": "body.choices[0].text", "kind": "changed", "a": "yes", "b": "no"},
        {"path": "body.n", "kind": "removed", "a": 1},
    ]


def test_a_request_edited_under_the_same_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = interaction(chat_request("Say hello"), id="abc123abc123")
    after = interaction(
        RecordedRequest(
            "POST", "/v1/chat/completions", body=chat_body("Say goodbye", temperature=0)
        ),
        id="abc123abc123",
    )
    a = write(tmp_path / "a.jsonl", before)
    b = write(tmp_path / "b.jsonl", after)
    assert main(["diff", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "~ abc123abc123  POST /v1/chat/completions  request changed" in out
    assert '    request messages[0].content: "Say hello" -> "Say goodbye"' in out
    assert "    request temperature: added 0" in out
    (change,) = diff_json(capsys, a, b, 1)["changed"]
    assert change["paired_by"] == "id"
    assert change["request"] == [
        {"path": "messages[0].content", "kind": "changed", "a": "Say hello", "b": "Say goodbye"},
        {"path": "temperature", "kind": "added", "b": 0},
    ]


def test_streams_compare_by_what_matters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    request = RecordedRequest("POST", "/v1/messages", body=b'{"model":"claude","stream":true}')
    before = interaction(request, sse(anthropic_stream("Hello")), provider="anthropic")
    after = replace(
        before,
        response=sse(
            anthropic_stream("Hello!", tool=("lookup", '{"q": 1}')), step=10.0, start=15.0
        ),
    )
    a = write(tmp_path / "a.jsonl", before)
    b = write(tmp_path / "b.jsonl", after)
    assert main(["diff", str(a), str(b)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[2:] == [
        f"~ {before.id}  POST /v1/messages  response changed",
        "    frames: 5 -> 7",
        '    text: "Hello" -> "Hello!"',
        '    tool calls: none -> lookup({"q": 1})',
        "    ttft: 20 ms -> 35 ms (+15.0 ms)",
        "0 added, 0 removed, 1 changed, 0 same",
    ]
    (change,) = diff_json(capsys, a, b, 1)["changed"]
    assert change["response"] == {
        "frames": [5, 7],
        "text": ["Hello", "Hello!"],
        "tool_calls": [[], [["lookup", '{"q": 1}']]],
        "ttft_ms": [20.0, 35.0],
    }


def test_timing_alone_is_no_difference(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    request = RecordedRequest("POST", "/v1/messages", body=b'{"model":"claude","stream":true}')
    before = interaction(request, sse(anthropic_stream("Hi")), provider="anthropic")
    slower = replace(before, response=sse(anthropic_stream("Hi"), step=50.0))
    a = write(tmp_path / "a.jsonl", before)
    b = write(tmp_path / "b.jsonl", slower)
    assert main(["diff", str(a), str(b)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "same: 1 interaction"


def test_repeated_requests_pair_in_recorded_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = interaction(response=RecordedResponse(200, body=b'{"n":1}'))
    second = replace(first, id=first.id + "-2", response=RecordedResponse(200, body=b'{"n":2}'))
    a = write(tmp_path / "a.jsonl", first, second)
    b = write(tmp_path / "b.jsonl", first)
    data = diff_json(capsys, a, b, 1)
    assert data["same"] == 1
    assert [e["id"] for e in data["removed"]] == [second.id]
