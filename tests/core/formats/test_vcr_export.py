"""Reel -> vcrpy YAML: real vcrpy loads the export and replays it to httpx
and requests clients, and Reel -> vcr -> Reel keeps every request, status,
stored header and body.

What legitimately changes on the way back (vcrpy keeps no timing): stream
frames are at offset 0 and end at 0, the time to first byte and the
recording time are unknown (``null``), a broken-off stream ends cleanly
where it broke off, and response headers of one name are gathered where the
name first came (vcrpy keeps headers as name -> list of values).
"""

from __future__ import annotations

import gzip
import json
import sys
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests
import vcr  # type: ignore[import-untyped]
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from vcr.serialize import deserialize  # type: ignore[import-untyped]
from vcr.serializers import yamlserializer  # type: ignore[import-untyped]

from reel_core import Cassette, Interaction, RecordedRequest, RecordedResponse, Redactor, Request
from reel_core._formats import (
    EXPORTERS,
    Exchange,
    ImportReport,
    export_formats,
    frames_of,
    import_exchanges,
    import_source,
)
from reel_core._formats.vcr import parse
from reel_core._formats.vcr_export import export, losses
from reel_core._interaction import StreamCut
from reel_core.tools import record_exchange
from tests.corpus import CORPUS, NO_CORPUS

CHAT = b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}'
URL = "https://api.openai.com/v1/chat/completions"
JSON = (("content-type", "application/json"),)
SSE = (("content-type", "text/event-stream"),)
EVENTS = (b'data: {"x": 1}\n\n', b'data: {"x": "caf\xc3\xa9"}\n\n', b"data: [DONE]\n\n")


def exchange(source: int, **kw: Any) -> Exchange:
    fields: dict[str, Any] = {
        "source": source,
        "method": "POST",
        "target": URL,
        "request_headers": JSON,
        "request_body": CHAT,
        "status": 200,
        "response_headers": (*JSON, ("x-request-id", "req_1")),
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
    report = import_exchanges(
        parse(export(interactions, **kw), "out.yaml"), tool="vcrpy", redactor=Redactor()
    )
    assert report.failures == []
    return report


def grouped(headers: tuple[tuple[str, str], ...]) -> list[tuple[str, list[str]]]:
    """``headers`` as vcrpy holds them: each name once, in the order it came
    first, with its values in order (a name repeated after another header,
    as ``access-control-expose-headers`` in a real recording, comes back
    beside its first)."""
    names: dict[str, list[str]] = {}
    for name, value in headers:
        names.setdefault(name, []).append(value)
    return list(names.items())


def assert_kept(before: list[Interaction], after: list[Interaction]) -> None:
    """Every request, status, stored header and body came back; what vcrpy
    cannot hold (timing, the time, a cut) is unknown or ends cleanly."""
    assert len(before) == len(after)
    for x, y in zip(before, after, strict=True):
        assert (y.key, y.id, y.provider, y.endpoint) == (x.key, x.id, x.provider, x.endpoint)
        assert y.request == x.request
        a, b = x.response, y.response
        assert (b.status, grouped(b.headers), b.stream, b.content) == (
            a.status,
            grouped(a.headers),
            a.stream,
            a.content,
        )
        if a.stream == "sse":  # the same byte-exact events
            assert [data for _, data in b.frames] == [data for _, data in a.frames]
        assert all(at == 0.0 for at, _ in b.frames)
        assert (b.end_ms, b.cut, y.timestamp, y.meta["ttfb_ms"]) == (0.0, None, None, None)


# -- real vcrpy replays the export --------------------------------------------

#: Interactions of every kind, and the request a client sends for each.
CASES: list[tuple[Exchange, dict[str, Any]]] = [
    (exchange(0), {}),
    (
        exchange(1, status=404, body=b'{"error": {"message": "no such model"}}\n'),
        {},
    ),
    (  # the first request again (as the 404's): served in recorded order
        exchange(2, body=b'{"choices":[{"message":{"content":"second"}}]}'),
        {},
    ),
    (
        exchange(
            3,
            method="GET",
            target="https://api.openai.com/v1/models?limit=2&after=a+b&q=caf%C3%A9",
            request_headers=(),
            request_body=b"",
            body="Plain text, caf\u00e9 \u2615 \u65e5\u672c\n\tsecond line  \n".encode(),
            response_headers=(("content-type", "text/plain; charset=utf-8"),),
        ),
        {"params": {"limit": "2", "after": "a b", "q": "caf\u00e9"}},
    ),
    (
        exchange(
            4,
            target="https://api.openai.com/v1/audio/speech",
            request_body=b'{"input":"caf\xc3\xa9"}',
            response_headers=(("content-type", "audio/mpeg"),),
            body=bytes(range(256)) * 3,
        ),
        {},
    ),
    (  # gzip on the wire, both ways: Reel stores both bodies decoded
        exchange(
            5,
            target="https://api.openai.com/v1/embeddings",
            request_headers=(*JSON, ("content-encoding", "gzip")),
            request_body=gzip.compress(b'{"input":"zipped"}'),
            response_headers=(*JSON, ("content-encoding", "gzip")),
            body=gzip.compress(b'{"data":[{"embedding":[0.5]}]}'),
        ),
        {},
    ),
    (
        exchange(
            6,
            target="https://api.anthropic.com/v1/messages",
            request_body=b'{"model":"claude","stream":true}',
            response_headers=SSE,
            body=frames_of([(0.0, EVENTS[0]), (0.1, EVENTS[1]), (0.4, EVENTS[2]), (0.5, b"")]),
        ),
        {},
    ),
    (
        exchange(
            7,
            target="https://api.openai.com/v1/files/f1",
            method="DELETE",
            request_headers=(),
            request_body=b"",
            status=204,
            response_headers=(),
            body=b"",
        ),
        {},
    ),
    (
        exchange(
            8,
            target="https://api.openai.com/v1/batches",
            response_headers=(
                *JSON,
                ("x-ratelimit-remaining-requests", "99"),
                ("x-ratelimit-remaining-requests", "98"),
            ),
        ),
        {},
    ),
    (
        exchange(9, target="https://api.openai.com/v1/odd", status=599, response_headers=()),
        {},
    ),
]


def _expected(ix: Interaction) -> tuple[int, bytes]:
    return ix.response.status, ix.response.content


@pytest.fixture
def cassette(tmp_path: Path) -> tuple[Path, list[Interaction], list[dict[str, Any]]]:
    interactions = recorded(*(item for item, _ in CASES))
    path = tmp_path / "export.yaml"
    path.write_bytes(export(interactions))
    return path, interactions, [extra for _, extra in CASES]


def _url(ix: Interaction) -> str:
    host = "https://api.anthropic.com" if ix.provider == "anthropic" else "https://api.openai.com"
    return host + ix.request.path


def test_vcrpy_replays_the_export_to_httpx(
    cassette: tuple[Path, list[Interaction], list[dict[str, Any]]],
) -> None:
    path, interactions, extras = cassette
    seen: list[httpx.Response] = []
    with vcr.use_cassette(str(path), record_mode="none"), httpx.Client() as client:
        for ix, extra in zip(interactions, extras, strict=True):
            answer = client.request(ix.request.method, _url(ix), content=ix.request.body, **extra)
            assert (answer.status_code, answer.content) == _expected(ix), ix.id
            assert "content-encoding" not in answer.headers
            seen.append(answer)
    assert seen[8].headers.get_list("x-ratelimit-remaining-requests") == ["99", "98"]
    assert seen[3].text.startswith("Plain text, caf\u00e9")


def test_vcrpy_replays_the_export_to_requests(
    cassette: tuple[Path, list[Interaction], list[dict[str, Any]]],
) -> None:
    path, interactions, extras = cassette
    seen: list[requests.Response] = []
    with vcr.use_cassette(str(path), record_mode="none"), requests.Session() as session:
        for ix, extra in zip(interactions, extras, strict=True):
            answer = session.request(ix.request.method, _url(ix), data=ix.request.body, **extra)
            assert (answer.status_code, answer.content) == _expected(ix), ix.id
            seen.append(answer)
    assert interactions[6].response.stream == "sse"
    assert seen[6].content == b"".join(EVENTS)
    assert seen[6].headers["content-type"] == "text/event-stream"
    assert seen[5].json() == {"data": [{"embedding": [0.5]}]}  # gzip'd on the wire


def test_the_export_keeps_everything_but_timing(
    cassette: tuple[Path, list[Interaction], list[dict[str, Any]]],
) -> None:
    _, before, _ = cassette
    assert [before[1].id, before[2].id] == [before[0].id + "-2", before[0].id + "-3"]  # repeats
    assert before[5].request.encoding == "gzip"
    assert before[5].response.headers == JSON  # the body decoded, its content-encoding gone
    assert before[6].response.frames[1][0] == 100.0
    after = round_trip(before)
    assert after.notes == []
    assert_kept(before, after.interactions)


# -- the YAML ------------------------------------------------------------------


def test_the_yaml_is_vcrpys_layout() -> None:
    before = recorded(
        exchange(0, response_headers=(*JSON, ("x-request-id", "req_1")), body=b'{"a":1}'),
        exchange(
            1,
            method="GET",
            target="/v1/models?limit=2",
            request_headers=(("host", "api.openai.com"),),
            request_body=b"",
            response_headers=SSE,
            body=b"".join(EVENTS),
        ),
    )
    assert export(before).decode() == (
        "interactions:\n"
        "- request:\n"
        f"    body: '{CHAT.decode()}'\n"
        "    headers:\n"
        "      content-type:\n"
        "      - application/json\n"
        "    method: POST\n"
        f"    uri: {URL}\n"
        "  response:\n"
        "    body:\n"
        "      string: '{\"a\":1}'\n"
        "    headers:\n"
        "      content-type:\n"
        "      - application/json\n"
        "      x-request-id:\n"
        "      - req_1\n"
        "    status:\n"
        "      code: 200\n"
        "      message: OK\n"
        "- request:\n"
        "    body: null\n"
        "    headers: {}\n"
        "    method: GET\n"
        "    uri: https://api.openai.com/v1/models?limit=2\n"
        "  response:\n"
        "    body:\n"
        "      string: |+\n"
        '        data: {"x": 1}\n'
        "\n"
        '        data: {"x": "caf\u00e9"}\n'
        "\n"
        "        data: [DONE]\n"
        "\n"
        "    headers:\n"
        "      content-type:\n"
        "      - text/event-stream\n"
        "    status:\n"
        "      code: 200\n"
        "      message: OK\n"
        "version: 1\n"
    )


def test_an_export_is_byte_identical_each_time() -> None:
    report = import_exchanges(
        [exchange(0), exchange(1, request_body=b'{"n": "caf\xc3\xa9"}', body=bytes(range(9)))],
        tool="test",
        redactor=Redactor(),
    )
    data = export(report.interactions)
    assert data == export(Cassette.loads(report.dumps(), strict=True).interactions())
    assert data == export(report.interactions)


def test_hosts_and_base_url() -> None:
    before = recorded(
        exchange(0, target="https://bedrock.example/model/x/invoke", timestamp=None, ttfb=None),
        exchange(
            1, target="https://generativelanguage.googleapis.com/v1beta/models/g:generateContent"
        ),
    )
    assert [ix.provider for ix in before] == ["generic", "gemini"]
    uris = [item["request"]["uri"] for item in yaml.safe_load(export(before))["interactions"]]
    assert uris == [
        "http://localhost/model/x/invoke",
        "https://generativelanguage.googleapis.com/v1beta/models/g:generateContent",
    ]
    assert_kept(before, round_trip(before).interactions)
    given = yaml.safe_load(export(before, base_url="http://127.0.0.1:8080/"))["interactions"]
    assert [item["request"]["uri"] for item in given] == [
        "http://127.0.0.1:8080/model/x/invoke",
        "http://127.0.0.1:8080/v1beta/models/g:generateContent",
    ]
    assert_kept(before, round_trip(before, base_url="http://127.0.0.1:8080").interactions)


def test_request_bodies_keep_how_they_read() -> None:
    boundary = "b0undary"
    multipart = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
        f"--{boundary}--\r\n"
    ).encode()
    before = recorded(
        exchange(
            0,
            target="https://api.openai.com/v1/files",
            request_headers=(("content-type", f"multipart/form-data; boundary={boundary}"),),
            request_body=multipart,
        ),
        exchange(
            1,
            target="/oauth/token",
            request_headers=(("content-type", "application/x-www-form-urlencoded"),),
            request_body=b"grant_type=client_credentials&scope=a",
        ),
        exchange(2, request_body=b"\xff\xfe binary", request_headers=()),
        exchange(
            3,
            request_headers=(*JSON, ("content-encoding", "deflate, gzip")),
            request_body=gzip.compress(zlib.compress(b'{"twice":true}')),
        ),
    )
    assert [ix.request.content_type for ix in before] == [
        "multipart/form-data",
        "application/x-www-form-urlencoded",
        None,
        None,
    ]
    assert before[3].request.encoding == "deflate, gzip"
    items = yaml.safe_load(export(before))["interactions"]
    assert [item["request"]["headers"]["content-type"] for item in items] == [
        [f"multipart/form-data; boundary={boundary}"],
        ["application/x-www-form-urlencoded"],
        ["application/octet-stream"],
        ["application/json"],
    ]
    assert items[2]["request"]["body"] == b"\xff\xfe binary"
    sent = items[3]["request"]
    assert sent["headers"]["content-encoding"] == ["deflate, gzip"]
    assert zlib.decompress(gzip.decompress(sent["body"])) == b'{"twice":true}'
    assert losses(before) == []
    assert_kept(before, round_trip(before).interactions)


def test_encodings_reel_could_not_decode_stay_as_they_were(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A line recorded where zstd did not decode (flagged, kept as sent)
    is exported as it was; importing it back refuses it, saying why."""
    monkeypatch.setitem(sys.modules, "zstandard", None)
    zstd = b"\x28\xb5\x2f\xfd not really zstd"
    request = Request(
        "POST",
        URL,
        (
            (b"host", b"api.openai.com"),
            (b"content-type", b"application/json"),
            (b"content-encoding", b"zstd"),
        ),
        zstd,
    )
    headers = (("content-type", "application/json"), ("content-encoding", "zstd"))
    ix = record_exchange(request, 200, headers, zstd, redactor=Redactor())
    assert ix.request.encoding_error is not None
    assert ix.response.encoding_error is not None
    assert ix.response.headers == (*JSON, ("content-encoding", "zstd"))
    (item,) = yaml.safe_load(export([ix]))["interactions"]
    assert (item["request"]["body"], item["request"]["headers"]["content-encoding"]) == (
        zstd,
        ["zstd"],
    )
    assert (
        item["response"]["body"]["string"],
        item["response"]["headers"]["content-encoding"],
    ) == (
        zstd,
        ["zstd"],
    )
    report = import_exchanges(parse(export([ix]), "out.yaml"), tool="vcrpy", redactor=Redactor())
    assert report.interactions == []
    ((_, why),) = report.failures
    assert why.startswith("the request body could not be decoded: cannot decode content-encoding")
    assert "pip install 'reel-llm[zstd]'" in why


def test_br_is_encoded_again_or_said_to_be_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    brotli = pytest.importorskip("brotli", reason="pip install brotli (in the test extra)")
    before = recorded(
        exchange(
            0,
            request_headers=(*JSON, ("content-encoding", "br")),
            request_body=brotli.compress(b'{"input":"br"}'),
        )
    )
    assert before[0].request.encoding == "br"
    (item,) = yaml.safe_load(export(before))["interactions"]
    assert brotli.decompress(item["request"]["body"]) == b'{"input":"br"}'
    assert_kept(before, round_trip(before).interactions)
    monkeypatch.setitem(sys.modules, "brotli", None)  # not installed
    monkeypatch.setitem(sys.modules, "brotlicffi", None)
    (item,) = yaml.safe_load(export(before))["interactions"]
    assert item["request"]["body"] == '{"input":"br"}'
    assert "content-encoding" not in item["request"]["headers"]
    assert losses(before) == [
        "1 request body sent br-encoded: written decoded, without its content-encoding "
        "(install the brotli package to encode it again)"
    ]
    (back,) = round_trip(before).interactions
    assert back.request == replace(before[0].request, encoding=None)


def test_streams_lose_their_timing_and_say_so() -> None:
    sse = frames_of([(0.0, EVENTS[0]), (0.2, EVENTS[1]), (0.3, b"")])
    ndjson = frames_of([(0.0, b'{"a":1}\n'), (0.3, b'{"b":2}\n')])
    before = recorded(
        exchange(0, response_headers=SSE, body=sse),
        exchange(
            1,
            request_body=b'{"n":1}',
            response_headers=(("content-type", "application/x-ndjson"),),
            body=ndjson,
        ),
    )
    assert [ix.response.stream for ix in before] == ["sse", "chunks"]
    cut = replace(
        before[0], response=replace(before[0].response, cut=StreamCut(250.0, "reset", "peer"))
    )
    assert losses([cut, before[1]]) == [
        "2 streams: the frame timing is lost (vcrpy keeps no timing); replayed as a whole body",
        "1 broken-off stream: written up to the break, ending cleanly",
    ]
    assert losses(before[:1]) == [
        "1 stream: the frame timing is lost (vcrpy keeps no timing); replayed as a whole body"
    ]
    items = yaml.safe_load(export([cut, before[1]]))["interactions"]
    assert items[0]["response"]["body"]["string"] == (EVENTS[0] + EVENTS[1]).decode()
    assert items[1]["response"]["body"]["string"] == '{"a":1}\n{"b":2}\n'
    assert_kept([cut, before[1]], round_trip([cut, before[1]]).interactions)


def test_headers_of_one_name_are_gathered_where_it_first_came() -> None:
    ratelimit = "x-ratelimit-remaining-requests"
    headers = ((ratelimit, "9"), ("content-type", "application/json"), (ratelimit, "8"))
    (ix,) = recorded(exchange(0, response_headers=headers))
    assert ix.response.headers == headers
    (item,) = yaml.safe_load(export([ix]))["interactions"]
    assert item["response"]["headers"] == {
        ratelimit: ["9", "8"],
        "content-type": ["application/json"],
    }
    (back,) = round_trip([ix]).interactions
    # the one thing vcrpy's name -> values mapping changes: the order across names
    assert back.response.headers == (
        (ratelimit, "9"),
        (ratelimit, "8"),
        ("content-type", "application/json"),
    )
    assert back.key == ix.key


def test_redaction_markers_stay_as_they_are() -> None:
    (ix,) = recorded(
        exchange(0, request_body=b'{"api_key":"sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD"}')
    )
    assert b"[REDACTED:" in ix.request.body
    (item,) = yaml.safe_load(export([ix]))["interactions"]
    assert item["request"]["body"] == ix.request.body.decode()
    assert_kept([ix], round_trip([ix]).interactions)


def test_the_exporters_are_registered() -> None:
    assert list(EXPORTERS) == ["har", "vcr", "otel"]
    assert export_formats() == EXPORTERS
    for module in EXPORTERS.values():
        assert module.SUFFIX.startswith(".")
        assert "\n" not in module.DESCRIPTION


# -- any bytes survive the YAML ------------------------------------------------


def _bare(request_body: bytes, body: bytes) -> Interaction:
    return Interaction(
        key="sha256:" + "0" * 64,
        id="000000000000",
        request=RecordedRequest("POST", "/v1/x", body=request_body),
        response=RecordedResponse(200, body=body),
    )


LOADERS = [yaml.SafeLoader, getattr(yaml, "CSafeLoader", yaml.SafeLoader)]


#: Bytes, any text, and text of what YAML treats specially (breaks, quotes,
#: indicators, a byte order mark, control characters).
BODIES = st.one_of(
    st.binary(max_size=200),
    st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.text(st.sampled_from("a -:#|>'\"\n\r\t\x00\x85\xa0\u2028\u2029\ufeff\xe9\U0001f600")).map(
        str.encode
    ),
)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(BODIES, BODIES)
def test_any_body_comes_back_byte_for_byte(request_body: bytes, body: bytes) -> None:
    data = export([_bare(request_body, body)])
    requests_, responses = deserialize(data.decode("utf-8"), yamlserializer)
    assert requests_[0].body == (request_body or None)
    assert responses[0]["body"]["string"] == body
    for loader in LOADERS:
        (item,) = yaml.load(data, Loader=loader)["interactions"]
        got = item["response"]["body"]["string"]
        assert (got if isinstance(got, bytes) else got.encode("utf-8", "surrogatepass")) == body


@pytest.mark.parametrize(
    "text",
    [
        "a\nb",
        "a\n",
        "a\n\n\n",
        "\n",
        "  leading\nspaces",
        "trailing  \nspaces  ",
        "tab\there\n",
        "crlf\r\nline\r\n",
        "nel\x85line\n",
        "ls\u2028ps\u2029\n",
        "bom\ufeff\n",
        "- a list?\n- no\n",
        "# not a comment\n",
        "key: value\n",
        "\x00nul\n",
        "caf\u00e9 \U0001f600\n",
        "|\n",
        "null",
        "",
    ],
)
def test_tricky_text_comes_back(text: str) -> None:
    body = text.encode("utf-8")
    data = export([_bare(body, body)])
    requests_, responses = deserialize(data.decode("utf-8"), yamlserializer)
    assert (requests_[0].body, responses[0]["body"]["string"]) == (body or None, body)
    for loader in LOADERS:
        (item,) = yaml.load(data, Loader=loader)["interactions"]
        assert item["response"]["body"]["string"] == text


# -- the corpus: every vcrpy recording imported, exported, imported again ----


def _corpus() -> list[str]:
    if not (CORPUS / "MANIFEST.jsonl").is_file():
        return []
    lines = (CORPUS / "MANIFEST.jsonl").read_text().splitlines()
    return [e["file"] for e in map(json.loads, lines) if e["format"] == "vcrpy"]


FILES = _corpus()


@pytest.mark.slow
@pytest.mark.skipif(not FILES, reason=NO_CORPUS)
def test_the_corpus_round_trips_through_vcr() -> None:
    count = streams = 0
    for name in FILES:
        report = import_source("vcr", (CORPUS / name).read_bytes(), name, Redactor())
        before = Cassette.loads(report.dumps(), strict=True).interactions()
        data = export(before)
        loaded, _ = deserialize(data.decode("utf-8"), yamlserializer)  # vcrpy loads it
        assert len(loaded) == len(before), name
        assert_kept(before, round_trip(before).interactions)
        count += len(before)
        streams += sum(ix.response.stream is not None for ix in before)
    # every vcrpy file of the corpus: a drop fails
    assert (len(FILES), count, streams) == (225, 379, 94)


def test_unblocked_is_every_character_a_literal_block_cannot_hold() -> None:
    # _UNBLOCKED lists the few characters it matches (cheap to compile); its
    # definition is the complement of what a literal block holds as it is.
    from reel_core._formats import vcr_export

    allowed = [
        (0x0A, 0x0A),
        (0x20, 0x7E),
        (0xA0, 0x2027),
        (0x202A, 0xFEFE),
        (0xFF00, sys.maxunicode),
    ]
    every = "".join(map(chr, range(sys.maxunicode + 1)))
    blocked = {ord(c) for c in vcr_export._UNBLOCKED.findall(every)}
    expected = {c for c in range(sys.maxunicode + 1) if not any(a <= c <= b for a, b in allowed)}
    assert blocked == expected
    assert {0x09, 0x0D, 0x85, 0x2028, 0x2029, 0xFEFF} <= blocked
