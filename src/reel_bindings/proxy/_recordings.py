"""The proxy's recording queue: finished forwards on their way to disk.

Theory of operation.  Building a recording's line (keying, decoding,
redaction, usage, the JSON) takes a few hundred microseconds.  In record
mode the proxy keeps that off a connection's way to its next request: a
forward that ends queues its recording here, and the queue builds it
later, a step at a time (:meth:`reel_core.PendingRecording.step`), while
the CPU would wait anyway:

- while another forward waits on its upstream, and as that forward ends
  (:meth:`RecordingQueue.step_toward`, :meth:`RecordingQueue.build_through`);
- at once (:meth:`RecordingQueue.settle`) when a client has been quiet for a
  moment, when a connection ends, before a WebSocket session's line, and
  in every mode but record, as each exchange ends (a request that could
  be answered from the cassette must find every recording whose answer a
  client has).

An exchange whose client left before its end holds its place from the
moment it left (:meth:`RecordingQueue.reserve`), while the recording reads
the upstream on for the grace (``Engine.client_left``); its recording
fills the place once the grace is over (:meth:`RecordingQueue.fill`).
For the client that exchange ended when it left: its next one, on a new
connection, must be recorded after it (a retry of the same request would
otherwise replay first).  Recordings behind an unfilled place wait for it.

Any number of connections drive one queue, each at its own pace; between
two steps, any other may run, settle, add, reserve or fill.  The queue's
invariant, which ``tests/bindings/test_recording_queue.py`` checks against
a model over random interleavings, is:

    Every recording added or filled in is appended exactly once, in the
    order it was added or its place reserved.  Once ``settle()`` returns,
    or ``build_through(last)`` does, every recording up to the
    first unfilled place (up to ``last``) has been appended; whoever fills
    a place settles what waited behind it.

A recording whose build raises (a bug) is dropped, said loudly and
counted: the client has its answer, and the recordings after it go on.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import Protocol

import anyio
import anyio.lowlevel

from reel_core import Cassette, Recorded, Redactor

__all__ = ["Building", "Place", "RecordingQueue"]

log = logging.getLogger("reel.proxy")


class Building(Protocol):
    """A recording built a step at a time (:class:`reel_core.PendingRecording`)."""

    @property
    def cassette(self) -> Cassette: ...

    def step(self) -> Recorded | None: ...


#: Appends a built line to its cassette's file (it handles its own errors).
Append = Callable[[Cassette, Recorded], None]


class Place:
    """A place in the queue held for an exchange whose client left, until
    its recording is known (:meth:`RecordingQueue.fill`)."""

    __slots__ = ("filled",)

    def __init__(self) -> None:
        self.filled = False


class RecordingQueue:
    """Recordings waiting to be built, oldest first (see the module's
    docstring for the rule every caller relies on)."""

    __slots__ = ("_append", "_waiting", "failures")

    def __init__(self, append: Append) -> None:
        self._append = append
        #: ``(recording, the redactor and target that name it in a log)``;
        #: a :class:`Place` not filled yet holds up those behind it.
        self._waiting: deque[tuple[Building | Place, Redactor, str]] = deque()
        #: Recordings whose build raised (a bug): those exchanges are lost.
        self.failures = 0

    def __bool__(self) -> bool:
        """Whether a recording waits."""
        return bool(self._waiting)

    def __len__(self) -> int:
        return len(self._waiting)

    @property
    def last(self) -> Building | Place | None:
        """The newest recording (or place) waiting, if any."""
        return self._waiting[-1][0] if self._waiting else None

    def add(self, recording: Building, redactor: Redactor, target: str) -> None:
        """Queue a finished forward's recording, after those waiting."""
        self._waiting.append((recording, redactor, target))

    def reserve(self, redactor: Redactor, target: str) -> Place:
        """Hold a place, after those waiting, for the recording of an
        exchange whose client left; :meth:`fill` it once it is known."""
        place = Place()
        self._waiting.append((place, redactor, target))
        return place

    def fill(self, place: Place, recording: Building | None) -> None:
        """Put ``recording`` in ``place`` (``None``: nothing to record, the
        place is given up).  Filling a place twice does nothing."""
        if place.filled:
            return
        place.filled = True
        for at, (waiting, redactor, target) in enumerate(self._waiting):
            if waiting is place:
                if recording is None:
                    del self._waiting[at]
                else:
                    self._waiting[at] = (recording, redactor, target)
                return

    def holds(self, recording: Building | Place) -> bool:
        """Whether ``recording`` still waits (not yet appended or dropped)."""
        return any(waiting is recording for waiting, _, _ in self._waiting)

    @property
    def blocked(self) -> bool:
        """Whether the oldest entry is a place not filled yet."""
        return bool(self._waiting) and isinstance(self._waiting[0][0], Place)

    def settle(self) -> None:
        """Build every recording waiting and append their lines, in order,
        up to the first place not filled yet."""
        while self._waiting and not self.blocked:
            self.step()

    def step(self) -> None:
        """Build a step of the oldest recording waiting (nothing when none
        does, or it is a place not filled yet); once it is built, append
        its line."""
        if not self._waiting or self.blocked:  # another connection got here first
            return
        recording, redactor, target = self._waiting[0]
        assert not isinstance(recording, Place)
        try:
            recorded = recording.step()
        except Exception:
            self._waiting.popleft()
            self.failures += 1
            log.exception(
                "could not build the recording of %s: the exchange was NOT recorded (the "
                "client got its answer); please report this",
                redactor.target(target),
            )
            return
        if recorded is not None:
            self._waiting.popleft()
            self._append(recording.cassette, recorded)

    def step_toward(self, last: Building | Place) -> bool:
        """Build a step of the oldest recording waiting while ``last`` waits
        and no place not filled yet holds it up; whether steps are left
        before ``last`` is appended.  A forward calls it while its upstream
        works (``AsyncUpstream.send``'s ``meanwhile``): its answer, when it
        comes, waits for the step under way, not for the whole build.
        Other connections go between two steps, and may build or settle
        some of these themselves: each step starts from what is waiting
        then."""
        if not self.holds(last) or self.blocked:
            return False
        self.step()
        return self.holds(last) and not self.blocked

    async def build_through(self, last: Building | Place) -> None:
        """Build the recordings waiting, up to ``last``, a step at a time,
        other tasks running between two steps (the forward's end, once its
        answer is passed on).  Never cancelled: the recordings a forward
        took on are on disk when it is over (a client that leaves, or a
        proxy that stops, loses none), unless a place not filled yet holds
        them up: whoever fills it settles them."""
        while self.step_toward(last):
            await anyio.lowlevel.cancel_shielded_checkpoint()
