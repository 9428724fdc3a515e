"""What every provider module shares: the :class:`Provider` record the
registry holds, the running usage tally the readers fold objects into, the
answer pieces, and the small value readers (counts, non-empty text).

A provider module (``openai.py``, ``anthropic.py``, ``gemini.py``,
``generic.py``) is pure functions over paths, headers and parsed JSON; it
keeps no state and does no I/O.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._http import Headers

__all__ = [
    "AnswerReader",
    "Claim",
    "Piece",
    "Price",
    "Provider",
    "Tally",
    "UsageReader",
    "body_model",
    "count",
    "dumps",
    "mapping",
    "string",
    "sub_count",
    "text",
]


class Tally:
    """The usage figures read so far from one response; provider readers
    fold JSON objects into it (``None`` means not reported yet)."""

    __slots__ = (
        "audio_cached",
        "audio_in",
        "audio_out",
        "cache_write",
        "cached",
        "embeddings",
        "first_ms",
        "includes_cached",
        "input",
        "model",
        "output",
        "reasoning",
    )

    def __init__(self, *, embeddings: bool = False) -> None:
        self.embeddings = embeddings
        self.model: str | None = None
        self.input: int | None = None
        self.output: int | None = None
        self.cached: int | None = None
        self.reasoning: int | None = None
        self.cache_write: int | None = None
        self.includes_cached = True
        self.first_ms: float | None = None
        #: Audio tokens (a part of ``input``, ``output``, ``cached``): the
        #: realtime APIs report them apart, and price them apart.
        self.audio_in: int | None = None
        self.audio_out: int | None = None
        self.audio_cached: int | None = None

    def set_model(self, value: Any) -> None:
        """Take ``value`` as the answering model when it names one."""
        if isinstance(value, str) and value:
            self.model = value


class Claim(enum.IntEnum):
    """How surely a reader (or a family test) knows that what it is offered
    is its own.  The registry offers each object (each path) to the surest
    claims first and, among equal claims, to the providers in their
    ``rank`` order; the first that claims it reads it."""

    #: By a type or event name, or a marker, that only its API uses
    #: (Anthropic's typed events, ``response.*``, ``:generateContent``).
    MARKED = 1
    #: By the keys an object has, or by the end of a path.
    SHAPED = 2
    #: Whatever no other reader claimed (a reader that claims everything).
    ANY = 3


#: Folds one JSON object of a response (with its ``type``, or else its SSE
#: event name, as ``kind``) into a :class:`Tally`: ``None`` when the object
#: is not this reader's shape, else whether it carries generated content.
UsageReader = Callable[[Tally, dict[str, Any], object], "bool | None"]


@dataclass(frozen=True)
class Piece:
    """A fragment of an answer: text, or a piece of a tool call."""

    text: str = ""
    #: A tool-call fragment: (slot, name or None, argument text).  An empty
    #: slot is a call complete in one piece.
    tool: tuple[str, str | None, str] | None = None


#: The answer fragments of one JSON object of a response (``kind`` as for
#: :data:`UsageReader`): ``None`` when the shape is not this reader's.
AnswerReader = Callable[[dict[str, Any], object], "list[Piece] | None"]


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    #: Cached-input (cache hit) rate; ``None`` when the model has no cache
    #: discount (cached tokens are then billed at the input rate).
    cached_input: float | None = None
    #: Cache-write rate (Anthropic's 5-minute writes); ``None``: the input rate.
    cache_write: float | None = None
    #: Audio token rates of the realtime models (input, cached input,
    #: output); ``None``: audio tokens are billed at the text rates.
    audio_input: float | None = None
    audio_cached_input: float | None = None
    audio_output: float | None = None


@dataclass(frozen=True)
class Provider:
    """Everything Reel knows about one provider, as values and functions.

    A provider is one module that ends with its ``PROVIDER``; every table
    and order Reel reads (recognition, routing hosts, drift fields, the
    readers' order, prompt keys, the SDKs' key and base-URL variables) is
    derived from the registry (``reel_core.tools.PROVIDERS``;
    ``reel_core.tools.register_provider`` adds one)."""

    #: The name stored in a cassette line's ``provider``.
    name: str
    #: The name people know it by, in messages (``"OpenAI"``).
    title: str
    #: Its place in the registry, lower first: the order a request is
    #: recognised in (the first whose ``recognizes`` holds names it), and
    #: among equal claims the order readers are offered an object in.
    #: ``generic`` recognizes anything, so it has the highest.
    rank: int
    #: The real API base URL, used when no upstream is configured.
    host: str | None
    #: Whether a request is for this provider: ``(path, lower-case host or
    #: "", headers)``.
    recognizes: Callable[[str, str, Headers], bool]
    #: Whether a request path belongs to this provider's API family, from
    #: the path alone (so a stored request maps to the same family).
    family: Callable[[str], bool]
    #: How surely ``family`` knows a path (see :class:`Claim`).
    family_claim: Claim
    #: Request fields that change between identical-in-intent calls
    #: (per-user ids, trace metadata), ignored by every match mode but exact.
    drift_fields: tuple[str, ...]
    #: The SSE event names (or object ``type`` values) of its streams.
    stream_event_kinds: frozenset[str]
    #: Whether its streams report token usage only when the request asks
    #: (OpenAI's ``stream_options.include_usage``).
    stream_usage_opt_in: bool
    #: The readers of its response objects' model, usage and first content,
    #: each with how surely it claims an object.
    usage_readers: tuple[tuple[Claim, UsageReader], ...]
    #: USD per million tokens by model name (read by :mod:`reel_core._prices`).
    prices: Mapping[str, Price]
    #: Model names that are not a price key plus a snapshot suffix.
    aliases: Mapping[str, str]
    #: The readers of its response objects' answer text and tool calls,
    #: each with how surely it claims an object.
    answer_readers: tuple[tuple[Claim, AnswerReader], ...]
    #: The request body keys its system prompt is under, then those of the
    #: rest of its prompt (read as text by the fuzzy match).
    system_keys: tuple[str, ...] = ()
    prompt_keys: tuple[str, ...] = ()
    #: The environment variables its SDKs read the API key from; a replay
    #: with none of them set sets the first to a placeholder.
    key_variables: tuple[str, ...] = ()
    #: The variable its SDKs read the base URL from, and what follows the
    #: proxy's URL in it (``/v1`` for OpenAI's): the pytest plugin's
    #: per-test proxy points it there.
    base_url_variable: str | None = None
    base_url_suffix: str = ""
    #: Its realtime (WebSocket) API: client message fields that change
    #: between identical-in-intent sessions (ignored outside exact mode) ...
    realtime_volatile: tuple[str, ...] = ()
    #: ... the error event a replay sends before closing on a client message
    #: that does not match (``None``: the provider has no error event) ...
    realtime_error: Callable[[str, str], bytes] | None = None
    #: ... and the reader of the usage its server messages report, summed
    #: over the session's turns.
    realtime_usage: UsageReader | None = None


def count(value: Any) -> int | None:
    """A token count, or ``None`` for anything that is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


def sub_count(obj: dict[str, Any], name: str, key: str) -> int | None:
    """The count at ``obj[name][key]``."""
    inner = obj.get(name)
    return count(inner.get(key)) if isinstance(inner, dict) else None


def text(value: Any) -> bool:
    """Whether ``value`` is non-empty text."""
    return isinstance(value, str) and value != ""


def string(value: Any) -> str:
    """``value`` if it is a string, else ``""``."""
    return value if isinstance(value, str) else ""


def mapping(value: Any) -> dict[str, Any]:
    """``value`` if it is an object, else ``{}``."""
    return value if isinstance(value, dict) else {}


def body_model(body: object) -> str | None:
    """The ``model`` a request body names (OpenAI, Anthropic)."""
    if isinstance(body, dict) and isinstance(body.get("model"), str):
        return str(body["model"])
    return None


def dumps(value: Any) -> str:
    """Compact JSON text of ``value`` (a tool call's arguments)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
