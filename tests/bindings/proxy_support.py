"""Helpers for the proxy tests: run a proxy in-process, make calls, compare streams.

Every call reads the response as the raw chunks the client receives, each
stamped with its arrival time after the response head, so tests can compare
record and replay at the byte, SSE-event and timing level.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx

from reel_bindings._files import StoreAssets
from reel_bindings._store import FileStore
from reel_bindings.proxy import ProxyOptions, running
from reel_core import Cassette, Interaction, Mode, Timing
from tests.fakes.upstream import FakeUpstream, Reply, respond

__all__ = [
    "WEATHER_SCHEMA",
    "Call",
    "Exchange",
    "anthropic_call",
    "boundaries",
    "chat_call",
    "fetch",
    "gemini_call",
    "interactions",
    "options",
    "proxied",
    "responses_call",
    "sse_events",
    "upstream_reply",
]

#: A function tool every tool-call test offers.
WEATHER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}

_EVENT = re.compile(rb".*?(?:\r\n\r\n|\n\n|\r\r)|.+", re.DOTALL)


def sse_events(body: bytes) -> list[bytes]:
    """``body`` cut into server-sent events, each with the blank line ending it."""
    return _EVENT.findall(body)


def boundaries(pieces: Sequence[bytes]) -> set[int]:
    """The offsets at which ``pieces`` (joined) are cut."""
    total = 0
    cuts: set[int] = set()
    for piece in pieces:
        total += len(piece)
        cuts.add(total)
    return cuts


@dataclass(frozen=True)
class Call:
    """One request a test sends: JSON body serialized once, so the bytes are known."""

    path: str
    body: Mapping[str, Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    method: str = "POST"

    @property
    def content(self) -> bytes:
        return b"" if self.body is None else json.dumps(self.body).encode()


def chat_call(
    prompt: str,
    *,
    stream: bool = False,
    tools: bool = False,
    model: str = "gpt-4o-mini",
    headers: Mapping[str, str] | None = None,
) -> Call:
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": prompt}]}
    if stream:
        body["stream"] = True
    if tools:
        body["tools"] = [
            {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_SCHEMA}}
        ]
    return Call("/v1/chat/completions", body, headers or {})


def responses_call(prompt: str, *, stream: bool = True) -> Call:
    return Call("/v1/responses", {"model": "gpt-4o-mini", "input": prompt, "stream": stream})


def anthropic_call(prompt: str, *, stream: bool = True, tools: bool = False) -> Call:
    body: dict[str, Any] = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": prompt}],
    }
    if stream:
        body["stream"] = True
    if tools:
        body["tools"] = [{"name": "get_weather", "input_schema": WEATHER_SCHEMA}]
    return Call("/v1/messages", body, {"anthropic-version": "2023-06-01"})


def gemini_call(prompt: str, *, stream: bool = True, sse: bool = True) -> Call:
    method = "streamGenerateContent" if stream else "generateContent"
    path = f"/v1beta/models/gemini-2.5-flash:{method}"
    if stream and sse:
        path += "?alt=sse"
    body = {"contents": [{"role": "user", "parts": [{"text": prompt}]}]}
    return Call(path, body)


@dataclass
class Exchange:
    """A response as one client saw it."""

    status: int
    headers: httpx.Headers
    #: The chunks as read, and when each arrived (seconds after the head).
    chunks: list[bytes]
    times: list[float]
    #: Seconds from the head to the end of the body (or to the error).
    duration: float
    #: What reading the body raised (a cut stream), if anything.
    error: Exception | None = None
    #: Seconds from sending the request to the head.  A replay's schedule
    #: counts from when the proxy sent the head, which the client sees
    #: later: timing checks add this to ``times`` and ``duration`` (from
    #: the request, so never later than the proxy's own start).
    waited: float = 0.0

    def since_sent(self) -> list[float]:
        """Each SSE event's arrival, in seconds after the request was sent."""
        return [at + self.waited for _, at in self.event_times()]

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)

    @property
    def events(self) -> list[bytes]:
        return sse_events(self.body)

    def json(self) -> Any:
        return json.loads(self.body)

    def event_times(self) -> list[tuple[bytes, float]]:
        """Each SSE event with the arrival time of the chunk that completed it."""
        out: list[tuple[bytes, float]] = []
        ends: list[tuple[int, float]] = []
        total = 0
        for chunk, at in zip(self.chunks, self.times, strict=True):
            total += len(chunk)
            ends.append((total, at))
        offset = 0
        for event in self.events:
            offset += len(event)
            at = next(t for end, t in ends if end >= offset)
            out.append((event, at))
        return out


async def fetch(client: httpx.AsyncClient, call: Call, *, decoded: bool = False) -> Exchange:
    """Send ``call``; read the body chunk by chunk (raw bytes unless ``decoded``)."""
    request = client.build_request(
        call.method,
        call.path,
        content=call.content if call.body is not None else None,
        headers={"content-type": "application/json", **call.headers}
        if call.body is not None
        else dict(call.headers),
    )
    sent = anyio.current_time()
    response = await client.send(request, stream=True)
    head = anyio.current_time()
    chunks: list[bytes] = []
    times: list[float] = []
    error: Exception | None = None
    try:
        reader = response.aiter_bytes() if decoded else response.aiter_raw()
        async for chunk in reader:
            chunks.append(chunk)
            times.append(anyio.current_time() - head)
    except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
        error = exc
    finally:
        duration = anyio.current_time() - head
        await response.aclose()
    return Exchange(
        response.status_code, response.headers, chunks, times, duration, error, head - sent
    )


def options(
    mode: Mode,
    cassette: Path | None = None,
    *,
    upstream: str | None = None,
    timing: str = "realtime",
    **more: Any,
) -> ProxyOptions:
    """Proxy options on a free port."""
    return ProxyOptions(
        mode=mode,
        cassette=cassette,
        upstream=upstream,
        timing=Timing.parse(timing),
        port=0,
        **more,
    )


@asynccontextmanager
async def proxied(opts: ProxyOptions) -> AsyncIterator[httpx.AsyncClient]:
    """A running proxy and an HTTP client whose base URL is the proxy."""
    async with (
        running(opts) as url,
        # trust_env off: a test's proxy variables are for the proxy, not this client
        httpx.AsyncClient(base_url=url, timeout=30, trust_env=False) as client,
    ):
        yield client


def interactions(path: Path) -> list[Interaction]:
    """The interactions a cassette file holds (strict: every line must
    parse), their assets read from beside it."""
    assets = StoreAssets(FileStore(), str(path))
    return list(Cassette.loads(path.read_bytes(), strict=True, assets=assets))


def upstream_reply(fake: FakeUpstream, index: int = -1) -> Reply:
    """What the fake answered to its ``index``-th request (it is deterministic)."""
    return respond(fake.requests[index])
