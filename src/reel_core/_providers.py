"""Which provider a request is for, from its path and host.

Kept deliberately small here; the provider adapters build on it.
"""

from __future__ import annotations

__all__ = ["guess_provider"]


def guess_provider(path: str, host: str | None = None) -> str:
    """``openai``, ``anthropic``, ``gemini`` or ``generic``."""
    host = (host or "").lower()
    if "anthropic" in host or path.startswith("/v1/messages"):
        return "anthropic"
    if (
        "generativelanguage" in host
        or "aiplatform" in host
        or ("/models/" in path and (":generateContent" in path or ":streamGenerateContent" in path))
    ):
        return "gemini"
    if "openai" in host or path.startswith(
        ("/v1/chat/completions", "/v1/responses", "/v1/embeddings", "/v1/completions")
    ):
        return "openai"
    return "generic"
