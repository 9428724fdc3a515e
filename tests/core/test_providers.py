from __future__ import annotations

import pytest

from reel_core._http import Headers
from reel_core._providers import (
    DRIFT_FIELDS,
    PROVIDER_HOSTS,
    endpoint_family,
    guess_provider,
    model_of,
    prompt_text,
    route,
)


@pytest.mark.parametrize(
    ("path", "host", "provider"),
    [
        ("/v1/messages", None, "anthropic"),
        ("/v1/messages/count_tokens", "127.0.0.1:7878", "anthropic"),
        ("/v1/complete", None, "anthropic"),
        ("/anything", "api.anthropic.com", "anthropic"),
        ("/anything", "API.ANTHROPIC.COM", "anthropic"),
        ("/v1beta/models/gemini-2.5-flash:generateContent", None, "gemini"),
        ("/v1beta/models/gemini-2.5-flash:streamGenerateContent", None, "gemini"),
        ("/v1beta/models", None, "gemini"),
        ("/v1/models/gemini-pro:countTokens", None, "gemini"),
        ("/anything", "generativelanguage.googleapis.com", "gemini"),
        ("/v1/projects/p/locations/l/x", "us-central1-aiplatform.googleapis.com", "gemini"),
        ("/v1/chat/completions", None, "openai"),
        ("/v1/responses", None, "openai"),
        ("/v1/embeddings", None, "openai"),
        ("/v1/models", None, "openai"),
        ("/v1/models/gpt-4o", None, "openai"),
        ("/files", "api.openai.com", "openai"),
        ("/api/generate", "127.0.0.1:11434", "generic"),
        ("/models/x", None, "generic"),
        ("/chat/completions", None, "generic"),
        ("/", "", "generic"),
    ],
)
def test_guess_provider(path: str, host: str | None, provider: str) -> None:
    assert guess_provider(path, host) == provider


def test_host_wins_over_path() -> None:
    assert guess_provider("/v1/chat/completions", "api.anthropic.com") == "anthropic"
    assert guess_provider("/v1/chat/completions", "generativelanguage.googleapis.com") == "gemini"


@pytest.mark.parametrize(
    ("headers", "provider"),
    [
        (((b"anthropic-version", b"2023-06-01"),), "anthropic"),
        (((b"x-goog-api-key", b"AIza..."),), "gemini"),
        (((b"authorization", b"Bearer x"),), "generic"),
        ((), "generic"),
    ],
)
def test_headers_name_the_provider(headers: Headers, provider: str) -> None:
    assert guess_provider("/chat", None, headers) == provider


def test_route_to_a_configured_upstream_keeps_the_path() -> None:
    assert route("/v1/chat/completions", (), "http://127.0.0.1:9/base/") == (
        "http://127.0.0.1:9/base/v1/chat/completions"
    )
    assert route("/anything", (), "http://u") == "http://u/anything"


@pytest.mark.parametrize(
    ("path", "headers", "url"),
    [
        ("/v1/chat/completions", (), "https://api.openai.com/v1/chat/completions"),
        ("/v1/messages", (), "https://api.anthropic.com/v1/messages"),
        (
            "/v1beta/models/g:generateContent",
            (),
            "https://generativelanguage.googleapis.com/v1beta/models/g:generateContent",
        ),
        ("/chat", ((b"anthropic-version", b"1"),), "https://api.anthropic.com/chat"),
        ("/api/generate", (), None),
    ],
)
def test_route_to_the_provider_host(path: str, headers: Headers, url: str | None) -> None:
    assert route(path, headers, None) == url
    assert route(path, headers, "") == url  # an empty upstream is no upstream


def test_provider_hosts_are_https() -> None:
    assert set(PROVIDER_HOSTS) == {"openai", "anthropic", "gemini", "xai"}
    assert all(u.startswith("https://") and not u.endswith("/") for u in PROVIDER_HOSTS.values())


@pytest.mark.parametrize(
    ("path", "family"),
    [
        ("/v1/chat/completions", "openai"),
        ("/openai/deployments/gpt-4o/chat/completions", "openai"),
        ("/v1/responses", "openai"),
        ("/v1/completions", "openai"),
        ("/v1/embeddings", "openai"),
        ("/v1/messages", "anthropic"),
        ("/v1/complete", "anthropic"),
        ("/v1/threads/t_1/messages", None),
        ("/v1beta/models/g:generateContent", "gemini"),
        ("/v1beta/models/g:streamGenerateContent", "gemini"),
        ("/v1/models", None),
        ("/api/generate", None),
        ("/xai_api.Chat/GetCompletion", "xai"),
    ],
)
def test_endpoint_family(path: str, family: str | None) -> None:
    assert endpoint_family(path) == family


def test_drift_fields_cover_every_family() -> None:
    assert set(DRIFT_FIELDS) == {"openai", "anthropic", "gemini", "xai"}
    assert "user" in DRIFT_FIELDS["openai"]
    assert DRIFT_FIELDS["anthropic"] == ("metadata",)


@pytest.mark.parametrize(
    ("path", "body", "model"),
    [
        ("/v1/chat/completions", {"model": "gpt-4o"}, "gpt-4o"),
        ("/v1beta/models/gemini-2.5-flash:generateContent", {"contents": []}, "gemini-2.5-flash"),
        ("/v1beta/models/gemini-2.5-flash:generateContent", {"model": "x"}, "x"),
        ("/v1beta/models/:generateContent", None, None),
        ("/v1/chat/completions", {"model": 5}, None),
        ("/v1/chat/completions", ["gpt-4o"], None),
        ("/v1/chat/completions", None, None),
    ],
)
def test_model_of(path: str, body: object, model: str | None) -> None:
    assert model_of(path, body) == model


@pytest.mark.parametrize(
    ("body", "text"),
    [
        (
            {
                "model": "m",
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {
                        "role": "user",
                        "content": [{"type": "text", "text": "hi"}, {"type": "image"}],
                    },
                ],
            },
            "system:\nbe brief\nuser:\nhi",
        ),
        (
            {
                "system": [{"type": "text", "text": "sys"}],
                "messages": [{"role": "user", "content": "q"}],
            },
            "sys\nuser:\nq",
        ),
        (
            {
                "systemInstruction": {"parts": [{"text": "rules"}]},
                "contents": [{"role": "user", "parts": [{"text": "a"}, {"inlineData": {}}]}],
            },
            "rules\nuser:\na",
        ),
        ({"instructions": "terse", "input": "hello"}, "terse\nhello"),
        ({"input": ["one", "two"]}, "one\ntwo"),
        ({"prompt": "legacy"}, "legacy"),
        ({"system_instruction": {"parts": [{"text": "s"}]}}, "s"),
        ({"messages": [{"role": 1, "content": 2}]}, ""),
        ({"model": "m"}, ""),
        (["not", "a", "dict"], ""),
        (None, ""),
    ],
)
def test_prompt_text(body: object, text: str) -> None:
    assert prompt_text(body) == text
