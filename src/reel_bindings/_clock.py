"""Sleeping until a frame's deadline, precisely: ``sleep_until`` (async, on
asyncio or trio) and ``sleep_until_sync``, one source in
``_async/clock.py`` (see there) and its generated twin in ``_sync/clock.py``.
"""

from __future__ import annotations

from ._async.clock import EARLY, sleep_until
from ._sync.clock import sleep_until_sync

__all__ = ["EARLY", "sleep_until", "sleep_until_sync"]
