"""The proxy replays over HTTP/2 in batches, as over HTTP/1.1: the frames
due at once go to the session as one piece of body (``replay_batches``,
``H2Session.send_frames``), the body unchanged; no more than
``BUFFERED_MAX`` bytes (and a batch) of a replay wait for a client's
window, however long the stream; frames due later go out at their own
deadlines; a client that resets the stream mid-way stops it.  Each test
runs on asyncio and on trio, the client an h2 connection in memory (no
socket: the proxy's own pump, every byte through it)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.abc
import anyio.lowlevel
import h2.config
import h2.connection
import h2.events
import h2.settings
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reel_bindings.proxy import Proxy
from reel_bindings.proxy._http2 import BUFFERED_MAX
from reel_bindings.proxy._http11 import WRITE_SIZE
from reel_core import Cassette, Config, RecordedResponse, StreamCut, Timing
from reel_core.tools import H2Session

from .test_proxy_big import BIG, PATH, _interaction

pytestmark = pytest.mark.anyio


class H2Wire(anyio.abc.ByteStream):
    """An HTTP/2 client connection in memory: one request, then what the
    proxy writes is read as it comes (its windows given back as read, or
    not: ``reads=False``).  The client ends the connection once its stream
    is over, or when ``leave`` says so (after each write it reads)."""

    def __init__(
        self, body: bytes, *, reads: bool = True, leave: Callable[[H2Wire], bool] | None = None
    ) -> None:
        config = h2.config.H2Configuration(client_side=True, header_encoding=None)
        self.conn = h2.connection.H2Connection(config=config)
        self.conn.initiate_connection()
        self.reads = reads
        if reads:  # the windows wide open, as a client reading at once
            self.conn.increment_flow_control_window(1 << 24)
            self.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 24})
        self.sid = self.conn.get_next_available_stream_id()
        head = [
            (b":method", b"POST"),
            (b":path", PATH.encode()),
            (b":scheme", b"http"),
            (b":authority", b"reel"),
            (b"content-type", b"application/json"),
        ]
        self.conn.send_headers(self.sid, head)
        self.conn.send_data(self.sid, body, end_stream=True)
        self.leave = leave
        self.data = b""
        #: When each DATA frame came (``time.monotonic``) and its bytes.
        self.frames: list[tuple[float, bytes]] = []
        self.ended = False
        self.reset = False
        self.written = 0
        self._done = anyio.Event()
        self._moved = anyio.Event()

    async def receive(self, max_bytes: int = 65536) -> bytes:
        await anyio.lowlevel.checkpoint()
        while True:
            out = self.conn.data_to_send()
            if out:
                return bytes(out)
            if self._done.is_set():
                raise anyio.EndOfStream
            self._moved = anyio.Event()
            await self._moved.wait()

    def moved(self) -> None:
        """The client has bytes to send, or is done: the proxy reads on."""
        self._moved.set()

    async def send(self, item: bytes) -> None:
        await anyio.lowlevel.checkpoint()  # the socket takes the bytes once the loop ran
        self.written += len(item)
        for event in self.conn.receive_data(bytes(item)):
            if isinstance(event, h2.events.DataReceived) and event.stream_id == self.sid:
                self.data += event.data
                if event.data:  # not the empty one END_STREAM may come in
                    self.frames.append((time.monotonic(), bytes(event.data)))
                if self.reads:
                    self.conn.acknowledge_received_data(event.flow_controlled_length, self.sid)
            elif isinstance(event, h2.events.StreamEnded):
                self.ended = True
            elif isinstance(event, h2.events.StreamReset):
                self.reset = True
        if self.ended or self.reset:
            self._done.set()
        elif self.leave is not None and self.leave(self):
            self.conn.reset_stream(self.sid)
            self._done.set()
        self.moved()

    async def send_eof(self) -> None:
        await anyio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        self._done.set()
        self.moved()
        await anyio.lowlevel.checkpoint()


def _cassette(path: Path, response: RecordedResponse) -> Path:
    path.write_bytes(Cassette().meta.to_line() + _interaction(BIG, response).to_line())
    return path


def _sse(count: int, sizes: list[int]) -> tuple[tuple[float, bytes], ...]:
    return tuple(
        (0.0, b"data: %d %s\n\n" % (i, b"x" * sizes[i % len(sizes)])) for i in range(count)
    )


async def _play(path: Path, wire: H2Wire, timing: str = "fast") -> None:
    with anyio.fail_after(60):
        await Proxy(Config(timing=Timing.parse(timing)), cassette=path).handle(wire)


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    count=st.integers(0, 3000),
    sizes=st.lists(st.integers(0, 20_000), min_size=1, max_size=5),
    cut=st.booleans(),
)
async def test_a_stream_due_at_once_comes_whole_and_in_order(
    tmp_path: Path, count: int, sizes: list[int], cut: bool
) -> None:
    frames = _sse(count, sizes)
    if cut:
        broke = StreamCut(0.0, "reset", "the upstream reset the stream")
        response = RecordedResponse(200, (), stream="sse", frames=frames, cut=broke)
    else:
        response = RecordedResponse(200, (), stream="sse", frames=frames, end_ms=0.0)
    wire = H2Wire(BIG)
    await _play(_cassette(tmp_path / f"s{count}.jsonl", response), wire)
    assert wire.data == b"".join(data for _, data in frames)
    assert (wire.ended, wire.reset) == ((False, True) if cut else (True, False))


async def test_a_client_that_stops_reading_holds_a_bounded_queue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Event by event, a fast replay put the whole stream in the session's
    queue at once (here 5 MB); now the pump stops once ``BUFFERED_MAX``
    bytes wait, and goes on as the client reads.  The client reads
    nothing for a while, then gives its window back: the body is whole."""
    frames = _sse(24_000, [150, 250])
    response = RecordedResponse(200, (), stream="sse", frames=frames, end_ms=0.0)
    queued: list[int] = []
    sent, sent_frames = H2Session.send, H2Session.send_frames

    def send(self: H2Session, stream_id: int, event: object) -> None:
        sent(self, stream_id, event)  # type: ignore[arg-type]
        queued.append(self.buffered(stream_id))

    def send_frames(self: H2Session, stream_id: int, batch: object) -> None:
        sent_frames(self, stream_id, batch)  # type: ignore[arg-type]
        queued.append(self.buffered(stream_id))

    monkeypatch.setattr(H2Session, "send", send)
    monkeypatch.setattr(H2Session, "send_frames", send_frames)
    wire = H2Wire(BIG, reads=False)

    async def read_later() -> None:
        await anyio.sleep(0.2)
        assert not wire.ended
        wire.reads = True
        wire.conn.increment_flow_control_window(1 << 24)
        wire.conn.increment_flow_control_window(1 << 24, stream_id=wire.sid)
        wire.moved()

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_later)
        await _play(_cassette(tmp_path / "big.jsonl", response), wire)
    body = b"".join(data for _, data in frames)
    assert wire.data == body
    assert wire.ended
    assert len(body) > 4 * BUFFERED_MAX
    assert max(queued) <= BUFFERED_MAX + WRITE_SIZE + 300


async def test_a_client_resetting_a_long_stream_stops_it(tmp_path: Path) -> None:
    frames = _sse(24_000, [150, 250])
    response = RecordedResponse(200, (), stream="sse", frames=frames, end_ms=0.0)
    wire = H2Wire(BIG, leave=lambda w: len(w.data) >= 200_000)
    await _play(_cassette(tmp_path / "big.jsonl", response), wire)
    body = b"".join(data for _, data in frames)
    assert not wire.ended
    assert body.startswith(wire.data)
    # what the proxy wrote after the reset is bounded: it stopped
    assert wire.written < len(body) // 2


async def test_realtime_frames_keep_their_own_deadlines(tmp_path: Path) -> None:
    """Batches do not leak into realtime: each deadline's frames go out at
    it, never before, in a batch of their own."""
    frames = (
        (0.0, b"data: 0\n\n"),
        (60.0, b"data: 1\n\n"),
        (60.0, b"data: 1b\n\n"),
        (120.0, b"data: 2\n\n"),
    )
    response = RecordedResponse(200, (), stream="sse", frames=frames, end_ms=150.0)
    wire = H2Wire(BIG)
    start = time.monotonic()
    await _play(_cassette(tmp_path / "rt.jsonl", response), wire, "realtime")
    assert wire.ended
    assert [data for _, data in wire.frames] == [
        b"data: 0\n\n",
        b"data: 1\n\ndata: 1b\n\n",
        b"data: 2\n\n",
    ]
    for (at, _), due in zip(wire.frames, (0.0, 60.0, 120.0), strict=True):
        assert at - start >= due / 1000 - 0.005
