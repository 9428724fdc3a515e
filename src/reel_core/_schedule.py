"""The replay schedule: a replay's timed events as the steps a binding
follows, each "wait until this offset, then send this".

Theory of operation.  A replayed response is a head, then frames, then its
end or a cut, each event carrying ``at``: its deadline in seconds after the
head went out (the timing mode already applied, see ``_timing.py``).  Every
binding does the same with them: sleep until ``start + at``, then write the
frame's bytes, end the body, or abort it.  :func:`replay_schedule` makes the
one decision in that loop, *whether there is anything to wait for*, so the
bindings only sleep and write:

- a step waits (``until`` set) only when its deadline is later than every
  deadline before it; an event due at the head (``at`` 0 or ``None``) or at
  a deadline already waited for goes out at once (``until`` is ``None``);
- the schedule ends with the first end or cut: what follows is no part of
  the response;
- events that are not timed (a ``Recorded`` line) are no step.

Sleeping until a deadline that has passed returns at once, so the steps
send every event when the naive loop (sleep until each event's own ``at``)
would, with no sleep where none is needed; the property tests check that.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ._events import Cut, EndOfResponse, Event, Frame

__all__ = ["Step", "replay_schedule"]


@dataclass(frozen=True)
class Step:
    """Wait until ``until`` seconds after the response head went out
    (``None``: nothing to wait for), then send ``event``: a
    :class:`Frame`'s bytes, the :class:`EndOfResponse`, or the
    :class:`Cut` (abort the response)."""

    until: float | None
    event: Frame | EndOfResponse | Cut

    @property
    def data(self) -> bytes:
        """The body bytes this step sends (``b""`` for an end or a cut)."""
        return self.event.data if isinstance(self.event, Frame) else b""

    @property
    def last(self) -> bool:
        """Whether the response is over after this step (an end or a cut)."""
        return not isinstance(self.event, Frame)


def replay_schedule(events: Iterable[Event]) -> Iterator[Step]:
    """The steps of a replay's timed ``events`` (those after its head),
    up to and including its end or cut.  Lazy: it pulls no event past the
    one it yields last."""
    waited = 0.0
    for event in events:
        if not isinstance(event, (Frame, EndOfResponse, Cut)):
            continue
        until = None
        if event.at is not None and event.at > waited:
            until = waited = event.at
        yield Step(until, event)
        if not isinstance(event, Frame):
            return
