"""The in-process transports read a replay through the core's batches
(``replay_batches``, in ``aframes`` and ``frames``) and still hand the
client one piece per recorded frame, in order, then the end or the
recorded cut: batching is the core's grouping of decisions, never a join
of what the client reads.  Over generated streams, on asyncio and trio
(the async transport) and blocking (the sync one)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reel_bindings.httpcore import AsyncTransport, Transport
from reel_core import Cassette, RecordedResponse, StreamCut

from .test_proxy_big import BIG, PATH, _interaction

pytestmark = pytest.mark.anyio

URL = "http://api.openai.com" + PATH

frames_of = st.lists(
    st.one_of(st.binary(min_size=1, max_size=40), st.binary(min_size=1, max_size=70_000)),
    min_size=2,  # one frame (or none) is a whole body: no stream to play
    max_size=60,
).map(lambda pieces: tuple((0.0, piece) for piece in pieces))


def _cassette(directory: str, frames: tuple[tuple[float, bytes], ...], cut: bool) -> Path:
    if cut:
        broke = StreamCut(0.0, "reset", "the upstream reset the stream")
        response = RecordedResponse(200, (), stream="sse", frames=frames, cut=broke)
    else:
        response = RecordedResponse(200, (), stream="sse", frames=frames, end_ms=0.0)
    path = Path(directory) / "s.jsonl"
    path.write_bytes(Cassette().meta.to_line() + _interaction(BIG, response).to_line())
    return path


@settings(max_examples=25, deadline=None)
@given(frames=frames_of, cut=st.booleans())
async def test_each_recorded_frame_is_a_piece_of_its_own(
    frames: tuple[tuple[float, bytes], ...], cut: bool
) -> None:
    expected = [data for _, data in frames]
    with tempfile.TemporaryDirectory() as directory:
        path = _cassette(directory, frames, cut)
        got: list[bytes] = []
        transport = AsyncTransport(path, mode="replay", timing="fast")
        async with (
            httpx.AsyncClient(transport=transport) as client,
            client.stream("POST", URL, content=BIG) as response,
        ):
            try:
                async for piece in response.aiter_raw():
                    got.append(piece)
            except httpx.RemoteProtocolError:
                assert cut
            else:
                assert not cut
        assert got == expected
        blocking: list[bytes] = []
        with (
            httpx.Client(
                transport=Transport(path, mode="replay", timing="fast")
            ) as blocking_client,
            blocking_client.stream("POST", URL, content=BIG) as blocking_response,
        ):
            try:
                blocking.extend(blocking_response.iter_raw())
            except httpx.RemoteProtocolError:
                assert cut
        assert blocking == expected
