"""Secrets of every shape, embedded wherever a request or a stream carries
text -- a JSON value, a JSON key, the query, an SSE frame, a JSON document
nested in a string, URL-encoded -- never reach the cassette line, and a live
request still carrying them matches its redacted recording."""

from __future__ import annotations

import json
from urllib.parse import quote

from hypothesis import given
from hypothesis import strategies as st

from reel_core import Cassette, Config, Engine, Mode, Replay, Request, Signal

from .strategies import secrets

CONTEXTS = ("json-value", "json-key", "query", "nested-json", "url-encoded", "sse-frame")


def _shown(kind: str, secret: str) -> str:
    return "Bearer " + secret if kind == "bearer" else secret


def _request(context: str, text: str) -> tuple[Request, bytes]:
    """A chat request carrying ``text`` in ``context``, and the SSE body the
    upstream answers (carrying it in an SSE frame for that context)."""
    target = "/v1/chat/completions"
    content = "hello"
    extra: dict[str, object] = {}
    if context == "json-value":
        content = f"my key: {text}"
    elif context == "json-key":
        extra = {"tags": {text: 1}}
    elif context == "query":
        target += "?token_hint=" + quote(text, safe="")
    elif context == "nested-json":
        content = json.dumps({"config": {"note": f"use {text}"}})
    elif context == "url-encoded":
        content = "callback=https://x.test/?q=" + quote(text, safe="")
    body = {"model": "gpt-4o-mini", "stream": True, **extra}
    body["messages"] = [{"role": "user", "content": content}]
    frame = json.dumps({"choices": [{"delta": {"content": f"echo {text}"}}]})
    sse = b"data: " + (frame.encode() if context == "sse-frame" else b'{"choices":[]}') + b"\n\n"
    return Request("POST", target, (), json.dumps(body).encode()), sse + b"data: [DONE]\n\n"


SALTED_META = b'{"_meta":{"schema":1,"redact":{"salt":"' + b"5a17" * 8 + b'"}}}\n'


@given(st.sampled_from(CONTEXTS), secrets(), st.booleans())
def test_no_secret_reaches_the_line_and_the_live_request_still_matches(
    context: str, drawn: tuple[str, str], salted: bool
) -> None:
    kind, secret = drawn
    request, sse = _request(context, _shown(kind, secret))
    cassette = Cassette.loads(SALTED_META) if salted else Cassette()
    record = Engine(cassette, Config(mode=Mode.RECORD))
    record.receive_request(request)
    record.next_event()
    record.upstream_head(200, [(b"content-type", b"text/event-stream")], mono=0.0)
    record.upstream_data(sse, mono=0.01)
    record.upstream_end(mono=0.02)
    while not isinstance(record.next_event(), Signal):
        pass
    recorded = record.record()
    assert recorded is not None
    line = recorded.line
    text = line.decode()
    for form in {secret, quote(secret, safe=""), json.dumps(secret)[1:-1]}:
        assert form not in text, (context, kind)
    replay = Engine(Cassette.loads(cassette.dumps()), Config(mode=Mode.REPLAY))
    replay.receive_request(request)  # the live request, secret and all
    assert isinstance(replay.next_event(), Replay)
