"""What Reel knows about each provider, one module per provider.

- :mod:`.openai` -- OpenAI (chat completions, Responses, completions,
  embeddings) and OpenAI-compatible servers;
- :mod:`.anthropic` -- Anthropic messages (and legacy complete);
- :mod:`.gemini` -- Gemini (AI Studio, Vertex AI);
- :mod:`.generic` -- requests for no known provider, and Ollama's own API;
- :mod:`._base` -- the :class:`Provider` record and what the modules share.

:data:`PROVIDERS` is the registry the rest of Reel reads; the functions
below answer one question each from it: which provider a request is for
(:func:`guess_provider`), where it goes (:func:`route`), its API family and
drift fields (:func:`endpoint_family`, :data:`DRIFT_FIELDS`), the model it
asks for (:func:`model_of`; :func:`request_model` from its bytes) and its
prompt as text (:func:`prompt_text`).
:data:`USAGE_READERS` and :data:`ANSWER_READERS` are the orders in which a
response object is offered to the providers' readers (the first that claims
it reads it) by :mod:`reel_core._usage` and the CLI.
"""

from __future__ import annotations

from types import MappingProxyType

from .._http import Headers
from .._nesting import load_json
from . import anthropic, gemini, generic, openai
from ._base import AnswerReader, Piece, Price, Provider, Tally, UsageReader, body_model

__all__ = [
    "ANSWER_READERS",
    "DRIFT_FIELDS",
    "PROVIDERS",
    "PROVIDER_HOSTS",
    "USAGE_FALLBACK",
    "USAGE_READERS",
    "AnswerReader",
    "Piece",
    "Price",
    "Provider",
    "Tally",
    "UsageReader",
    "answer_pieces",
    "endpoint_family",
    "guess_provider",
    "model_of",
    "prompt_text",
    "request_model",
    "route",
]

#: Every provider, by the name a cassette line stores, in the order a
#: request is recognised: the first whose ``recognizes`` holds names it
#: (``generic`` holds for anything).
PROVIDERS: MappingProxyType[str, Provider] = MappingProxyType(
    {p.name: p for p in (anthropic.PROVIDER, gemini.PROVIDER, openai.PROVIDER, generic.PROVIDER)}
)

#: The real API host of each provider, used when no upstream is configured.
PROVIDER_HOSTS: dict[str, str] = {p.name: p.host for p in PROVIDERS.values() if p.host}

#: Request fields that differ between identical-in-intent calls, by API
#: family: ignored by every match mode but ``exact``.  Per-user ids, trace
#: metadata and cache-routing keys change from run to run without changing
#: what the model is asked.
DRIFT_FIELDS: dict[str, tuple[str, ...]] = {
    p.name: p.drift_fields for p in PROVIDERS.values() if p.drift_fields
}

# The order path families are tried in: a Gemini method path is Gemini's
# even when it ends like another family's.
_FAMILY_ORDER = (gemini.PROVIDER, anthropic.PROVIDER, openai.PROVIDER)

#: The order a response object is offered to the usage readers: Anthropic's
#: typed events, the Responses API's, Gemini's; what none claims is read by
#: :data:`USAGE_FALLBACK`.
USAGE_READERS: tuple[UsageReader, ...] = (
    anthropic.read_usage,
    openai.read_responses_usage,
    gemini.read_usage,
)
#: Reads what no other usage reader claims, as an OpenAI chat completion
#: (or chunk), legacy completion, embeddings list or compatible server's
#: answer.
USAGE_FALLBACK = openai.read_chat_usage

#: The order a response object is offered to the answer readers; an object
#: none claims is not recognised.
ANSWER_READERS: tuple[AnswerReader, ...] = (
    anthropic.answer_pieces,
    openai.responses_pieces,
    gemini.answer_pieces,
    openai.chat_pieces,
    generic.answer_pieces,
)


def endpoint_family(path: str) -> str | None:
    """The API family a request path belongs to, from the path alone (so a
    stored request maps to the same family): ``openai`` for chat
    completions, responses, completions and embeddings under any prefix
    (OpenAI-compatible servers included), ``anthropic`` for messages,
    ``gemini`` for generateContent calls, else ``None``."""
    for provider in _FAMILY_ORDER:
        if provider.family(path):
            return provider.name
    return None


def model_of(path: str, body: object) -> str | None:
    """The model a request asks for: the body's ``model``, or Gemini's
    ``models/{model}:method`` path segment."""
    model = body_model(body)
    if model is not None:
        return model
    return gemini.path_model(path)


def request_model(path: str, body: bytes, provider: str | None = None) -> str | None:
    """The model a stored request asks for, from its bytes.

    Without ``provider`` (``reel inspect`` and ``reel cost``, when neither
    the line nor its response names one): :func:`model_of` of its JSON
    object body.  With the interaction's ``provider`` (the model a
    response's usage is counted for when the response names none): a
    non-empty ``model`` of the body, else the model of a Gemini
    ``models/{model}:method`` call (:func:`gemini.method_model`)."""
    if provider is None:
        try:
            value: object = load_json(body) if body[:1] == b"{" else None
        except ValueError:
            value = None
        return model_of(path, value)
    if b'"model"' in body:
        try:
            obj = load_json(body.decode("utf-8", "replace"))
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            model = obj.get("model")
            if isinstance(model, str) and model:
                return model
    return gemini.method_model(provider, path)


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
    lowered = (host or "").lower()
    # ``generic`` recognizes anything: the default is never used.
    return next((p.name for p in PROVIDERS.values() if p.recognizes(path, lowered, headers)), "")


def route(path: str, headers: Headers, upstream: str | None) -> str | None:
    """The URL to forward a request for ``path`` to: under ``upstream`` when
    one is configured, else at its provider's real host; ``None`` when the
    request is for no known provider."""
    if upstream:
        return upstream.rstrip("/") + path
    provider = guess_provider(path, None, headers)
    base = PROVIDER_HOSTS.get(provider)
    return None if base is None else base + path


def answer_pieces(obj: object, kind: object = None) -> list[Piece] | None:
    """The answer fragments (text, tool-call pieces) of one JSON object of a
    response, by the first provider reader that claims it; ``None`` when
    none does.  ``kind`` is the SSE event name, used when the object has no
    ``type``."""
    if not isinstance(obj, dict):
        return None
    kind = obj.get("type", kind)
    for read in ANSWER_READERS:
        pieces = read(obj, kind)
        if pieces is not None:
            return pieces
    return None
