"""What an exchange cost: a price table kept as Python data, and the sum.

Prices are USD per million tokens at each provider's standard (pay as you
go, non-batch, non-priority) rate.  Where a provider charges more past a
prompt length (Gemini 2.5 Pro and Gemini 3 Pro above 200k prompt tokens,
Claude Sonnet 4/4.5 above 200k with the 1M-context beta, GPT-5.4 and GPT-5.5
above 272k), the table holds the base tier: costs of such long prompts are
under-estimated.  Audio, image and tool fees (web search, code execution)
are not modelled, but for the realtime models (OpenAI Realtime, Gemini
Live), whose audio tokens have rates of their own (:class:`Price`'s
``audio_*``): the audio part of a count is billed at them, the rest at the
text rates.

How cache reads are billed differs by provider, and :func:`cost_usd`
follows :attr:`Usage.input_includes_cached <reel_core._usage.Usage>`:

- OpenAI and Gemini count cached tokens *inside* the input count: the cached
  part is billed at the cached rate and the rest at the input rate.
- Anthropic reports cache reads (``cache_read_input_tokens``) and cache
  writes (``cache_creation_input_tokens``) *apart from* ``input_tokens``: all
  three are added, reads at the cache-hit rate, writes at the 5-minute
  cache-write rate (1.25x input; 1-hour writes cost 2x input and are
  under-estimated).

Output tokens include reasoning/thinking tokens for every provider, all
billed at the output rate.
"""

from __future__ import annotations

import functools
import re

from ._providers import PROVIDERS, Price, on_register
from ._usage import Usage

__all__ = ["ALIASES", "PRICES", "PRICES_CHECKED", "Price", "cost_usd", "resolve_model"]

#: The date the prices below are known to have been current on.  They were
#: read on 2026-11-22 from stored copies of the providers' pricing pages and of
#: price tables that quote them (named in the comment heading each provider),
#: dated from 2026-03-21 to late 2026: every entry is confirmed by a copy dated
#: 2026-07-04 or later, or by copies on both sides of that date that agree.
#: Re-check against the live pages before trusting a total.
PRICES_CHECKED = "2026-07-04"


#: USD per million tokens, by model: every provider's table, kept in the
#: provider's module (``reel_core/_providers/openai.py``, ``anthropic.py``,
#: ``gemini.py``) beside the comment naming its sources.
PRICES: dict[str, Price] = {}

#: Names that are not a table key plus a snapshot suffix.
ALIASES: dict[str, str] = {}

# What may follow a known name (after a "-") and still be that model: dates
# (2024-08-06, 20250929, 0613), "latest", "preview" with its dates
# (preview-05-20, preview-09-2025), version numbers (001, v2, Bedrock's
# v1:0).  Anything else ("mini", "lite", "audio-preview", "7") is another
# model, so gpt-4o-mini never falls back to gpt-4o, nor claude-opus-4-7 to
# claude-opus-4.  Experimental ("-exp") builds were free and stay unknown.
_PART = (
    r"(?:\d{8}|\d{4}-\d{2}-\d{2}|\d{4}|latest|preview|\d{2}-\d{2}|\d{2}-\d{4}|\d{3}"
    r"|v\d+(?::\d+)?)"
)
_SUFFIX = re.compile(rf"{_PART}(?:-{_PART})*")
_REGION = re.compile(r"^(?:[a-z]{2,6}\.)?anthropic\.")  # Bedrock: us.anthropic.claude-...
#: Every known name, longest first.
_NAMES: list[str] = []


def _merge() -> None:
    """The tables again, in place, from the registry's providers."""
    PRICES.clear()
    PRICES.update((n, price) for p in PROVIDERS.values() for n, price in p.prices.items())
    ALIASES.clear()
    ALIASES.update((n, key) for p in PROVIDERS.values() for n, key in p.aliases.items())
    _NAMES[:] = sorted({*PRICES, *ALIASES}, key=len, reverse=True)
    resolve_model.cache_clear()


def _normalize(name: str) -> str:
    name = name.strip().lower()
    # Path-like names: models/gemini-2.5-flash, publishers/google/models/...,
    # openai/gpt-4o (gateways).
    name = name.rpartition("/")[2]
    name = _REGION.sub("", name)
    name = name.replace("@", "-")  # Vertex: claude-3-5-sonnet-v2@20241022
    if name.startswith("claude"):
        name = name.replace(".", "-")  # claude-sonnet-4.5 (gateways)
    return name


@functools.lru_cache(maxsize=256)
def resolve_model(name: str) -> str | None:
    """The price-table key for a model name, or ``None`` when unknown.

    Dated snapshots and aliases resolve to their base entry
    (``gpt-4o-2024-08-06`` -> ``gpt-4o``, ``claude-sonnet-4-5-20250929`` ->
    ``claude-sonnet-4-5``, ``models/gemini-2.5-flash`` ->
    ``gemini-2.5-flash``, ``gemini-2.5-flash-preview-05-20`` ->
    ``gemini-2.5-flash``): the longest known name that the model name starts
    with, followed only by a snapshot suffix.  Fine-tuned models (``ft:``)
    have their own prices and resolve to ``None``.

    A dated name is looked for among every known one (tens of
    microseconds), and a recording asks for its model's: the few names a
    run records are resolved once.
    """
    if name.startswith("ft:"):
        return None
    key = _normalize(name)
    if not key:
        return None
    if key in PRICES:
        return key
    if key in ALIASES:
        return ALIASES[key]
    for known in _NAMES:
        if (
            len(key) > len(known) + 1
            and key.startswith(known)
            and key[len(known)] == "-"
            and _SUFFIX.fullmatch(key, len(known) + 1)
        ):
            return ALIASES.get(known, known)
    return None


def cost_usd(usage: Usage) -> float | None:
    """The USD cost of ``usage``, rounded to 8 decimals; ``None`` (never 0)
    when the model is unknown or the input or output count is missing."""
    if usage.model is None or usage.input_tokens is None or usage.output_tokens is None:
        return None
    key = resolve_model(usage.model)
    if key is None:
        return None
    price = PRICES[key]
    cached = usage.cached_tokens or 0
    cached_rate = price.input if price.cached_input is None else price.cached_input
    if usage.input_includes_cached:
        # OpenAI, Gemini: the cached tokens are a part of the input count.
        cached = min(cached, usage.input_tokens)
        total = (usage.input_tokens - cached) * price.input + cached * cached_rate
        total += _audio_extra(usage, price, cached, cached_rate)
    else:
        # Anthropic: input_tokens is the uncached rest; reads and writes apart.
        writes = usage.cache_write_tokens or 0
        write_rate = price.input if price.cache_write is None else price.cache_write
        total = usage.input_tokens * price.input + cached * cached_rate + writes * write_rate
    total += usage.output_tokens * price.output
    return round(total / 1_000_000, 8)


def _audio_extra(usage: Usage, price: Price, cached: int, cached_rate: float) -> float:
    """What the audio part of the counts costs above the text rates they
    were billed at (the realtime models' audio rates; 0 without them)."""
    extra = 0.0
    inputs, outputs = usage.input_tokens or 0, usage.output_tokens or 0  # known: cost_usd checked
    if price.audio_input is not None and usage.audio_input_tokens:
        audio_cached = min(usage.audio_cached_tokens or 0, cached, usage.audio_input_tokens)
        audio_fresh = min(usage.audio_input_tokens - audio_cached, inputs - cached)
        extra += audio_fresh * (price.audio_input - price.input)
        audio_cached_rate = (
            cached_rate if price.audio_cached_input is None else price.audio_cached_input
        )
        extra += audio_cached * (audio_cached_rate - cached_rate)
    if price.audio_output is not None and usage.audio_output_tokens:
        audio_out = min(usage.audio_output_tokens, outputs)
        extra += audio_out * (price.audio_output - price.output)
    return extra


_merge()
on_register(_merge)  # a new provider's prices
