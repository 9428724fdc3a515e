"""What :meth:`reel_core.Engine.next_event` returns: plain values.

Decisions come first (:class:`Replay`, :class:`Forward`, :class:`Miss` or
:class:`Refused`), then the response as :class:`ResponseHead`,
:class:`Frame` events and an :class:`EndOfResponse` or a :class:`Cut`.  A
forwarded exchange that is being recorded is written by an explicit call
after its end, :meth:`reel_core.Engine.record`, which returns
:class:`Recorded`, the cassette line to append.  A client that waits for
``100 Continue`` before sending its body gets a :class:`Continue` first
(from the HTTP/1.1 :class:`reel_core.Session`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._http import Headers, Request

if TYPE_CHECKING:
    from ._freshness import Staleness
    from ._interaction import WebSocketLog
    from ._miss import MissReport
    from ._shape import Drift
    from ._ui import UiResource
    from ._ws_pool import WebSocketLease

__all__ = [
    "Continue",
    "Cut",
    "EndOfResponse",
    "Event",
    "Forward",
    "Frame",
    "Miss",
    "Recorded",
    "Refused",
    "Replay",
    "ResponseHead",
    "Signal",
    "UiRequest",
]


class Signal(enum.Enum):
    """Returned by ``next_event`` when there is no event to hand out."""

    #: Feed more client bytes (``receive_data``) first.
    NEED_DATA = "NEED_DATA"
    #: Waiting on the binding: feed the upstream response, or call
    #: ``start_next_cycle`` once the exchange is done.
    PAUSED = "PAUSED"
    #: The client closed the connection; the session is finished.
    CLOSED = "CLOSED"


@dataclass(frozen=True)
class Continue:
    """The client sent ``Expect: 100-continue`` and waits for the interim
    ``100 Continue`` before it sends the body: write ``session.send(event)``
    to it, then read on.  Handed out once per request, only to a session
    fed with bytes; a request refused at its head (a body over the limit:
    413) gets its final answer instead."""


@dataclass(frozen=True)
class Replay:
    """Decision: a recording answers the request; its response follows."""

    request: Request
    interaction_id: str
    key: str
    #: For a fuzzy match, the prompt similarity (0 to 1) of the recording
    #: served; ``None`` for a match by key.
    similarity: float | None = None
    #: The recording is a WebSocket session: its messages and close.  The
    #: 101 head and end follow as for any replay; the WebSocket adapter
    #: (:class:`reel_core.WebSocketSession`) takes over from there.
    websocket: WebSocketLog | None = None
    #: The recording's provider (a WebSocket replay speaks its error event).
    provider: str = "generic"
    #: Set when the recording is older than the ``max_age`` in force (replay
    #: mode serves it; a binding reports it at the end of the run).
    stale: Staleness | None = None
    #: For a WebSocket session: which of the recordings of its upgrade it
    #: plays, decided as the client's messages come (two identical upgrades
    #: at once are told apart by what their clients say).  ``websocket`` is
    #: the recording chosen at the upgrade.
    lease: WebSocketLease | None = None


@dataclass(frozen=True)
class Forward:
    """Decision: send ``request`` upstream unchanged, then feed the response
    back with ``upstream_head`` / ``upstream_data`` / ``upstream_end``.
    ``record`` says whether the exchange will be written to the cassette.

    ``key`` is the request's match key when the decision needed it (replay
    and auto modes).  In record and live modes nothing waits on it, so it
    is ``None`` and :meth:`Engine.forward_key` computes it when asked (a
    secret check and a canonical hash of the body): the request goes
    upstream first.
    """

    request: Request
    key: str | None
    record: bool
    #: Where to send it (set when the engine routes, as the proxy's does).
    url: str | None = None
    #: The request asks to upgrade to a WebSocket (``Upgrade: websocket``):
    #: the upstream's 101 is fed back with ``upstream_head`` and
    #: ``upstream_end``, then the WebSocket adapter relays the messages.
    websocket: bool = False
    #: The request's recordings are stale (auto mode): this forward records
    #: it again, and its recording supersedes them.
    refresh: bool = False


@dataclass(frozen=True)
class Miss:
    """Decision: nothing answers the request; a 404 carrying ``report`` follows."""

    request: Request
    report: MissReport


@dataclass(frozen=True)
class Refused:
    """Decision: the request cannot be served at all (no upstream for it, a
    bad cassette name, a corrupt cassette line); an error response with
    ``status`` and ``message`` follows."""

    request: Request
    status: int
    message: str


@dataclass(frozen=True)
class UiRequest:
    """Decision: the request is for Reel's own viewer (``Config.ui``), not
    for a recording: the binding draws ``resource`` and hands its bytes to
    ``Engine.ui_answer``; the response follows as for a replay.  Never
    matched, forwarded nor recorded."""

    request: Request
    resource: UiResource


@dataclass(frozen=True)
class ResponseHead:
    """Status line and headers of the response to give the client."""

    status: int
    headers: Headers
    reason: bytes = b""


@dataclass(frozen=True)
class Frame:
    """A piece of the response body.

    ``at`` is the deadline, in seconds after the response head was sent,
    at which a replay sends the frame (timing mode applied); ``None`` means
    at once (live data being forwarded).
    """

    data: bytes
    at: float | None = None


@dataclass(frozen=True)
class EndOfResponse:
    """The response is complete (a replay sends it at ``at``, like a frame)."""

    at: float | None = None


@dataclass(frozen=True)
class Cut:
    """The response breaks off here, as the upstream's did: the binding must
    abort the response (close the connection without finishing the body)."""

    error: str
    detail: str = ""
    at: float | None = None


@dataclass(frozen=True)
class Recorded:
    """Append ``line`` to the cassette file (one write, under a lock).

    :meth:`reel_core.Engine.record` returns it (and adds the recording to
    the in-memory cassette), called after :class:`EndOfResponse` or
    :class:`Cut`: a binding sends the end first, so the client never waits
    on the recording.
    """

    line: bytes
    interaction_id: str
    key: str
    #: The id of the recording this one supersedes (the one at its rank in
    #: the request's older generation), if any.
    supersedes: str | None = None
    #: How the response's shape differs from the superseded one's (``None``:
    #: the same shape, or nothing superseded).
    drift: Drift | None = None


Event = (
    Continue
    | Replay
    | Forward
    | Miss
    | Refused
    | UiRequest
    | ResponseHead
    | Frame
    | EndOfResponse
    | Cut
)
