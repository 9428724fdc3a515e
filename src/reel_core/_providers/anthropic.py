"""Everything Reel knows about Anthropic's API.

- Recognition: the ``anthropic`` host, ``/v1/messages`` / ``/v1/complete``
  paths, or an ``anthropic-version`` header; the family is any path ending
  in ``/messages`` or ``/complete`` (not the Assistants API's threads).
- Drift: ``metadata`` (``metadata.user_id``, an opaque end-user id).
- Usage: ``usage.input_tokens`` / ``output_tokens`` /
  ``cache_read_input_tokens`` / ``cache_creation_input_tokens``.
  ``input_tokens`` is the uncached rest: cache reads and writes are counted
  apart.  In a stream ``message_start`` carries the model and the input side
  and each ``message_delta`` carries cumulative counts, the last one winning.
- Answers: messages (text, thinking and ``tool_use`` blocks, whole or as
  ``content_block_*`` events) and the legacy ``complete`` API.
"""

from __future__ import annotations

from typing import Any

from .._http import Headers, header_value
from ._base import Claim, Piece, Price, Provider, Tally, count, dumps, mapping, string, text

__all__ = [
    "ALIASES",
    "PRICES",
    "PROVIDER",
    "STREAM_EVENTS",
    "answer_pieces",
    "read_counts",
    "read_usage",
]

#: The event names of a messages stream.
STREAM_EVENTS = frozenset(
    {
        "message_start",
        "message_delta",
        "message_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "ping",
    }
)
#: The stream events that may carry generated content.
CONTENT_EVENTS = frozenset({"content_block_start", "content_block_delta"})

_QUIET_EVENTS = STREAM_EVENTS - CONTENT_EVENTS
_TOOL_BLOCKS = ("tool_use", "server_tool_use")


def recognizes(path: str, host: str, headers: Headers) -> bool:
    return (
        "anthropic" in host
        or path.startswith(("/v1/messages", "/v1/complete"))
        or header_value(headers, b"anthropic-version") is not None
    )


def family(path: str) -> bool:
    return path.endswith(("/messages", "/complete")) and "/threads/" not in path


# -- usage ---------------------------------------------------------------------


def read_usage(tally: Tally, obj: dict[str, Any], kind: object) -> bool | None:
    """Messages stream events, a whole message, and the ``error`` event
    (Anthropic's, and the Responses API's too: it carries nothing)."""
    if not isinstance(kind, str):
        return None
    if kind in STREAM_EVENTS:
        return _event(tally, obj, kind)
    if kind == "message":
        _message(tally, obj)
        return False
    if kind == "error":
        return False
    return None


def _event(tally: Tally, obj: dict[str, Any], kind: str) -> bool:
    if kind == "content_block_delta":
        delta = obj.get("delta")
        return isinstance(delta, dict) and (
            text(delta.get("text"))
            or text(delta.get("partial_json"))
            or text(delta.get("thinking"))
        )
    if kind == "content_block_start":
        # A tool call's name comes in the block start (and a call with
        # no arguments has no non-empty delta at all).
        block = obj.get("content_block")
        return isinstance(block, dict) and (text(block.get("name")) or text(block.get("text")))
    if kind == "message_start":
        message = obj.get("message")
        if isinstance(message, dict):
            _message(tally, message)
    elif kind == "message_delta":
        usage = obj.get("usage")
        if isinstance(usage, dict):
            read_counts(tally, usage)
    return False


def _message(tally: Tally, message: dict[str, Any]) -> None:
    tally.set_model(message.get("model"))
    usage = message.get("usage")
    if isinstance(usage, dict):
        read_counts(tally, usage)


def read_counts(tally: Tally, usage: dict[str, Any]) -> None:
    """An Anthropic ``usage`` object (also sent by compatible servers)."""
    # Stream deltas are cumulative and may name only some counts: each
    # count present overrides the one before.
    tally.includes_cached = False
    for key, attr in (
        ("input_tokens", "input"),
        ("output_tokens", "output"),
        ("cache_read_input_tokens", "cached"),
        ("cache_creation_input_tokens", "cache_write"),
    ):
        value = count(usage.get(key))
        if value is not None:
            setattr(tally, attr, value)


# -- answers -------------------------------------------------------------------


def answer_pieces(obj: dict[str, Any], kind: object) -> list[Piece] | None:
    """Messages stream events, then the whole message, then the legacy
    ``complete`` answer."""
    if kind == "content_block_delta":
        delta = mapping(obj.get("delta"))
        slot = f"a{obj.get('index', 0)}"
        if "partial_json" in delta:
            return [Piece(tool=(slot, None, string(delta.get("partial_json"))))]
        return [Piece(string(delta.get("text")) or string(delta.get("thinking")))]
    if kind == "content_block_start":
        block = mapping(obj.get("content_block"))
        if block.get("type") in _TOOL_BLOCKS:
            slot = f"a{obj.get('index', 0)}"
            return [Piece(tool=(slot, string(block.get("name")), ""))]
        return [Piece(string(block.get("text")))]
    if isinstance(kind, str) and kind in _QUIET_EVENTS:
        return []
    if kind == "message" and isinstance(obj.get("content"), list):
        out: list[Piece] = []
        for i, block in enumerate(obj["content"]):
            if not isinstance(block, dict):
                continue
            if block.get("type") in _TOOL_BLOCKS:
                args = dumps(block.get("input", {}))
                out.append(Piece(tool=(f"a{i}", string(block.get("name")), args)))
            else:
                out.append(Piece(string(block.get("text"))))
        return out
    if kind == "completion" or ("completion" in obj and "stop_reason" in obj):
        return [Piece(string(obj.get("completion")))]
    return None


# -- prices --------------------------------------------------------------------


def _price(input: float, output: float) -> Price:
    # Anthropic prices cache reads at 0.1x and 5-minute cache writes at 1.25x
    # the base input rate, for every model in this table.
    return Price(input, output, round(input * 0.1, 6), round(input * 1.25, 6))


#: USD per million tokens, by model (see :mod:`reel_core._prices`).
PRICES: dict[str, Price] = {
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
    "claude-opus-5": _price(5.00, 25.00),
    "claude-opus-4-8": _price(5.00, 25.00),
    "claude-opus-4-7": _price(5.00, 25.00),
    "claude-opus-4-6": _price(5.00, 25.00),
    "claude-opus-4-5": _price(5.00, 25.00),
    "claude-opus-4-1": _price(15.00, 75.00),
    "claude-opus-4": _price(15.00, 75.00),
    "claude-sonnet-4-6": _price(3.00, 15.00),
    "claude-sonnet-4-5": _price(3.00, 15.00),
    "claude-sonnet-4": _price(3.00, 15.00),
    "claude-haiku-4-5": _price(1.00, 5.00),
    "claude-3-7-sonnet": _price(3.00, 15.00),
    "claude-3-5-sonnet": _price(3.00, 15.00),
    "claude-3-5-haiku": _price(0.80, 4.00),
    "claude-3-opus": _price(15.00, 75.00),
    "claude-3-haiku": Price(0.25, 1.25, 0.03, 0.30),
}

#: Model names that are not a price key plus a snapshot suffix.
ALIASES: dict[str, str] = {
    "claude-opus-4-0": "claude-opus-4",
    "claude-sonnet-4-0": "claude-sonnet-4",
    "claude-3-7-sonnet-latest": "claude-3-7-sonnet",
    "claude-3-5-sonnet-latest": "claude-3-5-sonnet",
    "claude-3-5-haiku-latest": "claude-3-5-haiku",
    "claude-3-opus-latest": "claude-3-opus",
}

PROVIDER = Provider(
    name="anthropic",
    title="Anthropic",
    rank=100,
    host="https://api.anthropic.com",
    recognizes=recognizes,
    family=family,
    family_claim=Claim.SHAPED,
    drift_fields=("metadata",),
    stream_event_kinds=STREAM_EVENTS,
    stream_usage_opt_in=False,
    usage_readers=((Claim.MARKED, read_usage),),
    prices=PRICES,
    aliases=ALIASES,
    answer_readers=((Claim.MARKED, answer_pieces),),
    system_keys=("system",),
    prompt_keys=("messages",),
    key_variables=("ANTHROPIC_API_KEY",),
    base_url_variable="ANTHROPIC_BASE_URL",
)
