"""Building small cassettes for the CLI tests (not a test module)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reel_core import (
    Cassette,
    CassetteMeta,
    Config,
    Engine,
    Interaction,
    MatchConfig,
    Mode,
    Recorded,
    RecordedRequest,
    RecordedResponse,
    Request,
    Signal,
)

__all__ = [
    "DEMO",
    "anthropic_stream",
    "chat_body",
    "chat_request",
    "interaction",
    "openai_stream",
    "record",
    "write",
]

DEMO = Path(__file__).resolve().parents[2] / "src" / "reel_bindings" / "demo" / "demo.jsonl"


def chat_body(content: str = "Say hi", model: str = "gpt-4o-mini", **extra: Any) -> bytes:
    return json.dumps(
        {"model": model, "messages": [{"role": "user", "content": content}], **extra}
    ).encode()


def chat_request(content: str = "Say hi", model: str = "gpt-4o-mini") -> RecordedRequest:
    return RecordedRequest("POST", "/v1/chat/completions", body=chat_body(content, model))


def interaction(
    request: RecordedRequest | None = None,
    response: RecordedResponse | None = None,
    *,
    id: str | None = None,
    provider: str = "openai",
    meta: dict[str, Any] | None = None,
) -> Interaction:
    """An interaction keyed like a recording under the default settings."""
    request = request if request is not None else chat_request()
    response = response if response is not None else RecordedResponse(200, body=b'{"ok":true}')
    key = request.key(MatchConfig())
    return Interaction(
        key=key,
        id=id or key[7:19],
        request=request,
        response=response,
        provider=provider,
        endpoint=f"{request.method} {request.path}",
        meta=meta or {},
    )


def write(path: Path, *items: Interaction | bytes, meta: CassetteMeta | None = None) -> Path:
    """A cassette file: the _meta line, then each interaction (or raw line)."""
    lines = [(meta or CassetteMeta()).to_line()]
    for item in items:
        lines.append(item if isinstance(item, bytes) else item.to_line())
    path.write_bytes(b"".join(lines))
    return path


def openai_stream(words: Sequence[str], model: str = "gpt-4o-mini") -> list[bytes]:
    frames = []
    for word in words:
        chunk: dict[str, Any] = {"object": "chat.completion.chunk", "model": model}
        chunk["choices"] = [{"index": 0, "delta": {"content": word}}]
        frames.append(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    usage = {"prompt_tokens": 5, "completion_tokens": len(words), "total_tokens": 5 + len(words)}
    last = {"object": "chat.completion.chunk", "model": model, "choices": [], "usage": usage}
    frames.append(b"data: " + json.dumps(last).encode() + b"\n\n")
    frames.append(b"data: [DONE]\n\n")
    return frames


def anthropic_stream(text: str, tool: tuple[str, str] | None = None) -> list[bytes]:
    def event(name: str, data: dict[str, Any]) -> bytes:
        return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

    frames = [
        event(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "model": "claude-sonnet-4-5",
                    "usage": {"input_tokens": 10, "output_tokens": 1},
                },
            },
        ),
        event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        event(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": text},
            },
        ),
    ]
    if tool is not None:
        frames.append(
            event(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 1,
                    "content_block": {"type": "tool_use", "name": tool[0]},
                },
            )
        )
        frames.append(
            event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 1,
                    "delta": {"type": "input_json_delta", "partial_json": tool[1]},
                },
            )
        )
    frames.append(event("message_delta", {"type": "message_delta", "usage": {"output_tokens": 12}}))
    frames.append(event("message_stop", {"type": "message_stop"}))
    return frames


def record(
    method: str,
    target: str,
    body: bytes,
    status: int,
    headers: Sequence[tuple[str, str]],
    chunks: Sequence[tuple[float, bytes]],
    *,
    cassette: Cassette | None = None,
    host: str = "api.openai.com",
) -> Interaction:
    """Record one exchange through a reel_core Engine: ``chunks`` are
    ``(seconds after the head, bytes)``; the request went out 50 ms before
    the head."""
    session = Engine(cassette if cassette is not None else Cassette(), Config(mode=Mode.RECORD))
    session.receive_request(Request(method, target, ((b"host", host.encode()),), body))
    while not isinstance(session.next_event(), Signal):
        pass
    t0 = 100.0
    session.upstream_head(
        status,
        [(k.encode(), v.encode()) for k, v in headers],
        mono=t0,
        sent_at=t0 - 0.05,
        wall=1.767e9,
    )
    for at, data in chunks:
        session.upstream_data(data, mono=t0 + at)
    session.upstream_end(mono=t0 + (chunks[-1][0] if chunks else 0.0) + 0.001)
    events = []
    while not isinstance(event := session.next_event(), Signal):
        events.append(event)
    assert events
    recorded = session.record()
    assert isinstance(recorded, Recorded)
    return Interaction.from_json(json.loads(recorded.line))
