"""The proxy forwards a gRPC request upstream over HTTP/2: its trailers are
recorded (``upstream_trailers``, before the end), and an upstream that
resets the stream mid-body is recorded cut, as an h11 cut is."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from reel_core import Mode
from tests.fakes.upstream import serve_fake
from tests.h2_server import serve_h2

from .proxy_support import interactions, options, proxied

pytestmark = pytest.mark.anyio

PATH = "/pkg.Service/Stream"


def frame(message: bytes) -> bytes:
    return b"\0" + len(message).to_bytes(4, "big") + message


HEADERS = {"content-type": "application/grpc", "x-h2-trailers": "grpc-status=0,grpc-message=ok"}


async def test_a_grpc_stream_is_recorded_with_its_trailers_and_replays(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    request = frame(b"hello")
    async with serve_h2() as server:
        asks = {**HEADERS, "x-h2-grpc": "3", "x-h2-chunks": "3", "x-h2-delay-ms": "20"}
        async with proxied(options(Mode.RECORD, cassette, upstream=server.url)) as client:
            recorded = await client.post(PATH, content=request, headers=asks)
    messages = [frame(b"%s reply %d to 10 bytes" % (PATH.encode(), i)) for i in range(3)]
    assert recorded.status_code == 200
    assert recorded.content == b"".join(messages)
    assert server.preface == [True]  # the proxy went upstream over HTTP/2
    (interaction,) = interactions(cassette)
    response = interaction.response
    assert response.stream == "grpc"
    assert [data for _, data in response.frames] == messages
    assert response.trailers == (("grpc-status", "0"), ("grpc-message", "ok"))
    assert response.cut is None

    # the server is gone: the recording answers
    async with proxied(options(Mode.REPLAY, cassette)) as client:
        replayed = await client.post(PATH, content=request, headers=asks)
    assert replayed.status_code == 200
    assert replayed.content == recorded.content


async def test_a_stream_reset_mid_body_is_recorded_cut(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    async with serve_h2() as server:
        asks = {**HEADERS, "x-h2-size": "5000", "x-h2-reset-after": "2000"}
        async with (
            proxied(options(Mode.RECORD, cassette, upstream=server.url)) as client,
            client.stream("POST", PATH, content=frame(b"x"), headers=asks) as answer,
        ):
            with pytest.raises(httpx.RemoteProtocolError):
                await answer.aread()  # the proxy passes the cut on
    assert answer.status_code == 200
    (interaction,) = interactions(cassette)
    cut = interaction.response.cut
    assert cut is not None
    assert cut.error == "reset"
    assert "RST_STREAM INTERNAL_ERROR" in cut.detail
    assert interaction.response.trailers == ()


async def test_an_upstream_that_does_not_speak_http2_is_a_502_that_says_so(
    tmp_path: Path,
) -> None:
    cassette = tmp_path / "c.jsonl"
    async with (
        serve_fake() as fake,
        proxied(options(Mode.RECORD, cassette, upstream=fake.url)) as client,
    ):
        answer = await client.post(PATH, content=frame(b"x"), headers=HEADERS)
    assert answer.status_code == 502
    message = answer.json()["error"]["message"]
    assert "does not speak HTTP/2" in message
    assert "HTTP/1.1 404" in message  # what it answered instead
    assert interactions(cassette) == []  # nothing recorded


async def test_malformed_trailers_are_recorded_cut_saying_which_rule(tmp_path: Path) -> None:
    """The upstream client checks each header block (every rule of h2's
    own validation but the whitespace one): one that breaks a rule cuts the
    answer where it came, the line says why, the client takes no whole."""
    cassette = tmp_path / "c.jsonl"
    async with serve_h2() as server:
        asks = {**HEADERS, "x-h2-grpc": "1", "x-h2-trailers": "grpc-status=0,Grpc-Message=ok"}
        async with (
            proxied(options(Mode.RECORD, cassette, upstream=server.url)) as client,
            client.stream("POST", PATH, content=frame(b"x"), headers=asks) as answer,
        ):
            with pytest.raises(httpx.RemoteProtocolError):
                await answer.aread()
    (interaction,) = interactions(cassette)
    cut = interaction.response.cut
    assert cut is not None
    assert cut.error == "protocol"
    assert "an uppercase header name b'Grpc-Message'" in cut.detail
    assert interaction.response.trailers == ()
    assert len(interaction.response.frames) == 1  # the message before it
