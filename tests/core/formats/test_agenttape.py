"""AgentTape cassettes: real ones AgentTape writes (YAML and JSON, against the
fake upstream), imported field by field, replayed by the Engine and through the
OpenAI SDK on Reel's transport; hand-made ones for every odd case."""

from __future__ import annotations

import base64
import gzip
import json
import warnings
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import agenttape
import anyio
import httpx
import openai
import pytest
import requests
import yaml
from agenttape.errors import StreamingNotRecordedWarning
from hypothesis import given
from hypothesis import strategies as st

from reel_bindings.sdk import openai_client
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
from reel_core._calls import Call, CallError, CallResult
from reel_core._formats import (
    Bases,
    CallEntry,
    Exchange,
    Skipped,
    import_exchanges,
    sniff_format,
)
from reel_core._formats import agenttape as at
from reel_core._freeze import Freeze
from tests.fakes.upstream import FakeUpstreamThread
from tests.secrets import OPENAI_KEY

GONE = "http://127.0.0.1:9"  # nothing listens: a replay that reached out would fail
HI: Any = [{"role": "user", "content": "hi, café"}]
ASYNC: Any = [{"role": "user", "content": "from an async client"}]
TRAINING = b'{"prompt": "a", "completion": "b"}\n'
JSON = ("content-type", "application/json")


# -- real cassettes, written by AgentTape ------------------------------------------


@dataclass
class Recorded:
    """One run of AgentTape in record mode, and what the calls returned."""

    path: Path
    doc: dict[str, Any]
    results: dict[str, Any]


def _run(path: Path, url: str, fmt: str) -> dict[str, Any]:
    """The calls AgentTape records, through the OpenAI SDK and raw httpx and
    requests; what each returned."""
    client = openai.OpenAI(base_url=url + "/v1", api_key=OPENAI_KEY, max_retries=0)
    out: dict[str, Any] = {}
    with agenttape.use_cassette(path, mode="record", format=fmt):
        # a rate limit, then the same call again (one match_key): a retry
        with pytest.raises(openai.RateLimitError) as limited:
            client.chat.completions.create(
                model="gpt-4o-mini", messages=HI, extra_headers={"x-fake-scenario": "429"}
            )
        out["limited"] = limited.value
        out["chat"] = client.chat.completions.create(model="gpt-4o-mini", messages=HI)
        out["responses"] = client.responses.create(model="gpt-4o-mini", input="hello")
        out["embeddings"] = client.embeddings.create(model="text-embedding-3-small", input="hé")
        out["async"] = anyio.run(_async_chat, url)
        with pytest.warns(StreamingNotRecordedWarning):  # runs live, not written
            stream = client.chat.completions.create(model="gpt-4o-mini", messages=HI, stream=True)
        out["stream"] = [c.model_dump() for c in stream]
        out["upload"] = httpx.post(
            url + "/v1/files", data={"purpose": "fine-tune"}, files={"file": ("t.jsonl", TRAINING)}
        )
        out["httpx"] = httpx.post(
            url + "/v1/chat/completions", json={"model": "gpt-4o-mini", "messages": HI}
        )
        out["gzip"] = httpx.post(
            url + "/v1/chat/completions",
            json={"model": "gpt-4o-mini", "messages": HI},
            headers={"x-fake-scenario": "gzip"},
        )
        out["get"] = httpx.get(url + "/missing?a=1&b=two")
        out["form"] = requests.post(
            url + "/oauth/token", data={"grant_type": "client_credentials", "scope": "a b"}
        )
        out["text"] = requests.post(
            url + "/v1/chat/completions", data="plain", headers={"content-type": "text/plain"}
        )
        with pytest.raises(httpx.ConnectError):
            httpx.get(GONE + "/refused")

        @agenttape.tool
        def add(a: int, b: int) -> int:
            return a + b

        out["tool"] = add(1, 2)
    return out


async def _async_chat(url: str) -> Any:
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key=OPENAI_KEY, max_retries=0)
    async with client:
        return await client.chat.completions.create(model="gpt-4o-mini", messages=ASYNC)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Recorded]:
    folder = tmp_path_factory.mktemp("agenttape")
    runs: dict[str, Recorded] = {}
    with FakeUpstreamThread() as fake, warnings.catch_warnings():
        for fmt in ("yaml", "json"):
            path = folder / f"run.{fmt}"
            results = _run(path, fake.url, fmt)
            text = path.read_text("utf-8")
            doc = json.loads(text) if fmt == "json" else yaml.safe_load(text)
            runs[fmt] = Recorded(path, doc, results)
    return runs


KINDS = [
    ("llm", "chat.completions"),
    ("llm", "chat.completions"),
    ("llm", "responses"),
    ("llm", "embeddings"),
    ("llm", "chat.completions"),
    ("http", "POST"),
    ("http", "POST"),
    ("http", "POST"),
    ("http", "GET"),
    ("http", "POST"),
    ("http", "POST"),
    ("http", "GET"),
    ("tool", None),
]


@pytest.fixture(params=["yaml", "json"])
def run(request: pytest.FixtureRequest, recorded: dict[str, Recorded]) -> Recorded:
    return recorded[request.param]


def _items(run: Recorded) -> list[Exchange | CallEntry | Bases | Skipped]:
    return at.parse(run.path.read_bytes(), str(run.path))


def test_agenttape_wrote_what_the_importer_expects(run: Recorded) -> None:
    """The shape this importer reads is the one AgentTape 0.1.8 writes: the
    stream is not in it, the 429 and its retry share one match_key."""
    interactions = run.doc["interactions"]
    kinds = [
        (ix["kind"], ix["request"].get("endpoint", ix["request"].get("method")))
        for ix in interactions
    ]
    assert kinds == KINDS
    assert interactions[0]["match_key"] == interactions[1]["match_key"]
    assert "error" in interactions[0]
    assert "response" not in interactions[0]
    assert sniff_format(run.path.read_bytes()) == "agenttape"


def test_every_field_of_the_llm_interactions(run: Recorded) -> None:
    items = _items(run)
    source = run.doc["interactions"]
    calls = [(1, "/v1/chat/completions"), (2, "/v1/responses"), (3, "/v1/embeddings")]
    for i, path in [*calls, (4, "/v1/chat/completions")]:
        ex = items[i]
        assert isinstance(ex, Exchange), ex
        ix = source[i]
        arguments = {k: v for k, v in ix["request"].items() if k != "endpoint"}
        if path == "/v1/embeddings":
            arguments["encoding_format"] = "base64"  # what the SDK sent
        assert ex.source == i
        assert (ex.method, ex.target) == ("POST", "https://api.openai.com" + path)
        assert ex.request_headers == (JSON,)
        assert json.loads(ex.request_body) == arguments
        assert (ex.status, ex.response_headers) == (200, (JSON,))
        assert isinstance(ex.body, bytes)
        assert json.loads(ex.body) == ix["response"]
        assert ex.ttfb == ix["latency_ms"] / 1000
        assert ex.timestamp == run.doc["meta"]["freeze"]["base_time"]
        assert ex.notes[0] == (
            f"rebuilt as POST https://api.openai.com{path} (AgentTape keeps the SDK call, "
            "not its URL), the body from its arguments"
        )
    embeddings = items[3]
    assert isinstance(embeddings, Exchange)
    assert embeddings.notes[1:] == (
        '"encoding_format": "base64" added to the request, as the SDK sends it',
    )


def test_a_recorded_sdk_error_is_the_providers_error_response(run: Recorded) -> None:
    ex = _items(run)[0]
    assert isinstance(ex, Exchange)
    error = run.doc["interactions"][0]["error"]
    limited = run.results["limited"]
    assert ex.status == 429 == limited.status_code
    assert isinstance(ex.body, bytes)
    assert json.loads(ex.body) == {"error": error["body"]} == limited.response.json()
    headers = dict(ex.response_headers)
    assert headers["retry-after"] == "1"
    assert headers["content-type"] == "application/json"
    assert "content-length" not in headers  # the body is rebuilt
    assert ex.notes[1] == (
        "a recorded openai.RateLimitError: stored as the error response, status 429, "
        'an OpenAI-shaped {"error": ...} body'
    )


def test_every_field_of_the_http_interactions(run: Recorded) -> None:
    items = _items(run)
    source = run.doc["interactions"]
    wire = {6: run.results["httpx"], 7: run.results["gzip"], 8: run.results["get"]}
    wire.update({9: run.results["form"], 10: run.results["text"]})
    for i, response in wire.items():
        ex = items[i]
        assert isinstance(ex, Exchange), ex
        req = source[i]["request"]
        assert (ex.method, ex.target) == (req["method"], req["url"])
        assert ex.request_headers == tuple((k.lower(), v) for k, v in req["headers"].items())
        assert ex.request_body == (response.request.content if i < 9 else _body(response))
        assert ex.status == response.status_code
        assert ex.body == response.content
        assert ex.response_headers == tuple(
            (k.lower(), v) for k, v in source[i]["response"]["headers"].items()
        )
        assert ex.ttfb == source[i]["latency_ms"] / 1000
        assert ex.notes == ()
    assert items[9].request_body == b"grant_type=client_credentials&scope=a+b"  # type: ignore[union-attr]
    assert items[10].request_body == b"plain"  # type: ignore[union-attr]
    # gzip on the wire: AgentTape kept the body decoded, without its content-encoding
    assert "content-encoding" not in dict(items[7].response_headers)  # type: ignore[union-attr]
    # a multipart upload: AgentTape fixed its boundary in the body and the header alike
    upload = items[5]
    assert isinstance(upload, Exchange)
    assert (upload.method, upload.status) == ("POST", 200)
    assert upload.target == run.doc["interactions"][5]["request"]["url"]
    assert upload.body == run.results["upload"].content
    sent = run.results["upload"].request
    assert upload.request_body == sent.content.replace(
        sent.headers["content-type"].split("boundary=")[1].encode(), b"AGENTTAPE_BOUNDARY"
    )
    assert dict(upload.request_headers)["content-type"] == (
        "multipart/form-data; boundary=AGENTTAPE_BOUNDARY"
    )


def _body(response: requests.Response) -> bytes:
    body = response.request.body
    return body.encode() if isinstance(body, str) else (body or b"")


def test_a_failed_connection_is_skipped_with_why_and_a_tool_call_is_a_call(
    run: Recorded,
) -> None:
    items = _items(run)
    assert items[11] == Skipped(
        11,
        "a recorded httpx.ConnectError with no HTTP response ([Errno 111] Connection refused): "
        "the call failed before an answer came, and Reel replays answers",
    )
    tool = run.doc["interactions"][12]
    assert items[12] == CallEntry(
        12,
        Call("add", {"a": 1, "b": 2}, "tool"),
        CallResult(3),
        tool["latency_ms"],
        run.doc["meta"]["freeze"]["base_time"],
    )
    # and last, not an entry: the frozen values
    freeze = run.doc["meta"]["freeze"]
    assert items[13] == Bases(
        13,
        Freeze(
            clock_us=_as_fromtimestamp(freeze["base_time"]),
            utc_offset=freeze["base_offset"],
            uuid_seed=0,
            uuids=tuple(freeze["uuids"]),  # the ones the SDK drew
            random_seed=freeze["random_seed"],
        ),
    )


def _report_of(run: Recorded) -> Any:
    return import_exchanges(_items(run), tool="agenttape", redactor=Redactor())


def test_the_import_records_every_http_answer_and_its_usage(run: Recorded) -> None:
    report = _report_of(run)
    assert [i for i, _ in report.failures] == [11]
    assert report.sources == [*range(11), 12]
    source = run.doc["interactions"]
    items = _items(run)
    for ix, i in zip(report.interactions, report.sources, strict=True):
        assert ix.meta["imported"] == "agenttape"
        entry = items[i]
        if isinstance(entry, Exchange):
            assert ix.response.status == entry.status
        else:  # the tool call: a call line
            assert isinstance(entry, CallEntry)
            assert ix.call is not None
            assert ix.call.call == entry.call
    chat = report.interactions[1]
    usage = source[1]["usage"]
    assert (chat.meta["tokens_in"], chat.meta["tokens_out"]) == (
        usage["prompt_tokens"],
        usage["completion_tokens"],
    )
    assert chat.meta["ttfb_ms"] == round(source[1]["latency_ms"], 1)
    # the 429 and its retry: one key, numbered in recorded order
    assert report.interactions[0].key == report.interactions[1].key
    assert report.interactions[1].id == report.interactions[0].id + "-2"


def replay_all(cassette: Cassette, requests_: list[Request]) -> list[tuple[int, bytes]]:
    """Each request in turn on one replay session."""
    engine = Engine(cassette, Config(mode=Mode.REPLAY))
    out = []
    for request in requests_:
        engine.receive_request(request)
        events = []
        while not isinstance(event := engine.next_event(), Signal):
            events.append(event)
        assert isinstance(events[0], Replay), events[0]
        head = events[1]
        assert isinstance(head, ResponseHead)
        out.append((head.status, b"".join(e.data for e in events if isinstance(e, Frame))))
        engine.start_next_cycle()
    return out


def test_the_engine_replays_each_in_recorded_order(run: Recorded) -> None:
    report = _report_of(run)
    cassette = Cassette.loads(report.dumps(), strict=True)
    items = [x for x in _items(run) if isinstance(x, Exchange)]
    asked = []
    for ex in items:
        path = "/" + ex.target.split("://", 1)[1].split("/", 1)[1]
        headers = tuple((k.encode(), v.encode()) for k, v in ex.request_headers)
        asked.append(Request(ex.method, path, headers, ex.request_body))
    assert replay_all(cassette, asked) == [(ex.status, ex.body) for ex in items]
    # the same call twice: the 429 first, then the answer
    fresh = Cassette.loads(report.dumps(), strict=True)
    got = replay_all(fresh, asked[:1] * 3)
    assert [status for status, _ in got] == [429, 200, 200]  # then the last again


def test_the_sdk_on_reel_returns_what_agenttape_returned(run: Recorded, tmp_path: Path) -> None:
    cassette = tmp_path / "imported.jsonl"
    cassette.write_bytes(_report_of(run).dumps())
    client = openai_client(
        cassette, mode="replay", timing="fast", base_url=GONE + "/v1", max_retries=0
    )
    with pytest.raises(openai.RateLimitError) as limited:
        client.chat.completions.create(model="gpt-4o-mini", messages=HI)
    assert limited.value.status_code == 429
    assert limited.value.body == run.results["limited"].body
    chat = client.chat.completions.create(model="gpt-4o-mini", messages=HI)
    assert chat.model_dump() == run.results["chat"].model_dump()
    answer = client.responses.create(model="gpt-4o-mini", input="hello")
    assert answer.model_dump() == run.results["responses"].model_dump()
    vectors = client.embeddings.create(model="text-embedding-3-small", input="hé")
    assert vectors.model_dump() == run.results["embeddings"].model_dump()
    from_async = client.chat.completions.create(model="gpt-4o-mini", messages=ASYNC)
    assert from_async.model_dump() == run.results["async"].model_dump()
    # and AgentTape's own replay of its cassette agrees, in the same order
    with agenttape.use_cassette(run.path, mode="none"):
        again = openai.OpenAI(base_url=GONE + "/v1", api_key="unused", max_retries=0)
        with pytest.raises(openai.RateLimitError):
            again.chat.completions.create(model="gpt-4o-mini", messages=HI)
        mirrored = again.chat.completions.create(model="gpt-4o-mini", messages=HI)
    assert chat.model_dump() == mirrored.model_dump()


# -- hand-made files ---------------------------------------------------------------


def cassette(*interactions: Any, **top: Any) -> bytes:
    doc = {"version": "1", "created_at": "2026-01-02T03:04:05", "meta": {}, **top}
    doc["interactions"] = list(interactions)
    return json.dumps(doc).encode()


def http(request: Any = None, response: Any = None, **rest: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"index": 0, "kind": "http", **rest}
    out["request"] = {"method": "GET", "url": "https://x.test/a"} if request is None else request
    if response is not None:
        out["response"] = response
    return out


def llm(request: Any, **rest: Any) -> dict[str, Any]:
    return {"index": 0, "kind": "llm", "boundary": "llm", "request": request, **rest}


def parsed(data: bytes, name: str = "c.json") -> Exchange | CallEntry | Skipped:
    items = [item for item in at.parse(data, name) if not isinstance(item, Bases)]
    (item,) = items
    return item


def one(data: bytes, name: str = "c.json") -> Exchange:
    item = parsed(data, name)
    assert isinstance(item, Exchange), item
    return item


def why(data: bytes, name: str = "c.json") -> str:
    item = parsed(data, name)
    assert isinstance(item, Skipped), item
    return item.reason


OK = {"status_code": 200, "headers": {"Content-Type": "text/plain"}, "text": "ok"}


@pytest.mark.parametrize(
    ("body", "wire"),
    [
        ({"text": "hé"}, "hé".encode()),
        ({"content": "legacy"}, b"legacy"),
        ({"body_b64": base64.b64encode(b"\x00\xff").decode()}, b"\x00\xff"),
        ({"json": {"a": [1, "é"]}}, '{"a": [1, "é"]}'.encode()),
        ({"json": {"a": 1}, "raw_b64": base64.b64encode(b'{"a":1}').decode()}, b'{"a":1}'),
        ({"form": {"k": ["1", "2"], "s": "a b"}}, b"k=1&k=2&s=a+b"),
        ({}, b""),
    ],
)
def test_bodies_as_agenttape_replays_them(body: dict[str, Any], wire: bytes) -> None:
    ex = one(cassette(http({"method": "post", "url": "https://x.test/p?q=1", **body}, OK)))
    assert (ex.method, ex.target, ex.request_body) == ("POST", "https://x.test/p?q=1", wire)
    ex = one(cassette(http(None, {"status_code": 201, "headers": {}, **body})))
    assert (ex.status, ex.body) == (201, wire)


def test_response_headers_repeat_and_lose_their_framing() -> None:
    headers = {"Set-Cookie": ["a=1", "b=2"], "Content-Length": "9", "transfer-encoding": "x"}
    ex = one(cassette(http(None, {"status_code": 200, "headers": headers, "text": "ok"})))
    assert ex.response_headers == (("set-cookie", "a=1"), ("set-cookie", "b=2"))


def test_a_stored_decoded_body_loses_its_content_encoding() -> None:
    headers = {"content-encoding": "gzip", "content-type": "application/json"}
    ex = one(cassette(http(None, {"status_code": 200, "headers": headers, "json": {"a": 1}})))
    assert ex.response_headers == (JSON,)
    assert ex.notes == (
        "content-encoding gzip dropped: the body was stored decoded (it is no gzip data) and "
        "is kept as it is",
    )
    broken = base64.b64encode(gzip.compress(b"x" * 100)[:20]).decode()
    reason = why(cassette(http(None, {"status_code": 200, "headers": headers, "body_b64": broken})))
    assert reason.startswith("the body is gzip-encoded (content-encoding gzip) but corrupt")


def test_an_sse_body_read_whole_is_a_stream() -> None:
    sse = "data: {}\n\ndata: [DONE]\n\n"
    ex = one(cassette(http(None, {"status_code": 200, "text": sse})))
    assert ex.response_headers == (("content-type", "text/event-stream"),)
    report = import_exchanges([ex], tool="agenttape", redactor=Redactor())
    assert report.interactions[0].response.stream == "sse"


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        (
            {"index": 0, "kind": "retrieval", "request": {}, "response": []},
            'a \'retrieval\' interaction names no boundary (no "boundary", no request "name")',
        ),
        (
            {"index": 0, "kind": "memory_write", "boundary": "graph_state", "request": {}},
            "a 'memory_write' interaction (graph_state) has neither a response nor an error "
            "(AgentTape refuses it too)",
        ),
        ("text", "an interaction is a str, not a mapping"),
        (http(), "it has neither a response nor an error (AgentTape refuses it too)"),
        (http([1], OK), "the request is a list, not a mapping"),
        (http({"url": "ftp://x/y"}, OK), "the request url 'ftp://x/y' is not an http(s) URL"),
        (
            http({"url": "https://x/y", "method": "GE T"}, OK),
            "the request method 'GE T' is not an HTTP method",
        ),
        (http(None, "ok"), "the response is a str, not a mapping"),
        (http(None, {"status_code": "x"}), "the response status 'x' is not an HTTP status code"),
        (http(None, {"status_code": 200, "text": 5}), "the response text is a int, not text"),
        (http(None, {"status_code": 200, "body_b64": "@@"}), "the response body_b64 is not base64"),
        (
            http(None, {"status_code": 200, "raw_b64": 1}),
            "the response raw_b64 is a int, not base64 text",
        ),
        (
            http(None, {"status_code": 200, "form": "a=1"}),
            "the response form is a str, not a mapping",
        ),
        (
            http(None, {"status_code": 200, "headers": ["a"]}),
            "the response headers are a list, not a mapping",
        ),
        (
            http(error={"type": "ReadTimeout", "module": "httpx", "message": "timed out"}),
            "a recorded httpx.ReadTimeout with no HTTP response (timed out): the call failed "
            "before an answer came, and Reel replays answers",
        ),
        (http(error="boom"), "the error is a str, not a mapping"),
        (
            llm({"prompts": ["hi"]}, response={}),
            "an llm interaction with no endpoint (recorded from a framework callback): it keeps "
            "no SDK call to rebuild the HTTP request from",
        ),
        (
            llm({"endpoint": "images.generate"}, response={}),
            "the llm endpoint 'images.generate' is not one AgentTape records (chat.completions, "
            "responses, embeddings)",
        ),
        (
            llm({"endpoint": "chat.completions"}, response="hello"),
            "the response is a str, not the SDK object's fields: Reel cannot rebuild its HTTP body",
        ),
    ],
)
def test_entries_that_are_skipped_with_why(entry: Any, reason: str) -> None:
    assert why(cassette(entry)) == reason


def test_an_asset_beside_the_cassette_is_named_with_the_way_out() -> None:
    ref = {"__agenttape_asset__": "sha256:ab12", "encoding": "utf-8", "size": 5000}
    entry = llm({"endpoint": "chat.completions", "messages": [{"content": ref}]}, response={})
    assert why(cassette(entry), "tapes/run.yaml") == (
        "its request refers to the asset sha256:ab12 (5000 bytes), which AgentTape wrote to "
        "run.assets/ beside the cassette: run `agenttape export tapes/run.yaml -o "
        "run.full.json` (it inlines assets) and import that file"
    )
    entry = http(None, {"status_code": 200, "text": {"__agenttape_asset__": "sha256:cd"}})
    assert "its response refers to the asset sha256:cd, which" in why(cassette(entry))
    entry = http(None, {"status_code": 200, "text": {"__agenttape_bytes__": "AAE="}})
    assert why(cassette(entry)) == (
        "its response holds bytes (__agenttape_bytes__), which no HTTP body of an llm or "
        "http interaction carries"
    )


def test_a_yaml_tag_that_builds_an_object_is_skipped() -> None:
    doc = b"version: '1'\ninteractions:\n- kind: http\n  request: !!python/object:x {}\n"
    assert why(doc, "c.yaml") == (
        "it holds a !!python/object:x YAML tag, which Reel does not load (it would build a "
        "Python object)"
    )


def test_a_yaml_alias_inside_its_own_anchor_is_skipped() -> None:
    doc = b"version: '1'\ninteractions:\n- {kind: http, request: &a [*a]}\n"
    assert why(doc, "c.yaml") == (
        "it holds a YAML alias inside its own anchor (data that never ends)"
    )


def test_yaml_data_json_cannot_carry() -> None:
    doc = (
        b"version: '1'\ninteractions:\n- kind: llm\n  request: {endpoint: embeddings, "
        b"input: !binary AAE=}\n  response: {when: 2026-01-02}\n"
    )
    assert why(doc, "c.yaml") == "the request holds a bytes, which JSON cannot carry"
    doc = doc.replace(b"!binary AAE=", b"x")
    ex = one(doc, "c.yaml")
    assert ex.body == b'{"when":"2026-01-02"}'  # an unquoted date stays its text


@pytest.mark.parametrize(
    ("error", "status", "body", "said"),
    [
        (
            {"type": "APIConnectionError", "module": "openai", "message": "Connection error."},
            500,
            {
                "error": {
                    "message": "Connection error.",
                    "type": "APIConnectionError",
                    "param": None,
                    "code": None,
                }
            },
            'status 500 assumed (the error has no HTTP status), an OpenAI-shaped {"error": '
            "...} body",
        ),
        (
            {"type": "ValueError", "module": "builtins", "attrs": {"status_code": True}},
            500,
            {"error": {"message": "ValueError", "type": "ValueError", "param": None, "code": None}},
            'status 500 assumed (the error has no HTTP status), an OpenAI-shaped {"error": '
            "...} body",
        ),
        (
            {"type": "BadRequestError", "attrs": {"status_code": 400}, "body": {"error": {"m": 1}}},
            400,
            {"error": {"m": 1}},
            'status 400, an OpenAI-shaped {"error": ...} body',
        ),
    ],
)
def test_llm_errors(error: dict[str, Any], status: int, body: Any, said: str) -> None:
    ex = one(cassette(llm({"endpoint": "chat.completions", "model": "m"}, error=error)))
    assert ex.status == status
    assert ex.response_headers == (JSON,)
    assert isinstance(ex.body, bytes)
    assert json.loads(ex.body) == body
    what = error["type"] if error.get("module") in (None, "builtins") else "openai." + error["type"]
    assert ex.notes[1] == f"a recorded {what}: stored as the error response, {said}"


def test_an_error_with_a_text_body_and_an_http_error_with_a_status() -> None:
    error = {
        "type": "InternalServerError",
        "module": "openai",
        "body": "upstream down",
        "response": {"status_code": 502, "headers": {"Content-Type": "text/html", "x-a": "1"}},
    }
    ex = one(cassette(http(error=error)))
    assert (ex.status, ex.body) == (502, b"upstream down")
    assert ex.response_headers == (("x-a", "1"), ("content-type", "text/plain; charset=utf-8"))
    assert ex.notes == (
        "a recorded openai.InternalServerError: stored as the error response, status 502, "
        "its text body",
    )


@pytest.mark.parametrize(
    ("top", "when"),
    [
        ({"meta": {"freeze": {"base_time": 1700000000.5}}}, 1700000000.5),
        ({"meta": {"freeze": {"base_time": True}}}, None),
        ({"created_at": "2026-01-02T03:04:05+00:00"}, 1767323045.0),
        ({"created_at": "2026-01-02T03:04:05"}, None),  # local time, zone unknown
        ({"created_at": "yesterday"}, None),
        ({"created_at": 5, "meta": "x"}, None),
    ],
)
def test_when_it_was_recorded(top: dict[str, Any], when: float | None) -> None:
    assert one(cassette(http(None, OK), **top)).timestamp == when


def test_a_yaml_timestamp_names_its_zone_or_not() -> None:
    head = b"version: '1'\ninteractions:\n- {kind: http, request: {url: 'http://x/'}, "
    head += b"response: {status_code: 204}}\n"
    assert one(head + b"created_at: 2026-01-02T03:04:05Z\n", "c.yaml").timestamp == 1767323045.0
    assert one(head + b"created_at: 2026-01-02 03:04:05\n", "c.yaml").timestamp is None


@pytest.mark.parametrize(
    ("latency", "ttfb"), [(12.5, 0.0125), (0, 0.0), (-1, None), (True, None), ("5", None)]
)
def test_latency_is_the_time_to_first_byte(latency: Any, ttfb: float | None) -> None:
    assert one(cassette(http(None, OK, latency_ms=latency))).ttfb == ttfb


@pytest.mark.parametrize(
    ("data", "name", "reason"),
    [
        (
            b"[1, 2]",
            "c.json",
            'not an AgentTape cassette: no "interactions" list at the top (found list)',
        ),
        (
            b'{"version": "2", "interactions": []}',
            "c.json",
            "AgentTape cassette schema version '2': Reel reads version 1 only",
        ),
        (
            b"{not json",
            "c.json",
            "not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        ),
    ],
)
def test_files_that_are_not_agenttape_cassettes(data: bytes, name: str, reason: str) -> None:
    with pytest.raises(CassetteError) as caught:
        at.parse(data, name)
    assert caught.value.reason == reason


def test_sniff() -> None:
    assert at.sniff(b"version: '1'\nmeta:\n  agenttape_version: 0.1.8\ninteractions: []\n")
    assert at.sniff(cassette(http(None, OK, match_key="sha256:00")))
    assert not at.sniff(cassette(http(None, OK)))  # no match_key, no agenttape_version
    vcr = b"interactions:\n- request:\n    uri: https://x/\n    method: GET\n"
    assert not at.sniff(vcr)
    assert sniff_format(vcr) == "vcr"


# -- the request as it was called (AgentTape keeps the agent's list, not a copy) ----

WEATHER: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def _agent(client: Any) -> tuple[Any, Any]:
    """A tool-calling loop as the OpenAI docs write it: the assistant's
    message object and the tool's answer appended to one list."""
    messages: Any = [{"role": "user", "content": "Weather in Paris?"}]
    first = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=[WEATHER])
    call = first.choices[0].message
    messages.append(call)
    for tool_call in call.tool_calls or []:
        messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": "sunny"})
    second = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=[WEATHER])
    messages.append({"role": "assistant", "content": second.choices[0].message.content})
    return first, second


def test_an_agent_loop_replays_as_it_was_called(tmp_path: Path) -> None:
    source = tmp_path / "agent.yaml"
    with FakeUpstreamThread() as fake:
        live = openai.OpenAI(base_url=fake.url + "/v1", api_key=OPENAI_KEY, max_retries=0)
        with agenttape.use_cassette(source, mode="record"):
            recorded_first, recorded_second = _agent(live)
    stored = yaml.safe_load(source.read_text("utf-8"))["interactions"]
    # what AgentTape wrote: both calls with the last list, the object as its text
    assert stored[0]["request"]["messages"] == stored[1]["request"]["messages"]
    assert len(stored[0]["request"]["messages"]) == 4
    assert stored[0]["request"]["messages"][1].startswith("ChatCompletionMessage(")
    first, second, bases = _items(Recorded(source, {}, {}))
    assert isinstance(bases, Bases)
    assert isinstance(first, Exchange)
    assert isinstance(second, Exchange)
    assert json.loads(first.request_body)["messages"] == [stored[0]["request"]["messages"][0]]
    assert first.notes[1:] == (
        "the request holds the first 1 of the 4 messages stored: AgentTape kept the agent's "
        "list, which grew after this call (the match_key proves it)",
    )
    sent = json.loads(second.request_body)["messages"]
    assert sent[1] == stored[0]["response"]["choices"][0]["message"]
    assert len(sent) == 3
    assert second.notes[1:] == (
        "messages[1] was stored as the Python text of the object passed: it is the answer of "
        "interaction 0, as the match_key proves",
        "the request holds the first 3 of the 4 messages stored: AgentTape kept the agent's "
        "list, which grew after this call (the match_key proves it)",
    )
    cassette = tmp_path / "agent.jsonl"
    cassette.write_bytes(
        import_exchanges([first, second], tool="agenttape", redactor=Redactor()).dumps()
    )
    client = openai_client(
        cassette, mode="replay", timing="fast", base_url=GONE + "/v1", max_retries=0
    )
    again_first, again_second = _agent(client)
    assert again_first.model_dump() == recorded_first.model_dump()
    assert again_second.model_dump() == recorded_second.model_dump()


@pytest.mark.parametrize(
    "request_",
    [
        {"endpoint": "chat.completions", "model": "m", "messages": [{"content": "é"}]},
        {"endpoint": "x", "created": 1, "Nonce": "n", "raw_b64": "AA==", "a": {"date": 2}},
        {"url": "https://h/p?timestamp=1&q=2#f", "URL": "https://h/p?a=1", "u": "x?nonce=1"},
        {"url": "https://h/p", "list": [{"trace_id": 1, "b": [1.5, None, True]}]},
    ],
)
def test_match_key_is_agenttapes(request_: dict[str, Any]) -> None:
    from agenttape.canonical import compute_match_key

    assert at.match_key(request_) == compute_match_key(request_)
    assert at.match_key(request_, frozenset()) == compute_match_key(request_, ignore_fields=())


def _called(request: dict[str, Any], key: str, *earlier: Any) -> Exchange | Skipped:
    entries = [*earlier, llm(request, response={"choices": []}, match_key=key)]
    item = at.parse(cassette(*entries), "c.json")[-1]
    assert isinstance(item, (Exchange, Skipped))
    return item


USER = {"role": "user", "content": "hi"}


def test_a_key_of_exact_matching_and_one_of_another_matcher() -> None:
    request = {"endpoint": "chat.completions", "messages": [USER], "timestamp": 5}
    ex = _called(request, at.match_key(request, frozenset()))
    assert isinstance(ex, Exchange)
    assert len(ex.notes) == 1
    assert ex == _called(request, "__ordered__")


def test_a_request_that_does_not_give_its_key_is_noted() -> None:
    request = {"endpoint": "responses", "input": "hello"}
    ex = _called(request, "sha256:00")
    assert isinstance(ex, Exchange)
    assert ex.notes[1:] == (
        "the request as stored does not give its match_key (AgentTape matching settings other "
        "than the defaults, or a request changed after the call): it may not match on replay",
    )


def test_an_objects_text_no_answer_explains_is_skipped() -> None:
    text = "ChatCompletionMessage(content='elsewhere', role='assistant')"
    request = {"endpoint": "chat.completions", "messages": [USER, text]}
    answer = {"message": {"content": "another", "role": "assistant"}}
    earlier = llm({"endpoint": "chat.completions"}, response={"choices": [answer, 5]})
    item = _called(request, "sha256:00", earlier)
    assert item == Skipped(
        1,
        "messages[1] is the Python text of an object (ChatCompletionMessage(content='elsewhere"
        "...), which AgentTape wrote in place of what the agent passed, and no answer in the "
        "cassette gives the match_key: the request that was sent is not stored",
    )


def test_a_responses_input_item_passed_back() -> None:
    output: Any = {"type": "message", "role": "assistant", "content": [{"text": "hé 'x'"}]}
    earlier = [
        {"index": 0, "kind": "tool", "response": 1},
        llm({"endpoint": "responses"}, response={"choices": "x", "output": [output, "y"]}),
        llm({"endpoint": "responses"}, response={"choices": [{"message": 1}]}),
    ]
    called = {"endpoint": "responses", "input": [USER, output]}
    said = "hé 'x'"
    text = f"ResponseOutputMessage(content=[Content(text={said!r})], role='assistant', "
    text += "type='message')"
    request = {"endpoint": "responses", "input": [USER, text, USER]}
    ex = _called(request, at.match_key(called), *earlier)
    assert isinstance(ex, Exchange)
    assert json.loads(ex.request_body)["input"] == [USER, output]
    assert ex.notes[1] == (
        "input[1] was stored as the Python text of the object passed: it is the answer of "
        "interaction 1, as the match_key proves"
    )


def test_a_whole_list_with_an_answer_passed_back_and_a_list_that_gives_no_key() -> None:
    answer = {"role": "assistant", "content": "yes"}
    earlier = llm({"endpoint": "chat.completions"}, response={"choices": [{"message": answer}]})
    text = "ChatCompletionMessage(content='yes', role='assistant')"
    called = {"endpoint": "chat.completions", "messages": [USER, answer]}
    ex = _called({**called, "messages": [USER, text]}, at.match_key(called), earlier)
    assert isinstance(ex, Exchange)
    assert ex.notes[1:] == (
        "messages[1] was stored as the Python text of the object passed: it is the answer of "
        "interaction 0, as the match_key proves",
    )
    ex = _called(called, "sha256:00")
    assert isinstance(ex, Exchange)
    assert ex.notes[1].startswith("the request as stored does not give its match_key")


# -- calls and frozen values ---------------------------------------------------------


def call(kind: str = "tool", **rest: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"index": 0, "kind": kind, "boundary": "lookup"}
    entry["request"] = {"name": "lookup", "args": {"id": "A-1"}}
    return {**entry, **rest}


def a_call(data: bytes) -> CallEntry:
    item = parsed(data)
    assert isinstance(item, CallEntry), item
    return item


@pytest.mark.parametrize("kind", ["tool", "retrieval", "memory_read", "memory_write", "custom"])
def test_every_function_kind_is_a_call(kind: str) -> None:
    entry = a_call(cassette(call(kind, response={"ok": True}, latency_ms=2.5)))
    assert entry.call == Call("lookup", {"id": "A-1"}, kind)
    assert entry.outcome == CallResult({"ok": True})
    assert (entry.total_ms, entry.notes) == (2.5, ())


def test_a_call_named_by_its_request_or_holding_a_request_of_its_own() -> None:
    named = a_call(cassette(call(boundary=None, response=1)))
    assert named.call.name == "lookup"
    own = a_call(cassette(call(request={"query": "q", "top": 3}, response=[])))
    assert own.call.args == {"query": "q", "top": 3}
    assert own.notes == ("the request AgentTape recorded is the call's arguments, whole",)
    dated = a_call(cassette(call(response=[]), name="x").replace(b'"A-1"', b'"A-1"'))
    assert dated.outcome == CallResult([])


def test_a_yaml_date_in_a_call_is_its_iso_text() -> None:
    data = (
        b"version: '1'\ninteractions:\n- {kind: tool, boundary: when, "
        b"request: {name: when, args: {day: 2026-01-02}}, response: 2026-01-03}\n"
    )
    item = parsed(data, "c.yaml")
    assert isinstance(item, CallEntry)
    assert item.call.args == {"day": "2026-01-02"}
    assert item.outcome == CallResult("2026-01-03")


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            {
                "type": "KeyError",
                "module": "builtins",
                "message": "'A-9'",
                "repr": "KeyError('A-9')",
            },
            CallError("KeyError", "builtins", "'A-9'", ("A-9",)),
        ),
        (
            {"type": "Boom", "module": "app.errors", "message": "x", "repr": "Boom()"},
            CallError("Boom", "app.errors", "x", ()),
        ),
        (  # an argument JSON cannot hold, or a repr that is no call: the message alone
            {"type": "E", "module": "m", "message": "s", "repr": "E({1, 2})"},
            CallError("E", "m", "s", None),
        ),
        ({"type": "E", "message": "s", "repr": "E(x=1)"}, CallError("E", "builtins", "s", None)),
        (
            {"type": "E", "message": None, "repr": "<E object>"},
            CallError("E", "builtins", "", None),
        ),
        (
            {"message": "m", "repr": "E('" + "x" * 10_000 + "')"},
            CallError("Exception", "builtins", "m", None),
        ),
    ],
)
def test_a_recorded_exception_is_a_call_error(error: dict[str, Any], expected: CallError) -> None:
    assert a_call(cassette(call(error=error))).outcome == expected


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        (call(request=[1], response=1), "a 'tool' interaction (lookup): the request is a list"),
        (call(error="boom"), "a 'tool' interaction (lookup): the error is a str, not a mapping"),
        (
            call(kind="not a word", response=1),
            "a 'not a word' interaction (lookup): ",
        ),
        (
            call(response=float("nan")),
            "a 'tool' interaction (lookup): the response of a 'tool' interaction (lookup)",
        ),
        (
            call(response={"__agenttape_asset__": "sha256:ab", "size": 9000}),
            "its response refers to the asset sha256:ab (9000 bytes)",
        ),
        (
            {**call(response=1), "request": "!!python/object"},
            "a 'tool' interaction (lookup): the request is a str, not a mapping",
        ),
    ],
)
def test_calls_that_are_skipped_with_why(entry: Any, reason: str) -> None:
    assert why(cassette(entry)).startswith(reason)


def test_a_python_tag_in_a_call_is_skipped() -> None:
    data = (
        b"version: '1'\ninteractions:\n- {kind: tool, boundary: b, request: {name: b, args: {}}, "
        b"response: !!python/object:os.system {}}\n"
    )
    assert "YAML tag" in why(data, "c.yaml")


def test_imported_calls_are_recorded_by_the_call_engine() -> None:
    entries = [
        call(response={"n": 1}, latency_ms=1.0),
        call(response={"n": 2}),  # the same call again: its second recording
        call(
            kind="retrieval", error={"type": "KeyError", "message": "'q'", "repr": "KeyError('q')"}
        ),
    ]
    report = import_exchanges(
        at.parse(cassette(*entries), "c.json"), tool="agenttape", redactor=Redactor()
    )
    first, second, failed = report.interactions
    assert first.key == second.key
    assert second.id == first.id + "-2"
    assert first.call is not None
    assert first.call.outcome == CallResult({"n": 1})
    assert (first.meta["total_ms"], second.meta["total_ms"]) == (1.0, None)
    assert failed.call is not None
    assert failed.call.outcome == CallError("KeyError", "builtins", "'q'", ("q",))
    cassette_ = Cassette.loads(report.dumps(), name="c.jsonl")
    assert [ix.call for ix in cassette_.interactions()] == [first.call, second.call, failed.call]


FROZEN = {
    "features": ["clock", "random", "uuid"],
    "base_time": 1795838400.123456,
    "base_iso": "2026-11-28T04:00:00.123456+00:00",
    "base_offset": 3600,
    "random_seed": 7,
    "uuids": ["0A5D3F3C-0000-4000-8000-000000000001", "not a uuid", 5],
}


@pytest.mark.parametrize(
    ("freeze", "expected"),
    [
        (
            FROZEN,
            Freeze(
                clock_us=1795838400123456,
                utc_offset=3600,
                uuid_seed=0,
                uuids=("0a5d3f3c-0000-4000-8000-000000000001",),
                random_seed=7,
            ),
        ),
        ({"base_time": 10, "base_offset": 99999}, Freeze(clock_us=10_000_000)),
        ({"base_time": 10, "base_offset": True}, Freeze(clock_us=10_000_000)),
        ({"base_time": -1, "random_seed": -1, "uuids": "x"}, None),
        ({"base_time": True, "random_seed": 2**60}, None),
        ({"features": []}, None),
        ("x", None),
    ],
)
def test_the_frozen_values_are_the_cassettes_base_values(
    freeze: Any, expected: Freeze | None
) -> None:
    items = at.parse(cassette(http(None, OK), meta={"freeze": freeze}), "c.json")
    if expected is None:
        assert len(items) == 1
        return
    assert items[1] == Bases(1, expected)
    report = import_exchanges(items, tool="agenttape", redactor=Redactor())
    assert report.total == 1
    assert report.meta.freeze == expected
    assert Cassette.loads(report.dumps(), name="c.jsonl").meta.freeze == expected


def test_several_files_keep_the_first_files_frozen_values() -> None:
    from reel_core._formats import import_sources

    first = cassette(call(response=1), meta={"freeze": {"base_time": 10, "random_seed": 1}})
    second = cassette(call(response=2), meta={"freeze": {"base_time": 20, "uuids": []}})
    report = import_sources("agenttape", [("a.json", first), ("b.json", second)], Redactor())
    assert report.meta.freeze == Freeze(clock_us=10_000_000, uuid_seed=0, random_seed=1)
    # the frozen values are no entry: only the two calls are labelled
    assert sorted(report.labels.values()) == ["a.json: interaction 0", "b.json: interaction 0"]
    assert [report.label(s) for s in report.sources] == sorted(report.labels.values())


def _as_fromtimestamp(base: float) -> int:
    """Microseconds since the epoch of ``base`` as ``datetime.fromtimestamp``
    reads it: what AgentTape's frozen ``now()`` gave."""
    moment = datetime.fromtimestamp(base, timezone.utc)
    return (moment - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1)


@given(st.floats(min_value=0, max_value=253_402_300_799, allow_nan=False))
def test_a_frozen_instant_is_the_one_agenttape_saw(base: float) -> None:
    """Found flaky: ``round(base * 1e6)`` can be a microsecond off the
    ``datetime.now()`` AgentTape's freeze gave (``fromtimestamp`` rounds the
    fraction apart); a replay then asked another question than recorded."""
    bases = at._bases({"meta": {"freeze": {"base_time": base}}})
    assert bases is not None
    assert bases.clock_us == _as_fromtimestamp(base)
