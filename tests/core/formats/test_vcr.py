"""The vcrpy parser, rule by rule (what the CLI tests do not reach)."""

from __future__ import annotations

import gzip
import json
import sys
import zlib
from typing import Any

import pytest

from reel_core import CassetteError, Redactor
from reel_core._formats import Exchange, Skipped
from reel_core._formats._encoding import settle_encoding
from reel_core._formats.vcr import parse, sniff
from reel_core.tools import import_source


def doc(*items: Any) -> bytes:
    return json.dumps({"interactions": list(items)}).encode()


def item(request: Any = None, response: Any = None) -> dict[str, Any]:
    return {
        "request": {"method": "POST", "uri": "https://h/v1/x", "body": "{}"}
        if request is None
        else request,
        "response": {"status": {"code": 200}, "headers": {}, "body": {"string": "ok"}}
        if response is None
        else response,
    }


def only(data: bytes) -> Exchange | Skipped:
    (got,) = parse(data, "c.json")
    return got


def skipped(data: bytes) -> str:
    got = only(data)
    assert isinstance(got, Skipped), got
    return got.reason


def test_sniff() -> None:
    assert sniff(b"interactions:\n- request:\n    uri: https://x\n")
    assert not sniff(b"http_interactions:\n- request:\n    uri: https://x\n")
    assert not sniff(b"{}")


def test_sniff_finds_a_uri_after_a_large_request_body() -> None:
    # crewAI's video and file-upload cassettes: 14 to 40 kB of body before the uri
    body = b"    body: '" + b"A" * 40_000 + b"'\n"
    assert sniff(b"interactions:\n- request:\n" + body + b"    uri: https://x/v1\n")
    assert sniff(b'{"interactions": [{"request": {"body": "' + b"A" * 9000 + b'", "uri": "x"}}]}')
    assert not sniff(b"interactions:\n- request:\n" + body + b"    url: https://x/v1\n")
    assert not sniff(b"interactions:\n- request:\n" + body + b"    body2: security: 1\n")


def test_a_document_without_interactions_is_no_vcrpy_cassette() -> None:
    with pytest.raises(CassetteError, match="found a list"):
        parse(b"[]", "c.json")
    with pytest.raises(CassetteError, match="found dict"):
        parse(b"{}", "c.json")


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ("text", "an interaction is a str, not a mapping"),
        ({"request": {}}, "no request or no response"),
        (item({"method": "GET"}), "the request has no uri"),
        (item({"method": "P0ST", "uri": "/x"}), "the request method 'P0ST' is not an HTTP method"),
        (item({"uri": "/x", "body": 3}), "the request body is a int, not text or bytes"),
        (item(response={"status": 200, "body": {"x": 1}}), 'has no "string" (its keys: x)'),
        (item(response={"status": 200, "body": {}}), "(its keys: none)"),
        (item(response={"status": 200, "body": 3}), "the response body is a int"),
        (item(response={"status": 200, "body": "", "headers": []}), "headers are a list"),
        (item(response={"status": "abc", "body": ""}), "'abc' is not an HTTP status code"),
        (item(response={"status": True, "body": ""}), "True is not an HTTP status code"),
        (
            item(response={"status": 200, "body": "x", "headers": {"content-encoding": "gzip"}}),
            None,
        ),
    ],
)
def test_what_an_entry_cannot_be(entry: Any, reason: str | None) -> None:
    got = only(doc(entry))
    if reason is None:  # a body stored decoded under gzip: kept, the header dropped
        assert isinstance(got, Exchange)
        assert got.response_headers == ()
        assert "content-encoding gzip dropped" in got.notes[0]
        return
    assert isinstance(got, Skipped)
    assert reason in got.reason


def test_bodies_in_every_shape_vcrpy_stored() -> None:
    surrogate = item({"method": "POST", "uri": "/x", "body": {"string": "\ud800"}})
    got = only(doc(surrogate))
    assert isinstance(got, Exchange)
    assert got.request_body == "\ud800".encode("utf-8", "surrogatepass")
    data_body = item({"method": "POST", "uri": "/x", "body": {"a": [1]}})
    got = only(doc(data_body))
    assert isinstance(got, Exchange)
    assert got.request_body == b'{"a": [1]}'
    assert got.notes == ("the request body was YAML data: stored as its JSON",)
    odd_string = item({"method": "POST", "uri": "/x", "body": {"string": 3}})
    got = only(doc(odd_string))
    assert isinstance(got, Exchange)
    assert got.request_body == b'{"string": 3}'
    none_string = item({"method": "GET", "uri": "/x", "body": {"string": None}})
    got = only(doc(none_string))
    assert isinstance(got, Exchange)
    assert got.request_body == b""
    headers = item(
        response={"status": "201", "headers": {"X-A": ["1", None], "x-b": "2"}, "body": None}
    )
    got = only(doc(headers))
    assert isinstance(got, Exchange)
    assert got.status == 201
    assert got.response_headers == (("x-a", "1"), ("x-b", "2"))
    assert got.body == b""


def test_settle_encoding_rules() -> None:
    body = b'{"ok": true}'
    for name, packed in (
        ("gzip", gzip.compress(body)),
        ("deflate", zlib.compress(body)),
        ("deflate", zlib.compress(body)[2:-4]),  # raw deflate, no zlib header
    ):
        headers, notes = settle_encoding((("Content-Encoding", name),), packed)
        assert headers == (("content-encoding", name),)
        assert notes == ()
    with pytest.raises(ValueError, match="truncated gzip body"):
        settle_encoding((("content-encoding", "gzip"),), gzip.compress(body)[:-8])
    with pytest.raises(ValueError, match="corrupt"):
        settle_encoding((("content-encoding", "deflate"),), b"\x78\x9c" + b"\xff" * 10)
    # a coding no Reel reads keeps its header: recording flags it, the import skips it
    headers, notes = settle_encoding((("content-encoding", "compress"),), b"\x1f\x9d..")
    assert headers == (("content-encoding", "compress"),)
    assert notes == ()
    assert settle_encoding((("content-encoding", "compress"),), b"") == (
        (("content-encoding", "compress"),),
        (),
    )
    assert settle_encoding((("content-encoding", "gzip"),), b"") == (
        (("content-encoding", "gzip"),),
        (),
    )
    headers, notes = settle_encoding((), b"data: 1\n\ndata: [DONE]\n\n")
    assert headers == (("content-type", "text/event-stream"),)


def test_settle_br_with_brotli() -> None:
    # Decoding br needs the brotli package (the test extra installs it);
    # without it these bodies are kept encoded (the test below).
    brotli = pytest.importorskip("brotli", reason="pip install brotli (in the test extra)")
    headers, notes = settle_encoding((("content-encoding", "br"),), b'{"a": 1}')
    assert headers == ()  # br has no magic bytes: UTF-8 text was stored decoded
    assert "dropped" in notes[0]
    with pytest.raises(ValueError, match="br-encoded"):
        settle_encoding((("content-encoding", "br"),), b"\xff\xfe\x00garbage")
    packed = brotli.compress(b'{"ok": true}')
    assert settle_encoding((("content-encoding", "br"),), packed)[0] == (
        ("content-encoding", "br"),
    )


def test_settle_br_without_brotli(monkeypatch: pytest.MonkeyPatch) -> None:
    # None in sys.modules makes the import fail, as on a machine without it
    monkeypatch.setitem(sys.modules, "brotli", None)
    monkeypatch.setitem(sys.modules, "brotlicffi", None)
    headers, notes = settle_encoding((("content-encoding", "br"),), b'{"a": 1}')
    assert headers == ()  # br has no magic bytes: UTF-8 text was stored decoded
    assert "dropped" in notes[0]
    # what Reel cannot read keeps its header: recording flags it, the import skips it
    garbage = b"\xff\xfe\x00garbage"
    assert settle_encoding((("content-encoding", "br"),), garbage) == (
        (("content-encoding", "br"),),
        (),
    )


def test_a_header_outside_latin_1_is_escaped_not_lost() -> None:
    data = doc(
        item(response={"status": 200, "headers": {"x-note": "caf\u00e9 \u2603"}, "body": ""})
    )
    report = import_source("vcr", data, "c.json", Redactor())
    assert report.failures == []
