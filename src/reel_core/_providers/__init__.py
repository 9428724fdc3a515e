"""What Reel knows about each provider, one module per provider.

- :mod:`.openai` -- OpenAI (chat completions, Responses, completions,
  embeddings) and OpenAI-compatible servers;
- :mod:`.anthropic` -- Anthropic messages (and legacy complete);
- :mod:`.gemini` -- Gemini (AI Studio, Vertex AI);
- :mod:`.xai` -- xAI's gRPC API (``xai-sdk``), read through a descriptor set;
- :mod:`.generic` -- requests for no known provider, and Ollama's own API;
- :mod:`._base` -- the :class:`Provider` record and what the modules share.

:data:`PROVIDERS` is the registry the rest of Reel reads, in rank order;
:func:`register_provider` adds one (a provider is one module: its
``PROVIDER`` carries everything below).  The functions below answer one
question each from it: which provider a request is for
(:func:`guess_provider`), where it goes (:func:`route`), its API family and
drift fields (:func:`endpoint_family`, :data:`DRIFT_FIELDS`), the model it
asks for (:func:`model_of`; :func:`request_model` from its bytes) and its
prompt as text (:func:`prompt_text`).  :data:`USAGE_READERS` and
:data:`ANSWER_READERS` are the orders in which a response object is offered
to the providers' readers (the first that claims it reads it) by
:mod:`reel_core._usage` and the CLI: the surest claims first, then by rank.
Every table is derived again when a provider is registered, in place, so a
module that imported one sees the change; a module above this one that
derives a table of its own asks to be told (:func:`on_register`).
"""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType
from typing import TypeVar

from .._http import Headers
from .._nesting import load_json
from .._protobuf import grpc_method
from . import anthropic, gemini, generic, openai, xai
from ._base import (
    AnswerReader,
    Claim,
    Piece,
    Price,
    Provider,
    Tally,
    UsageReader,
    body_model,
)

__all__ = [
    "ANSWER_READERS",
    "DRIFT_FIELDS",
    "PROVIDERS",
    "PROVIDER_HOSTS",
    "USAGE_READERS",
    "AnswerReader",
    "Claim",
    "Piece",
    "Price",
    "Provider",
    "Tally",
    "UsageReader",
    "answer_pieces",
    "endpoint_family",
    "guess_provider",
    "model_of",
    "on_register",
    "prompt_text",
    "register_provider",
    "request_model",
    "route",
    "routed_titles",
    "unregister_provider",
]

_REGISTERED: dict[str, Provider] = {}

#: Every provider, by the name a cassette line stores, in rank order: the
#: order a request is recognised in (the first whose ``recognizes`` holds
#: names it; ``generic`` holds for anything, and is last).
PROVIDERS: MappingProxyType[str, Provider] = MappingProxyType(_REGISTERED)

#: The real API host of each provider, used when no upstream is configured.
PROVIDER_HOSTS: dict[str, str] = {}

#: Request fields that differ between identical-in-intent calls, by API
#: family: ignored by every match mode but ``exact``.  Per-user ids, trace
#: metadata and cache-routing keys change from run to run without changing
#: what the model is asked.
DRIFT_FIELDS: dict[str, tuple[str, ...]] = {}

#: The order a response object is offered to the usage readers (the surest
#: claims first, then by rank): Anthropic's typed events, the Responses
#: API's, Gemini's, and last what none claims, read as an OpenAI chat
#: completion (or chunk), legacy completion, embeddings list or compatible
#: server's answer.
USAGE_READERS: list[UsageReader] = []

#: The order a response object is offered to the answer readers; an object
#: none claims is not recognised.
ANSWER_READERS: list[AnswerReader] = []

# The order path families are tried in (a Gemini method path is Gemini's
# even when it ends like another family's), and the body keys of a prompt.
_FAMILY_ORDER: list[Provider] = []
_SYSTEM_KEYS: list[str] = []
_PROMPT_KEYS: list[str] = []
_ON_REGISTER: list[Callable[[], object]] = []


_R = TypeVar("_R")


def _claimed(
    providers: list[Provider], readers: Callable[[Provider], tuple[tuple[Claim, _R], ...]]
) -> list[_R]:
    """The readers of every provider, the surest claims first, then by rank."""
    ranked = [(claim, p.rank, read) for p in providers for claim, read in readers(p)]
    return [read for _, _, read in sorted(ranked, key=lambda r: (r[0], r[1]))]


def _derive() -> None:
    """Every table again, from the registry, in place."""
    providers = sorted(_REGISTERED.values(), key=lambda p: p.rank)
    _REGISTERED.clear()
    _REGISTERED.update((p.name, p) for p in providers)
    PROVIDER_HOSTS.clear()
    PROVIDER_HOSTS.update((p.name, p.host) for p in providers if p.host)
    DRIFT_FIELDS.clear()
    DRIFT_FIELDS.update((p.name, p.drift_fields) for p in providers if p.drift_fields)
    USAGE_READERS[:] = _claimed(providers, lambda p: p.usage_readers)
    ANSWER_READERS[:] = _claimed(providers, lambda p: p.answer_readers)
    _FAMILY_ORDER[:] = sorted(providers, key=lambda p: (p.family_claim, p.rank))
    _SYSTEM_KEYS[:] = dict.fromkeys(k for p in providers for k in p.system_keys)
    _PROMPT_KEYS[:] = dict.fromkeys(k for p in providers for k in p.prompt_keys)
    for hook in _ON_REGISTER:
        hook()


def register_provider(provider: Provider) -> None:
    """Add ``provider`` to the registry (one of the same name is replaced),
    and derive every table from it again: a provider is then recognised,
    routed, read and priced, and its SDKs' variables are set by the pytest
    plugin, with no other change.  Call it when its module is imported,
    before the requests it should see (the tables change in place, so not
    while other threads decide requests)."""
    if not isinstance(provider, Provider):
        raise TypeError(f"not a Provider: {provider!r}")
    _REGISTERED[provider.name] = provider
    _derive()


def unregister_provider(name: str) -> None:
    """Take the provider ``name`` out of the registry again (a test's)."""
    del _REGISTERED[name]
    _derive()


def on_register(hook: Callable[[], object]) -> None:
    """Call ``hook`` whenever the registry changes (a module above this one
    that derives a table of its own from it: prices, cached keys)."""
    _ON_REGISTER.append(hook)


def routed_titles() -> str:
    """The providers Reel routes to their own host, for a message:
    ``"Anthropic, Gemini, xAI or OpenAI"``."""
    titles = [p.title for p in PROVIDERS.values() if p.host]
    return " or ".join([", ".join(titles[:-1]), titles[-1]] if len(titles) > 1 else titles)


# Reel's own (in any order: each provider's rank places it)
for _module in (anthropic, gemini, generic, openai, xai):
    _REGISTERED[_module.PROVIDER.name] = _module.PROVIDER
del _module
_derive()


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
    """The model a request asks for: the body's ``model``, the first
    message's of a gRPC call read through a descriptor set
    (``{"messages": [...]}``), or Gemini's ``models/{model}:method`` path
    segment."""
    model = body_model(body)
    if model is not None:
        return model
    if grpc_method(path) is not None and isinstance(body, dict):
        messages = body.get("messages")
        if isinstance(messages, list) and messages:
            return body_model(messages[0])
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
        # "messages": a gRPC call's request read through a descriptor set
        # holds its prompt one level down (xAI's {"messages": [{"messages": ...}]})
        keys = ("role", "text", "content", "parts", "input", "prompt", "system", "messages")
        for key in keys:
            item = value.get(key)
            if key == "role":
                if isinstance(item, str):
                    out.append(item + ":")
            elif item is not None:
                out.extend(_texts(item))
        return out
    return []


def prompt_text(body: object) -> str:
    """The prompt of a request body, as plain text: under the providers'
    system keys, then their prompt keys (rank order): system prompt,
    messages (OpenAI, Anthropic), contents (Gemini), input (Responses,
    embeddings), prompt (legacy completions)."""
    if not isinstance(body, dict):
        return ""
    parts: list[str] = []
    for key in (*_SYSTEM_KEYS, *_PROMPT_KEYS):
        if key in body:
            parts.extend(_texts(body[key]))
    return "\n".join(parts)


def guess_provider(path: str, host: str | None = None, headers: Headers = ()) -> str:
    """``openai``, ``anthropic``, ``gemini``, ``xai`` or ``generic``."""
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
