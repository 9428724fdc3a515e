"""What a binding served, in bounded memory: the run log.

Every binding keeps one :class:`RunLog` (the proxy, each in-process
:class:`~reel_bindings._inprocess.Player`) and notes each exchange once, as
it ends, with the verdict the core gave it (:attr:`reel_core.Engine.verdict`,
:attr:`reel_core.WebSocketSession.verdict`): bindings count, they never
label.  What freshness found goes in too: the stale recordings served, the
recordings a re-record superseded and the drifts between them (the core
decides them: ``Replay.stale``, ``Recorded.supersedes``, ``Recorded.drift``).
The pytest plugin reads it for a test's misses and the run report.

Its memory is bounded however long it serves: a count per verdict (exact),
the last :data:`WINDOW` exchanges (a ring), and the first :data:`KEPT`
misses, WebSocket misses, stale replays and drifts, each with the count of
those not kept.  A proxy serving for days keeps the counts alone
(``RunLog(window=0, keep=0)``): its log line says what each request got.

Not thread-safe by itself: a :class:`Player` notes under its lock, the
proxy on its event loop.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, NamedTuple, TypeVar

from reel_core import Verdict

if TYPE_CHECKING:
    # Named in annotations only: a replay that finds nothing stale does not
    # import the core's freshness, drift and miss rooms.
    import logging

    from reel_core import MissReport, Recorded
    from reel_core.tools import Drift, Staleness, WebSocketMiss

__all__ = ["KEPT", "WINDOW", "Kept", "RunLog", "Served", "StaleReplay"]

#: How many of the last exchanges a run log keeps.
WINDOW = 1000
#: How many misses (and WebSocket misses, stale replays, drifts) it keeps.
KEPT = 100

T = TypeVar("T")

_tuple = tuple.__new__


def _log() -> logging.Logger:
    # logging is imported when there is something to say: a replay with
    # nothing stale nor drifting does not load it.
    import logging

    return logging.getLogger("reel")


class Served(NamedTuple):
    """One exchange a binding served: its method and path (no query), the
    core's verdict, and ``http`` or ``websocket`` (a session, after its
    upgrade).  A tuple: one is made per request."""

    method: str
    path: str
    verdict: Verdict
    kind: str = "http"


@dataclass(frozen=True)
class StaleReplay:
    """A stale recording served (replay mode)."""

    method: str
    path: str
    staleness: Staleness

    def line(self) -> str:
        return f"stale {self.method} {self.path}: {self.staleness.describe()}"


class Kept(Generic[T]):
    """The first ``limit`` items added, and how many more were not kept."""

    __slots__ = ("_items", "dropped", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._items: list[T] = []
        #: Items added once ``limit`` were kept: counted, not kept.
        self.dropped = 0

    def add(self, item: T) -> None:
        if len(self._items) < self.limit:
            self._items.append(item)
        else:
            self.dropped += 1

    @property
    def total(self) -> int:
        """How many were added, kept or not."""
        return len(self._items) + self.dropped

    def __iter__(self) -> Iterator[T]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, index: int) -> T:
        return self._items[index]

    def __repr__(self) -> str:
        return f"Kept({self._items!r}, dropped={self.dropped})"


#: A count of 0 for each verdict (walking the enum costs more than a copy).
_NONE_YET: dict[Verdict, int] = dict.fromkeys(Verdict, 0)


class RunLog:
    """What one binding served: see the module docstring."""

    def __init__(self, *, window: int = WINDOW, keep: int = KEPT) -> None:
        #: How many exchanges ended with each verdict.
        self.counts: dict[Verdict, int] = _NONE_YET.copy()
        #: The last ``window`` exchanges, oldest first.
        self.last: deque[Served] = deque(maxlen=window)
        #: The miss reports of the requests that missed.
        self.misses: Kept[MissReport] = Kept(keep)
        #: The replayed WebSocket sessions that stopped on a client message.
        self.websocket_misses: Kept[WebSocketMiss] = Kept(keep)
        #: The stale recordings served.
        self.stale: Kept[StaleReplay] = Kept(keep)
        #: The drifts re-records found.
        self.drifts: Kept[Drift] = Kept(keep)
        #: How many recordings were superseded by a re-record.
        self.superseded = 0

    @property
    def total(self) -> int:
        """How many exchanges were served."""
        return sum(self.counts.values())

    def served(self, method: str, path: str, verdict: Verdict, kind: str = "http") -> None:
        """An exchange ended, with the core's ``verdict``."""
        self.counts[verdict] += 1
        self.last.append(_tuple(Served, (method, path, verdict, kind)))  # Served(...), faster

    def missed(self, report: MissReport) -> None:
        """A request missed (its exchange is noted by :meth:`served`)."""
        self.misses.add(report)

    def session_missed(self, report: MissReport) -> None:
        """A replayed gRPC session stopped on a client message: its exchange,
        served as a hit when it began, ends a miss (as a WebSocket
        session's does): counted so, and its entry in :attr:`last` too."""
        self.misses.add(report)
        if not self.counts[Verdict.HIT]:  # pragma: no cover - served before it missed
            return
        self.counts[Verdict.HIT] -= 1
        self.counts[Verdict.MISS] += 1
        for at in range(len(self.last) - 1, -1, -1):
            entry = self.last[at]
            if entry.verdict is Verdict.HIT and (entry.method, entry.path) == (
                report.method,
                report.path,
            ):
                self.last[at] = entry._replace(verdict=Verdict.MISS)
                break

    def websocket_missed(self, miss: WebSocketMiss) -> None:
        """A replayed WebSocket session stopped on a client message."""
        self.websocket_misses.add(miss)

    def stale_served(self, method: str, path: str, staleness: Staleness) -> None:
        """A stale recording was replayed: kept, and logged."""
        self.stale.add(StaleReplay(method, path, staleness))
        _log().info("served a stale recording of %s %s: %s", method, path, staleness.describe())

    def recorded(self, recorded: Recorded) -> None:
        """A recording was appended: count what it superseded, say its drift."""
        if recorded.supersedes is not None:
            self.superseded += 1
        if recorded.drift is not None:
            self.drifts.add(recorded.drift)
            _log().warning("%s", recorded.drift.line())
