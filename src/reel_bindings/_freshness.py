"""What freshness found while a binding served: the stale recordings it
replayed, the recordings a re-record superseded, and the drifts between
them.  The core decides (``Replay.stale``, ``Recorded.supersedes``,
``Recorded.drift``); a binding collects them here for its log, the pytest
plugin's terminal summary and the run report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Named in annotations only: a replay that finds nothing stale does not
    # import the core's freshness and drift rooms.
    import logging

    from reel_core import Recorded
    from reel_core.tools import Drift, Staleness

__all__ = ["Freshness", "StaleReplay"]


def _log() -> logging.Logger:
    # logging is imported when there is something to say: a replay with
    # nothing stale nor drifting does not load it.
    import logging

    return logging.getLogger("reel")


@dataclass(frozen=True)
class StaleReplay:
    """A stale recording served (replay mode)."""

    method: str
    path: str
    staleness: Staleness

    def line(self) -> str:
        return f"stale {self.method} {self.path}: {self.staleness.describe()}"


@dataclass(eq=False)
class Freshness:
    """Collected as requests are served (appends only: threads may share it).
    With ``keep=False`` (a long-running proxy) only logged and counted."""

    stale: list[StaleReplay] = field(default_factory=list)
    #: How many recordings were superseded by a re-record.
    superseded: int = 0
    drifts: list[Drift] = field(default_factory=list)
    keep: bool = True

    def stale_served(self, method: str, path: str, staleness: Staleness) -> None:
        """A stale recording was replayed."""
        if self.keep:
            self.stale.append(StaleReplay(method, path, staleness))
        _log().info("served a stale recording of %s %s: %s", method, path, staleness.describe())

    def recorded(self, recorded: Recorded) -> None:
        """A recording was appended: count what it superseded, say its drift."""
        if recorded.supersedes is not None:
            self.superseded += 1
        if recorded.drift is not None:
            if self.keep:
                self.drifts.append(recorded.drift)
            _log().warning("%s", recorded.drift.line())
