"""nock recordings (Node.js) as neutral exchanges, then recorded and replayed.

No nock recordings are in the corpus: every rule has a hand-made file here,
shaped as nock 13's recorder (``output_objects: true``) and nockBack write
them, and as older nock versions did (``headers`` objects, ``reply``
statuses, ``port`` fields).
"""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest

from reel_core import (
    Cassette,
    CassetteError,
    Redactor,
    Request,
)
from reel_core._formats import Exchange, Skipped, import_exchanges, nock, sniff_format
from tests.replaying import replay_one as replay

SCOPE = "https://api.openai.com:443"
CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi é"}]}
CHAT_BYTES = b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi \xc3\xa9"}]}'
ANSWER = {"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0}]}
ANSWER_BYTES = b'{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0}]}'
SSE = (
    'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"delta":{"content":"he"}}]}\n\n'
    'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"delta":{"content":"y"}}]}\n\n'
    "data: [DONE]\n\n"
)


def definition(**changes: Any) -> dict[str, Any]:
    item: dict[str, Any] = {
        "scope": SCOPE,
        "method": "POST",
        "path": "/v1/chat/completions",
        "body": CHAT,
        "status": 200,
        "response": ANSWER,
        "rawHeaders": ["Content-Type", "application/json", "x-request-id", "req_1"],
        "responseIsBinary": False,
    }
    item.update(changes)
    return {k: v for k, v in item.items() if v is not ...}


def recording(*items: Any) -> bytes:
    return json.dumps(list(items), indent=4).encode()


def one(*items: Any) -> Exchange:
    (item,) = nock.parse(recording(*items), "t.json")[-1:]
    assert isinstance(item, Exchange), item
    return item


def skipped(item: Any) -> str:
    (out,) = nock.parse(recording(item), "t.json")
    assert isinstance(out, Skipped), out
    return out.reason


def record(data: bytes) -> Cassette:
    report = import_exchanges(nock.parse(data, "t.json"), tool="nock", redactor=Redactor())
    assert report.failures == []
    return Cassette.loads(report.dumps(), strict=True)


JSON_NOTES = (
    "the request body was stored as parsed JSON: re-serialized compact (as JSON.stringify "
    "writes it), not necessarily the bytes sent",
    "the response body was stored as parsed JSON: re-serialized compact (as nock replays "
    "it, with JSON.stringify), not the bytes the server sent",
)


def test_a_definition_becomes_an_exchange() -> None:
    assert one(definition()) == Exchange(
        source=0,
        method="POST",
        target="https://api.openai.com/v1/chat/completions",
        request_headers=(),
        request_body=CHAT_BYTES,
        status=200,
        response_headers=(("content-type", "application/json"), ("x-request-id", "req_1")),
        body=ANSWER_BYTES,
        notes=JSON_NOTES,
    )


def test_it_records_and_replays_with_the_body_a_client_sends() -> None:
    cassette = record(recording(definition()))
    (ix,) = cassette
    assert ix.provider == "openai"
    assert ix.meta["imported"] == "nock"
    spaced = json.dumps(CHAT).encode()  # the same JSON written otherwise: normalized matches
    assert replay(cassette, Request("POST", "/v1/chat/completions", (), spaced)) == (
        200,
        ANSWER_BYTES,
    )


def test_a_string_status_and_text_bodies() -> None:
    ex = one(definition(status="201", body="plain text", response="created"))
    assert (ex.status, ex.request_body, ex.body, ex.notes) == (201, b"plain text", b"created", ())


def test_an_old_reply_field_is_the_status_and_no_status_is_200() -> None:
    assert one(definition(status=..., reply="404", response="nope")).status == 404
    ex = one(definition(status=..., response="ok"))
    assert ex.status == 200
    assert ex.notes == (JSON_NOTES[0], "no status: 200 assumed, as nock replays it")


@pytest.mark.parametrize("status", ["OK", 42, True, {"code": "x"}])
def test_a_status_that_is_none_is_skipped(status: Any) -> None:
    assert skipped(definition(status=status)) == (
        f"the status {status!r} is not an HTTP status code"
    )


def test_a_binary_response_is_hex() -> None:
    png = b"\x89PNG\r\n\x1a\n\x00\xff"
    ex = one(
        definition(
            response=png.hex(),
            responseIsBinary=True,
            rawHeaders=["Content-Type", "image/png"],
        )
    )
    assert ex.body == png
    assert ex.notes == (JSON_NOTES[0],)


def test_a_binary_response_that_is_not_hex_is_skipped() -> None:
    assert skipped(definition(response="xyz", responseIsBinary=True)) == (
        "the binary response is not hex: 'xyz'"
    )
    assert skipped(definition(response={"a": 1}, responseIsBinary=True)) == (
        "the binary response is a JSON object, not a hex string"
    )


def gzip_chunks(data: bytes) -> list[str]:
    packed = gzip.compress(data, mtime=0)
    return [packed[:10].hex(), packed[10:25].hex(), packed[25:].hex()]


def test_gzip_chunks_in_hex_are_joined_and_decoded_on_record() -> None:
    headers = ["Content-Type", "application/json", "Content-Encoding", "gzip"]
    item = definition(response=gzip_chunks(ANSWER_BYTES), rawHeaders=headers)
    ex = one(item)
    assert ex.body == gzip.compress(ANSWER_BYTES, mtime=0)
    assert ("content-encoding", "gzip") in ex.response_headers
    assert ex.notes == (JSON_NOTES[0],)
    cassette = record(recording(item))
    assert replay(cassette, Request("POST", "/v1/chat/completions", (), CHAT_BYTES)) == (
        200,
        ANSWER_BYTES,
    )


def test_hex_chunks_flagged_binary_without_an_encoding_are_joined() -> None:
    ex = one(definition(response=["6869", "21"], responseIsBinary=True, rawHeaders=[]))
    assert ex.body == b"hi!"


def test_a_corrupt_gzip_chunk_list_is_skipped() -> None:
    chunks = gzip_chunks(ANSWER_BYTES)[:2]  # the last chunk lost
    reason = skipped(definition(response=chunks, rawHeaders=["content-encoding", "gzip"]))
    assert reason.startswith("the body is gzip-encoded (content-encoding gzip) but corrupt")
    assert skipped(definition(response=["zz"], rawHeaders=["content-encoding", "gzip"])) == (
        "response chunk 0 is not hex: 'zz'"
    )


def test_a_json_array_of_strings_without_an_encoding_is_json() -> None:
    ex = one(definition(response=["a", "b"]))
    assert ex.body == b'["a","b"]'


def test_an_sse_response_is_text_and_recorded_as_frames() -> None:
    item = definition(
        body={**CHAT, "stream": True},
        response=SSE,
        rawHeaders=["Content-Type", "text/event-stream; charset=utf-8"],
    )
    ex = one(item)
    assert ex.body == SSE.encode()
    (ix,) = record(recording(item))
    assert ix.response.stream == "sse"
    assert len(ix.response.frames) == 3
    assert ix.response.content == SSE.encode()


def test_an_sse_response_without_a_content_type_gets_one() -> None:
    ex = one(definition(response=SSE, rawHeaders=[]))
    assert ex.response_headers == (("content-type", "text/event-stream"),)


@pytest.mark.parametrize(
    ("scope", "target"),
    [
        ("https://api.openai.com:443", "https://api.openai.com/v1/chat/completions"),
        ("https://api.openai.com", "https://api.openai.com/v1/chat/completions"),
        ("http://localhost:80", "http://localhost/v1/chat/completions"),
        ("http://localhost:11434", "http://localhost:11434/v1/chat/completions"),
        ("HTTPS://API.Anthropic.com:8443", "https://api.anthropic.com:8443/v1/chat/completions"),
        ("http://[::1]:8080", "http://[::1]:8080/v1/chat/completions"),
        ("api.openai.com", "http://api.openai.com/v1/chat/completions"),
    ],
)
def test_the_scope_is_the_origin_without_its_default_port(scope: str, target: str) -> None:
    assert one(definition(scope=scope)).target == target


def test_an_old_port_field_joins_a_scope_without_one() -> None:
    assert one(definition(scope="http://localhost", port=8080)).target.startswith(
        "http://localhost:8080/"
    )
    assert one(definition(scope="https://x.test:443", port=1)).target.startswith("https://x.test/")
    assert skipped(definition(scope="http://localhost", port="eighty")) == (
        "the port 'eighty' is not a number"
    )


@pytest.mark.parametrize(
    ("scope", "reason"),
    [
        ("ftp://files.test", "the scope 'ftp://files.test' is not an http(s) origin"),
        ("https://", "the scope 'https://' is not an http(s) origin"),
        ("https://x.test:port", "the scope 'https://x.test:port' has a port that is not a number"),
    ],
)
def test_a_scope_that_is_no_origin_is_skipped(scope: str, reason: str) -> None:
    assert skipped(definition(scope=scope)) == reason


def test_a_path_with_a_query_is_kept_and_matched_by_its_query() -> None:
    item = definition(method="get", path="/v1/models?limit=2&after=m1", body=..., response="{}")
    ex = one(item)
    assert (ex.method, ex.target) == ("GET", "https://api.openai.com/v1/models?limit=2&after=m1")
    assert ex.request_body == b""
    cassette = record(recording(item))
    assert replay(cassette, Request("GET", "/v1/models?after=m1&limit=2", (), b"")) == (200, b"{}")
    assert one(definition(path="v1/models")).target == "https://api.openai.com/v1/models"


def test_recorded_request_headers_are_kept_and_old_headers_objects_read() -> None:
    ex = one(
        definition(
            reqheaders={"authorization": "Bearer sk-test", "x-multi": ["a", "b"]},
            rawHeaders=...,
            headers={"content-type": "application/json", "set-cookie": ["a=1", "b=2"]},
        )
    )
    assert ex.request_headers == (
        ("authorization", "Bearer sk-test"),
        ("x-multi", "a"),
        ("x-multi", "b"),
    )
    assert ex.response_headers == (
        ("content-type", "application/json"),
        ("set-cookie", "a=1"),
        ("set-cookie", "b=2"),
    )


def test_raw_headers_as_an_object_are_read() -> None:
    ex = one(definition(rawHeaders={"Content-Type": "text/plain"}, response="x"))
    assert ex.response_headers == (("content-type", "text/plain"),)


@pytest.mark.parametrize("raw", [["content-type"], "content-type: x", 3])
def test_raw_headers_that_are_not_pairs_are_skipped(raw: Any) -> None:
    assert skipped(definition(rawHeaders=raw)) == (
        "rawHeaders is not a list of names and values in pairs"
    )


def test_request_headers_that_are_not_an_object_are_skipped() -> None:
    assert skipped(definition(reqheaders=["a"])) == (
        "the request headers are a list, not a mapping"
    )


@pytest.mark.parametrize("response", [None, "", 0, False, ...])
def test_a_falsy_response_is_an_empty_body_as_nock_replays_it(response: Any) -> None:
    ex = one(definition(response=response))
    assert ex.body == b""
    assert ex.notes == (JSON_NOTES[0],)


def test_a_json_scalar_and_an_empty_array_are_json() -> None:
    assert one(definition(response=True)).body == b"true"
    assert one(definition(response=[])).body == b"[]"
    assert one(definition(response=1.5)).body == b"1.5"


def test_a_lone_surrogate_in_a_body_survives() -> None:
    data = recording(definition(body="a\ud800b", response=...))
    (ex,) = nock.parse(data, "t.json")
    assert isinstance(ex, Exchange)
    assert ex.request_body == "a\ud800b".encode("utf-8", "surrogatepass")


@pytest.mark.parametrize(
    ("missing", "reason"),
    [
        ("scope", "the definition has no scope: nock could not replay it"),
        ("method", "the definition has no method: nock could not replay it"),
        ("path", "the definition has no path: nock could not replay it"),
    ],
)
def test_a_missing_field_is_skipped_with_the_reason(missing: str, reason: str) -> None:
    items = nock.parse(recording(definition(), definition(**{missing: ...})), "t.json")
    assert isinstance(items[0], Exchange)
    assert items[1] == Skipped(1, reason)


def test_several_missing_fields_are_named_together() -> None:
    assert skipped({"scope": SCOPE, "status": 200}) == (
        "the definition has no method and no path: nock could not replay it"
    )


def test_a_method_that_is_none_is_skipped() -> None:
    assert skipped(definition(method="PO ST")) == "the method 'PO ST' is not an HTTP method"


def test_an_element_that_is_no_object_is_skipped() -> None:
    items = nock.parse(recording(definition(), "nock('x')", 3), "t.json")
    assert items[1:] == [
        Skipped(1, "a definition is a JSON str, not an object"),
        Skipped(2, "a definition is a JSON int, not an object"),
    ]


def test_an_empty_recording_has_no_exchanges() -> None:
    assert nock.parse(b"[]", "t.json") == []


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"{oops", "not a nock recording: not JSON: "),
        (b'{"log": {"entries": []}}', "not a nock recording: the file holds a JSON object, "),
        (b"3", "not a nock recording: the file holds a JSON int, not an array of definitions"),
        (b'[{"a": 1}, 2]', "not a nock recording: no element of the array has a scope, method or "),
        (
            b"[\"nock('https://x').get('/').reply(200)\"]",
            "not a nock recording: no element of the array has a scope, method or path (nock."
            "recorder.rec() without output_objects: true prints JavaScript code",
        ),
    ],
)
def test_a_file_that_is_no_nock_recording_is_refused(data: bytes, reason: str) -> None:
    with pytest.raises(CassetteError) as caught:
        nock.parse(data, "t.json")
    assert caught.value.reason.startswith(reason)
    assert "\n" not in caught.value.reason


def test_sniff_tells_nock_from_the_other_formats() -> None:
    assert sniff_format(recording(definition())) == "nock"
    assert sniff_format(b'  \n[{"scope":"http://x"}]') == "nock"
    har = b'{"log": {"version": "1.2", "entries": [{"scope": 1}]}}'
    assert sniff_format(har) == "har"
    reel = b'{"_meta":{"schema":1}}\n{"scope": 1, "request": {}}\n'
    assert not nock.sniff(reel)
    llamastack = b'{"request": {"scope": 1}, "response": {}, "is_streaming": false}'
    assert sniff_format(llamastack) == "llamastack"
    assert not nock.sniff(b"[1, 2]")
    assert not nock.sniff(b"")
