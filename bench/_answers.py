"""The interactions every benchmark sends and answers, as plain values and
bytes: what a fake upstream answers and what a generated test asks.  Only
the standard library, so a suite's ``conftest`` importing it (the floor's
too) imports none of Reel: Reel's imports count as Reel's.  The cassette
lines and vcrpy cassettes built from them are in :mod:`bench._data`.
"""

from __future__ import annotations

import json
import random
from typing import Any

__all__ = [
    "BASE_URL",
    "PATH",
    "REQUEST_HEADERS",
    "RESPONSE_HEADERS",
    "SSE_HEADERS",
    "STREAM_EVERY",
    "STREAM_FRAMES",
    "WORDS",
    "answer_body",
    "answer_value",
    "compact",
    "is_stream",
    "request_body",
    "request_value",
    "sse_frames",
]

BASE_URL = "https://api.openai.com"
PATH = "/v1/chat/completions"
#: What an SDK sends with each request (never stored by Reel).
REQUEST_HEADERS = {
    "content-type": "application/json",
    "authorization": "Bearer sk-bench0000000000000000000000000000000000000000",
}
RESPONSE_HEADERS = (
    ("content-type", "application/json"),
    ("x-request-id", "req_bench"),
    ("openai-processing-ms", "412"),
    ("x-ratelimit-remaining-requests", "9999"),
)
SSE_HEADERS = (("content-type", "text/event-stream; charset=utf-8"),)
STREAM_EVERY = 5
STREAM_FRAMES = 40

_SYSTEM = (
    "You are a careful assistant for a bookshop. Answer in two short paragraphs, cite the "
    "catalogue entry you used, and never invent a title that is not in the catalogue. "
) * 2
WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "seven",
    "wizards",
    "quietly",
    "box",
    "jackdaws",
    "near",
    "the",
    "old",
    "mill",
    "and",
    "the",
    "river",
    "bends",
    "toward",
    "the",
    "northern",
    "hills",
]


def request_value(i: int, *, stream: bool = False) -> dict[str, Any]:
    """The request of interaction ``i`` as a JSON value."""
    body: dict[str, Any] = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": _SYSTEM},
            {
                "role": "user",
                "content": f"Question {i}: which of our titles about "
                + " ".join(WORDS[(i + k) % len(WORDS)] for k in range(24))
                + " would you recommend?",
            },
        ],
        "temperature": 0.2,
    }
    if stream:
        body["stream"] = True
    return body


def request_body(i: int, *, stream: bool = False) -> bytes:
    """The request of interaction ``i``, as an SDK sends it (compact JSON)."""
    return compact(request_value(i, stream=stream)).encode()


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _text(i: int, words: int) -> str:
    return " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(words))


def answer_value(i: int) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-bench{i:08d}",
        "object": "chat.completion",
        "created": 1_760_000_000 + i,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": _text(i, 120), "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 212, "completion_tokens": 150, "total_tokens": 362},
        "system_fingerprint": "fp_bench",
    }


def answer_body(i: int) -> bytes:
    """The non-stream answer of interaction ``i`` (about 1.3 KB, indented as
    OpenAI sends it)."""
    return json.dumps(answer_value(i), indent=2).encode()


def sse_frames(i: int, count: int, gap_ms: float = 8.0) -> list[tuple[float, bytes]]:
    """``count`` recorded SSE frames of a chat stream, with offsets in ms.

    Gaps vary (a seeded draw around ``gap_ms``) like a real token stream's.
    """
    rng = random.Random(i)
    frames = []
    at = 0.0
    for j in range(count - 1):
        chunk = {
            "id": f"chatcmpl-bench{i:08d}",
            "object": "chat.completion.chunk",
            "created": 1_760_000_000 + i,
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [
                {
                    "index": 0,
                    "delta": {"content": " " + WORDS[(i + j) % len(WORDS)]},
                    "finish_reason": None,
                }
            ],
        }
        frames.append((round(at, 3), f"data: {compact(chunk)}\n\n".encode()))
        at += gap_ms * rng.uniform(0.25, 1.75)
    frames.append((round(at, 3), b"data: [DONE]\n\n"))
    return frames


def is_stream(i: int) -> bool:
    return i % STREAM_EVERY == STREAM_EVERY - 1
