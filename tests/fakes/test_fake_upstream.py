"""The fake upstream itself, driven with httpx: routes, wire shapes, timing, faults."""

from __future__ import annotations

import base64
import gzip
import itertools
import json
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx
import pytest

from tests.fakes.openai_wire import embedding_vector
from tests.fakes.upstream import (
    CUT_AFTER,
    FRAME_DELAY_HEADER,
    GARBAGE,
    SCENARIO_HEADER,
    SLOW_FRAME_DELAY,
    FakeUpstream,
    FakeUpstreamThread,
    ReceivedRequest,
    Reply,
    Scenario,
    ToolSpec,
    closed_port_url,
    fragments,
    reply_text,
    respond,
    serve_fake,
    text_pieces,
    tool_arguments,
)
from tests.fakes.wire import UnknownScenarioError, parse_scenarios
from tests.secrets import AZURE_KEY, COOKIE_VALUE, ESCAPED_KEY, GATEWAY_TOKEN, QUERY_KEY

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
CHAT = "/v1/chat/completions"
PARAMS = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}
WEATHER = ToolSpec("get_weather", PARAMS)


def chat_body(prompt: str = "hello there", **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": prompt}], **extra}


def anthropic_body(prompt: str = "hello there", **extra: Any) -> dict[str, Any]:
    messages = [{"role": "user", "content": prompt}]
    return {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": messages, **extra}


def gemini_body(prompt: str = "hello there") -> dict[str, Any]:
    return {"contents": [{"role": "user", "parts": [{"text": prompt}]}]}


def sse_events(body: bytes, sep: bytes = b"\n\n") -> list[tuple[str | None, bytes]]:
    """(event name, data) of each frame of an SSE body."""
    events: list[tuple[str | None, bytes]] = []
    for frame in body.split(sep):
        if not frame:
            continue
        name, data = None, b""
        for line in frame.splitlines():
            if line.startswith(b"event: "):
                name = line[len(b"event: ") :].decode()
            elif line.startswith(b"data: "):
                data = line[len(b"data: ") :]
        events.append((name, data))
    return events


@dataclass
class Sink:
    """What a client read before the fake let it down."""

    status: int | None = None
    chunks: list[bytes] = field(default_factory=list)

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)


async def read_into(
    sink: Sink, client: httpx.AsyncClient, path: str, body: dict[str, Any], **kw: Any
) -> None:
    """POST and read the raw body into ``sink`` chunk by chunk (so a failure keeps the start)."""
    async with client.stream("POST", path, json=body, **kw) as response:
        sink.status = response.status_code
        async for chunk in response.aiter_raw():
            sink.chunks.append(chunk)


async def receive_all(stream: anyio.abc.ByteStream, sink: Sink) -> None:
    while True:
        sink.chunks.append(await stream.receive())


@dataclass
class Timed:
    """A streamed body as a client saw it: when it asked, and each chunk with its time."""

    sent: float
    response: httpx.Response
    chunks: list[tuple[float, bytes]]

    @property
    def body(self) -> bytes:
        return b"".join(chunk for _, chunk in self.chunks)

    def frame_times(self, frames: Sequence[bytes]) -> list[float]:
        """When each of ``frames`` (which make up the body) had fully arrived."""
        assert b"".join(frames) == self.body
        ends = list(itertools.accumulate(len(f) for f in frames))
        times: list[float] = []
        received = 0
        for at, chunk in self.chunks:
            received += len(chunk)
            while len(times) < len(ends) and ends[len(times)] <= received:
                times.append(at)
        return times

    def assert_paced(self, frames: Sequence[bytes], delay: float) -> None:
        """Frame ``i`` (1-based) cannot arrive before ``i * delay`` after the request.

        A lower bound only: a busy machine makes the client late, never the
        fake early, so this holds under any load.
        """
        for index, at in enumerate(self.frame_times(frames), start=1):
            assert at - self.sent >= index * delay - 0.002, (index, at - self.sent)


async def timed_chunks(
    client: httpx.AsyncClient, path: str, body: dict[str, Any], **kw: Any
) -> Timed:
    """POST ``json.dumps(body)`` and read the raw body, stamping each chunk as it arrives."""
    chunks: list[tuple[float, bytes]] = []
    sent = time.monotonic()
    content = json.dumps(body).encode()
    async with client.stream("POST", path, content=content, **kw) as response:
        async for chunk in response.aiter_raw():
            chunks.append((time.monotonic(), chunk))
    return Timed(sent, response, chunks)


def expected_frames(path: str, body: dict[str, Any], **headers: str) -> tuple[bytes, ...]:
    """The frames the fake sends for ``timed_chunks(path, body)``, from its sans-IO core."""
    content = json.dumps(body).encode()
    heads = tuple((k.replace("_", "-"), v) for k, v in headers.items())
    return respond(ReceivedRequest("POST", path, heads, content)).frames


# ------------------------------------------------------------------- lifecycle


async def test_serves_keep_alive_and_records_requests() -> None:
    async with serve_fake() as fake, httpx.AsyncClient(base_url=fake.url) as client:
        assert fake.url.startswith("http://127.0.0.1:")
        for n in range(3):
            content = json.dumps(chat_body(f"q{n}")).encode()
            response = await client.post(
                f"{CHAT}?n={n}", content=content, headers={"X-Custom": "Yes"}
            )
            assert response.status_code == 200
        assert fake.connections == 1
        assert [r.target for r in fake.requests] == [f"{CHAT}?n={n}" for n in range(3)]
        first = fake.requests[0]
        assert first.method == "POST"
        assert first.path == CHAT
        assert first.query == {"n": ["0"]}
        assert first.header("x-custom") == "Yes"
        assert ("x-custom", "Yes") in first.headers
        assert first.json() == chat_body("q0")
        assert first.body == json.dumps(chat_body("q0")).encode()


async def test_port_is_closed_after_exit() -> None:
    async with serve_fake() as fake:
        url = fake.url
    async with httpx.AsyncClient() as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(url)


async def test_closed_port_url_refuses() -> None:
    async with httpx.AsyncClient() as client:
        with pytest.raises(httpx.ConnectError):
            await client.post(closed_port_url() + CHAT, json=chat_body())


async def test_same_request_same_bytes() -> None:
    async with serve_fake() as fake, httpx.AsyncClient(base_url=fake.url) as client:
        a = await client.post(CHAT, json=chat_body(stream=True))
        b = await client.post(CHAT, json=chat_body(stream=True))
        c = await client.post(CHAT, json=chat_body("other", stream=True))
    assert a.content == b.content
    assert a.headers == b.headers
    assert a.content != c.content


async def test_push_reply_scripts_the_next_answer() -> None:
    async with serve_fake() as fake, httpx.AsyncClient(base_url=fake.url) as client:
        fake.push_reply(Reply(201, (("content-type", "text/plain"),), (b"a", b": b\r\n"), True))
        scripted = await client.get("/anything")
        routed = await client.post(CHAT, json=chat_body())
    assert (scripted.status_code, scripted.text) == (201, "a: b\r\n")
    assert routed.status_code == 200


async def test_unknown_route_is_404_without_the_query() -> None:
    async with serve_fake() as fake, httpx.AsyncClient(base_url=fake.url) as client:
        unknown = await client.post("/v2/nothing?key=AIzaSECRETSECRET", json={})
        get = await client.get(CHAT)
    assert unknown.status_code == get.status_code == 404
    assert unknown.json()["error"]["message"] == "Invalid URL (POST /v2/nothing)"
    assert b"AIzaSECRET" not in unknown.content


ODD = {
    "model": 7,
    "messages": "not a list",
    "input": {"x": 1},
    "contents": "nope",
    "tools": {"a": 1},
    "stream_options": 5,
    "tool_choice": ["x"],
    "dimensions": "four",
}


@pytest.mark.parametrize(
    "path",
    [
        CHAT,
        "/v1/responses",
        "/v1/embeddings",
        "/v1/messages",
        "/v1beta/models/g:generateContent",
        "/v1beta/models/g:streamGenerateContent",
    ],
)
@pytest.mark.parametrize("stream", [False, True])
async def test_odd_but_valid_json_gets_an_answer(path: str, stream: bool) -> None:
    async with serve_fake() as fake, httpx.AsyncClient(base_url=fake.url) as client:
        response = await client.post(path, json={**ODD, "stream": stream})
        assert response.status_code == 200
        assert fake.errors == []


# ---------------------------------------------------------------------- openai


async def test_openai_chat_plain() -> None:
    async with serve_fake() as fake, httpx.AsyncClient(base_url=fake.url) as client:
        response = await client.post(CHAT, json=chat_body("what is up"))
    assert response.headers["content-type"] == "application/json"
    assert response.headers["content-length"] == str(len(response.content))
    assert response.content.startswith(b'{\n  "id": "chatcmpl-')
    assert response.content.endswith(b"\n}\n")
    data = response.json()
    assert data["object"] == "chat.completion"
    assert data["choices"][0]["message"]["content"] == reply_text("what is up")
    assert data["choices"][0]["finish_reason"] == "stop"
    assert data["usage"]["completion_tokens"] == len(text_pieces(reply_text("what is up")))


@pytest.mark.parametrize("include_usage", [True, False])
async def test_openai_chat_stream(include_usage: bool) -> None:
    body = chat_body("one two", stream=True, stream_options={"include_usage": include_usage})
    async with serve_fake() as fake, httpx.AsyncClient(base_url=fake.url) as client:
        response = await client.post(CHAT, json=body)
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert response.headers["transfer-encoding"] == "chunked"
    assert response.content.endswith(b"data: [DONE]\n\n")
    chunks = [json.loads(data) for _, data in sse_events(response.content)[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == reply_text("one two")
    if include_usage:
        assert all("usage" in c for c in chunks)
        assert chunks[-1]["choices"] == []
        assert chunks[-1]["usage"]["total_tokens"] > 0
        assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    else:
        assert all("usage" not in c for c in chunks)
        assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


async def test_openai_chat_tool_call_stream_fragments_arguments() -> None:
    tool = {
        "type": "function",
        "function": {"name": WEATHER.name, "parameters": WEATHER.parameters},
    }
    body = chat_body("Paris", stream=True, tools=[tool])
    async with serve_fake() as fake, httpx.AsyncClient(base_url=fake.url) as client:
        response = await client.post(CHAT, json=body)
    chunks = [json.loads(d) for _, d in sse_events(response.content) if d != b"[DONE]"]
    calls = [c["choices"][0]["delta"].get("tool_calls") for c in chunks]
    first = calls[0]
    assert first is not None
    assert first[0]["function"] == {"name": "get_weather", "arguments": ""}
    assert first[0]["id"].startswith("call_")
    pieces = [c[0]["function"]["arguments"] for c in calls[1:] if c]
    expected = json.dumps(tool_arguments(WEATHER, "Paris"), separators=(",", ":"))
    assert expected == '{"city":"Paris","days":42}'
    assert pieces == fragments(expected)
    assert len(pieces) > 1
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


async def test_openai_chat_answers_a_tool_result_with_text() -> None:
    messages = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "tool_calls": []},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]
    tool = {
        "type": "function",
        "function": {"name": WEATHER.name, "parameters": WEATHER.parameters},
    }
    async with serve_fake() as fake, httpx.AsyncClient(base_url=fake.url) as client:
        response = await client.post(
            CHAT, json={"model": "m", "messages": messages, "tools": [tool]}
        )
    assert response.json()["choices"][0]["message"]["content"] == "The tool said: sunny"


async def test_openai_responses_plain_and_stream() -> None:
    body = {"model": "gpt-5-nano", "input": "count"}
    async with serve_fake() as fake, httpx.AsyncClient(base_url=fake.url) as client:
        plain = await client.post("/v1/responses", json=body)
        stream = await client.post("/v1/responses", json={**body, "stream": True})
    assert plain.content.endswith(b"\n}\n")
    assert plain.json()["output"][0]["content"][0]["text"] == reply_text("count")
    events = sse_events(stream.content)
    names = [name for name, _ in events]
    assert names[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert names[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert b"[DONE]" not in stream.content
    datas = [json.loads(d) for _, d in events]
    assert [d["sequence_number"] for d in datas] == list(range(len(datas)))
    assert all(d["type"] == name for d, (name, _) in zip(datas, events, strict=True))
    deltas = "".join(d["delta"] for d in datas if d["type"] == "response.output_text.delta")
    assert deltas == reply_text("count")
    assert datas[-1]["response"]["usage"]["output_tokens"] == len(text_pieces(deltas))


async def test_openai_responses_function_call_stream() -> None:
    tool = {"type": "function", "name": WEATHER.name, "parameters": PARAMS}
    body = {"model": "gpt-5-nano", "input": "Lima", "tools": [tool], "stream": True}
    async with serve_fake() as fake, httpx.AsyncClient(base_url=fake.url) as client:
        response = await client.post("/v1/responses", json=body)
    datas = [json.loads(d) for _, d in sse_events(response.content)]
    kinds = [d["type"] for d in datas]
    assert "response.output_text.delta" not in kinds
    pieces = [d["delta"] for d in datas if d["type"] == "response.function_call_arguments.delta"]
    assert json.loads("".join(pieces)) == tool_arguments(WEATHER, "Lima")
    item = datas[-1]["response"]["output"][0]
    assert (item["type"], item["name"]) == ("function_call", WEATHER.name)
    assert item["call_id"].startswith("call_")


async def test_openai_embeddings_float_and_base64() -> None:
    body = {"model": "text-embedding-3-small", "input": ["a", "b"], "dimensions": 4}
    async with serve_fake() as fake, httpx.AsyncClient(base_url=fake.url) as client:
        floats = (await client.post("/v1/embeddings", json=body)).json()
        packed = await client.post("/v1/embeddings", json={**body, "encoding_format": "base64"})
    assert [d["embedding"] for d in floats["data"]] == [
        embedding_vector("a", 4),
        embedding_vector("b", 4),
    ]
    raw = base64.b64decode(packed.json()["data"][1]["embedding"])
    assert list(struct.unpack("<4f", raw)) == embedding_vector("b", 4)


# ------------------------------------------------------------------- anthropic


async def test_anthropic_plain_is_compact() -> None:
    async with serve_fake() as fake, httpx.AsyncClient(base_url=fake.url) as client:
        response = await client.post("/v1/messages", json=anthropic_body("hi"))
    assert response.content.startswith(b'{"model":"claude-sonnet-4-5","id":"msg_01')
    assert response.content.endswith(b"}")
    data = response.json()
    assert data["content"] == [{"type": "text", "text": reply_text("hi")}]
    assert data["stop_reason"] == "end_turn"
    assert response.headers["request-id"].startswith("req_")


async def test_anthropic_stream_events() -> None:
    async with serve_fake() as fake, httpx.AsyncClient(base_url=fake.url) as client:
        response = await client.post("/v1/messages", json=anthropic_body("hi", stream=True))
    events = sse_events(response.content)
    names = [name for name, _ in events]
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert names[-4:] == [
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    datas = [json.loads(d) for _, d in events]
    assert all(d["type"] == name for d, name in zip(datas, names, strict=True))
    text = "".join(d["delta"]["text"] for d in datas if d["type"] == "content_block_delta")
    assert text == reply_text("hi")
    assert datas[-2]["usage"]["output_tokens"] == len(text_pieces(text))


async def test_anthropic_tool_stream_input_json_delta() -> None:
    tools = [{"name": WEATHER.name, "input_schema": WEATHER.parameters}]
    body = anthropic_body("Rome", stream=True, tools=tools)
    async with serve_fake() as fake, httpx.AsyncClient(base_url=fake.url) as client:
        response = await client.post("/v1/messages", json=body)
    datas = [json.loads(d) for _, d in sse_events(response.content)]
    starts = [d["content_block"] for d in datas if d["type"] == "content_block_start"]
    assert [s["type"] for s in starts] == ["text", "tool_use"]
    partial = [
        d["delta"]["partial_json"]
        for d in datas
        if d["type"] == "content_block_delta" and d["delta"]["type"] == "input_json_delta"
    ]
    assert partial[0] == ""
    assert json.loads("".join(partial)) == tool_arguments(WEATHER, "Rome")
    assert datas[-2]["delta"]["stop_reason"] == "tool_use"


async def test_anthropic_stream_error_event() -> None:
    body = anthropic_body(stream=True)
    async with serve_fake() as fake, httpx.AsyncClient(base_url=fake.url) as client:
        response = await client.post(
            "/v1/messages", json=body, headers={SCENARIO_HEADER: "stream-error"}
        )
    assert response.status_code == 200
    name, data = sse_events(response.content)[-1]
    assert name == "error"
    assert json.loads(data)["error"]["type"] == "overloaded_error"
    assert b"message_stop" not in response.content


# ---------------------------------------------------------------------- gemini


@pytest.mark.parametrize("version", ["v1beta", "v1"])
async def test_gemini_generate(version: str) -> None:
    path = f"/{version}/models/gemini-2.0-flash:generateContent"
    async with serve_fake() as fake, httpx.AsyncClient(base_url=fake.url) as client:
        response = await client.post(path, json=gemini_body("hi"))
    assert response.headers["content-type"] == "application/json; charset=UTF-8"
    assert response.content.startswith(b'{\n  "candidates": [')
    assert response.content.endswith(b"\n}\n")
    data = response.json()
    assert data["candidates"][0]["content"]["parts"] == [{"text": reply_text("hi")}]
    assert data["candidates"][0]["finishReason"] == "STOP"
    usage = data["usageMetadata"]
    assert usage["totalTokenCount"] == usage["promptTokenCount"] + usage["candidatesTokenCount"]
    assert data["modelVersion"] == "gemini-2.0-flash"


async def test_gemini_stream_sse_uses_crlf() -> None:
    path = "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse"
    async with serve_fake() as fake, httpx.AsyncClient(base_url=fake.url) as client:
        response = await client.post(path, json=gemini_body("a b"))
    assert response.headers["content-type"] == "text/event-stream"
    assert response.content.startswith(b'data: {"candidates": [{"content": {"parts": [{"text": "')
    assert response.content.endswith(b"}\r\n\r\n")
    assert b"\n\n" not in response.content.replace(b"\r\n\r\n", b"")
    datas = [json.loads(d) for _, d in sse_events(response.content, b"\r\n\r\n")]
    text = "".join(d["candidates"][0]["content"]["parts"][0]["text"] for d in datas)
    assert text == reply_text("a b")
    assert "finishReason" in datas[-1]["candidates"][0]
    assert all("usageMetadata" in d for d in datas)


async def test_gemini_stream_json_array_arrives_in_pieces() -> None:
    path = "/v1beta/models/gemini-2.0-flash:streamGenerateContent"
    async with serve_fake(frame_delay=0.02) as fake, httpx.AsyncClient(base_url=fake.url) as c:
        timed = await timed_chunks(c, path, gemini_body("a b"))
    body = timed.body
    assert timed.response.headers["content-type"] == "application/json; charset=UTF-8"
    assert body.startswith(b"[{\n")
    assert body.endswith(b"}\n]")
    assert b"}\n,\r\n{\n" in body
    elements = json.loads(body)
    assert len(elements) == len(text_pieces(reply_text("a b")))
    frames = expected_frames(path, gemini_body("a b"))
    assert len(frames) == len(elements) + 1  # one write per element, then "]"
    timed.assert_paced(frames, 0.02)


# ----------------------------------------------------------------- error codes


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        (CHAT, chat_body(), "error"),
        ("/v1/messages", anthropic_body(), "error"),
        ("/v1beta/models/gemini-2.0-flash:generateContent", gemini_body(), "error"),
    ],
)
@pytest.mark.parametrize("status", [400, 429, 500])
async def test_status_scenarios_by_header(
    path: str, body: dict[str, Any], field: str, status: int
) -> None:
    async with serve_fake() as fake, httpx.AsyncClient(base_url=fake.url) as client:
        response = await client.post(path, json=body, headers={SCENARIO_HEADER: str(status)})
    assert response.status_code == status
    assert field in response.json()
    assert ("retry-after" in response.headers) == (status == 429)


async def test_status_scenarios_by_model_name() -> None:
    async with serve_fake() as fake, httpx.AsyncClient(base_url=fake.url) as client:
        openai = await client.post(CHAT, json={**chat_body(), "model": "fake-429"})
        anthropic = await client.post(
            "/v1/messages", json={**anthropic_body(), "model": "fake-overloaded"}
        )
        gemini = await client.post("/v1beta/models/fake-500:generateContent", json=gemini_body())
    assert openai.status_code == 429
    assert openai.json()["error"]["code"] == "rate_limit_exceeded"
    assert openai.content.startswith(b'{\n    "error": {\n        "message"')
    assert anthropic.status_code == 529
    assert anthropic.json()["error"]["type"] == "overloaded_error"
    assert gemini.status_code == 500
    assert gemini.json()["error"]["status"] == "INTERNAL"


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        (CHAT, "invalid_request_error"),
        ("/v1/messages", "invalid_request_error"),
        ("/v1beta/models/g:generateContent", "INVALID_ARGUMENT"),
    ],
)
async def test_bad_json_is_400(path: str, kind: str) -> None:
    async with serve_fake() as fake, httpx.AsyncClient(base_url=fake.url) as client:
        response = await client.post(path, content=b"{not json")
    assert response.status_code == 400
    assert kind in response.text


async def test_unknown_scenario_is_a_loud_400() -> None:
    async with serve_fake() as fake, httpx.AsyncClient(base_url=fake.url) as client:
        by_model = await client.post(CHAT, json={**chat_body(), "model": "fake-492"})
        by_header = await client.post(CHAT, json=chat_body(), headers={SCENARIO_HEADER: "nope"})
    assert by_model.status_code == by_header.status_code == 400
    assert "unknown fake scenario '492'" in by_model.text
    assert "unknown fake scenario 'nope'" in by_header.text


def test_scenario_names() -> None:
    assert parse_scenarios("gzip, slow") == {Scenario.GZIP, Scenario.SLOW}
    assert parse_scenarios("529+cut") == {Scenario.OVERLOADED, Scenario.CUT}
    assert parse_scenarios("") == frozenset()
    with pytest.raises(UnknownScenarioError):
        parse_scenarios("429,teapot")


# ------------------------------------------------------------------------ gzip


async def test_gzip_plain_body() -> None:
    async with serve_fake() as fake, httpx.AsyncClient(base_url=fake.url) as client:
        plain = await client.post(CHAT, json=chat_body())
        async with client.stream(
            "POST", CHAT, json=chat_body(), headers={SCENARIO_HEADER: "gzip"}
        ) as response:
            raw = b"".join([chunk async for chunk in response.aiter_raw()])
    assert response.headers["content-encoding"] == "gzip"
    assert response.headers["content-length"] == str(len(raw))
    assert gzip.decompress(raw) == plain.content


async def test_gzip_stream_decodes_frame_by_frame() -> None:
    body = chat_body(stream=True)
    async with serve_fake() as fake, httpx.AsyncClient(base_url=fake.url) as client:
        plain = await client.post(CHAT, json=body)
        zipped = await client.post(CHAT, json={**body, "model": "fake-gzip"})
        async with client.stream("POST", CHAT, json=body, headers={SCENARIO_HEADER: "gzip"}) as r:
            decoded = [chunk async for chunk in r.aiter_bytes()]
    assert zipped.headers["content-encoding"] == "gzip"
    assert b"".join(decoded) == plain.content
    assert len(decoded) > 3  # sync flushes keep frames separate


def test_gzipped_reply_keeps_frames() -> None:
    reply = Reply(200, (), (b"data: 1\n\n", b"data: 2\n\n"), True).gzipped()
    assert len(reply.frames) == 2
    assert gzip.decompress(reply.body) == b"data: 1\n\ndata: 2\n\n"
    assert reply.header("content-encoding") == "gzip"


# ---------------------------------------------------------------------- timing


async def test_frames_are_separate_writes_spaced_by_the_delay() -> None:
    body = chat_body("a b c", stream=True)
    async with serve_fake(frame_delay=0.03) as fake, httpx.AsyncClient(base_url=fake.url) as c:
        timed = await timed_chunks(c, CHAT, body)
    frames = expected_frames(CHAT, body)
    assert len(frames) == 1 + len(text_pieces(reply_text("a b c"))) + 2
    timed.assert_paced(frames, 0.03)
    assert len(timed.chunks) > 1  # one per frame unless the client falls behind


async def test_slow_scenario_and_delay_header() -> None:
    body = chat_body("a", stream=True)
    frames = expected_frames(CHAT, body)
    async with serve_fake(frame_delay=0) as fake, httpx.AsyncClient(base_url=fake.url) as c:
        slow = await timed_chunks(c, CHAT, body, headers={SCENARIO_HEADER: "slow"})
        custom = await timed_chunks(c, CHAT, body, headers={FRAME_DELAY_HEADER: "20"})
        both = await timed_chunks(
            c, CHAT, body, headers={SCENARIO_HEADER: "slow", FRAME_DELAY_HEADER: "0"}
        )
    slow.assert_paced(frames, SLOW_FRAME_DELAY)
    custom.assert_paced(frames, 0.02)
    assert both.body == b"".join(frames)  # the header wins over "slow"


# ---------------------------------------------------------------------- faults


async def test_cut_stream_stops_mid_body() -> None:
    async with serve_fake(frame_delay=0) as fake, httpx.AsyncClient(base_url=fake.url) as client:
        full = await client.post(CHAT, json=chat_body(stream=True))
        sink = Sink()
        with pytest.raises(httpx.RemoteProtocolError):
            await read_into(
                sink, client, CHAT, chat_body(stream=True), headers={SCENARIO_HEADER: "cut"}
            )
    frames = [f + b"\n\n" for f in full.content.split(b"\n\n")[:-1]]
    assert sink.status == 200
    assert sink.body == b"".join(frames[:CUT_AFTER])


async def test_cut_plain_body_sends_half() -> None:
    async with serve_fake() as fake, httpx.AsyncClient(base_url=fake.url) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            await client.post(CHAT, json={**chat_body(), "model": "fake-cut"})


async def test_reset_aborts_the_connection() -> None:
    async with serve_fake(frame_delay=0) as fake, httpx.AsyncClient(base_url=fake.url) as client:
        with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
            await client.post(CHAT, json=chat_body(stream=True), headers={SCENARIO_HEADER: "reset"})


async def test_stall_sends_the_head_then_nothing() -> None:
    timeout = httpx.Timeout(5.0, read=0.2)
    async with serve_fake() as fake, httpx.AsyncClient(base_url=fake.url, timeout=timeout) as c:
        sink = Sink()
        with pytest.raises(httpx.ReadTimeout):
            await read_into(
                sink, c, CHAT, chat_body(stream=True), headers={SCENARIO_HEADER: "stall"}
            )
        assert sink.status == 200
        assert sink.body == b""
        # the fake is still serving others
        assert (await c.post(CHAT, json=chat_body())).status_code == 200


@pytest.mark.parametrize("scenario", ["garbage", "close-early"])
async def test_garbage_and_close_early_are_protocol_errors(scenario: str) -> None:
    async with serve_fake() as fake, httpx.AsyncClient(base_url=fake.url) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            await client.post(CHAT, json=chat_body(), headers={SCENARIO_HEADER: scenario})
        assert len(fake.requests) == 1


async def test_garbage_bytes_on_the_wire() -> None:
    async with serve_fake() as fake:
        request = (
            f"POST {CHAT} HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n"
            f"{SCENARIO_HEADER}: garbage\r\n\r\n{{}}"
        ).encode()
        async with await anyio.connect_tcp(fake.host, fake.port) as stream:
            await stream.send(request)
            sink = Sink()
            with pytest.raises(anyio.EndOfStream):
                await receive_all(stream, sink)
    assert sink.body == GARBAGE


# --------------------------------------------------------------------- secrets


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (CHAT, chat_body("my key is sk-live-SECRET0123 and AIzaSECRET0123")),
        (CHAT, chat_body("sk-live-SECRET0123", stream=True)),
        ("/v1/responses", {"model": "m", "input": "sk-live-SECRET0123", "stream": True}),
        ("/v1/embeddings", {"model": "m", "input": "sk-live-SECRET0123"}),
        (
            "/v1/responses",
            {"model": "sk-live-SECRET0123", "input": "x", "instructions": "AIzaSECRET0123"},
        ),
        ("/v1/messages", anthropic_body("sk-ant-SECRET0123", stream=True)),
        ("/v1beta/models/g:streamGenerateContent?alt=sse", gemini_body("AIzaSECRET0123")),
        ("/v1beta/models/fake-429:generateContent", gemini_body("AIzaSECRET0123")),
    ],
)
async def test_secrets_are_never_echoed(path: str, body: dict[str, Any]) -> None:
    headers = {
        "authorization": "Bearer sk-live-SECRET0123",
        "x-api-key": "sk-ant-SECRET0123",
        "x-goog-api-key": "AIzaSECRET0123",
    }
    sep = "&" if "?" in path else "?"
    async with serve_fake() as fake, httpx.AsyncClient(base_url=fake.url) as client:
        response = await client.post(f"{path}{sep}key=AIzaSECRET0123", json=body, headers=headers)
    assert b"SECRET0123" not in response.content
    assert all("SECRET0123" not in value for value in response.headers.values())
    assert fake.requests[0].header("x-api-key") == "sk-ant-SECRET0123"


# ------------------------------------------------------------ thread and process


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_thread_runner(backend: str) -> None:
    with FakeUpstreamThread(backend=backend, frame_delay=0) as fake:
        with httpx.Client(base_url=fake.url) as client:
            assert client.post(CHAT, json=chat_body()).status_code == 200
            assert client.post(CHAT, json=chat_body(stream=True)).status_code == 200
        assert len(fake.requests) == 2
        assert fake.connections == 1
        assert isinstance(fake.server, FakeUpstream)
        url = fake.url
    with httpx.Client() as client, pytest.raises(httpx.ConnectError):
        client.get(url)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_standalone_process(backend: str) -> None:
    command = [sys.executable, "-m", "tests.fakes.upstream", "--port", "0", "--backend", backend]
    with subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            url = process.stdout.readline().strip()
            assert url.startswith("http://127.0.0.1:")
            with httpx.Client(base_url=url) as client:
                assert client.post(CHAT, json=chat_body()).status_code == 200
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=10) == 0
        finally:
            if process.poll() is None:
                process.kill()


def test_echo_key_echoes_the_credentials_unscrubbed() -> None:
    headers = (
        ("authorization", f"Bearer {GATEWAY_TOKEN}"),
        ("api-key", AZURE_KEY),
        ("cookie", f"a=b; session={COOKIE_VALUE}"),
        (SCENARIO_HEADER, "echo-key"),
    )
    plain = respond(ReceivedRequest("POST", CHAT, headers, json.dumps(chat_body()).encode()))
    assert plain.status == 401
    message = json.loads(plain.body)["error"]["message"]
    for value in (GATEWAY_TOKEN, AZURE_KEY, COOKIE_VALUE):
        assert value in message
        assert base64.b64encode(value.encode()).decode() in message
    streamed = respond(
        ReceivedRequest("POST", CHAT, headers, json.dumps(chat_body(stream=True)).encode())
    )
    assert streamed.status == 200
    assert streamed.streamed
    for value in (GATEWAY_TOKEN, AZURE_KEY, COOKIE_VALUE):
        assert value.encode() in streamed.body
        assert not any(value.encode() in frame for frame in streamed.frames)  # always split
    assert streamed.frames[-1] == b"data: [DONE]\n\n"
    # a credential query parameter is echoed too
    target = f"{CHAT}?api-key={QUERY_KEY}"
    body = json.dumps(chat_body()).encode()
    queried = respond(ReceivedRequest("POST", target, ((SCENARIO_HEADER, "echo-key"),), body))
    assert QUERY_KEY in json.loads(queried.body)["error"]["message"]


def test_echo_escaped_writes_every_other_character_as_a_json_escape() -> None:
    headers = (("x-api-key", ESCAPED_KEY), (SCENARIO_HEADER, "echo-escaped"))
    body = json.dumps(chat_body()).encode()
    reply = respond(ReceivedRequest("POST", f"{CHAT}?key={QUERY_KEY}", headers, body))
    assert reply.status == 401
    assert ESCAPED_KEY.replace("+", "\\u002B").replace("/", "\\u002F").encode() in reply.body
    assert QUERY_KEY.replace("-", "\\u002D").encode() in reply.body
    assert ESCAPED_KEY.encode() not in reply.body  # only escaped
    message = json.loads(reply.body)["error"]["message"]
    assert ESCAPED_KEY in message
    assert QUERY_KEY in message


def _get(target: str, *headers: tuple[str, str]) -> ReceivedRequest:
    return ReceivedRequest("GET", target, headers, b"")


def test_web_redirects_pages_and_validators() -> None:
    from tests.fakes.web_wire import DOC_ETAG

    moved = respond(_get("/web/redirect/302"))
    assert (moved.status, moved.header("location")) == (302, "/web/redirect/301")
    assert respond(_get("/web/redirect/301")).header("location") == "/web/redirect/final"
    final = respond(_get("/web/redirect/final"))
    assert (final.status, final.body) == (200, b'{"arrived":true}')
    assert final.header("set-cookie") is not None
    first, last = respond(_get("/web/items?page=1")), respond(_get("/web/items?page=3"))
    assert [v for k, v in first.headers if k == "link"] == [
        '</web/items?page=2>; rel="next"',
        '</web/items?page=1>; rel="first"',
    ]
    assert [v for k, v in last.headers if k == "link"] == ['</web/items?page=1>; rel="first"']
    assert respond(_get("/web/items?page=4")).status == 404
    assert respond(_get("/web/items?page=x")).status == 404
    doc = respond(_get("/web/doc"))
    assert (doc.status, doc.header("etag")) == (200, DOC_ETAG)
    assert [v for k, v in doc.headers if k == "vary"] == ["accept", "accept-encoding"]
    fresh = respond(_get("/web/doc", ("if-none-match", DOC_ETAG)))
    assert (fresh.status, fresh.body, fresh.header("etag")) == (304, b"", DOC_ETAG)
    assert respond(_get("/web/doc", ("if-none-match", '"other"'))).status == 200
    assert respond(_get("/web/nothing")).status == 404
