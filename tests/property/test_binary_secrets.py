"""A secret inside bytes that are not UTF-8 never reaches the line.

The invariant (docs/reliability.md, "Bytes that are not text are scanned
as text is"): take a secret -- a shape a pattern knows, or the request's
own credential value echoed in any spelling of the family
(``ECHO_TRANSFORMS``: as it is, JSON escapes, percent-encoding, ``+`` for
a space, HTML entities, base64 at any alignment) -- and place it anywhere
in random binary bytes, right after a byte that is no UTF-8 (or a
character cut short) and before another, so the whole is never UTF-8.
Stored through every path that writes bytes -- the engine's recording (a
request body, a whole response body, a response cut into chunks anywhere),
the WebSocket recorder (a binary message either way), the gRPC recorder (a
message of a request body or of a response stream, and a gRPC session's
log) and ``reel redact`` on a line that holds it -- the line holds it in
no form a reader can decode (``tests.secrets.recoverable``, written apart
from reel_core).  Every stored gRPC message keeps its framing: each
frame's prefix says its length, both ways.  And scanning such bytes is
linear in them.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reel_core import (
    Cassette,
    Config,
    Engine,
    Forward,
    Interaction,
    Mode,
    Recorded,
    RecordedRequest,
    RecordedResponse,
    Redactor,
    Request,
    Signal,
)
from reel_core.tools import (
    GrpcLog,
    GrpcMessage,
    WebSocketRecorder,
    exchange_redactor,
    grpc_frame,
    record_exchange,
)
from tests.secrets import recoverable

from .strategies import credential_values, echoes, secrets
from .test_scaling import RATIO, Case, scaling_ratio

#: What stands right before a secret: a byte no UTF-8 text holds, or the
#: start of a character cut short (the text rules must see a boundary).
#: Each starts with a byte no random byte before can complete into a
#: character (a letter there would make the secret part of a word, in a
#: text too).
BEFORE = (b"\xff", b"\x00\x80", b"\x00\xfe", b" \xc3", b"\x00\xe2\x82", b"\n\xf0\x9f\x98", b" ")
#: ... and right after it: each makes the whole no UTF-8, and no random byte
#: after can complete a character of it.
AFTER = (b"\xff", b"\x80\x00", b"\xc3 ", b"\xe2\x82\n", b"\xfe ", b"\xc0\xaf")


@st.composite
def placed(draw: st.DrawFn, *, shapes: bool = False) -> tuple[bytes, str, str]:
    """``(data, secret, credential)``: random bytes with a secret inside,
    what must not survive, and the credential value the request carries
    (the secret itself when it is one, echoed; else another).  With
    ``shapes`` the secret is always a shape (a line alone carries no
    request's credential values)."""
    credential = draw(credential_values())
    if shapes or draw(st.booleans()):
        kind, secret = draw(secrets())
        shown = "Bearer " + secret if kind == "bearer" else secret
    else:
        _, shown = draw(echoes(credential))
        secret = credential
    data = (
        draw(st.binary(max_size=40))
        + draw(st.sampled_from(BEFORE))
        + shown.encode("utf-8", "surrogatepass")
        + draw(st.sampled_from(AFTER))
        + draw(st.binary(max_size=40))
    )
    return data, secret, credential


def assert_not_on(line: bytes, secret: str) -> None:
    assert recoverable(secret, line) == [], line[:400]


def _pull(engine: Engine) -> list[Any]:
    events = []
    while not isinstance(event := engine.next_event(), Signal):
        events.append(event)
    return events


def _engine_line(
    request: Request, headers: list[tuple[bytes, bytes]], chunks: list[bytes]
) -> bytes:
    """``request`` recorded by an engine, the upstream answering ``chunks``."""
    engine = Engine(Cassette(), Config(mode=Mode.RECORD))
    engine.receive_request(request)
    assert any(isinstance(e, Forward) for e in _pull(engine))
    engine.upstream_head(200, headers, mono=1.0)
    for i, chunk in enumerate(chunks):
        engine.upstream_data(chunk, mono=1.0 + i / 100)
    engine.upstream_end(mono=2.0)
    _pull(engine)
    recorded = engine.record()
    assert isinstance(recorded, Recorded)
    return recorded.line


def _credential_headers(credential: str) -> tuple[tuple[bytes, bytes], ...]:
    value = credential.encode("utf-8")
    return ((b"x-api-key", value), (b"authorization", b"Bearer " + value))


OCTETS = (b"content-type", b"application/octet-stream")
#: The key of a line written here: it holds no digit, so no drawn secret (a
#: bearer token may be 16 zeros) can be read in it.
KEY = "sha256:" + "ab" * 32


@given(case=placed(), where=st.sampled_from(("request", "body", "chunks")), cut=st.integers(1, 30))
def test_no_secret_in_binary_bytes_reaches_the_engines_line(
    case: tuple[bytes, str, str], where: str, cut: int
) -> None:
    data, secret, credential = case
    headers = (*_credential_headers(credential), OCTETS)
    body = data if where == "request" else b"\x00\x01"
    request = Request("POST", "/v1/files", headers, body)
    answer = b"\xff\xfe" if where == "request" else data
    chunks = [answer[i : i + cut] for i in range(0, len(answer), cut)]
    content_type = b"application/x-ndjson" if where == "chunks" else b"application/octet-stream"
    line = _engine_line(request, [(b"content-type", content_type)], chunks)
    assert_not_on(line, secret)


@given(case=placed(), sender=st.sampled_from(("client", "server")))
def test_no_secret_in_a_binary_websocket_message_reaches_the_line(
    case: tuple[bytes, str, str], sender: str
) -> None:
    data, secret, credential = case
    headers = _credential_headers(credential)
    upgrade = Request("GET", "/v1/realtime", headers)
    # the engine's redactor for the upgrade: its credential values too
    recorder = WebSocketRecorder(upgrade, exchange_redactor(Redactor(), headers), opened=1.0)
    recorder.client_message(b'{"type":"session.update"}', False, 1.1)
    if sender == "client":
        recorder.client_message(data, True, 1.2)
    else:
        recorder.server_message(data, True, 1.2)
    recorder.closed(1000, "", "client", 1.3)
    upgraded = Interaction(
        KEY,
        KEY[7:19],
        RecordedRequest("GET", "/v1/realtime"),
        RecordedResponse(101),
    )
    assert_not_on(recorder.finish(upgraded).to_line(), secret)


def _frames(body: bytes) -> list[bytes]:
    """``body`` cut into gRPC frames by their prefixes: fails unless every
    prefix says the length that follows (the framing a client reads)."""
    out, pos = [], 0
    while pos < len(body):
        assert len(body) - pos >= 5, body
        end = pos + 5 + int.from_bytes(body[pos + 1 : pos + 5], "big")
        assert end <= len(body), body
        out.append(body[pos:end])
        pos = end
    return out


GRPC = (b"content-type", b"application/grpc")


@given(
    case=placed(),
    where=st.sampled_from(("request", "response")),
    others=st.lists(st.binary(max_size=30), max_size=3),
    position=st.integers(0, 3),
    cut=st.integers(1, 40),
)
def test_no_secret_in_a_grpc_message_reaches_the_line_and_framing_stays_true(
    case: tuple[bytes, str, str], where: str, others: list[bytes], position: int, cut: int
) -> None:
    data, secret, credential = case
    messages = [grpc_frame(m) for m in others]
    messages.insert(min(position, len(messages)), grpc_frame(data))
    body = b"".join(messages)
    headers = (*_credential_headers(credential), GRPC)
    if where == "request":
        request = Request("POST", "/xai_api.Chat/GetCompletion", headers, body)
        chunks = [(0.01, grpc_frame(b"ok"))]
    else:
        request = Request("POST", "/xai_api.Chat/GetCompletion", headers, grpc_frame(b"q"))
        chunks = [(0.001 * (i + 1), body[i : i + cut]) for i in range(0, len(body), cut)]
    got = record_exchange(
        request, 200, [GRPC], chunks, redactor=Redactor(), trailers=[(b"grpc-status", b"0")]
    )
    line = got.to_line()
    assert_not_on(line, secret)
    # every stored message, both ways, is one whole frame its prefix describes
    for frame in _frames(got.request.body):
        assert len(frame) >= 5
    for _, frame in got.response.frames:
        assert _frames(frame) == [frame]
    # a gRPC session's log: each message scrubbed the same way, framed true
    log = GrpcLog(
        (
            GrpcMessage("client", 0.0, grpc_frame(data)),
            GrpcMessage("server", 1.0, grpc_frame(data)),
        )
    )
    redactor = exchange_redactor(Redactor(), _credential_headers(credential))
    for message in log.redacted(redactor).messages:
        assert _frames(message.data) == [message.data]
        assert recoverable(secret, json.dumps(message.data.decode("latin-1")).encode()) == []
        assert secret.encode("utf-8", "surrogatepass") not in message.data


@given(case=placed(shapes=True), where=st.sampled_from(("request", "response", "frame")))
def test_reel_redact_scrubs_a_secret_in_binary_bytes_from_a_line(
    case: tuple[bytes, str, str], where: str
) -> None:
    from reel_bindings.cli import main

    data, secret, _ = case
    request = RecordedRequest("POST", "/v1/files", body=data if where == "request" else b"")
    if where == "frame":
        response = RecordedResponse(200, (), stream="chunks", frames=((0.0, data),))
    else:
        response = RecordedResponse(200, (), body=data if where == "response" else b"")
    raw = Interaction(KEY, KEY[7:19], request, response).to_line()
    assert base64.b64encode(data) in raw or data.decode("latin-1") in raw.decode("latin-1")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.jsonl"
        path.write_bytes(raw + b"\n")
        with (
            open(os.devnull, "w") as quiet,
            contextlib.redirect_stderr(quiet),
            contextlib.redirect_stdout(quiet),
        ):
            main(["redact", str(path)])
        assert_not_on(path.read_bytes(), secret)


# -- linear in the bytes ----------------------------------------------------------------


def _binary(n: int) -> bytes:
    """About ``n`` bytes of a binary body: text runs between bytes no UTF-8
    holds, a secret among them, so every rule runs."""
    run = b"words of a file \xff\xc3 a@b.co +1 555 0100 \x80"
    return run * (n // len(run)) + b"\xfe sk-proj-A1b2C3d4A1b2C3d4A1b2C3d4 \xff"


SCALING = {"binary-body": Case(_binary, Redactor().data, 20_000)}


@pytest.mark.parametrize("name", sorted(SCALING))
def test_scanning_binary_bytes_is_linear(name: str) -> None:
    """A 10x larger binary body costs about 10x (the scaling family of
    docs/reliability.md, "Every parser is linear and bounded")."""
    scrubbed = SCALING[name].run(SCALING[name].make(100))
    assert isinstance(scrubbed, bytes)
    assert b"[REDACTED:openai-key]" in scrubbed
    ratio = scaling_ratio(SCALING[name])
    assert ratio < RATIO, f"{name}: time(10 x input) / time(input) = {ratio:.1f}"
