"""``reel inspect``: the table, filters, --json, and one interaction in full."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reel_bindings.cli import main
from reel_core import RecordedRequest, RecordedResponse, StreamCut

from .helpers import DEMO, anthropic_stream, chat_body, interaction, openai_stream, record, write


def demo_line(ident: str) -> dict[str, Any]:
    """A line of the shipped demo cassette (its timings change when it is
    re-recorded, so tests read them instead of hard-coding them)."""
    for raw in DEMO.read_bytes().splitlines()[1:]:
        line: dict[str, Any] = json.loads(raw)
        if line["id"] == ident:
            return line
    raise AssertionError(f"no {ident} in the demo cassette")


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main([*argv, "--json"]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def test_one_row_per_interaction(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(DEMO)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "id", "provider", "endpoint", "model", "status", "stream",
        "ttft", "ms", "total", "ms", "in", "out", "cost",
    ]  # fmt: skip
    rows = {line.split()[0]: line.split() for line in lines[1:-1]}
    assert len(rows) == 7
    # a whole body: no frames, no ttft; cost from the line's meta
    assert rows["f95b67df3fce"][6:8] == ["-", "-"]
    assert rows["f95b67df3fce"][-1] == "$0.0000048"
    # an OpenAI stream without usage: 10 frames, cost unknown, never 0
    ttft = demo_line("3d05d62af714")["meta"]["ttft_ms"]
    assert rows["3d05d62af714"][6:8] == ["10", f"{ttft:.0f}"]
    assert rows["3d05d62af714"][-3:] == ["-", "-", "?"]
    assert lines[-1] == "7 interactions, $0.000281 + 1 of unknown cost (?)"


def test_json_rows(capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(capsys, "inspect", str(DEMO))
    assert data["file"] == str(DEMO)
    assert data["skipped"] == []
    first, stream = data["interactions"][:2]
    assert set(first) == {
        "line", "id", "key", "provider", "endpoint", "model", "status", "stream", "frames",
        "messages",
        "cut", "ttfb_ms", "ttft_ms", "total_ms", "tokens_in", "tokens_out", "tokens_cached",
        "cost_usd", "cost_source",
    }  # fmt: skip
    assert first["line"] == 2
    assert (first["cost_usd"], first["cost_source"]) == (4.8e-06, "meta")
    ttft = demo_line("3d05d62af714")["meta"]["ttft_ms"]
    assert (stream["stream"], stream["frames"], stream["ttft_ms"]) == ("sse", 10, ttft)
    assert (stream["cost_usd"], stream["cost_source"]) == (None, None)


@pytest.mark.parametrize(
    ("flags", "ids"),
    [
        (["--provider", "ANTHROPIC"], ["78f1e8e6b27a", "fed99f2d1177"]),
        (["--model", "flash"], ["756906c66a1b", "19881d524cb6"]),
        (["--provider", "openai", "--grep", "responses"], ["e5172d3a877d"]),
        (["--grep", "FAKE REPLY"], []),  # an upper-case letter: case-sensitive
        (["--status", "2xx", "--grep", "stream"], ["3d05d62af714", "fed99f2d1177", "19881d524cb6"]),
    ],
)
def test_filters(flags: list[str], ids: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["inspect", str(DEMO), *flags, "--json"])
    got = [row["id"] for row in json.loads(capsys.readouterr().out)["interactions"]]
    assert got == ids
    assert code == (0 if ids else 1)


def test_no_match_exits_1_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(DEMO), "--status", "404"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("0 of 7 interactions")


def test_a_bad_status_filter(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(DEMO), "--status", "ok"]) == 2
    assert "--status 'ok': give a status code (200) or a class (4xx)" in capsys.readouterr().err


def test_cost_is_computed_when_the_line_has_no_meta(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    usage = b'{"model":"gpt-4o-mini","usage":{"prompt_tokens":1000,"completion_tokens":500}}'
    priced = interaction(response=RecordedResponse(200, body=usage))
    unknown = interaction(
        RecordedRequest("POST", "/v1/chat/completions", body=chat_body(model="my-llm")),
        RecordedResponse(
            200, body=b'{"model":"my-llm","usage":{"prompt_tokens":1,"completion_tokens":1}}'
        ),
    )
    path = write(tmp_path / "c.jsonl", priced, unknown)
    rows = run_json(capsys, "inspect", str(path))["interactions"]
    assert (rows[0]["cost_usd"], rows[0]["cost_source"]) == (0.00045, "computed")
    assert (rows[0]["tokens_in"], rows[0]["tokens_out"]) == (1000, 500)
    assert (rows[1]["model"], rows[1]["cost_usd"]) == ("my-llm", None)


def test_bad_lines_are_skipped_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "c.jsonl", interaction(), b"{not json\n", b'{"key": 1}\n')
    assert main(["inspect", str(path)]) == 0
    captured = capsys.readouterr()
    assert "1 interaction, " in captured.out
    assert f"reel inspect: {path}:3: skipped: not a JSON line" in captured.err
    assert f"reel inspect: {path}:4: skipped: " in captured.err


def test_one_interaction_in_full(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(DEMO), "--id", "fed99"]) == 0
    out = capsys.readouterr().out
    assert "id        fed99f2d1177" in out
    assert "cost      $0.000117 (meta)" in out
    assert '--- request: POST /v1/messages\n{\n  "max_tokens": 256,' in out
    assert "--- response: 200 OK  (sse stream, 13 frames)" in out
    assert 'text: "Fake reply to: Say hello to Reel."' in out
    timeline = out.split("--- timeline\n")[1].splitlines()
    assert timeline[0].split() == ["offset", "ms", "gap", "ms", "text"]
    response = demo_line("fed99f2d1177")["response"]
    offsets = [at for at, _ in response["frames"]]
    assert timeline[1].split() == [f"{offsets[0]:.1f}", f"+{offsets[0]:.1f}", "[message_start]"]
    gap = offsets[3] - offsets[2]
    assert timeline[4].split() == [f"{offsets[3]:.1f}", f"+{gap:.1f}", '"Fake"']
    assert timeline[-1].split() == [f"{response['end']['at']:.1f}", "end"]


def test_one_interaction_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(capsys, "inspect", str(DEMO), "--id", "3d05d62af714")
    assert data["request"]["body"]["json"]["stream"] is True
    assert data["response"]["status"] == 200
    assert data["text"] == "Fake reply to: Say hello to Reel."
    assert data["tool_calls"] == []
    frames = data["timeline"]
    assert len(frames) == 10
    offsets = [at for at, _ in demo_line("3d05d62af714")["response"]["frames"]]
    assert frames[1] == {
        "frame": 1, "offset_ms": offsets[1], "gap_ms": round(offsets[1] - offsets[0], 3),
        "bytes": frames[1]["bytes"], "event": None, "kind": "delta", "text": "Fake",
    }  # fmt: skip
    assert frames[-1]["text"] == "[DONE]"


def test_an_unknown_or_ambiguous_id(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(DEMO), "--id", "zzz"]) == 2
    assert f"no interaction 'zzz' in {DEMO}: `reel inspect {DEMO}` lists the ids" in (
        capsys.readouterr().err
    )
    assert main(["inspect", str(DEMO), "--id", "78"]) == 0
    assert "id        78f1e8e6b27a" in capsys.readouterr().out
    assert main(["inspect", str(DEMO), "--id", "7"]) == 2
    assert "'7' is ambiguous" in capsys.readouterr().err


def test_a_recorded_stream_with_a_tool_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    frames = anthropic_stream("Checking.", tool=("get_weather", '{"city": "Paris"}'))
    ix = record(
        "POST",
        "/v1/messages",
        b'{"model":"claude-sonnet-4-5","stream":true,"messages":[]}',
        200,
        [("content-type", "text/event-stream")],
        [(0.01 * (i + 1), f) for i, f in enumerate(frames)],
        host="api.anthropic.com",
    )
    path = write(tmp_path / "tool.jsonl", ix)
    assert main(["inspect", str(path), "--id", ix.id]) == 0
    out = capsys.readouterr().out
    assert 'tool call: get_weather({"city": "Paris"})' in out
    assert '"get_weather({\\"city\\": \\"Paris\\"}"' not in out
    assert "  +10.0  " in out
    data = run_json(capsys, "inspect", str(path), "--id", ix.id)
    assert data["tool_calls"] == [{"name": "get_weather", "arguments": '{"city": "Paris"}'}]
    assert data["text"] == "Checking."
    assert data["ttft_ms"] == 30.0


def test_a_cut_stream_shows_where_it_broke(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    frames = tuple((10.0 * i, f) for i, f in enumerate(openai_stream(["a", "b"])[:2]))
    response = RecordedResponse(
        200, stream="sse", frames=frames, cut=StreamCut(25.0, "reset", "peer reset")
    )
    path = write(tmp_path / "cut.jsonl", interaction(response=response, id="cut1"))
    assert main(["inspect", str(path)]) == 0
    assert "200!" in capsys.readouterr().out
    assert main(["inspect", str(path), "--id", "cut1"]) == 0
    assert "25.0          CUT: reset peer reset" in capsys.readouterr().out
