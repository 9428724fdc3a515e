"""Sleeping until a frame's deadline, precisely.

Event-loop timers fire about a millisecond late, so sleeping straight to a
deadline costs ~1.5 ms at p99.  ``sleep_until`` sleeps until a little
before the deadline, then yields to the loop (async) or spins (its
generated twin ``sleep_until_sync`` in ``_sync/clock.py``) until it has
passed.  ``reel_bindings._clock`` re-exports both.
"""

from __future__ import annotations

import anyio

__all__ = ["EARLY", "sleep_until"]

#: How long before a deadline the coarse sleep ends, in seconds.
EARLY = 0.002


async def sleep_until(deadline: float) -> None:
    """Sleep until the clock (``anyio.current_time()``; ``time.monotonic()``
    in the sync twin) reads ``deadline`` or later."""
    remaining = deadline - anyio.current_time()
    if remaining <= 0:
        return
    if remaining > EARLY:
        await anyio.sleep(remaining - EARLY)
    while anyio.current_time() < deadline:
        await anyio.sleep(0)  # other tasks (threads, in the sync twin) run meanwhile
