"""The WebSocket adapter: an upgraded connection's bytes in, bytes out.

:class:`WebSocketSession` is a sibling of the HTTP adapters, as wsproto's
connection is of its handshake: it knows the :class:`~reel_core.Engine`
and the :class:`~reel_core.Upgrade` an HTTP adapter made, nothing of that
adapter.  It takes a client connection over once the engine decided an upgrade
``GET`` (a :class:`~reel_core.Replay` whose ``websocket`` is set, or a
:class:`~reel_core.Forward` whose ``websocket`` is true).  wsproto's
post-handshake :class:`wsproto.connection.Connection` frames and unframes:
the server side towards the client, the client side towards the upstream.
Every decision is :mod:`reel_core._websocket`'s; this module only moves
whole messages between wsproto and it.  No socket, no clock: the binding
feeds bytes with ``now`` readings and writes what comes back.

The handshake is the HTTP adapter's (HTTP/1.1: :meth:`reel_core.Session.upgrade`
writes the ``101``, a ``Sec-WebSocket-Accept`` computed from the client's
own key); its :class:`~reel_core.Upgrade` holds the answer's bytes, which
:meth:`WebSocketSession.start` hands out first, and the bytes the client
sent after its ``GET``, the first WebSocket bytes.  No extension is
negotiated with either side (the upstream request drops
``Sec-WebSocket-Extensions``), so messages cross as they are.

Replay, for a binding::

    ws = WebSocketSession.replay(engine, session.upgrade(decision.request), decision)
    write(ws.start(now).to_client)  # the 101 (and answers to early pings)
    # reader: out = ws.receive_client(data, now); write(out.to_client)
    # writer: step = ws.next_step() until WebSocketSignal.DONE; on NEED_CLIENT
    #         wait for the reader; else sleep until start + step.until, then
    #         write(ws.send(step)), and after a step.last close the connection.

Record (and live), for a binding::

    handshake = UpstreamHandshake(decision.request, host, decision.url)
    send_upstream(handshake.data)
    answer = handshake.receive_data(upstream_bytes)   # until not None
    if answer.status != 101: feed it to the engine as any response
    engine.upstream_head(101, answer.headers, mono=now, sent_at=sent_at)
    engine.upstream_end(mono=now)          # the 101 is the upgrade's answer
    upgrade = session.upgrade(decision.request)
    ws = WebSocketSession.relay(engine, upgrade, decision, answer, mono=now)
    out = ws.start(now)                    # to_client: the 101, ...
    # as bytes come: out = ws.receive_client(data, now) / ws.receive_upstream(data, now)
    # (b"" for a connection that ended); write out.to_client / out.to_upstream;
    # out.close: close both connections.  Once ws.closed: ws.record().
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import h11
from wsproto.connection import Connection, ConnectionState, ConnectionType
from wsproto.events import (
    BytesMessage,
    CloseConnection,
    Ping,
    TextMessage,
)
from wsproto.utilities import LocalProtocolError as WSLocalProtocolError

from ._engine import Engine
from ._errors import LocalProtocolError, RemoteProtocolError
from ._events import Forward, Recorded, Replay, Upgrade
from ._http import HOP_BY_HOP, Headers, Request
from ._timing import Timing
from ._verdict import Verdict, websocket_label
from ._websocket import (
    WebSocketMiss,
    WebSocketRecorder,
    WebSocketReplay,
    WebSocketSignal,
    WebSocketStep,
)

__all__ = ["UpstreamAnswer", "UpstreamHandshake", "WebSocketOutput", "WebSocketSession"]

_Msg = TextMessage | BytesMessage
#: Close codes that are never sent on the wire (RFC 6455, 7.4.1): stored as none.
_NOT_SENT = frozenset({1005, 1006, 1015})


@dataclass(frozen=True)
class WebSocketOutput:
    """What to write after feeding the adapter: bytes for the client, bytes
    for the upstream, and whether to close both connections after them."""

    to_client: bytes = b""
    to_upstream: bytes = b""
    close: bool = False


@dataclass(frozen=True)
class UpstreamAnswer:
    """The upstream's answer to the upgrade: its head, and either the first
    WebSocket bytes (``101``) or the body of a refusal (any other status)."""

    status: int
    headers: Headers
    #: After a 101: the bytes that followed it.  Else: the whole body.
    data: bytes = b""


class UpstreamHandshake:
    """The upgrade request sent upstream, and its answer read (h11, as a
    client).  The client's headers go as they came (its key too) but for
    the hop's own and ``Sec-WebSocket-Extensions``; ``host`` replaces its
    ``Host``.  ``url`` is where the engine routed the upgrade
    (:attr:`Forward.url`): its path and query are the target sent, so a
    base URL with a path (``--upstream https://host/prefix``) keeps its
    prefix; without it the client's own target goes."""

    def __init__(self, request: Request, host: str, url: str | None = None) -> None:
        self._conn = h11.Connection(h11.CLIENT)
        headers: list[tuple[bytes, bytes]] = [(b"host", host.encode("idna"))]
        for name, value in request.headers:
            if name in HOP_BY_HOP or name in (b"host", b"sec-websocket-extensions"):
                continue
            headers.append((name, value))
        headers += [(b"connection", b"Upgrade"), (b"upgrade", b"websocket")]
        #: The bytes to send upstream.
        self.data = self._conn.send(
            h11.Request(method=b"GET", target=_target(request, url), headers=headers)
        ) + (self._conn.send(h11.EndOfMessage()) or b"")
        self._head: h11.Response | None = None
        self._body: list[bytes] = []

    def receive_data(self, data: bytes) -> UpstreamAnswer | None:
        """Feed the upstream's bytes (``b""``: it closed); the answer once
        it is whole.  Raises :class:`RemoteProtocolError` (502) on bytes
        that are no HTTP answer, or an end before one."""
        try:
            self._conn.receive_data(data)
            while True:
                event = self._conn.next_event()
                if event is h11.NEED_DATA:
                    return None
                if isinstance(event, h11.InformationalResponse) and event.status_code == 101:
                    trailing = self._conn.trailing_data[0]
                    return UpstreamAnswer(101, tuple(event.headers.raw_items()), trailing)
                if isinstance(event, h11.Response):
                    self._head = event
                elif isinstance(event, h11.Data):
                    self._body.append(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage):
                    assert self._head is not None
                    head = tuple(self._head.headers.raw_items())
                    return UpstreamAnswer(self._head.status_code, head, b"".join(self._body))
        except h11.RemoteProtocolError as exc:
            raise RemoteProtocolError(f"the upstream's answer is not HTTP: {exc}", 502) from None


def _target(request: Request, url: str | None) -> bytes:
    """The request target of the upgrade sent upstream (see
    :class:`UpstreamHandshake`)."""
    if url is None:
        return request.target.encode()
    parts = urlsplit(url)
    return ((parts.path or "/") + (f"?{parts.query}" if parts.query else "")).encode()


class _Peer:
    """One side's wsproto connection: frames in, message pieces out."""

    def __init__(self, kind: ConnectionType, trailing: bytes = b"") -> None:
        self.conn = Connection(kind, extensions=[], trailing_data=trailing)
        self.out: list[bytes] = []
        self._parts: list[bytes] = []

    def send(self, event: _Msg | CloseConnection) -> None:
        state = self.conn.state
        if state is ConnectionState.OPEN or (
            state is ConnectionState.REMOTE_CLOSING and isinstance(event, CloseConnection)
        ):
            self.out.append(self.conn.send(event))

    def take(self) -> bytes:
        data, self.out = b"".join(self.out), []
        return data

    def events(
        self,
        data: bytes | None,
        piece: Callable[[_Msg, bytes | None], None],
        close: Callable[[int | None, str], None],
    ) -> None:
        """Feed ``data`` (``None``: the connection ended), answer pings, and
        report each message piece (with the whole message when it is its
        last) and a close."""
        if data is not None and self.conn.state is ConnectionState.CLOSED:
            return  # after the close: nothing more is read
        self.conn.receive_data(data)
        for event in self.conn.events():
            if isinstance(event, Ping):
                self.send_pong(event)
            elif isinstance(event, (TextMessage, BytesMessage)):
                raw = event.data.encode() if isinstance(event, TextMessage) else event.data
                self._parts.append(bytes(raw))
                whole = None
                if event.message_finished:
                    whole, self._parts = b"".join(self._parts), []
                piece(event, whole)
            elif isinstance(event, CloseConnection):
                if self.conn.state is ConnectionState.REMOTE_CLOSING:
                    self.out.append(self.conn.send(event.response()))
                code = None if event.code in _NOT_SENT else event.code
                close(code, event.reason or "")

    def send_pong(self, event: Ping) -> None:
        self.out.append(self.conn.send(event.response()))


class WebSocketSession:
    """One upgraded client connection: a replay (:meth:`replay`) or a relay
    to the upstream, recorded or not (:meth:`relay`).  See the module
    docstring for how a binding drives it."""

    def __init__(
        self,
        engine: Engine,
        upgrade: Upgrade,
        *,
        replay: WebSocketReplay | None = None,
        upstream: bytes | None = None,
        recorder: WebSocketRecorder | None = None,
    ) -> None:
        self.engine = engine
        self._upgrade = upgrade
        self._replay = replay
        self._upstream_trailing = upstream
        self._client: _Peer | None = None
        self._upstream: _Peer | None = None
        self._recorder = recorder
        self._ended = False
        self._closing: tuple[int | None, str] | None = None

    # -- construction ----------------------------------------------------------------

    @classmethod
    def replay(
        cls, engine: Engine, upgrade: Upgrade, decision: Replay, *, timing: Timing | None = None
    ) -> WebSocketSession:
        """Take over after a :class:`Replay` whose ``websocket`` is set."""
        if decision.websocket is None:
            raise LocalProtocolError("this replay is not a WebSocket session's")
        script = WebSocketReplay(
            decision.websocket,
            timing=timing if timing is not None else engine.config.timing,
            match=engine.match,
            provider=decision.provider,
            interaction_id=decision.interaction_id,
            lease=decision.lease,
            redactor=engine.redactor,
        )
        return cls(engine, upgrade, replay=script)

    @classmethod
    def relay(
        cls,
        engine: Engine,
        upgrade: Upgrade,
        decision: Forward,
        answer: UpstreamAnswer,
        *,
        mono: float,
    ) -> WebSocketSession:
        """Take over after a :class:`Forward` whose ``websocket`` is true,
        once the upstream answered 101 (``answer``) at monotonic time
        ``mono``, which the
        engine was fed (its head and end) before the HTTP adapter made the
        ``upgrade`` of it."""
        if answer.status != 101:
            raise LocalProtocolError("relay() takes the upstream's 101: feed any other answer")
        recorder = None
        if decision.record:  # the upgrade's redactor: its credential values too
            recorder = WebSocketRecorder(decision.request, engine.redactor, opened=mono)
        return cls(engine, upgrade, upstream=answer.data, recorder=recorder)

    # -- the connection ---------------------------------------------------------------

    def start(self, now: float) -> WebSocketOutput:
        """The upgrade's answer goes to the client at ``now``: its bytes, and
        what the bytes already read from either side call for."""
        head, trailing = self._upgrade.head, self._upgrade.trailing
        self._client = _Peer(ConnectionType.SERVER)
        if self._replay is not None:
            self._replay.open(now)
        else:
            self._upstream = _Peer(ConnectionType.CLIENT)
        out = self.receive_client(trailing, now) if trailing else WebSocketOutput()
        if self._upstream_trailing:
            more = self.receive_upstream(self._upstream_trailing, now)
            out = WebSocketOutput(
                out.to_client + more.to_client, out.to_upstream + more.to_upstream, more.close
            )
        return WebSocketOutput(head + out.to_client, out.to_upstream, out.close)

    @property
    def closed(self) -> bool:
        """Whether the session has ended (a close from either side, or a drop)."""
        return self._ended

    def _peers(self) -> tuple[_Peer, _Peer | None]:
        if self._client is None:
            raise LocalProtocolError("call start() first")
        return self._client, self._upstream

    def _output(self, close: bool = False) -> WebSocketOutput:
        client, upstream = self._peers()
        return WebSocketOutput(
            client.take(), upstream.take() if upstream is not None else b"", close
        )

    def receive_client(self, data: bytes, now: float) -> WebSocketOutput:
        """The client's bytes at ``now`` (``b""``: its connection ended)."""
        client, upstream = self._peers()
        dropped = [False]

        def piece(event: _Msg, whole: bytes | None) -> None:
            binary = isinstance(event, BytesMessage)
            if self._replay is not None:
                if whole is not None:
                    self._replay.client_message(whole, binary, now)
                return
            assert upstream is not None
            upstream.send(event)
            if whole is not None and self._recorder is not None:
                self._recorder.client_message(whole, binary, now)

        def close(code: int | None, reason: str) -> None:
            self._end(code, reason, "client-dropped" if data == b"" else "client", now)
            if data == b"":
                dropped[0] = True
                if upstream is not None:  # tell the upstream the client went away
                    upstream.send(CloseConnection(1001, "the client dropped the connection"))
            elif upstream is not None:
                upstream.send(CloseConnection(code or 1000, reason))

        client.events(data or None, piece, close)
        return self._output(close=dropped[0])

    def receive_upstream(self, data: bytes, now: float) -> WebSocketOutput:
        """The upstream's bytes at ``now`` (``b""``: its connection ended)."""
        client, upstream = self._peers()
        if upstream is None:
            raise LocalProtocolError("a replay has no upstream")
        dropped = [False]

        def piece(event: _Msg, whole: bytes | None) -> None:
            client.send(event)
            if whole is not None and self._recorder is not None:
                self._recorder.server_message(whole, isinstance(event, BytesMessage), now)

        def close(code: int | None, reason: str) -> None:
            if data == b"":
                dropped[0] = True
                self._end(None, "", "upstream-dropped", now)
            else:
                self._end(code, reason, "server", now)
                client.send(CloseConnection(code or 1000, reason))

        upstream.events(data or None, piece, close)
        return self._output(close=dropped[0])

    def _end(self, code: int | None, reason: str, by: str, now: float) -> None:
        if not self._ended:
            self._ended = True
            if self._recorder is not None:
                self._recorder.closed(code, reason, by, now)
            if self._replay is not None:
                self._replay.client_closed(code, reason, now=now)

    # -- replay -----------------------------------------------------------------------

    def next_step(self) -> WebSocketStep | WebSocketSignal:
        """A replay's next step (see :class:`WebSocketReplay`)."""
        if self._replay is None:
            raise LocalProtocolError("next_step() is for a replay")
        return self._replay.next_step()

    def send(self, step: WebSocketStep) -> bytes:
        """The bytes of a replay's step for the client (``b""`` for a drop:
        close the connection without a close frame)."""
        client, _ = self._peers()
        if step.drop:
            self._ended = True
            return b""
        if step.close is not None:
            code, reason = step.close
            self._ended = True
            try:
                return client.conn.send(CloseConnection(code or 1000, reason))
            except WSLocalProtocolError:  # the client closed first
                return b""
        if client.conn.state is not ConnectionState.OPEN:
            return b""
        event: _Msg = BytesMessage(step.data) if step.binary else TextMessage(step.data.decode())
        return client.conn.send(event)

    @property
    def miss(self) -> WebSocketMiss | None:
        """Why a replay stopped on a client message, if it did."""
        return self._replay.miss if self._replay is not None else None

    @property
    def outcome(self) -> str | None:
        """How a replay ended, in words (``None`` while it runs, and for a relay)."""
        return self._replay.outcome if self._replay is not None else None

    @property
    def verdict(self) -> Verdict:
        """What happened to the session (see :mod:`reel_core._verdict`):
        its upgrade's (``hit``, ``recorded``, ``live``), or ``miss`` for a
        replay that stopped on a client message it does not have."""
        if self.miss is not None:
            return Verdict.MISS
        verdict = self.engine.verdict
        assert verdict is not None  # a session follows a decision
        return verdict

    @property
    def label(self) -> str:
        """The words a log line says for the session: its upgrade's label
        and how a replay ended (``miss`` for one that stopped early)."""
        return websocket_label(self.engine.label, self.miss is not None, self.outcome)

    # -- record -----------------------------------------------------------------------

    def record(self, *, mono: float | None = None) -> Recorded | None:
        """Store the recorded session (once it ended; a session not ended is
        stored as dropped by the client at monotonic time ``mono``); the
        line to append.
        ``None`` for a replay or a live relay."""
        if self._recorder is None:
            return None
        recorder, self._recorder = self._recorder, None
        pending = self.engine.take_recording()
        assert pending is not None  # the binding fed the 101 and its end
        return pending.amend(lambda upgrade: recorder.finish(upgrade, mono=mono)).record()
