"""The proxy writes the frames due at once as one batch: one chunk of a
chunked body per batch, not one per frame, the body unchanged; frames due
later still go out at their own deadlines, and a cut still ends the
stream where it was recorded.  (The batches themselves: the property
tests in ``tests/property/test_batches.py``.)"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import h11
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reel_bindings.proxy import Proxy
from reel_bindings.proxy._http11 import WRITE_SIZE
from reel_core import Cassette, Config, RecordedResponse, StreamCut, Timing

from .test_proxy_big import BIG, Wire, _interaction, big_cassette, request

pytestmark = pytest.mark.anyio


def chunks_of(raw: bytes) -> tuple[list[bytes], bool]:
    """The chunks of the one chunked response in ``raw``, each whole, and
    whether the response ended (a cut stream does not)."""
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method="GET", target="/", headers=[("host", "x")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(raw)
    chunks: list[bytes] = []
    while True:
        event = conn.next_event()
        if isinstance(event, h11.Data):
            if event.chunk_start:
                chunks.append(b"")
            chunks[-1] += event.data
        elif isinstance(event, h11.EndOfMessage):
            return chunks, True
        elif event is h11.NEED_DATA:
            return chunks, False


async def test_frames_due_at_once_are_one_chunk_per_write(tmp_path: Path) -> None:
    """Before batches, the proxy sent 8,000 chunks for these 8,000 frames
    (h11 framed each one); now each write is one chunk of about
    ``WRITE_SIZE`` bytes."""
    cassette = tmp_path / "big.jsonl"
    expected = big_cassette(cassette, 8000)
    wire = Wire("big", request(BIG), [])
    await Proxy(Config(timing=Timing.parse("fast")), cassette=cassette).handle(wire)
    chunks, ended = chunks_of(b"".join(wire.writes))
    assert ended
    assert b"".join(chunks) == expected
    assert len(chunks) <= len(wire.writes) <= 3 * len(expected) // WRITE_SIZE + 2
    assert all(len(c) <= WRITE_SIZE + 400 for c in chunks)  # a frame past the limit at most


def _stream(path: Path, response: RecordedResponse) -> None:
    path.write_bytes(Cassette().meta.to_line() + _interaction(BIG, response).to_line())


async def test_a_cut_stream_due_at_once_ends_as_recorded(tmp_path: Path) -> None:
    """A recording marked cut mid-stream: the frames before the cut, then
    the connection closes without the chunked body's end."""
    frames = tuple((0.0, b"data: %d\n\n" % i) for i in range(500))
    cut = StreamCut(0.0, "reset", "the upstream reset the stream")
    response = RecordedResponse(200, (), stream="sse", frames=frames, cut=cut)
    cassette = tmp_path / "cut.jsonl"
    _stream(cassette, response)
    wire = Wire("cut", request(BIG), [])
    await Proxy(Config(timing=Timing.parse("fast")), cassette=cassette).handle(wire)
    chunks, ended = chunks_of(b"".join(wire.writes))
    assert not ended
    assert b"".join(chunks) == b"".join(data for _, data in frames)
    assert not b"".join(wire.writes).endswith(b"0\r\n\r\n")


async def test_realtime_frames_keep_their_own_deadlines(tmp_path: Path) -> None:
    """Frames recorded apart are batches of their own, each written when it
    is due: a chunk a deadline, at or after it."""
    frames = tuple((i * 40.0, b"data: %d\n\n" % i) for i in range(4))
    response = RecordedResponse(200, (), stream="sse", frames=frames, end_ms=160.0)
    cassette = tmp_path / "realtime.jsonl"
    _stream(cassette, response)
    sent: list[tuple[float, bytes]] = []

    class Timed(Wire):
        async def send(self, item: bytes) -> None:
            await super().send(item)
            sent.append((time.monotonic(), bytes(item)))

    wire = Timed("rt", request(BIG), [])
    start = time.monotonic()
    await Proxy(Config(timing=Timing.parse("realtime")), cassette=cassette).handle(wire)
    chunks, ended = chunks_of(b"".join(wire.writes))
    assert ended
    assert chunks == [data for _, data in frames]
    # the head and frame 0 at once; frames 1 to 3 each no earlier than due
    bodies = [(at, data) for at, data in sent if b"data: " in data]
    assert len(bodies) == 4
    for (at, _), (due, _) in zip(bodies, frames, strict=True):
        assert at - start >= due / 1000 - 0.005
    with anyio.fail_after(1):  # nothing left running
        await anyio.sleep(0)


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    count=st.integers(0, 3000),
    sizes=st.lists(st.integers(0, 20_000), min_size=1, max_size=5),
    cut=st.booleans(),
)
async def test_a_stream_due_at_once_comes_whole_in_bounded_writes(
    tmp_path: Path, count: int, sizes: list[int], cut: bool
) -> None:
    """Any number of frames of any size, due at once: the body the client
    de-chunks is the recorded one, in order, in writes of at most
    ``WRITE_SIZE`` bytes (never the stream whole), ended or cut as recorded."""
    frames = tuple(
        (0.0, b"data: %d %s\n\n" % (i, b"x" * sizes[i % len(sizes)])) for i in range(count)
    )
    if cut:
        broke = StreamCut(0.0, "reset", "the upstream reset the stream")
        response = RecordedResponse(200, (), stream="sse", frames=frames, cut=broke)
    else:
        response = RecordedResponse(200, (), stream="sse", frames=frames, end_ms=0.0)
    cassette = tmp_path / f"s{count}.jsonl"
    _stream(cassette, response)
    wire = Wire("s", request(BIG), [])
    await Proxy(Config(timing=Timing.parse("fast")), cassette=cassette).handle(wire)
    chunks, ended = chunks_of(b"".join(wire.writes))
    assert b"".join(chunks) == b"".join(data for _, data in frames)
    assert ended is not cut
    assert max(len(w) for w in wire.writes) <= WRITE_SIZE
