"""Go httprr traces as neutral exchanges, then recorded and replayed; every
httprr trace of ../shared/corpus too."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter

import pytest

from reel_core import (
    Cassette,
    CassetteError,
    Redactor,
    Request,
)
from reel_core._formats import Exchange, Skipped, httprr, import_exchanges, sniff_format
from reel_core._http import normalize_headers
from reel_core._literals import exchange_redactor
from tests.corpus import CORPUS, NO_CORPUS
from tests.replaying import replay_one as replay

MAGIC = b"httprr trace v1\n"
CHAT = b'{"model":"claude-3-opus-20240229","messages":[{"role":"user","content":"hi"}]}'
ANSWER = b'{"id":"msg_1","type":"message","content":[{"type":"text","text":"hello"}]}'
DATE = "Mon, 18 Aug 2025 12:42:58 GMT"
STAMP = 1755520978.0


def request(body: bytes = CHAT, *, head: bytes | None = None) -> bytes:
    if head is None:
        head = (
            b"POST https://api.anthropic.com/v1/messages HTTP/1.1\r\n"
            b"Host: api.anthropic.com\r\n"
            b"User-Agent: langchaingo-httprr\n"  # a scrubber's line: no \r
            b"Content-Length: %d\r\n"
            b"Content-Type: application/json\r\n"
            b"X-Api-Key: test-api-key\r\n\r\n" % len(body)
        )
    return head + body


def response(body: bytes = ANSWER, *, head: bytes | None = None) -> bytes:
    if head is None:
        head = (
            b"HTTP/2.0 200 OK\r\nContent-Length: %d\r\nContent-Type: application/json\r\n"
            b"Date: " + DATE.encode() + b"\r\n\r\n"
        ) % len(body)
    return head + body


def trace(*records: tuple[bytes, bytes]) -> bytes:
    return MAGIC + b"".join(b"%d %d\n%s%s" % (len(q), len(a), q, a) for q, a in records)


def one(data: bytes) -> Exchange:
    (item,) = httprr.parse(data, "t.httprr")
    assert isinstance(item, Exchange), item
    return item


def skipped(data: bytes) -> str:
    *_, item = httprr.parse(data, "t.httprr")
    assert isinstance(item, Skipped), item
    return item.reason


def test_a_record_becomes_an_exchange() -> None:
    assert one(trace((request(), response()))) == Exchange(
        source=0,
        method="POST",
        target="https://api.anthropic.com/v1/messages",
        request_headers=(
            ("host", "api.anthropic.com"),
            ("user-agent", "langchaingo-httprr"),
            ("content-length", str(len(CHAT))),
            ("content-type", "application/json"),
            ("x-api-key", "test-api-key"),
        ),
        request_body=CHAT,
        status=200,
        response_headers=(
            ("content-length", str(len(ANSWER))),
            ("content-type", "application/json"),
            ("date", DATE),
        ),
        body=ANSWER,
        timestamp=STAMP,
    )


def test_records_are_recorded_and_replay_in_order() -> None:
    second = response(b'{"n": 2}')
    report = import_exchanges(
        httprr.parse(trace((request(), response()), (request(), second)), "t.httprr"),
        tool="httprr",
        redactor=Redactor(),
    )
    assert report.failures == []
    first, again = report.interactions
    assert first.provider == "anthropic"
    assert again.id == first.id + "-2"
    assert first.meta["imported"] == "httprr"
    assert first.meta["ttfb_ms"] is None
    cassette = Cassette.loads(report.dumps(), strict=True)
    asked = Request("POST", "/v1/messages", (), CHAT)
    assert replay(cassette, asked) == (200, ANSWER)
    assert replay(cassette, asked) == (200, b'{"n": 2}')


def test_a_chunked_body_is_dechunked_and_bare_newlines_are_read() -> None:
    events = b'event: a\ndata: {"x": 1}\n\nevent: b\ndata: {"x": 2}\n\n'
    chunked = b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (
        10,
        events[:10],
        len(events) - 10,
        events[10:],
    )
    head = b"HTTP/1.1 200 OK\nTransfer-Encoding: chunked\nCache-Control: no-cache\n\n"
    ex = one(trace((request(), response(chunked, head=head))))
    assert ex.body == events
    # the framing went with the chunks; an SSE body gets its content type
    assert ex.response_headers == (
        ("cache-control", "no-cache"),
        ("content-type", "text/event-stream"),
    )
    assert ex.notes == ("no content-type: the body is server-sent events, stored as SSE frames",)
    assert ex.timestamp is None
    report = import_exchanges([ex], tool="httprr", redactor=Redactor())
    (ix,) = report.interactions
    assert ix.response.stream == "sse"
    assert b"".join(data for _, data in ix.response.frames) == events


def test_a_body_without_length_runs_to_the_end_and_a_get_has_none() -> None:
    head = b"GET /search?q=reel HTTP/1.1\r\nHost: serpapi.com\r\n\r\n"
    answer = response(b"until the end\n", head=b"HTTP/1.0 404 Not Found\r\n\r\n")
    ex = one(trace((request(b"", head=head), answer)))
    assert (ex.method, ex.target, ex.request_body) == ("GET", "/search?q=reel", b"")
    assert (ex.status, ex.body, ex.response_headers) == (404, b"until the end\n", ())


def test_an_interim_answer_is_passed_over_and_head_has_no_body() -> None:
    head = b"HEAD https://x.test/a HTTP/1.1\r\nHost: x.test\r\n\r\n"
    answer = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n"
    ex = one(trace((request(b"", head=head), answer)))
    assert (ex.method, ex.status, ex.body) == ("HEAD", 200, b"")


def test_content_encoding_stays_for_the_core_to_decode() -> None:
    packed = gzip.compress(ANSWER, mtime=0)
    head = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(packed)
    ex = one(trace((request(), response(packed, head=head))))
    assert ex.body == packed
    (ix,) = import_exchanges([ex], tool="httprr", redactor=Redactor()).interactions
    assert ix.response.body == ANSWER
    broken = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n\x1f\x8b\x08\x00garbage"
    assert skipped(trace((request(), broken))).startswith(
        "the body is gzip-encoded (content-encoding gzip) but corrupt: "
    )


def test_gzip_compressed_traces() -> None:
    data = trace((request(), response()), (request(), response()))
    assert httprr.sniff(gzip.compress(data))
    assert len(httprr.parse(gzip.compress(data), "t.httprr.gz")) == 2
    # members one after the other, as gzip allows
    halves = gzip.compress(data[:100]) + gzip.compress(data[100:])
    assert httprr.parse(halves, "t.httprr.gz") == httprr.parse(data, "t.httprr")
    with pytest.raises(CassetteError, match=r"^t: not an httprr trace: corrupt gzip body: "):
        httprr.parse(gzip.compress(data)[:10] + b"\xff" * 20, "t")
    with pytest.raises(CassetteError, match=r"^t: not an httprr trace: truncated gzip body$"):
        httprr.parse(gzip.compress(data)[:-12], "t")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"httprr trace v2\n",
        b"# httprr trace v1\n",
        b"httprr trace v1",
        gzip.compress(b"interactions: []\n", mtime=0),
        b"\x1f\x8bnot gzip",
    ],
)
def test_what_is_no_httprr_trace_is_not_sniffed_as_one(data: bytes) -> None:
    assert not httprr.sniff(data)
    assert sniff_format(data) != "httprr"


def test_a_file_that_is_no_httprr_trace() -> None:
    with pytest.raises(CassetteError) as caught:
        httprr.parse(b"interactions: []\nmore\n", "t.yaml")
    assert str(caught.value) == (
        "t.yaml: not an httprr trace: the first line is b'interactions: []', not b'httprr trace v1'"
    )
    assert httprr.parse(MAGIC, "t") == []
    assert sniff_format(trace((request(), response()))) == "httprr"


def test_a_corrupt_record_line_ends_the_trace() -> None:
    good = trace((request(), response()))
    out = httprr.parse(good + b"12 x\n" + good[len(MAGIC) :], "t")
    assert isinstance(out[0], Exchange)
    assert out[1:] == [
        Skipped(
            1,
            f"the trace is corrupt at byte {len(good)}: b'12 x' is no 'N M' record line; "
            "the rest of the file is not read",
        )
    ]
    assert skipped(MAGIC + b"5 5") == "the trace is cut short at byte 16: b'5 5' ends the file"


def test_sizes_too_long_to_be_true_are_a_corrupt_line() -> None:
    line = b"9" * 5000 + b" 1"
    assert skipped(MAGIC + line + b"\n").startswith("the trace is corrupt at byte 16: ")


def test_a_big_head_and_body() -> None:
    head = b"HTTP/1.1 200 OK\r\nX-Big: " + b"b" * 70_000 + b"\r\nContent-Length: %d\r\n\r\n"
    body = b"x" * 3_000_000
    ex = one(trace((request(), response(body, head=head % len(body)))))
    assert ex.body == body
    assert ex.response_headers[0] == ("x-big", "b" * 70_000)


def test_a_record_cut_short() -> None:
    data = trace((request(), response()))
    assert skipped(data[:-5]) == (
        f"the trace is cut short: record 0 says {len(request())} + {len(response())} bytes, "
        f"{len(request()) + len(response()) - 5} are left"
    )


@pytest.mark.parametrize(
    ("record", "why"),
    [
        ((b"", response()), "the request is empty"),
        ((request(), b""), "the response is not HTTP/1.x h11 can read: "),
        ((b"garbage\r\n\r\n", response()), "the request is not HTTP/1.x h11 can read: "),
        ((request()[:-5], response()), "the request is not HTTP/1.x h11 can read: "),
        ((request(), response()[:-5]), "the response is not HTTP/1.x h11 can read: "),
        ((request() + b"extra", response()), "5 bytes follow the request's body (its content"),
        ((request(), response() + b"more"), "4 bytes follow the response's body (its content"),
        (
            (
                b"CONNECT api.openai.com:443 HTTP/1.1\r\nHost: api.openai.com:443\r\n\r\n",
                response(),
            ),
            "a CONNECT request opens a tunnel: there is no answer to replay",
        ),
    ],
)
def test_a_record_that_cannot_be_read_is_said(record: tuple[bytes, bytes], why: str) -> None:
    assert skipped(trace(record)).startswith(why)


def test_an_h11_message_never_quotes_the_bytes() -> None:
    secret = b"sk-ant-" + b"q" * 30
    reason = skipped(trace((b"POST /x HTTP/1.1\r\nX-Api-Key " + secret + b"\r\n\r\n", response())))
    assert secret.decode() not in reason


def test_trailing_whitespace_after_a_message_is_fine() -> None:
    assert one(trace((request(), response() + b"\r\n"))).body == ANSWER


# -- the corpus ---------------------------------------------------------------

REDACTOR = Redactor()


def _files() -> list[str]:
    if not (CORPUS / "MANIFEST.jsonl").is_file():
        return []
    entries = map(json.loads, (CORPUS / "MANIFEST.jsonl").read_text().splitlines())
    return [e["file"] for e in entries if e.get("format") == "httprr"]


def _split(message: bytes) -> tuple[list[bytes], dict[bytes, bytes], bytes]:
    """The test's own reading: start line words, headers, de-chunked body."""
    head, _, body = re.split(rb"(\r?\n\r?\n)", message, maxsplit=1)
    first, *lines = re.split(rb"\r?\n", head)
    headers = {k.strip().lower(): v.strip() for k, v in (x.split(b":", 1) for x in lines)}
    if headers.get(b"transfer-encoding") == b"chunked":
        out, rest = b"", body
        while True:
            size, rest = rest.split(b"\r\n", 1)
            n = int(size.split(b";")[0], 16)
            if n == 0:
                break
            out, rest = out + rest[:n], rest[n + 2 :]
        body = out
    return first.split(b" ", 2), headers, body


@pytest.mark.skipif(not _files(), reason=NO_CORPUS)
def test_the_corpus_imports_and_replays() -> None:
    counts: Counter[str] = Counter()
    for name in _files():
        data = (CORPUS / name).read_bytes()
        assert sniff_format(data) == "httprr", name
        report = import_exchanges(httprr.parse(data, name), tool="httprr", redactor=REDACTOR)
        assert report.failures == [], name
        counts["files"] += 1
        counts["gzip"] += data.startswith(b"\x1f\x8b")
        counts["interactions"] += len(report.interactions)
        cassette = Cassette.loads(report.dumps(), strict=True)
        text = gzip.decompress(data) if data.startswith(b"\x1f\x8b") else data
        pos = len(MAGIC)
        while pos < len(text):
            line, rest = text[pos:].split(b"\n", 1)
            n, m = map(int, line.split())
            (method, target, _), sent, body = _split(rest[:n])
            (_, status, _), headers, answer = _split(rest[n : n + m])
            pos += len(line) + 1 + n + m
            counts["chunked"] += headers.get(b"transfer-encoding") == b"chunked"
            kept = tuple((k, v) for k, v in sent.items() if k == b"content-type")
            got = replay(cassette, Request(method.decode(), target.decode(), kept, body))
            redactor = exchange_redactor(REDACTOR, normalize_headers(sent.items()))
            assert got == (int(status), redactor.data(answer)), name
    assert counts == {"files": 28, "gzip": 1, "interactions": 38, "chunked": 8}
    assert len(_files()) == 28
