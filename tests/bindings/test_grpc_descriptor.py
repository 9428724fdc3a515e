"""xAI's SDK through Reel's gRPC channel with xai-sdk's own descriptor set
(``proto_descriptor=``): recorded against the fake xAI server, the line
names the provider ``xai`` and carries the model and token usage read
through the descriptor; replayed with the server gone, a request sent in
other words misses with a diff naming ``messages[0]...`` fields, as the SDK
raises it; the same cassette replays without the descriptor (nothing on
disk depends on it)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.secrets import GRPC_KEY, recoverable

grpc = pytest.importorskip("grpc", reason="the xAI SDK's tests need grpcio")
pytest.importorskip("xai_sdk", reason="the xAI SDK's tests need xai-sdk: pip install xai-sdk")
pytest.importorskip("google.protobuf", reason="descriptor sets need protobuf: the grpc extra")

from xai_sdk.chat import user  # noqa: E402

from reel_bindings.sdk import xai_client  # noqa: E402
from tests.fakes.xai_grpc import FakeXai, answer  # noqa: E402
from tests.protos import xai_set  # noqa: E402


@pytest.fixture
def fake() -> Iterator[FakeXai]:
    with FakeXai(GRPC_KEY) as server:
        yield server


@pytest.fixture
def descriptor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("XAI_API_KEY", raising=False)
    monkeypatch.delenv("REEL_MODE", raising=False)
    monkeypatch.delenv("REEL_PROTO_DESCRIPTOR", raising=False)
    path = tmp_path / "xai.pb"
    path.write_bytes(xai_set())
    return path


def ask(client: Any, text: str, model: str = "grok-4") -> str:
    content: str = client.chat.create(model=model, messages=[user(text)]).sample().content
    return content


def test_recorded_through_the_descriptor_and_matched_by_its_fields(
    fake: FakeXai, tmp_path: Path, descriptor: Path
) -> None:
    cassette = tmp_path / "xai.jsonl"
    live = {"api_key": GRPC_KEY, "api_host": fake.address, "use_insecure_channel": True}
    client = xai_client(cassette, mode="record", proto_descriptor=descriptor, **live)
    assert ask(client, "What is Reel?") == answer("What is Reel?")
    client.close()
    fake.stop()
    written = cassette.read_bytes()
    assert recoverable(GRPC_KEY, written) == []
    (line,) = [json.loads(raw) for raw in written.splitlines()[1:]]
    assert line["provider"] == "xai"
    assert line["meta"]["model"]
    assert (line["meta"]["tokens_in"], line["meta"]["tokens_out"]) == (7, 5)

    client = xai_client(cassette, proto_descriptor=descriptor)  # replay: no key, no server
    assert ask(client, "What is Reel?") == answer("What is Reel?")
    with pytest.raises(grpc.RpcError) as raised:
        ask(client, "What is Reel?", model="grok-3")
    client.close()
    assert raised.value.code() is grpc.StatusCode.NOT_FOUND
    assert "differs at messages[0].model" in raised.value.details()

    client = xai_client(cassette)  # the same cassette replays without one: bytes
    assert ask(client, "What is Reel?") == answer("What is Reel?")
    with pytest.raises(grpc.RpcError) as bare:
        ask(client, "What is Reel?", model="grok-3")
    client.close()
    assert "messages[0].model" not in bare.value.details()
