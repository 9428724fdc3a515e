"""``record_exchange``: a finished exchange to the interaction a recording
session would have written, without a session."""

from __future__ import annotations

import gzip

import pytest

from reel_core import (
    Cassette,
    CassetteMeta,
    Config,
    Engine,
    Interaction,
    Limits,
    MatchConfig,
    MatchMode,
    Mode,
    Recorded,
    Redactor,
    RemoteProtocolError,
    Request,
)
from reel_core.tools import record_exchange

from ._helpers import pull

SALT = "5" * 32
KEY = "sk-proj-" + "a1B2c3D4e5" * 4
Pairs = tuple[tuple[bytes, bytes], ...]


def through_session(
    cassette: Cassette,
    request: Request,
    status: int,
    headers: Pairs,
    chunks: list[tuple[float, bytes]],
    *,
    redactor: Redactor,
    credential_headers: tuple[str, ...] = (),
    timestamp: float | None = None,
) -> Interaction:
    """What a recording engine writes for the exchange (head at 0)."""
    config = Config(mode=Mode.RECORD, redactor=redactor, credential_headers=credential_headers)
    session = Engine(cassette, config)
    session.receive_request(request)
    pull(session)
    session.upstream_head(status, headers, mono=0.0, wall=timestamp)
    for at, data in chunks:
        session.upstream_data(data, mono=at)
    session.upstream_end(mono=max((at for at, _ in chunks), default=0.0))
    pull(session)
    recorded = session.record()
    assert isinstance(recorded, Recorded)
    return cassette.interactions()[-1]


SSE_BODY = (
    b'data: {"choices":[{"delta":{"content":"Hi ' + KEY.encode() + b'"}}],"model":"gpt-4o"}\n\n'
    b'data: {"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\ndata: [DONE]\n\n'
)

EXCHANGES: list[tuple[str, Request, int, Pairs, list[tuple[float, bytes]]]] = [
    (
        "json",
        Request(
            "POST",
            "/v1/chat/completions",
            ((b"host", b"api.openai.com"), (b"authorization", b"Bearer " + KEY.encode())),
            b'{"model":"gpt-4o","messages":[{"role":"user","content":"mail ann@example.com"}]}',
        ),
        200,
        ((b"content-type", b"application/json"), (b"set-cookie", b"a=b"), (b"x-request-id", b"r")),
        [(0.0, b'{"model":"gpt-4o","usage":{"prompt_tokens":5,"completion_tokens":1}}')],
    ),
    (
        "sse in chunks, timed",
        Request(
            "POST",
            "/v1/chat/completions?api-key=" + KEY,
            ((b"host", b"api.openai.com"), (b"x-my-token", b"tok-123456789")),
            b'{"model":"gpt-4o","stream":true,"user":"tok-123456789"}',
        ),
        200,
        ((b"content-type", b"text/event-stream"),),
        [(0.01 * i, SSE_BODY[i * 17 : (i + 1) * 17]) for i in range(len(SSE_BODY) // 17 + 1)],
    ),
    (
        "gzip body, gzip request",
        Request(
            "POST",
            "/v1/messages",
            ((b"host", b"api.anthropic.com"), (b"content-encoding", b"gzip")),
            gzip.compress(b'{"model":"claude-sonnet-4-5","max_tokens":5}'),
        ),
        200,
        ((b"content-type", b"application/json"), (b"content-encoding", b"gzip")),
        [(0.0, gzip.compress(b'{"type":"message","content":[{"type":"text","text":"ok"}]}'))],
    ),
    (
        "form, error, no body",
        Request(
            "POST",
            "/v1/audio/transcriptions",
            ((b"content-type", b"application/x-www-form-urlencoded"),),
            b"model=whisper-1&password=hunter2",
        ),
        429,
        (),
        [],
    ),
]


@pytest.mark.parametrize(
    ("request_", "status", "headers", "chunks"),
    [case[1:] for case in EXCHANGES],
    ids=[case[0] for case in EXCHANGES],
)
def test_records_what_a_session_records(
    request_: Request, status: int, headers: Pairs, chunks: list[tuple[float, bytes]]
) -> None:
    redactor = Redactor(salt=SALT)
    for repeat in range(3):  # repeats are numbered the same way too
        ours = Cassette("ours")
        theirs = Cassette("theirs")
        for _ in range(repeat + 1):
            got = record_exchange(
                request_,
                status,
                headers,
                chunks,
                redactor=redactor,
                cassette=ours,
                credential_headers=("X-My-Token",),
                timestamp=1_760_000_000.5,
            )
            ours.add(got)
            want = through_session(
                theirs,
                request_,
                status,
                headers,
                chunks,
                redactor=redactor,
                credential_headers=("X-My-Token",),
                timestamp=1_760_000_000.5,
            )
            assert got == want
            assert got.to_line() == want.to_line()
        assert got.id.endswith(f"-{repeat + 1}") == (repeat > 0)


def test_whole_bytes_are_one_chunk_at_the_head() -> None:
    request = EXCHANGES[0][1]
    body = EXCHANGES[0][4][0][1]
    one = record_exchange(request, 200, EXCHANGES[0][3], body, redactor=Redactor(salt=SALT))
    two = record_exchange(
        request, 200, EXCHANGES[0][3], [(0.0, body)], redactor=Redactor(salt=SALT)
    )
    assert one == two
    assert KEY not in one.to_line().decode()
    assert "ann@example.com" not in one.to_line().decode()
    assert one.meta["model"] == "gpt-4o"
    assert one.meta["tokens_in"] == 5
    assert one.provider == "openai"
    assert one.endpoint == "POST /v1/chat/completions"
    assert one.timestamp is None
    assert dict(one.response.headers) == {"content-type": "application/json", "x-request-id": "r"}


def test_keyed_under_the_cassettes_settings() -> None:
    request = Request("POST", "/v1/embeddings", (), b'{"input": "a",  "model": "m"}')
    exact = Cassette("exact", meta=CassetteMeta(match=MatchConfig(MatchMode.EXACT)))
    plain = record_exchange(request, 200, (), b"{}", redactor=Redactor())
    keyed = record_exchange(request, 200, (), b"{}", redactor=Redactor(), cassette=exact)
    assert plain.key == plain.request.key(MatchConfig())
    assert keyed.key == keyed.request.key(MatchConfig(MatchMode.EXACT)) != plain.key


def test_a_body_over_the_limit_is_refused_as_a_session_refuses_it() -> None:
    request = Request("POST", "/v1/embeddings", (), b"x" * 11)
    with pytest.raises(RemoteProtocolError) as info:
        record_exchange(request, 200, (), b"", redactor=Redactor(), limits=Limits(max_body=10))
    assert info.value.status == 413
