"""``reel inspect`` and ``reel view`` show a gRPC call's messages as JSON
through ``--proto-descriptor`` (its usage too), else as base64 with their
byte length and a note saying how to show them as JSON; a descriptor that
does not describe the method: bytes, with a note; a file that is no
descriptor set: exit 2 naming the flag.  Nothing on disk changes."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("google.protobuf", reason="descriptor sets need protobuf: the grpc extra")
pytest.importorskip("xai_sdk", reason="xAI's descriptors are xai-sdk's: the test extra")

from xai_sdk.proto.v6 import chat_pb2, usage_pb2

from reel_bindings.cli import main
from reel_bindings.view._data import view_data
from reel_bindings.view._live import source_of_bytes
from reel_core import Redactor, Request
from reel_core.tools import ProtoSchema, grpc_frame, record_exchange
from tests.protos import tiny_set, xai_set

from .helpers import write

PATH = "/xai_api.Chat/GetCompletion"
GRPC = ((b"content-type", b"application/grpc"),)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    request = chat_pb2.GetCompletionsRequest(
        model="grok-4",
        messages=[
            chat_pb2.Message(role=chat_pb2.ROLE_USER, content=[chat_pb2.Content(text="2+2?")])
        ],
    )
    answer = chat_pb2.GetChatCompletionResponse(
        id="r1",
        model="grok-4",
        outputs=[chat_pb2.CompletionOutput(message=chat_pb2.CompletionMessage(content="4"))],
        usage=usage_pb2.SamplingUsage(prompt_tokens=9, completion_tokens=1),
    )
    ix = record_exchange(
        Request(
            "POST", PATH, (*GRPC, (b"host", b"api.x.ai")), grpc_frame(request.SerializeToString())
        ),
        200,
        GRPC,
        [(0.05, grpc_frame(answer.SerializeToString()))],
        redactor=Redactor(),
        trailers=[(b"grpc-status", b"0")],
    )
    assert ix.meta.get("tokens_in") is None  # recorded without a descriptor: bytes
    xai, tiny = tmp_path / "xai.pb", tmp_path / "tiny.pb"
    xai.write_bytes(xai_set())
    tiny.write_bytes(tiny_set())
    return {
        "cassette": write(tmp_path / "c.jsonl", ix),
        "xai": xai,
        "tiny": tiny,
        "id": Path(ix.id),
    }


def shown(capsys: pytest.CaptureFixture[str], files: dict[str, Path], *flags: str) -> Any:
    argv = ["inspect", str(files["cassette"]), "--id", str(files["id"]), "--json", *flags]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_with_the_descriptor_the_messages_and_usage_read_as_json(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path]
) -> None:
    before = files["cassette"].read_bytes()
    out = shown(capsys, files, "--proto-descriptor", str(files["xai"]))
    grpc = out["grpc"]
    assert grpc["request"]["note"] is None
    (message,) = grpc["request"]["messages"]
    assert message["model"] == "grok-4"
    assert message["messages"][0]["content"] == [{"text": "2+2?"}]
    assert grpc["response"]["messages"][0]["usage"] == {"prompt_tokens": 9, "completion_tokens": 1}
    assert out["text"] == "4"
    assert (out["tokens_in"], out["tokens_out"]) == (9, 1)
    assert out["provider"] == "xai"
    assert files["cassette"].read_bytes() == before  # shown, never written


def test_without_one_they_are_bytes_with_their_length_and_a_note(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path]
) -> None:
    grpc = shown(capsys, files)["grpc"]
    (message,) = grpc["request"]["messages"]
    assert set(message) == {"bytes", "compressed", "base64"}
    assert message["compressed"] is False
    assert "no descriptor set given" in grpc["request"]["note"]
    assert "--proto-descriptor FILE" in grpc["response"]["note"]
    # the variable names one too
    with pytest.MonkeyPatch.context() as env:
        env.setenv("REEL_PROTO_DESCRIPTOR", str(files["xai"]))
        assert shown(capsys, files)["grpc"]["request"]["note"] is None


def test_a_descriptor_of_other_services_shows_bytes_saying_so(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path]
) -> None:
    grpc = shown(capsys, files, "--proto-descriptor", str(files["tiny"]))["grpc"]
    assert "bytes" in grpc["request"]["messages"][0]
    assert f"does not describe {PATH}" in grpc["request"]["note"]
    assert "--proto-descriptor" in grpc["request"]["note"]  # the flag's note names the file


def test_the_text_view_prints_each_message(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path]
) -> None:
    argv = ["inspect", str(files["cassette"]), "--id", str(files["id"])]
    assert main([*argv, "--proto-descriptor", str(files["xai"])]) == 0
    out = capsys.readouterr().out
    assert "(1 gRPC message)" in out
    assert '"model": "grok-4"' in out
    assert 'text: "4"' in out
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "note: no descriptor set given" in out
    assert '"bytes":' in out


def test_a_file_that_is_no_descriptor_set_exits_2_naming_the_flag(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"this is not protobuf")
    for command in (["inspect", str(files["cassette"])], ["view", str(files["cassette"])]):
        assert main([*command, "--proto-descriptor", str(bad)]) == 2
        err = capsys.readouterr().err
        assert "--proto-descriptor" in err
        assert "is not a descriptor set" in err
        assert "Traceback" not in err


def test_the_viewer_shows_them_as_json_or_bytes_with_the_note(files: dict[str, Path]) -> None:
    source = source_of_bytes("c.jsonl", files["cassette"].read_bytes())
    _, (plain,) = view_data([source])
    assert "bytes" in plain["request"]["body"]["json"]["messages"][0]
    assert "no descriptor set given" in plain["request"]["grpc_note"]
    assert "no descriptor set given" in plain["response"]["grpc_note"]
    listing, (read,) = view_data([source], ProtoSchema(xai_set()))
    assert read["request"]["body"]["json"]["messages"][0]["model"] == "grok-4"
    assert "grpc_note" not in read["request"]
    assert json.loads(read["response"]["frames"][0][4])["model"] == "grok-4"
    assert read["text"] == "4"
    assert listing["rows"][0]["provider"] == "xai"


def test_reel_view_writes_the_page_through_the_descriptor(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "page.html"
    argv = ["view", str(files["cassette"]), "-o", str(out), "--proto-descriptor", str(files["xai"])]
    assert main(argv) == 0
    assert "1 interaction" in capsys.readouterr().out
    assert out.is_file()


def test_the_proxys_viewer_shows_them_through_its_descriptor(files: dict[str, Path]) -> None:
    from reel_bindings._store import MemoryStore
    from reel_bindings.view._live import LivePage
    from reel_bindings.view._page import unpack

    store = MemoryStore({"c.jsonl": files["cassette"].read_bytes()})

    def details(proto: ProtoSchema | None) -> Any:
        page = LivePage(store, lambda: ["c.jsonl"], title=str, proto=proto).page()[1]
        blocks = re.findall(r'id="reel-z-\d+">([^<]*)</script>', page)  # the packed details
        return [d for block in blocks for d in unpack(block)]

    (shown,) = details(ProtoSchema(xai_set()))
    assert shown["request"]["body"]["json"]["messages"][0]["model"] == "grok-4"
    (bare,) = details(None)
    assert "no descriptor set given" in bare["request"]["grpc_note"]


def test_reel_diff_names_the_fields_of_the_messages(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = json.loads(files["cassette"].read_bytes().splitlines()[1])
    answer = chat_pb2.GetChatCompletionResponse(
        id="r1",
        model="grok-4",
        outputs=[chat_pb2.CompletionOutput(message=chat_pb2.CompletionMessage(content="5"))],
        usage=usage_pb2.SamplingUsage(prompt_tokens=9, completion_tokens=1),
    )
    frame = base64.b64encode(grpc_frame(answer.SerializeToString())).decode()
    line["response"]["frames"][0][1] = {"base64": frame}
    other = tmp_path / "other.jsonl"
    head = files["cassette"].read_bytes().splitlines()[0]
    other.write_bytes(head + b"\n" + json.dumps(line).encode() + b"\n")
    argv = ["diff", str(files["cassette"]), str(other), "--json"]
    assert main([*argv, "--proto-descriptor", str(files["xai"])]) == 1
    (changed,) = json.loads(capsys.readouterr().out)["changed"]
    assert changed["response"]["text"] == ["4", "5"]
    assert changed["response"]["body"] == [
        {"path": "messages[0].outputs[0].message.content", "kind": "changed", "a": "4", "b": "5"}
    ]
    assert main(argv) == 1  # without one: the frames differ, no field named
    (changed,) = json.loads(capsys.readouterr().out)["changed"]
    assert "body" not in changed["response"]


def test_reel_cost_reads_a_grpc_calls_usage_through_the_descriptor(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["cost", str(files["cassette"]), "--json"]
    assert main([*argv, "--proto-descriptor", str(files["xai"])]) == 0
    (group,) = json.loads(capsys.readouterr().out)["unknown"]  # xAI has no prices yet
    assert (group["provider"], group["model"]) == ("xai", "grok-4")
    assert (group["tokens_in"], group["tokens_out"]) == (9, 1)
    assert main(argv) == 0
    (bare,) = json.loads(capsys.readouterr().out)["unknown"]
    assert (bare["provider"], bare["tokens_in"]) == ("xai", None)
