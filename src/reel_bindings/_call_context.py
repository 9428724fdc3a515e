"""Which cassette boundaries record to, and whether code runs inside a call
being recorded: two context variables, so two tasks or threads with two
cassettes do not interfere.

* ``ACTIVE`` names the :class:`~reel_bindings._inprocess.Player` (a
  cassette and its engine settings) that boundaries use: set by
  ``reel_bindings.calls.calls_on`` in a ``with`` block.  The pytest plugin
  sets the process-wide fallback for the test it runs (:func:`use_for_test`,
  made when a boundary first needs it, so a test that calls none opens no
  cassette for it): an event loop or a thread the test starts sees it too,
  where a context variable set before them might not be.
* ``RUNNING`` is the cassette file of the outermost call being run for
  real (record, auto and live modes) while its function runs: a boundary
  inside it is not recorded again, and neither is HTTP that an in-process
  binding of the same cassette sends (``Player.decide`` forwards it live).

The plugin also says here which test's cassette the shared transports
(``reel_bindings._shared_transport``) send to (:func:`share_for_test`).

This module imports nothing of Reel's, so the in-process bindings can ask
it without importing the boundaries, and the plugin can set both for each
test without importing the transports (a proxied suite never needs them).
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._files import CassetteFile

__all__ = [
    "ACTIVE",
    "RUNNING",
    "active",
    "running_on",
    "share_for_test",
    "shared_for_test",
    "use_for_test",
]

#: The player boundaries record with (a ``reel_bindings._inprocess.Player``:
#: held as an ``object`` here, so this room knows none of the bindings).
ACTIVE: contextvars.ContextVar[object | None] = contextvars.ContextVar(
    "reel_active_cassette", default=None
)
RUNNING: contextvars.ContextVar[CassetteFile | None] = contextvars.ContextVar(
    "reel_running_call", default=None
)

#: How to get the test's player (the pytest plugin's, made on first use),
#: where no ``calls_on`` block says; then the player, once made.
_for_test: list[Callable[[], object]] = []
_made: list[object] = []
_making = threading.Lock()


def active() -> object | None:
    """The player boundaries use here: the innermost ``calls_on`` block's,
    else the running test's, else ``None`` (a boundary just runs)."""
    player = ACTIVE.get()
    if player is not None or not _for_test:
        return player
    with _making:  # two threads calling their first boundary at once: one player
        if not _made:
            _made.append(_for_test[-1]())
        return _made[-1]


def use_for_test(player: Callable[[], object] | None) -> None:
    """Make ``player()`` (called when a boundary first needs it) the
    fallback for the test being run; ``None``: no test's."""
    _for_test.clear()
    _made.clear()
    if player is not None:
        _for_test.append(player)


#: How to get the running test's cassette (the plugin's ``reel`` fixture,
#: set up on first use) for the shared transports; empty between tests and
#: for a test not using Reel.
_shared_with: list[Callable[[], object]] = []
_sharing = threading.Lock()


def share_for_test(cassette: Callable[[], object] | None) -> None:
    """Make ``cassette()`` (called on a shared transport's first request)
    the running test's; ``None``: no test's."""
    with _sharing:
        _shared_with.clear()
        if cassette is not None:
            _shared_with.append(cassette)


def shared_for_test() -> Callable[[], object] | None:
    """The running test's :func:`share_for_test` getter, if any."""
    with _sharing:
        return _shared_with[-1] if _shared_with else None


def running_on(file: CassetteFile) -> bool:
    """Whether code here runs inside a call run for real and recorded on
    ``file``: its HTTP is not recorded again."""
    return RUNNING.get() is file
