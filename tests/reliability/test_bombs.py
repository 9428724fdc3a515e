"""Decompression bombs: every body goes through one bounded decoding path.

About half a megabyte of gzip that inflates to 512 MiB, inside a HAR, a
vcrpy ``!!binary`` body, nock's hex chunks or an httprr trace (and a
``.httprr.gz`` trace that itself inflates so), is refused by ``reel
import`` with the reason (the entry skipped, exit 1; a whole file that
inflates too far, exit 2), never a ``MemoryError`` nor a traceback.  The
same answer recorded through the proxy is kept compressed and flagged, and
``reel check`` fails on it.  What is measured is peak memory (the
process's maximum resident size, or ``tracemalloc``'s peak), never time:
unbounded, each of these takes more than 512 MiB.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import subprocess
import sys
import tracemalloc
import zlib
from pathlib import Path

import anyio
import httpx
import pytest

from reel_bindings.cli import main
from reel_bindings.proxy import running
from reel_core import CassetteError, Mode
from reel_core._formats import httprr, ruby_vcr
from tests.bindings.proxy_support import chat_call, interactions, options
from tests.fakes.upstream import serve_fake
from tests.fakes.wire import BOMB_SIZE, SCENARIO_HEADER

#: 512 gzip members of 1 MiB of zeros: about 0.5 MB that inflate to 512 MiB.
BOMB = gzip.compress(b"\0" * (1 << 20), mtime=0) * (BOMB_SIZE >> 20)
#: The most a ``reel import`` of a bomb may take, resident (an interpreter
#: with Reel loaded takes about 60 MiB, the 32 MiB body limit twice more).
MAX_RSS = 200 << 20
CHAT = '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}'
URL = "https://api.openai.com/v1/chat/completions"

#: Runs ``reel ARGS...`` and says its peak resident size on its last line:
#: ``VmHWM``, which starts afresh with the program (``ru_maxrss`` carries the
#: forking test worker's size over an exec on Linux: a worker grown to 500 MB
#: would be measured).
_REEL = """
import sys
from reel_bindings.cli import main
try:
    code = main(sys.argv[1:])
finally:
    with open("/proc/self/status") as status:
        hwm = next(line for line in status if line.startswith("VmHWM:"))
    print(int(hwm.split()[1]) * 1024, file=sys.stderr)
sys.exit(code)
"""


def reel(*args: str) -> tuple[int, str, int]:
    """``reel ARGS`` in a process of its own: exit status, stderr and its
    peak resident size in bytes."""
    done = subprocess.run(
        [sys.executable, "-c", _REEL, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    *err, rss = done.stderr.rstrip("\n").split("\n")
    return done.returncode, "\n".join(err), int(rss)


def har() -> bytes:
    entry = {
        "startedDateTime": "2025-08-14T14:45:17.130Z",
        "request": {
            "method": "POST",
            "url": URL,
            "headers": [],
            "postData": {"mimeType": "application/json", "text": CHAT},
        },
        "response": {
            "status": 200,
            "headers": [
                {"name": "content-type", "value": "application/json"},
                {"name": "content-encoding", "value": "gzip"},
            ],
            "content": {
                "mimeType": "application/json",
                "encoding": "base64",
                "text": base64.b64encode(BOMB).decode(),
            },
        },
        "timings": {"send": 0, "wait": 1, "receive": 0},
    }
    doc = {"log": {"version": "1.2", "creator": {"name": "test"}, "entries": [entry]}}
    return json.dumps(doc).encode()


def vcr() -> bytes:
    return (
        "interactions:\n- request:\n    body: '" + CHAT + "'\n    headers: {}\n    method: POST\n"
        "    uri: " + URL + "\n  response:\n    body:\n"
        "      string: !!binary |\n        " + base64.b64encode(BOMB).decode() + "\n"
        "    headers:\n      Content-Encoding:\n      - gzip\n      Content-Type:\n"
        "      - application/json\n    status:\n      code: 200\n      message: OK\nversion: 1\n"
    ).encode()


def nock() -> bytes:
    recording = [
        {
            "scope": "https://api.openai.com:443",
            "method": "POST",
            "path": "/v1/chat/completions",
            "body": json.loads(CHAT),
            "status": 200,
            "response": [BOMB[:12].hex(), BOMB[12:].hex()],
            "rawHeaders": ["Content-Type", "application/json", "Content-Encoding", "gzip"],
            "responseIsBinary": False,
        }
    ]
    return json.dumps(recording).encode()


def trace(response_body: bytes, encoding: bytes = b"gzip") -> bytes:
    request = (
        b"POST " + URL.encode() + b" HTTP/1.1\r\nHost: api.openai.com\r\n"
        b"Content-Length: %d\r\nContent-Type: application/json\r\n\r\n%s"
        % (len(CHAT), CHAT.encode())
    )
    response = (
        b"HTTP/2.0 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: %s\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (encoding, len(response_body), response_body)
    )
    return b"httprr trace v1\n%d %d\n%s%s" % (len(request), len(response), request, response)


@pytest.mark.parametrize(
    ("fmt", "name", "data"),
    [
        ("har", "bomb.har", har()),
        ("vcr", "bomb.yaml", vcr()),
        ("nock", "bomb.json", nock()),
        ("httprr", "bomb.httprr", trace(BOMB)),
        ("httprr", "bomb.httprr.gz", gzip.compress(trace(BOMB), mtime=0)),
    ],
)
def test_an_import_skips_a_bomb_with_the_reason(
    tmp_path: Path, fmt: str, name: str, data: bytes
) -> None:
    assert len(data) < 2 << 20
    source = tmp_path / name
    source.write_bytes(data)
    status, err, rss = reel("import", fmt, str(source), "-o", str(tmp_path / "out.jsonl"))
    assert status == 1, err
    assert "Traceback" not in err
    assert "MemoryError" not in err
    assert "NOT converted: the response body could not be decoded: gzip body decodes to over" in err
    assert rss < MAX_RSS, rss
    assert not (tmp_path / "out.jsonl").exists()  # nothing else in it to convert


def test_a_trace_that_inflates_too_far_is_refused(tmp_path: Path) -> None:
    """The ``.httprr.gz`` file itself a bomb: its members inflate past the
    limit before any record is read."""
    data = gzip.compress(b"httprr trace v1\n", mtime=0) + BOMB
    source = tmp_path / "bomb.httprr.gz"
    source.write_bytes(data)
    status, err, rss = reel("import", "httprr", str(source), "-o", str(tmp_path / "o.jsonl"))
    assert status == 2, err
    assert "Traceback" not in err
    assert "the trace inflates to over 33554432 bytes (the body limit): gunzip it" in err
    assert rss < MAX_RSS, rss


def test_compressed_files_inflate_bounded_in_the_core() -> None:
    member = len(BOMB) >> 9  # one member: 1 MiB inflated
    with pytest.raises(CassetteError, match="the trace inflates to over"):
        httprr.parse(gzip.compress(b"httprr trace v1\n", mtime=0) + BOMB[: 40 * member], "t")
    deflated = zlib.compress(b"http_interactions:\n" + b" " * (40 << 20), 9)
    with pytest.raises(CassetteError, match="the compressed cassette inflates to over"):
        ruby_vcr.parse(deflated, "c.yml.zz")


@pytest.mark.anyio
async def test_a_bomb_recorded_through_the_proxy_is_kept_compressed_and_flagged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cassette = tmp_path / "c.jsonl"
    call = chat_call("boom")
    async with serve_fake() as fake:
        opts = options(Mode.RECORD, cassette, upstream=fake.url, max_body=8 << 20)
        tracemalloc.start()
        try:
            async with (
                running(opts) as url,
                httpx.AsyncClient(base_url=url, timeout=60, trust_env=False) as client,
            ):
                headers = {**call.headers, SCENARIO_HEADER: "gzip-bomb"}
                async with client.stream(
                    "POST", call.path, content=call.content, headers=headers
                ) as response:
                    received = b"".join([c async for c in response.aiter_raw()])
                with anyio.fail_after(60):
                    while cassette.read_bytes().count(b"\n") < 2:
                        await anyio.sleep(0.01)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert received == BOMB  # the client has what the upstream sent, as sent
    assert peak < 64 << 20, peak  # 8 MiB limit; unbounded: over 512 MiB
    (ix,) = interactions(cassette)
    assert ix.response.body == BOMB
    assert ix.response.encoding == "gzip"
    assert ix.response.encoding_error == f"gzip body decodes to over {8 << 20} bytes"
    assert ("content-encoding", "gzip") in ix.response.headers
    capsys.readouterr()
    assert main(["check", str(cassette)]) == 1
    out, err = capsys.readouterr()
    assert (
        f"{cassette}:2: response.body (stored gzip-encoded) not decoded: gzip body decodes to over"
        in out
    )
    assert "it cannot vouch that they hold no secret" in err
    assert "REEL_MAX_BODY=BYTES" in err
