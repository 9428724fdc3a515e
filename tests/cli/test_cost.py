"""``reel cost``: totals by provider and model; unknown costs apart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reel_bindings.cli import main
from reel_core import PRICES_CHECKED, RecordedRequest, RecordedResponse

from .helpers import DEMO, chat_body, interaction, write


def test_totals_by_provider_and_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", str(DEMO)]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].split() == [
        "provider", "model", "calls", "tokens", "in", "tokens", "out", "cached", "USD",
    ]  # fmt: skip
    assert lines[1].split() == ["anthropic", "claude-sonnet-4-6", "2", "8", "14", "0", "$0.000234"]
    assert lines[4].split() == ["total", "6", "24", "42", "0", "$0.000281"]
    assert lines[6] == "unknown cost: 1 call NOT counted in the total above"
    assert lines[8].split()[:5] == ["openai", "gpt-4o-mini", "1", "-", "-"]
    assert "no token usage in the stream" in lines[8]
    assert f"prices checked {PRICES_CHECKED}" in captured.err


def test_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", str(DEMO), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"files", "groups", "unknown", "total", "prices_checked", "skipped_lines"}
    assert data["groups"][0] == {
        "provider": "anthropic",
        "model": "claude-sonnet-4-6",
        "calls": 2,
        "tokens_in": 8,
        "tokens_out": 14,
        "tokens_cached": 0,
        "usd": 0.000234,
    }
    assert data["total"] == {
        "calls": 6,
        "tokens_in": 24,
        "tokens_out": 42,
        "tokens_cached": 0,
        "usd": 0.000281,
        "unknown_calls": 1,
    }
    assert data["unknown"] == [
        {
            "provider": "openai",
            "model": "gpt-4o-mini",
            "calls": 1,
            "tokens_in": None,
            "tokens_out": None,
            "tokens_cached": None,
            "reasons": {
                "no token usage in the stream (sent without stream_options.include_usage?)": 1
            },
        }
    ]


def test_unknown_prices_are_flagged_never_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = b'{"model":"my-llm","usage":{"prompt_tokens":100,"completion_tokens":10}}'
    mine = interaction(
        RecordedRequest("POST", "/v1/chat/completions", body=chat_body(model="my-llm")),
        RecordedResponse(200, body=body),
    )
    error = interaction(
        RecordedRequest("POST", "/v1/chat/completions", body=chat_body("x")),
        RecordedResponse(429, body=b'{"error":{"message":"slow down"}}'),
    )
    priced = interaction(
        response=RecordedResponse(
            200,
            body=b'{"model":"gpt-4o-mini","usage":{"prompt_tokens":1000,"completion_tokens":0}}',
        )
    )
    path = write(tmp_path / "c.jsonl", mine, error, priced)
    assert main(["cost", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["total"]["usd"] == 0.00015
    assert data["total"]["unknown_calls"] == 2
    reasons = {g["model"]: g["reasons"] for g in data["unknown"]}
    assert reasons["my-llm"] == {
        f"no price for my-llm (Reel's price table, checked {PRICES_CHECKED})": 1
    }
    assert reasons["gpt-4o-mini"] == {"an error response (429) reporting no token usage": 1}
    mine_group = next(g for g in data["unknown"] if g["model"] == "my-llm")
    assert (mine_group["tokens_in"], mine_group["tokens_out"]) == (100, 10)


def test_several_files_add_up(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(DEMO.read_bytes())
    assert main(["cost", str(DEMO), str(copy), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["total"]["calls"] == 12
    assert data["total"]["usd"] == 0.000562
    assert data["total"]["unknown_calls"] == 2


def test_an_empty_cassette(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "empty.jsonl")
    assert main(["cost", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].split() == ["total", "0", "-", "-", "-", "$0"]


def test_a_websocket_session_without_meta_is_read_from_its_messages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from reel_core import Interaction, WebSocketLog, WebSocketMessage

    done = {
        "type": "response.done",
        "response": {"usage": {"input_tokens": 7, "output_tokens": 3}},
    }
    session = Interaction(
        "sha256:" + "cd" * 32,
        "cdcdcdcdcdcd",
        RecordedRequest("GET", "/v1/realtime", (("model", "gpt-realtime"),)),
        RecordedResponse(101),
        provider="openai",
        endpoint="GET /v1/realtime",
        websocket=WebSocketLog((WebSocketMessage("server", 5.0, json.dumps(done).encode()),) * 2),
    )
    path = write(tmp_path / "ws.jsonl", session)
    assert main(["cost", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (row,) = data["groups"] + data["unknown"]
    assert (row["model"], row["tokens_in"], row["tokens_out"]) == ("gpt-realtime", 14, 6)
    assert main(["inspect", str(path)]) == 0
    assert "gpt-realtime" in capsys.readouterr().out


def _realtime_session(ident: str, with_meta: bool) -> object:
    """A gpt-realtime session whose turn used audio both ways: its line
    with the recorder's meta, or without meta (read from the messages)."""
    from reel_core import (
        Interaction,
        Redactor,
        Request,
        WebSocketRecorder,
    )

    usage = {
        "input_tokens": 3000,
        "output_tokens": 700,
        "input_token_details": {
            "text_tokens": 1000,
            "audio_tokens": 2000,
            "cached_tokens": 500,
            "cached_tokens_details": {"text_tokens": 300, "audio_tokens": 200},
        },
        "output_token_details": {"text_tokens": 300, "audio_tokens": 400},
    }
    done = {"type": "response.done", "response": {"usage": usage}}
    recorder = WebSocketRecorder(
        Request("GET", "/v1/realtime?model=gpt-realtime", ()), Redactor(), opened=0.0
    )
    recorder.server_message(json.dumps(done).encode(), False, 0.5)
    recorder.closed(1000, "", "client", 1.0)
    upgrade = Interaction(
        "sha256:" + ident * 32,
        ident * 6,
        RecordedRequest("GET", "/v1/realtime", (("model", "gpt-realtime"),)),
        RecordedResponse(101),
        provider="openai",
        endpoint="GET /v1/realtime",
    )
    session = recorder.finish(upgrade)
    if not with_meta:
        from dataclasses import replace

        session = replace(session, meta={})
    return session


#: gpt-realtime: text $4 / $0.40 cached / $16 out, audio $32 / $0.40 / $64.
REALTIME_USD = (700 * 4.00 + 1800 * 32.00 + 500 * 0.40 + 300 * 16.00 + 400 * 64.00) / 1e6


@pytest.mark.parametrize("with_meta", [True, False])
def test_realtime_sessions_price_audio_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], with_meta: bool
) -> None:
    session = _realtime_session("ef", with_meta)
    assert isinstance(session, type(interaction()))
    if with_meta:
        assert session.meta["tokens_audio_in"] == 2000
        assert session.meta["cost_usd"] == pytest.approx(REALTIME_USD)
    path = write(tmp_path / "ws.jsonl", session, interaction())
    assert main(["cost", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {row["model"]: row for row in data["groups"]}
    realtime = rows["gpt-realtime"]
    assert realtime["usd"] == pytest.approx(REALTIME_USD)
    assert (realtime["tokens_audio_in"], realtime["tokens_audio_out"]) == (2000, 400)
    assert all("tokens_audio_in" not in row for m, row in rows.items() if m != "gpt-realtime")
    assert data["total"]["tokens_audio_in"] == 2000
    assert main(["inspect", str(path), "--id", session.id]) == 0
    out = capsys.readouterr().out
    assert "cached 500 (audio: in 2000, out 400)" in out
    assert main(["inspect", str(path), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    rows_json = listed["interactions"] if isinstance(listed, dict) else listed
    by_id = {r["id"]: r for r in rows_json}
    assert by_id[session.id]["tokens_audio_out"] == 400
    assert "tokens_audio_in" not in by_id[interaction().id]


def test_tool_calls_are_not_priced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A cassette of an agent run: its tool calls' lines (no tokens) are
    neither counted as calls nor flagged as of unknown cost."""
    line = (
        b'{"key":"sha256:' + b"ab" * 32 + b'","id":"ab","ts":null,"call":{"name":"t",'
        b'"kind":"tool","args":{}},"result":{"json":1},"meta":{"total_ms":1.0}}\n'
    )
    copy = write(tmp_path / "agent.jsonl", line)
    copy.write_bytes(copy.read_bytes() + b"".join(DEMO.read_bytes().splitlines(True)[1:]))
    assert main(["cost", str(copy), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["total"]["calls"] == 6
    assert data["total"]["unknown_calls"] == 1
