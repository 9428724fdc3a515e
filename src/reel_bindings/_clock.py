"""Sleeping until a frame's deadline, precisely.

Event-loop timers fire about a millisecond late, so sleeping straight to a
deadline costs ~1.5 ms at p99.  These functions sleep until a little before
the deadline, then yield (async) or spin (sync) until it has passed.
"""

from __future__ import annotations

import time

import anyio
import anyio.lowlevel

__all__ = ["EARLY", "sleep_until", "sleep_until_sync"]

#: How long before a deadline the coarse sleep ends, in seconds.
EARLY = 0.002


async def sleep_until(deadline: float) -> None:
    """Sleep until ``anyio.current_time() >= deadline``."""
    remaining = deadline - anyio.current_time()
    if remaining <= 0:
        return
    if remaining > EARLY:
        await anyio.sleep(remaining - EARLY)
    while anyio.current_time() < deadline:
        await anyio.lowlevel.checkpoint()


def sleep_until_sync(deadline: float) -> None:
    """Sleep until ``time.monotonic() >= deadline``."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return
    if remaining > EARLY:
        time.sleep(remaining - EARLY)
    while time.monotonic() < deadline:
        time.sleep(0)
