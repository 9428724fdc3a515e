"""A Realtime session's audio as assets, through the proxy: the client's
``input_audio_buffer.append`` chunks are kept beside the cassette, and a
replay matches the client's audio against them byte for byte."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as ws_connect

from reel_bindings._files import CassetteFile
from reel_bindings._store import FileStore
from reel_bindings.proxy import running
from reel_core import Mode
from reel_core.tools import load_json
from tests.fakes.realtime import serve_realtime
from tests.secrets import SDK_OPENAI_KEY

from .proxy_support import options

pytestmark = pytest.mark.anyio

#: Four chunks of PCM16 (random, so no two are alike): 4,000 base64 characters each.
CHUNKS = [os.urandom(3000) for _ in range(4)]


def audio_turn(url: str, chunks: list[bytes]) -> tuple[list[dict[str, Any]], int | None]:
    """One turn that speaks ``chunks``: the events received, and the close
    code (``None``: the client closed)."""
    events: list[dict[str, Any]] = []
    target = url.replace("http://", "ws://") + "/v1/realtime?model=gpt-realtime"
    with ws_connect(target, additional_headers={"authorization": f"Bearer {SDK_OPENAI_KEY}"}) as ws:
        events.append(json.loads(ws.recv()))
        item = {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "hi"}],
        }
        messages = [
            {"type": "input_audio_buffer.append", "audio": base64.b64encode(c).decode("ascii")}
            for c in chunks
        ] + [{"type": "conversation.item.create", "item": item}, {"type": "response.create"}]
        try:
            for message in messages:
                ws.send(json.dumps(message))
        except ConnectionClosed:
            pass  # a mismatch closes the session, maybe before the last message went
        try:
            for raw in ws:
                event = json.loads(raw)
                events.append(event)
                if event["type"] == "response.done":
                    break  # an error is followed by the close: read on to its code
        except ConnectionClosed:
            pass
        return events, ws.close_code


async def test_realtime_audio_is_kept_beside_the_cassette_and_replays(tmp_path: Path) -> None:
    cassette = tmp_path / "voice.jsonl"
    with serve_realtime() as upstream:
        recording = options(Mode.RECORD, cassette, upstream=upstream.url, asset_threshold=1024)
        async with running(recording) as url:
            recorded, _ = await anyio.to_thread.run_sync(audio_turn, url, CHUNKS)
        sent = [m["audio"] for m in upstream.received if m["type"] == "input_audio_buffer.append"]
    assert [base64.b64decode(a) for a in sent] == CHUNKS
    line = cassette.read_bytes().splitlines()[1]
    assert len(line) < 6000  # 16 KiB of audio: four references
    refs = load_json(line)["assets"]
    assert [(r["at"][-1], r["type"]) for r in refs] == [("audio", "audio/pcm;rate=24000")] * 4
    kept = FileStore().assets(str(cassette))
    assert sorted(kept) == sorted(hashlib.sha256(c).hexdigest() for c in CHUNKS)
    (session,) = CassetteFile(cassette).cassette  # read back whole
    assert session.websocket is not None
    assert [json.loads(m.data).get("audio") for m in session.websocket.messages[1:5]] == sent

    async with running(options(Mode.REPLAY, cassette)) as url:
        replayed, _ = await anyio.to_thread.run_sync(audio_turn, url, CHUNKS)
        assert replayed == recorded
        # other audio is a mismatch: the replay compared the bytes
        other, code = await anyio.to_thread.run_sync(audio_turn, url, [*CHUNKS[:3], bytes(3000)])
    assert code == 4004
    assert other[-1]["type"] == "error"
    assert other[-1]["error"]["code"] == "reel_websocket_mismatch"
