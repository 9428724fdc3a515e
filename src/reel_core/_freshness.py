"""Freshness: is a recording older than its ``max_age``?

The core never reads a clock: a binding hands the wall-clock time (epoch
seconds) in with each request (``Engine.receive_request(wall=...)``), and
this module compares it with the ``ts`` a recording carries.

A recording whose time is unknown (no ``ts``, as some imported cassettes
have, or one that does not read as a time) cannot be shown to be fresh, so
under a ``max_age`` it counts as stale; one stamped in the future (a clock
set wrong) counts as fresh.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

__all__ = ["Staleness", "format_age", "recorded_epoch", "staleness"]


@dataclass(frozen=True)
class Staleness:
    """Why a recording is stale: when it was recorded, how old it is, and
    the ``max_age`` it is past."""

    #: The recording's ``ts`` as written (``None``: it has none).
    recorded: str | None
    #: Its age in seconds at the time handed in (``None``: unknown).
    age: float | None
    #: The ``max_age`` in force, in seconds.
    max_age: float

    def describe(self) -> str:
        """``recorded 9d ago, max_age 7d`` (or ``age unknown``)."""
        if self.age is None:
            when = "no time of recording" if self.recorded is None else f"ts {self.recorded!r}"
            return f"age unknown ({when}), max_age {format_age(self.max_age)}"
        return f"recorded {format_age(self.age)} ago, max_age {format_age(self.max_age)}"


def recorded_epoch(ts: str | None) -> float | None:
    """The epoch seconds of a line's ``ts`` (ISO 8601, ``Z`` or an offset;
    a time without a zone is UTC), or ``None`` when it has none or it does
    not read as a time."""
    if ts is None:
        return None
    text = ts.strip()
    if text.endswith(("Z", "z")):  # fromisoformat reads "Z" only from 3.11
        text = text[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def staleness(ts: str | None, max_age: float, now: float) -> Staleness | None:
    """``None`` when a recording stamped ``ts`` is at most ``max_age``
    seconds old at ``now`` (epoch seconds); else why it is stale."""
    epoch = recorded_epoch(ts)
    if epoch is None:
        return Staleness(ts, None, max_age)
    age = now - epoch
    return Staleness(ts, age, max_age) if age > max_age else None


def format_age(seconds: float) -> str:
    """A duration as people read it: ``45s``, ``12m``, ``5h``, ``9d`` (the
    largest unit it holds at least once, rounded down)."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{max(0, int(seconds))}s"
