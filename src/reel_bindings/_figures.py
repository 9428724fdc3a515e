"""The figures of one interaction: model, tokens, timing and cost.

A line recorded by Reel carries them in its ``meta``; lines written by hand
or by older versions may not, and then they are read from the response
(:func:`reel_core.extract_usage`) and priced (:func:`reel_core.cost_usd`).
An unknown cost stays unknown (``None``, shown as ``?``), never 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reel_core import Interaction
from reel_core.tools import (
    PRICES_CHECKED,
    PROVIDERS,
    ProtoSchema,
    Usage,
    cost_usd,
    extract_usage,
    request_model,
    resolve_model,
    websocket_usage,
)

__all__ = ["Figures", "figures"]


@dataclass(frozen=True)
class Figures:
    model: str | None
    tokens_in: int | None
    tokens_out: int | None
    tokens_cached: int | None
    ttfb_ms: float | None
    ttft_ms: float | None
    total_ms: float | None
    cost_usd: float | None
    #: ``meta`` (the line says), ``computed`` (from the response) or ``None``.
    cost_source: str | None
    #: Why the cost is unknown (``None`` when known).
    unknown_reason: str | None
    #: Audio tokens (parts of ``tokens_in`` / ``tokens_out``): realtime
    #: sessions report them, and their models price them apart.
    tokens_audio_in: int | None = None
    tokens_audio_out: int | None = None


def figures(interaction: Interaction, proto: ProtoSchema | None = None) -> Figures:
    """The figures of ``interaction``: its line's ``meta``, else read from
    the response (a gRPC call's through ``proto``, a descriptor set)."""
    meta = interaction.meta
    response = interaction.response
    usage: Usage | None = None

    def extracted() -> Usage:
        nonlocal usage
        if usage is None and interaction.websocket is not None:
            usage = websocket_usage(
                interaction.provider, interaction.request.query, interaction.websocket
            )
        elif usage is None:
            usage = extract_usage(
                interaction.provider,
                interaction.request.path,
                interaction.request.body,
                response,
                proto,
            )
        return usage

    model = meta.get("model") if isinstance(meta.get("model"), str) else None
    if model is None:
        model = extracted().model or request_model(
            interaction.request.path, interaction.request.body
        )
    tokens: dict[str, int | None] = {}
    for key, attr in (
        ("tokens_in", "input_tokens"),
        ("tokens_out", "output_tokens"),
        ("tokens_cached", "cached_tokens"),
    ):
        value = count(meta.get(key))
        tokens[key] = value if value is not None else getattr(extracted(), attr)
    if interaction.websocket is not None:  # only sessions report audio apart
        for key, attr in (
            ("tokens_audio_in", "audio_input_tokens"),
            ("tokens_audio_out", "audio_output_tokens"),
        ):
            value = count(meta.get(key))
            tokens[key] = value if value is not None else getattr(extracted(), attr)
    # A key present with null means "unknown" (imported lines carry no
    # timing); only lines without it at all are read from the response.
    ttft = num(meta.get("ttft_ms"))
    if "ttft_ms" not in meta and response.stream is not None:
        ttft = extracted().first_token_ms
    total = num(meta.get("total_ms"))
    if "total_ms" not in meta and response.stream is not None:
        total = response.cut.at_ms if response.cut is not None else response.end_ms
    cost = num(meta.get("cost_usd"))
    source: str | None = "meta" if cost is not None else None
    if cost is None:
        cost = cost_usd(extracted())
        source = "computed" if cost is not None else None
    reason = None
    if cost is None:
        reason = _unknown_reason(interaction, model, tokens["tokens_in"], tokens["tokens_out"])
    return Figures(
        model=model,
        tokens_in=tokens["tokens_in"],
        tokens_out=tokens["tokens_out"],
        tokens_cached=tokens["tokens_cached"],
        ttfb_ms=num(meta.get("ttfb_ms")),
        ttft_ms=ttft,
        total_ms=total,
        cost_usd=cost,
        cost_source=source,
        unknown_reason=reason,
        tokens_audio_in=tokens.get("tokens_audio_in"),
        tokens_audio_out=tokens.get("tokens_audio_out"),
    )


def _unknown_reason(
    interaction: Interaction, model: str | None, tokens_in: int | None, tokens_out: int | None
) -> str:
    status = interaction.response.status
    if tokens_in is None or tokens_out is None:
        if status >= 400:
            return f"an error response ({status}) reporting no token usage"
        provider = PROVIDERS.get(interaction.provider)
        if (
            interaction.response.stream is not None
            and provider is not None
            and provider.stream_usage_opt_in
        ):
            return "no token usage in the stream (sent without stream_options.include_usage?)"
        return "the response reports no token usage"
    if model is None:
        return "no model named in the request or the response"
    if resolve_model(model) is None:
        return f"no price for {model} (Reel's price table, checked {PRICES_CHECKED})"
    return "the usage could not be priced"  # pragma: no cover - cost_usd prices the rest


def num(value: Any) -> float | None:
    """A JSON number (never a bool), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def count(value: Any) -> int | None:
    """A JSON integer (never a bool), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value
