"""Every state transition of an engine, as one table.

Theory of operation
-------------------
An engine answers one request at a time.  It starts IDLE.  A complete
request is matched against the cassette and the mode decides: HIT (replay a
recording), MISS (answer the 404 report), FORWARD (send it upstream, and
record it in auto/record mode) or REFUSE (a request the engine cannot serve
at all: answered with an error).  Replays and misses move to SERVING, where
the binding pulls the response events; FORWARD moves to AWAIT_UPSTREAM until
the binding feeds the upstream response head (STREAMING), its body, its
trailers if any (the engine refuses data after them), and its end or a
failure.  A failure before the head is answered with a 502/504
(SERVING again); after the head it is a cut.  When the last event of the
response was pulled the engine is DONE, and ``start_next_cycle`` makes it
IDLE for the next request on the same connection.  The client closing an
idle connection makes it CLOSED; a protocol error makes it ERROR.  Any
(state, input) pair missing from the table is a caller error: it raises
LocalProtocolError and moves the engine to ERROR.
"""

from __future__ import annotations

import enum

from ._errors import LocalProtocolError

__all__ = ["TRANSITIONS", "Input", "State", "transition"]


class State(enum.Enum):
    """Where a engine stands."""

    # Hashed by identity, in C: each transition looks a (state, input) pair
    # up, and an Enum's own hash is a Python call (three pairs a request).
    __hash__ = object.__hash__

    #: Waiting for a request.
    IDLE = "IDLE"
    #: Handing out the events of a replayed, missed or failed response.
    SERVING = "SERVING"
    #: Waiting for the binding to feed the upstream response head.
    AWAIT_UPSTREAM = "AWAIT_UPSTREAM"
    #: The upstream response is being fed (and forwarded) chunk by chunk.
    STREAMING = "STREAMING"
    #: The exchange is over; ``start_next_cycle`` for the next request.
    DONE = "DONE"
    #: The client closed the connection.
    CLOSED = "CLOSED"
    #: Something went wrong; the connection must be closed.
    ERROR = "ERROR"


class Input(enum.Enum):
    """What can happen to an engine."""

    __hash__ = object.__hash__  # as State's

    #: A request matched a recording (replay).
    HIT = "HIT"
    #: A request matched nothing and may not be recorded (404 report).
    MISS = "MISS"
    #: A request must go upstream (record or live).
    FORWARD = "FORWARD"
    #: A request is refused before any decision (no upstream for it, bad
    #: cassette name): an error response follows.
    REFUSE = "REFUSE"
    #: The upstream response head arrived.
    UPSTREAM_HEAD = "UPSTREAM_HEAD"
    #: A chunk of the upstream response body arrived.
    UPSTREAM_DATA = "UPSTREAM_DATA"
    #: The upstream response's trailers arrived (HTTP/2, gRPC's status):
    #: after its last data, before its end.
    UPSTREAM_TRAILERS = "UPSTREAM_TRAILERS"
    #: The upstream response ended cleanly.
    UPSTREAM_END = "UPSTREAM_END"
    #: The upstream failed (refused, timeout, reset...).
    UPSTREAM_ERROR = "UPSTREAM_ERROR"
    #: The last event of the response was handed out.
    SERVED = "SERVED"
    #: The binding asked for the next request on the connection.
    NEXT_CYCLE = "NEXT_CYCLE"
    #: The client closed the connection between requests.
    CLIENT_CLOSED = "CLIENT_CLOSED"
    #: The client sent something invalid.
    PROTOCOL_ERROR = "PROTOCOL_ERROR"


S, In = State, Input

#: ``(state, input) -> new state``; a missing pair is an error.
TRANSITIONS: dict[tuple[State, Input], State] = {
    (S.IDLE, In.HIT): S.SERVING,
    (S.IDLE, In.MISS): S.SERVING,
    (S.IDLE, In.FORWARD): S.AWAIT_UPSTREAM,
    (S.IDLE, In.REFUSE): S.SERVING,
    (S.IDLE, In.CLIENT_CLOSED): S.CLOSED,
    (S.IDLE, In.PROTOCOL_ERROR): S.ERROR,
    (S.AWAIT_UPSTREAM, In.UPSTREAM_HEAD): S.STREAMING,
    (S.AWAIT_UPSTREAM, In.UPSTREAM_ERROR): S.SERVING,
    (S.STREAMING, In.UPSTREAM_DATA): S.STREAMING,
    (S.STREAMING, In.UPSTREAM_TRAILERS): S.STREAMING,
    (S.STREAMING, In.UPSTREAM_END): S.DONE,
    (S.STREAMING, In.UPSTREAM_ERROR): S.DONE,
    (S.SERVING, In.SERVED): S.DONE,
    (S.DONE, In.NEXT_CYCLE): S.IDLE,
}


def transition(state: State, event: Input) -> State:
    """The state after ``event`` in ``state``; raises
    :class:`LocalProtocolError` for a pair the table does not allow."""
    try:
        return TRANSITIONS[(state, event)]
    except KeyError:
        raise LocalProtocolError(f"{event.value} is not allowed in state {state.value}") from None
