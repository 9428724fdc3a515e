"""Recording a forwarded upstream response into an interaction."""

from __future__ import annotations

import gzip
import json
import zlib

import pytest

from reel_core import (
    Abort,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    Redactor,
    StreamCut,
    UpstreamError,
)
from reel_core._http import Headers
from reel_core._record import Recorder, _ms, response_shape, stream_kind

CHAT = RecordedRequest("POST", "/v1/chat/completions", (), b'{"model":"m"}')
STREAM = RecordedRequest("POST", "/v1/chat/completions", (), b'{"model":"m","stream":true}')
SSE: Headers = ((b"content-type", b"text/event-stream; charset=utf-8"),)
JSON: Headers = ((b"content-type", b"application/json"),)


def timing_meta(i: Interaction) -> dict[str, object]:
    """The timing and size part of an interaction's meta."""
    keys = ("ttfb_ms", "total_ms", "bytes", "frames")
    return {k: i.meta[k] for k in keys if k in i.meta}


def recorder(request: RecordedRequest = CHAT, redactor: Redactor | None = None) -> Recorder:
    return Recorder(
        request,
        key="sha256:" + "0" * 64,
        id="id0",
        redactor=redactor or Redactor(),
        provider="openai",
        endpoint="POST /v1/chat/completions",
        timestamp="2026-01-01T00:00:00.000Z",
    )


def test_upstream_error_statuses() -> None:
    assert UpstreamError.TIMEOUT.status == 504
    assert {e.status for e in UpstreamError if e is not UpstreamError.TIMEOUT} == {502}
    assert {e.status for e in Abort} == {502}
    # the kinds apart (issue 33): the client leaving and the store are no
    # upstream failure; the values on lines and in answers are the same
    assert {e.value for e in Abort} == {"client-closed", "store"}
    assert {e.value for e in [*UpstreamError, *Abort]} == {
        "refused",
        "dns",
        "tls",
        "timeout",
        "reset",
        "closed",
        "protocol",
        "client-closed",
        "store",
    }


def test_ms() -> None:
    assert _ms(1.2345678) == 1234.568
    assert _ms(-3.0) == 0.0
    assert _ms(0.0) == 0.0


@pytest.mark.parametrize(
    ("request_", "status", "content_type", "kind"),
    [
        (CHAT, 200, "text/event-stream", "sse"),
        (CHAT, 500, "text/event-stream; charset=utf-8", "sse"),
        (STREAM, 400, "application/json", None),
        (CHAT, 200, "application/x-ndjson", "chunks"),
        (CHAT, 200, "application/jsonl", "chunks"),
        (CHAT, 200, "application/ndjson", "chunks"),
        (
            RecordedRequest("POST", "/v1beta/models/g:streamGenerateContent"),
            200,
            "application/json",
            "chunks",
        ),
        (STREAM, 200, "application/json", "chunks"),
        (RecordedRequest("POST", "/x", (), b'{"stream": true}'), 200, "", "chunks"),
        (RecordedRequest("POST", "/x", (), b'{"stream": false}'), 200, "", None),
        (RecordedRequest("POST", "/x", (), b'{"streams":true}'), 200, "", None),
        (CHAT, 200, "application/json", None),
        (CHAT, 204, "", None),
    ],
)
def test_stream_kind(
    request_: RecordedRequest, status: int, content_type: str, kind: str | None
) -> None:
    assert stream_kind(request_, status, content_type) == kind


def test_whole_body() -> None:
    r = recorder()
    headers: Headers = (
        (b"content-type", b"application/json"),
        (b"set-cookie", b"session=abc"),
        (b"x-request-id", b"req_1"),
        (b"date", b"today"),
        (b"openai-organization-id", b"org sk-proj-abcdefghijklmnopqrstuvwxyz0123"),
    )
    r.head(200, headers, mono=10.0, sent_at=9.5)
    r.data(b'{"a":', 10.1)
    r.data(b"", 10.15)
    r.data(b"1}", 10.2)
    i = r.end(10.3)
    assert isinstance(i, Interaction)
    assert (i.key, i.id, i.provider, i.endpoint) == (
        "sha256:" + "0" * 64,
        "id0",
        "openai",
        "POST /v1/chat/completions",
    )
    assert i.timestamp == "2026-01-01T00:00:00.000Z"
    assert i.request is CHAT
    assert i.response.status == 200
    assert i.response.stream is None
    assert i.response.body == b'{"a":1}'
    assert i.response.headers == (  # set-cookie is never stored
        ("content-type", "application/json"),
        ("x-request-id", "req_1"),
        ("date", "today"),
        ("openai-organization-id", "org [REDACTED:openai-key]"),
    )
    assert timing_meta(i) == {"ttfb_ms": 500.0, "total_ms": 800.0, "bytes": 7}


def test_whole_body_is_redacted() -> None:
    r = recorder()
    r.head(200, JSON, mono=0.0, sent_at=None)
    r.data(b'{"email": "ada@exam', 0.1)
    r.data(b'ple.org"}', 0.2)
    i = r.end(0.3)
    assert i.response.body == b'{"email": "[REDACTED:email]"}'
    assert timing_meta(i) == {"ttfb_ms": None, "total_ms": 300.0, "bytes": 28}


def test_sse_frames_are_stamped_from_the_head() -> None:
    r = recorder(STREAM)
    r.head(200, SSE, mono=100.0, sent_at=99.0)
    r.data(b"data: 1\n\nda", 100.010)
    r.data(b"ta: 2\n", 100.020)
    r.data(b"\ndata: [DONE]\n\n", 100.5)
    i = r.end(100.75)
    assert i.response.stream == "sse"
    assert i.response.frames == (
        (10.0, b"data: 1\n\n"),
        (500.0, b"data: 2\n\n"),
        (500.0, b"data: [DONE]\n\n"),
    )
    assert i.response.end_ms == 750.0
    assert i.response.cut is None
    assert timing_meta(i) == {
        "ttfb_ms": 1000.0,
        "total_ms": 1750.0,
        "bytes": len(b"data: 1\n\ndata: 2\n\ndata: [DONE]\n\n"),
        "frames": 3,
    }


def test_sse_unterminated_last_event_is_kept() -> None:
    r = recorder()
    r.head(200, SSE, mono=0.0, sent_at=None)
    r.data(b"data: 1\n\ndata: 2", 0.1)
    i = r.end(0.2)
    assert i.response.frames == ((100.0, b"data: 1\n\n"), (200.0, b"data: 2"))


def test_sse_frames_are_redacted_per_event() -> None:
    secret = b"sk-proj-abcdefghijklmnopqrstuvwxyz0123"
    r = recorder()
    r.head(200, SSE, mono=0.0, sent_at=None)
    # the key arrives split over two chunks: the event is whole before redaction
    r.data(b"data: " + secret[:10], 0.1)
    r.data(secret[10:] + b"\n\n", 0.2)
    i = r.end(0.3)
    assert i.response.frames == ((200.0, b"data: [REDACTED:openai-key]\n\n"),)


def test_time_never_goes_backwards() -> None:
    r = recorder(STREAM)
    r.head(200, JSON, mono=5.0, sent_at=None)
    r.data(b"a", 5.2)
    r.data(b"b", 5.1)  # a clock that stepped back
    r.data(b"c", 4.0)  # before the head even
    i = r.end(5.15)
    assert i.response.stream == "chunks"
    assert [at for at, _ in i.response.frames] == [200.0, 200.0, 200.0]
    assert i.response.end_ms == 200.0


def test_chunks_keep_arrival_boundaries() -> None:
    r = recorder(STREAM)
    r.head(200, ((b"content-type", b"application/x-ndjson"),), mono=0.0, sent_at=None)
    r.data(b'{"a":1}\n{"b"', 0.001)
    r.data(b":2}\n", 0.002)
    i = r.end(0.003)
    assert i.response.frames == ((1.0, b'{"a":1}\n{"b"'), (2.0, b":2}\n"))
    assert i.meta["frames"] == 2


def test_empty_stream() -> None:
    r = recorder(STREAM)
    r.head(200, SSE, mono=0.0, sent_at=None)
    i = r.end(0.01)
    assert i.response.frames == ()
    assert i.response.end_ms == 10.0
    assert i.meta["frames"] == 0


def test_gzip_is_stored_decoded_without_the_header() -> None:
    body = b'{"text":"' + b"abc" * 1000 + b'"}'
    packed = gzip.compress(body)
    r = recorder()
    r.head(200, ((b"content-encoding", b"gzip"), *JSON), mono=0.0, sent_at=None)
    for i in range(0, len(packed), 7):
        r.data(packed[i : i + 7], 0.001 * i)
    got = r.end(1.0)
    assert got.response.body == body
    assert got.response.headers == (("content-type", "application/json"),)
    assert got.meta["bytes"] == len(body)


def test_gzip_stream_is_decoded_into_frames() -> None:
    body = b"data: " + b"x" * 5000 + b"\n\ndata: [DONE]\n\n"
    packed = gzip.compress(body)
    r = recorder()
    r.head(200, ((b"content-encoding", b"gzip"), *SSE), mono=0.0, sent_at=None)
    r.data(packed[:20], 0.1)
    r.data(packed[20:], 0.2)
    got = r.end(0.3)
    assert b"".join(d for _, d in got.response.frames) == body
    assert [d for _, d in got.response.frames] == [
        b"data: " + b"x" * 5000 + b"\n\n",
        b"data: [DONE]\n\n",
    ]


def test_unknown_encoding_is_kept_with_its_header_and_flagged() -> None:
    r = recorder()
    r.head(200, ((b"content-encoding", b"compress"), *JSON), mono=0.0, sent_at=None)
    r.data(b"\x1f\x9d\x90", 0.1)
    got = r.end(0.2)
    assert got.response.body == b"\x1f\x9d\x90"
    assert ("content-encoding", "compress") in got.response.headers
    assert got.response.encoding == "compress"
    assert got.response.encoding_error == (
        "cannot decode content-encoding 'compress' (no Reel decodes it)"
    )
    assert got.meta["bytes"] == 3
    assert got.meta["shape"] == "binary"


def test_corrupt_encoding_becomes_a_protocol_cut() -> None:
    r = recorder()
    r.head(200, ((b"content-encoding", b"gzip"), *JSON), mono=0.0, sent_at=None)
    good = gzip.compress(b"0123456789" * 50)
    r.data(good[:30], 0.1)
    r.data(b"\x00garbage\xff" * 4, 0.2)
    r.data(b"ignored after the break", 0.3)
    got = r.end(0.4)
    assert got.response.stream == "chunks"  # a body cut short replays as chunks
    assert got.response.cut is not None
    assert got.response.cut.error == "protocol"
    assert got.response.cut.at_ms == 200.0
    assert "corrupt gzip body" in got.response.cut.detail
    assert b"ignored" not in got.response.content


def test_a_truncated_deflate_body_is_a_protocol_cut() -> None:
    r = recorder()
    r.head(200, ((b"content-encoding", b"deflate"), *JSON), mono=0.0, sent_at=None)
    r.data(zlib.compress(b"abc" * 100)[:-5], 0.1)
    got = r.end(0.5)
    assert got.response.cut == StreamCut(100.0, "protocol", "truncated deflate body")


def test_fail_after_head_records_a_cut() -> None:
    r = recorder()
    r.head(200, SSE, mono=0.0, sent_at=None)
    r.data(b"data: 1\n\ndata: 2", 0.1)
    got = r.fail(UpstreamError.RESET, "connection reset", 0.25)
    assert got.response.stream == "sse"
    assert got.response.frames == ((100.0, b"data: 1\n\n"), (250.0, b"data: 2"))
    assert got.response.cut == StreamCut(250.0, "reset", "connection reset")


def test_fail_of_a_whole_body_becomes_chunks() -> None:
    r = recorder()
    r.head(200, JSON, mono=0.0, sent_at=None)
    r.data(b'{"partial":', 0.1)
    got = r.fail(UpstreamError.TIMEOUT, "", 0.2)
    assert got.response.stream == "chunks"
    assert got.response.frames == ((100.0, b'{"partial":'),)
    assert got.response.cut == StreamCut(200.0, "timeout", "")
    assert got.meta["frames"] == 1


def test_fail_after_a_decode_error_keeps_the_first_failure() -> None:
    r = recorder()
    r.head(200, ((b"content-encoding", b"gzip"), *JSON), mono=0.0, sent_at=None)
    r.data(b"not gzip", 0.1)
    got = r.fail(UpstreamError.CLOSED, "closed", 0.3)
    assert got.response.cut is not None
    assert got.response.cut.error == "protocol"
    assert got.response.cut.at_ms == 100.0


def test_error_statuses_are_whole_bodies() -> None:
    r = recorder(STREAM)
    r.head(429, ((b"retry-after", b"2"), *JSON), mono=0.0, sent_at=None)
    r.data(b'{"error":{"message":"slow down"}}', 0.01)
    got = r.end(0.02)
    assert got.response.status == 429
    assert got.response.stream is None
    assert got.response.body == b'{"error":{"message":"slow down"}}'
    assert ("retry-after", "2") in got.response.headers


NDJSON: Headers = ((b"content-type", b"application/x-ndjson"),)


def _chunks_of(chunks: list[bytes]) -> Interaction:
    r = recorder(STREAM)
    r.head(200, NDJSON, mono=0.0, sent_at=None)
    for i, chunk in enumerate(chunks):
        r.data(chunk, 0.001 * (i + 1))
    return r.end(0.1)


def test_chunks_are_redacted_one_by_one_when_that_is_enough() -> None:
    got = _chunks_of([b'{"t":"ada@example.org"}\n{"t":', b'"ok"}\n'])
    assert got.response.frames == (
        (1.0, b'{"t":"[REDACTED:email]"}\n{"t":'),
        (2.0, b'"ok"}\n'),
    )


def test_a_secret_straddling_chunks_never_reaches_the_cassette() -> None:
    got = _chunks_of([b'{"t":"a"}\n{"t":"mail ada@exam', b'ple.org"}\n{"t":', b'"b"}\n'])
    assert b"ada@" not in got.response.content
    assert b"example.org" not in got.response.content
    # re-cut at line ends, each line stamped with the chunk that completed it
    assert got.response.frames == (
        (1.0, b'{"t":"a"}\n'),
        (2.0, b'{"t":"mail [REDACTED:email]"}\n'),
        (3.0, b'{"t":"b"}\n'),
    )


def test_a_chunk_splitting_a_utf8_character_is_still_redacted() -> None:
    line = '{"t":"é sk-proj-abcdefghijklmnopqrstuvwxyz0 é"}\n'.encode()
    cut = line.index("é".encode(), 10) + 1  # inside the second "é"
    got = _chunks_of([line[:cut], line[cut:]])
    assert b"sk-proj" not in got.response.content
    assert got.response.content == '{"t":"é [REDACTED:openai-key] é"}\n'.encode()
    # each chunk reads as text with its cut character's bytes standing for
    # themselves: scrubbed one by one, both keep their offsets
    assert got.response.frames == (
        (1.0, line[:cut].replace(b"sk-proj-abcdefghijklmnopqrstuvwxyz0", b"[REDACTED:openai-key]")),
        (2.0, line[cut:]),
    )


def test_an_unterminated_last_line_is_redacted_whole() -> None:
    got = _chunks_of([b'{"t":"x"}\n{"t":"ada@exa', b'mple.org"}'])
    assert got.response.frames == (
        (1.0, b'{"t":"x"}\n'),
        (2.0, b'{"t":"[REDACTED:email]"}'),
    )


def test_a_secret_spanning_lines_keeps_the_body_whole() -> None:
    got = _chunks_of([b"Authorization: Bearer\n", b"abcdefghijklmnopqrstuvwxyz0123\n"])
    assert got.response.frames == ((2.0, b"Authorization: Bearer\n[REDACTED:bearer-token]\n"),)
    assert b"abcdefghijklmnop" not in got.response.content


@pytest.mark.parametrize(
    ("response", "content_type", "shape"),
    [
        (RecordedResponse(200, stream="sse", frames=((0.0, b"data: 1\n\n"),)), "", "sse"),
        (
            RecordedResponse(200, stream="chunks", frames=((0.0, b"[{}"), (1.0, b"]"))),
            "",
            "json-array-stream",
        ),
        (
            RecordedResponse(200, stream="chunks", frames=((0.0, b'{"a":1}\n'),)),
            "application/x-ndjson",
            "ndjson",
        ),
        (
            RecordedResponse(200, stream="chunks", frames=((0.0, b'{"a":1}\n{"b":2}\n{"c":3}\n'),)),
            "",
            "ndjson",
        ),
        (RecordedResponse(200, stream="chunks", frames=((0.0, b"plain words"),)), "", "chunks"),
        (RecordedResponse(200, body=b""), "", "empty"),
        (RecordedResponse(200, body=b'{"a": 1}'), "application/json", "json"),
        (RecordedResponse(200, body=b"hello"), "text/plain", "text"),
        (RecordedResponse(200, body=b"\xff\xfe\x00"), "application/octet-stream", "binary"),
    ],
)
def test_response_shape(response: RecordedResponse, content_type: str, shape: str) -> None:
    assert response_shape(response, content_type) == shape


def test_a_zstd_stream_is_decoded_into_its_events() -> None:
    zstandard = pytest.importorskip("zstandard", reason="pip install zstandard (in the test extra)")
    packer = zstandard.ZstdCompressor().compressobj()
    events = [b"data: 1\n\n", b"data: 2\n\n"]
    r = recorder(STREAM)
    r.head(200, ((b"content-encoding", b"zstd"), *SSE), mono=0.0, sent_at=None)
    r.data(packer.compress(events[0]) + packer.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK), 0.1)
    r.data(packer.compress(events[1]) + packer.flush(), 0.2)
    got = r.end(0.3)
    assert got.response.stream == "sse"
    assert got.response.frames == ((100.0, events[0]), (200.0, events[1]))
    assert all(k != "content-encoding" for k, _ in got.response.headers)
    assert got.response.encoding is None


def test_a_stream_over_the_limit_is_kept_as_it_came_and_flagged() -> None:
    packer = zlib.compressobj(wbits=31)
    first = packer.compress(b"data: " + b"x" * 5000 + b"\n\n") + packer.flush(zlib.Z_SYNC_FLUSH)
    second = packer.compress(b"data: 2\n\n") + packer.flush()
    r = Recorder(
        STREAM,
        key="sha256:" + "0" * 64,
        id="id0",
        redactor=Redactor(),
        max_body=1000,
    )
    r.head(200, ((b"content-encoding", b"gzip"), *SSE), mono=0.0, sent_at=None)
    r.data(first, 0.1)
    r.data(second, 0.2)
    got = r.end(0.3)
    resp = got.response
    assert resp.stream == "chunks"  # compressed bytes hold no events to cut
    assert resp.frames == ((100.0, first), (200.0, second))
    assert resp.end_ms == 300.0
    assert ("content-encoding", "gzip") in resp.headers
    assert (resp.encoding, resp.encoding_error) == ("gzip", "gzip body decodes to over 1000 bytes")
    assert got.meta["bytes"] == len(first) + len(second)
    line = json.loads(got.to_line())["response"]
    assert (line["encoding"], line["encoding_error"]) == (resp.encoding, resp.encoding_error)
    assert Interaction.from_json(json.loads(got.to_line())) == got


def test_a_whole_body_over_the_limit_is_kept_compressed() -> None:
    packed = gzip.compress(b"0" * 10_000)
    r = Recorder(CHAT, key="sha256:" + "0" * 64, id="id0", redactor=Redactor(), max_body=1000)
    r.head(200, ((b"content-encoding", b"gzip"), *JSON), mono=0.0, sent_at=None)
    r.data(packed, 0.1)
    got = r.end(0.2)
    assert got.response.stream is None
    assert got.response.body == packed
    assert got.response.encoding_error == "gzip body decodes to over 1000 bytes"


def test_a_flag_on_a_line_must_be_a_string() -> None:
    r = recorder()
    r.head(200, JSON, mono=0.0, sent_at=None)
    r.data(b"{}", 0.1)
    line = json.loads(r.end(0.2).to_line())
    line["response"]["encoding_error"] = 3
    with pytest.raises(ValueError, match=r'"response\.encoding_error" must be a string'):
        Interaction.from_json(line)


def test_an_empty_body_in_any_coding_is_empty() -> None:
    r = recorder()
    r.head(200, ((b"content-encoding", b"compress"), *JSON), mono=0.0, sent_at=None)
    got = r.end(0.1)
    assert (got.response.body, got.response.encoding_error) == (b"", None)
    assert all(k != "content-encoding" for k, _ in got.response.headers)
