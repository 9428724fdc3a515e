"""xAI over gRPC as a provider: recognised by its package and host, its
model and usage read through a descriptor set (xai-sdk's own), its answer
and tool calls, its credential metadata scrubbed."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("google.protobuf", reason="descriptor sets need protobuf: the grpc extra")
pytest.importorskip("xai_sdk", reason="xAI's descriptors are xai-sdk's: the test extra")

from xai_sdk.proto.v6 import chat_pb2, usage_pb2

from reel_core import (
    Cassette,
    Config,
    Engine,
    Forward,
    MatchConfig,
    Mode,
    Redactor,
    Request,
)
from reel_core._protobuf import ProtoSchema
from reel_core._providers import answer_pieces, guess_provider, xai
from reel_core.tools import extract_usage, grpc_frame, match_key, record_exchange
from tests.protos import xai_set

from ._helpers import pull

XAI = ProtoSchema(xai_set(), "xai.pb")
PATH = "/xai_api.Chat/GetCompletion"
STREAM = "/xai_api.Chat/GetCompletionChunk"
TOKEN = "xai-" + "Hs4Kd9Lq2Wm7Zr5Tn8Bv" * 2
GRPC = ((b"content-type", b"application/grpc"), (b"grpc-encoding", b"identity"))


def call(model: str = "grok-4", user: str = "") -> bytes:
    request = chat_pb2.GetCompletionsRequest(
        model=model,
        user=user,
        messages=[
            chat_pb2.Message(role=chat_pb2.ROLE_USER, content=[chat_pb2.Content(text="2+2?")])
        ],
    )
    return grpc_frame(request.SerializeToString())


def answer(**fields: Any) -> bytes:
    return grpc_frame(chat_pb2.GetChatCompletionResponse(**fields).SerializeToString())


def chunk(**fields: Any) -> bytes:
    return grpc_frame(chat_pb2.GetChatCompletionChunk(**fields).SerializeToString())


USAGE = usage_pb2.SamplingUsage(
    prompt_tokens=12, completion_tokens=5, reasoning_tokens=20, cached_prompt_text_tokens=4
)


@pytest.mark.parametrize(
    ("path", "host", "headers", "provider"),
    [
        (PATH, "", (), "xai"),
        ("/xai_api.Models/ListLanguageModels", "localhost:50051", (), "xai"),
        ("/some.Service/Call", "api.x.ai", GRPC, "xai"),
        ("/some.Service/Call", "api.x.ai:443", GRPC, "xai"),
        # xAI's REST API is OpenAI-compatible: OpenAI's bodies
        ("/v1/chat/completions", "api.x.ai", ((b"content-type", b"application/json"),), "openai"),
        ("/some.Service/Call", "api.example.com", GRPC, "generic"),
    ],
)
def test_xai_is_recognised_by_its_package_and_its_grpc_host(
    path: str, host: str, headers: tuple[tuple[bytes, bytes], ...], provider: str
) -> None:
    assert guess_provider(path, host, headers) == provider


def record(path: str, frames: list[bytes], *, proto: ProtoSchema | None = XAI) -> Any:
    metadata = (
        *GRPC,
        (b"host", b"api.x.ai"),
        (b"authorization", f"Bearer {TOKEN}".encode()),
        (b"x-api-key", TOKEN.encode()),
    )
    request = Request("POST", path, metadata, call())
    return record_exchange(
        request,
        200,
        GRPC,
        [(0.1 * (i + 1), frame) for i, frame in enumerate(frames)],
        redactor=Redactor(),
        trailers=[(b"grpc-status", b"0")],
        proto=proto,
    )


def test_a_call_is_named_xai_and_its_usage_read_through_the_descriptor() -> None:
    got = record(PATH, [answer(id="r", model="grok-4-0709", usage=USAGE)])
    assert got.provider == "xai"
    assert got.meta["model"] == "grok-4-0709"
    # output counts reasoning too, as everywhere in Reel; cached is part of input
    assert (got.meta["tokens_in"], got.meta["tokens_out"], got.meta["tokens_cached"]) == (
        12,
        25,
        4,
    )
    assert TOKEN not in got.to_line().decode()


def test_a_stream_s_first_content_and_last_usage_are_read() -> None:
    delta = chat_pb2.CompletionOutputChunk(delta=chat_pb2.Delta(content="4"))
    thinking = chat_pb2.CompletionOutputChunk(delta=chat_pb2.Delta(reasoning_content="hm"))
    frames = [
        chunk(id="c", model="grok-4"),
        chunk(id="c", model="grok-4", outputs=[thinking]),
        chunk(id="c", model="grok-4", outputs=[delta]),
        chunk(id="c", model="grok-4", usage=USAGE),
    ]
    got = record(STREAM, frames)
    assert got.response.stream == "grpc"
    assert got.meta["model"] == "grok-4"
    assert got.meta["tokens_out"] == 25
    usage = extract_usage("xai", STREAM, call(), got.response, XAI)
    assert usage.first_token_ms == got.response.frames[1][0]


def test_without_a_descriptor_the_messages_are_bytes_and_nothing_is_read() -> None:
    got = record(PATH, [answer(id="r", model="grok-4-0709", usage=USAGE)], proto=None)
    assert got.provider == "xai"
    assert got.meta.get("tokens_in") is None
    usage = extract_usage("xai", PATH, call(), got.response)
    assert (usage.model, usage.input_tokens) == (None, None)
    # a message the descriptor does not read is passed over; the request names the model
    with_bad = record(PATH, [grpc_frame(b"\xff\xff\xff")], proto=XAI)
    assert with_bad.meta["model"] == "grok-4"
    assert with_bad.meta.get("tokens_in") is None


def test_the_answer_and_tool_calls_are_read() -> None:
    tool = chat_pb2.ToolCall(
        id="t1", function=chat_pb2.FunctionCall(name="add", arguments='{"a":2}')
    )
    message = chat_pb2.CompletionMessage(content="4", tool_calls=[tool])
    (obj,) = XAI.read(
        PATH, [answer(outputs=[chat_pb2.CompletionOutput(message=message)])], response=True
    )
    pieces = answer_pieces(obj)
    assert pieces is not None
    assert [p.text for p in pieces if p.text] == ["4"]
    assert [p.tool for p in pieces if p.tool] == [("", "add", '{"a":2}')]
    assert xai.answer_pieces({"outputs": [1, {"delta": "x"}]}, None) == []
    odd = {"outputs": [{"message": {"tool_calls": [1, {"function": "f"}]}}]}
    assert xai.answer_pieces(odd, None) == []
    assert xai.answer_pieces({"id": "not xai"}, None) is None


def test_usage_without_output_counts_leaves_output_unknown() -> None:
    from reel_core._providers import Tally

    tally = Tally()
    usage = {"usage": {"prompt_text_tokens": 3, "prompt_tokens": 3}}
    assert xai.read_usage(tally, usage, None) is False  # claimed, no content
    assert tally.input == 3
    assert tally.output is None
    assert xai.read_usage(Tally(), {"id": "not xai"}, None) is None


def test_the_user_field_drifts_as_openais_does() -> None:
    config = MatchConfig(proto=XAI)
    assert match_key("POST", PATH, (), call(user="a"), config) == match_key(
        "POST", PATH, (), call(user="b"), config
    )
    assert match_key("POST", PATH, (), call(model="a"), config) != match_key(
        "POST", PATH, (), call(model="b"), config
    )


def test_an_engine_records_through_its_configs_descriptor() -> None:
    engine = Engine(Cassette("c"), Config(mode=Mode.RECORD, proto=XAI))
    request = Request("POST", PATH, (*GRPC, (b"host", b"api.x.ai")), call())
    engine.receive_request(request)
    forward = engine.next_event()
    assert isinstance(forward, Forward)
    engine.upstream_head(200, GRPC, mono=0.0)
    engine.upstream_data(answer(model="grok-4", usage=USAGE), mono=0.05)
    engine.upstream_trailers(((b"grpc-status", b"0"),), mono=0.06)
    engine.upstream_end(mono=0.07)
    pull(engine)
    recorded = engine.record()
    assert recorded is not None
    line = json.loads(recorded.line)
    assert line["provider"] == "xai"
    assert line["meta"]["tokens_out"] == 25
    # stored under the key of its bytes: a replay without the descriptor finds it
    assert line["key"] == match_key("POST", PATH, (), call(), MatchConfig())


def prompt(text: str, model: str = "grok-4") -> bytes:
    request = chat_pb2.GetCompletionsRequest(
        model=model,
        messages=[chat_pb2.Message(role=chat_pb2.ROLE_USER, content=[chat_pb2.Content(text=text)])],
    )
    return grpc_frame(request.SerializeToString())


def test_fuzzy_matching_reads_the_prompt_and_model_through_the_descriptor() -> None:
    from reel_core import MatchMode, Miss, Replay

    from ._helpers import cassette_of, interaction

    stored = interaction(
        path=PATH, body=prompt("What is the capital of France?"), stream="grpc", frames=[(1.0, b"")]
    )
    fuzzy = MatchConfig(MatchMode.FUZZY, threshold=0.8)

    def served(body: bytes, proto: ProtoSchema | None) -> object:
        engine = Engine(cassette_of(stored), Config(match=fuzzy, proto=proto))
        engine.receive_request(Request("POST", PATH, GRPC, body))
        return engine.next_event()

    near = prompt("What's the capital of France?")
    assert isinstance(served(near, XAI), Replay)
    assert isinstance(served(near, None), Miss)  # bytes: no prompt to be near
    assert isinstance(served(prompt("What's the capital of France?", "grok-3"), XAI), Miss)
    assert isinstance(served(prompt("How tall is Everest?"), XAI), Miss)


def test_the_model_of_a_grpc_request_is_its_first_messages() -> None:
    from reel_core._providers import model_of

    assert model_of(PATH, {"messages": [{"model": "grok-4"}, {"model": "x"}]}) == "grok-4"
    assert model_of(PATH, {"messages": []}) is None
    assert model_of(PATH, {"messages": "not a list"}) is None
    assert model_of(PATH, None) is None
