"""pydantic-ai's xAI gRPC cassettes (``reel import pydantic-xai-grpc``): each
request/response sample becomes a gRPC exchange, recorded as a live one is
and replayed byte for byte, the message whole and ``grpc-status: 0`` in
the trailers.  The two files are copies of pydantic-ai's (MIT; see
``pydantic_ai_xai/PROVENANCE.md``)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from reel_core import (
    Cassette,
    CassetteError,
    Config,
    EndOfResponse,
    Engine,
    Frame,
    Mode,
    Redactor,
    Replay,
    Request,
    ResponseHead,
    Trailers,
)
from reel_core._formats import Exchange, Skipped, pydantic_xai_grpc
from reel_core.tools import grpc_frame, grpc_messages, import_refusal, import_source, sniff_format
from tests.corpus import CORPUS, NO_CORPUS

from .._helpers import pull

HERE = Path(__file__).parent / "pydantic_ai_xai"
FILES = sorted(HERE.glob("*.xai.yaml"))
CORPUS_DIR = CORPUS / "pydantic__pydantic-ai" / "tests" / "models" / "cassettes" / "test_xai"

REQUEST_RAW = base64.b64decode(
    "CiIKHgocWW91IGFyZSBhIGhlbHBmdWwgYXNzaXN0YW50LhADCiQKIAoeV2hhdCBpcyB0aGUgY2Fw"
    "aXRhbCBvZiBGcmFuY2U/EAESGWdyb2stNC1mYXN0LW5vbi1yZWFzb25pbmc="
)


def test_the_copies_are_there() -> None:
    assert [f.name for f in FILES] == [
        "test_xai_instructions.xai.yaml",
        "test_xai_system_prompt.xai.yaml",
    ]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_each_file_is_sniffed_and_imported_as_one_grpc_call(path: Path) -> None:
    data = path.read_bytes()
    assert sniff_format(data) == "pydantic-xai-grpc"
    assert import_refusal(data) is None
    report = import_source("pydantic-xai-grpc", data, path.name, Redactor())
    assert report.failures == []
    assert report.tool == "pydantic-ai-xai-grpc"
    (interaction,) = report.interactions
    request, response = interaction.request, interaction.response
    assert (request.method, request.path) == ("POST", "/xai_api.Chat/GetCompletion")
    assert grpc_messages(request.body) == [REQUEST_RAW]
    assert response.status == 200
    assert response.stream == "grpc"
    assert response.headers == (("content-type", "application/grpc"),)
    assert response.trailers == (("grpc-status", "0"),)
    (frame,) = (data for _, data in response.frames)
    (message,) = grpc_messages(frame)
    assert b"Paris is the capital of France." in message
    assert any("xai_api.Chat/GetCompletion" in note for _, note in report.notes)


def test_an_imported_call_replays_to_the_sdks_request_byte_for_byte() -> None:
    report = import_source("pydantic-xai-grpc", FILES[0].read_bytes(), "x.yaml", Redactor())
    cassette = Cassette("x")
    for interaction in report.interactions:
        cassette.add(interaction)
    engine = Engine(cassette, Config(mode=Mode.REPLAY))
    engine.receive_request(
        Request(
            "POST",
            "/xai_api.Chat/GetCompletion",
            ((b"host", b"api.x.ai"), (b"content-type", b"application/grpc")),
            grpc_frame(REQUEST_RAW),
        )
    )
    events, _ = pull(engine)
    assert [type(e) for e in events] == [Replay, ResponseHead, Frame, Trailers, EndOfResponse]
    frame, trailers = events[2], events[3]
    assert isinstance(frame, Frame)
    assert isinstance(trailers, Trailers)
    assert frame.data == report.interactions[0].response.frames[0][1]
    assert trailers.headers == ((b"grpc-status", b"0"),)


CALL = b"""version: 1
interactions:
- request_sample:
    raw: !!binary |
      CgE=
  response_sample:
    json:
      outputs:
      - delta:
          content: Par
    raw: !!binary |
      CgE=
"""


def test_a_streamed_chunk_is_the_chunk_method() -> None:
    (exchange,) = pydantic_xai_grpc.parse(CALL, "c.yaml")
    assert isinstance(exchange, Exchange)
    assert exchange.target == "https://api.x.ai/xai_api.Chat/GetCompletionChunk"
    assert exchange.request_body == grpc_frame(b"\n\x01")


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        (b"- 3\n", "entry 0 is a int, not a mapping"),
        (b"- request_sample: {}\n", "request_sample.raw is a NoneType, not !!binary"),
        (b"- request_sample: x\n", "no request_sample mapping"),
        (
            b"- request_sample: {raw: !!binary CgE=}\n  response_sample: {raw: text}\n",
            "response_sample.raw is a str, not !!binary protobuf bytes",
        ),
        (
            b"- request_sample: {raw: !!python/object:os.system x}\n",
            "request_sample.raw is a !!python/object:os.system value, which Reel does not",
        ),
    ],
)
def test_a_bad_entry_is_skipped_with_why(entry: bytes, why: str) -> None:
    (skipped,) = pydantic_xai_grpc.parse(b"version: 1\ninteractions:\n" + entry, "c.yaml")
    assert isinstance(skipped, Skipped)
    assert why in skipped.reason


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"- request_sample: {}\n", 'no "interactions" list at the top (found list)'),
        (b"version: 2\ninteractions: []\n", "version 2: Reel reads version 1 only"),
    ],
)
def test_a_file_of_another_shape_is_refused(data: bytes, why: str) -> None:
    with pytest.raises(CassetteError, match=why.replace("(", r"\(").replace(")", r"\)")):
        pydantic_xai_grpc.parse(data, "c.yaml")


def test_sniff_wants_samples_and_no_uri() -> None:
    assert pydantic_xai_grpc.sniff(CALL)
    assert not pydantic_xai_grpc.sniff(CALL + b"- request:\n    uri: https://x\n")
    assert not pydantic_xai_grpc.sniff(CALL.replace(b"interactions:", b"samples:"))


@pytest.mark.skipif(not CORPUS_DIR.is_dir(), reason=NO_CORPUS)
def test_the_copies_are_the_corpus_files() -> None:
    for path in FILES:
        assert path.read_bytes() == (CORPUS_DIR / path.name).read_bytes()
