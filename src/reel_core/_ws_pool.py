"""Which recording a replayed session plays, when several answer its request.

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

A gRPC session (:mod:`reel_core._grpc_session`) is leased the same way:
its calls share a key when their first client messages match (what the
call is keyed on), and its later client messages tell the recordings
apart.  A pool holds one kind of session; ``clients`` reads a recording's
client messages (:func:`websocket_clients`, :func:`grpc_clients`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ._errors import LocalProtocolError
from ._interaction import Interaction, WebSocketLog

__all__ = ["SessionPool", "WebSocketLease", "grpc_clients", "websocket_clients"]

#: A recording's client messages, or ``None`` for a line of another kind.
Clients = Callable[[Interaction], Sequence[Any] | None]


def websocket_clients(interaction: Interaction) -> Sequence[Any] | None:
    """A WebSocket session's client messages."""
    log = interaction.websocket
    return None if log is None else [m for m in log.messages if m.sender == "client"]


def grpc_clients(interaction: Interaction) -> Sequence[Any] | None:
    """A gRPC session's client messages (its end left out)."""
    log = interaction.grpc
    return None if log is None else [m for _, m in log.client_messages()]


class SessionPool:
    """The session recordings of one key, by line position, and which lease
    holds each.  ``read`` gives the recording at a position (the cassette's
    line, parsed): the pool keeps positions, not parsed sessions, so what a
    cassette keeps parsed stays within its ``parsed_lines`` (see
    :mod:`reel_core._parsed`).  ``clients`` reads a recording's client
    messages (WebSocket sessions' by default); lines it gives ``None`` for
    are left out."""

    def __init__(
        self,
        read: Callable[[int], Interaction],
        clients: Clients = websocket_clients,
        kind: str = "WebSocket",
    ) -> None:
        self._read = read
        self._of = clients
        #: What the pool's sessions are, in words (``"WebSocket"``, ``"gRPC"``).
        self.kind = kind
        self._order: list[int] = []
        self._filed: set[int] = set()
        self.holders: dict[int, WebSocketLease] = {}

    def add(self, recordings: Iterable[tuple[int, Interaction]]) -> None:
        """File the key's recordings not filed yet (``(position, interaction)``,
        in recorded order); lines that are no session of the pool's kind
        are left out."""
        for position, interaction in recordings:
            if position in self._filed or self._of(interaction) is None:
                continue
            self._order.append(position)
            self._filed.add(position)

    @property
    def positions(self) -> list[int]:
        """The filed recordings' positions, in recorded order."""
        return list(self._order)

    def lease(self) -> WebSocketLease:
        """A lease for a new session: the first recording no one holds, else
        (every one held: a repeat) the last, unheld.  At least one
        WebSocket session must be filed."""
        if not self._order:
            raise LocalProtocolError(f"no {self.kind} session is recorded under this key")
        free = next((p for p in self._order if p not in self.holders), None)
        lease = WebSocketLease(
            self, self._order[-1] if free is None else free, held=free is not None
        )
        if free is not None:
            self.holders[free] = lease
        return lease

    def recording(self, position: int) -> Interaction:
        return self._read(position)

    def agrees(self, position: int, k: int, same: Callable[[Any], bool]) -> bool:
        """Whether the recording at ``position`` has a client message ``k``
        that ``same`` accepts."""
        clients = self._of(self._read(position))
        assert clients is not None  # filed as a session of the pool's kind; lines do not change
        return k < len(clients) and same(clients[k])


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
        """The WebSocket session played (a WebSocket pool's lease; a gRPC
        replay reads :attr:`interaction`)."""
        log = self.interaction.websocket
        assert log is not None  # a WebSocket pool files WebSocket sessions only
        return log

    def client_message(self, k: int, same: Callable[[Any], bool]) -> None:
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
