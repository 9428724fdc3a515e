"""pydantic-ai's WebSocket cassettes, converted by ``reel import
pydantic-ws``, replayed through the proxy to real WebSocket clients: the
OpenAI SDK's realtime client (its shape), and the ``websockets`` client for
Gemini Live.  Each client sends the file's ``sent`` messages and gets its
``received`` ones, in order, gated by what it sent; a changed message gets
the loud close, not the recorded answer.

Sources: a small file of each shape written here, and (when
``../shared/corpus`` is beside the repository) pydantic-ai's own three.
"""

from __future__ import annotations

import json
from contextlib import suppress
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import openai
import pytest
import websockets.exceptions
import yaml
from websockets.sync.client import connect as ws_connect

from reel_bindings.cli import main
from reel_bindings.proxy import running
from reel_core import Mode
from tests.corpus import CORPUS, NO_CORPUS
from tests.secrets import SDK_GEMINI_KEY, SDK_OPENAI_KEY

from .proxy_support import options

pytestmark = [
    pytest.mark.anyio,
    # openai's sync realtime client calls websockets' connect() outside a
    # with block, which websockets>=17.1 warns about: the SDK's business
    pytest.mark.filterwarnings("ignore:connect\\(\\) must be used as a context manager"),
]

REALTIME = CORPUS / "pydantic__pydantic-ai" / "tests" / "realtime" / "cassettes"
GEMINI_PATH = "/ws/google.ai.generativelanguage.v1.GenerativeService.BidiGenerateContent"

Entries = list[dict[str, Any]]

OPENAI: Entries = [
    {"direction": "received", "data": {"type": "session.created", "event_id": "event_A1",
                                       "session": {"type": "realtime", "model": "gpt-realtime"}}},
    {"direction": "sent", "data": {"type": "session.update",
                                   "session": {"type": "realtime", "instructions": "Be brief."}}},
    {"direction": "received", "data": {"type": "session.updated", "event_id": "event_A2",
                                       "session": {"type": "realtime", "model": "gpt-realtime"}}},
    {"direction": "sent", "data": {"type": "conversation.item.create", "item": {
        "type": "message", "role": "user",
        "content": [{"type": "input_text", "text": "Say hello."}]}}},
    {"direction": "sent", "data": {"type": "response.create"}},
    {"direction": "received", "data": {"type": "response.output_text.delta", "event_id": "event_A3",
                                       "response_id": "resp_1", "item_id": "item_1",
                                       "output_index": 0, "content_index": 0, "delta": "Hello"}},
    {"direction": "received", "data": {"type": "response.done", "event_id": "event_A4",
                                       "response": {"id": "resp_1", "status": "completed",
                                                    "usage": {"input_tokens": 5,
                                                              "output_tokens": 1}}}},
]  # fmt: skip
GEMINI: Entries = [
    {"direction": "sent", "data": {"setup": {"model": "models/gemini-live-2.5-flash"}}},
    {"direction": "received", "data": {"setupComplete": {}}},
    {"direction": "sent", "data": {"client_content": {
        "turns": [{"parts": [{"text": "Say hello."}], "role": "user"}], "turnComplete": True}}},
    {"direction": "received",
     "data": {"serverContent": {"modelTurn": {"parts": [{"text": "Hi"}]}}}},
    {"direction": "received", "data": {"serverContent": {"turnComplete": True}}},
]  # fmt: skip


def write_source(path: Path, entries: Entries) -> Path:
    items = [{"kind": "message", **e} for e in entries]
    path.write_text(yaml.safe_dump({"version": 1, "interactions": items}, sort_keys=False))
    return path


def convert(source: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["import", "pydantic-ws", str(source), "-o", str(out)]) == 0
    report = capsys.readouterr().out
    assert "1 of 1 interaction" in report
    return report


def entries_of(source: Path) -> Entries:
    items: Entries = yaml.safe_load(source.read_text())["interactions"]
    return [e for e in items if e.get("kind", "message") == "message"]


# -- the clients ------------------------------------------------------------------------


async def _openai_async(url: str, model: str, entries: Entries) -> list[Any]:
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key=SDK_OPENAI_KEY, max_retries=0)
    got: list[Any] = []
    async with client.realtime.connect(model=model) as connection:
        try:
            for entry in entries:
                if entry["direction"] == "sent":
                    await connection.send(entry["data"])
                    continue
                got.append(json.loads(await connection.recv_bytes()))
                if got[-1].get("type") == "error":
                    break
        except websockets.exceptions.ConnectionClosed:
            # the proxy closed (a mismatch) while the client still sent:
            # what it sent before the close is still there to read
            with suppress(websockets.exceptions.ConnectionClosed):
                while True:
                    got.append(json.loads(await connection.recv_bytes()))
    return got


def _openai_sync(url: str, model: str, entries: Entries) -> list[Any]:
    client = openai.OpenAI(base_url=url + "/v1", api_key=SDK_OPENAI_KEY, max_retries=0)
    got: list[Any] = []
    with client.realtime.connect(model=model) as connection:
        try:
            for entry in entries:
                if entry["direction"] == "sent":
                    connection.send(entry["data"])
                    continue
                got.append(json.loads(connection.recv_bytes()))
                if got[-1].get("type") == "error":
                    break
        except websockets.exceptions.ConnectionClosed:  # as above
            with suppress(websockets.exceptions.ConnectionClosed):
                while True:
                    got.append(json.loads(connection.recv_bytes()))
    return got


async def openai_session(url: str, model: str, entries: Entries) -> list[Any]:
    """The file's session played by the OpenAI SDK: what the proxy sent.
    On trio, the sync client in a worker thread."""
    import sniffio

    if sniffio.current_async_library() == "trio":
        return await anyio.to_thread.run_sync(_openai_sync, url, model, entries)
    return await _openai_async(url, model, entries)


def _websockets_session(url: str, entries: Entries) -> tuple[list[Any], tuple[int, str] | None]:
    ws_url = url.replace("http://", "ws://") + GEMINI_PATH
    got: list[Any] = []
    closed = None
    # the key in a header, as google-genai sends it (the import assumed so)
    with ws_connect(ws_url, additional_headers={"x-goog-api-key": SDK_GEMINI_KEY}) as ws:
        try:
            for entry in entries:
                if entry["direction"] == "sent":
                    ws.send(json.dumps(entry["data"]))
                else:
                    got.append(json.loads(ws.recv()))
        except websockets.exceptions.ConnectionClosed as exc:
            closed = (exc.rcvd.code, exc.rcvd.reason) if exc.rcvd is not None else (0, "")
    return got, closed


async def websockets_session(
    url: str, entries: Entries
) -> tuple[list[Any], tuple[int, str] | None]:
    return await anyio.to_thread.run_sync(_websockets_session, url, entries)


def received(entries: Entries) -> list[Any]:
    return [e["data"] for e in entries if e["direction"] == "received"]


# -- the tests --------------------------------------------------------------------------


async def test_an_openai_file_replays_to_the_openai_realtime_client(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cassette = tmp_path / "realtime.jsonl"
    report = convert(write_source(tmp_path / "rt.yaml", OPENAI), cassette, capsys)
    assert "?model=gpt-realtime" in report
    async with running(options(Mode.REPLAY, cassette)) as url:
        got = await openai_session(url, "gpt-realtime", OPENAI)
    assert got == received(OPENAI)


async def test_a_changed_message_gets_the_error_event_not_the_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cassette = tmp_path / "realtime.jsonl"
    convert(write_source(tmp_path / "rt.yaml", OPENAI), cassette, capsys)
    changed = json.loads(json.dumps(OPENAI).replace("Say hello.", "Say goodbye."))
    async with running(options(Mode.REPLAY, cassette)) as url:
        got = await openai_session(url, "gpt-realtime", changed)
    assert [e["type"] for e in got] == ["session.created", "session.updated", "error"]
    assert "client message 1" in json.dumps(got[-1])  # the conversation.item.create


async def test_a_gemini_file_replays_to_a_websockets_client(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cassette = tmp_path / "live.jsonl"
    convert(write_source(tmp_path / "live.yaml", GEMINI), cassette, capsys)
    async with running(options(Mode.REPLAY, cassette)) as url:
        got, closed = await websockets_session(url, GEMINI)
        assert (got, closed) == (received(GEMINI), None)
        changed = json.loads(json.dumps(GEMINI).replace("Say hello.", "Say goodbye."))
        got, closed = await websockets_session(url, changed)
    assert got == received(GEMINI)[:1]  # the setupComplete, never the model's answer
    assert closed is not None
    assert closed[0] == 4004
    assert "client message 1" in closed[1]


CORPUS_FILES = {
    "test_openai_ws/test_text_in_audio_out_turn.yaml": "openai",
    "test_openai_ws_sideband/test_webrtc_sideband_text_turn.yaml": "openai",
    "test_google_ws/test_text_in_audio_out_turn.yaml": "gemini",
}


@pytest.mark.parametrize("name", sorted(CORPUS_FILES))
async def test_pydantic_ais_own_files_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    source = REALTIME / name
    if not source.is_file():
        pytest.skip(NO_CORPUS)
    cassette = tmp_path / "session.jsonl"
    convert(source, cassette, capsys)
    entries = entries_of(source)
    async with running(options(Mode.REPLAY, cassette)) as url:
        if CORPUS_FILES[name] == "openai":
            got = await openai_session(url, "gpt-realtime", entries)
        else:
            got, closed = await websockets_session(url, entries)
            assert closed is None
    assert got == received(entries)
