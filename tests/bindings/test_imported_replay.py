"""An imported cassette replays through every binding as the engine replays
it: the proxy (asyncio, trio), the httpx/httpx2 transports (sync, async on
both backends) and the requests adapter give each recorded request the same
status and body.

Sources: small nock, Reyn and AgentTape files written here, and (when
``../shared/corpus`` is beside the repository) the first corpus files of
every format the corpus holds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reel_bindings.cli import main
from reel_core import Cassette, Config, Engine, Frame, Mode, Request, ResponseHead, Signal
from reel_core._formats._export import request_type
from tests.corpus import CORPUS

from .openers import BINDINGS, Call, Reply

GONE = "http://127.0.0.1:9"  # nothing listens: a replay that reached out would fail
#: Corpus files per manifest format (the first ones that hold interactions).
PER_FORMAT = 2
CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
ANSWER = {"id": "chatcmpl-1", "object": "chat.completion", "choices": []}
SSE = 'data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'


def nock_source() -> bytes:
    scope = "https://api.openai.com:443"
    headers = ["Content-Type", "application/json"]
    return json.dumps(
        [
            {
                "scope": scope,
                "method": "POST",
                "path": "/v1/chat/completions",
                "body": CHAT,
                "status": 200,
                "response": ANSWER,
                "rawHeaders": headers,
            },
            {
                "scope": scope,
                "method": "POST",
                "path": "/v1/chat/completions",
                "body": {**CHAT, "stream": True},
                "status": "200",
                "response": SSE,
                "rawHeaders": ["Content-Type", "text/event-stream"],
            },
            {
                "scope": scope,
                "method": "GET",
                "path": "/v1/models?limit=2",
                "status": 404,
                "response": {"error": {"type": "not_found"}},
                "rawHeaders": headers,
            },
        ]
    ).encode()


def reyn_source() -> bytes:
    def line(prompt: str, text: str) -> str:
        response = {
            "id": "c1",
            "created": 1755520978,
            "model": "gpt-4o-mini",
            "object": "chat.completion",
            "choices": [
                {
                    "finish_reason": "stop",
                    "index": 0,
                    "message": {"content": text, "role": "assistant"},
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
        }
        return json.dumps(
            {
                "key": "ab" * 32,
                "model": "gpt-4o-mini",
                "prompt_preview": prompt,
                "response": response,
            }
        )

    return (line("Say hi", "Hi") + "\n" + line("Say bye", "Bye") + "\n").encode()


def agenttape_source() -> bytes:
    ok = {
        "status_code": 200,
        "headers": {"Content-Type": "application/json"},
        "json": {"data": [1, 2]},
    }
    interactions = [
        {
            "index": 0,
            "kind": "http",
            "boundary": "api.example.com",
            "request": {
                "method": "POST",
                "url": "https://api.example.com/v1/items?page=2",
                "headers": {"Content-Type": "application/json"},
                "json": {"q": "x"},
            },
            "response": ok,
        },
        {
            "index": 1,
            "kind": "http",
            "boundary": "api.example.com",
            "request": {"method": "GET", "url": "https://api.example.com/health"},
            "response": {
                "status_code": 503,
                "headers": {"Content-Type": "text/plain"},
                "text": "down",
            },
        },
    ]
    doc = {
        "version": "1",
        "created_at": "2026-01-02T03:04:05",
        "meta": {},
        "interactions": interactions,
    }
    return json.dumps(doc).encode()


def sources() -> list[tuple[str, str, bytes | Path]]:
    """(format, label, the source: bytes to write, or a corpus path)."""
    found: list[tuple[str, str, bytes | Path]] = [
        ("nock", "nock.json", nock_source()),
        ("reyn", "reyn.jsonl", reyn_source()),
        ("agenttape", "agenttape.json", agenttape_source()),
    ]
    manifest = CORPUS / "MANIFEST.jsonl"
    if manifest.is_file():
        taken: dict[str, int] = {}
        names = {
            "vcrpy": "vcr",
            "ruby_vcr": "ruby-vcr",
            "har": "har",
            "httprr": "httprr",
            "llamastack": "llamastack",
        }
        for entry in map(json.loads, manifest.read_text().splitlines()):
            fmt = names.get(entry.get("format", ""))
            if fmt and entry["interactions"] and taken.get(fmt, 0) < PER_FORMAT:
                taken[fmt] = taken.get(fmt, 0) + 1
                found.append((fmt, entry["file"], CORPUS / entry["file"]))
    return found


SOURCES = sources()


def imported(fmt: str, source: bytes | Path, tmp_path: Path) -> Path:
    if isinstance(source, bytes):
        path = tmp_path / f"source.{fmt}"
        path.write_bytes(source)
        source = path
    out = tmp_path / "imported.jsonl"
    assert main(["import", fmt, str(source), "-o", str(out)]) == 0
    return out


def calls_of(cassette: Cassette) -> list[Call]:
    """Each recorded request as a client sends it again."""
    calls = []
    for ix in cassette.interactions():
        req = ix.request
        query = "&".join(f"{k}={v}" for k, v in req.query)
        target = req.path + ("?" + query if query else "")
        headers = {"content-type": request_type(ix)} if req.body else {}
        calls.append(Call(req.method, target, req.body, headers))
    return calls


def engine_replies(cassette: Cassette, calls: list[Call]) -> list[Reply]:
    """What the engine answers each call, in order (repeats in turn)."""
    engine = Engine(cassette, Config(mode=Mode.REPLAY))
    replies = []
    for call in calls:
        headers = tuple((k.encode(), v.encode()) for k, v in call.headers.items())
        engine.receive_request(Request(call.method, call.target, headers, call.body))
        status, body = 0, b""
        while not isinstance(event := engine.next_event(), Signal):
            if isinstance(event, ResponseHead):
                status = event.status
            elif isinstance(event, Frame):
                body += event.data
        replies.append(Reply(status, body))
        engine.start_next_cycle()
    return replies


@pytest.mark.parametrize(("fmt", "label", "source"), SOURCES, ids=[s[1] for s in SOURCES])
def test_an_imported_cassette_replays_alike_in_every_binding(
    fmt: str, label: str, source: bytes | Path, tmp_path: Path
) -> None:
    path = imported(fmt, source, tmp_path)
    cassette = Cassette.loads(path.read_bytes(), strict=True)
    calls = calls_of(cassette)
    assert calls, label
    reference = engine_replies(cassette, calls)
    assert not [r for r in reference if b'"reel_miss"' in r.body], (label, reference)
    for binding, opener in BINDINGS.items():
        with opener(path, Mode.REPLAY, GONE) as send:
            got = [send(call) for call in calls]
        assert got == reference, (label, binding)
