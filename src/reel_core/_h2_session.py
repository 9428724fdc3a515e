"""The HTTP/2 adapter: a sibling of the HTTP/1.1 :class:`~reel_core.Session`.

Theory of operation.  An :class:`H2Session` serves one client connection
that speaks HTTP/2 from its first byte (h2c with prior knowledge: the
client's preface, no ``Upgrade: h2c``).  python-hyper's ``h2``, sans-IO
like h11, parses the frames and keeps one state machine per stream; this
adapter keeps, per stream, one exchange with an :class:`~reel_core.Engine`
of its own, made by the binding's ``new_engine`` (the same cassette,
config and choice of cassette its HTTP/1.1 sessions get), so the
concurrent streams of a connection are independent exchanges.

Like :class:`~reel_core.Session` it only buffers: the binding feeds the
client's bytes with :meth:`H2Session.receive_data`, writes what
:meth:`H2Session.data_to_send` gives, and pulls :meth:`H2Session.next_event`:

- :class:`H2Event` ``(stream_id, event, engine)``: one of a stream's
  engine's events (its decision, then its response), which the binding acts
  on as it would on the HTTP/1.1 session's, sending each response event
  with :meth:`H2Session.send` (a ``Trailers`` goes out as a HEADERS frame
  ending the stream, after the body; a ``Cut`` resets the stream once the
  body before it went out, but a gRPC call's ends it with the gRPC status of what broke it, see
  :func:`~reel_core.tools.grpc_cut_trailers`).  For a ``Forward`` the binding feeds the
  upstream's answer to ``engine`` (``upstream_head``, ``upstream_data``,
  ``upstream_end``) and the events it hands back come out here too.  Once
  the exchange is over, ``event`` is ``Signal.PAUSED``: the binding calls
  ``engine.record()``; the adapter is done with the engine.  ``event`` is
  ``Signal.CLOSED`` when the client reset the stream (or the connection
  ended) before its response was all sent: nothing more is sent on it and
  its response events are no longer handed out; a forward's binding tells
  the engine as the h11 side does for a client that left (``client_left``,
  then ``upstream_error(Abort.CLIENT_CLOSED)`` once its grace ran out), and
  ``PAUSED`` follows when its exchange is over (a replay all handed out,
  which the binding is still playing, had its ``PAUSED`` before: it stops).
- :class:`H2Refused` ``(stream_id, error)``: a request the adapter refused
  itself (a head or body over the :class:`~reel_core.Limits`, a request
  with no path): its answer (the error's status and Reel's JSON error body,
  or for a gRPC call a ``200`` and the gRPC status in its trailers: see
  :mod:`reel_core._own_answers`) is already in
  :meth:`H2Session.data_to_send`; for the binding's log.
- ``Signal.NEED_DATA`` (read on) or ``Signal.CLOSED`` (the client ended
  the connection and every exchange was handed out).

A gRPC call (``content-type: application/grpc``) the engine says to
stream (:meth:`Engine.streams_call`, asked at its head: always in record
and live modes, in replay and auto modes when the recordings of its path
are sessions, see :mod:`reel_core._grpc_rule`) goes to its engine at its
first whole message, not at END_STREAM (:meth:`H2Session.streamed` says
so; :meth:`H2Session.started_at` is the ``mono`` reading that message
came with).  Its later messages go where the decision says:

- a ``Replay`` whose ``grpc`` is set: the adapter plays the session
  itself (:class:`~reel_core.tools.GrpcCallReplay`): after the engine's
  ``Replay`` and ``ResponseHead``, the session's ``Frame``, ``Trailers``
  and ``EndOfResponse`` come out as :class:`H2Event` as the client's
  messages release them, each ``at`` counting from ``started_at``; the
  binding sends each at its deadline as for any replay, and reads on
  meanwhile (``NEED_DATA`` while every stream waits on its client).  A
  client message the recording does not have hands out
  :class:`H2SessionMiss` (for the run log), then the NOT_FOUND trailers;
  ``PAUSED`` ends the exchange as for any replay.
- a ``Forward``: the request's body is the first message only and the
  upstream stream stays open; :class:`H2ClientMessage` hands out each
  later message (send it upstream) and :class:`H2ClientEnd` the client's
  END_STREAM, in order after the ``Forward``.  A recording binding feeds
  a :class:`~reel_core.tools.GrpcCallRecorder` (``opened`` and the first
  message at ``started_at``, each ``H2ClientMessage`` and ``H2ClientEnd``
  at its ``at``, each upstream message as its bytes complete, the end at
  the upstream's trailers or failure) and stores the call with
  ``recorder.record(engine)`` instead of ``engine.record()``: a call that
  turned out no session is stored as the engine recorded it.
- a miss or a refusal: they are let go.

A client that breaks the protocol gets a GOAWAY and
:meth:`H2Session.receive_data` raises :class:`RemoteProtocolError`: write
what :meth:`H2Session.data_to_send` holds, then close.  A malformed
header block is its stream's fault only (RFC 9113 8.1.1): the adapter,
not h2, checks each request's head and trailers
(:func:`~reel_core.tools.check_received`, every rule of h2's but the one
against a value with spaces around it, which gRPC metadata may have) and
refuses the request on its stream (:class:`H2Refused`).  A response's
fields go out with their values as given (:func:`~reel_core._fields.h2_sent`).

Flow control is the adapter's: a ``Frame`` sent on a stream goes out in
DATA frames no larger than the client's window and frame size allow, the
rest is queued until the client's WINDOW_UPDATE opens the window, and an
``EndOfResponse`` or a ``Cut`` waits behind the queued data.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

try:
    import h2.config
    import h2.connection
    import h2.errors
    import h2.events
    import h2.exceptions
    import h2.settings
    from hpack.struct import NeverIndexedHeaderTuple
except ImportError as exc:  # the h2 extra is not installed
    raise ImportError(
        "Reel's HTTP/2 adapter needs the h2 package: pip install 'reel-llm[h2]'"
    ) from exc

from ._engine import Engine
from ._errors import LocalProtocolError, RemoteProtocolError
from ._events import (
    Cut,
    EndOfResponse,
    Event,
    Forward,
    Frame,
    Replay,
    ResponseHead,
    Signal,
    Trailers,
)
from ._fields import HeaderBlock, check_received, h2_sent
from ._grpc import GrpcSplitter, is_grpc
from ._grpc_session import Decode, GrpcCallReplay
from ._http import Headers, Request
from ._miss import MissReport
from ._own_answers import grpc_cut_trailers, own_answer
from ._state import State

__all__ = [
    "HEAD_FENCE",
    "MAX_CONCURRENT_STREAMS",
    "H2ClientEnd",
    "H2ClientMessage",
    "H2Event",
    "H2Refused",
    "H2Session",
    "H2SessionMiss",
]

#: How many streams a client may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS).
MAX_CONCURRENT_STREAMS = 100

#: The most bytes of decoded header list h2 takes on any stream (an HPACK
#: bomb's bound: past it the connection fails, GOAWAY), above any
#: ``Limits.max_head`` a stream's engine has: a head over that one, below
#: this, is its own stream's 431.  (h2's own default, 64 KiB, is
#: ``Limits``' default, and would fail the connection first.)
HEAD_FENCE = 1024 * 1024


@dataclass(frozen=True)
class H2Event:
    """One of stream ``stream_id``'s exchange events, and the engine deciding
    it (the binding calls it for everything that is not bytes)."""

    stream_id: int
    event: Event | Signal
    engine: Engine


@dataclass(frozen=True)
class H2Refused:
    """A request on ``stream_id`` the adapter answered itself with ``error``'s
    status and message (the answer is in ``data_to_send``)."""

    stream_id: int
    error: RemoteProtocolError


@dataclass(frozen=True)
class H2ClientMessage:
    """A whole client message of a gRPC call forwarded at its first one
    (after its :class:`~reel_core.Forward`): send ``data`` upstream on the
    call's stream (a recording's :class:`~reel_core.tools.GrpcCallRecorder`
    takes it too).  ``at`` is the ``mono`` reading it came with."""

    stream_id: int
    data: bytes
    at: float


@dataclass(frozen=True)
class H2ClientEnd:
    """The client ended the stream of a gRPC call forwarded at its first
    message: send ``rest`` (bytes of an unfinished message, normally none)
    and END_STREAM upstream.  ``at`` is the ``mono`` reading it came with."""

    stream_id: int
    rest: bytes
    at: float


@dataclass(frozen=True)
class H2SessionMiss:
    """A replayed gRPC session left its recording on ``stream_id``: the call
    ends with ``grpc-status: 5`` (its events follow); ``report`` is the
    miss, for the binding's run log."""

    stream_id: int
    report: MissReport


_Handed = H2Event | H2Refused | H2ClientMessage | H2ClientEnd | H2SessionMiss


class _Route(enum.Enum):
    """Where a streamed gRPC call's later client messages go, once decided."""

    #: Handed out (``H2ClientMessage``, ``H2ClientEnd``): the binding sends
    #: them upstream.
    FORWARD = "forward"
    #: To the call's :class:`~reel_core.tools.GrpcCallReplay`.
    REPLAY = "replay"
    #: Let go: the call was answered otherwise (a miss, a refusal).
    DROP = "drop"


@dataclass(eq=False)
class _Stream:
    """What the adapter keeps of one stream."""

    engine: Engine
    headers: list[tuple[bytes, bytes]]
    body: list[bytes] = field(default_factory=list)
    size: int = 0
    #: The request went to the engine (or was refused).
    started: bool = False
    #: Its engine's events are handed out (a ``CLOSED`` ends them).
    handed: bool = False
    #: A gRPC call that goes to the engine at its first message
    #: (:meth:`Engine.streams_call`), not at its end.
    streamed: bool = False
    #: Such a call's messages, as they complete, until the client's end.
    splitter: GrpcSplitter | None = None
    #: When its first message came (``mono``), for such a call.
    opened: float = 0.0
    #: Such a call's later client messages (``None``: its end, with the
    #: bytes of an unfinished message), until its decision is handed out.
    inbox: list[tuple[bytes | None, bytes, float]] = field(default_factory=list)
    #: Where its later messages go once decided (``None``: not yet).
    route: _Route | None = None
    #: The replay of a gRPC session, once decided.
    replay: GrpcCallReplay | None = None
    #: The engine's response events are handed out; the replay's follow.
    replaying: bool = False
    #: The replay's miss was handed out.
    missed: bool = False
    #: The client reset the stream (or the connection ended): nothing is sent.
    reset: bool = False
    #: Response bytes waiting for the client's window.
    queued: deque[bytes] = field(default_factory=deque)
    #: How many bytes ``queued`` holds.
    queued_size: int = 0
    #: The response's head went out.
    headed: bool = False
    #: The response ended: END_STREAM goes out once ``queued`` is empty.
    ending: bool = False
    #: The response was cut: the stream is reset once ``queued`` is empty
    #: (what came before the cut reaches the client, as over HTTP/1.1).
    cutting: bool = False
    #: The response's trailers, sent with its END_STREAM.
    trailers: list[tuple[bytes, bytes]] | None = None


#: Fields HPACK never indexes (h2's ``_secure_headers``, which its outbound
#: normalization applied): credentials an attacker could guess at by size.
_NEVER_INDEXED = frozenset({b"authorization", b"proxy-authorization"})


def _sent(headers: Headers) -> list[tuple[bytes, bytes]]:
    """The fields of ``headers`` an HTTP/2 response carries, each value
    byte for byte as recorded (:func:`~reel_core._fields.h2_sent`: h2's
    outbound normalization is off, it would strip them); a credential or
    a short cookie never indexed, as h2 did."""
    return [
        NeverIndexedHeaderTuple(k, v)
        if k in _NEVER_INDEXED or (k == b"cookie" and len(v) < 20)
        else (k, v)
        for k, v in h2_sent(headers)
    ]


def _field(headers: list[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    """The value of the first field ``name`` of a header list, or ``None``."""
    return next((value for key, value in headers if key == name), None)


def _header_size(headers: list[tuple[bytes, bytes]]) -> int:
    """The size of a decoded header list as RFC 9113 counts it (each field's
    name and value, plus 32)."""
    return sum([len(k) + len(v) + 32 for k, v in headers])


class H2Session:
    """One HTTP/2 client connection (h2c with prior knowledge), each stream
    an exchange of its own engine, made by ``new_engine``."""

    def __init__(
        self,
        new_engine: Callable[[], Engine],
        *,
        max_concurrent_streams: int = MAX_CONCURRENT_STREAMS,
        decode: Callable[[str], Decode | None] | None = None,
    ) -> None:
        self._new_engine = new_engine
        #: A replayed gRPC session's message reader for a call's path (a
        #: descriptor set's, see :class:`~reel_core.tools.GrpcCallReplay`).
        self._decode = decode
        # values go out as recorded, and a client's are taken as gRPC allows
        # them (h2 would strip or refuse one with spaces around it): see _fields
        config = h2.config.H2Configuration(
            client_side=False,
            header_encoding=None,
            normalize_outbound_headers=False,
            validate_inbound_headers=False,
        )
        self._conn = h2.connection.H2Connection(config=config)
        self._conn.local_settings = h2.settings.Settings(
            client=False,
            initial_values={
                h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: max_concurrent_streams,
            },
        )
        self._conn.decoder.max_header_list_size = HEAD_FENCE
        self._conn.initiate_connection()
        self._streams: dict[int, _Stream] = {}
        #: Streams whose exchange's events are handed out, in turn.
        self._ready: dict[int, _Stream] = {}
        self._handed: deque[_Handed] = deque()
        self._closed = False
        self._wall: float | None = None
        self._mono = 0.0

    # -- client side -----------------------------------------------------------

    def receive_data(
        self, data: bytes, *, wall: float | None = None, mono: float | None = None
    ) -> None:
        """Feed raw bytes from the client (``b""`` means EOF).  ``wall`` is
        the wall-clock time (epoch seconds) they came at: the requests they
        complete carry it.  ``mono`` is the monotonic time then: a gRPC
        session's replay counts its deadlines from it (without it, every
        client message counts as come at its call's start).

        Raises :class:`RemoteProtocolError` when the client broke the
        protocol: a GOAWAY is in :meth:`data_to_send`; close after it."""
        if wall is not None:
            self._wall = wall
        if mono is not None:
            self._mono = mono
        if not data:
            self._close()
            return
        if self._closed:
            return
        try:
            events = self._conn.receive_data(data)
        except h2.exceptions.ProtocolError as exc:
            # h2 queued its GOAWAY, except for a bad preface (read before its frames)
            if self._conn.state_machine.state is not h2.connection.ConnectionState.CLOSED:
                self._conn.close_connection(h2.errors.ErrorCodes.PROTOCOL_ERROR)
            self._close()
            raise RemoteProtocolError(f"the client broke the HTTP/2 protocol: {exc}") from None
        if any(isinstance(event, h2.events.ConnectionTerminated) for event in events):
            # the client's GOAWAY: h2 sends nothing after it, not even on the
            # streams it opened before, so every exchange ends here
            self._close()
            return
        for event in events:
            self._on(event)

    def _on(self, event: h2.events.Event) -> None:
        if isinstance(event, (h2.events.WindowUpdated, h2.events.RemoteSettingsChanged)):
            for open_sid in list(self._streams):  # a window opened, or every window moved
                self._flush(open_sid)
            return
        sid: int | None = getattr(event, "stream_id", None)
        if sid is None:  # pings, settings acknowledged: h2's own business
            return
        if isinstance(event, h2.events.RequestReceived):
            self._open(sid, [(bytes(k), bytes(v)) for k, v in event.headers or ()])
            return
        if isinstance(event, h2.events.StreamReset):
            self._reset(sid)
            return
        stream = self._streams.get(sid)
        if isinstance(event, h2.events.DataReceived):
            self._conn.acknowledge_received_data(event.flow_controlled_length or 0, sid)
            if stream is not None and stream.splitter is not None:
                self._message_bytes(sid, stream, event.data or b"")
            elif stream is not None and not stream.started:
                self._take(sid, stream, event.data or b"")
        elif isinstance(event, h2.events.TrailersReceived) and stream is not None:
            self._trailers(sid, stream, [(bytes(k), bytes(v)) for k, v in event.headers or ()])
        elif isinstance(event, h2.events.StreamEnded) and stream is not None:
            if stream.splitter is not None:
                self._client_ended(sid, stream)
            elif not stream.started:
                self._start(sid, stream)

    def _open(self, sid: int, headers: list[tuple[bytes, bytes]]) -> None:
        """A request's head came on ``sid``: its exchange's engine is made."""
        stream = self._streams[sid] = _Stream(self._new_engine(), headers)
        stream.engine.reads_trailers = True  # a gRPC call's own answers are gRPC statuses
        config = stream.engine.config
        size = _header_size(headers)
        if size > config.limits.max_head:
            message = (
                f"request head of {size} bytes is over the {config.limits.max_head}-byte "
                f"limit: {config.hints.max_head}"
            )
            self._refuse(sid, RemoteProtocolError(message, 431))
            return
        try:
            check_received(headers, HeaderBlock.REQUEST)
        except RemoteProtocolError as exc:  # malformed: refused on its stream (RFC 9113 8.1.1)
            self._refuse(sid, exc)
            return
        try:
            head = self._request(headers, b"")
        except RemoteProtocolError:
            return  # refused whole, at its end
        if stream.engine.streams_call(head):
            stream.streamed = True
            stream.splitter = GrpcSplitter(config.limits.max_body, config.hints.max_body)

    def _trailers(self, sid: int, stream: _Stream, trailers: list[tuple[bytes, bytes]]) -> None:
        """A request's trailers came (checked, else let go): malformed ones
        refuse a request not yet started, and break a streamed call under
        way."""
        try:
            check_received(trailers, HeaderBlock.TRAILERS)
        except RemoteProtocolError as exc:
            if not stream.started:
                self._refuse(sid, exc)
            elif stream.splitter is not None:
                self._break(sid, stream)

    def _message_bytes(self, sid: int, stream: _Stream, data: bytes) -> None:
        """A piece of a streamed gRPC call's body: its first whole message
        starts the exchange, each later one goes where the decision says."""
        assert stream.splitter is not None
        try:
            messages = stream.splitter.feed(data)
        except RemoteProtocolError as exc:  # a message over the body limit
            if stream.started:  # the call is under way: it is cut, as the stream breaks
                self._break(sid, stream)
            else:
                self._refuse(sid, exc)
            return
        for message in messages:
            if not stream.started:
                stream.opened = self._mono
                self._start(sid, stream, message)
            else:
                self._more(sid, stream, message, b"", self._mono)

    def _client_ended(self, sid: int, stream: _Stream) -> None:
        """A streamed gRPC call's client ended its stream."""
        assert stream.splitter is not None
        rest = stream.splitter.close()
        stream.splitter = None
        if stream.started:
            self._more(sid, stream, None, rest, self._mono)
        elif rest:
            error = RemoteProtocolError(
                f"gRPC body truncated: {len(rest)} bytes end in no whole message", 400
            )
            self._refuse(sid, error)
        else:  # a call with no message: decided on its end
            stream.opened = self._mono
            self._start(sid, stream)
            stream.inbox.append((None, b"", self._mono))

    def _more(
        self, sid: int, stream: _Stream, message: bytes | None, rest: bytes, now: float
    ) -> None:
        """A later client message of a streamed call (``None``: its end),
        come at ``now``, where its decision says."""
        if stream.route is None:
            stream.inbox.append((message, rest, now))
        elif stream.route is _Route.FORWARD:
            if message is None:
                self._handed.append(H2ClientEnd(sid, rest, now))
            else:
                self._handed.append(H2ClientMessage(sid, message, now))
        elif stream.route is _Route.REPLAY:
            replay = stream.replay
            assert replay is not None
            if message is None:
                replay.client_end(now)
            else:
                replay.client_message(message, now)
            if replay.miss is not None and not stream.missed:  # it left its recording
                stream.missed = True
                self._handed.append(H2SessionMiss(sid, replay.miss))

    def _break(self, sid: int, stream: _Stream) -> None:
        """A streamed call that cannot go on: reset, its exchange ended."""
        self._conn.reset_stream(sid, h2.errors.ErrorCodes.INTERNAL_ERROR)
        stream.splitter = None
        self._reset(sid)

    def _take(self, sid: int, stream: _Stream, data: bytes) -> None:
        """A piece of the request body on ``sid``, within ``max_body``."""
        stream.body.append(data)
        stream.size += len(data)
        config = stream.engine.config
        if stream.size > config.limits.max_body:
            self._refuse(sid, config.limits.body_too_large(None, config.hints.max_body))

    def _start(self, sid: int, stream: _Stream, body: bytes | None = None) -> None:
        """The request on ``sid`` is whole (or, for a streamed gRPC call,
        its first message is ``body``): hand it to its engine."""
        stream.started = True
        try:
            request = self._request(stream.headers, b"".join(stream.body) if body is None else body)
        except RemoteProtocolError as exc:
            self._refuse(sid, exc)
            return
        stream.body.clear()
        stream.engine.receive_request(request, wall=self._wall)
        stream.handed = True
        self._ready[sid] = stream

    @staticmethod
    def _request(headers: list[tuple[bytes, bytes]], body: bytes) -> Request:
        """The :class:`Request` of a stream's header list: ``:path`` its
        target, ``:authority`` its ``host`` (unless it has one), ``cookie``
        fields joined with ``; `` as HTTP/1.1 sends them (RFC 9113, 8.2.3)."""
        pseudo: dict[bytes, bytes] = {}
        plain: list[tuple[bytes, bytes]] = []
        cookies: list[bytes] = []
        for name, value in headers:
            if name.startswith(b":"):
                pseudo[name] = value
            elif name == b"cookie":
                cookies.append(value)
            else:
                plain.append((name, value))
        method = pseudo[b":method"].decode("latin-1")  # h2 checks it is there
        path = pseudo.get(b":path")
        if path is None:  # CONNECT: Reel forwards no tunnel
            raise RemoteProtocolError(f"Reel does not serve {method} requests", 405)
        authority = pseudo.get(b":authority")
        if authority is not None and not any(name == b"host" for name, _ in plain):
            plain.insert(0, (b"host", authority))
        if cookies:
            plain.append((b"cookie", b"; ".join(cookies)))
        return Request(method, path.decode("latin-1"), tuple(plain), body)

    def _refuse(self, sid: int, error: RemoteProtocolError) -> None:
        """Answer the request on ``sid`` with ``error`` (scrubbed by its
        engine, which is done); what more the client sends of it is let go."""
        stream = self._streams[sid]
        stream.started = True
        stream.splitter = None
        error = stream.engine.client_error(error)
        content_type = _field(stream.headers, b"content-type")
        for event in own_answer(content_type, error.status, "reel_bad_request", str(error)):
            self.send(sid, event)
        self._handed.append(H2Refused(sid, error))

    def _reset(self, sid: int) -> None:
        """The client reset ``sid``: its exchange ends, the others go on."""
        stream = self._streams.pop(sid, None)
        if stream is None:
            return
        stream.reset = True
        stream.queued.clear()
        stream.queued_size = 0
        if stream.handed:  # still in _ready, or its response still going out
            self._handed.append(H2Event(sid, Signal.CLOSED, stream.engine))

    def _close(self) -> None:
        """The connection ended: every stream's exchange with it."""
        self._closed = True
        for sid in list(self._streams):
            self._reset(sid)

    # -- events ----------------------------------------------------------------

    def next_event(self) -> _Handed | Signal:
        """The next stream event, or a :class:`Signal`: ``NEED_DATA`` (read
        on), ``CLOSED`` (the connection is over and so is every exchange)."""
        if self._handed:
            return self._handed.popleft()
        for sid, stream in list(self._ready.items()):
            if stream.replaying and not stream.reset:
                out = self._session_event(sid, stream)
                if out is None:
                    continue  # waiting on its client
                return out
            event = stream.engine.next_event()
            if stream.reset:  # nothing more goes to the client
                while isinstance(event, Event):
                    event = stream.engine.next_event()
            if isinstance(event, Event):
                if stream.streamed:
                    self._decided(sid, stream, event)
                if stream.replay is not None and isinstance(event, EndOfResponse):
                    stream.replaying = True  # the engine's end: the session's events follow
                    return self.next_event()
                # the stream's turn is over: the others' come first
                del self._ready[sid]
                self._ready[sid] = stream
                return H2Event(sid, event, stream.engine)
            if event is Signal.PAUSED and stream.engine.state is State.DONE:
                del self._ready[sid]
                return H2Event(sid, Signal.PAUSED, stream.engine)
        if self._closed and not self._ready:
            return Signal.CLOSED
        return Signal.NEED_DATA

    def _decided(self, sid: int, stream: _Stream, event: Event) -> None:
        """A streamed gRPC call's decision is handed out: its later client
        messages go where it says from now on, those that came already
        first."""
        if stream.route is not None:
            return
        if isinstance(event, Forward):
            stream.route = _Route.FORWARD
        elif isinstance(event, Replay) and event.grpc is not None:
            stream.route = _Route.REPLAY
            decode = self._decode(event.request.path) if self._decode is not None else None
            stream.replay = GrpcCallReplay.for_engine(stream.engine, event, decode=decode)
            stream.replay.open(stream.opened, first=bool(event.request.body))
        else:  # a miss, a refusal: the rest is let go
            stream.route = _Route.DROP
        inbox, stream.inbox = stream.inbox, []
        for message, rest, now in inbox:
            self._more(sid, stream, message, rest, now)

    def _session_event(self, sid: int, stream: _Stream) -> H2Event | None:
        """The next event of a replayed gRPC session on ``sid`` (``None``:
        it waits on its client)."""
        replay = stream.replay
        assert replay is not None
        event = replay.next_event()
        if event is Signal.NEED_DATA:
            return None
        del self._ready[sid]
        if event is Signal.CLOSED:
            stream.replaying = False
            return H2Event(sid, Signal.PAUSED, stream.engine)
        assert isinstance(event, Event)
        self._ready[sid] = stream
        return H2Event(sid, event, stream.engine)

    def streamed(self, stream_id: int) -> bool:
        """Whether the call on ``stream_id`` went to its engine at its first
        message (a gRPC call, see :meth:`Engine.streams_call`): a
        ``Forward``'s request body is then that message only, its stream
        stays open upstream, and :class:`H2ClientMessage` and
        :class:`H2ClientEnd` follow."""
        stream = self._streams.get(stream_id)
        return stream is not None and stream.streamed

    def started_at(self, stream_id: int) -> float | None:
        """When a streamed call's first message came (the ``mono`` reading
        handed with it): a replayed session's deadlines count from it, and
        a recording's :class:`~reel_core.tools.GrpcCallRecorder` takes its
        first message then.  ``None`` for any other stream."""
        stream = self._streams.get(stream_id)
        return stream.opened if stream is not None and stream.streamed else None

    # -- wire output -----------------------------------------------------------

    def send(self, stream_id: int, event: Event) -> None:
        """Send a response event of stream ``stream_id``'s exchange: its
        bytes join :meth:`data_to_send` (a body's may wait for the client's
        window).  Nothing is sent on a stream the client reset."""
        if not isinstance(event, (ResponseHead, Frame, Trailers, EndOfResponse, Cut)):
            raise LocalProtocolError(f"{type(event).__name__} is not sent to the client")
        stream = self._streams.get(stream_id)
        if stream is None:  # reset by the client, or the connection ended
            return
        if isinstance(event, ResponseHead):
            headers = [(b":status", str(event.status).encode())]
            headers += self._fields(stream_id, event.headers)
            try:
                self._conn.send_headers(stream_id, headers)
            except h2.exceptions.ProtocolError as exc:  # a second head, say
                del self._streams[stream_id]
                self._conn.reset_stream(stream_id, h2.errors.ErrorCodes.INTERNAL_ERROR)
                raise LocalProtocolError(f"h2 refused the response head: {exc}") from None
            stream.headed = True
        elif isinstance(event, Frame):
            self._queue(stream_id, stream, event.data)
        elif isinstance(event, Trailers):  # they end the stream, behind its data
            stream.trailers = self._fields(stream_id, event.headers)
        elif isinstance(event, EndOfResponse):
            stream.ending = True
            self._flush(stream_id)
        elif stream.headed and is_grpc(_field(stream.headers, b"content-type")):
            # a gRPC call's Cut: what broke off, as a gRPC status behind what came
            stream.trailers = _sent(grpc_cut_trailers(event.error, event.detail))
            stream.ending = True
            self._flush(stream_id)
        else:  # a Cut: the client must not take the body for whole
            stream.cutting = True
            self._flush(stream_id)

    def _fields(self, stream_id: int, headers: Headers) -> list[tuple[bytes, bytes]]:
        """A head's or trailers' fields as sent (:func:`_sent`); one no
        client may be sent (a NUL, CR or LF in a value edited by hand)
        resets the stream, so the client takes no answer for whole, and
        raises :class:`LocalProtocolError` saying which."""
        try:
            return _sent(headers)
        except LocalProtocolError:
            del self._streams[stream_id]
            self._conn.reset_stream(stream_id, h2.errors.ErrorCodes.INTERNAL_ERROR)
            raise

    def send_frames(self, stream_id: int, frames: Sequence[Frame]) -> None:
        """Send ``frames`` due at once on stream ``stream_id`` (a
        :class:`~reel_core.Batch`'s) as one piece of body: their bytes
        joined, queued and sent in DATA frames as the window allows.  The
        body the client reads is that of sending each frame; DATA frame
        boundaries are no part of it (as chunks are not over HTTP/1.1),
        and h2 cuts a body into them by the window and frame size anyway.
        Nothing is sent on a stream the client reset."""
        stream = self._streams.get(stream_id)
        if stream is not None:
            self._queue(stream_id, stream, b"".join([frame.data for frame in frames]))

    def _queue(self, sid: int, stream: _Stream, data: bytes) -> None:
        if data:
            stream.queued.append(data)
            stream.queued_size += len(data)
            self._flush(sid)

    def _flush(self, sid: int) -> None:
        """Send what the client's window lets through of ``sid``'s queue,
        and its END_STREAM once the queue is empty."""
        stream = self._streams[sid]
        conn = self._conn
        queued = stream.queued
        while queued:
            room = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
            if room <= 0:
                return
            data = queued.popleft()
            if len(data) > room:
                data, rest = data[:room], data[room:]
                queued.appendleft(rest)
            stream.queued_size -= len(data)
            conn.send_data(sid, data)
        if stream.cutting:
            del self._streams[sid]
            conn.reset_stream(sid, h2.errors.ErrorCodes.INTERNAL_ERROR)
        elif stream.ending:
            if stream.trailers is not None:
                conn.send_headers(sid, stream.trailers, end_stream=True)
            else:
                conn.end_stream(sid)
            del self._streams[sid]

    def data_to_send(self) -> bytes:
        """The bytes to write to the client now."""
        return self._conn.data_to_send()

    def buffered(self, stream_id: int) -> int:
        """How many of a stream's body bytes wait for the client's window: a
        binding may stop pulling that stream's events while it grows."""
        stream = self._streams.get(stream_id)
        return 0 if stream is None else stream.queued_size
