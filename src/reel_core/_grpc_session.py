"""gRPC sessions: client-streaming and bidirectional calls, message by message.

Theory of operation.  A unary or server-streaming gRPC call is an ordinary
exchange: its request is whole when the client ends its stream, and its
response replays on its offsets.  A call whose client goes on sending
while the server answers cannot wait for the request's end, and its
answers may depend on each message; it is recorded as a *session*, the
way a WebSocket session is (:mod:`reel_core._websocket`).  Nothing tells a
proxy which kind a method is (no descriptor is needed), so the
conversation decides, in one place,
:func:`~reel_core._grpc_rule.is_grpc_session`: a call is a
session when its client sent more than one message, or had not ended its
stream when the server answered (a message, or the call's end).  The
replay side follows what the recording side decided: a call plays as a
session when the recordings of its path are sessions
(:func:`~reel_core._grpc_rule.plays_as_session`); it is then decided on
its first message, and the rest is gated.

- :class:`GrpcCallRecorder` is fed each whole message as it crossed
  (``client_message``, ``server_message``: prefix included), the client's
  END_STREAM (``client_end``) and the call's end (``ended``), with ``now``
  readings.  :meth:`GrpcCallRecorder.finish` turns the engine's recording
  of the call into the session's (a call that is no session, or was
  answered with no gRPC, is left as the engine recorded it): the
  request's body is the first client
  message (what the call is keyed and matched on, as a unary call's), the
  response keeps its head and trailers, and :class:`~reel_core._grpc_log.GrpcLog`
  holds the conversation, every message scrubbed as a unit by the
  exchange's redactor (:func:`~reel_core._grpc_log.scrub_message`).
- :class:`GrpcCallReplay` plays a session back as the engine's events
  (``Frame``, ``Trailers``, ``EndOfResponse``, ``Cut``), each with its
  deadline in seconds after :meth:`GrpcCallReplay.open` (timing mode
  applied), **gated by the client**: a server message recorded after
  client message *k* (or after the client's end) is not handed out before
  the client sent it, and its deadline counts from when it came.  Each
  client message is compared with the recorded one (its bytes; the JSON
  values a ``decode`` seam reads, outside exact mode).  A mismatch, one
  message more than recorded, or an end before the recorded messages
  ends the call there: what the matching messages released still goes
  out, then ``grpc-status: 5`` (NOT_FOUND) with the miss report's line in
  ``grpc-message``; nothing recorded after that point is handed out,
  and :attr:`GrpcCallReplay.miss` is the :class:`~reel_core.MissReport`.
  With a lease (several recordings share the first message), the
  recording played follows the client's messages (:mod:`reel_core._ws_pool`).
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ._engine import Engine
from ._errors import LocalProtocolError
from ._events import Cut, EndOfResponse, Event, Frame, Recorded, Signal, Trailers
from ._exchange import interaction_id
from ._grpc_log import GRPC_SESSION, GrpcLog, GrpcMessage, scrub_message
from ._grpc_rule import is_grpc_session
from ._hints import Hints
from ._interaction import Interaction, StreamCut
from ._match import FieldDiff, MatchConfig, MatchMode, canonical_body
from ._miss import Closest, MissReport, body_diff
from ._own_answers import grpc_miss_answer
from ._redact import Redactor
from ._timing import Timing
from ._ws_pool import WebSocketLease

if TYPE_CHECKING:
    from ._cassette import Cassette
    from ._events import Replay

__all__ = ["Decode", "GrpcCallRecorder", "GrpcCallReplay", "session_miss"]

#: Reads a gRPC message (as on the wire, its 5-byte prefix included) as a
#: JSON value; raises ``ValueError`` for bytes it cannot read.
Decode = Callable[[bytes], object]
#: Builds a session's miss report: its reason, its diffs, the recording
#: left, and the share of its client messages the call matched.
Report = Callable[[str, tuple[FieldDiff, ...], Interaction, float], MissReport]


def _ms(seconds: float) -> float:
    return round(max(seconds, 0.0) * 1000.0, 3)


# -- recording -------------------------------------------------------------------


class GrpcCallRecorder:
    """Keeps what crossed in a forwarded gRPC call, then builds its
    recording (:meth:`finish`).  ``opened`` is when the call started (over
    HTTP/2, :meth:`~reel_core.tools.H2Session.started_at`: its first
    message came); every offset counts from it.  ``redactor`` is the
    exchange's (``engine.redactor`` once the call was decided: it scrubs
    the request's credential values too).  The upstream's head, messages,
    trailers and end are fed to the engine as for any forward (they are
    passed on from there, and its recording keeps the status, headers,
    trailers and a cut); the recorder keeps the order and the offsets."""

    def __init__(self, redactor: Redactor, *, opened: float) -> None:
        self.redactor = redactor
        self.opened = opened
        self._messages: list[GrpcMessage] = []
        self._last = 0.0
        self._client_ended = False
        self._ended = False

    def _at(self, now: float) -> float:
        self._last = max(self._last, _ms(now - self.opened))
        return self._last

    def client_message(self, data: bytes, now: float) -> None:
        """A whole message from the client (its prefix included)."""
        if self._client_ended:
            raise LocalProtocolError("a client message after the client ended its stream")
        if not self._ended:
            self._messages.append(GrpcMessage("client", self._at(now), bytes(data)))

    def client_end(self, now: float) -> None:
        """The client ended its stream (END_STREAM: it sends no more)."""
        if not self._client_ended and not self._ended:
            self._messages.append(GrpcMessage("client", self._at(now), end=True))
        self._client_ended = True

    def server_message(self, data: bytes, now: float) -> None:
        """A whole message from the upstream (its prefix included)."""
        if not self._ended:
            self._messages.append(GrpcMessage("server", self._at(now), bytes(data)))

    def ended(self, now: float) -> None:
        """The call ended (the upstream's trailers, or its stream broken
        off); what comes after is not kept.  The first end counts."""
        if not self._ended:
            self._messages.append(GrpcMessage("server", self._at(now), end=True))
            self._ended = True

    @property
    def session(self) -> bool:
        """Whether the call, so far, is a session (the one rule:
        :func:`~reel_core._grpc_rule.is_grpc_session`)."""
        return is_grpc_session(self._messages)

    def finish(
        self, recording: Interaction, cassette: Cassette, *, mono: float | None = None
    ) -> Interaction:
        """The call's recording: ``recording`` (the engine's) as it is when
        the call is no session, or its answer no gRPC one (an HTTP error
        page is kept as the engine stored it); else the session's, its request's body the
        first client message (keyed again under ``cassette``'s keying when
        the engine had the whole body), its response's head, trailers and
        cut, and the conversation.  A call not ended is stored as ended at
        monotonic time ``mono`` (else at its last entry)."""
        if not self.session or recording.response.stream != "grpc":
            return recording  # no session, or no gRPC answer (an HTTP error): as it came
        if not self._ended:
            self.ended(self.opened if mono is None else mono)
        notes: list[tuple[str, str]] = []  # a message kept compressed, unscanned
        log = GrpcLog(tuple(self._messages)).redacted(self.redactor, notes=notes)
        first = next((m.data for m in self._messages if m.sender == "client" and not m.end), b"")
        request, key, ix_id, sent = recording.request, recording.key, recording.id, recording.sent
        # as the engine redacts a request's body: the one rule (a compressed
        # message scanned decompressed, see ``rescrubbed``)
        body = replace(request, body=first).redacted(self.redactor).body
        if request.body != body:  # the engine had the whole body: keyed on the first message
            request, sent = replace(request, body=body), None
            key = request.key(cassette.keying)
            ix_id = interaction_id(key, cassette.lines_of(key, cassette.keying))
        end = log.messages[-1].at_ms
        response = recording.response
        cut = None if response.cut is None else replace(response.cut, at_ms=end)
        response = replace(
            response, stream=GRPC_SESSION, frames=(), end_ms=0.0 if cut else end, cut=cut
        )
        if notes and response.encoding_error is None:  # flagged: ``reel check`` fails on it
            response = replace(response, encoding=notes[0][0], encoding_error=notes[0][1])
        client = sum(1 for m in log.messages if m.sender == "client" and not m.end)
        server = sum(1 for m in log.messages if m.sender == "server" and not m.end)
        meta: dict[str, Any] = dict(recording.meta)
        meta.update(
            total_ms=end,
            bytes=sum(len(m.data) for m in log.messages),
            messages=client + server,
            client_messages=client,
            shape=GRPC_SESSION,
        )
        meta.pop("frames", None)
        return replace(
            recording,
            key=key,
            id=ix_id,
            sent=sent,
            request=request,
            response=response,
            meta=meta,
            grpc=log,
        )

    def record(self, engine: Engine, *, mono: float | None = None) -> Recorded | None:
        """Store the call's recording (the engine's, amended by
        :meth:`finish`): the line to append; ``None`` when the engine has
        nothing to record (live mode, a failure before the head)."""
        pending = engine.take_recording()
        if pending is None:
            return None
        cassette = pending.cassette
        return pending.amend(lambda made: self.finish(made, cassette, mono=mono)).record()


# -- replaying -------------------------------------------------------------------


class GrpcCallReplay:
    """The replay of a recorded session (see the module docstring).

    The adapter calls :meth:`open` when the call was decided (its head
    goes out then), feeds each later whole client message
    (:meth:`client_message`) and the client's end (:meth:`client_end`),
    and sends what :meth:`next_event` hands out, each at its deadline,
    until it says ``Signal.CLOSED``; ``Signal.NEED_DATA`` means it waits on
    the client.  ``report`` builds the miss report of a mismatch from its
    reason, its diffs and the recording's id (:meth:`for_engine` makes one
    that names the engine's cassette, mode and key).
    """

    def __init__(
        self,
        recording: Interaction,
        *,
        timing: Timing | None = None,
        match: MatchConfig | None = None,
        redactor: Redactor | None = None,
        decode: Decode | None = None,
        lease: WebSocketLease | None = None,
        report: Report | None = None,
    ) -> None:
        if recording.grpc is None:
            raise LocalProtocolError("this recording is no gRPC session")
        self.timing = timing if timing is not None else Timing()
        self.match = match if match is not None else MatchConfig()
        self.redactor = redactor
        self.decode = decode
        self._lease = lease
        self._playing = lease.position if lease is not None else -1
        self._report = report
        self._use(recording)
        self._opened = 0.0
        self._pos = 0
        self._passed = 0  # client entries of the log passed by ``_pos``
        #: Client messages received and matched (the first: by the engine).
        self.received = 0
        self._arrivals: list[float] = []
        self._client_end: float | None = None
        self._anchor = (0.0, 0.0)  # (arrival, recorded offset) in seconds
        self._waited = 0.0
        self._queue: deque[Event] = deque()
        self._done = False
        #: After a miss: where in the log the call stops (the client entry
        #: it did not match), and when the miss came.
        self._stop: int | None = None
        self._stop_at = 0.0
        #: Set when the client's messages left the recording (the call
        #: then ended with NOT_FOUND).
        self.miss: MissReport | None = None

    @classmethod
    def for_engine(
        cls, engine: Engine, decision: Replay, *, decode: Decode | None = None
    ) -> GrpcCallReplay:
        """The replay of ``decision`` (a :class:`~reel_core.Replay` whose
        ``grpc`` is set), with the engine's timing, match settings and
        exchange redactor; its miss report names the engine's cassette,
        mode and the call's key, and says how to record it."""
        if decision.grpc is None:
            raise LocalProtocolError("this replay is not a gRPC session's")
        cassette, config = engine.cassette, engine.config

        def report(
            reason: str, diffs: tuple[FieldDiff, ...], played: Interaction, score: float
        ) -> MissReport:
            return session_miss(
                reason,
                diffs,
                played,
                score=score,
                match=engine.match.mode.value,
                cassette=cassette.name,
                mode=config.mode.value,
                hint=config.hints.miss,
                held=len(cassette),
            )

        return cls(
            decision.grpc,
            timing=engine.config.timing,
            match=engine.match,
            redactor=engine.redactor,
            decode=decode,
            lease=decision.lease,
            report=report,
        )

    def _use(self, recording: Interaction) -> None:
        assert recording.grpc is not None  # checked, or a lease of gRPC sessions
        self.recording = recording
        self.log: GrpcLog = recording.grpc
        self._client = self.log.client_messages()
        self._client_ends = any(m.end for m in self.log.messages if m.sender == "client")

    def open(self, now: float, *, first: bool = True) -> None:
        """The call was decided at ``now`` (the binding's clock): its head
        goes out, and every deadline counts from here.  ``first``: it was
        decided on its first client message, which came then (the engine
        matched it); else on a stream that ended with none (call
        :meth:`client_end` next)."""
        self._opened = now
        if first:
            self.received = 1
            self._arrivals.append(0.0)
            self._lease_saw(0, lambda recorded: True)

    def _since(self, now: float) -> float:
        return max(now - self._opened, 0.0)

    def _lease_saw(self, k: int, same: Callable[[Any], bool]) -> None:
        if self._lease is not None:
            self._lease.client_message(k, same)
            self._follow()

    def client_message(self, data: bytes, now: float) -> None:
        """A whole client message (its prefix included) came at ``now``."""
        if self._done or self.miss is not None:
            return
        if self._client_end is not None:
            raise LocalProtocolError("a client message after the client ended its stream")
        k = self.received
        seen = self._seen(data)
        self._lease_saw(k, lambda recorded: not self._differ(recorded.data, seen))
        if k >= len(self._client) and not self._client_ends:
            return  # the recorded call ended with its client's stream open: unheard
        if k >= len(self._client):
            held = len(self._client)
            end = next(i for i, m in enumerate(self.log.messages) if m.sender == "client" and m.end)
            self._mismatch(
                f"client message {k} is one more than the recording holds ({held} from the client)",
                (FieldDiff("message", "added", None, _digest(seen)),),
                now,
                end,
            )
            return
        position, recorded = self._client[k]
        diffs = self._differ(recorded.data, seen)
        if diffs:
            self._mismatch(
                f"client message {k} (grpc.messages[{position}]) does not match the recording",
                tuple(diffs),
                now,
                position,
            )
            return
        self.received += 1
        arrival = self._since(now)
        self._arrivals.append(arrival)
        self._waited = max(self._waited, arrival)

    def client_end(self, now: float) -> None:
        """The client ended its stream (END_STREAM) at ``now``."""
        if self._done or self.miss is not None or self._client_end is not None:
            return
        if self.received < len(self._client):
            position, recorded = self._client[self.received]
            self._mismatch(
                f"the client ended its stream after {self.received} of the "
                f"{len(self._client)} messages recorded from it",
                (FieldDiff("message", "removed", _digest(recorded.data), None),),
                now,
                position,
            )
            return
        self._client_end = self._since(now)
        self._waited = max(self._waited, self._client_end)

    def _seen(self, data: bytes) -> bytes:
        """A client's message as the recording kept it (redacted)."""
        return data if self.redactor is None else scrub_message(data, self.redactor)

    def _differ(self, recorded: bytes, data: bytes) -> list[FieldDiff]:
        """How a client message differs from the recorded one (none: a
        match): its bytes, or outside exact mode the JSON values ``decode``
        reads."""
        if recorded == data:
            return []
        if self.decode is None or self.match.mode is MatchMode.EXACT:
            return [FieldDiff("message", "changed", _digest(recorded), _digest(data))]
        try:
            ours, theirs = _json(self.decode(recorded)), _json(self.decode(data))
        except ValueError as exc:
            return [FieldDiff("message", "changed", _digest(recorded), f"undecodable: {exc}")]
        config = MatchConfig(MatchMode.IGNORE_FIELDS, self.match.ignore_fields)
        ours, theirs = canonical_body(ours, config), canonical_body(theirs, config)
        return [] if ours == theirs else body_diff(ours, theirs, "message")

    def _mismatch(self, reason: str, diffs: tuple[FieldDiff, ...], now: float, stop: int) -> None:
        """The call leaves the recording at log entry ``stop`` (the client
        entry it did not match): what was recorded before it still goes
        out (it answered messages that matched), then NOT_FOUND; nothing
        after it."""
        score = self.received / len(self._client) if self._client else 0.0
        if self._report is not None:
            report = self._report(reason, diffs, self.recording, score)
        else:
            report = session_miss(
                reason, diffs, self.recording, score=score, match=self.match.mode.value
            )
        self.miss = report
        self._stop, self._stop_at = stop, self._since(now)
        if self._lease is not None:
            self._lease.end()

    def _not_found(self) -> Event:
        """The end of a call that left its recording: NOT_FOUND, the miss
        report's line in ``grpc-message``, after what went out before."""
        assert self.miss is not None
        at = self._waited = max(self._waited, self._stop_at)
        _, _, trailers = grpc_miss_answer(self.miss)
        self._queue.append(EndOfResponse(at))
        self._finish()
        return Trailers(trailers, at)

    def _finish(self) -> None:
        self._done = True
        if self._lease is not None:
            self._lease.end()

    def _follow(self) -> None:
        """Go on in the recording the lease plays now, if it moved: after
        the same client message, as many server messages on."""
        lease = self._lease
        if lease is None or lease.position == self._playing:
            return
        self._playing = lease.position
        j = self._passed
        sent = self._pos - _after(self._client, j)
        self._use(lease.interaction)
        start = _after(self._client, j)
        end = self._client[j][0] if j < len(self._client) else len(self.log.messages)
        self._pos = min(start + sent, end)

    def next_event(self) -> Event | Signal:
        """What to send next (at its ``at``, seconds after :meth:`open`),
        ``Signal.NEED_DATA`` (waiting on the client) or ``Signal.CLOSED``
        (the call is over)."""
        self._follow()
        if self._queue:
            return self._queue.popleft()
        if self._done:
            return Signal.CLOSED
        messages = self.log.messages
        while self._pos < len(messages):
            if self._pos == self._stop:
                return self._not_found()
            message = messages[self._pos]
            if message.sender == "client":
                if message.end:
                    if self._client_end is None:
                        return Signal.NEED_DATA
                    self._anchor = (self._client_end, message.at_ms / 1000.0)
                else:
                    if self._passed >= self.received:
                        return Signal.NEED_DATA
                    self._anchor = (self._arrivals[self._passed], message.at_ms / 1000.0)
                    self._passed += 1
                self._pos += 1
                continue
            self._pos += 1
            if not message.end:
                return Frame(message.data, self._due(message.at_ms))
            break
        at = self._due(messages[-1].at_ms if messages else 0.0)
        response = self.recording.response
        self._finish()
        if response.cut is not None:
            cut: StreamCut = response.cut
            return Cut(cut.error, cut.detail, at)
        if response.trailers:
            self._queue.append(EndOfResponse(at))
            return Trailers(_wire(response.trailers), at)
        return EndOfResponse(at)

    def _due(self, at_ms: float) -> float:
        arrival, recorded = self._anchor
        due = max(arrival + self.timing.schedule(max(at_ms / 1000.0 - recorded, 0.0)), self._waited)
        self._waited = due
        return due


def _after(client: list[tuple[int, GrpcMessage]], j: int) -> int:
    """The position right after client message ``j - 1`` (0 for ``j == 0``)."""
    return client[j - 1][0] + 1 if j else 0


def _wire(pairs: tuple[tuple[str, str], ...]) -> tuple[tuple[bytes, bytes], ...]:
    return tuple((name.encode("latin-1"), value.encode("latin-1")) for name, value in pairs)


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _json(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, default=repr, ensure_ascii=False).encode()


def session_miss(
    reason: str,
    diffs: tuple[FieldDiff, ...],
    played: Interaction,
    *,
    score: float,
    match: str,
    cassette: str = "<memory>",
    mode: str = "replay",
    hint: str = Hints.miss,
    held: int = 0,
) -> MissReport:
    """The miss report of a session that left ``played`` (its ``reason``
    names the message), as every miss is reported: the recording it left
    is the closest (``score``: the share of its client messages the call
    matched), and ``diffs`` say where (the message changed, added past
    the recorded ones, or missing at the client's end)."""
    request = played.request
    closest = Closest(played.id, request.method, request.path, score, diffs)
    return MissReport(
        cassette=cassette,
        mode=mode,
        match=match,
        key=played.key,
        method=request.method,
        path=request.path,
        reason=f"gRPC session {played.id} left its recording: {reason}",
        recorded=held,
        closest=closest,
        hint=hint,
    )
