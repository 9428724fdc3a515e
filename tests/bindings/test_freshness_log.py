"""What a binding says about freshness: a stale replay (info) and a drift
(a warning: the proxy's log shows it at its default level)."""

from __future__ import annotations

import logging

import pytest

from reel_bindings._runlog import RunLog
from reel_core import Recorded
from reel_core.tools import Drift, Staleness


def test_stale_replays_superseded_recordings_and_drifts_are_counted_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    found = RunLog()
    caplog.set_level(logging.INFO, logger="reel")
    found.stale_served("POST", "/v1/chat/completions", Staleness("2020", 9 * 86400.0, 86400.0))
    drift = Drift("sha256:k", "POST /v1/x", "a", "b", None, None, ("+ b: number",))
    found.recorded(Recorded(b"{}\n", "c", "sha256:k"))  # a first recording: nothing superseded
    found.recorded(Recorded(b"{}\n", "b", "sha256:k", "a", drift))
    found.recorded(Recorded(b"{}\n", "d", "sha256:k", "b", None))
    assert found.superseded == 2
    assert list(found.drifts) == [drift]
    assert [s.line() for s in found.stale] == [
        "stale POST /v1/chat/completions: recorded 9d ago, max_age 1d"
    ]
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        (
            "INFO",
            "served a stale recording of POST /v1/chat/completions: recorded 9d ago, max_age 1d",
        ),
        ("WARNING", "drift POST /v1/x (a -> b): + b: number"),
    ]
