"""The proxy's upstream client against a real gRPC server (grpcio, a generic
handler on raw bytes): unary and server-streaming calls, trailing metadata,
an error status; then the same calls recorded through the proxy."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from reel_bindings._upstream import AsyncUpstream
from reel_core import Mode, Request
from reel_core.tools import grpc_frame, grpc_messages

from .proxy_support import interactions, options, proxied

if TYPE_CHECKING:
    import grpc
else:
    grpc = pytest.importorskip(
        "grpc", reason="the real gRPC server needs grpcio: pip install 'reel-llm[grpc]'"
    )

pytestmark = pytest.mark.anyio

STREAM, FAIL = "/pkg.Service/Stream", "/pkg.Service/Fail"

HEADERS = ((b"content-type", b"application/grpc"), (b"authorization", b"Bearer s3cr3t-grpc"))


def _unary(request: bytes, context: Any) -> bytes:
    context.set_trailing_metadata((("x-trail", "unary"),))
    return b"echo:" + request


def _stream(request: bytes, context: Any) -> Iterator[bytes]:
    context.set_trailing_metadata((("x-trail", "stream"),))
    for i in range(3):
        yield b"%s #%d" % (request, i)


def _fail(request: bytes, context: Any) -> bytes:
    context.abort(grpc.StatusCode.PERMISSION_DENIED, "no way: 100%")
    raise AssertionError("abort() raises")


@contextmanager
def grpc_server() -> Iterator[str]:
    """A grpcio server on 127.0.0.1 (raw bytes in and out); its URL."""
    handler = grpc.method_handlers_generic_handler(
        "pkg.Service",
        {
            "Unary": grpc.unary_unary_rpc_method_handler(_unary),
            "Stream": grpc.unary_stream_rpc_method_handler(_stream),
            "Fail": grpc.unary_unary_rpc_method_handler(_fail),
        },
    )
    server = grpc.server(ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop(None)


async def call(
    upstream: AsyncUpstream, url: str, method: str, message: bytes
) -> tuple[int, list[tuple[bytes, bytes]], list[bytes], dict[bytes, bytes]]:
    request = Request("POST", f"/pkg.Service/{method}", HEADERS, grpc_frame(message))
    async with upstream.send(request, url + request.target) as response:
        body = b"".join([chunk async for chunk in response.chunks()])
    return response.status, response.headers, grpc_messages(body), dict(response.trailers)


async def test_unary_streaming_and_an_error_status_from_grpcio() -> None:
    with grpc_server() as url:
        upstream = AsyncUpstream(read_timeout=10)
        unary = await call(upstream, url, "Unary", b"hi")
        stream = await call(upstream, url, "Stream", b"go")
        failed = await call(upstream, url, "Fail", b"x")
        await upstream.aclose()
    status, headers, messages, trailers = unary
    assert status == 200
    assert dict(headers)[b"content-type"] == b"application/grpc"
    assert messages == [b"echo:hi"]
    assert trailers[b"grpc-status"] == b"0"
    assert trailers[b"x-trail"] == b"unary"
    assert stream[2] == [b"go #0", b"go #1", b"go #2"]
    assert stream[3][b"grpc-status"] == b"0"
    assert stream[3][b"x-trail"] == b"stream"
    # a Trailers-Only answer: its status is its trailers, not its head
    status, headers, messages, trailers = failed
    assert status == 200
    assert messages == []
    assert trailers[b"grpc-status"] == b"7"  # PERMISSION_DENIED
    assert trailers[b"grpc-message"] == b"no way: 100%25"
    assert not any(name.startswith(b"grpc-status") for name, _ in headers)


async def test_grpc_calls_recorded_through_the_proxy(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    sent = {"content-type": "application/grpc", "authorization": "Bearer s3cr3t-grpc"}
    with grpc_server() as url:
        async with proxied(options(Mode.RECORD, cassette, upstream=url)) as client:
            stream = await client.post(STREAM, content=grpc_frame(b"go"), headers=sent)
            failed = await client.post(FAIL, content=grpc_frame(b"x"), headers=sent)
    assert grpc_messages(stream.content) == [b"go #0", b"go #1", b"go #2"]
    assert failed.status_code == 200
    recorded_stream, recorded_failure = interactions(cassette)
    assert recorded_stream.response.stream == "grpc"
    assert [data for _, data in recorded_stream.response.frames] == [
        grpc_frame(b"go #%d" % i) for i in range(3)
    ]
    assert dict(recorded_stream.response.trailers)["grpc-status"] == "0"
    assert dict(recorded_failure.response.trailers)["grpc-status"] == "7"
    assert b"s3cr3t-grpc" not in cassette.read_bytes()  # gRPC metadata redacted as headers
