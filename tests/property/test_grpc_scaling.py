"""gRPC message splitting is linear in the stream however it is cut (the
invariant of docs/reliability.md, "Every parser is linear and bounded",
measured as :mod:`tests.property.test_scaling` measures the family)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from reel_core import RecordedRequest, Redactor
from reel_core._record import Recorder
from reel_core.tools import GrpcSplitter, grpc_frame, grpc_messages

from .test_scaling import RATIO, Case, scaling_ratio


def _fed(chunk: int) -> Callable[[bytes], object]:
    def run(body: bytes) -> list[bytes]:
        splitter = GrpcSplitter()
        out = []
        for i in range(0, len(body), chunk):
            out += splitter.feed(body[i : i + chunk])
        return [*out, splitter.close()]

    return run


def _one_message(n: int) -> bytes:
    """One message of ``n`` bytes, after a few small ones."""
    return grpc_frame(b"x") * 100 + grpc_frame(b"QUJD" * (n // 4))


def _unfinished(n: int) -> bytes:
    """A stream cut inside a message of ``n`` bytes."""
    return _one_message(n)[:-1]


def _small_messages(n: int) -> bytes:
    return grpc_frame(b"\x08\x01") * (n // 7)


def _recorded(body: bytes) -> object:
    recorder = Recorder(
        RecordedRequest("POST", "/xai_api.Chat/GetCompletionChunk"),
        key="sha256:" + "0" * 64,
        id="id0",
        redactor=Redactor(),
    )
    recorder.head(200, ((b"content-type", b"application/grpc"),), 0.0, None)
    for i in range(0, len(body), 64):
        recorder.data(body[i : i + 64], i / 1e6)
    return recorder.end(1.0)


CASES: dict[str, Case] = {
    "grpc-one-message-fed": Case(_one_message, _fed(16), 40_000),
    "grpc-unfinished-message-fed": Case(_unfinished, _fed(16), 40_000),
    "grpc-small-messages-fed": Case(_small_messages, _fed(3), 20_000),
    "grpc-small-messages-whole": Case(_small_messages, grpc_messages, 40_000),
    "grpc-recorded-cut-mid-message": Case(_unfinished, _recorded, 50_000),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_grpc_splitting_is_linear(name: str) -> None:
    ratio = scaling_ratio(CASES[name])
    assert ratio < RATIO, f"{name}: time(10 x input) / time(input) = {ratio:.1f}"
