"""Compressed gRPC messages (the compressed flag, ``grpc-encoding: gzip`` or
``deflate``): scrubbed decompressed and compressed again the way they came,
a bomb refused within the body limit and kept as it came with a note, and
a protobuf's text runs scanned between its binary bytes.  The family as a
whole is the property in tests/property/test_grpc_compressed.py."""

from __future__ import annotations

import json
import zlib

import pytest

from reel_core import MatchConfig, Redactor, Request
from reel_core._decode import DecodeError
from reel_core._grpc import (
    has_compressed,
    message_coding,
    message_payload,
    rescrubbed,
    rescrubbed_body,
    whole_frames,
)
from reel_core.tools import grpc_frame, record_exchange

SECRET = "sk-proj-" + "Hq7Vn3Tz8Wm2Lp5Rx9" * 2
PATH = "/xai_api.Chat/GetCompletion"
REDACTOR = Redactor()
GRPC = ((b"content-type", b"application/grpc"), (b"grpc-encoding", b"gzip"))


def pack(data: bytes, wbits: int = zlib.MAX_WBITS | 16) -> bytes:
    packer = zlib.compressobj(9, wbits=wbits)
    return packer.compress(data) + packer.flush()


def bomb(size: int) -> bytes:
    """A gzip message of ``size`` zero bytes (a few kilobytes on the wire)."""
    packer = zlib.compressobj(9, wbits=zlib.MAX_WBITS | 16)
    chunk = bytes(1 << 20)
    out = [packer.compress(chunk) for _ in range(size >> 20)]
    return b"".join([*out, packer.flush()])


def test_the_coding_is_told_by_the_first_bytes() -> None:
    assert message_coding(pack(b"x")) == "gzip"
    assert message_coding(pack(b"x", zlib.MAX_WBITS)) == "deflate"
    assert message_coding(pack(b"x", -zlib.MAX_WBITS)) == "deflate"


@pytest.mark.parametrize("wbits", [zlib.MAX_WBITS | 16, zlib.MAX_WBITS, -zlib.MAX_WBITS])
def test_a_scrubbed_message_is_compressed_again_as_it_came(wbits: int) -> None:
    message = pack(f"\x0a\x20key {SECRET} end".encode(), wbits)
    frame = grpc_frame(message, compressed=True)
    out = rescrubbed(frame, Redactor().data)
    assert out[0] == 1
    assert (whole_frames(out) or [b""])[0] == out
    plain = message_payload(out[5:], True)
    assert SECRET.encode() not in plain
    assert plain.startswith(b"\x0a\x20key ")
    assert message_coding(out[5:]) == message_coding(message)
    # compressed again the same way: zlib reads it with the same window bits
    assert zlib.decompress(out[5:], wbits) == plain
    # nothing to scrub: the frame as it came, not recompressed
    clean = grpc_frame(pack(b"nothing here", wbits), compressed=True)
    assert rescrubbed(clean, Redactor().data) == clean


def test_text_between_a_protobufs_binary_bytes_is_scrubbed() -> None:
    # a string field of 200 bytes: its length's varint (0xc8 0x01) is not UTF-8
    field = f"{'a' * 50} {SECRET} {'b' * 100}".encode()[:200].ljust(200, b"c")
    message = b"\x0a\xc8\x01" + field + b"\x10\xff\x01"
    with pytest.raises(UnicodeDecodeError):
        message.decode("utf-8")
    # the redactor reads the text between its bytes (the one path for any
    # binary body: a text scrubber would pass it over)
    assert SECRET.encode() not in Redactor().data(message)
    for packed in (False, True):
        frame = grpc_frame(pack(message) if packed else message, compressed=packed)
        out = rescrubbed(frame, Redactor().data)
        plain = message_payload(out[5:], packed)
        assert SECRET.encode() not in plain
        assert plain.startswith(b"\x0a\xc8\x01" + b"a" * 50)
        assert plain.endswith(b"\x10\xff\x01")  # the binary bytes kept as they are
    tail = message[:120]  # no whole message: the stream's unfinished tail
    assert SECRET.encode() not in rescrubbed(tail, Redactor().data)


def test_a_bomb_is_refused_within_the_limit_and_kept_as_it_came() -> None:
    message = bomb(8 << 20)  # 8 MiB of zeros in about 8 KiB
    assert len(message) < 20_000
    with pytest.raises(DecodeError, match="decodes to over 1048576 bytes"):
        message_payload(message, True, 1 << 20)
    frame = grpc_frame(message, compressed=True)
    notes: list[tuple[str, str]] = []
    assert rescrubbed(frame, Redactor().data, limit=1 << 20, notes=notes) == frame
    ((coding, why),) = notes
    assert coding == "gzip"
    assert "kept as it came, not scanned for secrets" in why
    assert "decodes to over 1048576 bytes" in why


def test_a_corrupt_compressed_message_is_kept_with_a_note() -> None:
    frame = grpc_frame(b"\x1f\x8bnot gzip at all", compressed=True)
    notes: list[tuple[str, str]] = []
    assert rescrubbed(frame, Redactor().data, notes=notes) == frame
    assert notes[0][0] == "gzip"
    assert "corrupt gzip body" in notes[0][1]


def test_a_bomb_on_a_recording_is_flagged_on_its_line() -> None:
    # past the core's 32 MiB body limit: refused as it inflates, never whole
    message = bomb(40 << 20)
    frame = grpc_frame(message, compressed=True)
    got = record_exchange(
        Request("POST", PATH, GRPC, grpc_frame(b"q")),
        200,
        GRPC,
        [(0.01, frame)],
        redactor=Redactor(),
    )
    assert got.response.frames[0][1] == frame
    assert got.response.encoding == "gzip"
    assert "not scanned for secrets" in (got.response.encoding_error or "")
    line = json.loads(got.to_line())
    assert "not scanned" in line["response"]["encoding_error"]
    asked = record_exchange(
        Request("POST", PATH, GRPC, frame),
        200,
        GRPC,
        [(0.01, grpc_frame(b""))],
        redactor=Redactor(),
    )
    assert asked.request.body == frame
    assert asked.request.encoding == "gzip"
    assert "not scanned for secrets" in (asked.request.encoding_error or "")


def test_a_compressed_request_message_is_scrubbed_and_keyed_scrubbed() -> None:
    body = grpc_frame(b"\x0a\x03abc") + grpc_frame(pack(f"ask {SECRET}".encode()), compressed=True)
    got = record_exchange(
        Request("POST", PATH, GRPC, body),
        200,
        GRPC,
        [(0.01, grpc_frame(b"ok"))],
        redactor=Redactor(),
    )
    frames = whole_frames(got.request.body)
    assert frames is not None
    assert frames[0] == grpc_frame(b"\x0a\x03abc")
    assert SECRET.encode() not in message_payload(frames[1][5:], True)
    assert got.request.encoding_error is None


def test_whole_frames_and_what_is_not_a_grpc_body() -> None:
    one, two = grpc_frame(b"a"), grpc_frame(pack(b"b"), compressed=True)
    assert whole_frames(one + two) == [one, two]
    assert whole_frames(b"") is None
    assert whole_frames(b'{"model": "m"}') is None  # a flag byte of 0x7b
    assert whole_frames(one[:-1]) is None  # a message cut short
    assert whole_frames(one + b"\x00\x00") is None  # a prefix cut short
    assert has_compressed(one + two)
    assert not has_compressed(one)
    assert not has_compressed(b"\x01 not grpc")
    assert rescrubbed_body(b"plain text", Redactor().data) is None


@pytest.mark.parametrize("whole", [False, True])
def test_a_sessions_compressed_first_message_is_stored_scrubbed(whole: bool) -> None:
    """A client-streaming call's request body is its first message, kept as
    the engine redacts a request body: a secret compressed inside it is
    scrubbed there too, whether the engine had the first message or all."""
    from reel_core import Cassette, Config, Engine, Forward, Mode
    from reel_core._grpc_session import GrpcCallRecorder

    from ._helpers import pull
    from .test_grpc_session import HEADERS, OK, PATH, TOKEN

    first = grpc_frame(pack(f"\x0a\x40note {TOKEN} end".encode()), compressed=True)
    second = grpc_frame(b"\x0a\x02hi")
    cassette = Cassette("c.jsonl")
    engine = Engine(cassette, Config(mode=Mode.RECORD))
    engine.receive_request(Request("POST", PATH, HEADERS, first + second if whole else first))
    assert isinstance(engine.next_event(), Forward)
    recorder = GrpcCallRecorder(engine.redactor, opened=0.0)
    recorder.client_message(first, 0.0)
    recorder.client_message(second, 0.01)
    recorder.client_end(0.02)
    engine.upstream_head(200, GRPC[:1], mono=0.03, sent_at=0.0)
    engine.upstream_data(grpc_frame(b"ok"), mono=0.03)
    recorder.server_message(grpc_frame(b"ok"), 0.03)
    engine.upstream_trailers(OK, mono=0.04)
    engine.upstream_end(mono=0.04)
    recorder.ended(0.04)
    pull(engine)
    assert recorder.record(engine) is not None
    (ix,) = cassette.interactions()
    body = ix.request.body
    frames = whole_frames(body)
    assert frames is not None
    assert TOKEN.encode() not in message_payload(frames[0][5:], True)
    assert ix.grpc is not None
    for message in ix.grpc.messages:
        if message.data:
            payload = message_payload(message.data[5:], bool(message.data[0]))
            assert TOKEN.encode() not in payload


def test_a_sessions_message_that_does_not_decompress_is_flagged() -> None:
    from reel_core import Cassette, Config, Engine, Forward, Mode
    from reel_core._grpc_session import GrpcCallRecorder

    from ._helpers import pull
    from .test_grpc_session import HEADERS, OK, PATH

    cassette = Cassette("c.jsonl")
    engine = Engine(cassette, Config(mode=Mode.RECORD))
    first = grpc_frame(b"\x0a\x02hi")
    corrupt = grpc_frame(b"\x1f\x8bnot gzip", compressed=True)
    engine.receive_request(Request("POST", PATH, HEADERS, first))
    assert isinstance(engine.next_event(), Forward)
    recorder = GrpcCallRecorder(engine.redactor, opened=0.0)
    recorder.client_message(first, 0.0)
    recorder.client_message(corrupt, 0.01)
    recorder.client_end(0.02)
    engine.upstream_head(200, GRPC[:1], mono=0.03, sent_at=0.0)
    recorder.server_message(grpc_frame(b"ok"), 0.03)
    engine.upstream_data(grpc_frame(b"ok"), mono=0.03)
    engine.upstream_trailers(OK, mono=0.04)
    engine.upstream_end(mono=0.04)
    recorder.ended(0.04)
    pull(engine)
    assert recorder.record(engine) is not None
    (ix,) = cassette.interactions()
    assert ix.response.encoding == "gzip"
    assert "not scanned for secrets" in (ix.response.encoding_error or "")
    # ``reel redact`` (the interaction's redaction) flags a line that lacks it
    from dataclasses import replace as with_

    bare = with_(ix, response=with_(ix.response, encoding=None, encoding_error=None))
    again = bare.redacted(Redactor(), MatchConfig())
    assert "not scanned for secrets" in (again.response.encoding_error or "")


def test_reel_redact_flags_a_line_whose_message_does_not_decompress() -> None:
    from reel_core import Interaction, RecordedRequest, RecordedResponse

    corrupt = grpc_frame(b"\x1f\x8bnot gzip", compressed=True)
    line = Interaction(
        key="sha256:" + "0" * 64,
        id="a",
        request=RecordedRequest("POST", PATH, (), corrupt),
        response=RecordedResponse(200, stream="grpc", frames=((1.0, corrupt),)),
    )
    again = line.redacted(Redactor(), MatchConfig())
    assert again is not line
    assert "corrupt gzip body" in (again.request.encoding_error or "")
    assert "corrupt gzip body" in (again.response.encoding_error or "")
    assert again.redacted(Redactor(), MatchConfig()) is again  # flagged once: no change after
