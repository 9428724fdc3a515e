"""``reel import agenttape``: AgentTape cassettes, their assets, and the way round them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import agenttape
import openai
import pytest
from agenttape import cli as agenttape_cli

from reel_bindings.cli import main
from reel_bindings.sdk import openai_client
from tests.fakes.upstream import FakeUpstreamThread
from tests.secrets import OPENAI_KEY

CHAT = {"endpoint": "chat.completions", "model": "gpt-4o-mini", "messages": [{"role": "user"}]}
ANSWER = {"id": "c-1", "object": "chat.completion", "choices": [{"message": {"content": "hé"}}]}
NOTE = (
    "  interaction 0: rebuilt as POST https://api.openai.com/v1/chat/completions (AgentTape "
    "keeps the SDK call, not its URL), the body from its arguments\n"
)


def tape(*interactions: dict[str, Any]) -> bytes:
    doc = {"version": "1", "meta": {"agenttape_version": "0.1.8"}, "interactions": interactions}
    return json.dumps(doc).encode()


LLM = {"index": 0, "kind": "llm", "request": CHAT, "response": ANSWER, "latency_ms": 3.0}
TOOL = {"index": 1, "kind": "tool", "boundary": "add", "request": {}, "response": 3}


@pytest.mark.parametrize("fmt", ["agenttape", "auto"])
def test_a_cassette_imports(fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "run.json"
    source.write_bytes(tape(LLM))
    out = tmp_path / "out.jsonl"
    assert main(["import", fmt, str(source), "-o", str(out)]) == 0
    by = " (agenttape)" if fmt == "auto" else ""
    assert capsys.readouterr().out == f"{source} -> {out}: 1 of 1 interaction{by}\n" + NOTE
    _, line = (json.loads(x) for x in out.read_bytes().splitlines())
    assert line["meta"]["imported"] == "agenttape"
    assert line["meta"]["ttfb_ms"] == 3.0
    assert line["request"]["body"]["json"] == {k: v for k, v in CHAT.items() if k != "endpoint"}
    assert line["response"]["body"]["json"] == ANSWER


def test_a_tool_call_is_a_call_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "run.json"
    source.write_bytes(tape(LLM, TOOL))
    assert main(["import", "agenttape", str(source)]) == 0
    captured = capsys.readouterr()
    assert captured.out == (
        f"{source} -> {tmp_path / 'run.jsonl'}: 2 of 2 interactions\n"
        + NOTE
        + "  interaction 1: the request AgentTape recorded is the call's arguments, whole\n"
    )
    assert captured.err == ""
    _, _, line = (json.loads(x) for x in (tmp_path / "run.jsonl").read_bytes().splitlines())
    assert line["call"] == {"name": "add", "kind": "tool", "args": {}}
    assert line["result"] == {"json": 3}
    assert line["meta"] == {"total_ms": None, "imported": "agenttape"}


def test_a_wrong_file_exits_2_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "run.json"
    source.write_bytes(b'{"version": "2", "interactions": []}')
    assert main(["import", "agenttape", str(source)]) == 2
    assert capsys.readouterr().err == (
        f"reel import agenttape: {source}: AgentTape cassette schema version '2': Reel reads "
        "version 1 only\n"
    )
    assert not (tmp_path / "run.jsonl").exists()


def test_assets_beside_the_cassette_are_named_and_agenttape_export_inlines_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """AgentTape moves a payload over 4 KiB to ``<name>.assets/``: the import
    names it and says how to inline it; the inlined export imports whole."""
    long = "Tell me about Reel. " * 300
    messages: Any = [{"role": "user", "content": long}]
    source = tmp_path / "long.yaml"
    with FakeUpstreamThread() as fake:
        client = openai.OpenAI(base_url=fake.url + "/v1", api_key=OPENAI_KEY, max_retries=0)
        with agenttape.use_cassette(source, mode="record"):
            live = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
    assert list((tmp_path / "long.assets").iterdir())
    monkeypatch.chdir(tmp_path)
    assert main(["import", "agenttape", "long.yaml"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "long.yaml: nothing converted, long.jsonl not written\n"
    assert captured.err.startswith(
        "reel import agenttape: long.yaml: interaction 0: NOT converted: its request refers "
        "to the asset sha256:"
    )
    assert captured.err.endswith(
        "which AgentTape wrote to long.assets/ beside the cassette: run `agenttape export "
        "long.yaml -o long.full.json` (it inlines assets) and import that file\n"
    )
    assert agenttape_cli.main(["export", "long.yaml", "-o", "long.full.json"]) == 0
    capsys.readouterr()
    assert main(["import", "agenttape", "long.full.json", "-o", "long.jsonl"]) == 0
    client = openai_client(
        tmp_path / "long.jsonl",
        mode="replay",
        timing="fast",
        base_url="http://127.0.0.1:9/v1",
        max_retries=0,
    )
    again = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
    assert again.model_dump() == live.model_dump()
