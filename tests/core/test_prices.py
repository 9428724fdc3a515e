"""The price table, model-name resolution and the cost of a usage."""

from __future__ import annotations

import json
import re
from datetime import date
from typing import Any

import pytest

from reel_core import RecordedResponse
from reel_core._prices import ALIASES, PRICES, PRICES_CHECKED, Price, cost_usd, resolve_model
from reel_core._usage import Usage, extract_usage

RESOLVE = {
    # exact names
    "gpt-4o": "gpt-4o",
    "gpt-4o-mini": "gpt-4o-mini",
    "o3": "o3",
    "o4-mini": "o4-mini",
    "text-embedding-3-small": "text-embedding-3-small",
    "claude-opus-4-1": "claude-opus-4-1",
    "gemini-2.5-flash-lite": "gemini-2.5-flash-lite",
    # dated snapshots
    "gpt-4o-2024-08-06": "gpt-4o",
    "gpt-4o-mini-2024-07-18": "gpt-4o-mini",
    "gpt-4.1-mini-2025-04-14": "gpt-4.1-mini",
    "gpt-5-nano-2025-08-07": "gpt-5-nano",
    "gpt-5.5-2026-04-23": "gpt-5.5",
    "o3-2025-04-16": "o3",
    "o3-mini-2025-01-31": "o3-mini",
    "o1-mini-2024-09-12": "o1-mini",
    "gpt-4-0613": "gpt-4",
    "claude-sonnet-4-5-20250929": "claude-sonnet-4-5",
    "claude-opus-4-1-20250805": "claude-opus-4-1",
    "claude-haiku-4-5-20251001": "claude-haiku-4-5",
    "claude-sonnet-4-20250514": "claude-sonnet-4",
    "claude-3-5-haiku-20241022": "claude-3-5-haiku",
    "claude-3-7-sonnet-20250219": "claude-3-7-sonnet",
    "gemini-2.5-flash-preview-05-20": "gemini-2.5-flash",
    "gemini-2.5-flash-preview-09-2025": "gemini-2.5-flash",
    "gemini-2.5-flash-lite-preview-06-17": "gemini-2.5-flash-lite",
    "gemini-2.5-pro-preview-03-25": "gemini-2.5-pro",
    "gemini-2.0-flash-001": "gemini-2.0-flash",
    # aliases
    "claude-3-5-sonnet-latest": "claude-3-5-sonnet",
    "claude-3-5-haiku-latest": "claude-3-5-haiku",
    "claude-sonnet-4-0": "claude-sonnet-4",
    "gpt-5-chat-latest": "gpt-5",
    "gpt-4-1106-preview": "gpt-4-turbo",
    "o1-preview": "o1",
    # prefixed and provider-specific spellings
    "models/gemini-2.5-flash": "gemini-2.5-flash",
    "publishers/google/models/gemini-2.5-pro": "gemini-2.5-pro",
    "openai/gpt-4.1": "gpt-4.1",
    "anthropic/claude-sonnet-4.5": "claude-sonnet-4-5",
    "us.anthropic.claude-3-5-sonnet-20241022-v2:0": "claude-3-5-sonnet",
    "claude-3-5-sonnet-v2@20241022": "claude-3-5-sonnet",
    " GPT-4o ": "gpt-4o",
    # other models, not a wrong fallback
    "gpt-4o-audio-preview": None,
    "gpt-4o-mini-search-preview-2025-03-11": None,
    "gpt-3.5-turbo-instruct": None,
    "chatgpt-4o-latest": None,
    "claude-opus-4-9": None,
    "gemini-2.0-flash-exp": None,
    "gemini-flash-latest": None,
    "ft:gpt-4o-mini-2024-07-18:acme::9xyz": None,
    "llama-3.1-8b-instant": None,
    "gpt-4o-": None,
    "": None,
    "/": None,
}


@pytest.mark.parametrize(("name", "key"), RESOLVE.items())
def test_resolve_model(name: str, key: str | None) -> None:
    assert resolve_model(name) == key


def test_gpt_4o_mini_is_not_gpt_4o() -> None:
    assert resolve_model("gpt-4o-mini") == "gpt-4o-mini"
    assert resolve_model("gpt-4o-mini-2024-07-18") == "gpt-4o-mini"
    assert PRICES["gpt-4o-mini"] != PRICES["gpt-4o"]
    mini = cost_usd(Usage("gpt-4o-mini-2024-07-18", input_tokens=1000, output_tokens=1000))
    full = cost_usd(Usage("gpt-4o-2024-08-06", input_tokens=1000, output_tokens=1000))
    assert mini == 0.00075
    assert full == 0.0125


def test_every_key_and_alias_resolves() -> None:
    for key in PRICES:
        assert resolve_model(key) == key
        assert key == key.strip().lower()
        assert "/" not in key
    for alias, target in ALIASES.items():
        assert target in PRICES
        assert resolve_model(alias) == target
        assert alias not in PRICES


def test_the_table_is_sane() -> None:
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", PRICES_CHECKED)
    assert date.fromisoformat(PRICES_CHECKED) >= date(2025, 8, 7)  # gpt-5 is in it
    for key, price in PRICES.items():
        assert isinstance(price, Price)
        assert price.input > 0, key
        assert price.output >= 0, key
        if price.cached_input is not None:
            assert 0 < price.cached_input <= price.input, key
        if price.cache_write is not None:
            assert price.cache_write >= price.input, key
    for needed in (
        "gpt-5",
        "gpt-5-mini",
        "gpt-5-nano",
        "gpt-4.1",
        "gpt-4.1-mini",
        "gpt-4.1-nano",
        "gpt-4o",
        "gpt-4o-mini",
        "o3",
        "o4-mini",
        "o1",
        "text-embedding-3-small",
        "text-embedding-3-large",
        "claude-sonnet-4-5",
        "claude-opus-4-1",
        "claude-haiku-4-5",
        "claude-3-5-haiku",
        "claude-3-7-sonnet",
        "gemini-2.5-pro",
        "gemini-2.5-flash",
        "gemini-2.5-flash-lite",
        "gemini-2.0-flash",
    ):
        assert needed in PRICES


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        # OpenAI: 400 of the 1000 input tokens were cache hits.
        (
            Usage(
                model="gpt-4o-2024-08-06", input_tokens=1000, output_tokens=500, cached_tokens=400
            ),
            (600 * 2.50 + 400 * 1.25 + 500 * 10.00) / 1e6,
        ),
        (
            Usage(model="gpt-4o-mini", input_tokens=1000, output_tokens=500, cached_tokens=400),
            (600 * 0.15 + 400 * 0.075 + 500 * 0.60) / 1e6,
        ),
        # reasoning tokens are already inside the output count
        (
            Usage(
                model="o4-mini-2025-04-16",
                input_tokens=1843,
                output_tokens=212,
                cached_tokens=1536,
                reasoning_tokens=192,
            ),
            (307 * 1.10 + 1536 * 0.275 + 212 * 4.40) / 1e6,
        ),
        # Anthropic: cache reads and writes come on top of input_tokens.
        (
            Usage(
                model="claude-sonnet-4-5-20250929",
                input_tokens=12,
                output_tokens=6,
                cached_tokens=2048,
                cache_write_tokens=248,
                input_includes_cached=False,
            ),
            (12 * 3.00 + 2048 * 0.30 + 248 * 3.75 + 6 * 15.00) / 1e6,
        ),
        (
            Usage(
                model="claude-opus-4-1-20250805",
                input_tokens=10,
                output_tokens=10,
                cached_tokens=None,
                input_includes_cached=False,
            ),
            (10 * 15.00 + 10 * 75.00) / 1e6,
        ),
        # Gemini: cached content is inside promptTokenCount; thoughts are output.
        (
            Usage(
                model="gemini-2.5-pro",
                input_tokens=2090,
                output_tokens=78,
                cached_tokens=2048,
                reasoning_tokens=71,
            ),
            (42 * 1.25 + 2048 * 0.125 + 78 * 10.00) / 1e6,
        ),
        (
            Usage(model="models/gemini-2.5-flash", input_tokens=1_000_000, output_tokens=0),
            0.30,
        ),
        # a model with no cache discount bills cached tokens at the input rate
        (
            Usage(model="gpt-4o-2024-05-13", input_tokens=100, output_tokens=0, cached_tokens=50),
            100 * 5.00 / 1e6,
        ),
        # more cached than input (bad data) never goes negative
        (
            Usage(model="gpt-4.1", input_tokens=10, output_tokens=0, cached_tokens=99),
            10 * 0.50 / 1e6,
        ),
        (Usage(model="text-embedding-3-small", input_tokens=8, output_tokens=0), 8 * 0.02 / 1e6),
        (Usage(model="o1", input_tokens=1, output_tokens=1), 75 / 1e6),
    ],
)
def test_cost_usd(usage: Usage, expected: float) -> None:
    cost = cost_usd(usage)
    assert cost == round(expected, 8)


@pytest.mark.parametrize(
    "usage",
    [
        Usage(),
        Usage(model="gpt-4o"),
        Usage(model="gpt-4o", input_tokens=10),
        Usage(model="gpt-4o", output_tokens=10),
        Usage(model=None, input_tokens=10, output_tokens=10),
        Usage(model="not-a-model", input_tokens=10, output_tokens=10),
        Usage(model="llama-3.1-8b-instant", input_tokens=0, output_tokens=0),
        Usage(model="ft:gpt-4o-mini:acme::1", input_tokens=10, output_tokens=10),
    ],
)
def test_cost_is_none_not_zero_when_unknown(usage: Usage) -> None:
    assert cost_usd(usage) is None


def test_known_model_with_no_tokens_costs_zero() -> None:
    assert cost_usd(Usage(model="gpt-4o", input_tokens=0, output_tokens=0)) == 0.0


def test_costs_are_rounded_to_8_decimals() -> None:
    for key in PRICES:
        for tokens in (1, 3, 7, 12_345, 987_654_321):
            cost = cost_usd(
                Usage(model=key, input_tokens=tokens, output_tokens=tokens // 3, cached_tokens=1)
            )
            assert cost is not None
            assert cost == round(cost, 8)
            assert cost >= 0


def test_from_a_recorded_anthropic_stream_to_a_cost() -> None:
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "model": "claude-haiku-4-5-20251001",
                "usage": {
                    "input_tokens": 25,
                    "cache_read_input_tokens": 1000,
                    "cache_creation_input_tokens": 0,
                    "output_tokens": 1,
                },
            },
        },
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 40},
        },
    ]
    frames = tuple(
        (float(i), f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode())
        for i, e in enumerate(events)
    )
    usage = extract_usage(
        "anthropic", "/v1/messages", b"", RecordedResponse(200, stream="sse", frames=frames)
    )
    assert usage.first_token_ms == 1.0
    assert cost_usd(usage) == round((25 * 1.00 + 1000 * 0.10 + 40 * 5.00) / 1e6, 8)
    meta = {**usage.to_meta(), "cost_usd": cost_usd(usage)}
    assert meta["tokens_in"] == 25
    assert meta["cost_usd"] == 0.000325


def test_price_is_a_frozen_value() -> None:
    price = PRICES["gpt-4o"]
    with pytest.raises(AttributeError):
        price.input = 0.0  # type: ignore[misc]
