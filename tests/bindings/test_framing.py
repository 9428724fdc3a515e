"""A hand-edited line's framing headers (a ``Content-Length`` that is not
the body's, a ``Transfer-Encoding``, ``Connection``) are not replayed: every
binding frames the body it answers with itself, once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reel_core import (
    Cassette,
    CassetteMeta,
    Interaction,
    MatchConfig,
    Mode,
    RecordedRequest,
    RecordedResponse,
)
from reel_core.tools import match_key

from .openers import BINDINGS, Call

CHAT = "/v1/chat/completions"
#: Nothing listens there: a replay that went upstream would fail.
GONE = "http://127.0.0.1:9"
FRAMING = (
    ("Content-Length", "999"),
    ("Transfer-Encoding", "chunked"),
    ("Connection", "close"),
    ("Keep-Alive", "timeout=5"),
)
ANSWER = b'{"ok": 1}'
FRAMES = ((0.0, b"data: 1\n\n"), (1.0, b"data: [DONE]\n\n"))


def _line(n: int, response: RecordedResponse) -> Interaction:
    body = json.dumps({"model": "m", "n": n}).encode()
    return Interaction(
        key=match_key("POST", CHAT, (), body, MatchConfig()),
        id=f"framed-{n}",
        request=RecordedRequest("POST", CHAT, (), body),
        response=response,
    )


@pytest.fixture
def cassette(tmp_path: Path) -> Path:
    store = Cassette(meta=CassetteMeta())
    whole = RecordedResponse(200, (("content-type", "application/json"), *FRAMING), body=ANSWER)
    stream = RecordedResponse(
        200,
        (("content-type", "text/event-stream"), *FRAMING),
        stream="sse",
        frames=FRAMES,
        end_ms=2.0,
    )
    store.add(_line(0, whole))
    store.add(_line(1, stream))
    path = tmp_path / "framed.jsonl"
    path.write_bytes(store.dumps())
    return path


@pytest.mark.parametrize("binding", list(BINDINGS))
def test_a_replay_frames_its_body_itself(cassette: Path, binding: str) -> None:
    with BINDINGS[binding](cassette, Mode.REPLAY, GONE) as send:
        replies = [
            send(Call("POST", CHAT, json.dumps({"model": "m", "n": n}).encode())) for n in (0, 1)
        ]
    for reply, body in zip(replies, (ANSWER, b"".join(d for _, d in FRAMES)), strict=True):
        assert (reply.status, reply.body) == (200, body)
        names = [name for name, _ in reply.headers]
        lengths = [value for name, value in reply.headers if name == "content-length"]
        assert lengths in ([], [str(len(body))]), reply.headers  # never 999, never twice
        assert names.count("transfer-encoding") <= 1
        assert not (lengths and "transfer-encoding" in names), reply.headers
        assert "keep-alive" not in names
    assert [v for n, v in replies[0].headers if n == "content-length"] == [str(len(ANSWER))]
