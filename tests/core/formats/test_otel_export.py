"""``reel export otel``: a run's lines as OTLP/JSON spans, read back with the
official ``opentelemetry-proto`` messages through protobuf's JSON mapping,
every attribute and the span tree checked."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reel_core import (
    CallLog,
    Interaction,
    MatchConfig,
    RecordedRequest,
    RecordedResponse,
    StreamCut,
)
from reel_core._formats import EXPORTERS, otel_export
from reel_core._formats.otel_export import Run, export, export_runs, operation
from reel_core._interaction import CALL_RESPONSE, call_request
from reel_core._run import MAX_MS, epoch_ns, line_times
from reel_core.tools import (
    Call,
    CallError,
    CallResult,
    CallStream,
    WebSocketClose,
    WebSocketLog,
    WebSocketMessage,
)
from tests.runs import T0, any_lines, call_line

json_format = pytest.importorskip(
    "google.protobuf.json_format", reason="pip install opentelemetry-proto (in the test extra)"
)
trace_service = pytest.importorskip(
    "opentelemetry.proto.collector.trace.v1.trace_service_pb2",
    reason="pip install opentelemetry-proto (in the test extra)",
)
trace_pb2 = pytest.importorskip(
    "opentelemetry.proto.trace.v1.trace_pb2",
    reason="pip install opentelemetry-proto (in the test extra)",
)

T0_NS = 1_795_924_800_000_000_000
MS = 1_000_000


def line(
    request: RecordedRequest,
    response: RecordedResponse,
    *,
    id: str,
    ts: str | None = T0,
    provider: str = "openai",
    meta: dict[str, Any] | None = None,
    websocket: WebSocketLog | None = None,
) -> Interaction:
    return Interaction(
        key=request.key(MatchConfig()),
        id=id,
        request=request,
        response=response,
        timestamp=ts,
        provider=provider,
        meta=meta or {},
        websocket=websocket,
    )


def at(ms: float) -> str:
    """``T0`` plus ``ms`` (whole ms), as a line's ``ts``."""
    whole = int(ms)
    return f"2026-11-29T04:00:{whole // 1000:02d}.{whole % 1000:03d}Z"


CHAT = RecordedRequest(
    "POST",
    "/v1/chat/completions",
    body=b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}',
)
CHAT_ANSWER = RecordedResponse(
    200,
    (("content-type", "application/json"),),
    body=json.dumps(
        {
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [{"message": {"role": "assistant", "content": "hello"}}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12},
        }
    ).encode(),
)
CLAUDE = RecordedRequest(
    "POST", "/v1/messages", body=b'{"model":"claude-sonnet-4-5","stream":true,"messages":[]}'
)


def sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


CLAUDE_STREAM = RecordedResponse(
    200,
    (("content-type", "text/event-stream"),),
    stream="sse",
    frames=(
        (
            0.0,
            sse(
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "model": "claude-sonnet-4-5-20250929",
                        "usage": {"input_tokens": 20},
                    },
                },
            ),
        ),
        (
            40.0,
            sse(
                "content_block_delta",
                {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "Hi"}},
            ),
        ),
        (90.0, sse("message_delta", {"type": "message_delta", "usage": {"output_tokens": 5}})),
    ),
    end_ms=100.0,
)
VERTEX = RecordedRequest(
    "POST",
    "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent",
    body=b'{"contents":[]}',
)
REALTIME = RecordedRequest("GET", "/v1/realtime", (("model", "gpt-realtime"),))
SESSION = WebSocketLog(
    (
        WebSocketMessage("client", 5.0, b'{"type":"session.update","session":{"x":1}}'),
        WebSocketMessage("server", 20.0, b'{"serverContent":{"turn":"secret words"}}'),
        WebSocketMessage("server", 30.0, b"\x00\x01", binary=True),
        WebSocketMessage("server", 35.0, b"not json"),
        WebSocketMessage(
            "server",
            60.0,
            json.dumps(
                {
                    "type": "response.done",
                    "response": {"usage": {"input_tokens": 7, "output_tokens": 11}},
                }
            ).encode(),
        ),
    ),
    WebSocketClose(1000, "done", "client", 80.0),
)


def agent_run() -> list[Interaction]:
    return [
        line(CHAT, CHAT_ANSWER, id="a1", ts=at(250), meta={"ttfb_ms": 250.0, "total_ms": 300.0}),
        # a tool call stamped when it returned: it ran the 50 ms before
        call_line(
            "lookup_order",
            CallResult({"status": "secret words"}),
            id="t1",
            ts=at(600),
            meta={"total_ms": 50.0},
        ),
        line(
            CLAUDE,
            CLAUDE_STREAM,
            id="b2",
            ts=at(1100),
            provider="anthropic",
            meta={"ttfb_ms": 100.0, "total_ms": 200.0},
        ),
        line(
            VERTEX,
            RecordedResponse(429, body=b'{"error":{"status":"RESOURCE_EXHAUSTED"}}'),
            id="c3",
            ts=at(1500),
            provider="gemini",
            meta={"ttfb_ms": 10.0, "total_ms": 10.0},
        ),
        line(
            RecordedRequest("GET", "/weather", (("city", "Oslo"),)),
            RecordedResponse(200, body=b'{"temp":3}'),
            id="d4",
            ts=at(1600),
            provider="generic",
        ),
        line(
            REALTIME,
            RecordedResponse(101),
            id="e5",
            ts=at(2020),
            meta={"ttfb_ms": 20.0, "total_ms": 80.0},
            websocket=SESSION,
        ),
    ]


# -- the official mapping -----------------------------------------------------------


def parse(data: bytes) -> Any:
    """The file read as OTLP/JSON is read: its hex ids (OTLP's rule, where
    protobuf's own JSON mapping has base64) turned into base64, then
    protobuf's JSON mapping into ``ExportTraceServiceRequest``, refusing any
    field the message does not have."""
    assert data.endswith(b"\n")
    assert data.count(b"\n") == 1  # one line: an OTLP JSON-lines file too
    doc = json.loads(data)
    for resource in doc["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for name in ("traceId", "spanId", "parentSpanId"):
                    if name in span:
                        raw = bytes.fromhex(span[name])
                        assert len(raw) == (16 if name == "traceId" else 8)
                        assert any(raw)
                        span[name] = base64.b64encode(raw).decode()
    message = trace_service.ExportTraceServiceRequest()
    json_format.Parse(json.dumps(doc), message, ignore_unknown_fields=False)
    return message


def value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind)


def attrs(item: Any) -> dict[str, Any]:
    out = {kv.key: value(kv.value) for kv in item.attributes}
    assert len(out) == len(item.attributes)  # no key twice
    return out


def spans_of(message: Any) -> list[Any]:
    (resource,) = message.resource_spans
    (scope,) = resource.scope_spans
    assert scope.scope.name == "reel"
    return list(scope.spans)


def test_an_agent_run_is_a_trace_the_official_mapping_reads() -> None:
    message = parse(export_runs([Run("runs/agent.jsonl", agent_run())]))
    (resource,) = message.resource_spans
    assert attrs(resource.resource) == {"service.name": "reel", "reel.cassette": "runs/agent.jsonl"}
    root, chat, tool, claude, vertex, weather, session = spans_of(message)
    # the tree: one root, every other span its child, one trace
    assert root.parent_span_id == b""
    assert root.name == "run runs/agent.jsonl"
    assert root.kind == trace_pb2.Span.SPAN_KIND_INTERNAL
    assert attrs(root) == {"reel.cassette": "runs/agent.jsonl", "reel.lines": 6}
    children = [chat, tool, claude, vertex, weather, session]
    assert {s.trace_id for s in [root, *children]} == {root.trace_id}
    assert all(s.parent_span_id == root.span_id for s in children)
    assert len({s.span_id for s in [root, *children]}) == 7
    assert tool.kind == trace_pb2.Span.SPAN_KIND_INTERNAL
    assert all(s.kind == trace_pb2.Span.SPAN_KIND_CLIENT for s in children if s is not tool)
    assert (root.start_time_unix_nano, root.end_time_unix_nano) == (T0_NS, T0_NS + 2100 * MS)

    assert chat.name == "chat gpt-4o-mini"
    assert (chat.start_time_unix_nano, chat.end_time_unix_nano) == (T0_NS, T0_NS + 300 * MS)
    assert attrs(chat) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.usage.input_tokens": 9,
        "gen_ai.usage.output_tokens": 3,
        "http.request.method": "POST",
        "url.full": "https://api.openai.com/v1/chat/completions",
        "server.address": "api.openai.com",
        "http.response.status_code": 200,
        "reel.line.id": "a1",
        "reel.ttfb_ms": 250.0,
    }
    assert list(chat.events) == []
    assert chat.status.code == trace_pb2.Status.STATUS_CODE_UNSET

    assert tool.name == "execute_tool lookup_order"
    assert (tool.start_time_unix_nano, tool.end_time_unix_nano) == (
        T0_NS + 550 * MS,
        T0_NS + 600 * MS,
    )
    assert attrs(tool) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup_order",
        "gen_ai.tool.type": "function",
        "reel.call.kind": "tool",
        "reel.line.id": "t1",
    }
    assert (list(tool.events), tool.status.code) == ([], trace_pb2.Status.STATUS_CODE_UNSET)

    assert claude.name == "chat claude-sonnet-4-5"
    start = T0_NS + 1000 * MS
    assert (claude.start_time_unix_nano, claude.end_time_unix_nano) == (start, start + 200 * MS)
    assert attrs(claude) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.system": "anthropic",
        "gen_ai.request.model": "claude-sonnet-4-5",
        "gen_ai.response.model": "claude-sonnet-4-5-20250929",
        "gen_ai.usage.input_tokens": 20,
        "gen_ai.usage.output_tokens": 5,
        "http.request.method": "POST",
        "url.full": "https://api.anthropic.com/v1/messages",
        "server.address": "api.anthropic.com",
        "http.response.status_code": 200,
        "reel.line.id": "b2",
        "reel.ttfb_ms": 100.0,
        "reel.stream": "sse",
        "reel.stream.frames": 3,
    }
    head = start + 100 * MS
    assert [(e.name, e.time_unix_nano, attrs(e)) for e in claude.events] == [
        ("reel.response.head", head, {}),
        ("reel.first_token", head + 40 * MS, {}),
        ("reel.stream.end", head + 100 * MS, {}),
    ]

    # a Gemini call through a Vertex project; a 429 is an error
    assert vertex.name == "generate_content gemini-2.5-flash"
    assert attrs(vertex) == {
        "gen_ai.operation.name": "generate_content",
        "gen_ai.provider.name": "gcp.vertex_ai",
        "gen_ai.system": "gcp.vertex_ai",
        "gen_ai.request.model": "gemini-2.5-flash",
        "http.request.method": "POST",
        "url.full": "https://generativelanguage.googleapis.com" + VERTEX.path,
        "server.address": "generativelanguage.googleapis.com",
        "http.response.status_code": 429,
        "reel.line.id": "c3",
        "reel.ttfb_ms": 10.0,
        "error.type": "429",
    }
    assert (vertex.status.code, vertex.status.message) == (
        trace_pb2.Status.STATUS_CODE_ERROR,
        "429",
    )

    # a tool's own HTTP call: an HTTP span, no gen_ai attribute; no ttfb, no time
    assert weather.name == "GET"
    assert (weather.start_time_unix_nano, weather.end_time_unix_nano) == (
        T0_NS + 1600 * MS,
        T0_NS + 1600 * MS,
    )
    assert attrs(weather) == {
        "http.request.method": "GET",
        "url.full": "http://localhost/weather?city=Oslo",
        "server.address": "localhost",
        "http.response.status_code": 200,
        "reel.line.id": "d4",
    }

    # a realtime session: its messages (types only, never their content) and close
    assert session.name == "realtime gpt-realtime"
    start = T0_NS + 2000 * MS
    assert (session.start_time_unix_nano, session.end_time_unix_nano) == (start, start + 100 * MS)
    assert attrs(session) == {
        "gen_ai.operation.name": "realtime",
        "gen_ai.provider.name": "openai",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-realtime",
        "gen_ai.usage.input_tokens": 7,
        "gen_ai.usage.output_tokens": 11,
        "http.request.method": "GET",
        "url.full": "https://api.openai.com/v1/realtime?model=gpt-realtime",
        "server.address": "api.openai.com",
        "http.response.status_code": 101,
        "reel.line.id": "e5",
        "reel.ttfb_ms": 20.0,
        "reel.stream": "websocket",
        "reel.websocket.messages.client": 1,
        "reel.websocket.messages.server": 4,
        "reel.websocket.close.code": 1000,
        "reel.websocket.close.by": "client",
    }
    head = start + 20 * MS
    assert [(e.name, e.time_unix_nano, attrs(e)) for e in session.events] == [
        (
            "reel.websocket.message",
            head + 5 * MS,
            {
                "reel.websocket.sender": "client",
                "reel.websocket.bytes": 43,
                "reel.websocket.binary": False,
                "reel.websocket.type": "session.update",
            },
        ),
        (
            "reel.websocket.message",
            head + 20 * MS,
            {
                "reel.websocket.sender": "server",
                "reel.websocket.bytes": 41,
                "reel.websocket.binary": False,
                "reel.websocket.type": "serverContent",
            },
        ),
        (
            "reel.websocket.message",
            head + 30 * MS,
            {
                "reel.websocket.sender": "server",
                "reel.websocket.bytes": 2,
                "reel.websocket.binary": True,
            },
        ),
        (
            "reel.websocket.message",
            head + 35 * MS,
            {
                "reel.websocket.sender": "server",
                "reel.websocket.bytes": 8,
                "reel.websocket.binary": False,
            },
        ),
        (
            "reel.websocket.message",
            head + 60 * MS,
            {
                "reel.websocket.sender": "server",
                "reel.websocket.bytes": len(SESSION.messages[4].data),
                "reel.websocket.binary": False,
                "reel.websocket.type": "response.done",
            },
        ),
        (
            "reel.websocket.close",
            head + 80 * MS,
            {"reel.websocket.close.code": 1000, "reel.websocket.close.by": "client"},
        ),
    ]
    assert b"secret words" not in export(agent_run())


def test_a_call_that_raised_or_yielded() -> None:
    raised = call_line(
        "fetch", CallError("ReadTimeout", "httpx", "timed out"), id="r", kind="retrieval"
    )
    builtin = call_line(
        "get", CallError("KeyError", "builtins", "'A-9'"), id="k", kind="memory_read"
    )
    stream = call_line(
        "search",
        CallStream(((1.0, "a"), (2.5, {"b": 1})), 4.0, CallError("ValueError", "builtins", "x")),
        id="s",
        kind="sandbox",
        meta={},
    )
    # in the order they began: the generator ran 4 ms, the others 3
    _, third, first, second = spans_of(parse(export([raised, builtin, stream])))
    assert (first.status.code, first.status.message) == (
        trace_pb2.Status.STATUS_CODE_ERROR,
        "httpx.ReadTimeout",
    )
    assert attrs(first)["gen_ai.tool.type"] == "datastore"
    assert attrs(second)["error.type"] == "KeyError"
    # a kind the conventions have no tool type for; no total_ms: the generator's end
    assert "gen_ai.tool.type" not in attrs(third)
    assert attrs(third)["reel.call.kind"] == "sandbox"
    assert attrs(third)["reel.call.yields"] == 2
    assert attrs(third)["error.type"] == "ValueError"
    start = third.start_time_unix_nano
    assert (start, third.end_time_unix_nano) == (T0_NS - 4 * MS, T0_NS)
    assert [(e.name, e.time_unix_nano - start, attrs(e)) for e in third.events] == [
        ("reel.call.yield", 1 * MS, {"reel.call.index": 0}),
        ("reel.call.yield", 2_500_000, {"reel.call.index": 1}),
    ]
    (no_meta,) = line_times([call_line("f", CallResult(1), id="f", meta={})])
    assert no_meta.start_ns == no_meta.end_ns == T0_NS


def test_a_long_generator_keeps_the_first_values_and_counts_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(otel_export, "MAX_EVENTS", 2)
    stream = CallStream(tuple((float(n), n) for n in range(5)), 5.0)
    _, span = spans_of(parse(export([call_line("gen", stream, id="g")])))
    assert (len(span.events), span.dropped_events_count) == (2, 3)


def test_the_export_is_the_same_every_time_and_ids_follow_the_cassette() -> None:
    lines = agent_run()
    first = export_runs([Run("a.jsonl", lines), Run("b.jsonl", lines)])
    assert first == export_runs([Run("a.jsonl", lines), Run("b.jsonl", lines)])
    a, b = parse(first).resource_spans
    spans_a, spans_b = a.scope_spans[0].spans, b.scope_spans[0].spans
    assert spans_a[0].trace_id != spans_b[0].trace_id
    assert not {s.span_id for s in spans_a} & {s.span_id for s in spans_b}
    # a line's span id is its own: adding a line leaves the others' as they were
    more = export_runs([Run("a.jsonl", [*lines, line(CHAT, CHAT_ANSWER, id="z9")])])
    after = {s.span_id for s in parse(more).resource_spans[0].scope_spans[0].spans}
    assert {s.span_id for s in spans_a} < after


def test_two_lines_with_one_id_get_two_spans() -> None:
    twice = [line(CHAT, CHAT_ANSWER, id="same"), line(CHAT, CHAT_ANSWER, id="same")]
    root, one, two = spans_of(parse(export(twice)))
    assert one.span_id != two.span_id
    assert root.name == "run cassette"


def test_a_cassette_without_lines_has_no_trace() -> None:
    assert json.loads(export_runs([Run("empty.jsonl", []), Run("x", [])])) == {"resourceSpans": []}


def test_a_cut_stream_and_dropped_or_abnormal_sessions_are_errors() -> None:
    cut = RecordedResponse(
        200, stream="chunks", frames=((0.0, b"{"),), cut=StreamCut(12.5, "reset", "peer")
    )
    dropped = WebSocketLog((), WebSocketClose(None, "", "upstream-dropped", 40.0))
    abnormal = WebSocketLog((), WebSocketClose(1011, "boom", "server", 40.0))
    unclosed = WebSocketLog((WebSocketMessage("client", 3.0, b"{}"),))
    ws = RecordedRequest("GET", "/ws/chat")
    lines = [
        line(CHAT, cut, id="cut", meta={"ttfb_ms": None}),
        line(ws, RecordedResponse(101), id="drop", provider="generic", websocket=dropped),
        line(ws, RecordedResponse(101), id="abn", provider="generic", websocket=abnormal),
        line(ws, RecordedResponse(101), id="open", provider="generic", websocket=unclosed),
    ]
    _, cut_span, drop, abn, unclosed_span = spans_of(parse(export(lines)))
    assert cut_span.status.code == trace_pb2.Status.STATUS_CODE_ERROR
    assert attrs(cut_span)["error.type"] == "reset"
    # no ttfb: no head event; the cut 12.5 ms after the head
    assert [(e.name, e.time_unix_nano - T0_NS, attrs(e)) for e in cut_span.events] == [
        ("reel.stream.cut", 12_500_000, {"error.type": "reset"})
    ]
    assert cut_span.end_time_unix_nano - cut_span.start_time_unix_nano == 12_500_000
    assert (drop.name, drop.status.message, attrs(drop)["error.type"]) == (
        "websocket",
        "upstream-dropped",
        "upstream-dropped",
    )
    assert "reel.websocket.close.code" not in attrs(drop)  # none: no close frame
    assert abn.status.message == "1011"
    assert unclosed_span.status.code == trace_pb2.Status.STATUS_CODE_UNSET
    assert [e.name for e in unclosed_span.events] == ["reel.websocket.message"]
    assert unclosed_span.end_time_unix_nano - unclosed_span.start_time_unix_nano == 3 * MS
    assert "gen_ai.operation.name" not in attrs(drop)  # no provider: not an LLM call


def test_a_long_session_keeps_the_first_messages_and_counts_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(otel_export, "MAX_EVENTS", 3)
    log = WebSocketLog(tuple(WebSocketMessage("server", float(n), b"{}") for n in range(5)))
    lines = [line(REALTIME, RecordedResponse(101), id="w", websocket=log)]
    _, span = spans_of(parse(export(lines)))
    assert len(span.events) == 3
    assert span.dropped_events_count == 2


@pytest.mark.parametrize(
    ("path", "provider", "op", "name"),
    [
        ("/v1/chat/completions", "openai", "chat", "openai"),
        ("/v1/responses", "openai", "chat", "openai"),
        ("/v1/completions", "openai", "text_completion", "openai"),
        ("/v1/embeddings", "openai", "embeddings", "openai"),
        ("/v1/complete", "anthropic", "text_completion", "anthropic"),
        (
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
            "gemini",
            "generate_content",
            "gcp.gemini",
        ),
        ("/v1beta/models/text-embedding-004:embedContent", "gemini", "embeddings", "gcp.gemini"),
        (
            "/v1beta/models/text-embedding-004:batchEmbedContents",
            "gemini",
            "embeddings",
            "gcp.gemini",
        ),
        # an OpenAI-compatible server Reel files as generic: its API's family
        ("/llm/v1/chat/completions", "generic", "chat", "openai"),
        # Ollama's own API: no family Reel names, so Reel's own name
        ("/api/chat", "generic", "chat", "generic"),
        ("/api/generate", "generic", "text_completion", "generic"),
        ("/api/embed", "generic", "embeddings", "generic"),
        ("/api/embeddings/", "generic", "embeddings", "generic"),
        # xAI's gRPC chat (xai-sdk), unary and streamed
        ("/xai_api.Chat/GetCompletion", "xai", "chat", "x_ai"),
        ("/xai_api.Chat/GetCompletionChunk", "xai", "chat", "x_ai"),
    ],
)
def test_each_endpoint_has_its_operation(path: str, provider: str, op: str, name: str) -> None:
    ix = line(
        RecordedRequest("POST", path, body=b'{"model":"m"}'), CHAT_ANSWER, id="x", provider=provider
    )
    assert operation(ix) == op
    _, span = spans_of(parse(export([ix])))
    assert (attrs(span)["gen_ai.operation.name"], attrs(span)["gen_ai.provider.name"]) == (op, name)


def test_nothing_but_the_line_an_odd_one_too_goes_in() -> None:
    """Odd strings (a lone surrogate a line's JSON may escape) are written as
    their escapes; counts the line's meta holds win over the response's;
    a span with no model is named by its operation."""
    ix = line(
        RecordedRequest("POST", "/v1/embeddings", body=b"{}"),
        RecordedResponse(200, body=b"{}"),
        id="\ud800x",
        meta={"tokens_in": 4, "tokens_out": True},
    )
    root, span = spans_of(parse(export_runs([Run("\udcff.jsonl", [ix])])))
    assert root.name == "run \\udcff.jsonl"
    assert span.name == "embeddings"
    assert attrs(span)["reel.line.id"] == "\\ud800x"
    assert attrs(span)["gen_ai.usage.input_tokens"] == 4
    assert "gen_ai.usage.output_tokens" not in attrs(span)


def test_times_out_of_range_are_held_to_what_otlp_holds() -> None:
    early = line(CHAT, CHAT_ANSWER, id="e", ts="1960-01-01T00:00:00Z")
    late = line(
        CHAT, CHAT_ANSWER, id="l", ts="9999-12-31T23:59:59.999+00:00", meta={"total_ms": 1e300}
    )
    _, first, second = spans_of(parse(export([early, late])))
    assert first.start_time_unix_nano == 0
    assert second.end_time_unix_nano == 2**64 - 1


def test_a_base_url_names_the_server() -> None:
    ix = line(CHAT, CHAT_ANSWER, id="a")
    _, span = spans_of(parse(export([ix], base_url="http://llm.internal:8080/")))
    assert attrs(span)["url.full"] == "http://llm.internal:8080/v1/chat/completions"
    assert attrs(span)["server.address"] == "llm.internal"
    _, span = spans_of(parse(export([ix], base_url="http://[")))
    assert "server.address" not in attrs(span)


def test_the_registry_lists_it() -> None:
    assert EXPORTERS["otel"] is otel_export
    assert otel_export.SUFFIX == ".otlp.json"


def test_all_zero_ids_are_never_written() -> None:
    assert otel_export._nonzero(bytes(8)) == "01" + "00" * 7
    assert otel_export._nonzero(b"\x00\x02") == "0002"


# -- where a line sits in time --------------------------------------------------------


def test_a_line_began_its_ttfb_before_its_ts_and_ran_its_total() -> None:
    (t,) = line_times(
        [line(CHAT, CHAT_ANSWER, id="a", ts=at(300), meta={"ttfb_ms": 100, "total_ms": 250})]
    )
    assert (t.start_ns, t.end_ns, t.ttfb_ms, t.dated) == (
        T0_NS + 200 * MS,
        T0_NS + 450 * MS,
        100.0,
        True,
    )


def test_what_meta_does_not_say_comes_from_the_line() -> None:
    stream = line(CLAUDE, CLAUDE_STREAM, id="s", meta={"ttfb_ms": 10})
    session = line(REALTIME, RecordedResponse(101), id="w", websocket=SESSION)
    empty = line(REALTIME, RecordedResponse(101), id="v", websocket=WebSocketLog())
    bad = line(CHAT, CHAT_ANSWER, id="b", meta={"ttfb_ms": float("nan"), "total_ms": -1})
    short = line(CHAT, CHAT_ANSWER, id="t", meta={"ttfb_ms": 50, "total_ms": 20})
    s, w, v, b, t = line_times([stream, session, empty, bad, short])
    assert (s.start_ns, s.end_ns) == (T0_NS - 10 * MS, T0_NS + 100 * MS)  # ttfb + the stream's end
    assert (w.start_ns, w.end_ns) == (T0_NS, T0_NS + 80 * MS)  # the close
    assert (v.start_ns, v.end_ns) == (T0_NS, T0_NS)  # nothing held
    assert (b.ttfb_ms, b.end_ns - b.start_ns) == (None, 0)
    assert t.end_ns - t.start_ns == 50 * MS  # a total shorter than its ttfb is the ttfb


def test_undated_lines_follow_the_line_before_them() -> None:
    first = line(CHAT, CHAT_ANSWER, id="u0", ts=None, meta={"total_ms": 5})
    dated = line(CHAT, CHAT_ANSWER, id="d", ts=at(100), meta={"ttfb_ms": 10, "total_ms": 30})
    after = line(CHAT, CHAT_ANSWER, id="u1", ts="not a time", meta={"total_ms": 7})
    naive = line(CHAT, CHAT_ANSWER, id="n", ts="2026-11-29T04:00:01")
    u0, d, u1, n = line_times([first, dated, after, naive])
    assert (u0.start_ns, u0.end_ns, u0.dated) == (T0_NS + 90 * MS, T0_NS + 95 * MS, False)
    assert (d.start_ns, d.end_ns, d.dated) == (T0_NS + 90 * MS, T0_NS + 120 * MS, True)
    assert (u1.start_ns, u1.end_ns, u1.dated) == (T0_NS + 120 * MS, T0_NS + 127 * MS, False)
    assert (n.start_ns, n.dated) == (T0_NS + 1000 * MS, True)  # no zone: UTC
    (alone,) = line_times([line(CHAT, CHAT_ANSWER, id="x", ts=None)])
    assert (alone.start_ns, alone.end_ns) == (0, 0)
    assert epoch_ns(None) is None
    assert MAX_MS == 1e12


# -- the whole family ---------------------------------------------------------------

MARK = "Zq7-content-mark"


@settings(max_examples=60, deadline=None)
@given(any_lines())
def test_any_run_exports_as_a_well_formed_trace(lines: Sequence[Interaction]) -> None:
    """Whatever a cassette holds (HTTP exchanges, sessions, calls; odd ids,
    times, meta, statuses, bodies, messages, outcomes),
    the file parses with the official mapping, every span lies in its
    trace under its root, ends no earlier than it starts, and ids are
    unique."""
    data = export(lines)
    message = parse(data)
    if not lines:
        assert list(message.resource_spans) == []
        return
    root, *children = spans_of(message)
    assert len(children) == len(lines)
    assert all(s.parent_span_id == root.span_id and s.trace_id == root.trace_id for s in children)
    assert len({s.span_id for s in [root, *children]}) == len(lines) + 1
    for span in [root, *children]:
        assert span.start_time_unix_nano <= span.end_time_unix_nano
    for span in children:
        assert root.start_time_unix_nano <= span.start_time_unix_nano
        assert span.end_time_unix_nano <= root.end_time_unix_nano
    starts = [s.start_time_unix_nano for s in children]
    assert starts == sorted(starts)


@st.composite
def conversations(draw: st.DrawFn) -> list[Interaction]:
    """LLM calls of every shape whose prompts, answers, stream frames and
    session messages all hold ``MARK``."""
    said = json.dumps(MARK)
    lines = []
    for n in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(["/v1/chat/completions", "/v1/messages", "/v1/responses"]))
        request = RecordedRequest(
            "POST", path, body=f'{{"model":"m","messages":[{{"content":{said}}}]}}'.encode()
        )
        answer = f'{{"model":"m","choices":[{{"message":{{"content":{said}}}}}]}}'.encode()
        kind = draw(st.sampled_from(["whole", "sse", "cut", "ws", "call"]))
        websocket = None
        if kind == "call":
            outcomes: list[CallResult | CallStream | CallError] = [
                CallResult({"a": MARK}),
                CallStream(((1.0, MARK),), 2.0, CallError("E", "m", MARK, (MARK,))),
                CallError("KeyError", "builtins", MARK, (MARK,)),
            ]
            log = CallLog(
                Call("lookup", {"q": MARK}),
                draw(st.sampled_from(outcomes)),
            )
            request = call_request(log.call)
            lines.append(
                Interaction(
                    key=request.key(MatchConfig()),
                    id=f"i{n}",
                    request=request,
                    response=CALL_RESPONSE,
                    call=log,
                )
            )
            continue
        if kind == "whole":
            response = RecordedResponse(draw(st.sampled_from([200, 500])), body=answer)
        elif kind == "ws":
            request = RecordedRequest("GET", "/v1/realtime", (("model", "m"),))
            response = RecordedResponse(101)
            message = f'{{"type":"response.text.delta","delta":{said}}}'.encode()
            websocket = WebSocketLog(
                (
                    WebSocketMessage("server", 1.0, message),
                    WebSocketMessage("client", 2.0, message),
                ),
                WebSocketClose(1000, MARK, "client", 3.0),
            )
        else:
            frames = ((0.0, b"data: " + answer + b"\n\n"),)
            cut = StreamCut(5.0, "reset", MARK) if kind == "cut" else None
            response = RecordedResponse(200, stream="sse", frames=frames, end_ms=4.0, cut=cut)
        lines.append(line(request, response, id=f"i{n}", websocket=websocket))
    return lines


@settings(max_examples=60, deadline=None)
@given(conversations())
def test_no_content_leaves_only_names_counts_and_times(lines: Sequence[Interaction]) -> None:
    """What was said (prompts, answers, frames, messages, a cut's detail, a
    close's reason, a tool's arguments, result, values and error message)
    never goes into the export: the class of leak a trace
    backend would keep beyond the cassette's own redaction."""
    assert MARK.encode() not in export(lines)


def test_a_lone_surrogate_in_a_query_is_percent_encoded_not_an_error() -> None:
    """Found by the property above: a line's JSON may escape a lone
    surrogate, and every exporter's URL (``_export.url_of``) raised on one."""
    from reel_core._formats import har_export
    from reel_core._formats._export import url_of

    ix = line(RecordedRequest("GET", "/v1/models", (("q", "a\ud800"),)), CHAT_ANSWER, id="q")
    assert url_of(ix, None) == "https://api.openai.com/v1/models?q=a%ED%A0%80"
    (entry,) = json.loads(har_export.export([ix]))["log"]["entries"]
    assert entry["request"]["url"].endswith("?q=a%ED%A0%80")
    _, span = spans_of(parse(export([ix])))
    assert attrs(span)["url.full"].endswith("?q=a%ED%A0%80")
