"""Which recording a replayed WebSocket session plays, when several answer its upgrade.

Theory of operation.  An upgrade ``GET`` carries no body: two sessions to
the same path and query (the same ``?model=``) share one match key, and a
cassette that recorded both holds two recordings under it.  The upgrade
alone cannot tell which is which; the client's messages can.  So a
replayed session does not pick its recording for good at the upgrade: it
takes a :class:`WebSocketLease` from the key's :class:`SessionPool`
(shared by every engine replaying the cassette) and the lease follows the
client's messages.

- At the upgrade the lease holds the first recording no other session
  holds (order of arrival: for sessions identical to the end, that is the
  tie-break).  Once every recording is held (a repeat past the recorded
  count) it holds none and plays the last.
- Each client message narrows the recordings *consistent* with the session
  (those whose client messages so far all match what it sent).  If the one
  it plays is still consistent, nothing moves.  Else it moves to the first
  consistent recording no one holds; else it swaps with a live session
  that holds a consistent one and could play ours (ours is consistent with
  what that session sent so far): two sessions that arrived in the other
  order than they were recorded trade places.  Else nothing moves, and the
  replay reports the mismatch against the recording it plays.

The server messages sent before the move came from the recording played
then; :class:`~reel_core.WebSocketReplay` goes on in the new one from the
same place (after the same client message, as many server messages on).
A lease stops moving (and stops being swapped) when its session ended.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ._errors import LocalProtocolError
from ._interaction import Interaction, WebSocketLog, WebSocketMessage

__all__ = ["SessionPool", "WebSocketLease"]


class SessionPool:
    """The WebSocket recordings of one upgrade key, by line position, and
    which lease holds each.  ``read`` gives the recording at a position
    (the cassette's line, parsed): the pool keeps positions, not parsed
    sessions, so what a cassette keeps parsed stays within its
    ``parsed_lines`` (see :mod:`reel_core._parsed`)."""

    def __init__(self, read: Callable[[int], Interaction]) -> None:
        self._read = read
        self._order: list[int] = []
        #: Where each recording's client messages are among its messages.
        self._clients: dict[int, list[int]] = {}
        self.holders: dict[int, WebSocketLease] = {}

    def add(self, recordings: Iterable[tuple[int, Interaction]]) -> None:
        """File the key's recordings not filed yet (``(position, interaction)``,
        in recorded order); lines that are no WebSocket session are left out."""
        for position, interaction in recordings:
            log = interaction.websocket
            if position in self._clients or log is None:
                continue
            self._order.append(position)
            self._clients[position] = [
                i for i, message in enumerate(log.messages) if message.sender == "client"
            ]

    @property
    def positions(self) -> list[int]:
        """The filed recordings' positions, in recorded order."""
        return list(self._order)

    def lease(self) -> WebSocketLease:
        """A lease for a new session: the first recording no one holds, else
        (every one held: a repeat) the last, unheld.  At least one
        WebSocket session must be filed."""
        if not self._order:
            raise LocalProtocolError("no WebSocket session is recorded under this key")
        free = next((p for p in self._order if p not in self.holders), None)
        lease = WebSocketLease(
            self, self._order[-1] if free is None else free, held=free is not None
        )
        if free is not None:
            self.holders[free] = lease
        return lease

    def recording(self, position: int) -> Interaction:
        return self._read(position)

    def agrees(self, position: int, k: int, same: Callable[[WebSocketMessage], bool]) -> bool:
        """Whether the recording at ``position`` has a client message ``k``
        that ``same`` accepts."""
        clients = self._clients[position]
        if k >= len(clients):
            return False
        log = self._read(position).websocket
        assert log is not None  # filed as a WebSocket session, and lines do not change
        return same(log.messages[clients[k]])


class WebSocketLease:
    """One replayed session's hold on a recording of its key (see the module
    docstring).  :attr:`position` may change as the client's messages come,
    by this session's messages or another's (a swap)."""

    def __init__(self, pool: SessionPool, position: int, *, held: bool) -> None:
        self.pool = pool
        self.position = position
        #: Whether this lease holds its recording (a repeat holds none).
        self.held = held
        #: The recordings consistent with the client's messages so far.
        self.consistent = pool.positions
        #: False once the session ended: the lease stays as it is.
        self.active = True

    @property
    def interaction(self) -> Interaction:
        return self.pool.recording(self.position)

    @property
    def log(self) -> WebSocketLog:
        log = self.interaction.websocket
        assert log is not None  # the pool files WebSocket sessions only
        return log

    def client_message(self, k: int, same: Callable[[WebSocketMessage], bool]) -> None:
        """The client's message ``k`` came: ``same(recorded)`` says whether
        a recorded client message matches it.  Narrow, then move or swap if
        the recording played no longer fits."""
        pool = self.pool
        self.consistent = [p for p in self.consistent if pool.agrees(p, k, same)]
        if not self.active or self.position in self.consistent:
            return
        for p in self.consistent:
            if not self.held or p not in pool.holders:
                self._move(p)
                return
        for p in self.consistent:
            other = pool.holders[p]
            if other.active and self.position in other.consistent:
                other.position, self.position = self.position, p
                pool.holders[other.position], pool.holders[p] = other, self
                return

    def _move(self, position: int) -> None:
        if self.held:
            del self.pool.holders[self.position]
            self.pool.holders[position] = self
        self.position = position

    def end(self) -> None:
        """The session ended: its recording stays held, and nothing moves it."""
        self.active = False
