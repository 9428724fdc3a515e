"""The run report: what each cassette did in a run (hits, misses, recorded,
stale, superseded lines, and the store it lives in), merged across
processes, rendered as text and as JSON (schema in docs/pytest-plugin.md).

Pure data: the bindings count, this module adds up and says it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from ._freshness import format_age

__all__ = [
    "REPORT_SCHEMA",
    "CassetteTally",
    "Outcome",
    "merge_tallies",
    "render_report",
    "report_json",
]

#: The version of the JSON report's layout.
REPORT_SCHEMA = 1

_COUNTS = ("hits", "misses", "recorded", "stale", "superseded")


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One interaction of a test: what happened to ``method path``."""

    test: str
    method: str
    path: str
    #: A ``Verdict``'s value: hit, miss, recorded, dropped, live, failed, refused.
    outcome: str
    #: ``http``, or ``websocket`` for a WebSocket session (its upgrade's
    #: method and path; a replayed session that stopped on a client message
    #: it does not match is a ``miss``).
    kind: str = "http"

    def to_json(self) -> dict[str, str]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class CassetteTally:
    """What one cassette did in a run."""

    cassette: str
    store: str
    hits: int = 0
    misses: int = 0
    recorded: int = 0
    stale: int = 0
    superseded: int = 0
    outcomes: list[Outcome] = dataclasses.field(default_factory=list)
    #: Each stale recording served (replay mode): test, method, path,
    #: recorded, age_seconds, max_age_seconds (JSON-ready).
    stale_replays: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: Each drift found by a re-record: test and ``Drift.to_json()``.
    drifts: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def add(self, other: CassetteTally) -> None:
        """Add ``other`` (the same cassette, counted elsewhere) to this one."""
        for name in _COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.outcomes.extend(other.outcomes)
        self.stale_replays.extend(other.stale_replays)
        self.drifts.extend(other.drifts)

    @property
    def websocket(self) -> dict[str, int]:
        """The WebSocket sessions among the outcomes, counted by outcome."""
        counts: dict[str, int] = {}
        for o in self.outcomes:
            if o.kind == "websocket":
                counts[o.outcome] = counts.get(o.outcome, 0) + 1
        return dict(sorted(counts.items()))

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"cassette": self.cassette, "store": self.store}
        data.update({name: getattr(self, name) for name in _COUNTS})
        data["websocket"] = self.websocket
        data["outcomes"] = [o.to_json() for o in self.outcomes]
        data["stale_replays"] = list(self.stale_replays)
        data["drifts"] = list(self.drifts)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CassetteTally:
        outcomes = [Outcome(**o) for o in data.get("outcomes", ())]
        counts = {name: int(data.get(name, 0)) for name in _COUNTS}
        return cls(
            str(data["cassette"]),
            str(data["store"]),
            **counts,
            outcomes=outcomes,
            stale_replays=list(data.get("stale_replays", ())),
            drifts=list(data.get("drifts", ())),
        )


def merge_tallies(tallies: Iterable[CassetteTally]) -> list[CassetteTally]:
    """One tally per (store, cassette), sorted by cassette, outcomes by test."""
    merged: dict[tuple[str, str], CassetteTally] = {}
    for tally in tallies:
        key = (tally.store, tally.cassette)
        if key not in merged:
            merged[key] = CassetteTally(tally.cassette, tally.store)
        merged[key].add(tally)
    result = sorted(merged.values(), key=lambda t: (t.cassette, t.store))
    for tally in result:
        tally.outcomes.sort(key=lambda o: o.test)
        tally.stale_replays.sort(key=lambda s: str(s.get("test", "")))
        tally.drifts.sort(key=lambda d: str(d.get("test", "")))
    return result


def report_json(tallies: Iterable[CassetteTally]) -> dict[str, Any]:
    """The machine-readable report."""
    cassettes = merge_tallies(tallies)
    totals: dict[str, Any] = {name: sum(getattr(t, name) for t in cassettes) for name in _COUNTS}
    sessions: dict[str, int] = {}
    for tally in cassettes:
        for outcome, n in tally.websocket.items():
            sessions[outcome] = sessions.get(outcome, 0) + n
    totals["websocket"] = dict(sorted(sessions.items()))
    return {
        "schema": REPORT_SCHEMA,
        "totals": totals,
        "cassettes": [t.to_json() for t in cassettes],
        "stale": [{"cassette": t.cassette, **s} for t in cassettes for s in t.stale_replays],
        "drift": [{"cassette": t.cassette, **d} for t in cassettes for d in t.drifts],
    }


def render_report(tallies: Iterable[CassetteTally], *, verbose: bool = False) -> list[str]:
    """One line per cassette, then one per stale recording served and per
    drift (and, ``verbose``, one per interaction)."""
    lines = []
    for tally in merge_tallies(tallies):
        counts = ", ".join(f"{getattr(tally, name)} {name}" for name in _COUNTS)
        sessions = tally.websocket
        if sessions:
            counts += "; WebSocket sessions: " + ", ".join(
                f"{n} {outcome}" for outcome, n in sessions.items()
            )
        lines.append(f"{tally.cassette} ({tally.store}): {counts}")
        if verbose:
            lines.extend(
                f"    {o.outcome:<9} {o.method} {o.path}"
                + (" (WebSocket)" if o.kind == "websocket" else "")
                + f"  [{o.test}]"
                for o in tally.outcomes
            )
        for s in tally.stale_replays:
            age = "age unknown"
            if s.get("age_seconds") is not None:
                age = f"recorded {format_age(float(s['age_seconds']))} ago"
            max_age = format_age(float(s.get("max_age_seconds") or 0))
            lines.append(
                f"    stale     {s.get('method')} {s.get('path')}: {age}, max_age {max_age}  "
                f"[{s.get('test')}]"
            )
        for d in tally.drifts:
            changes = "; ".join(str(c) for c in d.get("changes", ()))
            lines.append(f"    drift     {d.get('endpoint')}: {changes}  [{d.get('test')}]")
    return lines
