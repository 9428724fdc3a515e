"""What an exchange cost: a price table kept as Python data, and the sum.

Prices are USD per million tokens at each provider's standard (pay as you
go, non-batch, non-priority) rate.  Where a provider charges more past a
prompt length (Gemini 2.5 Pro and Gemini 3 Pro above 200k prompt tokens,
Claude Sonnet 4/4.5 above 200k with the 1M-context beta, GPT-5.4 and GPT-5.5
above 272k), the table holds the base tier: costs of such long prompts are
under-estimated.  Audio, image and tool fees (web search, code execution)
are not modelled.

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

import re
from dataclasses import dataclass

from ._usage import Usage

__all__ = ["ALIASES", "PRICES", "PRICES_CHECKED", "Price", "cost_usd", "resolve_model"]

#: The date the prices below are known to have been current on.  They were
#: read on 2026-11-22 from stored copies of the providers' pricing pages and of
#: price tables that quote them (named in the comment heading each provider),
#: dated from 2026-03-21 to late 2026: every entry is confirmed by a copy dated
#: 2026-07-04 or later, or by copies on both sides of that date that agree.
#: Re-check against the live pages before trusting a total.
PRICES_CHECKED = "2026-07-04"


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


def _anthropic(input: float, output: float) -> Price:
    # Anthropic prices cache reads at 0.1x and 5-minute cache writes at 1.25x
    # the base input rate, for every model in this table.
    return Price(input, output, round(input * 0.1, 6), round(input * 1.25, 6))


PRICES: dict[str, Price] = {
    # -- OpenAI ----------------------------------------------------------------
    # Source: OpenAI's pricing page (developers.openai.com/api/docs/pricing,
    # "Standard", text tokens: input / cached input / output) and per-model
    # pages (developers.openai.com/api/docs/models/gpt-5-nano, a stored copy
    # from late 2026), cross-checked with simonw/llm-prices data/openai.json
    # (snapshot listing gpt-5.5), morphllm.com's table "as of June 2026"
    # (gpt-5.4/5.5 family), github/docs data/tables/copilot/models-and-
    # pricing.yml (late 2026: gpt-5-mini, gpt-5.4 family, gpt-5.5) and
    # deploybase.ai's copy of the pricing page of 2026-03-21 (gpt-5, gpt-4.1,
    # gpt-4o, o3, o4-mini).  o3 is at its June 2025 price ($2 / $0.50 cached /
    # $8; llm-prices still has the old one).
    # GPT-5.4 and GPT-5.5 cost more past 272k prompt tokens: base tier here.
    "gpt-5.5": Price(5.00, 30.00, 0.50),
    "gpt-5.4": Price(2.50, 15.00, 0.25),
    "gpt-5.4-mini": Price(0.75, 4.50, 0.075),
    "gpt-5.4-nano": Price(0.20, 1.25, 0.02),
    "gpt-5.2": Price(1.75, 14.00, 0.175),
    "gpt-5.1": Price(1.25, 10.00, 0.125),
    "gpt-5": Price(1.25, 10.00, 0.125),
    "gpt-5-mini": Price(0.25, 2.00, 0.025),
    "gpt-5-nano": Price(0.05, 0.40, 0.005),
    "gpt-5-pro": Price(15.00, 120.00),
    "gpt-4.1": Price(2.00, 8.00, 0.50),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.025),
    "gpt-4o": Price(2.50, 10.00, 1.25),
    # The first gpt-4o snapshot kept its launch price.
    "gpt-4o-2024-05-13": Price(5.00, 15.00),
    "gpt-4o-mini": Price(0.15, 0.60, 0.075),
    "o3": Price(2.00, 8.00, 0.50),
    "o3-pro": Price(20.00, 80.00),
    "o3-mini": Price(1.10, 4.40, 0.55),
    "o4-mini": Price(1.10, 4.40, 0.275),
    "o1": Price(15.00, 60.00, 7.50),
    "o1-mini": Price(1.10, 4.40, 0.55),
    "o1-pro": Price(150.00, 600.00),
    "gpt-4-turbo": Price(10.00, 30.00),
    "gpt-4": Price(30.00, 60.00),
    "gpt-3.5-turbo": Price(0.50, 1.50),
    "text-embedding-3-small": Price(0.02, 0.0),
    "text-embedding-3-large": Price(0.13, 0.0),
    "text-embedding-ada-002": Price(0.10, 0.0),
    # -- Anthropic -------------------------------------------------------------
    # Source: Anthropic's pricing page, "Model pricing" (base input, 5m cache
    # writes, cache hits, output per MTok): the platform.claude.com/docs/en/
    # about-claude/pricing copy listing models up to Claude Fable 5.1 (autumn
    # 2026) for Opus 4.5-5 and Opus 4.1/4, an older docs.anthropic.com copy
    # for Sonnet 4/3.7/3.5 and Haiku 3.5/3; Sonnet 4/4.5/4.6, Haiku 4.5 and
    # Opus 4.5-5 (with cache-write rates) also from github/docs data/tables/
    # copilot/models-and-pricing.yml (late 2026), simonw/llm-prices
    # data/anthropic.json and deploybase.ai's table of 2026-03-21.  Sonnet 4
    # and 4.5 cost $6/$22.50 past 200k input tokens (1M-context beta): base
    # tier here.
    "claude-opus-5": _anthropic(5.00, 25.00),
    "claude-opus-4-8": _anthropic(5.00, 25.00),
    "claude-opus-4-7": _anthropic(5.00, 25.00),
    "claude-opus-4-6": _anthropic(5.00, 25.00),
    "claude-opus-4-5": _anthropic(5.00, 25.00),
    "claude-opus-4-1": _anthropic(15.00, 75.00),
    "claude-opus-4": _anthropic(15.00, 75.00),
    "claude-sonnet-4-6": _anthropic(3.00, 15.00),
    "claude-sonnet-4-5": _anthropic(3.00, 15.00),
    "claude-sonnet-4": _anthropic(3.00, 15.00),
    "claude-haiku-4-5": _anthropic(1.00, 5.00),
    "claude-3-7-sonnet": _anthropic(3.00, 15.00),
    "claude-3-5-sonnet": _anthropic(3.00, 15.00),
    "claude-3-5-haiku": _anthropic(0.80, 4.00),
    "claude-3-opus": _anthropic(15.00, 75.00),
    "claude-3-haiku": Price(0.25, 1.25, 0.03, 0.30),
    # -- Gemini (Gemini Developer API, paid tier) ------------------------------
    # Source: Google's pricing page (ai.google.dev/gemini-api/docs/pricing:
    # text/image/video input, output "including thinking tokens", context
    # caching) as quoted from it on 2026-07-04 (factquire.com,
    # gemini-3-flash-preview) and in morphllm.com's 2026 table, with cached
    # rates from simonw/llm-prices data/google.json and github/docs
    # data/tables/copilot/models-and-pricing.yml (late 2026: gemini-3.1-pro,
    # gemini-3.5-flash).  Not in those sources, so less sure: the cached
    # rates of gemini-3-pro-preview ($0.20, as 3.1 Pro) and gemini-2.0-flash
    # ($0.025, Google's 2025 page).  Gemini 2.5 Pro and 3.x Pro cost more
    # past 200k prompt tokens ($2.50/$15 and $4/$18): base tier here.  Cache
    # storage (per token-hour) is not a per-request cost and is left out.
    "gemini-3.5-flash": Price(1.50, 9.00, 0.15),
    "gemini-3.1-pro-preview": Price(2.00, 12.00, 0.20),
    "gemini-3-pro-preview": Price(2.00, 12.00, 0.20),
    "gemini-3-flash-preview": Price(0.50, 3.00, 0.05),
    "gemini-2.5-pro": Price(1.25, 10.00, 0.125),
    "gemini-2.5-flash": Price(0.30, 2.50, 0.03),
    "gemini-2.5-flash-lite": Price(0.10, 0.40, 0.01),
    "gemini-2.0-flash": Price(0.10, 0.40, 0.025),
    "gemini-2.0-flash-lite": Price(0.075, 0.30),
}

#: Names that are not a table key plus a snapshot suffix.
ALIASES: dict[str, str] = {
    "gpt-5-chat-latest": "gpt-5",
    "gpt-5-codex": "gpt-5",
    "gpt-5.1-codex": "gpt-5.1",
    "gpt-5.1-codex-mini": "gpt-5-mini",  # same prices
    "o1-preview": "o1",
    "gpt-4-1106-preview": "gpt-4-turbo",
    "gpt-4-0125-preview": "gpt-4-turbo",
    "gpt-4-vision-preview": "gpt-4-turbo",
    "claude-opus-4-0": "claude-opus-4",
    "claude-sonnet-4-0": "claude-sonnet-4",
    "claude-3-7-sonnet-latest": "claude-3-7-sonnet",
    "claude-3-5-sonnet-latest": "claude-3-5-sonnet",
    "claude-3-5-haiku-latest": "claude-3-5-haiku",
    "claude-3-opus-latest": "claude-3-opus",
    "gemini-3-pro": "gemini-3-pro-preview",
    "gemini-3-flash": "gemini-3-flash-preview",
    "gemini-3.1-pro": "gemini-3.1-pro-preview",
}

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
_NAMES = sorted({*PRICES, *ALIASES}, key=len, reverse=True)


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


def resolve_model(name: str) -> str | None:
    """The price-table key for a model name, or ``None`` when unknown.

    Dated snapshots and aliases resolve to their base entry
    (``gpt-4o-2024-08-06`` -> ``gpt-4o``, ``claude-sonnet-4-5-20250929`` ->
    ``claude-sonnet-4-5``, ``models/gemini-2.5-flash`` ->
    ``gemini-2.5-flash``, ``gemini-2.5-flash-preview-05-20`` ->
    ``gemini-2.5-flash``): the longest known name that the model name starts
    with, followed only by a snapshot suffix.  Fine-tuned models (``ft:``)
    have their own prices and resolve to ``None``.
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
    else:
        # Anthropic: input_tokens is the uncached rest; reads and writes apart.
        writes = usage.cache_write_tokens or 0
        write_rate = price.input if price.cache_write is None else price.cache_write
        total = usage.input_tokens * price.input + cached * cached_rate + writes * write_rate
    total += usage.output_tokens * price.output
    return round(total / 1_000_000, 8)
