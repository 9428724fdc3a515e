"""The bytes a client reads from the proxy's replays, compared whole.

The proxy sends a replayed response that is due at once in one piece,
serialized once per recording (``Session.send_replay``).  Each scenario
here sends raw request bytes on one connection and compares every byte the
proxy answered, up to its close, with the bytes of an oracle: a
``Session`` over the same cassette, fed the same bytes and sending its
events one by one.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import pytest

from reel_bindings.proxy import running
from reel_core import (
    Cassette,
    Config,
    Cut,
    EndOfResponse,
    Engine,
    Frame,
    Interaction,
    MatchConfig,
    Mode,
    Recorded,
    RecordedRequest,
    RecordedResponse,
    Request,
    ResponseHead,
    Session,
    Signal,
    State,
    Timing,
)
from reel_core.tools import match_key

from .proxy_support import options

pytestmark = pytest.mark.anyio

CHAT = "/v1/chat/completions"
ASK = b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}'
STREAM = b'{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}'
ZIPPED = b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"zip"}]}'
SSE = ((0.0, b'data: {"a":1}\n\n'), (4.0, b'data: {"a":2}\n\n'), (9.0, b"data: [DONE]\n\n"))
HEADERS = (("content-type", "application/json"), ("x-request-id", "req_1"))


def recording(
    id: str, sent: bytes, *, method: str = "POST", path: str = CHAT, **response: object
) -> Interaction:
    key = match_key(method, path, (), sent, MatchConfig())
    return Interaction(
        key=key,
        id=id,
        request=RecordedRequest(method, path, (), sent),
        response=RecordedResponse(**response),  # type: ignore[arg-type]
    )


def gzip_line() -> bytes:
    """A recording of an answer the upstream sent gzip-encoded."""
    engine = Engine(Cassette(), Config(mode=Mode.RECORD))
    engine.receive_request(Request("POST", CHAT, ((b"host", b"x"),), ZIPPED))
    engine.next_event()  # the forward
    headers = [(b"content-type", b"application/json"), (b"content-encoding", b"gzip")]
    engine.upstream_head(200, headers, mono=0.0)
    engine.upstream_data(gzip.compress(b'{"text":"' + b"zipped " * 300 + b'"}'), mono=0.0)
    engine.upstream_end(mono=0.0)
    while not isinstance(engine.next_event(), Signal):
        pass
    recorded = engine.record()
    assert isinstance(recorded, Recorded)
    return recorded.line


@pytest.fixture
def cassette(tmp_path: Path) -> Path:
    lines = [
        recording("slow", ASK, status=429, headers=HEADERS, body=b'{"error":"slow down"}'),
        recording("ok", ASK, status=200, headers=HEADERS, body=b'{"answer":"hello"}'),
        recording(
            "sse",
            STREAM,
            status=200,
            headers=(("content-type", "text/event-stream"),),
            stream="sse",
            frames=SSE,
            end_ms=10.0,
        ),
        recording(
            "models", b"", method="HEAD", path="/v1/models", status=200, headers=HEADERS, body=b"[]"
        ),
    ]
    path = tmp_path / "wire.jsonl"
    path.write_bytes(b"".join(i.to_line() for i in lines) + gzip_line())
    return path


def post(body: bytes, *, version: str = "1.1", close: bool = False) -> bytes:
    head = [f"POST {CHAT} HTTP/{version}", "Host: reel.test", "Content-Type: application/json"]
    head.append(f"Content-Length: {len(body)}")
    if close:
        head.append("Connection: close")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


HEAD_MODELS = b"HEAD /v1/models HTTP/1.1\r\nHost: reel.test\r\n\r\n"

#: Requests sent one after the other on one connection (the last closes it).
SCENARIOS = {
    "a retried request, served in recorded order": [post(ASK), post(ASK), post(ASK, close=True)],
    "a stream, then HEAD": [post(STREAM), HEAD_MODELS, post(STREAM, close=True)],
    "Connection: close": [post(ASK, close=True)],
    "an HTTP/1.0 client": [post(ASK, version="1.0")],
    "an HTTP/1.0 client, a stream": [post(STREAM, version="1.0")],
    "a gzip-encoded recording": [post(ZIPPED), post(ZIPPED, close=True)],
}


def oracle(cassette: Path, timing: str, requests: list[bytes]) -> bytes:
    """What a session sending each event alone answers to ``requests``."""
    session = Session(Cassette.loads(cassette.read_bytes()), Config(timing=Timing.parse(timing)))
    out = b""
    for data in requests:
        session.receive_data(data)
        while not isinstance(event := session.next_event(), Signal):
            if isinstance(event, (ResponseHead, Frame, EndOfResponse, Cut)):
                out += session.send(event)
        if not (state(session) is State.DONE and session.keep_alive):
            break
        session.start_next_cycle()
    return out


def state(session: Session) -> State:
    return session.engine.state


@pytest.fixture
def wholes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The status of each response the proxy sent whole."""
    sent: list[int] = []
    send_replay = Session.send_replay

    def spy(self: Session) -> tuple[ResponseHead, bytes] | None:
        whole = send_replay(self)
        if whole is not None:
            sent.append(whole[0].status)
        return whole

    monkeypatch.setattr(Session, "send_replay", spy)
    return sent


@pytest.mark.parametrize("timing", ["fast", "realtime"])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_the_client_reads_the_bytes_a_session_sends(
    cassette: Path, timing: str, scenario: str, wholes: list[int]
) -> None:
    requests = SCENARIOS[scenario]
    expected = oracle(cassette, timing, requests)
    async with running(options(Mode.REPLAY, cassette, timing=timing)) as url:
        parts = urlsplit(url)
        assert parts.hostname
        assert parts.port
        got = b""
        with anyio.fail_after(20):
            async with await anyio.connect_tcp(parts.hostname, parts.port) as stream:
                for sent, data in enumerate(requests, 1):
                    await stream.send(data)  # each once the answer before it began
                    while got.count(b"HTTP/1.1 ") < sent:
                        got += await stream.receive()
                while True:  # the last request closes the connection
                    try:
                        got += await stream.receive()
                    except (anyio.EndOfStream, anyio.BrokenResourceError):
                        break
    assert got == expected
    assert got.count(b"HTTP/1.1 ") == len(requests)
    # every answer went whole, but a stream's in realtime (its frames wait)
    streams = sum(STREAM in data for data in requests)
    assert len(wholes) == len(requests) - (streams if timing == "realtime" else 0)
