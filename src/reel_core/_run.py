"""A cassette as one run: where each of its lines sits in time.

Theory of operation.  A line's ``ts`` is the wall-clock time of its
response head (the ``101`` of a WebSocket session), to the millisecond.
Its ``meta`` says how long the head took (``ttfb_ms``, from the request
sent) and how long the whole exchange took (``total_ms``: from the request
sent to the last byte; for a session, from the upgrade to the close).  So
an exchange began at ``ts - ttfb_ms`` and ended ``total_ms`` later.  What a
line's ``meta`` does not say is taken from what the line holds: a stream's
end (or cut), a session's close (or its last message); a whole body with
neither took no time after its head.  A call line (a tool's: see
:mod:`reel_core._calls`) is stamped when the call returned (or raised, or
its generator ended): it began ``total_ms`` before its ``ts`` (a
generator's end when its ``meta`` holds none).

A line without a ``ts`` (an import of a format that keeps none) is placed
right after the line before it in the file; one before any dated line, at
the first dated line's start (the Unix epoch when none is dated).  Such a
time is marked ``dated=False``: an order, not a clock.

The viewer's timeline and ``reel export otel`` both place lines through
:func:`line_times`, so the two never disagree about when something ran.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ._calls import CallStream
from ._interaction import Interaction

__all__ = ["MAX_MS", "LineTime", "epoch_ns", "line_times", "ms_ns"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

#: The longest stretch of time a line is taken to say (about 31 years): a
#: longer one (a line may hold any finite number) counts as this long, so
#: every time stays an integer a 64-bit field holds.
MAX_MS = 1e12


def ms_ns(ms: float) -> int:
    """``ms`` milliseconds in whole nanoseconds, held to 0 ... :data:`MAX_MS`."""
    return round(min(max(ms, 0.0), MAX_MS) * 1_000_000)


@dataclass(frozen=True)
class LineTime:
    """When one line of a run ran, in Unix epoch nanoseconds."""

    #: The request sent (the upgrade asked for, for a session; the call
    #: made, for a call).
    start_ns: int
    #: The last byte received (the close, for a session; the return, for a
    #: call); never before ``start_ns``.
    end_ns: int
    #: From ``start_ns`` to the response head, when the line says.
    ttfb_ms: float | None
    #: The line had a ``ts``; else its place follows the line before it.
    dated: bool


def epoch_ns(timestamp: str | None) -> int | None:
    """A line's ``ts`` (ISO 8601; no zone is UTC) in Unix epoch nanoseconds,
    exactly (no float on the way); ``None`` for none or one that does not
    read as a time."""
    if timestamp is None:
        return None
    try:
        moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    since = moment - _EPOCH
    return (since.days * 86_400 + since.seconds) * 1_000_000_000 + since.microseconds * 1_000


def _ms(meta: Mapping[str, Any], name: str) -> float | None:
    """A duration of ``meta``: a finite number of ms, 0 or more, else ``None``
    (a line may be written by hand)."""
    value = meta.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return float(value)


def _held_ms(ix: Interaction) -> float:
    """How long after its head a line's exchange ran, by what the line holds:
    a session's close or last message, a stream's cut or end, else 0."""
    ws = ix.websocket
    if ws is not None:
        if ws.close is not None:
            return max(ws.close.at_ms, 0.0)
        return max((m.at_ms for m in ws.messages), default=0.0)
    response = ix.response
    if response.stream is None:
        return 0.0
    return max(response.cut.at_ms if response.cut is not None else response.end_ms, 0.0)


def _span(ix: Interaction) -> tuple[float, float | None, float]:
    """``(ms before its ts the line's exchange or call began, ttfb_ms, its
    length in ms)``."""
    total = _ms(ix.meta, "total_ms")
    if ix.call is not None:
        if total is None:
            outcome = ix.call.outcome
            total = max(outcome.end_ms, 0.0) if isinstance(outcome, CallStream) else 0.0
        return total, None, total
    ttfb = _ms(ix.meta, "ttfb_ms")
    before = ttfb or 0.0
    if total is None:
        return before, ttfb, before + _held_ms(ix)
    if ix.websocket is not None:  # a session's total counts from the upgrade
        return before, ttfb, before + total
    return before, ttfb, max(total, before)


def line_times(lines: Sequence[Interaction]) -> list[LineTime]:
    """When each line of a cassette ran, in the cassette's order."""
    spans = [(epoch_ns(ix.timestamp), *_span(ix)) for ix in lines]
    dated = (head - ms_ns(before) for head, before, _, _ in spans if head is not None)
    cursor = next(dated, 0)
    out = []
    for head, before, ttfb, length in spans:
        start = cursor if head is None else head - ms_ns(before)
        end = start + ms_ns(length)
        out.append(LineTime(start, end, ttfb, head is not None))
        cursor = end
    return out
