"""Decisions the ``reel`` commands made themselves, now the core's (and
public): a response body diff, an SSE body stored without its content type,
the model a stored request asks for."""

from __future__ import annotations

import pytest

from reel_core.tools import FieldDiff, body_diff, is_sse_stream, request_model


def test_body_diff() -> None:
    assert body_diff(b'{"a":1}', b'{"a":1}') == []
    assert body_diff(b'{"a":1,"b":[1]}', b'{"a":2,"b":[1,3]}') == [
        FieldDiff("body.a", "changed", 1, 2),
        FieldDiff("body.b[1]", "added", received=3),
    ]
    assert body_diff(b"plain", b'{"a":1}') == [FieldDiff("body", "changed", "plain", '{"a":1}')]
    assert body_diff(b"\xff", b"", prefix="response") == [
        FieldDiff("response", "changed", "\ufffd", "")
    ]


@pytest.mark.parametrize(
    ("body", "sse"),
    [
        (b"data: {}\n\n", True),
        (b"  event: x\r\ndata: 1\r\n\r\n", True),
        (b": comment\r\r", True),
        (b"data: {} but no event end\n", False),
        (b'{"data: 1": 2}\n\n', False),
        (b"", False),
    ],
)
def test_is_sse_stream(body: bytes, sse: bool) -> None:
    assert is_sse_stream(body) is sse


@pytest.mark.parametrize(
    ("path", "body", "model"),
    [
        ("/v1/chat/completions", b'{"model":"gpt-4o"}', "gpt-4o"),
        ("/v1beta/models/gemini-2.5-flash:generateContent", b'{"contents":[]}', "gemini-2.5-flash"),
        ("/v1beta/models/gemini-2.5-flash:generateContent", b"{not json", "gemini-2.5-flash"),
        ("/v1/chat/completions", b'["model"]', None),
        ("/v1/chat/completions", b"", None),
        ("/v1/chat/completions", b"{" * 100_000, None),
    ],
)
def test_request_model(path: str, body: bytes, model: str | None) -> None:
    assert request_model(path, body) == model


@pytest.mark.parametrize(
    ("path", "body", "provider", "model"),
    [
        # the usage fallback: a body's non-empty model, else a Gemini call's path
        ("/v1/chat/completions", b' {"model":"gpt-4o"}', "openai", "gpt-4o"),
        ("/v1/chat/completions", b'{"model":""}', "openai", None),
        ("/v1/chat/completions", b'{"model": broken', "openai", None),
        ("/v1/models/gpt-4o", b"", "openai", None),
        ("/v1/models/gpt-4o", b"", None, "gpt-4o"),
        ("/v1beta/models/gemini-2.5-pro", b"", "gemini", "gemini-2.5-pro"),
        ("/x/models/m:generateContent", b'{"model":""}', "generic", "m"),
    ],
)
def test_request_model_of_a_provider(
    path: str, body: bytes, provider: str | None, model: str | None
) -> None:
    assert request_model(path, body, provider) == model
