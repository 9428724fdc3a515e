"""A recording played again through the httpx/httpx2 transports is answered
as its first play was: the warm path (the response headers kept per
recording, the replay's reply kept per events) changes nothing a client
sees -- status, headers (``Content-Length`` too), body, extensions, and
whether the body is read already."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import httpx
import httpx2
import pytest

from reel_bindings.httpcore import AsyncTransport, Transport
from reel_core import (
    Cassette,
    CassetteMeta,
    Interaction,
    MatchConfig,
    RecordedRequest,
    RecordedResponse,
    StreamCut,
    match_key,
)

CHAT = "/v1/chat/completions"
URL = "https://api.openai.com" + CHAT
JSON = ("content-type", "application/json")


def _interaction(n: int, response: RecordedResponse, method: str) -> Interaction:
    sent = _body(n)
    return Interaction(
        key=match_key(method, CHAT, (), sent, MatchConfig()),
        id=f"{method}-{n}",
        request=RecordedRequest(method, CHAT, (), sent),
        response=response,
    )


#: What a recording may be: a JSON body, an empty one, a body recorded with
#: its own headers in odd case, an error, a stream due at once in fast
#: timing (one frame: httpx adds a ``Content-Length``), a cut stream.
RESPONSES = [
    RecordedResponse(200, (JSON,), body=b'{\n  "ok": true\n}'),
    RecordedResponse(204, ()),
    RecordedResponse(429, (("Retry-After", "1"), JSON), body=b'{"error":"slow down"}'),
    RecordedResponse(200, (("content-type", "text/event-stream"),), stream="sse",
                     frames=((0.0, b"data: [DONE]\n\n"),), end_ms=0.0),
    RecordedResponse(200, (("content-type", "text/event-stream"),), stream="sse",
                     frames=((0.0, b"data: 1\n\n"), (5.0, b"data: 2\n\n")), end_ms=6.0),
    RecordedResponse(200, (JSON,), stream="chunks", frames=((0.0, b"{"),),
                     cut=StreamCut(1.0, "reset")),
]  # fmt: skip


def _body(n: int) -> bytes:
    return json.dumps({"model": "m", "n": n}).encode()


@pytest.fixture
def cassette(tmp_path: Path) -> Path:
    store = Cassette(meta=CassetteMeta())
    for method in ("POST", "HEAD"):
        for n, response in enumerate(RESPONSES):
            store.add(_interaction(n, response, method))
    path = tmp_path / "warm.jsonl"
    path.write_bytes(store.dumps())
    return path


def _seen(response: Any) -> tuple[Any, ...]:
    """All a client can tell of a response, its body read (or cut)."""
    try:
        body: object = response.read()
    except (httpx.RemoteProtocolError, httpx2.RemoteProtocolError) as exc:
        body = type(exc).__name__
    return (
        response.status_code,
        response.headers.raw,
        body,
        response.extensions.get("reel"),
        response.http_version,
    )


@pytest.mark.parametrize("family", [httpx, httpx2])
@pytest.mark.parametrize("method", ["POST", "HEAD"])
def test_a_warm_play_answers_as_the_first(cassette: Path, family: ModuleType, method: str) -> None:
    with family.Client(transport=Transport(cassette, mode="replay", timing="fast")) as client:
        plays = [
            [
                _seen(client.send(client.build_request(method, URL, content=_body(n)), stream=True))
                for n in range(len(RESPONSES))
            ]
            for _ in range(3)
        ]
    assert plays[0] == plays[1] == plays[2]
    assert [p[0] for p in plays[0]] == [r.status for r in RESPONSES]
    if method == "POST":
        assert plays[0][0][2] == b'{\n  "ok": true\n}'
        # a stream due at once, answered whole: httpx's Content-Length, each time
        assert (b"Content-Length", b"14") in plays[2][3][1]


@pytest.mark.parametrize("family", [httpx, httpx2])
def test_a_warm_response_is_read_already_like_the_first(cassette: Path, family: ModuleType) -> None:
    transport = Transport(cassette, mode="replay", timing="fast")
    for _ in range(2):
        request = family.Request("POST", URL, content=_body(0))
        response = transport.handle_request(request)
        assert response.is_stream_consumed
        assert response.is_closed
        assert response.content == b'{\n  "ok": true\n}'
        assert response.headers["content-length"] == "16"


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_warm_async_play_answers_as_the_first(cassette: Path, backend: str) -> None:
    async def main() -> list[list[tuple[Any, ...]]]:
        transport = AsyncTransport(cassette, mode="replay", timing="fast")
        async with httpx.AsyncClient(transport=transport) as client:
            plays = []
            for _ in range(2):
                play = []
                for n in range(len(RESPONSES)):
                    request = client.build_request("POST", URL, content=_body(n))
                    response = await client.send(request, stream=True)
                    try:
                        content: object = await response.aread()
                    except httpx.RemoteProtocolError as exc:
                        content = str(exc)
                    play.append((response.status_code, response.headers.raw, content))
                plays.append(play)
            return plays

    first, warm = anyio.run(main, backend=backend)
    assert first == warm


def test_a_miss_is_not_kept_as_a_recordings_answer(cassette: Path) -> None:
    transport = Transport(cassette, mode="replay")
    with httpx.Client(transport=transport) as client:
        for n in range(3):
            assert client.post(URL, content=_body(100 + n)).status_code == 404
        client.post(URL, content=_body(0))
        client.post(URL, content=_body(0))
    assert len(transport._heads) == 1  # the one recording, not the misses
