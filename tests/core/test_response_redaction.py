"""One rule for what of a response is scrubbed: ``RecordedResponse.redacted``,
used when a response is recorded and by ``reel redact``."""

from __future__ import annotations

from collections.abc import Callable

from reel_core import (
    Interaction,
    MatchConfig,
    RecordedRequest,
    RecordedResponse,
    Redactor,
    StreamCut,
    UpstreamError,
)
from reel_core._record import Recorder

KEY = "sk-proj-" + "Zx9Yw8Vu7T" * 4
REQUEST = RecordedRequest("POST", "/v1/chat/completions", (), b'{"model":"m","stream":true}')


def record(
    headers: tuple[tuple[bytes, bytes], ...], chunks: list[bytes], cut: str | None
) -> Interaction:
    recorder = Recorder(
        REQUEST, key="sha256:" + "0" * 64, id="0" * 12, redactor=Redactor(salt="7" * 32)
    )
    recorder.head(200, headers, 0.0, None)
    for i, chunk in enumerate(chunks):
        recorder.data(chunk, i * 0.01)
    if cut is None:
        return recorder.end(1.0)
    return recorder.fail(UpstreamError.RESET, cut, 1.0)


def heard_into(heard: list[str]) -> Callable[[str, list[str]], None]:
    return lambda where, kinds: heard.extend(f"{where}: {k}" for k in kinds)


def test_what_is_recorded_has_nothing_left_to_redact() -> None:
    sse = ((b"content-type", b"text/event-stream"), (b"x-request-id", KEY.encode()))
    body = b'data: {"k":"' + KEY.encode() + b'"}\n\ndata: {"mail":"ann@example.com"}\n\n'
    cases = [
        record(sse, [body[:9], body[9:30], body[30:]], None),
        record(sse, [body[:20]], f"reset while reading (token {KEY})"),
        record(((b"content-type", b"application/x-ndjson"),), [body[:15], body[15:]], None),
        record(((b"content-type", b"application/json"),), [b'{"a":"' + KEY.encode() + b'"}'], None),
    ]
    for recorded in cases:
        heard: list[str] = []
        again = recorded.redacted(Redactor(salt="7" * 32), MatchConfig(), heard_into(heard))
        assert again is recorded
        assert heard == []
        assert KEY not in recorded.to_line().decode()
        assert "ann@example.com" not in recorded.to_line().decode()
    assert cases[1].response.cut is not None
    assert "[REDACTED:" in cases[1].response.cut.detail


def test_findings_say_where() -> None:
    response = RecordedResponse(
        200,
        (("Set-Cookie", "a=b"), ("content-type", "text/event-stream"), ("x-request-id", KEY)),
        stream="sse",
        frames=((0.0, b"data: ok\n\n"), (1.0, b"data: " + KEY.encode() + b"\n\n")),
        cut=StreamCut(2.0, "reset", "mail ann@example.com"),
    )
    heard: list[tuple[str, str]] = []
    out = response.redacted(
        Redactor(), lambda where, kinds: heard.extend((where, k) for k in kinds)
    )
    assert list(heard) == [
        ("response.headers.set-cookie", "unsafe-header"),
        ("response.headers.x-request-id", "openai-key"),
        ("response.frames[1]", "openai-key"),
        ("response.cut", "email"),
    ]
    assert [name for name, _ in out.headers] == ["content-type", "x-request-id"]
    assert out.frames[0] == response.frames[0]
    assert response.redacted(Redactor()) == out  # the same, found or not
    chunks = RecordedResponse(
        200, stream="chunks", frames=((0.0, KEY[:10].encode()), (1.0, KEY[10:].encode()))
    )
    heard.clear()
    split = chunks.redacted(
        Redactor(), lambda where, kinds: heard.extend((where, k) for k in kinds)
    )
    assert KEY not in split.content.decode()
    assert heard == [("response.frames", "openai-key")]


def test_an_interaction_redacted_again() -> None:
    line = Interaction(
        key="sha256:" + "0" * 64,
        id="0" * 12,
        request=RecordedRequest("POST", f"/v1/x/{KEY}", (), b"{}"),
        response=RecordedResponse(200, body=b"ok"),
        endpoint="custom ann@example.com",
        meta={"n": 3, "none": None, "notes": ["a", {"mail": "ann@example.com"}], "ok": True},
    )
    heard: list[str] = []
    out = line.redacted(Redactor(), MatchConfig(), heard_into(heard))
    assert heard == [
        "request.path: openai-key",
        "endpoint: email",
        "meta.notes[1].mail: email",
    ]
    assert out.id == line.id
    assert out.key == out.request.key(MatchConfig()) != line.key
    assert out.endpoint == "custom [REDACTED:email]"
    assert out.meta == {
        "n": 3,
        "none": None,
        "notes": ["a", {"mail": "[REDACTED:email]"}],
        "ok": True,
    }
    assert line.redacted(Redactor(), MatchConfig()) == out  # found or not
    clean = out.redacted(Redactor(), MatchConfig())
    assert clean is out
