"""``reel import reyn``: Reyn LLMReplay fixtures, whose requests are rebuilt,
then replayed by the official OpenAI SDK with the match settings the
migration page recommends (the messages ignored)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reel_bindings.cli import main
from reel_bindings.sdk import openai_client
from reel_core import MatchConfig, MatchMode, MissError


def fixture(preview: str, answer: str, model: str) -> dict[str, Any]:
    return {
        "key": "0f" * 32,
        "model": model,
        "prompt_preview": preview,
        "response": {
            "id": "chatcmpl-" + answer,
            "created": 1755520978,
            "model": model,
            "object": "chat.completion",
            "choices": [
                {
                    "finish_reason": "stop",
                    "index": 0,
                    "message": {"content": answer, "role": "assistant", "tool_calls": None},
                }
            ],
            "usage": {"completion_tokens": 1, "prompt_tokens": 9, "total_tokens": 10},
        },
    }


FIXTURES = "".join(
    json.dumps(line) + "\n"
    for line in (
        fixture("What is 2+2?", "4", "gpt-4o-mini"),
        fixture("And times 3?", "12", "gpt-4o-mini"),
    )
)


def test_fixtures_import_with_what_was_assumed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "llm_fixtures.jsonl"
    source.write_text(FIXTURES + "not json\n")
    out = tmp_path / "reel.jsonl"
    assert main(["import", "reyn", str(source), "-o", str(out)]) == 1
    captured = capsys.readouterr()
    assert captured.err == (
        f"reel import reyn: {source}: interaction 2: NOT converted: line 3: not JSON: "
        "Expecting value: line 1 column 1 (char 0)\n"
    )
    lines = captured.out.splitlines()
    assert lines[0] == f"{source} -> {out}: 2 of 3 interactions"
    assert lines[1].startswith(
        "  interaction 0: Reyn stores no HTTP request: rebuilt as POST /v1/chat/completions"
    )
    assert len(lines) == 5  # two notes per fixture: the request rebuilt, the response re-serialized
    first = out.read_bytes()
    assert main(["import", "reyn", str(source), "-o", str(out), "--force"]) == 1
    assert out.read_bytes() == first  # the same source gives byte-identical output


def test_the_sdk_replays_the_import_with_the_messages_ignored(tmp_path: Path) -> None:
    source = tmp_path / "llm_fixtures.jsonl"
    source.write_text(FIXTURES)
    out = tmp_path / "reel.jsonl"
    assert main(["import", "auto", str(source), "-o", str(out)]) == 0
    system = {"role": "system", "content": "You are a calculator. Answer with a number."}
    ignoring = MatchConfig(MatchMode.IGNORE_FIELDS, ("messages",))
    with openai_client(out, match=ignoring, timing="fast", max_retries=0) as client:
        answers = [
            client.chat.completions.create(
                model="gpt-4o-mini", messages=[system, {"role": "user", "content": prompt}]
            )
            .choices[0]
            .message.content
            for prompt in ("What is 2+2? Think first.", "And times 3?")
        ]
    assert answers == ["4", "12"]  # in recorded order
    with (
        openai_client(out, timing="fast", strict=True, max_retries=0) as client,
        pytest.raises(MissError, match="differs at messages"),
    ):
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[system, {"role": "user", "content": "What is 2+2?"}]
        )


def test_a_reel_cassette_is_not_taken_for_reyn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "llm_fixtures.jsonl"
    source.write_text(FIXTURES)
    cassette = tmp_path / "reel.jsonl"
    assert main(["import", "reyn", str(source), "-o", str(cassette)]) == 0
    capsys.readouterr()
    assert main(["import", "auto", str(cassette), "-o", str(tmp_path / "again.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"reel import auto: {cassette}: cannot tell its format")
    assert main(["import", "reyn", str(cassette), "-o", str(tmp_path / "again.jsonl")]) == 2
    assert capsys.readouterr().err == (
        f"reel import reyn: {cassette}: not a Reyn fixture file: it is a Reel cassette already "
        "(its first line is _meta): nothing to import\n"
    )


def test_a_file_that_is_not_jsonl_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "fixtures.jsonl"
    source.write_text("interactions:\n- request: {}\n")
    out = tmp_path / "reel.jsonl"
    assert main(["import", "reyn", str(source), "-o", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"reel import reyn: {source}: not a Reyn fixture file: not JSONL: line 1: not JSON: "
        "Expecting value: line 1 column 1 (char 0)\n"
    )
    assert not out.exists()
