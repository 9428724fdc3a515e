"""Every echo of a credential is scrubbed, in every form.

The invariant (docs/reliability.md, "Every echo of a credential is
scrubbed"): take a credential value the client sent -- in a credential
header, a credential query parameter, a credential field of a form, a
multipart or a JSON body, or of a WebSocket session's first message --
and let the upstream write it back in any spelling of the family
(``tests.property.strategies.ECHO_TRANSFORMS``: as it is, JSON escapes of
any character, percent-encoding in either case, ``+`` for a space, HTML
entities, base64 at any alignment), wherever an answer carries text (a
JSON body, a text body, an SSE frame, NDJSON chunks cut anywhere, a
WebSocket message sent in two fragments, a response header).  Recorded
through the core as the proxy does (``Session``, HTTP/1.1 bytes; for a
WebSocket, ``WebSocketSession`` over wsproto) and as an in-process
binding does (``Engine``), the cassette line it writes holds the value in
no form a reader can decode (``tests.secrets.recoverable``, written apart
from reel_core).
"""

from __future__ import annotations

import base64
import itertools
import json
from typing import Any
from urllib.parse import quote, quote_plus

from hypothesis import assume, given
from hypothesis import strategies as st
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, TextMessage
from wsproto.events import Request as WSRequest

from reel_core import (
    Cassette,
    Config,
    Cut,
    EndOfResponse,
    Engine,
    Forward,
    Frame,
    Mode,
    Request,
    ResponseHead,
    Session,
    Signal,
)
from reel_core.tools import UpstreamHandshake, WebSocketSession
from tests.secrets import recoverable

from .strategies import credential_values, echoes

Headers = list[tuple[bytes, bytes]]

#: How the client sends the credential, over HTTP.
HEADER_SOURCES = (
    "authorization-bearer",
    "authorization-basic",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "cookie",
    "named-header",
)
QUERY_SOURCES = ("query-key", "query-api-key")
BODY_SOURCES = ("form-field", "multipart-field", "json-field", "json-nested")
#: ... and over a WebSocket: its upgrade's headers and query, or its first message.
WEBSOCKET_SOURCES = (*HEADER_SOURCES, *QUERY_SOURCES, "first-message")
#: Where the echo lands in an HTTP answer, and in a WebSocket session.
HTTP_LANDINGS = ("json-body", "text-body", "sse-frame", "ndjson-chunks", "header")
WEBSOCKET_LANDINGS = ("ws-message", "header")
#: A header the settings name as a credential's.
NAMED = "x-gateway-token"
CONFIG = Config(mode=Mode.RECORD, credential_headers=(NAMED,))
BOUNDARY = "b0und4ry"


def _header(source: str, secret: bytes) -> Headers:
    if source == "authorization-bearer":
        return [(b"authorization", b"Bearer " + secret)]
    if source == "authorization-basic":
        return [(b"authorization", b"Basic " + base64.b64encode(b"alice:" + secret))]
    if source == "cookie":
        return [(b"cookie", b"theme=dark; session=" + secret)]
    name = NAMED if source == "named-header" else source
    return [(name.encode(), secret)]


def _sent(source: str, secret: str) -> tuple[str, Headers, bytes]:
    """The query, headers and body an HTTP client sends ``secret`` with."""
    raw = secret.encode()
    if source in HEADER_SOURCES:
        return "", _header(source, raw), b'{"model": "m"}'
    if source in QUERY_SOURCES:
        name = "key" if source == "query-key" else "api-key"
        return f"?{name}={quote(secret, safe='')}", [], b'{"model": "m"}'
    if source == "form-field":
        form = f"grant_type=client_credentials&client_secret={quote_plus(secret)}"
        return "", [(b"content-type", b"application/x-www-form-urlencoded")], form.encode()
    if source == "multipart-field":
        body = (
            (
                f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nx\r\n'
                f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="api_key"\r\n\r\n'
            ).encode()
            + raw
            + f"\r\n--{BOUNDARY}--\r\n".encode()
        )
        kind = f"multipart/form-data; boundary={BOUNDARY}".encode()
        return "", [(b"content-type", kind)], body
    value = {"api_key": secret} if source == "json-field" else {"auth": {"credentials": [secret]}}
    body = json.dumps({"model": "m", **value}).encode()
    return "", [(b"content-type", b"application/json")], body


def _answer(landing: str, echo: str) -> tuple[Headers, bytes]:
    """The head and body of an upstream answer that echoes ``echo``."""
    text = echo.encode()
    request_id = b"req_1"
    if landing == "json-body":
        kind, body = b"application/json", b'{"id": "x", "echo": "' + text + b'"}'
    elif landing == "text-body":
        kind, body = b"text/plain", b"you sent " + text + b" - fine"
    elif landing == "sse-frame":
        kind = b"text/event-stream"
        body = b'data: {"echo":"' + text + b'"}\n\ndata: [DONE]\n\n'
    elif landing == "ndjson-chunks":
        kind, body = b"application/x-ndjson", b'{"n": 1}\n{"echo": "' + text + b'"}\n'
    else:  # a kept response header
        kind, body, request_id = b"application/json", b'{"ok": true}', text
    return [(b"content-type", kind), (b"x-request-id", request_id)], body


def _cut(data: bytes, points: list[int]) -> list[bytes]:
    bounds = [0, *sorted(p % (len(data) + 1) for p in points), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def _respond(
    engine: Engine, headers: Headers, chunks: list[bytes]
) -> list[ResponseHead | Frame | EndOfResponse | Cut]:
    engine.upstream_head(200, headers, mono=1.0, sent_at=0.9, wall=1_700_000_000.0)
    for i, chunk in enumerate(chunks):
        engine.upstream_data(chunk, mono=1.0 + 0.01 * (i + 1))
    engine.upstream_end(mono=2.0)
    events = []
    while not isinstance(event := engine.next_event(), Signal):
        assert isinstance(event, ResponseHead | Frame | EndOfResponse | Cut)
        events.append(event)
    return events


def _proxy_line(
    target: str, headers: Headers, body: bytes, answer: Headers, chunks: list[bytes]
) -> bytes:
    """Record through ``Session`` from HTTP/1.1 bytes, as the proxy does."""
    session = Session(Cassette("c.jsonl"), CONFIG)
    head = b"POST " + target.encode() + b" HTTP/1.1\r\nhost: api.example.test\r\n"
    for name, value in [*headers, (b"content-length", str(len(body)).encode())]:
        head += name + b": " + value + b"\r\n"
    session.receive_data(head + b"\r\n" + body)
    assert isinstance(session.next_event(), Forward)
    for event in _respond(session.engine, answer, chunks):
        session.send(event)
    recorded = session.engine.record()
    assert recorded is not None
    return recorded.line


def _inprocess_line(
    target: str, headers: Headers, body: bytes, answer: Headers, chunks: list[bytes]
) -> bytes:
    """Record through ``Engine`` from a parsed request, as an in-process binding does."""
    engine = Engine(Cassette("c.jsonl"), CONFIG)
    engine.receive_request(Request("POST", target, (*headers, (b"host", b"x.test")), body))
    assert isinstance(engine.next_event(), Forward)
    _respond(engine, answer, chunks)
    recorded = engine.record()
    assert recorded is not None
    return recorded.line


def _websocket_line(source: str, secret: str, landing: str, echo: str, cut: int) -> bytes:
    """Record a WebSocket session through ``Session`` and ``WebSocketSession``
    (wsproto peers in memory), the upstream echoing in its 101 or in a
    message sent in two fragments."""
    target, headers = "/v1/realtime?model=gpt-realtime", []
    first: dict[str, Any] = {"type": "response.create"}
    if source in HEADER_SOURCES:
        headers = _header(source, secret.encode())
    elif source in QUERY_SOURCES:
        target += "&key=" if source == "query-key" else "&api-key="
        target += quote(secret, safe="")
    else:
        first = {"type": "session.update", "session": {"client_secret": {"value": secret}}}
    session = Session(Cassette("ws.jsonl"), CONFIG)
    client, upstream = WSConnection(ConnectionType.CLIENT), WSConnection(ConnectionType.SERVER)
    session.receive_data(client.send(WSRequest("api.openai.com", target, extra_headers=headers)))
    decision = session.next_event()
    assert isinstance(decision, Forward)
    assert decision.websocket
    handshake = UpstreamHandshake(decision.request, "api.openai.com")
    upstream.receive_data(handshake.data)
    list(upstream.events())
    request_id = echo.encode() if landing == "header" else b"req_1"
    answer = handshake.receive_data(
        upstream.send(AcceptConnection(extra_headers=[(b"x-request-id", request_id)]))
    )
    assert answer is not None
    engine = session.engine
    engine.upstream_head(101, answer.headers, mono=10.0, sent_at=9.9)
    engine.upstream_end(mono=10.0)
    upgrade = session.upgrade(decision.request)
    ws = WebSocketSession.relay(engine, upgrade, decision, answer, mono=10.0)
    client.receive_data(ws.start(10.0).to_client)
    out = ws.receive_client(client.send(TextMessage(json.dumps(first))), 10.1)
    upstream.receive_data(out.to_upstream)
    message = '{"type": "echo", "text": "' + (echo if landing == "ws-message" else "hi") + '"}'
    at = cut % (len(message) + 1)
    fragments = upstream.send(TextMessage(message[:at], message_finished=False))
    fragments += upstream.send(TextMessage(message[at:]))
    client.receive_data(ws.receive_upstream(fragments, 10.2).to_client)
    out = ws.receive_client(client.send(CloseConnection(1000, "bye")), 10.3)
    upstream.receive_data(out.to_upstream)
    closing = [e for e in upstream.events() if isinstance(e, CloseConnection)]
    ws.receive_upstream(b"".join(upstream.send(e.response()) for e in closing), 10.4)
    recorded = ws.record()
    assert recorded is not None
    return recorded.line


@st.composite
def _cases(draw: st.DrawFn) -> tuple[str, str, str, str, str, str, list[int]]:
    """A binding, a credential, how it is sent, where and how it is echoed."""
    binding = draw(st.sampled_from(("proxy", "in-process", "websocket")))
    secret = draw(credential_values())
    sources = (
        WEBSOCKET_SOURCES
        if binding == "websocket"
        else (
            *HEADER_SOURCES,
            *QUERY_SOURCES,
            *BODY_SOURCES,
        )
    )
    source = draw(st.sampled_from(sources))
    landing = draw(st.sampled_from(WEBSOCKET_LANDINGS if binding == "websocket" else HTTP_LANDINGS))
    transform, echo = draw(echoes(secret))
    points = draw(st.lists(st.integers(0, 10_000), max_size=4))
    return binding, secret, source, landing, transform, echo, points


@given(_cases())
def test_no_echo_of_a_credential_can_be_read_back_from_the_line(
    case: tuple[str, str, str, str, str, str, list[int]],
) -> None:
    binding, secret, source, landing, transform, echo, points = case
    # a cookie's value ends at ";"; a header value's ends are trimmed
    assume(source != "cookie" or not set(secret) & set(';"'))
    # the oracle reads the echo back from what the upstream sent
    assert recoverable(secret, json.dumps({"sent": echo}).encode()), transform
    if binding == "websocket":
        line = _websocket_line(source, secret, landing, echo, sum(points))
    else:
        target, headers, body = _sent(source, secret)
        answer, whole = _answer(landing, echo)
        record = _proxy_line if binding == "proxy" else _inprocess_line
        line = record("/v1/chat/completions" + target, headers, body, answer, _cut(whole, points))
    assert recoverable(secret, line) == [], (binding, source, landing, transform)
    assert b"[REDACTED:credential]" in line  # the echo was there, and replaced
