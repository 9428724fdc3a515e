"""What :meth:`reel_core.Engine.next_event` returns: plain values.

Decisions come first (:class:`Replay`, :class:`Forward`, :class:`Miss` or
:class:`Refused`), then the response as :class:`ResponseHead`,
:class:`Frame` events, the :class:`Trailers` if it has any, and an
:class:`EndOfResponse` or a :class:`Cut`.  A
forwarded exchange that is being recorded is written by an explicit call
after its end, :meth:`reel_core.Engine.record`, which returns
:class:`Recorded`, the cassette line to append.  A client that waits for
``100 Continue`` before sending its body gets a :class:`Continue` first
(from the HTTP/1.1 :class:`reel_core.Session`).
"""

from __future__ import annotations

import enum
from dataclasses import FrozenInstanceError
from typing import TYPE_CHECKING

from ._http import Headers, Request

if TYPE_CHECKING:
    from ._freshness import Staleness
    from ._interaction import Interaction, WebSocketLog
    from ._miss import MissReport
    from ._shape import Drift
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
    "Routed",
    "Signal",
    "Trailers",
    "Upgrade",
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


_set = object.__setattr__


class _Value:
    """The events' common behaviour: immutable, equal (and hashed) by their
    fields, shown as ``Frame(data=b'...', at=0.0)``, as ``@dataclass(frozen=True)``
    made them.  Written out instead because a frozen dataclass builds six
    functions with ``exec`` when its module is imported, about 0.3 ms a class:
    for these eleven, most of what importing ``reel_core._events`` cost.
    Each event names its fields, in order, in ``__match_args__`` (as a
    dataclass does) and ``__slots__``, and sets them in its ``__init__``;
    nothing else is per class."""

    __match_args__: tuple[str, ...] = ()
    __slots__: tuple[str, ...] = ()

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__match_args__)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Value) or other.__class__ is not self.__class__:
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__match_args__)
        return f"{self.__class__.__qualname__}({fields})"

    # Hidden from mypy, which would then allow assigning any attribute.
    if not TYPE_CHECKING:  # pragma: no branch

        def __setattr__(self, name: str, value: object) -> None:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")

        def __delattr__(self, name: str) -> None:
            raise FrozenInstanceError(f"cannot delete field {name!r}")


class Continue(_Value):
    """The client sent ``Expect: 100-continue`` and waits for the interim
    ``100 Continue`` before it sends the body: write ``session.send(event)``
    to it, then read on.  Handed out once per request, only to a session
    fed with bytes; a request refused at its head (a body over the limit:
    413) gets its final answer instead."""

    __slots__ = ()


class Replay(_Value):
    """Decision: a recording answers the request; its response follows."""

    __match_args__ = (
        "request",
        "interaction_id",
        "key",
        "similarity",
        "websocket",
        "provider",
        "stale",
        "lease",
        "grpc",
    )
    __slots__ = __match_args__

    request: Request
    interaction_id: str
    key: str
    #: For a fuzzy match, the prompt similarity (0 to 1) of the recording
    #: served; ``None`` for a match by key.
    similarity: float | None
    #: The recording is a WebSocket session: its messages and close.  The
    #: 101 head and end follow as for any replay; the WebSocket adapter
    #: (:class:`reel_core.WebSocketSession`) takes over from there.
    websocket: WebSocketLog | None
    #: The recording's provider (a WebSocket replay speaks its error event).
    provider: str
    #: Set when the recording is older than the ``max_age`` in force (replay
    #: mode serves it; a binding reports it at the end of the run).
    stale: Staleness | None
    #: For a WebSocket session: which of the recordings of its upgrade it
    #: plays, decided as the client's messages come (two identical upgrades
    #: at once are told apart by what their clients say).  ``websocket`` is
    #: the recording chosen at the upgrade.  For a gRPC session, the same
    #: over the recordings of its first message.
    lease: WebSocketLease | None
    #: The recording is a gRPC session (a client-streaming or bidirectional
    #: call): the recording itself.  Its head follows; the session's replay
    #: (:class:`reel_core.tools.GrpcCallReplay`) plays its messages and
    #: trailers, gated by the client's messages.
    grpc: Interaction | None

    def __init__(
        self,
        request: Request,
        interaction_id: str,
        key: str,
        similarity: float | None = None,
        websocket: WebSocketLog | None = None,
        provider: str = "generic",
        stale: Staleness | None = None,
        lease: WebSocketLease | None = None,
        grpc: Interaction | None = None,
    ) -> None:
        _set(self, "request", request)
        _set(self, "interaction_id", interaction_id)
        _set(self, "key", key)
        _set(self, "similarity", similarity)
        _set(self, "websocket", websocket)
        _set(self, "provider", provider)
        _set(self, "stale", stale)
        _set(self, "lease", lease)
        _set(self, "grpc", grpc)


class Forward(_Value):
    """Decision: send ``request`` upstream unchanged, then feed the response
    back with ``upstream_head`` / ``upstream_data`` / ``upstream_end``.
    ``record`` says whether the exchange will be written to the cassette.

    ``key`` is the request's match key when the decision needed it (replay
    and auto modes).  In record and live modes nothing waits on it, so it
    is ``None`` and :meth:`Engine.forward_key` computes it when asked (a
    secret check and a canonical hash of the body): the request goes
    upstream first.
    """

    __match_args__ = ("request", "key", "record", "url", "websocket", "refresh")
    __slots__ = __match_args__

    request: Request
    key: str | None
    record: bool
    #: Where to send it (set when the engine routes, as the proxy's does).
    url: str | None
    #: The request asks to upgrade to a WebSocket (``Upgrade: websocket``):
    #: the upstream's 101 is fed back with ``upstream_head`` and
    #: ``upstream_end``, then the WebSocket adapter relays the messages.
    websocket: bool
    #: The request's recordings are stale (auto mode): this forward records
    #: it again, and its recording supersedes them.
    refresh: bool

    def __init__(
        self,
        request: Request,
        key: str | None,
        record: bool,
        url: str | None = None,
        websocket: bool = False,
        refresh: bool = False,
    ) -> None:
        _set(self, "request", request)
        _set(self, "key", key)
        _set(self, "record", record)
        _set(self, "url", url)
        _set(self, "websocket", websocket)
        _set(self, "refresh", refresh)


class Miss(_Value):
    """Decision: nothing answers the request; a 404 carrying ``report`` follows."""

    __match_args__ = ("request", "report")
    __slots__ = __match_args__

    request: Request
    report: MissReport

    def __init__(self, request: Request, report: MissReport) -> None:
        _set(self, "request", request)
        _set(self, "report", report)


class Refused(_Value):
    """Decision: the request cannot be served at all (no upstream for it, a
    bad cassette name, a corrupt cassette line); an error response with
    ``status`` and ``message`` follows."""

    __match_args__ = ("request", "status", "message")
    __slots__ = __match_args__

    request: Request
    status: int
    message: str

    def __init__(self, request: Request, status: int, message: str) -> None:
        _set(self, "request", request)
        _set(self, "status", status)
        _set(self, "message", message)


class Routed(_Value):
    """From an HTTP adapter, not the engine: a request its binding answers
    itself (the adapter's ``route`` claimed it, as the proxy claims its
    viewer's ``/_reel/``), with ``Session.respond``.  The engine never sees
    it: it is neither matched, forwarded nor recorded."""

    __match_args__ = ("request",)
    __slots__ = __match_args__

    request: Request

    def __init__(self, request: Request) -> None:
        _set(self, "request", request)


class Upgrade(_Value):
    """A WebSocket upgrade an HTTP adapter answered (``Session.upgrade``):
    the bytes of its answer (HTTP/1.1: the ``101``), and the bytes the
    client sent after its request, the first WebSocket bytes.  The
    WebSocket adapter (:class:`reel_core.WebSocketSession`) takes the
    connection over from it, knowing nothing of the HTTP adapter."""

    __match_args__ = ("head", "trailing")
    __slots__ = __match_args__

    head: bytes
    trailing: bytes

    def __init__(self, head: bytes, trailing: bytes = b"") -> None:
        _set(self, "head", head)
        _set(self, "trailing", trailing)


class ResponseHead(_Value):
    """Status line and headers of the response to give the client."""

    __match_args__ = ("status", "headers", "reason")
    __slots__ = __match_args__

    status: int
    headers: Headers
    reason: bytes

    def __init__(self, status: int, headers: Headers, reason: bytes = b"") -> None:
        _set(self, "status", status)
        _set(self, "headers", headers)
        _set(self, "reason", reason)


class Frame(_Value):
    """A piece of the response body.

    ``at`` is the deadline, in seconds after the response head was sent,
    at which a replay sends the frame (timing mode applied); ``None`` means
    at once (live data being forwarded).
    """

    __match_args__ = ("data", "at")
    __slots__ = __match_args__

    data: bytes
    at: float | None

    def __init__(self, data: bytes, at: float | None = None) -> None:
        # the slots' own setters: a long stream makes a Frame per frame
        _frame_data(self, data)
        _frame_at(self, at)


_frame_data = Frame.__dict__["data"].__set__
_frame_at = Frame.__dict__["at"].__set__


class Trailers(_Value):
    """The response's trailers (HTTP/2; a gRPC call's ``grpc-status`` and
    ``grpc-message``), after its last :class:`Frame` and before its
    :class:`EndOfResponse`.  A replay sends them at ``at``, like a frame
    (``None``: at once).  An HTTP/1.1 :class:`reel_core.Session` sends
    nothing for them (see :meth:`reel_core.Session.send`)."""

    __match_args__ = ("headers", "at")
    __slots__ = __match_args__

    headers: Headers
    at: float | None

    def __init__(self, headers: Headers, at: float | None = None) -> None:
        _set(self, "headers", headers)
        _set(self, "at", at)


class EndOfResponse(_Value):
    """The response is complete (a replay sends it at ``at``, like a frame)."""

    __match_args__ = ("at",)
    __slots__ = __match_args__

    at: float | None

    def __init__(self, at: float | None = None) -> None:
        _set(self, "at", at)


class Cut(_Value):
    """The response breaks off here, as the upstream's did: the binding must
    abort the response (close the connection without finishing the body)."""

    __match_args__ = ("error", "detail", "at")
    __slots__ = __match_args__

    error: str
    detail: str
    at: float | None

    def __init__(self, error: str, detail: str = "", at: float | None = None) -> None:
        _set(self, "error", error)
        _set(self, "detail", detail)
        _set(self, "at", at)


class Recorded(_Value):
    """Append ``line`` to the cassette file (one write, under a lock).

    :meth:`reel_core.Engine.record` returns it (and adds the recording to
    the in-memory cassette), called after :class:`EndOfResponse` or
    :class:`Cut`: a binding sends the end first, so the client never waits
    on the recording.
    """

    __match_args__ = ("line", "interaction_id", "key", "supersedes", "drift")
    __slots__ = __match_args__

    line: bytes
    interaction_id: str
    key: str
    #: The id of the recording this one supersedes (the one at its rank in
    #: the request's older generation), if any.
    supersedes: str | None
    #: How the response's shape differs from the superseded one's (``None``:
    #: the same shape, or nothing superseded).
    drift: Drift | None

    def __init__(
        self,
        line: bytes,
        interaction_id: str,
        key: str,
        supersedes: str | None = None,
        drift: Drift | None = None,
    ) -> None:
        _set(self, "line", line)
        _set(self, "interaction_id", interaction_id)
        _set(self, "key", key)
        _set(self, "supersedes", supersedes)
        _set(self, "drift", drift)


#: What :meth:`Engine.next_event` hands out besides a :class:`Signal`: a
#: decision, then the response's head, frames and end (or cut).
Event = (
    Continue
    | Replay
    | Forward
    | Miss
    | Refused
    | Routed
    | ResponseHead
    | Frame
    | Trailers
    | EndOfResponse
    | Cut
)
