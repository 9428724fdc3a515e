"""The lines of a cassette kept parsed: the few used last, not every one.

Theory of operation.  A cassette is indexed without parsing its lines
(:mod:`reel_core._cassette`); a line is parsed when a request first needs
it, and kept parsed for the next.  Kept for good, a proxy or a player that
serves every line of a large cassette ends up holding every line parsed: a
parsed line weighs about twice its bytes (7.4 KB for a 3.8 KB OpenAI
line), so a 1 GB cassette served whole grew by about 2 GB.

:class:`ParsedLines` keeps at most ``limit`` of them, the ones used last
(an LRU); a line it let go is parsed again from its bytes, which the
cassette keeps (or reads again: a large file's lines stay in the file).
Nothing else changes, because nothing else is kept on the parsed object:

* a line parsed again is the same recording (its bytes did not change; a
  file rewritten under the proxy makes it a bad line, as it does a line
  never parsed, and a line whose key changed is refused as before);
* play counts, sequences and generations are kept by key and position
  (:mod:`reel_core._cursor`, the cassette's index and generations), never
  on a parsed object, so a line let go and parsed again is served where its
  sequence is;
* what is derived from a parsed line and shared (the replay events of a
  recording, see ``Engine._replay``) holds its recording and is checked by
  identity: a line parsed again derives them afresh.

:data:`PARSED_LINES` is the default ``limit`` (``REEL_PARSED_LINES`` sets
it in the bindings): 4,096 lines, about 30 MB of typical chat completions,
as many as the keying memo (:mod:`reel_core._memo`) and the replay events
kept, and more than a test suite's cassette holds, so a suite never parses
a line twice.  Engines on other threads may share a cassette (each player
has its own lock): every step here is one operation of an ``OrderedDict``,
and a line another thread let go meanwhile is only parsed again.
"""

from __future__ import annotations

from collections import OrderedDict
from contextlib import suppress
from typing import TYPE_CHECKING

from ._errors import ConfigError

if TYPE_CHECKING:
    from ._interaction import Interaction

__all__ = ["PARSED_LINES", "ParsedLines"]

#: How many parsed lines a cassette keeps by default.
PARSED_LINES = 4096


class ParsedLines:
    """Line position -> the line parsed, for the ``limit`` lines used last."""

    __slots__ = ("_kept", "limit")

    def __init__(self, limit: int = PARSED_LINES) -> None:
        self._kept: OrderedDict[int, Interaction] = OrderedDict()
        self.limit = check_limit(limit)

    def __len__(self) -> int:
        return len(self._kept)

    def __contains__(self, position: int) -> bool:
        return position in self._kept

    def get(self, position: int) -> Interaction | None:
        """Line ``position`` parsed, if it is kept (it becomes the line used
        last), else ``None``."""
        kept = self._kept
        found = kept.get(position)
        if found is not None:
            # another thread may have let it go meanwhile: still ours to serve
            with suppress(KeyError):
                kept.move_to_end(position)
        return found

    def keep(self, position: int, interaction: Interaction) -> None:
        """Keep line ``position`` parsed, letting go of the lines used least
        lately past :attr:`limit`."""
        kept = self._kept
        kept.pop(position, None)  # a line kept already is now the one used last
        kept[position] = interaction
        self._trim()

    def resize(self, limit: int) -> None:
        """Keep at most ``limit`` lines from now on."""
        self.limit = check_limit(limit)
        self._trim()

    def _trim(self) -> None:
        kept = self._kept
        while len(kept) > self.limit:
            try:
                kept.popitem(last=False)
            except KeyError:  # another thread emptied it meanwhile
                break

    def clear(self) -> None:
        self._kept.clear()


def check_limit(limit: int) -> int:
    """``limit`` if it is a positive number of lines; else a
    :class:`~reel_core.ConfigError` saying so."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ConfigError(
            f"a cassette keeps a positive number of parsed lines (e.g. {PARSED_LINES}), "
            f"not {limit!r}"
        )
    return limit
