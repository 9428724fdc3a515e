"""``reel import llamastack``: a Llama Stack recording becomes a Reel cassette."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reel_bindings.cli import main
from reel_core import Cassette
from tests.corpus import CORPUS

RECORDING = {
    "test_id": "tests/integration/inference/test_x.py::test_chat",
    "request": {
        "method": "POST",
        "url": "https://api.openai.com/v1/v1/chat/completions",
        "headers": {},
        "body": {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
        "endpoint": "/v1/chat/completions",
        "model": "gpt-4o",
    },
    "response": {
        "body": {
            "__type__": "openai.types.chat.chat_completion.ChatCompletion",
            "__data__": {"id": "rec-1", "choices": [{"message": {"content": "hello"}}]},
        },
        "is_streaming": False,
    },
    "id_normalization_mapping": {},
}


@pytest.mark.parametrize("command", ["llamastack", "auto"])
def test_a_recording_imports(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "abc123.json"
    source.write_text(json.dumps(RECORDING))
    out = tmp_path / "out.jsonl"
    assert main(["import", command, str(source), "-o", str(out)]) == 0
    found = " (llamastack)" if command == "auto" else ""
    assert capsys.readouterr().out == (
        f"{source} -> {out}: 1 of 1 interaction{found}\n"
        "  interaction 0: the recorder joined the SDK's base URL and /v1/chat/completions: "
        "the path /v1/v1/chat/completions is stored as /v1/chat/completions\n"
    )
    (ix,) = Cassette.loads(out.read_bytes(), strict=True)
    assert ix.request.path == "/v1/chat/completions"
    assert ix.meta["imported"] == "llama-stack"
    assert json.loads(ix.response.body) == RECORDING["response"]["body"]["__data__"]  # type: ignore[index]


def test_a_vertex_recording_is_not_converted_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vertex = json.loads(json.dumps(RECORDING))
    vertex["request"]["url"] = "vertexai:///generate_content"
    source = tmp_path / "v.json"
    source.write_text(json.dumps(vertex))
    assert main(["import", "llamastack", str(source)]) == 1
    assert capsys.readouterr().err.startswith(
        f"reel import llamastack: {source}: interaction 0: NOT converted: "
        "vertexai:///generate_content is an SDK call, not an HTTP request"
    )


def test_a_file_that_is_no_recording_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "x.json"
    source.write_text('{"log": {"entries": []}}')
    assert main(["import", "llamastack", str(source)]) == 2
    assert capsys.readouterr().err == (
        f'reel import llamastack: {source}: not a Llama Stack recording: no "request" and '
        '"response" objects at the top (found dict)\n'
    )
    assert not (tmp_path / "x.jsonl").exists()


INDEXED = CORPUS / "meta-llama__llama-stack" / "tests" / "integration" / "recordings"


@pytest.mark.skipif(not INDEXED.is_dir(), reason=f"no corpus at {INDEXED}")
def test_a_recordings_directory_with_its_index_imports_as_one_cassette(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Llama Stack's older layout: index.sqlite beside responses/*.json.
    The index is not read; every response file becomes one line."""
    out = tmp_path / "recordings.jsonl"
    files = sorted((INDEXED / "responses").glob("*.json"))
    assert main(["import", "auto", str(INDEXED), "-o", str(out)]) == 0
    report = capsys.readouterr().out
    assert report.startswith(f"{INDEXED} -> {out}: {len(files)} of {len(files)} interactions")
    assert "(llamastack)" in report
    loaded = Cassette.loads(out.read_bytes(), strict=True)
    assert len(loaded) == len(files)
