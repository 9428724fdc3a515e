"""A cassette as one run on the page: the timeline, and what a call line's
detail shows.  Pure functions of the interactions, as :mod:`._data` is.

The timeline places every line where the core places it
(:func:`reel_core.line_times`, the same times ``reel export otel``
writes): one *bar* per line, in the order the lines began, its offsets in
ms from the cassette's first start.  Bars go in three tracks: HTTP
exchanges (LLM calls among them), WebSocket sessions and tool calls; in a
track, a bar takes the first *lane* free when it begins, so overlapping
work (parallel requests, a session open while a tool runs) is seen side by
side and the page stays as short as the run's concurrency.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from reel_core import CallLog, Interaction
from reel_core.tools import CallError, CallResult, CallStream, line_times

from .._figures import figures

__all__ = ["MAX_BARS", "TRACKS", "call_detail", "timeline"]

#: Bars drawn per cassette (the first to begin); the rest are counted.
MAX_BARS = 1000
#: The tracks, top to bottom.
TRACKS = ("http", "websocket", "call")


def _ms(ns: int) -> float:
    return round(ns / 1_000_000, 3)


def _track(ix: Interaction) -> str:
    if ix.call is not None:
        return "call"
    return "websocket" if ix.websocket is not None else "http"


def _failed(ix: Interaction) -> bool:
    """An error, as the export's span status says: a call that raised, a
    status of 400 or more, a cut stream, a session that ended abnormally."""
    if ix.call is not None:
        outcome = ix.call.outcome
        return isinstance(outcome, CallError) or (
            isinstance(outcome, CallStream) and outcome.error is not None
        )
    ws = ix.websocket
    if ws is not None:
        close = ws.close
        if close is None:
            return False
        return close.by.endswith("-dropped") or close.code not in (None, 1000, 1001)
    return ix.response.status >= 400 or ix.response.cut is not None


def _label(ix: Interaction) -> str:
    if ix.call is not None:
        return f"{ix.call.call.kind} {ix.call.call.name}"
    model = figures(ix).model
    where = f"{ix.request.method} {ix.request.path}"
    return f"{model} · {where}" if model else where


def timeline(sources: Sequence[Any]) -> list[dict[str, Any]]:
    """One entry per cassette of ``sources`` (:class:`._data.Source`): its
    bars (``i`` the row they open, ``track``, ``lane``, ``label``,
    ``start_ms``, ``ttfb_ms``, ``end_ms``, ``error``, ``dated``) in the
    order they began, at most :data:`MAX_BARS` (``more``: how many were
    left out), ``lanes`` per track and the run's length ``span_ms``."""
    out = []
    index = 0
    for c, source in enumerate(sources):
        lines = [ix for _, ix in source.interactions]
        times = line_times(lines)
        origin = min((t.start_ns for t in times), default=0)
        order = sorted(range(len(lines)), key=lambda n: (times[n].start_ns, n))
        shown = order[:MAX_BARS]
        free: dict[str, list[int]] = {track: [] for track in TRACKS}
        bars: list[dict[str, Any]] = []
        for n in shown:
            ix, t = lines[n], times[n]
            track = _track(ix)
            lanes = free[track]
            lane = next((k for k, end in enumerate(lanes) if end <= t.start_ns), len(lanes))
            if lane == len(lanes):
                lanes.append(t.end_ns)
            else:
                lanes[lane] = t.end_ns
            bars.append(
                {
                    "i": index + n,
                    "track": track,
                    "lane": lane,
                    "label": _label(ix),
                    "start_ms": _ms(t.start_ns - origin),
                    "ttfb_ms": None if t.ttfb_ms is None else round(t.ttfb_ms, 3),
                    "end_ms": _ms(t.end_ns - origin),
                    "error": _failed(ix),
                    "dated": t.dated,
                }
            )
        out.append(
            {
                "cassette": c,
                "bars": bars,
                "more": len(order) - len(shown),
                "lanes": {track: len(free[track]) for track in TRACKS},
                "span_ms": max((_ms(times[n].end_ns - origin) for n in shown), default=0.0),
            }
        )
        index += len(lines)
    return out


def _error(error: CallError) -> dict[str, Any]:
    return {"type": error.type, "module": error.module, "message": error.message}


def call_detail(log: CallLog, meta: Mapping[str, Any]) -> dict[str, Any]:
    """What a call line's detail shows: its name, kind and arguments, and
    how it ended (a value returned, values yielded with their offsets, an
    exception raised), with its ``total_ms`` (the values as the line holds
    them: the caller makes them JSON a browser reads)."""
    outcome = log.outcome
    ended: dict[str, Any]
    if isinstance(outcome, CallResult):
        ended = {"returned": outcome.value}
    elif isinstance(outcome, CallStream):
        ended = {
            "yields": [[round(at, 3), value] for at, value in outcome.items],
            "end_ms": round(outcome.end_ms, 3),
            "raised": None if outcome.error is None else _error(outcome.error),
        }
    else:
        ended = {"raised": _error(outcome)}
    total = meta.get("total_ms")
    if isinstance(total, bool) or not isinstance(total, (int, float)) or not math.isfinite(total):
        total = None
    return {
        "name": log.call.name,
        "kind": log.call.kind,
        "args": dict(log.call.args),
        "total_ms": total,
        **ended,
    }
