"""Replay timing: when each recorded frame is due.

Offsets are absolute, counted from the first byte of the response, so a
binding sleeps until ``start + at`` for each frame and never accumulates the
drift that summed sleeps do.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ._errors import ConfigError

__all__ = ["Timing", "TimingMode"]


class TimingMode(enum.Enum):
    """How recorded frame offsets become replay deadlines."""

    #: Frames are due at their recorded offsets.
    REALTIME = "realtime"
    #: Every frame is due at once: no sleeps at all.
    FAST = "fast"
    #: Recorded offsets multiplied by a factor (chaos testing slow links).
    SLOW = "slow"


@dataclass(frozen=True)
class Timing:
    """A timing mode with its factor; parse one with :meth:`parse`."""

    mode: TimingMode = TimingMode.REALTIME
    factor: float = 1.0

    def __post_init__(self) -> None:
        if not self.factor > 0:
            raise ConfigError(f"timing factor must be positive, not {self.factor!r}")

    @classmethod
    def parse(cls, text: str) -> Timing:
        """Parse ``realtime``, ``fast`` or ``slow=N`` (N a positive number)."""
        name, sep, arg = text.strip().lower().partition("=")
        if name == "slow" and sep:
            try:
                factor = float(arg)
            except ValueError:
                factor = float("nan")
            if not factor > 0 or factor == float("inf"):
                raise ConfigError(
                    f"bad timing {text!r}: slow=N needs a positive number, e.g. slow=2"
                )
            return cls(TimingMode.SLOW, factor)
        if name in ("realtime", "fast") and not sep:
            return cls(TimingMode(name))
        raise ConfigError(f"bad timing {text!r}: use realtime, fast or slow=N")

    @property
    def scale(self) -> float:
        """What :meth:`schedule` multiplies a (finite) offset by: a long
        stream's deadlines are computed with it, not a call per frame."""
        if self.mode is TimingMode.FAST:
            return 0.0
        if self.mode is TimingMode.SLOW:
            return self.factor
        return 1.0

    def schedule(self, offset: float) -> float:
        """The replay deadline, in seconds after the response head, of a frame
        recorded ``offset`` seconds after the first response byte."""
        if self.mode is TimingMode.FAST:
            return 0.0
        if self.mode is TimingMode.SLOW:
            return offset * self.factor
        return offset

    def __str__(self) -> str:
        if self.mode is TimingMode.SLOW:
            return f"slow={self.factor:g}"
        return str(self.mode.value)
