"""``http2=True`` on the httpx/httpx2 transports: forwards go upstream over
HTTP/2 (ALPN over TLS), the recording is the one HTTP/1.1 makes (no
pseudo-header, names lower-case), so a cassette recorded over either
replays under both; a replay reports ``HTTP/1.1``, having no wire."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import httpx
import httpx2
import pytest

from reel_bindings import sdk
from reel_bindings.httpcore import AsyncTransport, Transport
from reel_bindings.requests import Adapter
from reel_core import Cassette
from tests.h2_server import serve_h2

from .forward_proxy import LocalCA

pytestmark = pytest.mark.anyio

PATH = "/v1/chat/completions"
BODY = b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"over h2"}]}'


async def post(family: ModuleType, sync: bool, transport: Any, url: str) -> Any:
    """One POST through ``transport`` with a client of ``family``."""
    headers = {"content-type": "application/json", "authorization": "Bearer sk-h2-secret"}
    if sync:

        def blocking() -> Any:
            with family.Client(transport=transport, base_url=url) as client:
                return client.post(PATH, content=BODY, headers=headers)

        return await anyio.to_thread.run_sync(blocking)
    async with family.AsyncClient(transport=transport, base_url=url) as client:
        return await client.post(PATH, content=BODY, headers=headers)


def line(cassette: Path) -> dict[str, Any]:
    """The cassette's interaction line, without what differs run to run
    (times; ``sent``, a digest under each cassette's own salt)."""
    lines = cassette.read_text().splitlines()[1:]
    (interaction,) = [dict[str, Any](json.loads(text)) for text in lines]
    for moving in ("ts", "meta", "sent", "ttfb_ms", "elapsed_ms", "duration_ms"):
        interaction.pop(moving, None)
    for part in ("request", "response"):
        for moving in ("ts", "ttfb_ms", "elapsed_ms", "duration_ms", "end_ms"):
            interaction[part].pop(moving, None)
    return interaction


@pytest.mark.parametrize("family", [httpx, httpx2], ids=["httpx", "httpx2"])
@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
async def test_http2_forwards_record_what_http11_records_and_replay_both_ways(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, family: ModuleType, sync: bool
) -> None:
    ca = LocalCA.make(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(ca.pem))
    make = Transport if sync else AsyncTransport
    over_h2, over_h11 = tmp_path / "h2.jsonl", tmp_path / "h11.jsonl"
    async with serve_h2(tls=ca.ca, alpn=("h2", "http/1.1")) as server:
        recorded = await post(family, sync, make(over_h2, mode="record", http2=True), server.url)
        plain = await post(family, sync, make(over_h11, mode="record"), server.url)
    # the server saw HTTP/2, then HTTP/1.1
    assert server.alpn == ["h2", "http/1.1"]
    assert recorded.http_version == "HTTP/2"
    assert plain.http_version == "HTTP/1.1"
    assert recorded.content == plain.content == b"%s %d %s" % (PATH.encode(), len(BODY), BODY[:32])
    # one recording, whichever protocol carried it
    assert line(over_h2) == line(over_h11)
    text = over_h2.read_text()
    assert ":status" not in text
    assert ":authority" not in text
    assert "sk-h2-secret" not in text
    (interaction,) = Cassette.loads(over_h2.read_bytes(), strict=True)
    assert all(name == name.lower() for name, _ in interaction.response.headers)

    # the server is gone: each cassette replays under either setting, as HTTP/1.1
    for cassette in (over_h2, over_h11):
        for http2 in (False, True):
            replay = make(cassette, mode="replay", http2=http2)
            replayed = await post(family, sync, replay, server.url)
            assert replayed.status_code == 200
            assert replayed.content == recorded.content
            assert replayed.http_version == "HTTP/1.1"
            assert replayed.extensions["reel"] == "replay"


def test_the_requests_adapter_refuses_http2(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"HTTP/1\.1 only.*httpx transports"):
        Adapter(tmp_path / "c.jsonl", http2=True)


async def test_the_sdk_helpers_pass_http2_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca = LocalCA.make(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(ca.pem))
    cassette = tmp_path / "sdk.jsonl"
    async with serve_h2(tls=ca.ca, alpn=("h2", "http/1.1")) as server:
        client = sdk.async_openai_client(
            cassette, mode="record", http2=True, api_key="sk-h2", base_url=server.url + "/v1"
        )
        raw = await client.models.with_raw_response.list()
        await client.close()
    assert server.alpn == ["h2"]
    assert raw.http_response.http_version == "HTTP/2"
    assert raw.http_response.content == b"/v1/models 0 "
    assert server.seen[0].path == "/v1/models"
