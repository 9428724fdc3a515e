"""Hypothesis profiles for the property tests.

``dev`` (the default) is quick enough to run on every save; ``ci`` digs
deeper (Hypothesis' own default of 100 examples a property, twice ``dev``)
and prints a reproduction blob for every failure.  Pick one with
``HYPOTHESIS_PROFILE=ci``.

The ``ci`` profile ran 250 examples a property until the property tests
(about 165 of them, with coverage) took a third of ``.ci/run``'s CPU, seven
minutes of it on two cores: more examples a run bought less than the ten
minutes the run is allowed.  The fuzz targets (``tests/reliability/
test_fuzz.py``) keep their own, larger budget.
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
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
