"""Llama Stack recordings: SDK objects rebuilt as the HTTP the provider sent."""

from __future__ import annotations

import collections
import json
from typing import Any

import pytest

from reel_core import (
    Cassette,
    CassetteError,
    Redactor,
    Request,
)
from reel_core._formats import Exchange, Skipped, import_exchanges, llamastack, sniff_format
from tests.corpus import CORPUS, NO_CORPUS
from tests.replaying import replay_one as _replay

CHUNK = "openai.types.chat.chat_completion_chunk.ChatCompletionChunk"
COMPLETION = "openai.types.chat.chat_completion.ChatCompletion"
ANSWER = {"id": "rec-1", "object": "chat.completion", "choices": [{"message": {"content": "hé"}}]}
CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}


def sdk(type_: str, data: Any) -> dict[str, Any]:
    return {"__type__": type_, "__data__": data}


def recording(
    body: Any = None,
    *,
    url: str = "https://api.openai.com/v1/v1/chat/completions",
    endpoint: str = "/v1/chat/completions",
    request_body: Any = CHAT,
    streaming: bool = False,
    **response: Any,
) -> bytes:
    doc = {
        "test_id": "tests/x.py::test_y",
        "request": {
            "method": "POST",
            "url": url,
            "headers": {},
            "body": request_body,
            "endpoint": endpoint,
            "model": "gpt-4o",
        },
        "response": {
            "body": sdk(COMPLETION, ANSWER) if body is None else body,
            "is_streaming": streaming,
            **response,
        },
        "id_normalization_mapping": {},
    }
    return json.dumps(doc).encode()


def one(data: bytes) -> Exchange:
    (item,) = llamastack.parse(data, "r.json")
    assert isinstance(item, Exchange), item
    return item


def whole(ex: Exchange) -> bytes:
    assert isinstance(ex.body, bytes)
    return ex.body


def skipped(data: bytes) -> str:
    (item,) = llamastack.parse(data, "r.json")
    assert isinstance(item, Skipped), item
    assert item.source == 0
    return item.reason


def compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def test_a_chat_completion_and_the_doubled_v1() -> None:
    ex = one(recording())
    assert ex.method == "POST"
    assert ex.target == "https://api.openai.com/v1/chat/completions"
    assert ex.request_headers == (("content-type", "application/json"),)
    assert json.loads(ex.request_body) == CHAT
    assert ex.status == 200
    assert ex.response_headers == (("content-type", "application/json"),)
    assert ex.body == compact(ANSWER)
    assert ex.notes == (
        "the recorder joined the SDK's base URL and /v1/chat/completions: the path "
        "/v1/v1/chat/completions is stored as /v1/chat/completions",
    )


@pytest.mark.parametrize(
    ("url", "endpoint", "target"),
    [
        (
            "https://x.openai.azure.com/openai/v1/v1/chat/completions",
            "/v1/chat/completions",
            "https://x.openai.azure.com/openai/v1/chat/completions",
        ),
        (
            "https://generativelanguage.googleapis.com/v1beta/openai/v1/chat/completions",
            "/v1/chat/completions",
            "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions",
        ),
        # the first generation: the real path, nothing to fix
        ("http://localhost:11434/v1/chat/completions", "/chat/completions", None),
        ("http://localhost:8080/v1/chat/completions", "/v1/chat/completions", None),
        ("http://localhost:8080/other/path", "/v1/chat/completions", None),
    ],
)
def test_paths(url: str, endpoint: str, target: str | None) -> None:
    ex = one(recording(url=url, endpoint=endpoint))
    assert ex.target == (target or url)
    assert bool(ex.notes) == (target is not None)


def test_a_stream_is_the_sse_the_provider_sent() -> None:
    chunks = [{"id": "c", "choices": [{"delta": {"content": t}}]} for t in ("a", "b")]
    ex = one(recording([sdk(CHUNK, c) for c in chunks], streaming=True))
    assert ex.response_headers == (("content-type", "text/event-stream"),)
    assert ex.body == b"".join(b"data: " + compact(c) + b"\n\n" for c in chunks) + (
        b"data: [DONE]\n\n"
    )


def test_ollamas_own_api_streams_ndjson() -> None:
    parts = [{"model": "llama", "response": r, "done": d} for r, d in (("Hi", False), ("", True))]
    ex = one(
        recording(
            [sdk("ollama._types.GenerateResponse", p) for p in parts],
            url="http://localhost:11434/api/generate",
            endpoint="/api/generate",
            request_body={"model": "llama", "prompt": "hi"},
            streaming=True,
        )
    )
    assert ex.target == "http://localhost:11434/api/generate"
    assert ex.notes == ()
    assert ex.response_headers == (("content-type", "application/x-ndjson"),)
    assert ex.body == compact(parts[0]) + b"\n" + compact(parts[1]) + b"\n"


@pytest.mark.parametrize("endpoint", ["/api/tags", "/api/ps"])
def test_ollama_listings_are_get_requests(endpoint: str) -> None:
    listing: dict[str, Any] = {"models": []}
    ex = one(
        recording(
            sdk("ollama._types.ListResponse", listing),
            url=f"http://localhost:11434{endpoint}",
            endpoint=endpoint,
            request_body={},
        )
    )
    assert (ex.method, ex.request_body, ex.request_headers) == ("GET", b"", ())
    assert ex.body == compact(listing)
    assert ex.notes == (f"{endpoint} is a GET request (the recorder wrote POST): stored as GET",)


def test_a_model_list_and_its_extra_query() -> None:
    models = [{"id": "m1", "object": "model"}, {"id": "m2", "object": "model"}]
    ex = one(
        recording(
            [sdk("openai.types.model.Model", m) for m in models],
            url="https://us-south.ml.cloud.ibm.com/ml/v1/v1/models?a=1",
            endpoint="/v1/models",
            request_body={"extra_query": {"project_id": "p 1"}},
        )
    )
    assert ex.method == "GET"
    assert ex.target == "https://us-south.ml.cloud.ibm.com/ml/v1/models?a=1&project_id=p+1"
    assert ex.request_body == b""
    assert ex.body == compact({"object": "list", "data": models})
    assert len(ex.notes) == 2


def test_extra_body_and_extra_headers_are_sent_as_the_sdk_sends_them() -> None:
    body = {**CHAT, "extra_body": {"guided_choice": ["joy"]}, "extra_headers": {"X-A": 1}}
    ex = one(recording(request_body=body))
    assert json.loads(ex.request_body) == {**CHAT, "guided_choice": ["joy"]}
    assert ex.request_headers == (("x-a", "1"), ("content-type", "application/json"))


def test_request_headers_and_no_request_body() -> None:
    data = json.loads(recording(request_body=None))
    data["request"]["headers"] = {"X-B": "2"}
    data["request"]["method"] = "post"
    ex = one(json.dumps(data).encode())
    assert (ex.method, ex.request_headers, ex.request_body) == ("POST", (("x-b", "2"),), b"")


def exception(**data: Any) -> bytes:
    return recording(
        body=None,
        is_exception=True,
        exception_data=data,
        exception_message="boom",
    ).replace(b'"body": {"__type__"', b'"x": {"__type__"')


def test_a_recorded_exception_is_the_providers_error_response() -> None:
    inner = {"message": "Invalid service_tier argument", "type": "invalid_request_error"}
    ex = one(exception(type="BadRequestError", status_code=400, body=inner, message="Error 400"))
    assert ex.status == 400
    assert ex.body == compact({"error": inner})
    assert ex.notes[-1] == (
        "a recorded BadRequestError: stored as an error response, status 400, OpenAI-shaped body"
    )
    whole = {"error": {"message": "x"}, "status": 400}
    assert one(exception(status_code=429, body=whole)).body == compact(whole)


def test_an_exception_without_status_or_body_is_a_500() -> None:
    ex = one(exception(type="APIConnectionError", status_code=None, message="Connection error."))
    assert ex.status == 500
    assert json.loads(whole(ex)) == {
        "error": {
            "message": "Connection error.",
            "type": "APIConnectionError",
            "param": None,
            "code": None,
        }
    }
    assert "status 500 (the exception has no HTTP status)" in ex.notes[-1]
    bare = json.loads(exception())
    bare["response"]["exception_data"] = None
    ex = one(json.dumps(bare).encode())
    assert ex.status == 500
    assert json.loads(whole(ex))["error"]["message"] == "boom"
    assert json.loads(whole(ex))["error"]["type"] == "an exception"
    assert one(exception(status_code=True)).status == 500


def raw(body: Any, streaming: bool = False, payload: Any = CHAT, **response: Any) -> bytes:
    return json.dumps(
        {
            "test_id": "t",
            "request": {
                "test_id": "t",
                "url": "http://0.0.0.0:11434/v1/messages",
                "method": "POST",
                "payload": payload,
            },
            "response": {"body": body, "is_streaming": streaming, **response},
        }
    ).encode()


def test_the_raw_http_generation() -> None:
    ex = one(raw({"type": "message"}, status=200))
    assert (ex.method, ex.target, ex.status) == ("POST", "http://0.0.0.0:11434/v1/messages", 200)
    assert json.loads(ex.request_body) == CHAT
    assert ex.request_headers == (("content-type", "application/json"),)
    assert ex.body == b'{"type":"message"}'
    error = one(raw({"error": {"message": "no"}}, status=400))
    assert (error.status, error.body) == (400, b'{"error":{"message":"no"}}')
    lines = ["event: a", 'data: {"x":1}', "", "event: b", "data: {}", ""]
    stream = one(raw(lines, streaming=True, payload=None))
    assert stream.request_body == b""
    assert stream.request_headers == ()
    assert stream.status == 200
    assert stream.response_headers == (("content-type", "text/event-stream"),)
    assert stream.body == b'event: a\ndata: {"x":1}\n\nevent: b\ndata: {}\n\n'


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (raw(["a", 1], streaming=True), "the streamed response is not a list of SSE lines"),
        (raw("x", streaming=True), "the streamed response is not a list of SSE lines"),
        (raw({}, status="200"), "the response status '200' is not an HTTP status code"),
        (raw({}, status=True), "the response status True is not an HTTP status code"),
        (raw({}, status=42), "the response status 42 is not an HTTP status code"),
        (
            recording({"candidates": []}, url="vertexai:///generate_content"),
            "vertexai:///generate_content is an SDK call, not an HTTP request",
        ),
        (recording({"candidates": []}), "the response body is a google-genai response, not a"),
        (recording([5], streaming=True), "the response body is int, not a serialized SDK"),
        (recording(request_body=[1]), "the request body is a list, not the SDK call's arguments"),
        (recording(request_body={"extra_body": 3}), "the request's extra_body is a int, not a"),
        (recording(url=""), "the request has no url"),
        (recording().replace(b'"POST"', b'"P O"'), "the request method 'P O' is not an HTTP"),
    ],
)
def test_what_cannot_be_imported_is_skipped_with_why(data: bytes, why: str) -> None:
    assert skipped(data).startswith(why)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"{nope", "not a Llama Stack recording: not JSON: "),
        (b"[1]", 'no "request" and "response" objects at the top (found list)'),
        (b'{"request": {}}', 'no "request" and "response" objects at the top (found dict)'),
    ],
)
def test_files_that_are_no_recording(data: bytes, why: str) -> None:
    with pytest.raises(CassetteError, match=r"r\.json") as info:
        llamastack.parse(data, "r.json")
    assert why in str(info.value)


def test_sniff() -> None:
    assert llamastack.sniff(recording())
    assert sniff_format(b"  \n" + recording()) == "llamastack"
    assert not llamastack.sniff(b'{"log": {"entries": [{"request": {}}]}}')
    assert not llamastack.sniff(b"interactions:\n- request: {is_streaming: 1}\n")
    assert sniff_format(b"hello") is None


def test_a_lone_surrogate_is_kept_escaped() -> None:
    ex = one(recording(sdk(COMPLETION, {"content": "\ud800"})))
    assert ex.body == b'{"content":"\\ud800"}'


# -- the corpus ---------------------------------------------------------------

FILES = (
    [
        entry["file"]
        for entry in map(json.loads, (CORPUS / "MANIFEST.jsonl").read_text().splitlines())
        if entry.get("format") == "llamastack"
    ]
    if (CORPUS / "MANIFEST.jsonl").is_file()
    else []
)


def _expected(doc: dict[str, Any]) -> tuple[int, Any]:
    """What the provider sent, read straight from the recording: the status,
    and the JSON body, or the list of streamed JSON items (``"[DONE]"`` for
    the end of an OpenAI stream), or the SSE text."""
    resp = doc["response"]
    body = resp["body"]
    if "payload" in doc["request"]:
        if resp["is_streaming"]:
            return 200, "".join(f"{line}\n" for line in body)
        return resp.get("status", 200), body
    if resp.get("is_exception"):
        data = resp["exception_data"]
        return data["status_code"], {"error": data["body"]}
    if isinstance(body, list):
        items = [item["__data__"] for item in body]
        if not resp["is_streaming"]:
            return 200, {"object": "list", "data": items}
        if doc["request"]["endpoint"].startswith("/api/"):
            return 200, items
        return 200, [*items, "[DONE]"]
    return 200, body["__data__"]


def _decoded(body: bytes, headers: tuple[tuple[str, str], ...]) -> Any:
    kind = dict(headers)["content-type"]
    if kind == "text/event-stream":
        text = body.decode()
        if not text.startswith("data: "):
            return text
        events = [e.removeprefix("data: ") for e in text.split("\n\n") if e]
        return [e if e == "[DONE]" else json.loads(e) for e in events]
    if kind == "application/x-ndjson":
        return [json.loads(line) for line in body.splitlines()]
    return json.loads(body)


@pytest.mark.skipif(not FILES, reason=NO_CORPUS)
def test_every_corpus_recording_imports_and_replays_or_is_refused_with_why() -> None:
    counts: collections.Counter[str] = collections.Counter()
    redactor = Redactor()
    for name in FILES:
        data = (CORPUS / name).read_bytes()
        assert sniff_format(data) == "llamastack", name
        items = llamastack.parse(data, name)
        report = import_exchanges(items, tool="llama-stack", redactor=redactor)
        assert report.total == 1
        (item,) = items
        if isinstance(item, Skipped):
            assert "\n" not in item.reason
            counts["skipped: " + item.reason.split(":")[0]] += 1
            continue
        assert report.failures == [], name
        counts["imported"] += 1
        counts["stream" if item.response_headers[0][1] != "application/json" else "whole"] += 1
        counts["error" if item.status >= 400 else "ok"] += 1
        status, expected = _expected(json.loads(data))
        assert (item.status, _decoded(whole(item), item.response_headers)) == (status, expected)
        (ix,) = report.interactions
        if ix.response.frames:
            assert b"".join(f for _, f in ix.response.frames) == redactor.data(whole(item)), name
        cassette = Cassette.loads(report.dumps(), strict=True)
        request = Request(
            item.method,
            item.target,
            tuple((k.encode(), v.encode()) for k, v in item.request_headers),
            item.request_body,
        )
        assert _replay(cassette, request) == (item.status, redactor.data(whole(item))), name
    assert dict(counts) == {
        "imported": 98,
        "whole": 58,
        "stream": 40,
        "ok": 90,
        "error": 8,
        "skipped: vertexai": 10,
    }
