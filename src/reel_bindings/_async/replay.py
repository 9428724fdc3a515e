"""A replayed body: its frames, each at its recorded offset.

``_async/replay.py`` (``aframes``) is the source; ``_sync/replay.py``
(``frames``) is generated from it by ``scripts/gen_sync.py``.  The async
transport yields ``aframes``; the sync transport and the requests adapter
(blocking-only) both yield ``frames``, each naming the exception a recorded
cut is raised as in its own library.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable

from reel_core import Cut, Step

from .clock import sleep_until

__all__ = ["aframes"]


async def aframes(
    steps: Iterable[Step], start: float, cut: Callable[[Cut], Exception]
) -> AsyncIterator[bytes]:
    """The frames of ``steps`` (from :func:`reel_core.replay_schedule`),
    each once the clock reads ``start`` plus its offset; a recorded cut
    raises ``cut(event)`` where it was recorded."""
    for step in steps:
        if step.until is not None:
            await sleep_until(start + step.until)
        if isinstance(step.event, Cut):
            raise cut(step.event)
        if not step.last:
            yield step.data
