"""The gRPC channels' call objects behave as grpcio's own: ``future()``,
callbacks, ``cancel()``, a stream the caller drops, the channel's
delegated methods; and what a forward that fails before any answer leaves
behind (nothing recorded, the caller's error as grpcio raised it)."""

from __future__ import annotations

import asyncio
import gc
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.bindings.grpc_server import STREAM, UNARY, Script, ScriptedServer

grpc = pytest.importorskip("grpc", reason="the gRPC binding's tests need grpcio")

from reel_bindings.grpc import ReplayedCall, aio_channel, channel  # noqa: E402

GONE = "127.0.0.1:9"
STREAMED = Script(messages=(b"a", b"b", b"c"), gap=0.02, tag="streamed")


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


@pytest.fixture(scope="module")
def recorded(server: ScriptedServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cassette holding STREAMED, a unary ``ok`` and a unary error."""
    cassette = tmp_path_factory.mktemp("calls") / "calls.jsonl"
    chan = channel(grpc.insecure_channel(server.address), cassette, mode="record")
    list(chan.unary_stream(STREAM)(STREAMED.request()))
    chan.unary_unary(UNARY)(Script(tag="ok").request())
    with pytest.raises(grpc.RpcError):
        chan.unary_unary(UNARY)(Script(code=5, details="gone", tag="error").request())
    chan.close()
    return cassette


def replaying(cassette: Path, **options: Any) -> Any:
    return channel(grpc.insecure_channel(GONE), cassette, mode="replay", **options)


# -- sync ----------------------------------------------------------------------


def test_future_answers_as_grpcio_does(recorded: Path) -> None:
    chan = replaying(recorded)
    future = chan.unary_unary(UNARY).future(Script(tag="ok").request())
    assert future.done()
    assert not future.running()
    assert not future.cancelled()
    assert not future.cancel()
    assert future.result() == b"ok"
    assert future.exception() is None
    assert future.traceback() is None
    assert future.code() is grpc.StatusCode.OK
    assert future.initial_metadata() == ()
    assert future.trailing_metadata() == ()
    assert future.details() == ""
    assert not future.is_active()
    assert future.time_remaining() is None
    assert not future.add_callback(lambda: None)
    seen: list[Any] = []
    future.add_done_callback(seen.append)
    assert seen == [future]
    failed = chan.unary_unary(UNARY).future(Script(code=5, details="gone", tag="error").request())
    assert isinstance(failed.exception(), grpc.RpcError)
    assert failed.traceback() is not None
    assert failed.code() is grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError):
        failed.result()
    chan.close()


def test_a_replayed_stream_is_a_call(recorded: Path) -> None:
    chan = replaying(recorded)
    stream = chan.unary_stream(STREAM)(STREAMED.request())
    assert isinstance(stream, ReplayedCall)
    assert isinstance(stream, grpc.Call)
    assert isinstance(stream, grpc.RpcError)
    assert stream.is_active()
    assert stream.time_remaining() is None
    called: list[str] = []
    assert stream.add_callback(lambda: called.append("done"))
    assert next(stream) == b"a"
    assert stream.cancel()
    assert called == ["done"]
    assert not stream.is_active()
    assert not stream.cancel()
    assert not stream.add_callback(lambda: None)
    with pytest.raises(grpc.RpcError) as raised:
        next(stream)
    assert raised.value.code() is grpc.StatusCode.CANCELLED
    assert "CANCELLED" in repr(stream)
    assert "CANCELLED" in stream.debug_error_string()
    chan.close()


def test_a_forwarded_stream_is_grpcios_call(server: ScriptedServer, tmp_path: Path) -> None:
    chan = channel(grpc.insecure_channel(server.address), tmp_path / "f.jsonl", mode="record")
    stream = chan.unary_stream(STREAM)(STREAMED.request())
    assert iter(stream) is stream
    assert list(stream) == list(STREAMED.messages)
    assert stream.code() is grpc.StatusCode.OK
    assert stream.details() in (None, "")
    assert stream.initial_metadata() == ()
    assert stream.trailing_metadata() == ()
    assert not stream.is_active()
    assert stream.time_remaining() is None
    assert not stream.cancel()  # over
    assert not stream.add_callback(lambda: None)
    assert isinstance(stream.debug_error_string(), str)  # grpcio's own, passed on
    chan.close()


def test_a_forwarded_stream_cancelled_or_dropped_is_recorded_as_far_as_read(
    server: ScriptedServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "left.jsonl"
    chan = channel(grpc.insecure_channel(server.address), cassette, mode="record")
    slow = Script(messages=(b"1", b"2", b"3", b"4"), gap=0.2, tag="slow")
    cancelled = chan.unary_stream(STREAM)(slow.request())
    assert next(cancelled) == b"1"
    assert cancelled.cancel()
    with pytest.raises(grpc.RpcError) as raised:
        next(cancelled)
    assert raised.value.code() is grpc.StatusCode.CANCELLED
    dropped = chan.unary_stream(STREAM)(Script(messages=(b"x", b"y"), gap=0.2).request())
    assert next(dropped) == b"x"
    del dropped
    gc.collect()
    chan.close()
    lines = [json.loads(x) for x in cassette.read_text().splitlines()[1:]]
    assert all(line["response"].get("cut") for line in lines)  # no stream passed for whole


def test_a_forward_grpcio_refuses_is_not_recorded(server: ScriptedServer, tmp_path: Path) -> None:
    cassette = tmp_path / "refused.jsonl"
    chan = channel(grpc.insecure_channel(server.address), cassette, mode="record")
    with pytest.raises(KeyError):  # grpcio's own error, passed on
        chan.unary_unary(UNARY)(Script().request(), compression="nope")
    with pytest.raises(KeyError):
        list(chan.unary_stream(STREAM)(Script().request(), compression="nope"))
    chan.close()
    assert len(cassette.read_text().splitlines()) == 1


class _Watched:
    """A channel that notes what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, Any]] = []

    def subscribe(self, callback: Any, try_to_connect: bool = False) -> None:
        self.asked.append(("subscribe", try_to_connect))

    def unsubscribe(self, callback: Any) -> None:
        self.asked.append(("unsubscribe", callback))

    def close(self) -> None:
        self.asked.append(("close", None))


def test_the_channels_own_methods_are_the_wrapped_channels(recorded: Path) -> None:
    watched = _Watched()
    with channel(watched, recorded, mode="replay") as chan:
        chan.subscribe(print, try_to_connect=True)
        chan.unsubscribe(print)
    assert watched.asked == [("subscribe", True), ("unsubscribe", print), ("close", None)]


# -- aio -----------------------------------------------------------------------


def test_aio_calls(recorded: Path) -> None:
    async def run() -> None:
        async with aio_channel(grpc.aio.insecure_channel(GONE), recorded, mode="replay") as chan:
            assert chan.get_state() is not None
            call = chan.unary_unary(UNARY)(Script(tag="ok").request())
            seen: list[Any] = []
            call.add_done_callback(seen.append)
            assert await call == b"ok"
            assert await call == b"ok"  # awaited again: the same answer
            await call.wait_for_connection()
            assert call.done()
            assert not call.cancelled()
            assert call.time_remaining() is None
            await asyncio.sleep(0)
            assert seen == [call]
            stream = chan.unary_stream(STREAM)(STREAMED.request())
            assert await stream.initial_metadata() == grpc.aio.Metadata()  # before the end
            assert not stream.done()
            assert await stream.read() == b"a"
            assert stream.cancel()
            with pytest.raises(asyncio.CancelledError):  # as grpc.aio raises it
                await stream.read()
            assert stream.cancelled()
            assert await stream.code() is grpc.StatusCode.CANCELLED

    asyncio.run(run())


def test_aio_forwards_cancelled_and_refused(server: ScriptedServer, tmp_path: Path) -> None:
    cassette = tmp_path / "aio-left.jsonl"

    async def run() -> None:
        raw = grpc.aio.insecure_channel(server.address)
        chan = aio_channel(raw, cassette, mode="record")
        await chan.channel_ready()
        slow = Script(messages=(b"1", b"2", b"3"), gap=0.3, tag="aio-slow")
        stream = chan.unary_stream(STREAM)(slow.request())
        assert await stream.read() == b"1"
        stream.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stream.read()
        with pytest.raises(KeyError):  # grpcio's own error, passed on
            await chan.unary_unary(UNARY)(Script().request(), compression="nope")
        await chan.close()

    asyncio.run(run())
    lines = [json.loads(x) for x in cassette.read_text().splitlines()[1:]]
    assert all(line["response"].get("cut") for line in lines)


def test_freeze_holds_while_the_channel_is_open(server: ScriptedServer, tmp_path: Path) -> None:
    cassette = tmp_path / "frozen.jsonl"
    chan = channel(grpc.insecure_channel(server.address), cassette, mode="record", freeze=["clock"])
    frozen = time.time()
    chan.unary_unary(UNARY)(Script(tag=f"at {frozen}").request())  # the frozen time in the call
    time.sleep(0.01)
    assert time.time() == frozen
    chan.close()
    assert time.time() != frozen
    chan = channel(grpc.insecure_channel(GONE), cassette, mode="replay", freeze=["clock"])
    assert time.time() == frozen  # the cassette's base again: the call matches
    assert chan.unary_unary(UNARY)(Script(tag=f"at {time.time()}").request()) == b"ok"
    chan.close()
