"""WebSocket sessions in HAR, both ways: written as DevTools write them
(``_webSocketMessages``), read back as the same session; DevTools' own
entries (ws URLs, absolute times, no close kept) read; and the vcrpy
exporter leaving them out, saying so."""

from __future__ import annotations

import json
from typing import Any

from reel_core import (
    Interaction,
    RecordedRequest,
    RecordedResponse,
    Redactor,
    WebSocketClose,
    WebSocketLog,
    WebSocketMessage,
    export_har,
    import_source,
)
from reel_core._formats import Exchange
from reel_core._formats.har import parse
from reel_core._formats.vcr_export import exportable, losses

SECRET = "ek_opaque_ephemeral_secret_01"


def session(timestamp: str | None, close: WebSocketClose | None) -> Interaction:
    m = WebSocketMessage
    log = WebSocketLog(
        (
            m("client", 5.0, json.dumps({"session": {"client_secret": SECRET}}).encode()),
            m("server", 12.5, b'{"type": "session.created"}'),
            m("client", 20.0, b"\x00\xffpcm", True),
            m("server", 31.25, f"echo {SECRET}".encode()),
        ),
        close,
    )
    return Interaction(
        "sha256:" + "ab" * 32,
        "abababababab",
        RecordedRequest("GET", "/v1/realtime", (("model", "gpt-realtime"),)),
        RecordedResponse(101),
        timestamp=timestamp,
        provider="openai",
        endpoint="GET /v1/realtime",
        websocket=log,
    )


def round_trip(ix: Interaction) -> Interaction:
    report = import_source("har", export_har([ix]), "t.har", Redactor())
    assert report.failures == []
    (back,) = report.interactions
    return back


def test_a_session_round_trips_through_har_redacted_on_the_way_in() -> None:
    close = WebSocketClose(1000, "done", "server", 40.0)
    for timestamp in ("2026-05-04T10:20:30.125Z", None):
        ix = session(timestamp, close)
        doc = json.loads(export_har([ix]))
        (entry,) = doc["log"]["entries"]
        assert [m["type"] for m in entry["_webSocketMessages"]] == [
            "send",
            "receive",
            "send",
            "receive",
        ]
        assert entry["timings"]["receive"] == 40.0
        back = round_trip(ix)
        assert back.websocket is not None
        assert [(m.sender, m.at_ms, m.binary) for m in back.websocket.messages] == [
            (m.sender, m.at_ms, m.binary)
            for m in ix.websocket.messages  # type: ignore[union-attr]
        ]
        assert back.websocket.close == close
        # what an import writes is scrubbed as a recording is: the first
        # message's credential, wherever it comes again
        assert SECRET.encode() not in back.to_line()
        assert back.timestamp == timestamp
    no_close = round_trip(session(None, None))
    assert no_close.websocket is not None
    assert no_close.websocket.close is None  # no close recorded stays none, not a drop


def _devtools(messages: list[Any], **extension: Any) -> Exchange:
    entry: dict[str, Any] = {
        "startedDateTime": "2026-05-04T10:20:30.000Z",
        "request": {"method": "GET", "url": "ws://127.0.0.1:7878/v1/realtime?model=x"},
        "response": {"status": 101, "headers": [], "content": {"size": 0}},
        "_webSocketMessages": messages,
    }
    if extension:
        entry["_reel"] = extension
    (item,) = parse(json.dumps({"log": {"entries": [entry]}}).encode(), "t.har")
    assert isinstance(item, Exchange), item
    return item


def test_devtools_entries_and_odd_messages() -> None:
    t0 = 1777890030.0
    item = _devtools(
        [
            {"type": "receive", "time": t0 + 0.5, "opcode": 1, "data": "{}"},
            {"type": "send", "time": t0 - 1, "opcode": 2, "data": "AAE="},  # before the start
            {"type": "send", "time": t0 + 0.25, "opcode": 1, "data": "late"},  # goes back: kept
            {"type": "receive", "time": "soon", "opcode": 1, "data": "x"},
            {"type": "receive", "time": True, "opcode": 1, "data": "x"},
            {"type": "ping", "time": t0, "opcode": 9, "data": ""},
            {"type": "receive", "time": t0, "opcode": 1, "data": 5},
            {"type": "receive", "time": t0, "opcode": 2, "data": "not base64!"},
            ["junk"],
        ],
        websocket_close={"code": True, "reason": None, "by": "server", "at_ms": "x"},
    )
    assert item.target == "http://127.0.0.1:7878/v1/realtime?model=x"
    assert item.websocket is not None
    assert [(m.sender, m.at_ms, m.data) for m in item.websocket.messages] == [
        ("server", 500.0, b"{}"),
        ("client", 500.0, b"\x00\x01"),
        ("client", 500.0, b"late"),
    ]
    assert item.websocket.close == WebSocketClose(None, "", "server", 500.0)
    assert "6 WebSocket message(s) left out" in " ".join(item.notes)
    odd_close = _devtools([], websocket_close={"by": "nobody"})
    assert odd_close.websocket == WebSocketLog((), None)
    secure = _devtools([], websocket_close=[])
    assert secure.websocket == WebSocketLog((), None)


def test_wss_is_https_and_vcr_leaves_sessions_out() -> None:
    entry = {
        "startedDateTime": "2026-05-04T10:20:30.000Z",
        "request": {"method": "GET", "url": "wss://api.openai.com/v1/realtime"},
        "response": {"status": 101, "headers": [], "content": {"size": 0}},
        "_webSocketMessages": [],
    }
    (item,) = parse(json.dumps({"log": {"entries": [entry]}}).encode(), "t.har")
    assert isinstance(item, Exchange)
    assert item.target == "https://api.openai.com/v1/realtime"
    ix = session(None, None)
    assert not exportable(ix)
    assert losses([ix, ix]) == [
        "2 WebSocket sessions: NOT exported (vcrpy has no WebSocket; the har format keeps them)"
    ]
