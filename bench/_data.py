"""The interactions every benchmark replays, written as a Reel cassette and
as a vcrpy YAML cassette holding the same requests and responses.

Interactions are OpenAI chat completions of realistic size: a system prompt
and a user question (about 0.8 KB of request), an answer of about 1.3 KB,
and every fifth one a 40-frame SSE stream (about 8 KB): 3.8 KB a cassette
line on average.  The request bodies are byte-identical in both cassettes,
so both tools answer the same requests.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

from reel_core import (
    Cassette,
    Interaction,
    MatchConfig,
    RecordedRequest,
    RecordedResponse,
    Redactor,
    Request,
)
from reel_core.tools import match_key, sent_digest

from ._answers import (
    BASE_URL,
    PATH,
    REQUEST_HEADERS,
    RESPONSE_HEADERS,
    SSE_HEADERS,
    STREAM_EVERY,
    STREAM_FRAMES,
    WORDS,
    answer_body,
    answer_value,
    compact,
    is_stream,
    request_body,
    request_value,
    sse_frames,
)

__all__ = [
    "BASE_URL",
    "PATH",
    "REQUEST_HEADERS",
    "Corpus",
    "answer_body",
    "request_body",
    "sse_frames",
    "write_big_stream_cassette",
    "write_stream_cassette",
]


_KEY_PREFIX = f"POST\n{PATH}\n[]\n".encode()
_META = {"tokens_in": 212, "tokens_out": 150, "cost_usd": 0.000122, "total_ms": 412.0}


def _sent(body: bytes) -> str:
    """The digest as sent (``reel_core._sent``) Reel records for ``body``
    posted as the benches post it, under the default redaction rules."""
    request = Request("POST", PATH, ((b"content-type", b"application/json"),), body)
    return sent_digest(request, Redactor.from_settings({}))


def _interaction(i: int, *, sent: bool = True) -> Interaction:
    """Interaction ``i`` built with Reel's own types (slow; checks :func:`_line`)."""
    stream = is_stream(i)
    body = request_body(i, stream=stream)
    key = match_key("POST", PATH, (), body, MatchConfig())
    request = RecordedRequest("POST", PATH, (), body)
    if stream:
        frames = tuple(sse_frames(i, STREAM_FRAMES))
        response = RecordedResponse(
            200, SSE_HEADERS, stream="sse", frames=frames, end_ms=frames[-1][0] + 1.0
        )
    else:
        response = RecordedResponse(200, RESPONSE_HEADERS, body=answer_body(i))
    return Interaction(
        key,
        key[7:19],
        request,
        response,
        timestamp="2025-10-09T10:00:00.000Z",
        provider="openai",
        endpoint=f"POST {PATH}",
        meta=_META,
        sent=_sent(body) if sent else None,
    )


def _line(i: int, *, sent: bool = True) -> bytes:
    """``_interaction(i).to_line()``, built directly (ten times faster).
    ``sent=False``: the line as a Reel before the digest wrote it."""
    stream = is_stream(i)
    value = request_value(i, stream=stream)
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    key = "sha256:" + hashlib.sha256(_KEY_PREFIX + canonical.encode()).hexdigest()
    response: dict[str, Any]
    if stream:
        frames = sse_frames(i, STREAM_FRAMES)
        response = {
            "status": 200,
            "headers": [list(h) for h in SSE_HEADERS],
            "stream": "sse",
            "frames": [[at, data.decode()] for at, data in frames],
            "end": {"at": frames[-1][0] + 1.0},
        }
    else:
        response = {
            "status": 200,
            "headers": [list(h) for h in RESPONSE_HEADERS],
            "body": {"json": answer_value(i), "style": "indent=2"},
        }
    line = {
        "key": key,
        **({"sent": _sent(request_body(i, stream=stream))} if sent else {}),
        "id": key[7:19],
        "ts": "2025-10-09T10:00:00.000Z",
        "provider": "openai",
        "endpoint": f"POST {PATH}",
        "request": {"method": "POST", "path": PATH, "body": {"json": value}},
        "response": response,
        "meta": _META,
    }
    return compact(line).encode() + b"\n"


class Corpus:
    """``n`` distinct interactions, written once per size into ``directory``."""

    def __init__(self, directory: Path, n: int, *, sent: bool = True) -> None:
        self.n = n
        #: Whether lines carry the digest of their request as sent (a
        #: cassette recorded before Reel wrote it does not).
        self.sent = sent
        self.reel = directory / f"reel-{n}{'' if sent else '-unsent'}.jsonl"
        self.vcr = directory / f"vcr-{n}.yaml"

    def write_reel(self) -> Path:
        if not self.reel.exists():
            sent = self.sent
            for i in (0, STREAM_EVERY - 1):  # the fast writer agrees with Reel's own
                if _line(i, sent=sent) != _interaction(i, sent=sent).to_line():
                    raise AssertionError(f"bench line {i} differs from Interaction.to_line()")
            with self.reel.open("wb") as f:
                f.write(Cassette().meta.to_line())
                f.writelines(_line(i, sent=sent) for i in range(self.n))
        return self.reel

    def write_vcr(self) -> Path:
        """The same interactions as a vcrpy cassette, written by vcrpy's own
        YAML serializer (one interaction at a time, to bound memory: the
        concatenation is what one ``yaml.dump`` of the whole list writes)."""
        if not self.vcr.exists():
            from vcr.serializers import yamlserializer  # type: ignore[import-untyped]

            with self.vcr.open("w") as f:
                f.write("interactions:\n")
                for i in range(self.n):
                    f.write(yamlserializer.serialize([self._vcr_interaction(i)]))
                f.write("version: 1\n")
        return self.vcr

    def _vcr_interaction(self, i: int) -> dict[str, Any]:
        stream = is_stream(i)
        body = request_body(i, stream=stream)
        response_headers: tuple[tuple[str, str], ...]
        if stream:
            content = b"".join(data for _, data in sse_frames(i, STREAM_FRAMES))
            response_headers = SSE_HEADERS
        else:
            content = answer_body(i)
            response_headers = RESPONSE_HEADERS
        headers = {
            "accept": ["*/*"],
            "accept-encoding": ["gzip, deflate"],
            "connection": ["keep-alive"],
            "content-length": [str(len(body))],
            "content-type": ["application/json"],
            "host": ["api.openai.com"],
            "user-agent": ["python-httpx/0.28.1"],
        }
        return {
            "request": {
                "body": body.decode(),
                "headers": headers,
                "method": "POST",
                "uri": BASE_URL + PATH,
            },
            "response": {
                "body": {"string": content.decode()},
                "headers": {k: [v] for k, v in response_headers},
                "status": {"code": 200, "message": "OK"},
            },
        }

    def non_stream(self, count: int, seed: int = 0) -> list[int]:
        """``count`` distinct non-stream interactions spread over the cassette
        (fewer when it holds fewer)."""
        pool = [i for i in range(self.n) if not is_stream(i)]
        if count >= len(pool):
            return pool
        return sorted(random.Random(seed).sample(pool, count))


def write_stream_cassette(path: Path, frames: int, gap_ms: float) -> tuple[bytes, list[float]]:
    """A cassette of one ``frames``-frame SSE stream; returns its request
    body and the recorded frame offsets (ms)."""
    config = MatchConfig()
    body = request_body(0, stream=True)
    recorded = sse_frames(0, frames, gap_ms)
    key = match_key("POST", PATH, (), body, config)
    response = RecordedResponse(
        200, SSE_HEADERS, stream="sse", frames=tuple(recorded), end_ms=recorded[-1][0] + gap_ms
    )
    interaction = Interaction(key, key[7:19], RecordedRequest("POST", PATH, (), body), response)
    path.write_bytes(Cassette().meta.to_line() + interaction.to_line())
    return body, [at for at, _ in recorded] + [response.end_ms]


def write_big_stream_cassette(path: Path, megabytes: float) -> tuple[bytes, bytes, int]:
    """A cassette of one SSE stream of about ``megabytes`` MB (small frames,
    all at offset 0) and of interaction 1 (a small non-stream answer);
    returns the stream's request body, the small one's, and the stream's
    body size in bytes."""
    body = request_body(0, stream=True)
    frames: list[tuple[float, bytes]] = []
    size = 0
    j = 0
    while size < megabytes * 1_000_000:
        word = WORDS[j % len(WORDS)]
        data = (
            'data: {"id":"chatcmpl-big","object":"chat.completion.chunk","choices":[{"index":0,'
            f'"delta":{{"content":" {word} {j}"}},"finish_reason":null}}]}}\n\n'
        ).encode()
        frames.append((0.0, data))
        size += len(data)
        j += 1
    frames.append((0.0, b"data: [DONE]\n\n"))
    size += len(frames[-1][1])
    key = match_key("POST", PATH, (), body, MatchConfig())
    response = RecordedResponse(200, SSE_HEADERS, stream="sse", frames=tuple(frames), end_ms=0.0)
    big = Interaction(key, key[7:19], RecordedRequest("POST", PATH, (), body), response)
    with path.open("wb") as f:
        f.write(Cassette().meta.to_line() + big.to_line() + _line(1))
    return body, request_body(1), size
