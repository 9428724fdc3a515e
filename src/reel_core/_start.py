"""What opening a cassette does in each mode: the one place that says so.

Bindings ask :func:`start_of` and act on the answer (a store read, a
store replace, an error); none of them decides it.

* ``record`` starts the cassette afresh (its ``_meta`` settings kept),
  unless it was already refreshed earlier in the same run (the pytest
  plugin: later tests of the run add to it);
* ``auto`` and ``live`` keep what is there (a missing cassette is an empty
  one; ``auto`` creates it when it records);
* ``replay`` keeps what is there; a missing cassette is an error, since
  replay records nothing and every request would miss.
"""

from __future__ import annotations

import enum

from ._config import Mode

__all__ = ["Start", "start_of"]


class Start(enum.Enum):
    """How a binding opens a cassette."""

    #: Read what is there (nothing, when the cassette does not exist).
    KEEP = "keep"
    #: Start afresh: the ``_meta`` line alone, the cassette's own settings kept.
    FRESH = "fresh"
    #: Refuse: a replay of a cassette that does not exist.
    MISSING = "missing"


def start_of(mode: Mode, *, exists: bool, refreshed: bool = False) -> Start:
    """How to open a cassette in ``mode``; ``exists`` says whether it does,
    ``refreshed`` whether this run already started it afresh."""
    if mode is Mode.RECORD and not refreshed:
        return Start.FRESH
    if mode is Mode.REPLAY and not exists:
        return Start.MISSING
    return Start.KEEP
