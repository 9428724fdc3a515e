"""The calls of the generated test suite (``bench/suite.py``), and the one
answer each of them gets: from the fake upstream while a tool records, from
``httpx2.MockTransport`` in the floor's suite.

Test ``t`` makes 1 to 5 calls (3 on average) through the official OpenAI
SDK.  Call ``c`` of test ``t`` asks ``Suite test t call c``; a fifth of the
calls stream (20 SSE frames) and a tenth are retries: the first attempt is
answered 429 or 500 (``retry-after-ms: 1``, so the SDK's own retry waits
a millisecond), the next one 200.  Whether a call streams or retries is a
function of ``(t, c)`` alone, so every tool, the upstream and the floor
agree on it without talking.  The stream-free variant (for agenttape, which
records no OpenAI stream) makes the same calls with none streaming.

Each test checks every answer's text, so a tool that replays the wrong
recording fails the run.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MODEL",
    "Call",
    "answer",
    "ask",
    "calls_of",
    "mock_handler",
    "reply_text",
]

MODEL = "gpt-4o-mini"
STREAM_FRAMES = 20
_SYSTEM = (
    "You are a careful assistant for a bookshop. Answer in two short sentences and "
    "never invent a title that is not in the catalogue."
)
_QUESTION = re.compile(rb"Suite test (\d+) call (\d+)")
_TEXT = "the quick brown fox jumps over a lazy dog near the old mill by the river"
_WORDS = _TEXT.split()


@dataclass(frozen=True)
class Call:
    """One SDK call of a test: whether it streams, and the status its first
    attempt gets (``None``: no retry; 429 or 500: answered so first)."""

    test: int
    index: int
    stream: bool
    retry: int | None


def calls_of(test: int, *, streams: bool = True) -> list[Call]:
    """The calls of test ``test`` (1 to 5 of them)."""
    out = []
    for c in range(1 + (test * 7 + 3) % 5):
        h = (test * 31 + c * 17) % 20
        retry = 429 if h == 5 else 500 if h == 9 else None
        out.append(Call(test, c, stream=streams and h < 4, retry=retry))
    return out


def reply_text(test: int, index: int) -> str:
    """The text of the answer to call ``index`` of test ``test``."""
    words = " ".join(_WORDS[(test + index + k) % len(_WORDS)] for k in range(30))
    return f"Answer {test}.{index}: {words}."


def _question(call: Call) -> str:
    return f"Suite test {call.test} call {call.index}: which title would you recommend?"


def _chunks(text: str) -> list[str]:
    step = max(1, len(text) // STREAM_FRAMES + 1)
    return [text[i : i + step] for i in range(0, len(text), step)]


Answer = tuple[int, list[tuple[str, str]], bytes]


def answer(body: bytes, attempt: int) -> Answer:
    """What the upstream answers to a request with ``body``, the
    ``attempt``-th time (0 first) it is asked: (status, headers, body)."""
    found = _QUESTION.search(body)
    if found is None:
        error = {"error": {"message": "not a suite call", "type": "invalid_request_error"}}
        return 400, [("content-type", "application/json")], json.dumps(error).encode()
    test, index = int(found.group(1)), int(found.group(2))
    retry = calls_of(test)[index].retry
    if retry is not None and attempt == 0:
        kind = "rate_limit_exceeded" if retry == 429 else "server_error"
        error = {"error": {"message": f"try again ({kind})", "type": kind, "code": kind}}
        headers = [("content-type", "application/json"), ("retry-after-ms", "1")]
        return retry, headers, json.dumps(error).encode()
    text = reply_text(test, index)
    created = 1_760_000_000 + test
    ident = f"chatcmpl-suite-{test}-{index}"
    if json.loads(body).get("stream"):
        frames = []
        for piece in _chunks(text):
            chunk = {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": created,
                "model": MODEL,
                "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
            }
            frames.append(f"data: {json.dumps(chunk)}\n\n")
        frames.append("data: [DONE]\n\n")
        sse = [("content-type", "text/event-stream; charset=utf-8")]
        return 200, sse, "".join(frames).encode()
    value = {
        "id": ident,
        "object": "chat.completion",
        "created": created,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 40, "completion_tokens": 30, "total_tokens": 70},
    }
    headers = [("content-type", "application/json"), ("x-request-id", ident)]
    return 200, headers, json.dumps(value, indent=2).encode()


class Attempts:
    """How many times each call was asked so far (thread-safe)."""

    def __init__(self) -> None:
        self._seen: dict[bytes, int] = {}
        self._lock = threading.Lock()

    def next(self, body: bytes) -> int:
        found = _QUESTION.search(body)
        key = found.group(0) if found else b""
        with self._lock:
            n = self._seen.get(key, 0)
            self._seen[key] = n + 1
        return n

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()


def mock_handler() -> Callable[[Any], Any]:
    """The floor: an ``httpx2.MockTransport`` handler giving every call its
    answer, as the fake upstream does (the retries' first attempts too)."""
    import httpx2

    attempts = Attempts()

    def handle(request: httpx2.Request) -> httpx2.Response:
        body = request.read()
        status, headers, content = answer(body, attempts.next(body))
        return httpx2.Response(status, headers=headers, content=content)

    return handle


def ask(client: Any, test: int, *, streams: bool = True) -> None:
    """Make test ``test``'s calls through ``client`` (an ``openai.OpenAI``)
    and check every answer's text."""
    for call in calls_of(test, streams=streams):
        messages = [
            {"role": "system", "content": _SYSTEM},
            {"role": "user", "content": _question(call)},
        ]
        expected = reply_text(test, call.index)
        if call.stream:
            stream = client.chat.completions.create(
                model=MODEL, messages=messages, temperature=0.2, stream=True
            )
            got = "".join(chunk.choices[0].delta.content or "" for chunk in stream)
        else:
            reply = client.chat.completions.create(model=MODEL, messages=messages, temperature=0.2)
            got = reply.choices[0].message.content
        if got != expected:
            raise AssertionError(f"call {test}.{call.index}: got {got!r}, want {expected!r}")
