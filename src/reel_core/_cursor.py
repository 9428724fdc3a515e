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
        # Per settings, then per key: a dict of strings to numbers is one
        # the garbage collector stops tracking, where a (settings, key)
        # tuple for each key served stays one more object each full
        # collection walks (and is built again at every look-up).
        self._plays: dict[MatchConfig, dict[str, int]] = {}

    def _counts(self, config: MatchConfig) -> dict[str, int]:
        counts = self._plays.get(config)
        if counts is None:
            counts = self._plays[config] = {}
        return counts

    def next(self, config: MatchConfig, key: str, recorded: int, *, repeat: bool) -> int | None:
        """Which of the ``recorded`` recordings of ``key`` to serve now
        (0-based, in recorded order), counting the play; ``None`` when
        there is none to serve (nothing recorded, or all were served and
        ``repeat`` is off), which counts nothing."""
        if not recorded:
            return None
        counts = self._counts(config)
        n = counts.get(key, 0)
        if n >= recorded and not repeat:
            return None
        counts[key] = n + 1
        return min(n, recorded - 1)

    def played(self, config: MatchConfig, key: str) -> None:
        """Count a recording of ``key`` served live (as it was recorded)."""
        counts = self._counts(config)
        counts[key] = counts.get(key, 0) + 1

    def restart(self, config: MatchConfig, key: str) -> None:
        """Start ``key``'s count over: a newer generation of its recordings
        replaces the one counted so far."""
        self._counts(config).pop(key, None)

    def plays(self, config: MatchConfig, key: str) -> int:
        """How many times ``key`` was served (or recorded) so far."""
        return self._counts(config).get(key, 0)

    def clear(self) -> None:
        """Forget every count."""
        self._plays.clear()
