"""A whole WebSocket record and replay, bytes only: two wsproto peers in
memory stand in for the client and the upstream (no socket, no clock)."""

from __future__ import annotations

import json

from wsproto import ConnectionType, WSConnection
from wsproto.connection import Connection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    Pong,
    TextMessage,
)
from wsproto.events import (
    Request as WSRequest,
)

from reel_core import Cassette, Config, Forward, Mode, Replay, Session, Timing, Upgrade, Verdict
from reel_core.tools import (
    CLOSE_MISMATCH,
    UpstreamAnswer,
    UpstreamHandshake,
    WebSocketSession,
    WebSocketSignal,
    WebSocketStep,
)


def relayed(
    session: Session,
    decision: Forward,
    answer: UpstreamAnswer,
    *,
    now: float,
    sent_at: float | None = None,
) -> WebSocketSession:
    """What a binding does once the upstream answered 101: feed it to the
    engine, answer the client's upgrade on the HTTP side, and hand the
    engine and that upgrade to the WebSocket adapter."""
    engine = session.engine
    engine.upstream_head(101, answer.headers, mono=now, sent_at=sent_at)
    engine.upstream_end(mono=now)
    upgrade = session.upgrade(decision.request)
    return WebSocketSession.relay(engine, upgrade, decision, answer, mono=now)


def replayed(session: Session, decision: Replay, timing: Timing | None = None) -> WebSocketSession:
    """A replay's upgrade answered on the HTTP side, handed to the adapter."""
    upgrade = session.upgrade(decision.request)
    return WebSocketSession.replay(session.engine, upgrade, decision, timing=timing)


def frame(text: bytes) -> bytes:
    """A client's masked text frame, made apart from any handshake."""
    return Connection(ConnectionType.CLIENT).send(TextMessage(text.decode()))


KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz0123"
TARGET = "/v1/realtime?model=gpt-realtime"


class Client:
    """A wsproto client: the SDK's side."""

    def __init__(
        self,
        target: str = TARGET,
        headers: list[tuple[str, str]] | None = None,
        subprotocols: list[str] | None = None,
    ) -> None:
        self.ws = WSConnection(ConnectionType.CLIENT)
        extra = headers if headers is not None else [("authorization", f"Bearer {KEY}")]
        self.hello = self.ws.send(
            WSRequest(
                host="api.openai.com",
                target=target,
                extra_headers=[(k.encode(), v.encode()) for k, v in extra],
                subprotocols=subprotocols or [],
            )
        )
        self.events: list[object] = []

    def feed(self, data: bytes) -> list[object]:
        self.ws.receive_data(data)
        new: list[object] = list(self.ws.events())
        self.events += new
        return new

    def texts(self) -> list[str]:
        return [e.data for e in self.events if isinstance(e, TextMessage)]


class Upstream:
    """A wsproto server: the provider's side."""

    def __init__(self) -> None:
        self.ws = WSConnection(ConnectionType.SERVER)
        self.events: list[object] = []

    def feed(self, data: bytes) -> bytes:
        self.ws.receive_data(data)
        out = b""
        for event in self.ws.events():
            self.events.append(event)
            if isinstance(event, WSRequest):
                out += self.ws.send(AcceptConnection(extra_headers=[(b"x-request-id", b"req_1")]))
            elif isinstance(event, CloseConnection):
                out += self.ws.send(event.response())
        return out


SERVER_EVENTS = [
    {"type": "session.created", "event_id": "e1", "session": {"model": "gpt-realtime"}},
    {"type": "response.output_text.delta", "delta": "Hello"},
    {
        "type": "response.done",
        "response": {
            "usage": {
                "input_tokens": 10,
                "output_tokens": 4,
                "input_token_details": {"cached_tokens": 2},
            }
        },
    },
]
CLIENT_EVENTS = [
    b'{"type": "session.update", "event_id": "c1", "session": {"instructions": "hi"}}',
    b'{"type":"response.create"}',
]


def record_session() -> tuple[Cassette, bytes]:
    """Record one session through the core: the client says two things,
    the upstream answers, the client closes.  The cassette and its line."""
    cassette = Cassette("rt.jsonl")
    session = Session(cassette, Config(mode=Mode.RECORD))
    client, upstream = Client(), Upstream()
    session.receive_data(client.hello)
    decision = session.next_event()
    assert isinstance(decision, Forward)
    assert decision.websocket
    assert decision.record
    handshake = UpstreamHandshake(decision.request, "api.openai.com")
    up_bytes = upstream.feed(handshake.data)
    # the upstream's first event comes right behind its 101
    up_bytes += upstream.ws.send(TextMessage(json.dumps(SERVER_EVENTS[0])))
    answer = handshake.receive_data(up_bytes)
    assert answer is not None
    assert answer.status == 101
    ws = relayed(session, decision, answer, now=10.0, sent_at=9.9)
    out = ws.start(10.0)
    client.feed(out.to_client)
    assert client.texts() == [json.dumps(SERVER_EVENTS[0])]
    # the client's first message, in two frames, and a ping
    part1 = client.ws.send(TextMessage(CLIENT_EVENTS[0][:20].decode(), message_finished=False))
    part2 = client.ws.send(TextMessage(CLIENT_EVENTS[0][20:].decode()))
    ping = client.ws.send(Ping(b"p"))
    out = ws.receive_client(part1, 10.1)
    upstream.feed(out.to_upstream)
    out = ws.receive_client(part2 + ping, 10.2)
    assert upstream.feed(out.to_upstream) == b""
    assert any(isinstance(e, Pong) for e in client.feed(out.to_client))
    out = ws.receive_client(client.ws.send(TextMessage(CLIENT_EVENTS[1].decode())), 10.3)
    upstream.feed(out.to_upstream)
    got = [e.data for e in upstream.events if isinstance(e, TextMessage)]
    assert "".join(got) == (CLIENT_EVENTS[0] + CLIENT_EVENTS[1]).decode()
    for i, event in enumerate(SERVER_EVENTS[1:]):
        out = ws.receive_upstream(upstream.ws.send(TextMessage(json.dumps(event))), 10.5 + i)
        client.feed(out.to_client)
    out = ws.receive_upstream(upstream.ws.send(BytesMessage(b"\x00\xffaudio")), 12.0)
    client.feed(out.to_client)
    out = ws.receive_client(client.ws.send(CloseConnection(1000, "bye")), 12.5)
    assert not ws.closed or out.to_upstream
    echo = upstream.feed(out.to_upstream)
    ws.receive_upstream(echo, 12.6)
    client.feed(out.to_client)
    assert ws.closed
    recorded = ws.record()
    assert recorded is not None
    assert (ws.verdict, ws.label) == (Verdict.RECORDED, "recorded")  # the upgrade's
    return cassette, recorded.line


def test_record_then_replay_byte_exact() -> None:
    cassette, line = record_session()
    obj = json.loads(line)
    assert obj["response"]["status"] == 101
    assert obj["response"]["stream"] == "websocket"
    assert ["x-request-id", "req_1"] in obj["response"]["headers"]
    assert obj["request"]["query"] == [["model", "gpt-realtime"]]
    messages = obj["websocket"]["messages"]
    assert [m["from"] for m in messages] == ["server", "client", "client"] + ["server"] * 3
    assert messages[1]["style"] == "spaced"  # the odd spacing kept
    assert messages[-1] == {"from": "server", "at": 2000.0, "base64": "AP9hdWRpbw=="}
    assert obj["websocket"]["close"] == {
        "code": 1000,
        "reason": "bye",
        "by": "client",
        "at": 2500.0,
    }
    meta = obj["meta"]
    assert meta["tokens_in"] == 10
    assert meta["tokens_out"] == 4
    assert meta["tokens_cached"] == 2
    assert meta["model"] == "gpt-realtime"
    assert meta["messages"] == 6
    assert meta["shape"] == "websocket"
    assert meta["ttft_ms"] == 500.0
    assert KEY not in line.decode()

    # replay: a new client, the same messages, the upstream gone
    replay_cassette = Cassette.loads(cassette.meta.to_line() + line, name="rt.jsonl")
    session = Session(replay_cassette, Config(mode=Mode.REPLAY))
    client = Client()
    # the first message right behind the upgrade GET, before any answer
    session.receive_data(client.hello + frame(CLIENT_EVENTS[0]))
    decision = session.next_event()
    assert isinstance(decision, Replay)
    assert decision.websocket is not None
    ws = replayed(session, decision, Timing.parse("realtime"))
    out = ws.start(100.0)
    events = client.feed(out.to_client)
    assert isinstance(events[0], AcceptConnection)
    steps: list[WebSocketStep] = []
    while True:
        step = ws.next_step()
        if step is WebSocketSignal.NEED_CLIENT:
            if len(steps) == 1:  # after the first answer: the second message
                message = client.ws.send(TextMessage(CLIENT_EVENTS[1].decode()))
                client.feed(ws.receive_client(message, 100.75).to_client)
                continue
            client.feed(ws.receive_client(client.ws.send(CloseConnection(1000)), 104.0).to_client)
            continue
        if step is WebSocketSignal.DONE:
            break
        assert isinstance(step, WebSocketStep)
        steps.append(step)
        client.feed(ws.send(step))
    # gated on the client: the second message came at 0.75 s, recorded at 0.3 s
    assert [s.until for s in steps] == [None, 0.95, 1.95, 2.45]
    assert client.texts() == [json.dumps(e) for e in SERVER_EVENTS]
    assert [e.data for e in client.events if isinstance(e, BytesMessage)] == [b"\x00\xffaudio"]
    assert ws.outcome == "complete: the client closed"
    assert ws.miss is None
    assert (ws.verdict, ws.label) == (Verdict.HIT, "hit (complete: the client closed)")


def test_replay_mismatch_sends_the_error_event_and_closes() -> None:
    _cassette, line = record_session()
    session = Session(Cassette.loads(line, name="rt.jsonl"), Config(mode=Mode.REPLAY))
    client = Client()
    session.receive_data(client.hello)
    decision = session.next_event()
    assert isinstance(decision, Replay)
    ws = replayed(session, decision, Timing.parse("fast"))
    client.feed(ws.start(0.0).to_client)
    first = ws.next_step()
    assert isinstance(first, WebSocketStep)
    assert first.until is None
    client.feed(ws.send(first))
    assert ws.next_step() is WebSocketSignal.NEED_CLIENT
    changed = CLIENT_EVENTS[0].replace(b'"hi"', b'"bye"').replace(b'"c1"', b'"c9"')
    ws.receive_client(client.ws.send(TextMessage(changed.decode())), 0.5)
    error = ws.next_step()
    assert isinstance(error, WebSocketStep)
    client.feed(ws.send(error))
    closing = ws.next_step()
    assert isinstance(closing, WebSocketStep)
    assert closing.close is not None
    client.feed(ws.send(closing))
    assert ws.next_step() is WebSocketSignal.DONE
    event = json.loads(client.texts()[-1])
    assert event["type"] == "error"
    assert event["error"]["code"] == "reel_websocket_mismatch"
    close = next(e for e in client.events if isinstance(e, CloseConnection))
    assert close.code == CLOSE_MISMATCH
    assert "client message 0" in (close.reason or "")
    miss = ws.miss
    assert miss is not None
    assert miss.message == 1
    assert miss.client_message == 0
    # event_id is volatile for OpenAI: only the instructions differ
    assert [d.path for d in miss.diffs] == ["message.session.instructions"]
    assert "session.instructions" in miss.render()
    # the upgrade was a hit; the session, a miss
    assert session.engine.verdict is Verdict.HIT
    assert (ws.verdict, ws.label) == (Verdict.MISS, "miss")


def test_upstream_drop_is_recorded_and_replayed_as_a_drop() -> None:
    cassette = Cassette("rt.jsonl")
    session = Session(cassette, Config(mode=Mode.RECORD))
    client, upstream = (
        Client(
            target="/ws/x.BidiGenerateContent?key=AIzaSyA-secret-value-0123456789abc", headers=[]
        ),
        Upstream(),
    )
    session.receive_data(client.hello)
    decision = session.next_event()
    assert isinstance(decision, Forward)
    handshake = UpstreamHandshake(decision.request, "generativelanguage.googleapis.com")
    answer = handshake.receive_data(upstream.feed(handshake.data))
    assert answer is not None
    ws = relayed(session, decision, answer, now=1.0)
    client.feed(ws.start(1.0).to_client)
    setup = {"setup": {"model": "models/gemini-live", "api_key": "secret-in-first-message"}}
    # the key split across the two frames of one message: the message is whole
    text = json.dumps(setup)
    cut = text.index("in-first")
    head = client.ws.send(TextMessage(text[:cut], message_finished=False))
    upstream.feed(ws.receive_client(head, 1.05).to_upstream)
    out = ws.receive_client(client.ws.send(TextMessage(text[cut:])), 1.1)
    upstream.feed(out.to_upstream)
    reply = {
        "serverContent": {"modelTurn": {"parts": [{"text": "hi secret-in-first-message"}]}},
        "usageMetadata": {"promptTokenCount": 5, "responseTokenCount": 3},
    }
    client.feed(
        ws.receive_upstream(upstream.ws.send(TextMessage(json.dumps(reply))), 1.3).to_client
    )
    out = ws.receive_upstream(b"", 1.4)
    assert out.close
    assert ws.closed
    recorded = ws.record()
    assert recorded is not None
    obj = json.loads(recorded.line)
    text = recorded.line.decode()
    assert "secret-in-first-message" not in text
    assert "AIzaSyA-secret" not in text
    assert obj["websocket"]["close"] == {
        "code": None,
        "reason": "",
        "by": "upstream-dropped",
        "at": 400.0,
    }
    assert obj["provider"] == "gemini"
    assert obj["meta"]["model"] == "gemini-live"
    assert obj["meta"]["tokens_out"] == 3

    session = Session(Cassette.loads(recorded.line, name="rt.jsonl"), Config(mode=Mode.REPLAY))
    client = Client(
        target="/ws/x.BidiGenerateContent?key=AIzaSyA-secret-value-0123456789abc", headers=[]
    )
    session.receive_data(client.hello)
    decision = session.next_event()
    assert isinstance(decision, Replay)
    ws = replayed(session, decision)
    client.feed(ws.start(0.0).to_client)
    assert ws.next_step() is WebSocketSignal.NEED_CLIENT
    # the stored message is redacted: the client sends what was stored
    stored = json.dumps(obj["websocket"]["messages"][0]["json"])
    client.feed(ws.receive_client(client.ws.send(TextMessage(stored)), 0.2).to_client)
    reply_step = ws.next_step()
    assert isinstance(reply_step, WebSocketStep)
    assert reply_step.until == 0.4
    drop = ws.next_step()
    assert isinstance(drop, WebSocketStep)
    assert drop.drop
    assert drop.until == 0.5
    assert ws.send(drop) == b""
    assert ws.closed


# -- the adapter's edges -------------------------------------------------------------


def forward(
    client: Client, mode: Mode = Mode.RECORD, cassette: Cassette | None = None
) -> tuple[Session, Forward]:
    session = Session(cassette if cassette is not None else Cassette("c.jsonl"), Config(mode=mode))
    session.receive_data(client.hello)
    decision = session.next_event()
    assert isinstance(decision, Forward)
    return session, decision


def test_upstream_handshake_refused_split_closed_or_junk() -> None:
    import pytest

    from reel_core import RemoteProtocolError

    request = forward(Client())[1].request
    handshake = UpstreamHandshake(request, "api.openai.com")
    assert b"sec-websocket-extensions" not in handshake.data.lower()
    answer = b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 4\r\n\r\nnope"
    assert handshake.receive_data(answer[:10]) is None
    refused = handshake.receive_data(answer[10:])
    assert refused is not None
    assert (refused.status, refused.data) == (401, b"nope")
    closed = UpstreamHandshake(request, "h")
    with pytest.raises(RemoteProtocolError, match="not HTTP"):
        closed.receive_data(b"")
    junk = UpstreamHandshake(request, "h")
    with pytest.raises(RemoteProtocolError, match="not HTTP"):
        junk.receive_data(b"\x00\x01 nonsense\r\n\r\n")


def test_live_relay_fragments_drops_and_misuse() -> None:
    import pytest

    from reel_core import LocalProtocolError, RemoteProtocolError

    client, upstream = Client(subprotocols=["realtime", "other"]), Upstream()
    session, decision = forward(client, Mode.LIVE)
    with pytest.raises(LocalProtocolError, match="101"):
        WebSocketSession.relay(
            session.engine, Upgrade(b""), decision, UpstreamAnswer(400, ()), mono=0.0
        )
    handshake = UpstreamHandshake(decision.request, "x")
    upstream.feed(handshake.data)
    ws = relayed(session, decision, UpstreamAnswer(101, ()), now=0.0)
    assert (ws.verdict, ws.label) == (Verdict.LIVE, "live")
    with pytest.raises(LocalProtocolError, match="start"):
        ws.receive_client(b"", 0.0)
    with pytest.raises(LocalProtocolError, match="replay"):
        ws.next_step()
    head = ws.start(0.0).to_client
    assert b"sec-websocket-protocol: realtime\r\n" in head  # the first offered
    client.feed(head)
    piece = upstream.ws.send(TextMessage("par", message_finished=False))
    client.feed(ws.receive_upstream(piece, 0.1).to_client)
    client.feed(ws.receive_upstream(upstream.ws.send(TextMessage("t")), 0.2).to_client)
    assert "".join(client.texts()) == "part"
    client.feed(ws.receive_client(client.ws.send(Pong(b"")), 0.3).to_client)
    out = ws.receive_client(b"", 0.4)  # the client drops
    assert out.close
    assert ws.closed
    assert any(
        isinstance(e, CloseConnection) and e.code == 1001
        for e in [*upstream.events, *_events(upstream, out.to_upstream)]
    )
    assert ws.receive_client(b"", 0.5).close
    assert ws.record() is None  # live: nothing recorded
    # no key: no upgrade
    keyless = Session(Cassette("k.jsonl"), Config(mode=Mode.LIVE))
    keyless.receive_data(
        b"GET /v1/realtime HTTP/1.1\r\nhost: x\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n"
    )
    nokey = keyless.next_event()
    assert isinstance(nokey, Forward)
    with pytest.raises(RemoteProtocolError, match="Sec-WebSocket-Key"):
        relayed(keyless, nokey, UpstreamAnswer(101, ()), now=0.0)


def _events(peer: Upstream, data: bytes) -> list[object]:
    peer.feed(data)
    return peer.events


def test_replay_edges_client_fragments_and_close_races() -> None:
    import pytest

    from reel_core import LocalProtocolError

    _cassette, line = record_session()
    session = Session(Cassette.loads(line, name="rt.jsonl"), Config(mode=Mode.REPLAY))
    client = Client(subprotocols=["realtime"])
    session.receive_data(client.hello)
    decision = session.next_event()
    assert isinstance(decision, Replay)
    with pytest.raises(LocalProtocolError, match="not a WebSocket"):
        WebSocketSession.replay(
            session.engine, Upgrade(b""), Replay(decision.request, "x", decision.key)
        )
    ws = replayed(session, decision)
    client.feed(ws.start(0.0).to_client)
    with pytest.raises(LocalProtocolError, match="no upstream"):
        ws.receive_upstream(b"", 0.0)
    first = ws.next_step()
    assert isinstance(first, WebSocketStep)
    half = CLIENT_EVENTS[0][:5].decode()
    ws.receive_client(client.ws.send(TextMessage(half, message_finished=False)), 0.1)
    assert ws.next_step() is WebSocketSignal.NEED_CLIENT  # half a message is no message
    ws.receive_client(client.ws.send(CloseConnection(1000)), 0.2)
    assert ws.outcome is not None
    assert "closed early" in ws.outcome
    assert ws.send(first) == b""  # the client is gone
    assert ws.send(WebSocketStep(None, close=(1000, ""))) == b""
    ws.receive_client(b"\x88\x00", 0.3)  # after the close: nothing more is read
    assert ws.receive_client(b"", 0.4).close  # then the connection ends


def test_recorded_subprotocol_and_realtime_usage_without_details() -> None:
    from reel_core.tools import WebSocketLog, WebSocketMessage, websocket_usage

    log = WebSocketLog(
        (WebSocketMessage("server", 1, b'{"type":"response.done","response":{"usage":{}}}'),)
    )
    usage = websocket_usage("openai", (), log)
    assert usage.input_tokens is None
    assert usage.model is None


def test_an_interim_answer_before_the_101_is_skipped() -> None:
    request = forward(Client())[1].request
    handshake = UpstreamHandshake(request, "h")
    answer = handshake.receive_data(
        b"HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 101 Switching Protocols\r\n"
        b"upgrade: websocket\r\nconnection: upgrade\r\n\r\n\x81\x00"
    )
    assert answer is not None
    assert answer.status == 101
    assert answer.data == b"\x81\x00"


def test_an_unrecorded_upgrade_is_a_404_miss_before_any_upgrade() -> None:
    from reel_core import EndOfResponse, Frame, Miss, ResponseHead

    session = Session(Cassette("empty.jsonl"), Config(mode=Mode.REPLAY))
    client = Client()
    session.receive_data(client.hello)
    decision = session.next_event()
    assert isinstance(decision, Miss)
    wire = b""
    while isinstance(event := session.next_event(), (ResponseHead, Frame, EndOfResponse)):
        wire += session.send(event)
    assert wire.startswith(b"HTTP/1.1 404 ")
    assert b"no recording matches" in wire
    rejected = client.feed(wire)
    assert type(rejected[0]).__name__ == "RejectConnection"


def test_upstream_handshake_keeps_the_upstream_base_path() -> None:
    """``--upstream https://host/prefix``: the upgrade goes to the prefix
    plus the client's path and query, as an HTTP request would."""
    session = Session(
        Cassette("rt.jsonl"),
        Config(mode=Mode.RECORD, routing=True, upstream="https://gw.example/team/openai/"),
    )
    session.receive_data(Client().hello)
    decision = session.next_event()
    assert isinstance(decision, Forward)
    assert decision.url == "https://gw.example/team/openai/v1/realtime?model=gpt-realtime"
    handshake = UpstreamHandshake(decision.request, "gw.example", decision.url)
    assert handshake.data.startswith(b"GET /team/openai/v1/realtime?model=gpt-realtime HTTP/1.1")
    assert b"\r\nhost: gw.example\r\n" in handshake.data
    bare = UpstreamHandshake(decision.request, "gw.example", "https://gw.example")
    assert bare.data.startswith(b"GET / HTTP/1.1")
    # no routed URL (an in-process binding): the client's own target
    own = UpstreamHandshake(decision.request, "gw.example")
    assert own.data.startswith(b"GET /v1/realtime?model=gpt-realtime HTTP/1.1")
