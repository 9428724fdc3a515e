"""``reel cost FILE...``: what the recorded calls cost, by provider and model.

Calls whose cost is unknown (a model missing from the price table, a
response reporting no usage) are listed apart and never counted as 0.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reel_core.tools import PRICES_CHECKED

from .._figures import figures
from ._common import (
    EXIT_OK,
    Progress,
    add_proto_option,
    fmt_num,
    fmt_usd,
    plural,
    print_json,
    proto_of,
    read_cassette,
    table,
)
from ._store import add_store_options

__all__ = ["add_parser"]


def add_parser(commands: Any) -> None:
    p: argparse.ArgumentParser = commands.add_parser(
        "cost",
        help="total tokens and USD by provider and model",
        description="Total the calls, tokens and USD cost of cassettes by provider and "
        "model. Costs come from each line's meta when recorded, else from the response's "
        "usage and Reel's price table. Calls of unknown cost are listed apart, never "
        "counted as 0.",
        epilog="Exit status: 0 ok; 2 bad usage or an unreadable file.",
    )
    p.add_argument("files", nargs="+", type=Path, metavar="FILE", help="cassettes (.jsonl)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_proto_option(p)
    add_store_options(p)
    p.set_defaults(run=run)


@dataclass
class _Group:
    provider: str
    model: str | None
    calls: int = 0
    tokens_in: int | None = None
    tokens_out: int | None = None
    tokens_cached: int | None = None
    tokens_audio_in: int | None = None
    tokens_audio_out: int | None = None
    usd: float = 0.0
    reasons: dict[str, int] = field(default_factory=dict)

    def add(self, tokens_in: int | None, tokens_out: int | None, cached: int | None) -> None:
        self.calls += 1
        if tokens_in is not None:
            self.tokens_in = (self.tokens_in or 0) + tokens_in
        if tokens_out is not None:
            self.tokens_out = (self.tokens_out or 0) + tokens_out
        if cached is not None:
            self.tokens_cached = (self.tokens_cached or 0) + cached

    def add_audio(self, tokens_in: int | None, tokens_out: int | None) -> None:
        """A realtime session's audio tokens (a part of its in and out)."""
        if tokens_in is not None:
            self.tokens_audio_in = (self.tokens_audio_in or 0) + tokens_in
        if tokens_out is not None:
            self.tokens_audio_out = (self.tokens_audio_out or 0) + tokens_out

    def to_json(self, *, known: bool) -> dict[str, Any]:
        out: dict[str, Any] = {
            "provider": self.provider,
            "model": self.model,
            "calls": self.calls,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "tokens_cached": self.tokens_cached,
        }
        if self.tokens_audio_in is not None or self.tokens_audio_out is not None:
            out["tokens_audio_in"] = self.tokens_audio_in
            out["tokens_audio_out"] = self.tokens_audio_out
        if known:
            out["usd"] = round(self.usd, 8)
        else:
            out["reasons"] = dict(self.reasons)
        return out


def run(ns: argparse.Namespace) -> int:
    proto = proto_of(ns.proto_descriptor)  # a gRPC call's usage read through it
    known: dict[tuple[str, str | None], _Group] = {}
    unknown: dict[tuple[str, str | None], _Group] = {}
    skipped = 0
    files: list[Path] = ns.files
    progress = Progress(len(files))
    for path in progress.track(files):
        cassette = read_cassette(path)
        for bad in cassette.bad:
            skipped += 1
            print(f"reel cost: {path}:{bad.number}: skipped: {bad.error}", file=sys.stderr)
        for ix in cassette.interactions:
            if ix.call is not None:  # a tool call: no tokens, no price
                continue
            f = figures(ix, proto)
            key = (ix.provider, f.model)
            if f.cost_usd is None:
                group = unknown.setdefault(key, _Group(*key))
                reason = f.unknown_reason or "unknown"
                group.reasons[reason] = group.reasons.get(reason, 0) + 1
            else:
                group = known.setdefault(key, _Group(*key))
                group.usd += f.cost_usd
            group.add(f.tokens_in, f.tokens_out, f.tokens_cached)
            group.add_audio(f.tokens_audio_in, f.tokens_audio_out)
    groups = sorted(known.values(), key=lambda g: (-g.usd, g.provider, g.model or ""))
    odd = sorted(unknown.values(), key=lambda g: (g.provider, g.model or ""))
    total = _Group("total", None)
    for g in groups:
        total.usd += g.usd
        total.calls += g.calls
        for attr in (
            "tokens_in",
            "tokens_out",
            "tokens_cached",
            "tokens_audio_in",
            "tokens_audio_out",
        ):
            value = getattr(g, attr)
            if value is not None:
                setattr(total, attr, (getattr(total, attr) or 0) + value)
    unknown_calls = sum(g.calls for g in odd)
    if ns.json:
        print_json(
            {
                "files": [str(p) for p in files],
                "groups": [g.to_json(known=True) for g in groups],
                "unknown": [g.to_json(known=False) for g in odd],
                "total": {
                    **{
                        k: v
                        for k, v in total.to_json(known=True).items()
                        if k not in ("provider", "model")
                    },
                    "unknown_calls": unknown_calls,
                },
                "prices_checked": PRICES_CHECKED,
                "skipped_lines": skipped,
            }
        )
        return EXIT_OK
    headers = ("provider", "model", "calls", "tokens in", "tokens out", "cached", "USD")
    right = (2, 3, 4, 5, 6)
    rows = [
        (
            g.provider,
            g.model or "?",
            str(g.calls),
            fmt_num(g.tokens_in),
            fmt_num(g.tokens_out),
            fmt_num(g.tokens_cached),
            fmt_usd(g.usd),
        )
        for g in groups
    ]
    rows.append(
        (
            "total",
            "",
            str(total.calls),
            fmt_num(total.tokens_in),
            fmt_num(total.tokens_out),
            fmt_num(total.tokens_cached),
            fmt_usd(total.usd),
        )
    )
    for line in table(headers, rows, right=right):
        print(line)
    if odd:
        print()
        print(f"unknown cost: {plural(unknown_calls, 'call')} NOT counted in the total above")
        odd_rows: list[tuple[str, ...]] = []
        for g in odd:
            why = "; ".join(
                reason + (f" (x{n})" if n > 1 else "") for reason, n in g.reasons.items()
            )
            odd_rows.append(
                (
                    g.provider,
                    g.model or "?",
                    str(g.calls),
                    fmt_num(g.tokens_in),
                    fmt_num(g.tokens_out),
                    why,
                )
            )
        for line in table(
            ("provider", "model", "calls", "tokens in", "tokens out", "why"),
            odd_rows,
            right=(2, 3, 4),
        ):
            print(line)
    print(f"prices checked {PRICES_CHECKED}; re-check before trusting a total", file=sys.stderr)
    return EXIT_OK
