"""Hypothesis profiles for the property tests.

``dev`` (the default) is quick enough to run on every save; ``ci`` digs
deeper and prints a reproduction blob for every failure, and keeps the
whole ``tests/property`` run (with coverage) around a minute on two cores.
Pick one with ``HYPOTHESIS_PROFILE=ci``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "dev",
    max_examples=50,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "ci",
    max_examples=250,
    stateful_step_count=30,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
