"""A secret inside a compressed gRPC message never reaches the line.

The invariant (docs/reliability.md, "A gRPC message is scanned as it
reads, compressed or not"): take a secret -- a key a pattern knows, or the
call's own ``authorization`` / ``x-api-key`` metadata echoed back -- and
place it anywhere in a gRPC message compressed with any coding a client
or server uses (gzip, zlib-wrapped deflate, raw deflate), among other
messages compressed or not, in a request body or a response stream cut
anywhere.  Recorded through the core (``record_exchange``: the one path a
recording, an import and ``reel redact`` share), the cassette line holds
it in no form a reader can decode, even after inflating every message on
the line; and every compressed message on the line still inflates, so a
replay stays a valid gRPC stream.
"""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reel_core import Redactor, Request
from reel_core.tools import grpc_frame, record_exchange
from tests.secrets import recoverable

from .strategies import secret_texts
from .test_scaling import RATIO, Case, scaling_ratio

#: The codings a compressed message comes in: (name, wbits of zlib).
CODINGS = (("gzip", zlib.MAX_WBITS | 16), ("zlib", zlib.MAX_WBITS), ("raw", -zlib.MAX_WBITS))
TOKEN = "xai-" + "Zq3Lm8Rt5Vw2Yx7Bn4Kp" * 2


def compress(data: bytes, wbits: int) -> bytes:
    packer = zlib.compressobj(wbits=wbits)
    return packer.compress(data) + packer.flush()


def inflate(message: bytes) -> bytes:
    if message[:2] == b"\x1f\x8b":
        return zlib.decompress(message, zlib.MAX_WBITS | 16)
    try:
        return zlib.decompress(message)
    except zlib.error:
        return zlib.decompress(message, -zlib.MAX_WBITS)


def frames_of(body: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(body):
        end = pos + 5 + int.from_bytes(body[pos + 1 : pos + 5], "big")
        out.append(body[pos:end])
        pos = end
    assert pos == len(body)
    return out


def inflated_lines(line: bytes) -> bytes:
    """``line`` with every gRPC message on it read inflated (each frame of
    the response, each message of the request body), as lines of JSON
    strings ``recoverable`` reads."""
    obj = json.loads(line)
    bodies: list[bytes] = []
    request_body: Any = obj["request"]["body"]
    if isinstance(request_body, dict) and "base64" in request_body:
        bodies.append(base64.b64decode(request_body["base64"]))
    for _, frame in obj["response"].get("frames", []):
        bodies.append(base64.b64decode(frame["base64"]))
    out = []
    for body in bodies:
        for frame in frames_of(body):
            message = frame[5:]
            plain = inflate(message) if frame[0] else message  # a replay must read it
            out.append(json.dumps(plain.decode("latin-1")).encode())
    return b"\n".join(out)


_message = st.tuples(
    st.binary(max_size=40),
    st.binary(max_size=40),
    st.booleans(),
    st.sampled_from(CODINGS),
)


@given(
    text=st.one_of(secret_texts(separated=True), st.just((f" {TOKEN} ", [TOKEN]))),
    others=st.lists(_message, max_size=3),
    where=st.sampled_from(("request", "response")),
    before=st.binary(max_size=60),
    after=st.binary(max_size=60),
    coding=st.sampled_from(CODINGS),
    position=st.integers(0, 3),
    cut=st.integers(1, 50),
)
def test_a_secret_anywhere_in_a_compressed_message_never_reaches_the_line(
    text: tuple[str, list[str]],
    others: list[tuple[bytes, bytes, bool, tuple[str, int]]],
    where: str,
    before: bytes,
    after: bytes,
    coding: tuple[str, int],
    position: int,
    cut: int,
) -> None:
    frames = [
        grpc_frame(compress(a + b, wbits) if packed else a + b, compressed=packed)
        for a, b, packed, (_, wbits) in others
    ]
    words, found = text
    holding = grpc_frame(compress(before + words.encode() + after, coding[1]), compressed=True)
    frames.insert(min(position, len(frames)), holding)
    body = b"".join(frames)
    metadata = (
        (b"content-type", b"application/grpc"),
        (b"grpc-encoding", coding[0].encode()),
        (b"authorization", f"Bearer {TOKEN}".encode()),
        (b"x-api-key", TOKEN.encode()),
    )
    if where == "request":
        request = Request("POST", "/xai_api.Chat/GetCompletion", metadata, body)
        chunks = [(0.01, grpc_frame(b"ok"))]
    else:
        request = Request("POST", "/xai_api.Chat/GetCompletion", metadata, grpc_frame(b"q"))
        chunks = [(0.001 * (i + 1), body[i : i + cut]) for i in range(0, len(body), cut)]
    got = record_exchange(
        request,
        200,
        [(b"content-type", b"application/grpc"), (b"grpc-encoding", coding[0].encode())],
        chunks,
        redactor=Redactor(),
        trailers=[(b"grpc-status", b"0")],
    )
    line = got.to_line()
    inflated = inflated_lines(line)  # every message on the line inflates, too
    for secret in found:
        assert recoverable(secret, line) == []
        assert recoverable(secret, inflated) == []
    assert got.response.encoding_error is None
    assert got.request.encoding_error is None


# -- linear in the message ---------------------------------------------------------------


def _binary_message(n: int) -> bytes:
    """A protobuf-like message of about ``n`` bytes: text runs between bytes
    that are not UTF-8, a secret among them."""
    run = b"some words of a prompt \xc8\x01"
    body = run * (n // len(run)) + f" {TOKEN} ".encode()
    return grpc_frame(body)


def _compressed_message(n: int) -> bytes:
    return grpc_frame(compress(_binary_message(n)[5:], zlib.MAX_WBITS | 16), compressed=True)


def _many_messages(n: int) -> bytes:
    frames = [
        grpc_frame(b"\x0a\x02hi"),
        grpc_frame(compress(b"\x0a\x02yo", -zlib.MAX_WBITS), compressed=True),
    ]
    return b"".join(frames) * (n // 20)


def _scrubbed(data: bytes) -> object:
    from reel_core._grpc import rescrubbed_body

    return rescrubbed_body(data, Redactor().data)


SCALING = {
    "binary-message": Case(_binary_message, _scrubbed, 20_000),
    "compressed-message": Case(_compressed_message, _scrubbed, 20_000),
    "many-messages": Case(_many_messages, _scrubbed, 20_000),
}


@pytest.mark.parametrize("name", sorted(SCALING))
def test_scanning_a_grpc_body_is_linear(name: str) -> None:
    """Reading a message's text runs, inflating it, and walking a body of
    many messages cost time linear in the bytes (the scaling family of
    docs/reliability.md, "Every parser is linear and bounded")."""
    assert SCALING[name].run(SCALING[name].make(100)) is not None
    ratio = scaling_ratio(SCALING[name])
    assert ratio < RATIO, f"{name}: time(10 x input) / time(input) = {ratio:.1f}"
