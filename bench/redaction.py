"""Redaction throughput: ``Redactor.data`` over big bodies, MB/s.

Every stored body, frame and message is scrubbed; a big one is scanned
only in windows around its candidates (docs/redaction.md, "Cost").  Each
body is made here, seeded, so runs compare: random bytes (an upload, 1 in
4 bytes a candidate's), text past ASCII (CJK and emoji, an e-mail address
and a phone number every 2 KB), ASCII JSON (chat messages, each holding
an address and a number: the worst ASCII case, every message a window), a
0.8 KB chat body (the fixed cost, in us) and an SSE stream recorded chunk
by chunk (``reel_core.tools.record_exchange``, the engine's recording
path: each event scrubbed as a frame).  The best of ``rounds`` timings counts.
"""

from __future__ import annotations

import json
import random

from reel_core import Redactor, Request
from reel_core.tools import record_exchange

from ._common import Row, best_of

__all__ = ["redaction_rows"]


def _non_ascii(size: int) -> bytes:
    line = "你好世界😀 ありがとう、" * 60 + "write to bob@example.com or 555-123-4567. "
    return (line * (size // len(line.encode()) + 1)).encode()[:size]


def _ascii_json(size: int) -> bytes:
    messages: list[dict[str, str]] = []
    total = 0
    while total < size:
        content = f"message {len(messages)}: mail ann{len(messages)}@example.com, 555-123-4567"
        messages.append({"role": "user", "content": content})
        total += len(content) + 32
    return json.dumps({"model": "gpt-4o-mini", "messages": messages}).encode()


SMALL = json.dumps(
    {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "Summarise the meeting notes. " * 22}],
    }
).encode()[:800]


def _sse(size: int) -> bytes:
    event = {"id": "chatcmpl-1", "choices": [{"delta": {"content": "你好世界 hello"}}]}
    frame = b"data: " + json.dumps(event, ensure_ascii=False).encode() + b"\n\n"
    return frame * (size // len(frame)) + b"data: [DONE]\n\n"


def _record_stream(body: bytes) -> None:
    chunks = [(i / 1e6, body[i : i + 4096]) for i in range(0, len(body), 4096)]
    record_exchange(
        Request("POST", "/v1/chat/completions", (), b"{}"),
        200,
        [(b"content-type", b"text/event-stream")],
        chunks,
        redactor=Redactor(),
    )


def redaction_rows(megabytes: float, stream_megabytes: float, rounds: int) -> list[Row]:
    """One row a body: its size, the best time and the throughput."""
    size = int(megabytes * 1_000_000)
    redactor = Redactor()
    bodies = {
        "binary (random bytes)": random.Random(1).randbytes(size),
        "text past ASCII (CJK, emoji)": _non_ascii(size),
        "ASCII JSON (an address a message)": _ascii_json(size),
    }
    rows: list[Row] = []
    for name, body in bodies.items():
        seconds = best_of(lambda body=body: redactor.data(body), rounds)  # type: ignore[misc]
        rows.append(_row(name, len(body), seconds))
    seconds = best_of(lambda: redactor.data(SMALL), 200 * rounds)
    rows.append({**_row("chat body, 0.8 KB", len(SMALL), seconds), "us": round(seconds * 1e6, 1)})
    stream = _sse(int(stream_megabytes * 1_000_000))
    seconds = best_of(lambda: _record_stream(stream), max(1, rounds // 2))
    rows.append(_row("SSE stream, recorded in 4 KB reads", len(stream), seconds))
    return rows


def _row(body: str, size: int, seconds: float) -> Row:
    return {
        "body": body,
        "mb": round(size / 1_000_000, 3),
        "ms": round(seconds * 1000, 2),
        "mb_per_s": round(size / 1_000_000 / seconds, 1),
    }
