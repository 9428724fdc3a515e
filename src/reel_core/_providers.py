"""Which provider a request is for, and where it goes upstream.

Kept deliberately small here; the provider adapters build on it.
"""

from __future__ import annotations

from ._http import Headers, header_value

__all__ = [
    "DRIFT_FIELDS",
    "PROVIDER_HOSTS",
    "endpoint_family",
    "guess_provider",
    "model_of",
    "prompt_text",
    "route",
]

#: The real API host of each provider, used when no upstream is configured.
PROVIDER_HOSTS = {
    "openai": "https://api.openai.com",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com",
}


#: Request fields that differ between identical-in-intent calls, by API
#: family: ignored by every match mode but ``exact``.  Per-user ids, trace
#: metadata and cache-routing keys change from run to run without changing
#: what the model is asked.
DRIFT_FIELDS: dict[str, tuple[str, ...]] = {
    # OpenAI and OpenAI-compatible: end-user id, free-form metadata, prompt
    # cache routing key, hashed end-user id for abuse monitoring.
    "openai": ("user", "metadata", "prompt_cache_key", "safety_identifier"),
    # Anthropic: metadata.user_id (an opaque end-user id).
    "anthropic": ("metadata",),
    # Gemini: billing labels (Vertex AI).
    "gemini": ("labels",),
}


def endpoint_family(path: str) -> str | None:
    """The API family a request path belongs to, from the path alone (so a
    stored request maps to the same family): ``openai`` for chat
    completions, responses, completions and embeddings under any prefix
    (OpenAI-compatible servers included), ``anthropic`` for messages,
    ``gemini`` for generateContent calls, else ``None``."""
    if ":generateContent" in path or ":streamGenerateContent" in path:
        return "gemini"
    if path.endswith(("/messages", "/complete")) and "/threads/" not in path:
        return "anthropic"
    if path.endswith(("/chat/completions", "/responses", "/completions", "/embeddings")):
        return "openai"
    return None


def model_of(path: str, body: object) -> str | None:
    """The model a request asks for: the body's ``model``, or Gemini's
    ``models/{model}:method`` path segment."""
    if isinstance(body, dict) and isinstance(body.get("model"), str):
        return str(body["model"])
    if "/models/" in path:
        return path.rpartition("/models/")[2].partition(":")[0] or None
    return None


def _texts(value: object) -> list[str]:
    """Every string under ``text`` / ``content`` / ``input`` keys, in order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [t for item in value for t in _texts(item)]
    if isinstance(value, dict):
        out: list[str] = []
        for key in ("role", "text", "content", "parts", "input", "prompt", "system"):
            item = value.get(key)
            if key == "role":
                if isinstance(item, str):
                    out.append(item + ":")
            elif item is not None:
                out.extend(_texts(item))
        return out
    return []


def prompt_text(body: object) -> str:
    """The prompt of a request body, as plain text: system prompt, messages
    (OpenAI, Anthropic), input (Responses, embeddings), contents (Gemini),
    prompt (legacy completions)."""
    if not isinstance(body, dict):
        return ""
    parts: list[str] = []
    for key in ("system", "system_instruction", "systemInstruction", "instructions"):
        if key in body:
            parts.extend(_texts(body[key]))
    for key in ("messages", "input", "contents", "prompt"):
        if key in body:
            parts.extend(_texts(body[key]))
    return "\n".join(parts)


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
