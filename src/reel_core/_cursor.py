"""The replay cursor: which recording of a request is served next.

The sequence rules live here and only here:

* the recordings of one request are served once each, in recorded order;
* once all were served, the last one is served again when repeating
  (replay mode with ``repeat`` on, the default), or none is (replay mode
  with ``repeat`` off, and auto mode, where the miss goes upstream);
* a recording made live counts as served once;
* a recording that starts a newer generation of its request (a stale one
  recorded again) starts the count over: the older generation is
  superseded, and the sequence is the new one's.

Play counts are kept per (match settings, key): the same lines, indexed
under other match settings, are counted apart.  The cursor knows counts,
not lines: a :class:`~reel_core._cassette.Cassette` asks it which of a
key's recordings to serve.
"""

from __future__ import annotations

from ._config import Mode
from ._match import MatchConfig

__all__ = ["Cursor", "repeats_last"]


def repeats_last(mode: Mode, repeat: bool | None, cassette_repeat: bool) -> bool:
    """Whether a request served past its recorded count gets the last
    recording again: only in replay mode, as ``repeat`` (the config's)
    says, else as the cassette's ``_meta`` says.  Never in auto mode: a
    retry of a recorded 429 must reach the upstream."""
    return mode is Mode.REPLAY and (cassette_repeat if repeat is None else repeat)


class Cursor:
    """How many times each (match settings, key) was served."""

    __slots__ = ("_plays",)

    def __init__(self) -> None:
        self._plays: dict[tuple[MatchConfig, str], int] = {}

    def next(self, config: MatchConfig, key: str, recorded: int, *, repeat: bool) -> int | None:
        """Which of the ``recorded`` recordings of ``key`` to serve now
        (0-based, in recorded order), counting the play; ``None`` when
        there is none to serve (nothing recorded, or all were served and
        ``repeat`` is off), which counts nothing."""
        if not recorded:
            return None
        n = self._plays.get((config, key), 0)
        if n >= recorded and not repeat:
            return None
        self._plays[(config, key)] = n + 1
        return min(n, recorded - 1)

    def played(self, config: MatchConfig, key: str) -> None:
        """Count a recording of ``key`` served live (as it was recorded)."""
        self._plays[(config, key)] = self._plays.get((config, key), 0) + 1

    def restart(self, config: MatchConfig, key: str) -> None:
        """Start ``key``'s count over: a newer generation of its recordings
        replaces the one counted so far."""
        self._plays.pop((config, key), None)

    def plays(self, config: MatchConfig, key: str) -> int:
        """How many times ``key`` was served (or recorded) so far."""
        return self._plays.get((config, key), 0)

    def clear(self) -> None:
        """Forget every count."""
        self._plays.clear()
