"""Record mode's lines, byte for byte: the same exchanges recorded through
the proxy give the lines of ``golden/proxy_record.jsonl``.

The golden file was written before the record path was made cheaper
(issue 36, record mode against a bare relay): every change to how a
forward is passed on and its recording built must leave what reaches the
disk as it was.  Only what the clock decides is masked (``_masked``): the
line's timestamp, the time to first byte and total, the frames' and the
end's offsets.  The salt is fixed by a ``_meta`` line written first (record
mode keeps a cassette's salt), so the digests are the golden's too.

The exchanges go over one keep-alive connection as raw bytes (no client
library's headers), one after the other: JSON and SSE answers of three
providers, secrets in a request's body and headers and echoed in the
answer (redaction runs on every part written), a gzip answer, a 429, an
in-stream error, a query, and one request twice (numbered).

To write the golden file again, deliberately: ``python -m
tests.bindings.test_proxy_record_golden``.
"""

from __future__ import annotations

import json
import re
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import pytest

from reel_bindings.proxy import running
from reel_core import Mode
from tests.fakes.upstream import serve_fake
from tests.fakes.wire import SCENARIO_HEADER

from .proxy_support import Call, anthropic_call, chat_call, options, responses_call

pytestmark = pytest.mark.anyio

GOLDEN = Path(__file__).parent / "golden" / "proxy_record.jsonl"

#: The cassette's salt: the digests of redacted values and the ``sent``
#: digests depend on it.
SALT = "0123456789abcdef0123456789abcdef"

_KEY = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z" * 2

#: ``(call, extra headers)`` of each exchange, in order.
EXCHANGES: list[tuple[Call, dict[str, str]]] = [
    (chat_call("one two three"), {}),
    (chat_call("one two three", stream=True), {}),
    (chat_call(f"my key is {_KEY}, keep it"), {}),
    (
        chat_call("echo it", stream=False),
        {SCENARIO_HEADER: "echo-key", "authorization": f"Bearer {_KEY}"},
    ),
    (
        chat_call("echo it", stream=True),
        {SCENARIO_HEADER: "echo-key", "authorization": f"Bearer {_KEY}"},
    ),
    (chat_call("squeezed"), {SCENARIO_HEADER: "gzip"}),
    (chat_call("squeezed", stream=True), {SCENARIO_HEADER: "gzip"}),
    (chat_call("too many"), {SCENARIO_HEADER: "429"}),
    (chat_call("breaks off", stream=True), {SCENARIO_HEADER: "stream-error"}),
    (chat_call("weather?", tools=True), {}),
    (anthropic_call("hello there"), {}),
    (anthropic_call("hello there", stream=False), {}),
    (responses_call("a response"), {}),
    (chat_call("one two three"), {}),  # again: numbered, a second recording
]


def _raw(call: Call, headers: dict[str, str], netloc: str, query: str) -> bytes:
    lines = [
        f"POST {call.path}{query} HTTP/1.1",
        f"host: {netloc}",
        "content-type: application/json",
        f"content-length: {len(call.content)}",
        *(f"{k}: {v}" for k, v in {**call.headers, **headers}.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + call.content


def _read_response(sock: socket.socket) -> bytes:
    """One whole response (content-length or chunked) off ``sock``; its head."""

    def more() -> bytes:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("the proxy closed the connection mid-response")
        return data

    data = b""
    while b"\r\n\r\n" not in data:
        data += more()
    head, _, body = data.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" in head.lower():
        while not body.endswith(b"\r\n0\r\n\r\n") and body != b"0\r\n\r\n":
            body += more()
        return head
    length = re.search(rb"(?i)content-length: *(\d+)", head)
    assert length is not None, head
    while len(body) < int(length.group(1)):
        body += more()
    return head


#: What the clock decides in a line, masked: the timestamp, the times to
#: the first byte, token and end, each frame's and the end's offset.
_CLOCK = [
    (re.compile(rb'"ts":"[^"]*"'), b'"ts":"T"'),
    (re.compile(rb'"(ttfb_ms|total_ms|ttft_ms)":[0-9.e+-]+'), rb'"\1":0'),
    (re.compile(rb'"at":[0-9.e+-]+'), b'"at":0'),
    (re.compile(rb'(?<=[\[,]\[)[0-9.e+-]+(?=,")'), b"0"),
]


def _masked(line: bytes) -> bytes:
    for pattern, mask in _CLOCK:
        line = pattern.sub(mask, line)
    return line


async def record_lines(cassette: Path) -> list[bytes]:
    """The exchanges recorded through a proxy in record mode, each line masked."""
    meta = {"_meta": {"schema": 3, "match": "normalized", "redact": {"salt": SALT}}}
    cassette.write_text(json.dumps(meta) + "\n")
    async with (
        serve_fake(frame_delay=0.001) as fake,
        running(options(Mode.RECORD, cassette, upstream=fake.url)) as url,
    ):
        parts = urlsplit(url)
        with socket.create_connection((parts.hostname, parts.port)) as sock:
            for i, (call, headers) in enumerate(EXCHANGES):
                query = "?api-version=2024-10-21" if i == 9 else ""
                sock.sendall(_raw(call, headers, parts.netloc, query))
                head = await anyio.to_thread.run_sync(_read_response, sock)
                assert head.startswith(b"HTTP/1.1 "), head
    lines = cassette.read_bytes().splitlines(keepends=True)
    return [_masked(line) for line in lines[1:]]


async def test_record_mode_writes_the_golden_lines(tmp_path: Path) -> None:
    lines = await record_lines(tmp_path / "c.jsonl")
    golden = GOLDEN.read_bytes().splitlines(keepends=True)
    assert len(lines) == len(EXCHANGES)
    for i, (line, expected) in enumerate(zip(lines, golden, strict=True)):
        assert line == expected, f"line {i + 1} differs from the golden one"


def _write_golden() -> None:  # pragma: no cover - run by hand, deliberately
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        lines = anyio.run(record_lines, Path(tmp) / "c.jsonl")
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_bytes(b"".join(lines))
    print(f"wrote {len(lines)} lines to {GOLDEN}", file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    _write_golden()
