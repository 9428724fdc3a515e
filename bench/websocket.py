"""8. WebSocket replay through the proxy: a recorded session (one client
message, then 200 server messages 10 ms apart) replayed in realtime, each
message's arrival at the client against its recorded offset; and fast
mode's messages per second (a session of 10 turns, 100 server messages
each).  The peer, in the same run, is a bare wsproto server on anyio
(``bench._servers ws``): it does the least a WebSocket replayer does, the
same messages gated by the client's (sent after client message *k* once it
came), deadlines with the same ``sleep_until``, and no matching, redaction
or cassette.  The client is wsproto over a blocking socket, on a core of its
own.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import wsproto
import wsproto.events as ws_events

from reel_core import Cassette, Interaction, MatchConfig, RecordedRequest, RecordedResponse
from reel_core.tools import WebSocketClose, WebSocketLog, WebSocketMessage, match_key

from ._common import Row, percentile, ratio, spawn
from ._loadgen import connect
from .proxy import SERVER_CPU, _proxy_args

__all__ = ["ws_fast", "ws_fidelity"]

PATH = "/v1/realtime"
QUERY = (("model", "gpt-realtime"),)
TARGET = "/v1/realtime?model=gpt-realtime"
MESSAGES = 200
GAP_MS = 10.0
TURNS = 10
PER_TURN = 100


def _client(turn: int) -> bytes:
    event = {"type": "response.create", "response": {"metadata": {"turn": turn}}}
    return json.dumps(event).encode()


def _server(turn: int, i: int) -> bytes:
    return json.dumps(
        {
            "type": "response.output_text.delta",
            "event_id": f"event_{turn:03d}_{i:04d}",
            "response_id": f"resp_{turn:03d}",
            "item_id": "item_001",
            "output_index": 0,
            "content_index": 0,
            "delta": f" word{i}",
        }
    ).encode()


def session_log(turns: int, per_turn: int, gap_ms: float) -> WebSocketLog:
    """A session of ``turns`` client messages, each answered by
    ``per_turn`` server messages ``gap_ms`` apart (the first ``gap_ms``
    after it); the client closes last."""
    messages: list[WebSocketMessage] = []
    at = 5.0
    for turn in range(turns):
        messages.append(WebSocketMessage("client", at, _client(turn)))
        for i in range(per_turn):
            at += gap_ms
            messages.append(WebSocketMessage("server", round(at, 3), _server(turn, i)))
        at += gap_ms
    return WebSocketLog(tuple(messages), WebSocketClose(1000, "", "client", round(at, 3)))


def write_ws_cassette(path: Path, log: WebSocketLog) -> Path:
    """A cassette of one recorded session (OpenAI Realtime's upgrade), and
    beside it ``path.json``, the same messages for the bare server."""
    key = match_key("GET", PATH, QUERY, b"", MatchConfig())
    interaction = Interaction(
        key,
        key[7:19],
        RecordedRequest("GET", PATH, QUERY),
        RecordedResponse(101),
        provider="openai",
        websocket=log,
    )
    path.write_bytes(Cassette().meta.to_line() + interaction.to_line())
    script = [{"from": m.sender, "at": m.at_ms, "text": m.data.decode()} for m in log.messages]
    script_file = path.with_suffix(".json")
    script_file.write_text(json.dumps(script))
    return script_file


class _Client:
    """One WebSocket session over a blocking socket (wsproto)."""

    def __init__(self, url: str) -> None:
        self.sock = connect(url)
        self.ws = wsproto.WSConnection(wsproto.ConnectionType.CLIENT)
        host = url.split("//", 1)[1]
        self.sock.sendall(self.ws.send(ws_events.Request(host=host, target=TARGET)))
        #: Whole messages read and not handed out, with when each was whole.
        self._pending: list[float] = []
        self._text = ""
        while not self._pump(accepted_only=True):
            pass

    def _pump(self, accepted_only: bool = False) -> bool:
        data = self.sock.recv(1 << 16)
        now = time.perf_counter()
        if not data:
            raise ConnectionError("the server closed the connection")
        self.ws.receive_data(data)
        accepted = False
        for event in self.ws.events():
            if isinstance(event, ws_events.AcceptConnection):
                accepted = True
            elif isinstance(event, ws_events.RejectConnection):
                raise RuntimeError(f"upgrade refused: {event.status_code}")
            elif isinstance(event, ws_events.TextMessage):
                self._text += event.data
                if event.message_finished:
                    self._pending.append(now)  # the messages of one read came together
                    self._text = ""
            elif isinstance(event, ws_events.CloseConnection):
                raise RuntimeError(f"closed by the server: {event.code} {event.reason}")
            elif isinstance(event, ws_events.Ping):
                self.sock.sendall(self.ws.send(event.response()))
        return accepted

    def send(self, data: bytes) -> None:
        self.sock.sendall(self.ws.send(ws_events.TextMessage(data=data.decode())))

    def receive(self, count: int) -> list[float]:
        """When each of the next ``count`` messages was whole (perf_counter)."""
        while len(self._pending) < count:
            self._pump()
        times, self._pending = self._pending[:count], self._pending[count:]
        return times

    def close(self) -> None:
        try:
            self.sock.sendall(self.ws.send(ws_events.CloseConnection(code=1000)))
            self.sock.shutdown(socket.SHUT_WR)
            while self.sock.recv(1 << 16):
                pass
        except OSError:
            pass
        finally:
            self.sock.close()


def _one_turn(url: str, log: WebSocketLog) -> list[float]:
    """Each server message's |arrival - expected|, in seconds: expected is
    its recorded offset after the client message, counted from the send."""
    first = log.messages[0]
    offsets = [(m.at_ms - first.at_ms) / 1000 for m in log.messages[1:]]
    client = _Client(url)
    try:
        sent = time.perf_counter()
        client.send(first.data)
        times = client.receive(len(offsets))
    finally:
        client.close()
    return [abs((t - sent) - want) for t, want in zip(times, offsets, strict=True)]


def ws_fidelity(
    work: Path, backends: list[str], sessions: int, rounds: int, messages: int = MESSAGES
) -> list[Row]:
    """Realtime: each server message's offset error as the client sees it,
    through the proxy and through the bare server; the best round each."""
    log = session_log(1, messages, GAP_MS)
    cassette = work / f"ws-{messages}.jsonl"
    script = write_ws_cassette(cassette, log)
    rows: list[Row] = []
    for backend in backends:
        bare_args = ["-m", "bench._servers", "ws", "--backend", backend]
        bare_args += ["--cpu", str(SERVER_CPU), "--frames", str(script)]
        reel_args = _proxy_args(cassette, backend, "--timing", "realtime")
        with spawn(bare_args) as bare, spawn(reel_args) as proxy:
            children = (("proxy", proxy), ("bare wsproto server", bare))
            for _, child in children:
                _one_turn(child.url, log)  # warm (the proxy's first replay parses the line)
            measured: dict[str, list[list[float]]] = {name: [] for name, _ in children}
            for _ in range(rounds):
                for name, child in children:
                    errors: list[float] = []
                    for _ in range(sessions):
                        errors += _one_turn(child.url, log)
                    measured[name].append(errors)
        for name, _ in children:
            p99s = [percentile(errors, 99) * 1000 for errors in measured[name]]
            best = measured[name][p99s.index(min(p99s))]
            rows.append(
                {
                    "via": name,
                    "backend": backend,
                    "sessions": sessions,
                    "messages": messages,
                    "offset_p50_ms": round(percentile(best, 50) * 1000, 3),
                    "offset_p99_ms": round(percentile(best, 99) * 1000, 3),
                    "offset_max_ms": round(max(best) * 1000, 3),
                    "rounds_p99_ms": " / ".join(str(round(p, 3)) for p in p99s),
                }
            )
    return rows


def _session_seconds(url: str, log: WebSocketLog) -> float:
    """One whole session in fast mode: each client message, then its turn."""
    turns: list[tuple[bytes, int]] = []
    for m in log.messages:
        if m.sender == "client":
            turns.append((m.data, 0))
        else:
            data, count = turns[-1]
            turns[-1] = (data, count + 1)
    client = _Client(url)
    try:
        start = time.perf_counter()
        for data, count in turns:
            client.send(data)
            client.receive(count)
        return time.perf_counter() - start
    finally:
        client.close()


def _mps(url: str, log: WebSocketLog, duration: float) -> float:
    count = sum(m.sender == "server" for m in log.messages)
    _session_seconds(url, log)  # warm
    spent = 0.0
    sessions = 0
    while spent < duration:
        spent += _session_seconds(url, log)
        sessions += 1
    return sessions * count / spent


def ws_fast(work: Path, backends: list[str], duration: float) -> list[Row]:
    """Fast mode: server messages per second within sessions (the upgrade
    and close not counted), the proxy vs the bare server."""
    log = session_log(TURNS, PER_TURN, GAP_MS)
    cassette = work / "ws-turns.jsonl"
    script = write_ws_cassette(cassette, log)
    rows: list[Row] = []
    for backend in backends:
        bare_args = ["-m", "bench._servers", "ws", "--backend", backend, "--fast"]
        bare_args += ["--cpu", str(SERVER_CPU), "--frames", str(script)]
        reel_args = _proxy_args(cassette, backend, "--timing", "fast")
        with spawn(bare_args) as bare, spawn(reel_args) as proxy:
            mps = {"bare": 0.0, "reel": 0.0}
            for _ in range(2):  # alternated; the better of two each
                for name, child in (("bare", bare), ("reel", proxy)):
                    mps[name] = max(mps[name], _mps(child.url, log, duration / 2))
        rows.append(
            {
                "backend": backend,
                "turns": TURNS,
                "messages_per_turn": PER_TURN,
                "bare_wsproto_mps": round(mps["bare"]),
                "reel_mps": round(mps["reel"]),
                "reel_vs_bare": ratio(mps["reel"], mps["bare"]),
            }
        )
    return rows
