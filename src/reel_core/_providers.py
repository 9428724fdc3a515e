"""Which provider a request is for, and where it goes upstream.

Kept deliberately small here; the provider adapters build on it.
"""

from __future__ import annotations

from ._http import Headers, header_value

__all__ = ["PROVIDER_HOSTS", "guess_provider", "route"]

#: The real API host of each provider, used when no upstream is configured.
PROVIDER_HOSTS = {
    "openai": "https://api.openai.com",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com",
}


def guess_provider(path: str, host: str | None = None, headers: Headers = ()) -> str:
    """``openai``, ``anthropic``, ``gemini`` or ``generic``."""
    host = (host or "").lower()
    if (
        "anthropic" in host
        or path.startswith(("/v1/messages", "/v1/complete"))
        or header_value(headers, b"anthropic-version") is not None
    ):
        return "anthropic"
    if (
        "generativelanguage" in host
        or "aiplatform" in host
        or path.startswith("/v1beta/")
        or header_value(headers, b"x-goog-api-key") is not None
        or ("/models/" in path and ":" in path.rpartition("/")[2])
    ):
        return "gemini"
    if "openai" in host or path.startswith("/v1/"):
        return "openai"
    return "generic"


def route(path: str, headers: Headers, upstream: str | None) -> str | None:
    """The URL to forward a request for ``path`` to: under ``upstream`` when
    one is configured, else at its provider's real host; ``None`` when the
    request is for no known provider."""
    if upstream:
        return upstream.rstrip("/") + path
    provider = guess_provider(path, None, headers)
    base = PROVIDER_HOSTS.get(provider)
    return None if base is None else base + path
