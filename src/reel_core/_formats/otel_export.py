"""Reel's cassettes as OpenTelemetry traces: OTLP/JSON, for a collector's
``otlpjsonfile`` receiver or anything that reads the OTLP file format.

The file is one ``ExportTraceServiceRequest`` in the OTLP/JSON encoding
(the protobuf JSON mapping with OTLP's own rules: trace and span ids in
hex, enums as integers, 64-bit numbers as strings), written on one line so
that it is also a valid OTLP JSON-lines file.

Each cassette is one run: one trace, its own ``resourceSpans`` entry
(``service.name`` ``reel``, ``reel.cassette`` its name).  A root span
``run NAME`` (INTERNAL) covers the run; under it, in the order they began,
one span per line:

- an LLM call (an HTTP exchange whose path is a known generation,
  completion or embeddings endpoint): a CLIENT span named
  ``{gen_ai.operation.name} {gen_ai.request.model}`` with the GenAI
  semantic conventions' attributes (``gen_ai.provider.name`` and, for
  backends on the conventions before 1.37, the same value as
  ``gen_ai.system``; request and response model, input and output tokens)
  and the HTTP ones (method, ``url.full``, ``server.address``, status);
- any other HTTP exchange: a CLIENT span named by its method;
- a WebSocket session: a CLIENT span (``realtime {model}`` for a provider's
  realtime API), one event per message (at most :data:`MAX_EVENTS`; the
  rest counted in ``droppedEventsCount``) and its close;
- a tool call (a call line): an INTERNAL span ``execute_tool {name}`` with
  ``gen_ai.tool.name``, ``gen_ai.tool.type`` (``function`` for a tool,
  ``datastore`` for a retrieval or a memory read or write) and
  ``reel.call.kind``; a generator's values are events (their offsets, not
  their values); an exception raised is the span's ERROR, its class in
  ``error.type``.

A stream's head, first token and end (or cut) are events of its span.  A
status of 400 or more, a cut stream and a session that ended abnormally
make the span's status ERROR, with ``error.type``.  Times come from
:func:`reel_core.line_times` (the viewer's timeline places lines the
same way).  Ids are derived from the cassette's name and each line's id,
so the same cassette exports the same file: diffable.

Nothing is read but the stored line, which recording already redacted: no
body text, prompt, answer, tool argument or result goes into an attribute,
only names, counts and times (the conventions' content attributes are
opt-in, and not written).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .._body import parse_json
from .._calls import CallError, CallLog, CallStream
from .._interaction import Interaction, WebSocketLog
from .._providers import PROVIDER_HOSTS, endpoint_family, request_model
from .._run import LineTime, line_times, ms_ns
from .._usage import Usage, extract_usage
from .._version import __version__
from .._websocket import websocket_usage
from ._export import url_of

__all__ = [
    "DESCRIPTION",
    "DETAILS",
    "MAX_EVENTS",
    "NAME",
    "SUFFIX",
    "Run",
    "export",
    "export_runs",
    "operation",
]

NAME = "otel"
DESCRIPTION = "OpenTelemetry traces, OTLP/JSON (GenAI semantic conventions)"
DETAILS = (
    "Write OpenTelemetry traces as OTLP/JSON: each cassette one trace, each LLM call, "
    "HTTP exchange and WebSocket session a span with its timing, named and attributed by "
    "the GenAI semantic conventions. Several cassettes go in one file. A collector's "
    "otlpjsonfile receiver reads it."
)
SUFFIX = ".otlp.json"

#: Events of one WebSocket session's span (its messages); the rest are
#: counted in the span's ``droppedEventsCount``.
MAX_EVENTS = 1000

# SpanKind and StatusCode of opentelemetry/proto/trace/v1/trace.proto
_INTERNAL, _CLIENT = 1, 3
_ERROR = 2

#: A path's ending and the ``gen_ai.operation.name`` of a call to it, the
#: first that matches (``/chat/completions`` before ``/completions``).
_OPERATIONS = (
    ("/chat/completions", "chat"),
    ("/responses", "chat"),
    ("/messages", "chat"),
    ("/api/chat", "chat"),
    ("/completions", "text_completion"),
    ("/complete", "text_completion"),
    ("/api/generate", "text_completion"),
    ("/embeddings", "embeddings"),
    ("/api/embed", "embeddings"),
    ("/api/embeddings", "embeddings"),
    (":generateContent", "generate_content"),
    (":streamGenerateContent", "generate_content"),
    (":embedContent", "embeddings"),
    (":batchEmbedContents", "embeddings"),
    # xAI's gRPC chat (xai-sdk): a unary and a server-streaming call
    ("/xai_api.Chat/GetCompletion", "chat"),
    ("/xai_api.Chat/GetCompletionChunk", "chat"),
)
#: A session's operation: the conventions name none for a realtime API.
_REALTIME = "realtime"

#: A call's kind as the conventions' ``gen_ai.tool.type`` (no other kind
#: has one).
_TOOL_TYPES = {
    "tool": "function",
    "retrieval": "datastore",
    "memory_read": "datastore",
    "memory_write": "datastore",
}

#: Reel's provider names as the conventions' ``gen_ai.provider.name``.
_PROVIDER_NAMES = {
    "openai": "openai",
    "anthropic": "anthropic",
    "gemini": "gcp.gemini",
    "xai": "x_ai",
}


@dataclass(frozen=True)
class Run:
    """One cassette to export: its name (its trace's seed) and its lines."""

    name: str
    interactions: Sequence[Interaction]


def export(interactions: Sequence[Interaction], *, base_url: str | None = None) -> bytes:
    """The OTLP/JSON file of one cassette's ``interactions`` (a run named
    ``cassette``: :func:`export_runs` names each)."""
    return export_runs([Run("cassette", interactions)], base_url=base_url)


def export_runs(runs: Sequence[Run], *, base_url: str | None = None) -> bytes:
    """The OTLP/JSON file of ``runs``, one trace each (one with no line
    has none)."""
    resource_spans = []
    for run in runs:
        spans = list(_run_spans(run, base_url))
        if not spans:
            continue
        resource_spans.append(
            {
                "resource": {
                    "attributes": _attributes({"service.name": "reel", "reel.cassette": run.name})
                },
                "scopeSpans": [{"scope": {"name": "reel", "version": __version__}, "spans": spans}],
            }
        )
    doc = {"resourceSpans": resource_spans}
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (text + "\n").encode("utf-8")


def operation(ix: Interaction) -> str | None:
    """The ``gen_ai.operation.name`` of a line: ``realtime`` for a session
    with a known provider, the operation of its path's ending for an HTTP
    exchange (:data:`_OPERATIONS`), else ``None`` (not an LLM call)."""
    if ix.websocket is not None:
        return _REALTIME if ix.provider in _PROVIDER_NAMES else None
    path = ix.request.path.rstrip("/")
    return next((op for end, op in _OPERATIONS if path.endswith(end)), None)


def _provider_name(ix: Interaction) -> str:
    """``gen_ai.provider.name``: Vertex AI's own for a Gemini call through a
    Vertex project; an OpenAI-compatible (or Anthropic-, Gemini-shaped)
    server Reel files under ``generic`` by its API's family; else Reel's
    name for the provider."""
    provider = ix.provider
    if provider == "generic":
        provider = endpoint_family(ix.request.path) or provider
    if provider == "gemini" and "/projects/" in ix.request.path:
        return "gcp.vertex_ai"
    return _PROVIDER_NAMES.get(provider, provider)


# -- ids ------------------------------------------------------------------------


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).digest()


def _nonzero(raw: bytes) -> str:
    """Hex of ``raw``, never all zeros (an invalid id in OTLP)."""
    return raw.hex() if any(raw) else (b"\x01" + raw[1:]).hex()


# -- spans ----------------------------------------------------------------------


def _run_spans(run: Run, base_url: str | None) -> Iterator[dict[str, Any]]:
    lines = list(run.interactions)
    if not lines:
        return
    trace = _nonzero(_digest("reel trace", run.name)[:16])
    root = _nonzero(_digest(trace, "run")[:8])
    times = line_times(lines)
    seen: dict[str, int] = {}
    children = []
    for n, (ix, when) in enumerate(zip(lines, times, strict=True)):
        again = seen.get(ix.id, 0)
        seen[ix.id] = again + 1
        span_id = _nonzero(_digest(trace, "line", ix.id, str(again))[:8])
        span = _line_span(ix, when, base_url)
        children.append(
            (when.start_ns, n, {"traceId": trace, "spanId": span_id, "parentSpanId": root, **span})
        )
    children.sort(key=lambda item: (item[0], item[1]))
    yield {
        "traceId": trace,
        "spanId": root,
        "name": _text(f"run {run.name}"),
        "kind": _INTERNAL,
        "startTimeUnixNano": _nanos(min(t.start_ns for t in times)),
        "endTimeUnixNano": _nanos(max(t.end_ns for t in times)),
        "attributes": _attributes({"reel.cassette": run.name, "reel.lines": len(lines)}),
    }
    for _, _, span in children:
        yield span


def _line_span(ix: Interaction, when: LineTime, base_url: str | None) -> dict[str, Any]:
    if ix.call is not None:
        return _call_span(ix, ix.call, when)
    req, resp = ix.request, ix.response
    url = url_of(ix, base_url)
    op = operation(ix)
    usage = _usage(ix) if op is not None else None
    attributes: dict[str, Any] = {}
    if op is not None and usage is not None:
        requested = _request_model(ix)
        answered = _response_model(ix)
        provider = _provider_name(ix)
        model = requested or answered
        name = f"{op} {model}" if model else op
        attributes.update(
            {
                "gen_ai.operation.name": op,
                "gen_ai.provider.name": provider,
                "gen_ai.system": provider,
                "gen_ai.request.model": requested,
                "gen_ai.response.model": answered,
                "gen_ai.usage.input_tokens": _count(ix.meta, "tokens_in", usage.input_tokens),
                "gen_ai.usage.output_tokens": _count(ix.meta, "tokens_out", usage.output_tokens),
            }
        )
    else:
        name = "websocket" if ix.websocket is not None else req.method
    attributes.update(
        {
            "http.request.method": req.method,
            "url.full": url,
            "server.address": _server(ix, base_url),
            "http.response.status_code": resp.status,
            "reel.line.id": ix.id,
            "reel.ttfb_ms": when.ttfb_ms,
            "reel.stream": "websocket" if ix.websocket is not None else resp.stream,
        }
    )
    head_ns = when.start_ns + _ns(when.ttfb_ms or 0.0)
    events: list[dict[str, Any]] = []
    dropped = 0
    error: str | None = None
    if ix.websocket is not None:
        events, dropped, error = _session(ix.websocket, head_ns, attributes)
    elif resp.stream is not None:
        if when.ttfb_ms is not None:
            events.append(_event(head_ns, "reel.response.head", {}))
        first = usage.first_token_ms if usage is not None else None
        if first is not None:
            events.append(_event(head_ns + _ns(first), "reel.first_token", {}))
        attributes["reel.stream.frames"] = len(resp.frames)
        if resp.cut is not None:
            events.append(
                _event(
                    head_ns + _ns(resp.cut.at_ms), "reel.stream.cut", {"error.type": resp.cut.error}
                )
            )
            error = resp.cut.error
        else:
            events.append(_event(head_ns + _ns(resp.end_ms), "reel.stream.end", {}))
    if resp.status >= 400 and ix.websocket is None:
        error = str(resp.status)
    return _span(name, _CLIENT, when, attributes, events, dropped, error)


def _span(
    name: str,
    kind: int,
    when: LineTime,
    attributes: dict[str, Any],
    events: list[dict[str, Any]],
    dropped: int,
    error: str | None,
) -> dict[str, Any]:
    if error is not None:
        attributes["error.type"] = error
    span: dict[str, Any] = {
        "name": _text(name),
        "kind": kind,
        "startTimeUnixNano": _nanos(when.start_ns),
        "endTimeUnixNano": _nanos(when.end_ns),
        "attributes": _attributes(attributes),
    }
    if events:
        span["events"] = events
    if dropped:
        span["droppedEventsCount"] = dropped
    if error is not None:
        span["status"] = {"code": _ERROR, "message": _text(error)}
    return span


def _call_span(ix: Interaction, log: CallLog, when: LineTime) -> dict[str, Any]:
    """A call's span: its name and kind, its generator's values as events
    (when, never what), and the class of what it raised."""
    call, outcome = log.call, log.outcome
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.type": _TOOL_TYPES.get(call.kind),
        "reel.call.kind": call.kind,
        "reel.line.id": ix.id,
    }
    events: list[dict[str, Any]] = []
    dropped = 0
    error = None
    if isinstance(outcome, CallStream):
        attributes["reel.call.yields"] = len(outcome.items)
        events = [
            _event(when.start_ns + _ns(at), "reel.call.yield", {"reel.call.index": n})
            for n, (at, _) in enumerate(outcome.items[:MAX_EVENTS])
        ]
        dropped = max(len(outcome.items) - MAX_EVENTS, 0)
        if outcome.error is not None:
            error = _error_type(outcome.error)
    elif isinstance(outcome, CallError):
        error = _error_type(outcome)
    return _span(f"execute_tool {call.name}", _INTERNAL, when, attributes, events, dropped, error)


def _error_type(error: CallError) -> str:
    """``error.type`` of an exception: its class, module-qualified unless a
    builtin (``KeyError``, ``httpx.ReadTimeout``)."""
    return error.type if error.module == "builtins" else f"{error.module}.{error.type}"


def _session(
    ws: WebSocketLog, head_ns: int, attributes: dict[str, Any]
) -> tuple[list[dict[str, Any]], int, str | None]:
    """A session's events (its messages, at most :data:`MAX_EVENTS`, and its
    close), how many messages were left out, and its ``error.type`` when it
    ended abnormally (a dropped connection, a close code other than 1000 or
    1001)."""
    senders = [m.sender for m in ws.messages]
    attributes["reel.websocket.messages.client"] = senders.count("client")
    attributes["reel.websocket.messages.server"] = senders.count("server")
    events = []
    for m in ws.messages[:MAX_EVENTS]:
        fields: dict[str, Any] = {
            "reel.websocket.sender": m.sender,
            "reel.websocket.bytes": len(m.data),
            "reel.websocket.binary": m.binary,
        }
        if not m.binary:
            fields["reel.websocket.type"] = _message_type(m.data)
        events.append(_event(head_ns + _ns(m.at_ms), "reel.websocket.message", fields))
    dropped = max(len(ws.messages) - MAX_EVENTS, 0)
    close = ws.close
    if close is None:
        return events, dropped, None
    attributes["reel.websocket.close.code"] = close.code
    attributes["reel.websocket.close.by"] = close.by
    events.append(
        _event(
            head_ns + _ns(close.at_ms),
            "reel.websocket.close",
            {"reel.websocket.close.code": close.code, "reel.websocket.close.by": close.by},
        )
    )
    if close.by.endswith("-dropped"):
        return events, dropped, close.by
    if close.code not in (None, 1000, 1001):
        return events, dropped, str(close.code)
    return events, dropped, None


def _message_type(data: bytes) -> str | None:
    """A text message's JSON ``type`` (OpenAI Realtime) or its one top-level
    key (Gemini Live's ``serverContent``...): a name, never its content."""
    is_json, obj = parse_json(data)
    if not is_json or not isinstance(obj, dict):
        return None
    kind = obj.get("type")
    if isinstance(kind, str):
        return kind
    return next(iter(obj), None) if len(obj) == 1 else None


def _usage(ix: Interaction) -> Usage:
    if ix.websocket is not None:
        return websocket_usage(ix.provider, ix.request.query, ix.websocket)
    return extract_usage(ix.provider, ix.request.path, ix.request.body, ix.response)


def _server(ix: Interaction, base_url: str | None) -> str | None:
    """``server.address``: the host of the URL's base (the path is the
    line's, and may be anything)."""
    base = base_url or PROVIDER_HOSTS.get(ix.provider) or "http://localhost"
    try:
        return urlsplit(base).hostname
    except ValueError:  # a --base-url that is no URL
        return None


def _request_model(ix: Interaction) -> str | None:
    """The model asked for: a session's ``?model=`` or setup message, else
    the body's ``model`` or Gemini's path."""
    req = ix.request
    if ix.websocket is not None:
        client = tuple(m for m in ix.websocket.messages if m.sender == "client")
        return websocket_usage(ix.provider, req.query, WebSocketLog(client)).model
    return request_model(req.path, req.body, ix.provider)


def _response_model(ix: Interaction) -> str | None:
    """The model the response names (not the one asked for)."""
    if ix.websocket is not None:
        server = tuple(m for m in ix.websocket.messages if m.sender == "server")
        return websocket_usage(ix.provider, (), WebSocketLog(server)).model
    return extract_usage(ix.provider, "", b"", ix.response).model


def _count(meta: Mapping[str, Any], key: str, fallback: int | None) -> int | None:
    """A token count the line's ``meta`` holds, else the one read from it."""
    value = meta.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return fallback


# -- the encoding ---------------------------------------------------------------


_ns = ms_ns
#: What a ``fixed64`` time holds.
_LAST_NS = 2**64 - 1


def _nanos(ns: int) -> str:
    """A time as OTLP/JSON writes a ``fixed64``: a string, 0 ... 2**64 - 1 (a
    line dated before 1970 is at 0)."""
    return str(min(max(ns, 0), _LAST_NS))


def _text(value: str) -> str:
    """A string a protobuf ``string`` holds: a lone surrogate (a line's JSON
    may escape one) written as its escape."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def _event(at_ns: int, name: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    event: dict[str, Any] = {"timeUnixNano": _nanos(at_ns), "name": name}
    attributes = _attributes(fields)
    if attributes:
        event["attributes"] = attributes
    return event


def _value(value: Any) -> dict[str, Any] | None:
    """An ``AnyValue`` (``None``: the attribute is left out)."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value} if math.isfinite(value) else None
    if isinstance(value, str):
        return {"stringValue": _text(value)}
    return None


def _attributes(fields: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``KeyValue``s in order, a ``None`` (unknown) value left out."""
    out = []
    for key, value in fields.items():
        encoded = _value(value)
        if encoded is not None:
            out.append({"key": key, "value": encoded})
    return out
