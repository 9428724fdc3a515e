"""Reel -> HAR -> Reel: the export keeps every request, status, stored
header, body and frame timing, and is HAR 1.2 as the spec asks."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from typing import Any

import pytest

from reel_core import Cassette, Redactor
from reel_core._formats import Exchange, ImportReport, frames_of, import_exchanges, import_source
from reel_core._formats.har import parse
from reel_core._formats.har_export import export
from reel_core._interaction import Interaction, StreamCut
from tests.corpus import CORPUS, NO_CORPUS

CHAT = b'{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}'
SSE = (("content-type", "text/event-stream"),)


def exchange(source: int, **kw: Any) -> Exchange:
    fields: dict[str, Any] = {
        "source": source,
        "method": "POST",
        "target": "https://api.openai.com/v1/chat/completions",
        "request_headers": (("content-type", "application/json"),),
        "request_body": CHAT,
        "status": 200,
        "response_headers": (("content-type", "application/json"), ("x-request-id", "req_1")),
        "body": b'{"choices":[]}',
        "ttfb": 0.25,
        "timestamp": 1_755_182_717.13,
    }
    fields.update(kw)
    return Exchange(**fields)


def recorded(*items: Exchange) -> list[Interaction]:
    report = import_exchanges(items, tool="test", redactor=Redactor())
    assert report.failures == []
    return report.interactions


def round_trip(interactions: list[Interaction], **kw: Any) -> ImportReport:
    data = export(interactions, **kw)
    report = import_exchanges(parse(data, "out.har"), tool="test", redactor=Redactor())
    assert report.failures == []
    return report


def assert_same(before: list[Interaction], after: list[Interaction]) -> None:
    assert len(before) == len(after)
    for x, y in zip(before, after, strict=True):
        assert (y.key, y.id, y.request, y.response) == (x.key, x.id, x.request, x.response)
        assert (y.timestamp, y.provider, y.endpoint) == (x.timestamp, x.provider, x.endpoint)
        assert y.meta["ttfb_ms"] == x.meta["ttfb_ms"]


def test_a_timed_stream_whole_bodies_and_repeats_survive_the_round_trip() -> None:
    events = [b'data: {"x": 1}\n\n', b'data: {"x": 2}\n\n', b"data: [DONE]\n\n"]
    timed = frames_of([(0.0, events[0]), (0.125, events[1]), (0.5, events[2]), (0.75, b"")])
    chunks = frames_of([(0.0, b'{"a":1}\n'), (0.3, b'{"b":2}\n')])
    before = recorded(
        exchange(0, response_headers=SSE, body=timed),
        exchange(1),
        exchange(2, body=b'{"choices":[1]}'),
        exchange(
            3,
            request_body=b'{"n":3}',
            response_headers=(("content-type", "application/x-ndjson"),),
            body=chunks,
        ),
        exchange(
            4, request_body=b"", method="GET", target="/v1/models?limit=2&after=a+b", ttfb=None
        ),
    )
    stream = before[0].response
    assert stream.frames == ((0.0, events[0]), (125.0, events[1]), (500.0, events[2]))
    assert stream.end_ms == 750.0
    assert before[2].id == before[0].id + "-3"  # a repeat: numbered
    assert before[3].response.stream == "chunks"
    after = round_trip(before)
    assert after.notes == []
    assert_same(before, after.interactions)


def test_the_archive_is_har_1_2() -> None:
    before = recorded(
        exchange(0, response_headers=SSE, body=frames_of([(0.0, b"data: 1\n\n"), (0.2, b"")])),
        exchange(1, status=302, response_headers=(("location", "/elsewhere"),), body=b""),
        exchange(2, status=599, body=bytes(range(256)), response_headers=()),
    )
    assert_same(before, round_trip(before).interactions)
    moved = replace(before[1].response, headers=(("location", "/elsewhere"),))
    before[1] = replace(before[1], response=moved)  # (not a header Reel stores today)
    doc = json.loads(export(before))
    log = doc["log"]
    assert log["version"] == "1.2"
    assert log["creator"]["name"] == "Reel"
    first, redirect, odd = log["entries"]
    for entry in log["entries"]:
        # the fields HAR 1.2 requires, of the types it asks
        assert isinstance(entry["startedDateTime"], str)
        assert isinstance(entry["time"], float)
        assert entry["cache"] == {}
        request, response = entry["request"], entry["response"]
        for part in (request, response):
            assert part["httpVersion"] == "HTTP/1.1"
            assert part["cookies"] == []
            assert isinstance(part["headers"], list)
            assert part["headersSize"] == -1
            assert isinstance(part["bodySize"], int)
        assert isinstance(request["method"], str)
        assert isinstance(request["url"], str)
        assert isinstance(request["queryString"], list)
        assert isinstance(response["status"], int)
        assert isinstance(response["statusText"], str)
        assert isinstance(response["redirectURL"], str)
        assert set(response["content"]) >= {"size", "mimeType"}
        assert all(entry["timings"][k] >= 0 for k in ("send", "wait", "receive"))
    assert first["request"]["url"] == "https://api.openai.com/v1/chat/completions"
    assert first["request"]["postData"] == {
        "mimeType": "application/json",
        "text": CHAT.decode(),
    }
    assert first["response"]["statusText"] == "OK"
    assert first["response"]["content"] == {
        "size": 9,
        "mimeType": "text/event-stream",
        "text": "data: 1\n\n",
    }
    assert first["timings"] == {"send": 0, "wait": 250.0, "receive": 200.0}
    assert first["time"] == 450.0
    assert first["startedDateTime"] == "2025-08-14T14:45:17.130Z"
    assert first["_reel"] == {
        "id": before[0].id,
        "ttfb_ms": 250.0,
        "stream": "sse",
        "frames": [[0.0, 9]],
        "end_ms": 200.0,
    }
    assert redirect["response"]["redirectURL"] == "/elsewhere"
    assert redirect["response"]["statusText"] == "Found"
    assert odd["response"]["statusText"] == ""
    assert odd["response"]["content"] == {
        "size": 256,
        "mimeType": "x-unknown",
        "text": base64.b64encode(bytes(range(256))).decode(),
        "encoding": "base64",
    }


def test_request_bodies_keep_how_they_read() -> None:
    boundary = "b0undary"
    multipart = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
        f"--{boundary}--\r\n"
    ).encode()
    before = recorded(
        exchange(
            0,
            target="/v1/files",
            request_headers=(
                ("host", "api.openai.com"),
                ("content-type", f"multipart/form-data; boundary={boundary}"),
            ),
            request_body=multipart,
        ),
        exchange(
            1,
            target="/oauth/token",
            request_headers=(("content-type", "application/x-www-form-urlencoded"),),
            request_body=b"grant_type=client_credentials&scope=a",
        ),
        exchange(2, request_body=b"\xff\xfe binary", request_headers=()),
        exchange(3, request_body=b"plain words", request_headers=()),
    )
    assert [ix.request.content_type for ix in before] == [
        "multipart/form-data",
        "application/x-www-form-urlencoded",
        None,
        None,
    ]
    entries = json.loads(export(before))["log"]["entries"]
    assert [e["request"]["postData"]["mimeType"] for e in entries] == [
        f"multipart/form-data; boundary={boundary}",
        "application/x-www-form-urlencoded",
        "application/octet-stream",
        "application/octet-stream",
    ]
    assert entries[2]["request"]["postData"]["encoding"] == "base64"
    assert_same(before, round_trip(before).interactions)


def test_hosts_timestamps_and_unknown_timing() -> None:
    before = recorded(
        exchange(0, target="https://bedrock.example/model/x/invoke", timestamp=None, ttfb=None),
        exchange(1, target="https://api.anthropic.com/v1/messages"),
    )
    assert [ix.provider for ix in before] == ["generic", "anthropic"]
    entries = json.loads(export(before))["log"]["entries"]
    assert entries[0]["request"]["url"] == "http://localhost/model/x/invoke"
    assert entries[0]["startedDateTime"] == "1970-01-01T00:00:00.000Z"
    assert entries[0]["_reel"]["ttfb_ms"] is None
    assert entries[0]["_reel"]["ts"] is None
    assert entries[0]["timings"] == {"send": 0, "wait": 0.0, "receive": 0.0}
    assert entries[1]["request"]["url"] == "https://api.anthropic.com/v1/messages"
    assert_same(before, round_trip(before).interactions)
    given = json.loads(export(before, base_url="http://127.0.0.1:8080/"))["log"]["entries"]
    assert [e["request"]["url"] for e in given] == [
        "http://127.0.0.1:8080/model/x/invoke",
        "http://127.0.0.1:8080/v1/messages",
    ]


def test_a_broken_off_stream_comes_back_ending_where_it_broke() -> None:
    (ix,) = recorded(
        exchange(0, response_headers=SSE, body=frames_of([(0.0, b"data: 1\n\n"), (0.1, b"")]))
    )
    cut = replace(ix, response=replace(ix.response, cut=StreamCut(300.0, "reset", "peer reset")))
    entry = json.loads(export([cut]))["log"]["entries"][0]
    assert entry["_reel"]["cut"] == {"at_ms": 300.0, "error": "reset"}
    assert entry["timings"]["receive"] == 300.0
    after = round_trip([cut])
    (back,) = after.interactions
    assert back.response.cut is None
    assert back.response.end_ms == 300.0
    assert back.response.frames == ix.response.frames
    assert after.notes == [(0, "the stream was broken off in the source: it ends cleanly here")]


def test_an_export_is_byte_identical_each_time() -> None:
    report = import_exchanges(
        [exchange(0), exchange(1, request_body=b'{"n": "caf\xc3\xa9"}')],
        tool="test",
        redactor=Redactor(),
    )
    data = export(report.interactions)
    assert data == export(Cassette.loads(report.dumps(), strict=True).interactions())
    assert data.isascii()
    assert json.loads(data)["log"]["entries"][1]["request"]["postData"]["text"] == '{"n": "café"}'


# -- the corpus: every imported vcrpy and HAR recording, round-tripped -------


def _corpus() -> list[tuple[str, str]]:
    if not (CORPUS / "MANIFEST.jsonl").is_file():
        return []
    lines = (CORPUS / "MANIFEST.jsonl").read_text().splitlines()
    names = {"har": "har", "vcrpy": "vcr"}
    return [(names[e["format"]], e["file"]) for e in map(json.loads, lines) if e["format"] in names]


FILES = _corpus()


@pytest.mark.slow
@pytest.mark.skipif(not FILES, reason=NO_CORPUS)
def test_the_corpus_round_trips_through_har() -> None:
    pytest.importorskip("yaml", reason="pip install pyyaml (in the test extra)")
    count = 0
    for fmt, name in FILES:
        report = import_source(fmt, (CORPUS / name).read_bytes(), name, Redactor())
        before = Cassette.loads(report.dumps(), strict=True).interactions()
        assert_same(before, round_trip(before).interactions)
        count += len(before)
    # 225 vcrpy + 20 HAR files: a drop fails
    assert (len(FILES), count) == (245, 401)
