"""The HTTP/1.1 adapter: client bytes in, the engine's events, bytes out.

A :class:`Session` serves one client connection.  Like h11 it only
buffers: the binding feeds the client's bytes with
:meth:`Session.receive_data`, pulls events with :meth:`Session.next_event`
and writes what :meth:`Session.send` serializes.  h11 parses the requests
and frames the answers; every decision is the :class:`~reel_core.Engine`'s,
and the binding calls ``session.engine`` for everything that is not bytes
(the upstream side, ``record``, the state).

Two answers are the adapter's own.  A request the binding's ``route``
claims (the proxy's viewer) is handed out as :class:`Routed` and answered
with :meth:`Session.respond`: the engine never sees it.  And a WebSocket
upgrade the engine decided is answered by :meth:`Session.upgrade`, the
HTTP/1.1 handshake (``101``, ``Sec-WebSocket-Accept``), whose
:class:`~reel_core.Upgrade` the WebSocket adapter takes over from.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Sequence
from http import HTTPStatus

import h11

from ._cassette import Cassette
from ._config import Config
from ._engine import Engine
from ._errors import LocalProtocolError, RemoteProtocolError
from ._events import (
    Continue,
    Cut,
    EndOfResponse,
    Event,
    Frame,
    ResponseHead,
    Routed,
    Signal,
    Trailers,
    Upgrade,
)
from ._fields import h11_sent
from ._http import HOP_BY_HOP, Headers, Request, normalize_headers
from ._own_answers import error_body
from ._reader import ReaderSignal, RequestReader
from ._state import State

__all__ = ["Session"]

_JSON = (b"content-type", b"application/json")


def _h11_head(status: int, headers: Headers, reason: bytes) -> h11.Response:
    """A response head as h11 sends it (each value without the padding
    HTTP/1.1 readers strip: an HTTP/2 recording's may have some)."""
    return h11.Response(
        status_code=status, headers=h11_sent(headers), reason=reason or _phrase(status)
    )


#: h11 validates every header when a head is built (8 us for a recording's
#: usual five): a recording replayed again reuses its head, validated once.
_replayed_head = functools.lru_cache(maxsize=4096)(_h11_head)


_END = h11.EndOfMessage()

#: A replayed response of at most this many bytes is sent whole
#: (:meth:`Session.send_replay`); a longer one event by event, so a binding
#: can write it in pieces.
WHOLE_MAX = 64 * 1024
#: At most this many bytes of replays' serialized responses are kept per
#: cassette (their bodies are the events' own bytes, which the engines'
#: cache of replay events may let go sooner).
_WHOLE_BYTES = 16 * 1024 * 1024
#: The variant of a response: the request's HTTP version, its method as
#: sent, and its ``Connection`` header values, all h11 frames a response by.
_Variant = tuple[bytes, bytes, tuple[bytes, ...]]
#: A response serialized by h11 for one variant: its head, the pieces of
#: its bytes (the body's are the frames' own bytes, not copies), and
#: whether h11 kept the connection alive after it.
_Whole = tuple[ResponseHead, tuple[bytes, ...], bool]


def _serialized(events: tuple[Event, ...], variant: _Variant) -> _Whole | None:
    """The bytes h11 writes for a replay's ``events`` answering a request
    of ``variant``: an h11 connection of its own is handed a request of
    that shape (no body), then sent the events, as :meth:`Session.send`
    sends them.  ``None`` when the response cannot go out whole: a frame or
    end due later than the head, a cut, more than ``WHOLE_MAX`` bytes of
    body, or a response h11 refuses (sent event by event, h11 says why)."""
    head, *rest = events
    assert isinstance(head, ResponseHead)  # a replay's first event
    size = 0
    for event in rest:
        if isinstance(event, Frame):
            size += len(event.data)
        if not isinstance(event, (Frame, EndOfResponse)) or event.at or size > WHOLE_MAX:
            return None
    version, method, connection = variant
    request = [b"HEAD" if method == b"HEAD" else b"GET", b" / HTTP/", version, b"\r\n"]
    request += [b"connection: %s\r\n" % value for value in connection]
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(b"".join([*request, b"host: reel\r\n\r\n"]))
    data = [h11.Data(data=e.data) for e in rest if isinstance(e, Frame) and e.data]
    pieces: list[bytes] = []
    try:
        while not isinstance(conn.next_event(), h11.EndOfMessage):
            pass
        for h11_event in [_replayed_head(head.status, head.headers, head.reason), *data, _END]:
            pieces += conn.send_with_data_passthrough(h11_event) or ()
    except h11.ProtocolError:
        return None
    return head, tuple(pieces), conn.our_state is h11.DONE


class _Wholes:
    """A cassette's replays serialized whole, shared by its sessions
    (:data:`_WHOLES`):
    ``id(events) -> (events, {variant: whole})``.  An entry holds its
    events, so their id is not reused while it lives; past ``_WHOLE_BYTES``
    every entry goes.  A response that cannot go whole is not kept: its
    first late frame, cut or byte past ``WHOLE_MAX`` says so soon enough."""

    __slots__ = ("_entries", "_size")

    def __init__(self) -> None:
        self._entries: dict[int, tuple[tuple[Event, ...], dict[_Variant, _Whole]]] = {}
        self._size = 0

    def get(self, events: tuple[Event, ...], variant: _Variant) -> _Whole | None:
        kept = self._entries.get(id(events))
        if kept is None or kept[0] is not events:
            kept = None
        elif variant in kept[1]:
            return kept[1][variant]
        whole = _serialized(events, variant)
        if whole is None:
            return None
        size = sum([len(piece) for piece in whole[1]])
        if self._size + size > _WHOLE_BYTES:
            self._entries.clear()
            self._size, kept = 0, None
        if kept is None:
            kept = self._entries[id(events)] = (events, {})
        kept[1][variant] = whole
        self._size += size
        return whole


#: Each cassette's replays serialized whole, kept while the cassette lives:
#: h11's bytes are this adapter's, not the cassette's.
_WHOLES: weakref.WeakKeyDictionary[Cassette, _Wholes] = weakref.WeakKeyDictionary()


@functools.lru_cache(maxsize=128)
def _phrase(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""


#: Handshake headers of one hop, never copied from a recorded or upstream
#: ``101``: the adapter writes its own.
_HANDSHAKE = frozenset(
    {
        b"sec-websocket-accept",
        b"sec-websocket-extensions",
        b"sec-websocket-protocol",
        b"content-length",
    }
)


def _upgrade_headers(request: Request, answered: Headers) -> list[tuple[bytes, bytes]]:
    """The headers of the ``101`` answering the client's upgrade: the accept
    computed from the client's own key (never a recorded one), the
    subprotocol ``answered`` chose (else the first the client offers), and
    ``answered``'s end-to-end headers."""
    # wsproto only for an upgrade: an HTTP/1.1 connection that never
    # upgrades (every replay of a plain request) never imports it
    from wsproto.utilities import generate_accept_token

    key = request.header("sec-websocket-key")
    if key is None:
        raise RemoteProtocolError("a WebSocket upgrade needs a Sec-WebSocket-Key header", 400)
    headers = [
        (b"upgrade", b"websocket"),
        (b"connection", b"Upgrade"),
        (b"sec-websocket-accept", generate_accept_token(key)),
    ]
    protocol = dict(answered).get(b"sec-websocket-protocol")
    offered = request.header("sec-websocket-protocol")
    if protocol is None and offered:
        protocol = offered.split(b",")[0].strip()
    if protocol:
        headers.append((b"sec-websocket-protocol", protocol))
    headers += [(k, v) for k, v in answered if k not in HOP_BY_HOP and k not in _HANDSHAKE]
    return headers


class Session:
    """One HTTP/1.1 client connection, driven through an :class:`Engine`.

    ``cassette`` and ``config`` are the engine's (see :class:`Engine`).
    ``route``, if given, is offered each request first: one it claims
    (True) is the binding's to answer (:class:`Routed`).
    """

    def __init__(
        self,
        cassette: Cassette | Callable[[Request], Cassette],
        config: Config | None = None,
        *,
        route: Callable[[Request], bool] | None = None,
    ) -> None:
        self.engine = Engine(cassette, config)
        self._reader = RequestReader(self.engine.config.limits, self.engine.config.hints)
        self._route = route
        #: The request handed out as :class:`Routed`, until its next cycle.
        self._routed: Request | None = None
        #: The wall-clock time the client's last bytes came with.
        self._now: float | None = None

    # -- client side -----------------------------------------------------------

    def receive_data(self, data: bytes, *, wall: float | None = None) -> None:
        """Buffer raw request bytes from the client (``b""`` means EOF).
        ``wall`` is the wall-clock time (epoch seconds) they came at: the
        request they complete carries it (a ``max_age`` needs it)."""
        if wall is not None:
            self._now = wall
        try:
            self._reader.receive_data(data)
        except LocalProtocolError:
            self.engine.fail()
            raise

    def next_event(self) -> Event | Signal:
        """The next event, or a :class:`Signal` saying what the session waits on.

        Raises :class:`RemoteProtocolError` (with the status to answer) when
        the client sent something invalid.
        """
        if self._routed is not None:  # the binding answers it (respond)
            return Signal.PAUSED
        event = self.engine.next_event()
        if event is not Signal.NEED_DATA:
            return event
        request = self._next_request()
        if isinstance(request, (Signal, Continue)):
            return request
        if self._route is not None and self._route(request):
            self._routed = request
            return Routed(request)
        self.engine.receive_request(request, wall=self._now)
        return self.engine.next_event()

    def _next_request(self) -> Request | Signal | Continue:
        try:
            got = self._reader.next_request()
        except RemoteProtocolError as exc:
            raise self.engine.client_error(exc) from None
        if got is ReaderSignal.CLOSED:
            self.engine.client_closed()
            return Signal.CLOSED
        if got is ReaderSignal.NEED_DATA:
            return Signal.NEED_DATA
        if got is ReaderSignal.CONTINUE:
            return Continue()
        if got is ReaderSignal.PAUSED:  # pragma: no cover - h11 pauses only mid-response
            return Signal.PAUSED
        assert isinstance(got, Request)
        return got

    @property
    def finished(self) -> bool:
        """Whether the exchange is over (the engine's is ``DONE``, or a
        routed request was answered): once its events are pulled,
        :meth:`start_next_cycle` may follow if :attr:`keep_alive`."""
        if self._routed is not None:
            return not self._reader.can_respond
        return self.engine.state is State.DONE

    def start_next_cycle(self) -> None:
        """After a finished exchange, get ready for the next request."""
        if self._routed is not None:
            if self._reader.can_respond:
                self.engine.fail()
                raise LocalProtocolError("respond() to the routed request before the next one")
            self._routed = None
        else:
            self.engine.start_next_cycle()
        self._reader.start_next_cycle()

    # -- wire output -----------------------------------------------------------

    def send(self, event: Event) -> bytes:
        """Serialize a response event for the client.

        After a :class:`Cut` the bytes are empty and the connection must be
        closed without finishing the response.  :class:`Trailers` are
        HTTP/2's: nothing is sent for them over HTTP/1.1.
        """
        if isinstance(event, Frame):
            if not event.data:
                return b""
            h11_event: h11.Event = h11.Data(data=event.data)
        elif isinstance(event, ResponseHead):
            # a recording's head (or Reel's own) repeats; an upstream's, with
            # its date and request id, never does
            head = _replayed_head if self.engine.state is State.SERVING else _h11_head
            h11_event = head(event.status, event.headers, event.reason)
        elif isinstance(event, EndOfResponse):
            h11_event = _END
        elif isinstance(event, Cut):
            self._reader.send_failed()
            return b""
        elif isinstance(event, Trailers):
            # HTTP/1.1 clients do not ask for them (``TE: trailers``) and
            # a replayed head has a Content-Length or none: not sent.
            return b""
        elif isinstance(event, Continue):
            return self._reader.send_continue()
        else:
            raise LocalProtocolError(f"{type(event).__name__} is not sent to the client")
        return self._reader.send(h11_event)

    def send_frames(self, frames: Sequence[Frame]) -> bytes:
        """Serialize ``frames`` due at once (a :class:`Batch`'s) for the
        client: their bytes joined, sent to h11 as one piece of body.  The
        body the client reads is that of sending each frame, as are the
        bytes on the wire of a response with a length; a chunked one has
        one chunk for the batch, not one per frame.  Chunks are no part of
        the body: a client reading with h11 or httpx may see a chunk's
        bytes in several pieces or a read's worth of chunks back to back,
        as the network delivers them, and an SSE client splits events on
        blank lines, never on chunks (see docs/reliability.md)."""
        data = b"".join([frame.data for frame in frames])
        if not data:
            return b""
        return self._reader.send(h11.Data(data=data))

    def respond(
        self, status: int, headers: Headers | list[tuple[bytes, bytes]], body: bytes
    ) -> bytes:
        """After :class:`Routed`: the bytes of the binding's whole answer to
        the request (its head only for a ``HEAD``).  ``headers`` are sent
        as given, a ``Content-Length`` among them; nothing is recorded."""
        if self._routed is None:
            self.engine.fail()
            raise LocalProtocolError("respond() answers a Routed request only")
        data = self._reader.send(_h11_head(status, tuple(headers), b""))
        if body and self._routed.method != "HEAD":
            data += self._reader.send(h11.Data(data=body))
        return data + self._reader.send(_END)

    def refuse(self, status: int, kind: str, message: str) -> bytes:
        """After :class:`Routed`: the bytes of a refusal in Reel's own JSON
        error shape (``kind``, ``message``), as the engine's refusals are."""
        body = error_body(kind, message)
        return self.respond(status, (_JSON, (b"content-length", str(len(body)).encode())), body)

    def send_replay(self) -> tuple[ResponseHead, bytes] | None:
        """After a :class:`Replay` decision, before pulling its response:
        the whole response serialized in one piece, and the exchange is
        served (pull on: ``PAUSED`` follows).  The bytes are those
        :meth:`send` gives for each event, joined; the head is handed back
        for the binding's log.  ``None`` when the response is not due whole
        at once (a stream replayed in realtime, a cut), is longer than
        ``WHOLE_MAX`` bytes, or is no replay's: pull and send its events
        one by one.

        Why: a recording replayed again is serialized once per shape of
        request (HTTP version, ``HEAD`` or not, ``Connection`` headers), by
        h11 itself on a connection of its own, and the serialized pieces
        are kept per cassette (:data:`_WHOLES`) for its replay events; each
        play then costs one join instead of h11 checking and writing every
        event.  This session's h11 connection is not told: its next cycle
        starts on a new one (see ``RequestReader.sent_whole``).
        """
        events = self.engine.replaying
        reader = self._reader
        version = reader.client_http_version
        if events is None or version is None or not reader.can_send_whole:
            return None
        cassette = self.engine.cassette
        wholes = _WHOLES.get(cassette)
        if wholes is None:
            wholes = _WHOLES[cassette] = _Wholes()
        whole = wholes.get(events, (version, reader.method, reader.connection))
        if whole is None:
            return None
        head, pieces, keep_alive = whole
        self.engine.take_replay()
        reader.sent_whole(keep_alive)
        return head, b"".join(pieces)

    def upgrade(self, request: Request) -> Upgrade:
        """After a WebSocket decision about ``request`` (a :class:`Replay`
        whose ``websocket`` is set, or a :class:`Forward` whose
        ``websocket`` is true, once the upstream's ``101`` and its end were
        fed to the engine): take the ``101`` out of the engine and answer
        the client's upgrade with it (see :func:`_upgrade_headers`).  The
        connection then belongs to the WebSocket adapter
        (:class:`reel_core.WebSocketSession`), which starts from the
        :class:`Upgrade`; h11 is done."""
        answered: Headers = ()
        while not isinstance(event := self.engine.next_event(), Signal):
            if isinstance(event, ResponseHead):
                answered = normalize_headers(event.headers)
        head, trailing = self._reader.switch_protocols(tuple(_upgrade_headers(request, answered)))
        return Upgrade(head, trailing)

    @property
    def keep_alive(self) -> bool:
        """Whether the connection may carry another request."""
        return self._reader.keep_alive

    def error_response(self, error: RemoteProtocolError) -> bytes:
        """Bytes answering a client's protocol error (then close), or ``b""``
        when no answer can be sent any more."""
        if not self._reader.can_respond:
            return b""
        body = error_body("reel_bad_request", str(error))
        head = h11.Response(
            status_code=error.status,
            reason=_phrase(error.status),
            headers=[
                _JSON,
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        )
        try:
            return (
                self._reader.send(head)
                + self._reader.send(h11.Data(data=body))
                + self._reader.send(h11.EndOfMessage())
            )
        except LocalProtocolError:  # pragma: no cover - h11 refused mid-way
            return b""
