"""Ruby VCR cassettes (``http_interactions``) as neutral exchanges, then
recorded and replayed; every Ruby VCR cassette of ../shared/corpus too."""

from __future__ import annotations

import base64
import gzip
import json
import zlib
from collections import Counter
from typing import Any

import pytest
import yaml

from reel_core import (
    Cassette,
    CassetteError,
    Config,
    Engine,
    Frame,
    Mode,
    Redactor,
    Replay,
    Request,
    ResponseHead,
    Signal,
)
from reel_core._formats import Exchange, Skipped, import_exchanges, ruby_vcr, sniff_format, vcr
from reel_core._http import normalize_headers
from reel_core._literals import exchange_redactor
from tests.corpus import CORPUS, NO_CORPUS

CHAT = '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}'
ANSWER = '{"choices":[{"message":{"content":"hello"}}]}'
WHEN = "Tue, 14 Nov 2023 21:48:25 GMT"
STAMP = 1699998505.0


def interaction(**over: Any) -> dict[str, Any]:
    item: dict[str, Any] = {
        "request": {
            "method": "post",
            "uri": "https://api.openai.com/v1/chat/completions",
            "body": {"encoding": "UTF-8", "string": CHAT},
            "headers": {
                "Content-Type": ["application/json"],
                "Authorization": ["Bearer <OPENAI_API_KEY>"],
            },
        },
        "response": {
            "status": {"code": 200, "message": "OK"},
            "headers": {"Content-Type": ["application/json"], "X-Request-Id": ["req_1"]},
            "body": {"encoding": "ASCII-8BIT", "string": ANSWER},
        },
        "recorded_at": WHEN,
    }
    for path, value in over.items():
        *parents, last = path.split("__")
        node = item
        for key in parents:
            node = node[key]
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return item


def cassette(*items: Any) -> bytes:
    return yaml.safe_dump(
        {"http_interactions": list(items), "recorded_with": "VCR 6.2.0"}, sort_keys=False
    ).encode()


def one(data: bytes) -> Exchange:
    (item,) = ruby_vcr.parse(data, "c.yml")
    assert isinstance(item, Exchange), item
    return item


def skipped(item: Any) -> str:
    (out,) = ruby_vcr.parse(cassette(item), "c.yml")
    assert isinstance(out, Skipped), out
    assert out.source == 0
    return out.reason


def replay(data: bytes | Cassette, request: Request) -> tuple[int, bytes]:
    """The answer to ``request`` (a cassette, not bytes, keeps its place
    among repeats)."""
    if isinstance(data, bytes):
        data = Cassette.loads(data, strict=True)
    engine = Engine(data, Config(mode=Mode.REPLAY))
    engine.receive_request(request)
    events = []
    while not isinstance(event := engine.next_event(), Signal):
        events.append(event)
    assert isinstance(events[0], Replay), f"a miss: {events[0]}"
    head = events[1]
    assert isinstance(head, ResponseHead)
    return head.status, b"".join(e.data for e in events if isinstance(e, Frame))


def test_an_interaction_becomes_an_exchange() -> None:
    ex = one(cassette(interaction()))
    assert ex == Exchange(
        source=0,
        method="POST",
        target="https://api.openai.com/v1/chat/completions",
        request_headers=(
            ("content-type", "application/json"),
            ("authorization", "Bearer <OPENAI_API_KEY>"),  # a placeholder: kept
        ),
        request_body=CHAT.encode(),
        status=200,
        response_headers=(("content-type", "application/json"), ("x-request-id", "req_1")),
        body=ANSWER.encode(),
        timestamp=STAMP,
    )


def test_it_is_recorded_and_replays() -> None:
    report = import_exchanges(
        ruby_vcr.parse(cassette(interaction(), interaction()), "c.yml"),
        tool="ruby-vcr",
        redactor=Redactor(),
    )
    assert report.failures == []
    first, second = report.interactions
    assert first.provider == "openai"
    assert second.id == first.id + "-2"
    assert first.meta["imported"] == "ruby-vcr"
    assert first.meta["ttfb_ms"] is None
    request = Request("POST", "/v1/chat/completions", (), CHAT.encode())
    assert replay(report.dumps(), request) == (200, ANSWER.encode())


def test_binary_and_base64_bodies_are_their_bytes() -> None:
    data = bytes(range(256))
    packed = gzip.compress(ANSWER.encode(), mtime=0)
    text = (
        "---\nhttp_interactions:\n- request:\n    method: post\n"
        "    uri: https://api.openai.com/v1/audio/transcriptions\n"
        "    body:\n      encoding: ASCII-8BIT\n      string: !binary |-\n        "
        + base64.b64encode(data).decode()
        + "\n    headers: {}\n  response:\n    status:\n      code: 200\n      message: OK\n"
        "    headers:\n      Content-Encoding:\n      - gzip\n"
        "    body:\n      encoding: ASCII-8BIT\n      base64_string: |\n        "
        + base64.b64encode(packed).decode()
        + "\n  recorded_at: "
        + WHEN
        + "\nrecorded_with: VCR 6.2.0\n"
    )
    ex = one(text.encode())
    assert ex.request_body == data
    assert ex.body == packed  # still gzip: the core decodes it when recording
    assert ex.response_headers == (("content-encoding", "gzip"),)
    report = import_exchanges([ex], tool="ruby-vcr", redactor=Redactor())
    (ix,) = report.interactions
    assert ix.response.body == ANSWER.encode()


def test_a_text_body_is_its_utf8_whatever_its_encoding_says() -> None:
    item = interaction(
        request__body={"encoding": "ISO-8859-1", "string": "café"},
        response__body={"encoding": "US-ASCII", "string": "\ud800 é"},
    )
    (ex,) = ruby_vcr.parse(json.dumps({"http_interactions": [item]}).encode(), "c.json")
    assert isinstance(ex, Exchange)
    assert ex.request_body == "café".encode()
    assert ex.body == "\ud800 é".encode("utf-8", "surrogatepass")


def test_missing_and_bare_bodies() -> None:
    ex = one(cassette(interaction(request__body=None, response__body="plain text")))
    assert ex.request_body == b""
    assert ex.body == b"plain text"
    ex = one(cassette(interaction(request__body={"encoding": "UTF-8", "string": None})))
    assert ex.request_body == b""


@pytest.mark.parametrize(
    ("uri", "target", "note"),
    [
        ("https://<HOST>/v1/x?key=<KEY>", "/v1/x?key=<KEY>", "host <HOST>"),
        (
            "https://<RESOURCE>.openai.azure.com/openai",
            "/openai",
            "host <RESOURCE>.openai.azure.com",
        ),
        ("http://<HOST>?a=1", "/?a=1", "host <HOST>"),
        ("https://<HOST>", "/", "host <HOST>"),
        ("<GPUSTACK_API_BASE>/chat/completions", "/chat/completions", "base <GPUSTACK_API_BASE>"),
        ("<API_BASE>?a=<KEY>", "/?a=<KEY>", "base <API_BASE>"),
        ("<API_BASE>", "/", "base <API_BASE>"),
    ],
)
def test_a_placeholder_host_leaves_the_path(uri: str, target: str, note: str) -> None:
    ex = one(cassette(interaction(request__uri=uri)))
    assert ex.target == target
    assert ex.notes == (
        f"the uri's {note} is a placeholder: the request is stored by its path {target}"
        " (a path the placeholder stood for is not known)",
    )


@pytest.mark.parametrize(
    "uri",
    [
        "https://api.openai.com/v1/models/<MODEL>?key=<GEMINI_API_KEY>",
        "http://localhost:11434/api/chat",
        "/v1/chat/completions",
        "  https://api.openai.com/v1/models  ",
    ],
)
def test_other_uris_are_kept(uri: str) -> None:
    ex = one(cassette(interaction(request__uri=uri)))
    assert ex.target == uri.strip()
    assert ex.notes == ()


@pytest.mark.parametrize(
    ("when", "stamp"),
    [
        (WHEN, STAMP),
        ("14 Nov 2023 22:48:25 +0100", STAMP),
        ("Tue, 14 Nov 2023 16:48:25 -0500", STAMP),
        ("Tue, 14 nov 2023 21:48:25 UTC", STAMP),
        ("Tue, 14 Nov 2023 21:48:25", STAMP),
        ("Tue, 14 Nov 2023 21:48 GMT", STAMP - 25),
    ],
)
def test_recorded_at_is_the_timestamp(when: str, stamp: float) -> None:
    ex = one(cassette(interaction(recorded_at=when)))
    assert ex.timestamp == stamp
    assert ex.notes == ()


@pytest.mark.parametrize(
    "when", ["yesterday", "Tue, 31 Feb 2023 21:48:25 GMT", "Tue, 14 Foo 2023 21:48:25 GMT", "5"]
)
def test_a_recorded_at_that_is_no_date_is_said(when: str) -> None:
    ex = one(cassette(interaction(recorded_at=when)))
    assert ex.timestamp is None
    assert ex.notes == (f"recorded_at {when!r} is no RFC 2822 date: no timestamp kept",)


def test_a_yaml_timestamp_and_no_recorded_at() -> None:
    naive = one(cassette(interaction()).replace(WHEN.encode(), b"2023-11-14 21:48:25"))
    assert naive.timestamp == STAMP
    aware = one(cassette(interaction()).replace(WHEN.encode(), b"2023-11-14T22:48:25+01:00"))
    assert aware.timestamp == STAMP
    assert one(cassette(interaction(recorded_at=None))).timestamp is None


def test_header_values() -> None:
    ex = one(
        cassette(
            interaction(
                response__headers={"Set-Cookie": ["a=1", "b=2"], "X-N": 5, "X-None": [None]},
                request__headers=None,
            )
        )
    )
    assert ex.response_headers == (("set-cookie", "a=1"), ("set-cookie", "b=2"), ("x-n", "5"))
    assert ex.request_headers == ()


@pytest.mark.parametrize(
    ("over", "why"),
    [
        ({"request": None}, "no request or no response"),
        ({"response": "x"}, "no request or no response"),
        ({"request__method": 5}, "the request method 5 is not an HTTP method"),
        ({"request__method": None}, "the request method None is not an HTTP method"),
        ({"request__uri": None}, "the request has no uri"),
        ({"request__uri": " "}, "the request has no uri"),
        ({"request__uri": "api.openai.com/v1"}, "the request uri 'api.openai.com/v1' is neither"),
        ({"request__uri": "<BASE>v1"}, "the request uri '<BASE>v1' is neither a URL nor a path"),
        (
            {"response__body": {"encoding": "UTF-8"}},
            'the response body has no "string" nor "base64_string" (its keys: encoding)',
        ),
        ({"response__body": {}}, 'the response body has no "string" nor "base64_string" (its'),
        ({"response__body": {"string": 5}}, "the response body is a int, not text or bytes"),
        ({"request__body": {"base64_string": 5}}, "the request body's base64_string is a int"),
        ({"request__body": {"base64_string": "abc"}}, "the request body's base64_string is not"),
        ({"request__headers": ["a"]}, "the request headers are a list, not a mapping"),
        ({"response__status": {"code": "teapot"}}, "the response status 'teapot' is not an HTTP"),
        ({"response__status": {"code": True}}, "the response status True is not an HTTP status"),
        ({"response__status": "404"}, None),
        (
            {
                "response__headers": {"Content-Encoding": ["gzip"]},
                "response__body": {"base64_string": "H4sIAGdhcmJhZ2U="},
            },
            "the body is gzip-encoded (content-encoding gzip) but corrupt: ",
        ),
    ],
)
def test_what_cannot_be_imported_is_said(over: dict[str, Any], why: str | None) -> None:
    item = interaction(**over)
    if why is None:
        assert one(cassette(item)).status == 404
    else:
        assert skipped(item).startswith(why)


def test_an_interaction_that_is_no_mapping() -> None:
    assert skipped("hello") == "an interaction is a str, not a mapping"


def test_ruby_object_tags_are_never_built() -> None:
    good = cassette(interaction(), interaction()).decode()
    tag = "  extra: !ruby/object:Net::HTTP {a: 1}\n  recorded_at:"
    text = good.replace("  recorded_at:", tag, 1)
    first, second = ruby_vcr.parse(text.encode(), "c.yml")
    assert first == Skipped(
        0,
        "it holds a !ruby/object:Net::HTTP YAML tag, which Reel does not load "
        "(it would build an object)",
    )
    assert isinstance(second, Exchange)


def test_json_cassettes() -> None:
    data = json.dumps({"http_interactions": [interaction()], "recorded_with": "VCR 6"})
    assert one(data.encode()).status == 200
    assert ruby_vcr.parse(data.encode(), "c.json")[0] == one(data.encode())


def test_the_compressed_serializers_cassettes() -> None:
    data = cassette(interaction())
    packed = zlib.compress(data)
    assert ruby_vcr.sniff(packed)
    assert sniff_format(packed) == "ruby-vcr"
    assert ruby_vcr.parse(packed, "c.zz") == ruby_vcr.parse(data, "c.yml")
    # YAML whose first two bytes read as a zlib header is still YAML
    text = b"x : 1\n" + data
    assert ruby_vcr.sniff(text)
    assert ruby_vcr.parse(text, "c.yml") == ruby_vcr.parse(data, "c.yml")
    # a zlib stream cut short is no cassette
    assert not ruby_vcr.sniff(packed[:2] + b"\xff" * 10)
    with pytest.raises(CassetteError, match="not YAML"):
        ruby_vcr.parse(packed[:-10], "c.zz")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"http_interactions: [\n", "c.yml: not YAML: "),
        (b"- a\n", 'not a Ruby VCR cassette: no "http_interactions" list at the top (found a list'),
        (b"hello\n", 'not a Ruby VCR cassette: no "http_interactions" list at the top (found str)'),
        (b"http_interactions: 5\n", '"http_interactions" list at the top (found dict)'),
    ],
)
def test_files_that_are_no_ruby_vcr_cassette(data: bytes, message: str) -> None:
    with pytest.raises(CassetteError, match=r"^c\.yml: ") as caught:
        ruby_vcr.parse(data, "c.yml")
    assert message in str(caught.value)


def test_sniffing_tells_it_from_vcrpy() -> None:
    ruby = cassette(interaction())
    assert ruby_vcr.sniff(ruby)
    assert not vcr.sniff(ruby)
    assert sniff_format(ruby) == "ruby-vcr"
    python = yaml.safe_dump({"interactions": [{"request": {"uri": "x"}}]}).encode()
    assert not ruby_vcr.sniff(python)
    assert sniff_format(python) == "vcr"
    as_json = json.dumps({"recorded_with": "VCR 6", "http_interactions": []}).encode()
    assert ruby_vcr.sniff(as_json)
    # the word in a vcrpy cassette's body is not the key
    said = yaml.safe_dump(
        {"interactions": [{"request": {"uri": "x", "body": "http_interactions: a"}}]}
    ).encode()
    assert not ruby_vcr.sniff(said)


# -- the corpus ---------------------------------------------------------------

REDACTOR = Redactor()


def _files() -> list[str]:
    if not (CORPUS / "MANIFEST.jsonl").is_file():
        return []
    entries = map(json.loads, (CORPUS / "MANIFEST.jsonl").read_text().splitlines())
    return [e["file"] for e in entries if e.get("format") == "ruby_vcr"]


class _Loader(yaml.SafeLoader):
    """The test's own reading of Ruby's ``!binary``."""


def _binary(loader: yaml.SafeLoader, node: Any) -> bytes:
    return base64.b64decode(str(loader.construct_scalar(node)))


_Loader.add_constructor("!binary", _binary)


def _bytes(body: dict[str, Any]) -> bytes:
    if "base64_string" in body:
        return base64.b64decode(body["base64_string"])
    value = body.get("string") or b""
    return value if isinstance(value, bytes) else value.encode()


@pytest.mark.slow
@pytest.mark.skipif(not _files(), reason=NO_CORPUS)
def test_the_corpus_imports_and_replays() -> None:
    counts: Counter[str] = Counter()
    for name in _files():
        data = (CORPUS / name).read_bytes()
        assert sniff_format(data) == "ruby-vcr", name
        report = import_exchanges(ruby_vcr.parse(data, name), tool="ruby-vcr", redactor=REDACTOR)
        assert report.failures == [], name
        counts["files"] += 1
        counts["interactions"] += len(report.interactions)
        counts["placeholder bases"] += sum("placeholder" in n for _, n in report.notes)
        items = yaml.load(data, Loader=_Loader)["http_interactions"]
        assert report.sources == list(range(len(items)))
        cassette = Cassette.loads(report.dumps(), strict=True)
        for item in items:
            req, resp = item["request"], item["response"]
            uri = str(req["uri"])
            target = uri.split(">", 1)[1] if uri.startswith("<") else uri
            headers = [
                (k.encode(), str(v).encode())
                for k, vs in req.get("headers", {}).items()
                if k.lower() in ("content-type", "content-encoding")
                for v in vs
            ]
            request = Request(req["method"], target, tuple(headers), _bytes(req["body"]))
            status, body = replay(cassette, request)
            assert status == resp["status"]["code"], name
            # redacted as a recording is: the request's credential values
            # (placeholders such as <OPENAI_ACCESS_TOKEN> too) scrubbed
            sent = normalize_headers(
                (k, str(v)) for k, vs in req.get("headers", {}).items() for v in vs
            )
            redactor = exchange_redactor(REDACTOR, sent)
            assert body == redactor.data(_bytes(resp["body"])), name
    assert counts == {"files": 105, "interactions": 163, "placeholder bases": 3}
    assert len(_files()) == 105
