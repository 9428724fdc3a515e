"""Checking a replay's timing without racing the machine (not a test module).

A busy CI machine can deliver a frame late, never early.  So the tests check
what cannot flake: (1) the binding asks to sleep until each frame's recorded
offset (a spy on its ``sleep_until``: the deadlines are exact numbers), and
(2) on the wall clock, no frame arrives before its offset.  How *closely*
frames follow their offsets is a speed figure, measured by ``nox -s bench``
(streaming fidelity, p99 of the offset error), never asserted in a test.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

__all__ = ["SLACK", "SleepSpy", "assert_not_early", "spy_sleeps"]

#: How far before its deadline a frame may arrive (clock granularity).
SLACK = 0.005


class SleepSpy:
    """Records every deadline a binding sleeps until, then sleeps for real."""

    def __init__(self, real: Callable[[float], Any]) -> None:
        self.real = real
        self.deadlines: list[float] = []

    def __call__(self, deadline: float) -> Any:
        self.deadlines.append(deadline)
        return self.real(deadline)

    def assert_spaced(self, offsets: Sequence[float], factor: float = 1.0) -> None:
        """The deadlines are the recorded offsets (times ``factor``) from one start."""
        assert len(self.deadlines) == len(offsets), (self.deadlines, offsets)
        first, base = self.deadlines[0], offsets[0]
        for deadline, offset in zip(self.deadlines, offsets, strict=True):
            assert deadline - first == pytest.approx((offset - base) * factor, abs=1e-6)


def spy_sleeps(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> SleepSpy:
    """Put a :class:`SleepSpy` in place of ``module.name`` for this test."""
    spy = SleepSpy(getattr(module, name))
    monkeypatch.setattr(module, name, spy)
    return spy


def assert_not_early(
    arrived: Sequence[float], offsets: Sequence[float], factor: float = 1.0
) -> None:
    """Each frame arrived (seconds after the start) no sooner than its offset."""
    assert len(arrived) == len(offsets), (arrived, offsets)
    for got, want in zip(arrived, offsets, strict=True):
        assert got >= want * factor - SLACK, (arrived, offsets, factor)
