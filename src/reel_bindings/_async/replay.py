"""A replayed body: its frames, each at its recorded offset.

``_async/replay.py`` (``aframes``) is the source; ``_sync/replay.py``
(``frames``) is generated from it by ``scripts/gen_sync.py``.  The async
transport yields ``aframes``; the sync transport and the requests adapter
(blocking-only) both yield ``frames``, each naming the exception a recorded
cut is raised as in its own library.

The frames come from the core's batches (``replay_batches``), as the
proxy's do: one decision and one wait per batch of frames due at once,
not per frame.  The client still gets a piece per recorded frame, each
when its step of the schedule is due: a batch is the schedule's steps
grouped, never joined here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable

from reel_core import Cut, Event, replay_batches

from .clock import sleep_until

__all__ = ["BATCH_SIZE", "aframes"]

#: How many body bytes a batch of frames due at once holds at most (only
#: what the core groups per decision: the frames are yielded one by one).
BATCH_SIZE = 64 * 1024


async def aframes(
    events: Iterable[Event], start: float, cut: Callable[[Cut], Exception]
) -> AsyncIterator[bytes]:
    """The frames of a replay's timed ``events`` (those after its head),
    each once the clock reads ``start`` plus its deadline; a recorded cut
    raises ``cut(event)`` where it was recorded."""
    for batch in replay_batches(events, BATCH_SIZE):
        if batch.until is not None:
            await sleep_until(start + batch.until)
        for frame in batch.frames:
            yield frame.data
        if isinstance(batch.last, Cut):
            raise cut(batch.last)
