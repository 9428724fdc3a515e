"""start_of: what opening a cassette does, in every mode (the whole table)."""

from __future__ import annotations

import pytest

from reel_core import Mode
from reel_core.tools import Start, start_of

TABLE = [
    # mode, exists, refreshed earlier in the run -> start
    (Mode.RECORD, True, False, Start.FRESH),
    (Mode.RECORD, False, False, Start.FRESH),
    (Mode.RECORD, True, True, Start.KEEP),
    (Mode.RECORD, False, True, Start.KEEP),
    (Mode.AUTO, True, False, Start.KEEP),
    (Mode.AUTO, False, False, Start.KEEP),
    (Mode.AUTO, False, True, Start.KEEP),
    (Mode.LIVE, True, False, Start.KEEP),
    (Mode.LIVE, False, False, Start.KEEP),
    (Mode.REPLAY, True, False, Start.KEEP),
    (Mode.REPLAY, True, True, Start.KEEP),
    (Mode.REPLAY, False, False, Start.MISSING),
    (Mode.REPLAY, False, True, Start.MISSING),
]


@pytest.mark.parametrize(("mode", "exists", "refreshed", "start"), TABLE)
def test_start_of(mode: Mode, exists: bool, refreshed: bool, start: Start) -> None:
    assert start_of(mode, exists=exists, refreshed=refreshed) is start


def test_the_table_covers_every_mode() -> None:
    assert {row[0] for row in TABLE} == set(Mode)
    assert start_of(Mode.RECORD, exists=True) is Start.FRESH  # not refreshed by default
