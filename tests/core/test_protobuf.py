"""Descriptor sets: gRPC messages read as JSON (protobuf's JSON mapping,
proto field names, 64-bit integers as strings), matched as JSON under every
match mode, a miss's diff naming fields; a method the set does not describe
is bytes; a file that is no descriptor set is a clear error.  Tested with
xai-sdk's own descriptors and a tiny set built in the test."""

from __future__ import annotations

import base64
import zlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("google.protobuf", reason="descriptor sets need protobuf: the grpc extra")

from reel_core import (
    CassetteMeta,
    Config,
    ConfigError,
    Engine,
    MatchConfig,
    MatchMode,
    Miss,
    Replay,
    Request,
)
from reel_core._protobuf import (
    MAX_SHOWN,
    NO_SCHEMA,
    ProtoSchema,
    SchemaNote,
    body_value,
    grpc_method,
    load_protobuf,
    request_frames,
    shown_messages,
)
from reel_core.tools import grpc_frame, match_key
from tests.protos import TINY_METHOD, tiny_messages, tiny_set, xai_set

from ._helpers import cassette_of, interaction, pull

Ask, Answer = tiny_messages()
TINY = ProtoSchema(tiny_set(), "tiny.pb")
GRPC = ((b"host", b"api.x.ai"), (b"content-type", b"application/grpc"))


def ask(**fields: Any) -> bytes:
    message: bytes = Ask(**fields).SerializeToString()
    return message


def gzip(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=zlib.MAX_WBITS | 16)
    return packer.compress(data) + packer.flush()


# -- reading ---------------------------------------------------------------------------


def test_xai_requests_and_responses_read_as_json_by_their_proto_names() -> None:
    from xai_sdk.proto.v6 import chat_pb2

    schema = ProtoSchema(xai_set(), "xai.pb")
    assert schema.methods["/xai_api.Chat/GetCompletion"][0].full_name == (
        "xai_api.GetCompletionsRequest"
    )
    request = chat_pb2.GetCompletionsRequest(
        model="grok-4",
        max_tokens=5,
        messages=[chat_pb2.Message(role=chat_pb2.ROLE_USER, content=[chat_pb2.Content(text="hi")])],
    )
    body = grpc_frame(request.SerializeToString())
    assert body_value(body, "/xai_api.Chat/GetCompletion", schema) == (
        True,
        {
            "messages": [
                {
                    "model": "grok-4",
                    "max_tokens": 5,
                    "messages": [{"role": "ROLE_USER", "content": [{"text": "hi"}]}],
                }
            ]
        },
    )
    answer = chat_pb2.GetChatCompletionResponse(
        id="r1", model="grok-4", usage={"prompt_tokens": 3, "completion_tokens": 4}
    )
    read = schema.read(
        "/xai_api.Chat/GetCompletion", [grpc_frame(answer.SerializeToString())], response=True
    )
    assert read == [
        {"id": "r1", "model": "grok-4", "usage": {"prompt_tokens": 3, "completion_tokens": 4}}
    ]


def test_int64_is_a_string_and_bytes_base64_as_protobufs_json_mapping_says() -> None:
    body = grpc_frame(ask(model="m", big_number=2**40, blob=b"\x00\xff", words=["a", "b"]))
    assert TINY.read(TINY_METHOD, [body]) == [
        {"model": "m", "words": ["a", "b"], "big_number": "1099511627776", "blob": "AP8="}
    ]


def test_a_compressed_message_is_read_decompressed() -> None:
    plain, packed = grpc_frame(ask(model="m")), grpc_frame(gzip(ask(model="m")), compressed=True)
    assert TINY.read(TINY_METHOD, [plain, packed]) == [{"model": "m"}, {"model": "m"}]
    bomb = grpc_frame(gzip(bytes(3 << 20)), compressed=True)
    with pytest.raises(SchemaNote, match=r"message 0 is compressed and not read: .*over 1048576"):
        TINY.read(TINY_METHOD, [bomb], limit=1 << 20)


def test_what_the_schema_does_not_read_is_bytes_with_a_note() -> None:
    body = grpc_frame(ask(model="m"))
    with pytest.raises(SchemaNote, match=r"tiny.pb does not describe /tiny.Talk/Shout: shown as"):
        TINY.read("/tiny.Talk/Shout", [body])
    with pytest.raises(SchemaNote, match="message 1 is not a whole gRPC message"):
        TINY.read(TINY_METHOD, [body, body[:-1]])
    with pytest.raises(SchemaNote, match=r"message 0 does not parse as tiny.Ask"):
        TINY.read(TINY_METHOD, [grpc_frame(b"\x0a\x09ab")])  # a string longer than the message
    assert body_value(body, "/tiny.Talk/Shout", TINY) == (False, None)
    assert body_value(body[:-1], TINY_METHOD, TINY) == (False, None)
    assert body_value(grpc_frame(b"\xff\xff"), TINY_METHOD, TINY) == (False, None)
    # JSON stays JSON, with or without a schema
    assert body_value(b'{"a": 1}', TINY_METHOD, TINY) == (True, {"a": 1})
    assert body_value(b'{"a": 1}', TINY_METHOD, None) == (True, {"a": 1})


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b'{"not": "a set"}', "it does not parse"),
        (b"", "it holds no file descriptor"),
        (b"\x0a\x00", "it holds no file descriptor"),  # one file with no name
    ],
)
def test_a_file_that_is_no_descriptor_set_is_a_clear_error(data: bytes, why: str) -> None:
    with pytest.raises(
        ConfigError, match=f"--proto-descriptor x.json is not a descriptor set.*{why}"
    ):
        ProtoSchema(data, "--proto-descriptor x.json")


def test_a_set_without_its_imports_says_to_include_them() -> None:
    from google.protobuf import descriptor_pb2
    from xai_sdk.proto.v6 import chat_pb2

    alone = descriptor_pb2.FileDescriptorProto()
    chat_pb2.DESCRIPTOR.CopyToProto(alone)
    data = descriptor_pb2.FileDescriptorSet(file=[alone]).SerializeToString()
    with pytest.raises(ConfigError, match=r"google/protobuf/timestamp.proto.*include_imports"):
        ProtoSchema(data, "chat.pb")
    looped = descriptor_pb2.FileDescriptorProto(name="a.proto", dependency=["a.proto"])
    data = descriptor_pb2.FileDescriptorSet(file=[looped]).SerializeToString()
    with pytest.raises(ConfigError, match="import each other in a cycle"):
        ProtoSchema(data)
    broken = descriptor_pb2.FileDescriptorProto(name="b.proto", package="b")
    broken.message_type.add(name="M").field.add(name="x", number=1, type_name=".b.Missing")
    data = descriptor_pb2.FileDescriptorSet(file=[broken]).SerializeToString()
    with pytest.raises(ConfigError, match=r"b\.proto does not build"):
        ProtoSchema(data)


def test_protobuf_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    real = importlib.import_module

    def without(name: str, package: str | None = None) -> Any:
        if name.startswith("google.protobuf"):
            raise ImportError(f"No module named {name!r}")
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", without)
    with pytest.raises(ImportError, match=r"pip install 'reel-llm\[grpc\]'"):
        load_protobuf()


def test_a_schema_is_equal_by_its_sets_bytes() -> None:
    again = ProtoSchema(tiny_set(), "another name")
    assert again == TINY
    assert hash(again) == hash(TINY)
    assert again != ProtoSchema(xai_set())
    assert again != tiny_set()
    assert repr(TINY) == "ProtoSchema('tiny.pb', 1 methods)"
    assert MatchConfig(proto=TINY) == MatchConfig(proto=again)
    assert MatchConfig(proto=TINY) != MatchConfig()


@pytest.mark.parametrize(
    ("path", "method"),
    [
        ("/tiny.Talk/Say", ("tiny.Talk", "Say")),
        ("/Talk/Say", ("Talk", "Say")),
        ("/v1/chat/completions", None),
        ("/tiny.Talk/", None),
        ("tiny.Talk/Say", None),
        ("/", None),
    ],
)
def test_a_grpc_path_names_a_service_and_method(path: str, method: tuple[str, str] | None) -> None:
    assert grpc_method(path) == method


# -- matching --------------------------------------------------------------------------


def replay(config: Config, body: bytes, recorded: bytes, meta: CassetteMeta | None = None) -> Any:
    stored = interaction(path=TINY_METHOD, body=recorded, stream="grpc", frames=[(1.0, b"")])
    engine = Engine(cassette_of(stored, meta=meta), config)
    engine.receive_request(Request("POST", TINY_METHOD, GRPC, body))
    events, _ = pull(engine)
    return events[0]


def test_the_same_message_in_other_bytes_matches_through_the_schema() -> None:
    recorded = grpc_frame(ask(model="m", seed=3))
    sent = grpc_frame(ask(seed=3) + ask(model="m"))  # the fields the other way round
    assert sent != recorded
    assert isinstance(replay(Config(), sent, recorded), Miss)  # bytes
    assert isinstance(replay(Config(proto=TINY), sent, recorded), Replay)
    packed = grpc_frame(gzip(ask(model="m", seed=3)), compressed=True)
    assert isinstance(replay(Config(proto=TINY), packed, recorded), Replay)
    # exact compares the bytes as sent, schema or not
    exact = Config(match=MatchConfig(MatchMode.EXACT), proto=TINY)
    assert isinstance(replay(exact, sent, recorded), Miss)


def test_ignored_fields_are_json_paths_into_the_messages() -> None:
    recorded = grpc_frame(ask(model="m", seed=3))
    sent = grpc_frame(ask(model="m", seed=99))
    ignoring = MatchConfig(MatchMode.IGNORE_FIELDS, ("messages[*].seed",))
    assert isinstance(replay(Config(match=ignoring), sent, recorded), Miss)
    assert isinstance(replay(Config(match=ignoring, proto=TINY), sent, recorded), Replay)
    # the cassette's own match settings are read through the schema too
    meta = CassetteMeta(match=ignoring)
    assert isinstance(replay(Config(proto=TINY), sent, recorded, meta), Replay)


def test_a_miss_diff_names_the_fields_of_the_messages() -> None:
    recorded = grpc_frame(ask(model="grok-3", words=["hi"]))
    sent = grpc_frame(ask(model="grok-4", words=["hi"]))
    miss = replay(Config(proto=TINY), sent, recorded)
    assert isinstance(miss, Miss)
    assert miss.report.closest is not None
    (diff,) = miss.report.closest.diffs
    assert (diff.path, diff.kind, diff.recorded, diff.received) == (
        "messages[0].model",
        "changed",
        "grok-3",
        "grok-4",
    )
    assert "differs at messages[0].model" in miss.report.summary()
    bare = replay(Config(), sent, recorded)  # without one: the body's bytes
    assert [d.path for d in bare.report.closest.diffs] == ["body"]


_asks = st.fixed_dictionaries(
    {},
    optional={
        "model": st.text(max_size=12),
        "words": st.lists(st.text(max_size=6), max_size=3),
        "big_number": st.integers(-(2**63), 2**63 - 1),
        "blob": st.binary(max_size=8),
        "seed": st.integers(0, 2**32 - 1),
    },
)


@given(_asks, _asks, st.permutations(range(5)), st.booleans())
def test_keys_through_a_schema_are_equal_exactly_when_the_messages_are(
    a: dict[str, Any], b: dict[str, Any], order: list[int], packed: bool
) -> None:
    """Any message, its fields in any order, compressed or not, keys as its
    JSON: two requests key alike through the schema exactly when their
    messages are equal."""
    config = MatchConfig(proto=TINY)
    fields = list(a.items())
    shuffled = b"".join(ask(**dict([fields[i]])) for i in order if i < len(fields))
    body = grpc_frame(gzip(shuffled) if packed else shuffled, compressed=packed)
    key_a = match_key("POST", TINY_METHOD, (), grpc_frame(ask(**a)), config)
    assert match_key("POST", TINY_METHOD, (), body, config) == key_a
    key_b = match_key("POST", TINY_METHOD, (), grpc_frame(ask(**b)), config)
    assert (key_a == key_b) == (Ask(**a) == Ask(**b))


# -- what a viewer shows ---------------------------------------------------------------


def test_shown_messages_are_json_through_a_schema_else_bytes_with_a_note() -> None:
    frames = [grpc_frame(ask(model="m")), grpc_frame(gzip(ask(model="n")), compressed=True)]
    assert shown_messages(frames, TINY_METHOD, TINY) == ([{"model": "m"}, {"model": "n"}], None)
    bare, note = shown_messages(frames, TINY_METHOD, None)
    assert note == NO_SCHEMA
    assert bare[0] == {
        "bytes": len(ask(model="m")),
        "compressed": False,
        "base64": base64.b64encode(ask(model="m")).decode(),
    }
    assert bare[1]["compressed"] is True
    other, note = shown_messages(frames, "/tiny.Talk/Shout", TINY)
    assert "does not describe /tiny.Talk/Shout" in (note or "")
    assert other == bare
    # a stream's unfinished tail, a message longer than is shown
    big = grpc_frame(b"x" * (MAX_SHOWN + 10))
    (tail, cut), _ = shown_messages([big[:20], big], TINY_METHOD, None)
    assert tail == {"bytes": 20, "unfinished": True, "base64": base64.b64encode(big[:20]).decode()}
    assert (cut["bytes"], cut["shown"]) == (MAX_SHOWN + 10, MAX_SHOWN)
    assert base64.b64decode(cut["base64"]) == b"x" * MAX_SHOWN


def test_request_frames_are_a_grpc_paths_whole_messages() -> None:
    body = grpc_frame(ask(model="m"))
    assert request_frames(TINY_METHOD, body) == [body]
    assert request_frames("/v1/chat/completions", body) is None
    assert request_frames(TINY_METHOD, b'{"model": "m"}') is None


# -- fields the descriptor set does not describe ----------------------------------------


def with_unknown(message: bytes) -> bytes:
    """``message`` with field 15 (a varint), which no tiny type describes."""
    return message + b"\x78\x07"


def test_a_field_the_set_does_not_describe_leaves_the_message_bytes() -> None:
    Inner = Ask.DESCRIPTOR.fields_by_name["single"].message_type
    assert Inner.full_name == "tiny.Inner"
    inner = with_unknown(b"\x0a\x01n")  # an Inner: note "n", and field 15
    cases = {
        "top": with_unknown(ask(model="m")),
        "repeated": ask(model="m") + b"\x32" + bytes([len(inner)]) + inner,
        "single": ask(model="m") + b"\x42" + bytes([len(inner)]) + inner,
        "map": ask(model="m")
        + b"\x3a"
        + bytes([len(inner) + 5])
        + b"\x0a\x01k\x12"
        + bytes([len(inner)])
        + inner,
    }
    for where, message in cases.items():
        with pytest.raises(SchemaNote, match=r"message 0 has fields .* does not describe .*15"):
            TINY.read(TINY_METHOD, [grpc_frame(message)])
        # so two requests that differ only there never match as one
        config = MatchConfig(proto=TINY)
        keyed = [
            match_key("POST", TINY_METHOD, (), grpc_frame(m), config)
            for m in (message, ask(model="m"))
        ]
        assert keyed[0] != keyed[1], where
    described = ask(model="m", labels={"a": "b"}, tags={"k": {"note": "n"}}, parts=[{"note": "p"}])
    assert TINY.read(TINY_METHOD, [grpc_frame(described)]) == [
        {
            "model": "m",
            "labels": {"a": "b"},
            "tags": {"k": {"note": "n"}},
            "parts": [{"note": "p"}],
        }
    ]


def test_a_sessions_message_reader_reads_a_described_calls_client_messages() -> None:
    """``H2Session``'s ``decode=``: a call's client message as JSON, the
    same value for the fields in another order; no reader for a call the
    set does not describe; a message it cannot read is a ValueError."""
    read = TINY.message_reader(TINY_METHOD)
    assert read is not None
    assert read(grpc_frame(ask(model="m", seed=3))) == {"model": "m", "seed": 3}
    assert read(grpc_frame(ask(seed=3) + ask(model="m"))) == read(
        grpc_frame(ask(model="m", seed=3))
    )
    assert TINY.message_reader("/other.Service/Call") is None
    with pytest.raises(ValueError, match="does not parse"):
        read(grpc_frame(b"\xff\xff\xff"))
