"""Generations of recordings, read from a whole cassette: what supersedes
what, the drifts between them, and the cassette without superseded lines.

Each line carries its generation (``"gen"``, 0 when absent).  Recording a
stale recording again (auto mode, past its ``max_age``) appends the next
generation of its request; only the newest generation of a key answers, and
the older lines stay until ``reel compact`` drops them.  These functions
read cassette bytes, as ``reel drift`` and ``reel compact`` do (the
:class:`~reel_core.Cassette` answers the same questions while it serves).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from ._assets import AssetSource
from ._codec import DecodedLine, decode_lines
from ._interaction import Interaction
from ._shape import Drift, drift_of

__all__ = ["Compaction", "compact", "generations", "lines_drift", "superseded"]

_BOM = b"\xef\xbb\xbf"


def generations(
    lines: Sequence[DecodedLine],
) -> dict[str, dict[int, list[tuple[int, Interaction]]]]:
    """Key -> generation -> its ``(line number, interaction)`` in order
    (the lines that parse)."""
    found: dict[str, dict[int, list[tuple[int, Interaction]]]] = {}
    for line in lines:
        if line.interaction is not None:
            by_gen = found.setdefault(line.interaction.key, {})
            by_gen.setdefault(line.interaction.generation, []).append(
                (line.number, line.interaction)
            )
    return found


def superseded(lines: Sequence[DecodedLine]) -> list[DecodedLine]:
    """The lines of an older generation than their key's newest, in order."""
    numbers = {
        number
        for by_gen in generations(lines).values()
        for gen, group in by_gen.items()
        if gen < max(by_gen)
        for number, _ in group
    }
    return [line for line in lines if line.number in numbers]


def lines_drift(lines: Sequence[DecodedLine]) -> list[Drift]:
    """Every drift between a generation and the one before it: each line
    against the line at its rank in the previous generation of its key (a
    429 against the old 429, the retry's 200 against the old 200), in the
    order of the newer lines."""
    found: list[tuple[int, Drift]] = []
    for by_gen in generations(lines).values():
        for older, newer in itertools.pairwise(sorted(by_gen)):
            # past the shorter generation's count, a line has no counterpart
            for (_, old), (number, new) in zip(by_gen[older], by_gen[newer], strict=False):
                drift = drift_of(old, new)
                if drift is not None:
                    found.append((number, drift))
    return [drift for _, drift in sorted(found, key=lambda pair: pair[0])]


@dataclass(frozen=True)
class Compaction:
    """A cassette without its superseded lines (:func:`compact`)."""

    #: The new cassette bytes: the ``_meta`` line and every kept line as it
    #: was, in order, each ended by a newline.
    data: bytes
    #: How many interaction lines are kept.
    kept: int
    #: The superseded lines, dropped.
    superseded: tuple[DecodedLine, ...]
    #: The lines that do not parse: dropped with ``drop_bad``, else kept.
    bad: tuple[DecodedLine, ...]
    drop_bad: bool

    @property
    def changed(self) -> bool:
        """Whether anything is dropped."""
        return bool(self.superseded) or (self.drop_bad and bool(self.bad))


def compact(
    data: bytes, name: str, *, drop_bad: bool = False, assets: AssetSource | None = None
) -> Compaction:
    """``data`` without the lines newer generations supersede (and, with
    ``drop_bad``, without lines that do not parse).  Blank lines go; every
    other line is kept byte for byte.  Raises
    :class:`~reel_core.CassetteError` for bytes that are no cassette or a
    bad ``_meta`` line (nothing is dropped from a cassette that cannot be
    read).  Lines are read with their ``assets`` (a line whose asset is
    missing does not parse)."""
    decoded = decode_lines(data, name, assets=assets)
    gone = {line.number for line in superseded(decoded.lines)}
    bad = tuple(line for line in decoded.lines if line.interaction is None)
    if drop_bad:
        gone |= {line.number for line in bad}
    out = []
    if decoded.has_meta:
        out.append(data.removeprefix(_BOM).split(b"\n", 1)[0])
    kept = [line for line in decoded.lines if line.number not in gone]
    out += [line.raw for line in kept]
    return Compaction(
        b"".join(part + b"\n" for part in out),
        sum(line.interaction is not None for line in kept),
        tuple(line for line in decoded.lines if line.number in gone and line.interaction),
        bad,
        drop_bad,
    )
