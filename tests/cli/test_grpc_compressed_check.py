"""``reel check`` and ``reel redact`` look inside compressed gRPC messages:
a secret a hand edit (or an older Reel) left in one is found, and redacted
so that the message still inflates."""

from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path

import pytest

from reel_bindings.cli import main
from reel_core import (
    CassetteMeta,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    Redactor,
    Request,
)
from reel_core.tools import grpc_frame, record_exchange

SECRET = "sk-proj-" + "Hq7Vn3Tz8Wm2Lp5Rx9" * 2


def gzip(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=zlib.MAX_WBITS | 16)
    return packer.compress(data) + packer.flush()


def test_a_secret_in_a_compressed_message_is_found_and_redacted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    frame = grpc_frame(gzip(f"\x0a\x30key {SECRET} ok".encode()), compressed=True)
    ix = Interaction(
        key="sha256:" + "0" * 64,
        id="a",
        request=RecordedRequest("POST", "/xai_api.Chat/GetCompletion", (), grpc_frame(b"q")),
        response=RecordedResponse(
            200, (("content-type", "application/grpc"),), stream="grpc", frames=((1.0, frame),)
        ),
    )
    path = tmp_path / "c.jsonl"
    path.write_bytes(CassetteMeta().to_line() + ix.to_line())
    assert main(["check", str(path)]) == 1
    assert "openai-key in response.frames" in capsys.readouterr().out
    assert main(["redact", str(path)]) == 0
    assert main(["check", str(path)]) == 0
    line = json.loads(path.read_bytes().splitlines()[1])
    stored = base64.b64decode(line["response"]["frames"][0][1]["base64"])
    assert stored[0] == 1
    plain = zlib.decompress(stored[5:], zlib.MAX_WBITS | 16)  # still a gzip message
    assert SECRET.encode() not in plain
    assert plain.startswith(b"\x0a\x30key ")


def test_a_message_that_does_not_decompress_fails_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    packer = zlib.compressobj(9, wbits=zlib.MAX_WBITS | 16)
    bomb = b"".join(packer.compress(bytes(1 << 20)) for _ in range(40)) + packer.flush()
    grpc = ((b"content-type", b"application/grpc"),)
    ix = record_exchange(
        Request("POST", "/xai_api.Chat/GetCompletion", grpc, grpc_frame(b"q")),
        200,
        grpc,
        [(0.01, grpc_frame(bomb, compressed=True))],
        redactor=Redactor(),
    )
    path = tmp_path / "c.jsonl"
    path.write_bytes(CassetteMeta().to_line() + ix.to_line())
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "a compressed gRPC message kept as it came, not scanned for secrets" in out
    assert "decodes to over 33554432 bytes" in out
