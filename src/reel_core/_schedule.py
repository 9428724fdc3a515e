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

:func:`replay_batches` groups the same steps for a binding that writes
bytes: the frames that go out at once (no wait between them) are one
:class:`Batch`, so a long stream due at once (fast timing) costs a write, a
chunk and a schedule decision per batch, not per frame.  A batch is cut
where a step waits, and after ``limit`` bytes; the bytes of its frames, in
order, are those of the steps it holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ._events import Cut, EndOfResponse, Event, Frame

__all__ = ["Batch", "Step", "replay_batches", "replay_schedule"]


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


@dataclass(frozen=True)
class Batch:
    """Wait until ``until`` seconds after the response head went out
    (``None``: nothing to wait for), then send the ``frames`` (their bytes
    joined, in order), then ``last`` if set: the :class:`EndOfResponse`,
    or the :class:`Cut` (abort the response)."""

    until: float | None
    frames: tuple[Frame, ...]
    last: EndOfResponse | Cut | None = None

    @property
    def size(self) -> int:
        """The body bytes of the batch's frames."""
        return sum([len(frame.data) for frame in self.frames])


def replay_batches(events: Iterable[Event], limit: int) -> Iterator[Batch]:
    """The steps of :func:`replay_schedule` for ``events``, the frames that
    go out at once grouped into batches of about ``limit`` bytes at most (a
    frame larger than ``limit`` is a batch of its own; a batch may end one
    frame past ``limit``).  A batch starts with a step that waits, or where
    the one before reached ``limit``; the end or cut joins the batch that
    is under way.  Lazy: it pulls no event past its batch's last frame but
    one (the event that starts the next).

    The same decisions as :func:`replay_schedule`, made inline: a
    :class:`Step` per frame is what a long stream must not cost.  The
    property tests hold the two to the same steps."""
    waited = 0.0
    until: float | None = None
    frames: list[Frame] = []
    size = 0
    for event in events:
        if type(event) is Frame:
            at = event.at
            if at is not None and at > waited:
                if frames:
                    yield Batch(until, tuple(frames))
                    frames, size = [], 0
                until = waited = at
            elif size >= limit:
                yield Batch(until, tuple(frames))
                frames, size, until = [], 0, None
            frames.append(event)
            size += len(event.data)
        elif isinstance(event, (EndOfResponse, Cut)):
            if event.at is not None and event.at > waited:
                if frames:
                    yield Batch(until, tuple(frames))
                    frames = []
                until = event.at
            yield Batch(until, tuple(frames), event)
            return
    if frames:  # events that stop before their end (the pull ended)
        yield Batch(until, tuple(frames))
