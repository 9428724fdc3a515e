"""What the gRPC channels (sync and ``grpc.aio``) share: a call as the
core's request, a replayed answer as the call's outcome, and a forwarded
call's outcome fed to the core for the recording.

A call is the request the proxy sees on the wire: ``POST /pkg.Service/Method``,
``content-type: application/grpc``, the call's metadata as headers (a
``-bin`` key's value base64, as gRPC sends it) and the serialized request
message, length-prefixed, as the body.  Its answer is a ``200``, the initial
metadata as headers, each response message one frame, and the status in the
trailers (``grpc-status``, ``grpc-message`` percent-encoded).  So one
cassette serves the proxy and the in-process channels alike, and every
decision (match, miss, redaction, timing) is the engine's: this module only
translates between grpcio's values and the core's.
"""

from __future__ import annotations

import base64
import binascii
import json
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from reel_core import (
    Abort,
    Cut,
    EndOfResponse,
    Event,
    Frame,
    Miss,
    Request,
    Signal,
    Trailers,
    UpstreamError,
)
from reel_core.tools import (
    GrpcSplitter,
    grpc_code,
    grpc_frame,
    grpc_messages,
    percent_decode,
    percent_encode,
)

from ._inprocess import Decision, Player, Upstreaming
from ._options import Options

try:
    import grpc
except ImportError as exc:  # the grpc extra is not installed
    raise ImportError(
        "Reel's gRPC binding needs grpcio and protobuf: pip install 'reel-llm[grpc]'"
    ) from exc

__all__ = [
    "CallFeed",
    "Deserializer",
    "Metadata",
    "Outcome",
    "Replayed",
    "Serializer",
    "broke_off",
    "call_request",
    "refuse_upstream",
    "replayed",
    "settled",
    "status",
    "unary",
    "unframed",
    "within",
]

#: A call's metadata as grpcio hands it: ``(key, value)`` pairs, a ``-bin``
#: key's value bytes.
Metadata = tuple[tuple[str, "str | bytes"], ...]

#: A method's request serializer and response deserializer, as the stubs
#: give them (``None``: bytes as they are).
Serializer = Callable[[Any], bytes] | None
Deserializer = Callable[[bytes], Any] | None

#: Response headers that are gRPC's own framing, not the call's initial metadata.
_FRAMING = frozenset({b"content-type", b"content-length", b"te", b"trailer"})

#: The status codes by number (``grpc.StatusCode`` values are ``(number, name)``).
_CODES = {code.value[0]: code for code in grpc.StatusCode}

#: How gRPC reads an HTTP status other than 200 (the spec's
#: "HTTP to gRPC Status Code Mapping"): a recorded answer of a gateway in
#: front of the server.  An answer Reel makes itself to a call is a gRPC
#: status already (``200`` and the trailers: :func:`reel_core.tools.own_answer`).
_HTTP_CODES = {
    400: grpc.StatusCode.INTERNAL,
    401: grpc.StatusCode.UNAUTHENTICATED,
    403: grpc.StatusCode.PERMISSION_DENIED,
    404: grpc.StatusCode.UNIMPLEMENTED,
    429: grpc.StatusCode.UNAVAILABLE,
    502: grpc.StatusCode.UNAVAILABLE,
    503: grpc.StatusCode.UNAVAILABLE,
    504: grpc.StatusCode.UNAVAILABLE,
}


def refuse_upstream(options: Options) -> None:
    """A gRPC channel forwards through the channel it wraps: ``upstream=``
    has no meaning for it."""
    if options.upstream is not None:
        raise TypeError(
            "a Reel gRPC channel forwards through the channel it wraps: "
            f"upstream= is not taken (got {options.upstream!r})"
        )


def _headers(metadata: Iterable[tuple[str, str | bytes]] | None) -> list[tuple[bytes, bytes]]:
    """A call's metadata as the headers it goes out in."""
    headers = []
    for key, value in metadata or ():
        name = key.lower().encode("ascii")
        if name.endswith(b"-bin"):
            raw = value if isinstance(value, bytes) else value.encode("utf-8")
            headers.append((name, base64.b64encode(raw).rstrip(b"=")))
        else:
            text = value.decode("latin-1") if isinstance(value, bytes) else value
            headers.append((name, text.encode("utf-8")))
    return headers


def _metadata(headers: Iterable[tuple[bytes, bytes]]) -> Metadata:
    """Headers read back as metadata (a ``-bin`` value decoded; one that is
    no base64 kept as its bytes)."""
    pairs: list[tuple[str, str | bytes]] = []
    for name, value in headers:
        key = name.decode("latin-1")
        if name.endswith(b"-bin"):
            try:
                pairs.append((key, base64.b64decode(value + b"=" * (-len(value) % 4))))
            except binascii.Error:
                pairs.append((key, value))
        else:
            pairs.append((key, value.decode("utf-8", "replace")))
    return tuple(pairs)


def call_request(
    method: str,
    metadata: Iterable[tuple[str, str | bytes]] | None,
    message: bytes | Sequence[bytes],
    added: Metadata = (),
) -> Request:
    """The core's request for a call of ``method`` (``/pkg.Service/Method``)
    with the call's ``metadata``, then what the wrapped channel ``added``
    to it (its interceptors' and call credentials' metadata, which goes
    out on the wire after the call's); its body ``message``, or each of a
    sequence of messages (a client stream), length-prefixed."""
    headers = [
        (b"content-type", b"application/grpc"),
        (b"te", b"trailers"),
        *_headers(metadata),
        *_headers(added),
    ]
    messages = [message] if isinstance(message, bytes) else message
    return Request("POST", method, tuple(headers), b"".join(map(grpc_frame, messages)))


@dataclass(frozen=True)
class Outcome:
    """How a call ended, as grpcio reports it."""

    code: grpc.StatusCode
    details: str
    trailing: Metadata = ()

    @property
    def ok(self) -> bool:
        return self.code is grpc.StatusCode.OK


@dataclass(frozen=True)
class Replayed:
    """A replayed call: its initial metadata, its messages (serialized,
    each with its deadline in seconds after the call, ``None``: at once),
    when it ends, and how."""

    initial: Metadata
    messages: tuple[tuple[float | None, bytes], ...]
    end: float | None
    outcome: Outcome


def status(trailers: Sequence[tuple[bytes, bytes]]) -> tuple[Outcome, bool]:
    """The outcome the trailers say, and whether they had a status."""
    found: dict[bytes, bytes] = {}
    rest = []
    for name, value in trailers:
        if name in (b"grpc-status", b"grpc-message"):
            found[name] = value
        else:
            rest.append((name, value))
    status = found.get(b"grpc-status")
    code = _CODES.get(int(status)) if status is not None and status.isdigit() else None
    details = percent_decode(found.get(b"grpc-message", b""))
    if code is None:
        said = "no grpc-status" if status is None else f"grpc-status {status!r}"
        return Outcome(grpc.StatusCode.UNKNOWN, f"the recorded call has {said}"), False
    return Outcome(code, details, _metadata(rest)), True


def _refusal(status: int, body: bytes) -> Outcome:
    """A non-200 answer (one recorded from a gateway in front of the
    server: Reel's own answers to a call are gRPC statuses) as gRPC reads
    it, its JSON error's message the details."""
    code = _HTTP_CODES.get(status, grpc.StatusCode.UNKNOWN)
    text = body.decode("utf-8", "replace")
    try:
        error = json.loads(text).get("error", {})
        text = error.get("message", text) if isinstance(error, dict) else text
    except (ValueError, AttributeError):
        pass
    return Outcome(code, f"HTTP {status}: {text}")


def unframed(whole: bytes, number: int) -> bytes | Outcome:
    """A recorded message (``whole``: its prefix included), the
    ``number``-th of its call, as the caller gets it, or the error a
    compressed one replays as (kept as it came: grpcio could not read it)."""
    if whole[0]:
        return Outcome(
            grpc.StatusCode.INTERNAL,
            f"Reel: message {number} of the recorded call is compressed "
            "(grpc-encoding): the in-process channel replays uncompressed messages",
        )
    (message,) = grpc_messages(whole, sys.maxsize)
    return message


def broke_off(cut: Cut) -> Outcome:
    """How a recorded call that broke off ends: with the status the core
    gives what broke it (:func:`~reel_core.tools.grpc_code`, as the proxy
    ends such a call)."""
    return Outcome(
        _CODES[grpc_code(502, cut.error)],
        f"Reel: the recorded call broke off ({cut.error}: {cut.detail})",
    )


def replayed(decision: Decision) -> Replayed:
    """The call ``decision`` answers: a replay, a miss (``NOT_FOUND``, the
    miss report whole in the details) or a refusal."""
    head = decision.head
    initial = _metadata(
        (k, v) for k, v in head.headers if k not in _FRAMING and not k.startswith(b"grpc-")
    )
    # what was recorded is replayed, however large (the limit was the recording's)
    splitter = GrpcSplitter(max_message=sys.maxsize)
    messages: list[tuple[float | None, bytes]] = []
    body: list[bytes] = []
    broken: Outcome | None = None  # a recording grpcio could not have read
    outcome: Outcome | None = None
    end: float | None = None
    for event in decision.events:
        if isinstance(event, Frame):
            body.append(event.data)
            for whole in splitter.feed(event.data):
                message = unframed(whole, len(messages) + 1)
                if isinstance(message, Outcome):
                    broken = broken or message
                    message = whole[5:]
                messages.append((event.at, message))
        elif isinstance(event, Trailers):
            outcome, _ = status(event.headers)
        elif isinstance(event, Cut):
            end = event.at
            outcome = broke_off(event)
        elif isinstance(event, EndOfResponse):
            end = event.at
    if splitter.close() and broken is None:
        broken = Outcome(
            grpc.StatusCode.INTERNAL,
            "Reel: the recorded call ends inside a message (its last frame is not whole)",
        )
    if head.status != 200:
        outcome, messages = _refusal(head.status, b"".join(body)), []
    elif broken is not None:
        outcome = broken
    elif outcome is None:
        outcome, _ = status(())
    if decision.miss is not None:  # the report whole, not its one line
        outcome = Outcome(grpc.StatusCode.NOT_FOUND, decision.miss.render(), outcome.trailing)
    return Replayed(initial, tuple(messages), end, outcome)


def settled(decision: Decision, player: Player) -> Decision:
    """``decision`` for a call whose client side is whole when it is
    decided (a unary request: one message, then its end): a session's
    replay (:attr:`Decision.session`) played out at once, its events (each
    at its deadline after now) those of a plain replay; a client that left
    the recording (``NOT_FOUND``) as the miss it is, noted in the run log."""
    session = decision.session
    if session is None:
        return decision
    events: list[Event] = []
    with player.lock:  # a lease of the shared cassette follows the messages
        session.open(time.monotonic())
        session.client_end(time.monotonic())
        while not isinstance(event := session.next_event(), Signal):
            events.append(event)
    miss = session.miss
    if miss is None:
        return replace(decision, events=tuple(events), body=None, session=None)
    player.runlog.missed(miss)
    assert decision.event is not None  # a session is a replay's
    found = Miss(decision.event.request, miss)
    return replace(decision, event=found, events=tuple(events), body=None, session=None)


def unary(replay: Replayed, method: str) -> Replayed:
    """``replay`` as a unary call's: one message, or an ``INTERNAL`` error
    (a recording of another kind of call: nothing else is a right answer)."""
    count = len(replay.messages)
    if not replay.outcome.ok or count == 1:
        return replay
    wrong = Outcome(
        grpc.StatusCode.INTERNAL,
        f"Reel: the recorded unary call {method} has {count} messages, not 1",
    )
    return Replayed(replay.initial, (), replay.end, wrong)


def within(replay: Replayed, timeout: float | None) -> Replayed:
    """``replay`` as a caller with a deadline ``timeout`` seconds away sees
    it: what would come after the deadline never comes, and the call ends
    ``DEADLINE_EXCEEDED`` at it, as grpcio's own deadline ends it."""
    if timeout is None:
        return replay
    late = (replay.end or 0.0) > timeout or any((at or 0.0) > timeout for at, _ in replay.messages)
    if not late:
        return replay
    kept = tuple((at, message) for at, message in replay.messages if (at or 0.0) <= timeout)
    expired = Outcome(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
    return Replayed(replay.initial, kept, timeout, expired)


#: Statuses grpcio reports for a call that never reached the server: no
#: answer to record (the proxy, forwarding the call, would have seen the
#: same failure and recorded nothing either).
_FAILURES = {
    grpc.StatusCode.UNAVAILABLE: UpstreamError.REFUSED,
    grpc.StatusCode.DEADLINE_EXCEEDED: UpstreamError.TIMEOUT,
}


class CallFeed:
    """A forwarded call's answer fed to its engine (through the
    :class:`Upstreaming` that holds it): the initial metadata, each message
    as it comes, then the status as trailers."""

    def __init__(self, upstreaming: Upstreaming, *, whole: bool = False) -> None:
        self._up = upstreaming
        #: The call's conversation, when the core may store it as a session:
        #: fed from the caller's thread and grpcio's request thread, in the
        #: order (and at the times) the lock lets them by.
        self._recorder = upstreaming.recorder
        self._lock = threading.Lock()
        self._headed = False
        self._ended = False
        if whole:  # its one message went with the head, then the client's end
            self.client_end()

    def client_message(self, data: bytes) -> None:
        """A later client message, as it goes upstream."""
        if self._recorder is not None:
            with self._lock:
                self._recorder.client_message(grpc_frame(data), time.monotonic())

    def client_end(self) -> None:
        """The client ended its stream (it sends no more)."""
        if self._recorder is not None:
            with self._lock:
                self._recorder.client_end(time.monotonic())

    def _over(self) -> None:
        if self._recorder is not None:
            with self._lock:
                self._recorder.ended(time.monotonic())

    def head(self, initial: Iterable[tuple[str, str | bytes]] | None) -> None:
        if not self._headed:
            self._headed = True
            self._up.head(200, [(b"content-type", b"application/grpc"), *_headers(initial)])

    def message(self, data: bytes) -> None:
        framed = grpc_frame(data)
        if self._recorder is not None:
            with self._lock:
                self._recorder.server_message(framed, time.monotonic())
        self._up.data(framed)

    def end(
        self,
        initial: Iterable[tuple[str, str | bytes]] | None,
        code: grpc.StatusCode,
        details: str | None,
        trailing: Iterable[tuple[str, str | bytes]] | None,
    ) -> None:
        """The call ended with ``code``: recorded as its trailers, or, for
        a call that never reached the server, as the failure it was."""
        if self._ended:
            return
        self._ended = True
        self._over()
        failure = _FAILURES.get(code)
        if failure is not None and not self._headed:
            self._up.error(failure, f"gRPC {code.name}: {details or ''}")
            return
        if code is grpc.StatusCode.CANCELLED:
            self._up.error(Abort.CLIENT_CLOSED, "the caller cancelled the call")
            return
        self.head(initial)
        trailers = [(b"grpc-status", b"%d" % code.value[0])]
        if details:
            trailers.append((b"grpc-message", percent_encode(details)))
        self._up.trailers([*trailers, *_headers(trailing)])
        self._up.end()

    def ended_by(self, call: Any) -> None:
        """The call ended as ``call`` (a ``grpc.Call``, or the ``RpcError``
        it raised) says."""
        self.end(call.initial_metadata(), call.code(), call.details(), call.trailing_metadata())

    def left(self, why: str) -> None:
        """The caller stopped before the call ended (it cancelled, or
        dropped the stream): nothing more is read."""
        if not self._ended:
            self._ended = True
            self._over()
            self._up.error(Abort.CLIENT_CLOSED, why)

    def failed(self, exc: BaseException) -> None:
        """Anything else that ended the call (grpcio refused its arguments)."""
        if not self._ended:
            self._ended = True
            self._over()
            self._up.error(UpstreamError.PROTOCOL, f"{type(exc).__name__}: {exc}")
