"""The h11-driven reader that builds :class:`~reel_core._http.Request` values
from the bytes a client sends, and serializes the answers.

The proxy's HTTP/1.1 adapter (:class:`reel_core.Session`) drives it; the
in-process bindings never parse bytes, so h11 is imported with this module
and not with the request values in :mod:`reel_core._http`.
"""

from __future__ import annotations

import enum
import re

import h11

from ._errors import LocalProtocolError, RemoteProtocolError
from ._hints import Hints
from ._http import Headers, Limits, Request, parsed_request

__all__ = ["ReaderSignal", "RequestReader"]

_HINTS = Hints()

#: Where an h11 error message starts quoting the client's bytes
#: (``illegal header line: bytearray(b'...')``, ``Illegal header value b'...'``).
_QUOTED = re.compile(r":?\s*(?:bytearray\()?b['\"].*", re.DOTALL)


def _remote_error(exc: h11.RemoteProtocolError) -> RemoteProtocolError:
    """h11's error without the bytes it quotes: a malformed header line may
    hold a credential, and the message is logged and answered."""
    message = _QUOTED.sub("", str(exc)).strip() or "malformed request"
    return RemoteProtocolError(message, exc.error_status_hint)


class ReaderSignal(enum.Enum):
    """What :meth:`RequestReader.next_request` returns when it has no request."""

    #: More bytes are needed to finish the request.
    NEED_DATA = "NEED_DATA"
    #: A response is due first (requests pipelined behind it wait).
    PAUSED = "PAUSED"
    #: The client closed its side.
    CLOSED = "CLOSED"
    #: The client waits for ``100 Continue`` before sending the body
    #: (``Expect: 100-continue``): send it with :meth:`RequestReader.send_continue`.
    CONTINUE = "CONTINUE"


class RequestReader:
    """Parses requests from raw bytes with an ``h11.Connection`` and
    serializes the answers, keeping h11's keep-alive cycle in step."""

    def __init__(self, limits: Limits, hints: Hints = _HINTS) -> None:
        self._limits = limits
        self._hints = hints
        self._conn = h11.Connection(h11.SERVER, max_incomplete_event_size=limits.max_head)
        self._head: h11.Request | None = None
        self._body: list[bytes] = []
        self._size = 0
        #: Whether ``CONTINUE`` was returned for the request being read.
        self._offered_continue = False
        #: The method of the last request, as sent, and its ``Connection``
        #: header values: h11 frames the response by them (and its version).
        self.method = b""
        self.connection: tuple[bytes, ...] = ()
        #: The headers of the request being read, normalized.
        self._headers: Headers = ()
        #: Set when the response went out whole without h11 (``sent_whole``):
        #: whether the connection is kept alive after it.
        self._sent_whole: bool | None = None

    @property
    def client_http_version(self) -> bytes | None:
        """The HTTP version of the request being answered, if any."""
        return self._conn.their_http_version

    @property
    def keep_alive(self) -> bool:
        """Whether the connection can carry another request after this one."""
        if self._sent_whole is not None:
            return self._sent_whole and self._conn.their_state is h11.DONE
        return self._conn.our_state is h11.DONE and self._conn.their_state is h11.DONE

    def receive_data(self, data: bytes) -> None:
        try:
            self._conn.receive_data(data)
        except h11.RemoteProtocolError as exc:
            raise _remote_error(exc) from None
        except RuntimeError as exc:  # data after EOF: a binding bug
            raise LocalProtocolError(str(exc)) from None

    def next_request(self) -> Request | ReaderSignal:
        while True:
            try:
                event = self._conn.next_event()
            except h11.RemoteProtocolError as exc:
                raise _remote_error(exc) from None
            if event is h11.NEED_DATA:
                if self._conn.they_are_waiting_for_100_continue and not self._offered_continue:
                    # curl, for one, waits a second for it before sending a
                    # body over 1 KB; the head was read and accepted.
                    self._offered_continue = True
                    return ReaderSignal.CONTINUE
                return ReaderSignal.NEED_DATA
            if event is h11.PAUSED:
                return ReaderSignal.PAUSED
            if isinstance(event, h11.ConnectionClosed):
                if self._head is not None:
                    raise RemoteProtocolError("client closed the connection mid-request")
                return ReaderSignal.CLOSED
            if isinstance(event, h11.Request):
                self._start(event)
            elif isinstance(event, h11.Data):
                self._size += len(event.data)
                if self._size > self._limits.max_body:
                    raise self._limits.body_too_large(None, self._hints.max_body)
                self._body.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                assert self._head is not None
                head, self._head = self._head, None
                body, self._body, self._size = b"".join(self._body), [], 0
                return parsed_request(head.method, head.target, self._headers, body)

    def _start(self, head: h11.Request) -> None:
        if head.method == b"CONNECT":
            raise RemoteProtocolError(
                "CONNECT is not supported: Reel is not a tunnelling proxy; point the client's "
                "base URL at Reel (e.g. OPENAI_BASE_URL=http://127.0.0.1:7878/v1) instead",
                405,
            )
        # h11 enforces max_head only on a head still incomplete in its buffer
        # (it refuses one of more than max_head + 1 bytes fed byte by byte);
        # a whole head that arrived in one read is measured here, so the
        # limit is the same however the bytes were split.
        self.method = head.method
        size = len(head.method) + len(head.target) + 14  # " ", " HTTP/1.1\r\n", "\r\n"
        # iterating h11's Headers is slow; its values come stripped
        headers = [(name.lower(), value) for name, value in head.headers.raw_items()]
        size += sum([len(name) + len(value) + 4 for name, value in headers])
        if size > self._limits.max_head + 1:
            raise RemoteProtocolError(
                f"request head of {size} bytes is over the {self._limits.max_head}-byte limit: "
                f"{self._hints.max_head}",
                431,
            )
        length = None
        connection = []
        for name, value in headers:
            if name == b"content-length":
                length = value
            elif name == b"connection":
                connection.append(value)
        if length is not None and int(length) > self._limits.max_body:
            raise self._limits.body_too_large(int(length), self._hints.max_body)
        self._head = head
        self._headers = tuple(headers)
        self.connection = tuple(connection)
        self._offered_continue = False

    def send_continue(self) -> bytes:
        """The bytes of the interim ``100 Continue`` answer, or ``b""`` when
        it is no longer due (the client started sending the body)."""
        if not self._conn.they_are_waiting_for_100_continue:
            return b""
        return self.send(h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue"))

    def send(self, event: h11.Event) -> bytes:
        if self._sent_whole is not None:
            raise LocalProtocolError("the response was sent whole; start the next cycle")
        try:
            return self._conn.send(event) or b""
        except h11.LocalProtocolError as exc:
            raise LocalProtocolError(str(exc)) from None

    @property
    def can_send_whole(self) -> bool:
        """Whether a whole response may go out without h11 now: the request
        is read to its end, nothing of the response was sent, and the client
        has not closed its side (h11 would then close after the response)."""
        conn = self._conn
        return (
            self._sent_whole is None
            and conn.our_state is h11.SEND_RESPONSE
            and conn.their_state in (h11.DONE, h11.MUST_CLOSE)
            and not conn.trailing_data[1]
        )

    def sent_whole(self, keep_alive: bool) -> None:
        """The whole response to the request went out without h11, as bytes
        h11 wrote for the same response to a request of the same shape
        (method, HTTP version, ``Connection`` headers; see
        :meth:`reel_core.Session.send_replay`).  ``keep_alive`` is what h11
        made of it: whether the connection carries another request.  h11's
        connection is not told: the next cycle starts on a new one, fed the
        bytes the client sent meanwhile."""
        if not self.can_send_whole:
            raise LocalProtocolError(
                "a whole response goes out only in place of the whole response"
            )
        self._sent_whole = keep_alive

    def switch_protocols(self, headers: Headers) -> tuple[bytes, bytes]:
        """Answer an upgrade request with ``101 Switching Protocols`` and
        ``headers``: the head's bytes, and the bytes the client sent after
        its request (the new protocol's first bytes).  h11 is done then."""
        data = self.send(
            h11.InformationalResponse(
                status_code=101, headers=list(headers), reason=b"Switching Protocols"
            )
        )
        return data, self._conn.trailing_data[0]

    def send_failed(self) -> None:
        self._conn.send_failed()

    @property
    def can_respond(self) -> bool:
        """Whether a response may still be sent on this connection."""
        return self._sent_whole is None and self._conn.our_state in (h11.IDLE, h11.SEND_RESPONSE)

    def start_next_cycle(self) -> None:
        if self._sent_whole is not None:
            if not self.keep_alive:
                raise LocalProtocolError("not in a reusable state")
            # what the client sent meanwhile (a pipelined request, its EOF)
            data, closed = self._conn.trailing_data
            self._conn = h11.Connection(h11.SERVER, max_incomplete_event_size=self._limits.max_head)
            self._sent_whole = None
            if data:
                self._conn.receive_data(data)
            if closed:
                self._conn.receive_data(b"")
            return
        try:
            self._conn.start_next_cycle()
        except h11.LocalProtocolError as exc:
            raise LocalProtocolError(str(exc)) from None
