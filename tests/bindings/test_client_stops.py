"""A client that stops without closing what it read still leaves its recording.

Three ways a client (or the code around it) stops, each of which lost or cut
recordings that the framework matrix (``tests/frameworks``) made: the block
running the proxy is left right after a stream was left; an in-process
client is closed while a response it stopped reading is still open; a task
is cancelled while it waits for the next chunk.  Rule: an answer whose
start reached the client is on disk once the proxy or transport is done,
whole when the upstream ends it within the record grace, else cut as the
client's, never missing.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import httpx
import httpx2
import pytest

from reel_bindings.httpcore import AsyncTransport, Transport
from reel_bindings.proxy import running
from reel_core import Mode
from tests.fakes.upstream import FRAME_DELAY_HEADER, serve_fake

from .proxy_support import chat_call, interactions, options
from .test_proxy_recordings import Client

pytestmark = pytest.mark.anyio

#: Frames 20 ms apart: the client leaves well before the stream ends.
FRAMES_20MS = {FRAME_DELAY_HEADER: "20", "content-type": "application/json"}


_SLOWER = ((FRAME_DELAY_HEADER, "20"),)


def _body(prompt: str, *, stream: bool = True) -> bytes:
    return chat_call(prompt, stream=stream).content


async def test_leaving_running_right_after_a_client_left_a_stream_keeps_it_whole(
    tmp_path: Path,
) -> None:
    cassette = tmp_path / "c.jsonl"
    async with (
        serve_fake() as fake,
        running(options(Mode.RECORD, cassette, upstream=fake.url)) as url,
    ):
        client = Client(url)  # raw h11: it leaves at the first event
        got = await client.call(
            "one two three four five", stream=True, enough=b"\n\n", headers=_SLOWER
        )
        assert b"[DONE]" not in got
        # the block is left at once: the proxy stops as on SIGTERM
    (line,) = interactions(cassette)
    assert line.response.cut is None
    assert line.response.content.endswith(b"data: [DONE]\n\n")


async def test_leaving_running_right_after_answers_keeps_every_one(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    async with (
        serve_fake() as fake,
        running(options(Mode.RECORD, cassette, upstream=fake.url)) as url,
        httpx.AsyncClient(base_url=url, trust_env=False) as client,
        anyio.create_task_group() as tg,
    ):
        for n in range(6):
            tg.start_soon(_post, client, f"question {n}")
    recorded = interactions(cassette)
    prompts = sorted(json.loads(line.request.body)["messages"][0]["content"] for line in recorded)
    assert prompts == sorted(f"question {n}" for n in range(6))


async def _post(client: httpx.AsyncClient, prompt: str) -> None:
    response = await client.post(
        "/v1/chat/completions",
        content=_body(prompt, stream=False),
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 200


async def test_closing_an_async_client_over_a_stream_left_open_records_it_whole(
    tmp_path: Path,
) -> None:
    cassette = tmp_path / "c.jsonl"
    async with serve_fake() as fake:
        client = httpx2.AsyncClient(transport=AsyncTransport(cassette, mode="record"))
        request = client.build_request(
            "POST",
            fake.url + "/v1/chat/completions",
            content=_body("one two three four"),
            headers=FRAMES_20MS,
        )
        response = await client.send(request, stream=True)
        chunks = response.aiter_raw()
        await anext(chunks)  # the stream is left, the response not closed
        await client.aclose()
        (line,) = interactions(cassette)
        await chunks.aclose()  # (after: a generator trio would warn about)
    assert line.response.cut is None
    assert line.response.content.endswith(b"data: [DONE]\n\n")


def test_closing_a_client_over_a_stream_left_open_records_it_whole(tmp_path: Path) -> None:
    from tests.fakes.upstream import FakeUpstreamThread

    cassette = tmp_path / "c.jsonl"
    with FakeUpstreamThread() as fake:
        client = httpx2.Client(transport=Transport(cassette, mode="record"))
        request = client.build_request(
            "POST",
            fake.url + "/v1/chat/completions",
            content=_body("one two three four"),
            headers=FRAMES_20MS,
        )
        response = client.send(request, stream=True)
        chunks = response.iter_raw()
        next(chunks)  # the stream is left, the response not closed
        client.close()
        (line,) = interactions(cassette)
        response.close()
    assert line.response.cut is None
    assert line.response.content.endswith(b"data: [DONE]\n\n")


async def test_a_read_cancelled_in_process_is_recorded_as_the_clients_cut(
    tmp_path: Path,
) -> None:
    cassette = tmp_path / "c.jsonl"
    seen: list[bytes] = []
    async with (
        serve_fake() as fake,
        httpx2.AsyncClient(transport=AsyncTransport(cassette, mode="record")) as client,
    ):
        request = client.build_request(
            "POST",
            fake.url + "/v1/chat/completions",
            content=_body("one two three four"),
            headers={**FRAMES_20MS, FRAME_DELAY_HEADER: "200"},
        )
        response = await client.send(request, stream=True)
        with anyio.move_on_after(0.3):  # cancelled while it waits for a frame
            async for chunk in response.aiter_raw():
                seen.append(chunk)
        await response.aclose()
    (line,) = interactions(cassette)  # recorded, not dropped
    assert seen
    assert line.response.content.startswith(b"".join(seen))
    if line.response.cut is not None:  # the cancellation ended the body under Reel
        assert line.response.cut.error == "client-closed"
    else:  # the read on took the rest within the grace
        assert line.response.content.endswith(b"data: [DONE]\n\n")
