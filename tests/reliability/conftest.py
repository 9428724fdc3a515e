"""Markers of the reliability suite (registered here: ``--strict-markers``)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "fuzz: a fuzz run, bounded by default (REEL_FUZZ_SECONDS, REEL_FUZZ_EXAMPLES "
        "make it longer)",
    )
    config.addinivalue_line(
        "markers", "soak: a timed load run (REEL_SOAK_SECONDS per backend, default 60)"
    )
