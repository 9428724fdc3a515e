"""The run log holds what a binding served in bounded memory, and says
exactly what a plain list of every exchange would: the counts per verdict,
the last exchanges, the first misses (and how many more there were)."""

from __future__ import annotations

from collections import Counter

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from reel_bindings._runlog import KEPT, WINDOW, RunLog, Served, StaleReplay
from reel_core import MissReport, Recorded, Verdict
from reel_core.tools import Drift, Staleness

STALE = Staleness("2020-01-01T00:00:00Z", 9 * 86400.0, 86400.0)
DRIFT = Drift("sha256:k", "POST /v1/x", "a", "b", None, None, ("+ b: number",))


def miss(n: int) -> MissReport:
    return MissReport(
        "c", "replay", "normalized", f"sha256:{n}", "POST", "/v1", "no recording matches", 0, None
    )


def held(log: RunLog) -> int:
    """The items the log holds: its counters, its ring and its kept lists."""
    return (
        len(log.counts)
        + len(log.last)
        + len(log.misses)
        + len(log.websocket_misses)
        + len(log.stale)
        + len(log.drifts)
    )


def test_a_hundred_thousand_exchanges_hold_no_more_than_the_bound() -> None:
    log = RunLog()
    verdicts = list(Verdict)
    reports = [miss(n) for n in range(10)]
    bound = len(Verdict) + WINDOW + 4 * KEPT
    for n in range(100_000):
        log.served("POST", f"/v1/{n % 7}", verdicts[n % len(verdicts)])
        log.missed(reports[n % 10])
        log.stale.add(StaleReplay("POST", "/v1", STALE))
        log.drifts.add(DRIFT)
        if n % 1000 == 0:  # bounded all along, not only at the end
            assert held(log) <= bound
    assert held(log) == bound - KEPT  # no WebSocket miss was added
    assert log.total == 100_000
    assert sum(log.counts.values()) == 100_000
    assert len(log.last) == WINDOW
    assert log.last[-1] == Served("POST", f"/v1/{99_999 % 7}", verdicts[99_999 % len(verdicts)])
    assert (len(log.misses), log.misses.dropped, log.misses.total) == (
        KEPT,
        100_000 - KEPT,
        100_000,
    )
    assert log.stale.total == log.drifts.total == 100_000


def test_a_serving_proxy_s_log_keeps_counts_alone() -> None:
    log = RunLog(window=0, keep=0)
    for n in range(1000):
        log.served("GET", "/", Verdict.HIT)
        log.missed(miss(n))
    assert held(log) == len(Verdict)
    assert (log.counts[Verdict.HIT], log.misses.total) == (1000, 1000)


class RunLogModel(RuleBasedStateMachine):
    """The run log against plain lists of everything (the model)."""

    def __init__(self) -> None:
        super().__init__()
        self.window, self.keep = 5, 3
        self.log = RunLog(window=self.window, keep=self.keep)
        self.served: list[Served] = []
        self.misses: list[MissReport] = []
        self.recorded: list[Recorded] = []

    @rule(
        method=st.sampled_from(["GET", "POST"]),
        path=st.sampled_from(["/a", "/b"]),
        verdict=st.sampled_from(Verdict),
        kind=st.sampled_from(["http", "websocket"]),
    )
    def serve(self, method: str, path: str, verdict: Verdict, kind: str) -> None:
        self.log.served(method, path, verdict, kind)
        self.served.append(Served(method, path, verdict, kind))

    @rule(n=st.integers(0, 1000))
    def miss(self, n: int) -> None:
        report = miss(n)
        self.log.missed(report)
        self.misses.append(report)

    @rule(supersedes=st.booleans(), drift=st.booleans())
    def record(self, supersedes: bool, drift: bool) -> None:
        recorded = Recorded(
            b"{}\n", "i", "sha256:k", "a" if supersedes else None, DRIFT if drift else None
        )
        self.log.recorded(recorded)
        self.recorded.append(recorded)

    @invariant()
    def counts_are_the_model_s(self) -> None:
        counts = Counter(s.verdict for s in self.served)
        assert self.log.counts == {v: counts[v] for v in Verdict}
        assert self.log.total == len(self.served)

    @invariant()
    def the_window_is_the_model_s_tail(self) -> None:
        assert list(self.log.last) == self.served[-self.window :]

    @invariant()
    def the_first_misses_are_kept_and_the_rest_counted(self) -> None:
        assert list(self.log.misses) == self.misses[: self.keep]
        assert self.log.misses.dropped == max(0, len(self.misses) - self.keep)
        assert self.log.misses.total == len(self.misses)

    @invariant()
    def freshness_is_the_model_s(self) -> None:
        drifts = [r.drift for r in self.recorded if r.drift is not None]
        assert list(self.log.drifts) == drifts[: self.keep]
        assert self.log.drifts.total == len(drifts)
        assert self.log.superseded == sum(r.supersedes is not None for r in self.recorded)


TestRunLogModel = RunLogModel.TestCase
