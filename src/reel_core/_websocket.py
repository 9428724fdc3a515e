"""WebSocket sessions without a protocol: recording them, and replaying them.

Theory of operation.  A WebSocket session is recorded as one interaction:
its request is the upgrade ``GET`` (keyed, matched and redacted like any
request), its response the upstream's ``101`` head, and its
:class:`~reel_core.WebSocketLog` the whole messages both ways, each with its
offset from the upgrade, and the close.  This module holds what is decided
about them, on whole messages and ``now`` readings only; frames, pings and
the handshake are the adapter's (:mod:`reel_core._ws_session`, wsproto).

- :class:`WebSocketRecorder` is fed each message as it crossed
  (``client_message`` / ``server_message``) and how the session ended
  (``closed``), then :meth:`WebSocketRecorder.finish` turns the upgrade's
  recording into the session's: every message redacted as a whole unit (a
  secret split across two messages is each message's own problem: neither
  holds it whole) by the exchange's redactor, which also scrubs the literal
  credentials of the upgrade's headers, of its query (``?key=``) and of the
  credential fields of the first client message (an ephemeral
  ``client_secret``); usage and cost read from the provider's own events
  (:attr:`Provider.realtime_usage`).
- :class:`WebSocketReplay` is the replay script.  It hands out what to send
  and until when (:class:`WebSocketStep`, seconds after the upgrade, the
  timing mode applied), **gated by the client**: a server message recorded
  after client message *k* is not released before the client has sent
  message *k*, and its deadline counts from when that message came
  (realtime: the recorded gap; slow=N: N times it; fast: at once).  Each
  client message is compared with the recorded one under the cassette's
  match mode (exact bytes; normalized JSON; ignore-fields; the provider's
  volatile fields such as OpenAI's ``event_id`` ignored outside exact mode;
  binary messages by sha256 digest).  A mismatch, or a message past the
  recorded ones, ends the replay: the provider's error event where it has
  one, then a close with :data:`CLOSE_MISMATCH` and a reason, and a
  :class:`WebSocketMiss` report naming the message and the field diff.
  With a :class:`~reel_core._ws_pool.WebSocketLease` (several recordings
  answer the upgrade), the recording played follows the client's messages:
  the replay goes on in whichever one the lease moves to.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections import deque
from dataclasses import dataclass, replace
from typing import Any

from ._body import parse_json
from ._http import Request
from ._interaction import (
    Interaction,
    RecordedRequest,
    WebSocketClose,
    WebSocketLog,
    WebSocketMessage,
)
from ._literals import exchange_redactor
from ._match import FieldDiff, MatchConfig, MatchMode, canonical_body
from ._miss import body_diff, diff_row
from ._prices import cost_usd
from ._providers import PROVIDERS, Tally
from ._redact import Redactor
from ._timing import Timing
from ._usage import Usage
from ._ws_pool import WebSocketLease

__all__ = [
    "CLOSE_MISMATCH",
    "WebSocketMiss",
    "WebSocketRecorder",
    "WebSocketReplay",
    "WebSocketSignal",
    "WebSocketStep",
    "websocket_usage",
]

#: The close code of a replay that stops on a client message the recording
#: does not have (a mismatch, or one more than it holds): in the range
#: RFC 6455 leaves to applications, "4004" like HTTP's 404.
CLOSE_MISMATCH = 4004
#: A close reason may hold at most 123 bytes (RFC 6455, 5.5).
_MAX_REASON = 123


def _ms(seconds: float) -> float:
    return round(max(seconds, 0.0) * 1000.0, 3)


# -- recording -------------------------------------------------------------------


class WebSocketRecorder:
    """Keeps the messages of a forwarded WebSocket session as they cross,
    then builds its recording (:meth:`finish`).  ``opened`` is when the
    upgrade went through (``now`` of the 101); every offset counts from it.
    ``redactor`` is the exchange's (the engine's ``redactor`` for the
    upgrade: it scrubs the upgrade's credential header values)."""

    def __init__(self, request: Request, redactor: Redactor, *, opened: float) -> None:
        self.request = request
        self.redactor = redactor
        self.opened = opened
        self._messages: list[WebSocketMessage] = []
        self._close: WebSocketClose | None = None
        self._last = 0.0

    def _at(self, now: float) -> float:
        self._last = max(self._last, _ms(now - self.opened))
        return self._last

    def client_message(self, data: bytes, binary: bool, now: float) -> None:
        """A whole message from the client (its frames joined)."""
        self._messages.append(WebSocketMessage("client", self._at(now), bytes(data), binary))

    def server_message(self, data: bytes, binary: bool, now: float) -> None:
        """A whole message from the upstream."""
        self._messages.append(WebSocketMessage("server", self._at(now), bytes(data), binary))

    def closed(self, code: int | None, reason: str, by: str, now: float) -> None:
        """The session ended: a close frame from ``by`` (``"client"`` or
        ``"server"``), or a connection dropped (``"client-dropped"``,
        ``"upstream-dropped"``; ``code`` ``None``).  The first end counts."""
        if self._close is None:
            self._close = WebSocketClose(code, reason, by, self._at(now))

    @property
    def messages(self) -> int:
        """How many messages were kept so far."""
        return len(self._messages)

    def _redactor(self) -> Redactor:
        """The exchange's redactor (the upgrade's credentials), and the
        credential fields of the first client message (an ephemeral
        ``client_secret``), read as a request body's are."""
        first = next((m.data for m in self._messages if m.sender == "client"), b"")
        request = self.request
        sent = RecordedRequest(request.method, request.path, request.query, first)
        return exchange_redactor(self.redactor, (), sent=sent)

    def finish(self, upgrade: Interaction, *, mono: float | None = None) -> Interaction:
        """The session's recording: ``upgrade`` (the engine's recording of
        the upgrade and its 101) with the messages and the close, redacted,
        and the session's facts in ``meta``."""
        close = self._close
        if close is None:  # the binding recorded before an end: a drop, now
            close = WebSocketClose(None, "", "client-dropped", self._at(mono or self.opened))
        redactor = self._redactor()
        log = WebSocketLog(tuple(self._messages), close).redacted(redactor)
        response = upgrade.response
        if redactor is not self.redactor:  # the 101's headers: the first message's values too
            response = response.redacted(redactor)
        usage = websocket_usage(upgrade.provider, self.request.query, log)
        meta: dict[str, Any] = {
            "ttfb_ms": upgrade.meta.get("ttfb_ms"),
            "total_ms": close.at_ms,
            "bytes": sum(len(m.data) for m in self._messages),
            "messages": len(log.messages),
            "shape": "websocket",
        }
        meta.update(usage.to_meta())
        meta["cost_usd"] = cost_usd(usage)
        return replace(upgrade, response=response, websocket=log, meta=meta)


def websocket_usage(provider: str, query: tuple[tuple[str, str], ...], log: WebSocketLog) -> Usage:
    """The usage a session's server messages report (summed over its turns,
    through the provider's ``realtime_usage`` reader), the first content's
    offset, and the model: the provider's own word for it, else the
    upgrade's ``?model=`` (``query``: its pairs), else the first client
    message's ``setup.model``.  ``reel inspect`` and ``reel cost`` read a
    session line without usage in its ``meta`` so."""
    entry = PROVIDERS.get(provider)
    reader = entry.realtime_usage if entry is not None else None
    tally = Tally()
    if reader is not None:
        for message in log.messages:
            if message.sender != "server" or message.binary:
                continue
            is_json, obj = parse_json(message.data)
            if not is_json or not isinstance(obj, dict):
                continue
            if reader(tally, obj, obj.get("type")) and tally.first_ms is None:
                tally.first_ms = message.at_ms
    model = tally.model
    if model is None:
        model = dict(query).get("model")
    if model is None:
        model = _setup_model(log)
    return Usage(
        model=model,
        input_tokens=tally.input,
        output_tokens=tally.output,
        cached_tokens=tally.cached,
        reasoning_tokens=tally.reasoning,
        first_token_ms=tally.first_ms,
        audio_input_tokens=tally.audio_in,
        audio_output_tokens=tally.audio_out,
        audio_cached_tokens=tally.audio_cached,
    )


def _setup_model(log: WebSocketLog) -> str | None:
    first = next((m for m in log.messages if m.sender == "client"), None)
    if first is None or first.binary:
        return None
    is_json, obj = parse_json(first.data)
    setup = obj.get("setup") if is_json and isinstance(obj, dict) else None
    model = setup.get("model") if isinstance(setup, dict) else None
    return model.removeprefix("models/") or None if isinstance(model, str) else None


# -- replaying -------------------------------------------------------------------


class WebSocketSignal(enum.Enum):
    """What :meth:`WebSocketReplay.next_step` says when it has nothing to send."""

    #: Waiting on the client: its next message, or its close.
    NEED_CLIENT = "need-client"
    #: The replay is over: close the connection.
    DONE = "done"


@dataclass(frozen=True)
class WebSocketStep:
    """Wait until ``until`` seconds after the upgrade (``None``: nothing to
    wait for), then send ``data`` (a message: ``binary`` or text), or close
    (``close`` set: the code, ``None`` for none, and the reason), or drop
    the connection without a close frame (``drop``: the recorded upstream
    dropped it)."""

    until: float | None
    data: bytes = b""
    binary: bool = False
    close: tuple[int | None, str] | None = None
    drop: bool = False

    @property
    def last(self) -> bool:
        """Whether the replay ends after this step."""
        return self.close is not None or self.drop


@dataclass(frozen=True)
class WebSocketMiss:
    """Why a replayed session stopped on a client message."""

    interaction_id: str
    #: Position of the recorded message in ``websocket.messages`` (its
    #: length for a message past the recording).
    message: int
    #: Which client message it was (0 = the first).
    client_message: int
    reason: str
    diffs: tuple[FieldDiff, ...] = ()

    @property
    def summary(self) -> str:
        return (
            f"WebSocket session {self.interaction_id}: client message {self.client_message} "
            f"(websocket.messages[{self.message}]): {self.reason}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "error": "reel_websocket_mismatch",
            "interaction": self.interaction_id,
            "message": self.message,
            "client_message": self.client_message,
            "reason": self.reason,
            "diff": [diff_row(d) for d in self.diffs],
        }

    def render(self) -> str:
        """The report as lines of text (for a log)."""
        lines = [self.summary]
        for row in self.to_json()["diff"]:
            sides = ("recorded", "received")
            values = ", ".join(f"{k} {json.dumps(row[k])}" for k in sides if k in row)
            lines.append(f"  {row['path']}: {row['kind']}" + (f" ({values})" if values else ""))
        return "\n".join(lines)


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def compare_message(
    recorded: WebSocketMessage,
    data: bytes,
    binary: bool,
    match: MatchConfig,
    volatile: tuple[str, ...] = (),
) -> list[FieldDiff]:
    """How a client message differs from the recorded one (none: a match).
    Binary messages compare by digest; text ones as the match mode says."""
    if recorded.binary != binary:
        kinds = ("text", "binary")
        return [FieldDiff("message", "changed", kinds[recorded.binary], kinds[binary])]
    if binary:
        a, b = _digest(recorded.data), _digest(data)
        return [] if a == b else [FieldDiff("message", "changed", a, b)]
    if match.mode is MatchMode.EXACT:
        if recorded.data == data:
            return []
        # the same JSON value written otherwise differs too, byte for byte
        return body_diff(recorded.data, data, "message") or [
            FieldDiff("message", "changed", recorded.data.decode(), data.decode())
        ]
    config = MatchConfig(MatchMode.IGNORE_FIELDS, (*match.ignore_fields, *volatile))
    ours, theirs = canonical_body(recorded.data, config), canonical_body(data, config)
    return [] if ours == theirs else body_diff(ours, theirs, "message")


class WebSocketReplay:
    """The replay of a recorded session (see the module docstring).

    The adapter calls :meth:`open` when the 101 went out, feeds each whole
    client message (:meth:`client_message`) and the client's close
    (:meth:`client_closed`), and sends what :meth:`next_step` hands out
    until it says :attr:`WebSocketSignal.DONE`.
    """

    def __init__(
        self,
        log: WebSocketLog,
        *,
        timing: Timing | None = None,
        match: MatchConfig | None = None,
        provider: str = "generic",
        interaction_id: str = "",
        lease: WebSocketLease | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self.log = log
        #: The exchange's redactor (the upgrade's): a client message that
        #: differs from the recorded one is compared again as it was stored,
        #: scrubbed (a message carrying a secret matches its recording).
        self.redactor = redactor
        self.timing = timing if timing is not None else Timing()
        self.match = match if match is not None else MatchConfig()
        entry = PROVIDERS.get(provider)
        self._volatile = entry.realtime_volatile if entry is not None else ()
        self._error_event = entry.realtime_error if entry is not None else None
        self.interaction_id = interaction_id
        self._lease = lease
        #: The lease's position when this replay last looked.
        self._playing = lease.position if lease is not None else -1
        #: The client messages of the recording, with their positions.
        self._client = _client_messages(log)
        self._opened = 0.0
        self._pos = 0
        self._passed = 0  # client messages of the log passed by ``_pos``
        #: Client messages received (and matched).
        self.received = 0
        self._arrivals: list[float] = []
        self._anchor = (0.0, 0.0)  # (arrival, recorded offset) in seconds
        self._waited = 0.0
        self._queue: deque[WebSocketStep] = deque()
        self._done = False
        #: Set when a client message did not match (the replay then ends).
        self.miss: WebSocketMiss | None = None
        #: How the replay ended, in words (``None`` while it runs).
        self.outcome: str | None = None

    def open(self, now: float) -> None:
        """The upgrade's 101 went out at ``now`` (the binding's clock)."""
        self._opened = now

    def _since(self, now: float) -> float:
        return max(now - self._opened, 0.0)

    def _compare(self, recorded: WebSocketMessage, data: bytes, binary: bool) -> list[FieldDiff]:
        """How ``data`` differs from ``recorded``: as it came, else (it
        differs, and scrubbing changes it) as it was stored, scrubbed, and
        then the diff names no secret."""
        diffs = compare_message(recorded, data, binary, self.match, self._volatile)
        if diffs and self.redactor is not None:
            scrubbed = self.redactor.data(data)
            if scrubbed != data:
                diffs = compare_message(recorded, scrubbed, binary, self.match, self._volatile)
        return diffs

    def client_message(self, data: bytes, binary: bool, now: float) -> None:
        """A whole message came from the client at ``now``."""
        if self._done or self.miss is not None:
            return
        k = self.received
        if self._lease is not None:
            self._lease.client_message(k, lambda m: not self._compare(m, data, binary))
            self._follow()
        if k >= len(self._client):
            kind = "binary" if binary else "text"
            self._mismatch(
                len(self.log.messages),
                k,
                f"one message more than the recording holds ({len(self._client)} from the "
                f"client); this {kind} message was not recorded",
                (),
            )
            return
        position, recorded = self._client[k]
        diffs = self._compare(recorded, data, binary)
        if diffs:
            self._mismatch(position, k, "does not match the recording", tuple(diffs))
            return
        self.received += 1
        arrival = self._since(now)
        self._arrivals.append(arrival)
        self._waited = max(self._waited, arrival)

    def _mismatch(self, position: int, k: int, reason: str, diffs: tuple[FieldDiff, ...]) -> None:
        self.miss = WebSocketMiss(self.interaction_id, position, k, reason, diffs)
        text = f"reel: client message {k} {reason}"
        if diffs:
            text += f" (first difference at {diffs[0].path})"
        self._queue.clear()
        if self._error_event is not None:
            self._queue.append(
                WebSocketStep(None, self._error_event("reel_websocket_mismatch", text + "."))
            )
        self._end()
        reason_bytes = text.encode()[:_MAX_REASON]
        self._queue.append(
            WebSocketStep(None, close=(CLOSE_MISMATCH, reason_bytes.decode("utf-8", "ignore")))
        )
        self.outcome = self.miss.summary

    def client_closed(self, code: int | None = None, reason: str = "", *, now: float = 0.0) -> None:
        """The client closed the session (or dropped the connection)."""
        if self._done:
            return
        self._done = True
        self._end()
        if self.outcome is None:
            if self.received < len(self._client):
                self.outcome = (
                    f"the client closed early, after {self.received} of "
                    f"{len(self._client)} recorded client messages"
                )
            else:
                self.outcome = "complete: the client closed"
        self._queue.clear()

    def _end(self) -> None:
        if self._lease is not None:
            self._lease.end()

    def _follow(self) -> None:
        """Go on in the recording the lease plays now, if it moved (by this
        session's message or by another session's swap): from the same
        place, after the same client message and as many server messages
        on (the ones sent came from the recording played then)."""
        lease = self._lease
        if lease is None or lease.position == self._playing:
            return
        self._playing, new = lease.position, lease.log
        j = self._passed
        sent = self._pos - _after_client(self._client, j)
        self.log, self.interaction_id = new, lease.interaction.id
        self._client = _client_messages(new)
        start = _after_client(self._client, j)
        end = self._client[j][0] if j < len(self._client) else len(new.messages)
        self._pos = min(start + sent, end)
        if j:
            self._anchor = (self._arrivals[j - 1], self._client[j - 1][1].at_ms / 1000.0)

    def next_step(self) -> WebSocketStep | WebSocketSignal:
        """What to send next, or what the replay waits on."""
        self._follow()
        if self._queue:
            step = self._queue.popleft()
            if step.last:
                self._done = True
            return step
        if self._done or self.miss is not None:
            return WebSocketSignal.DONE
        messages = self.log.messages
        while self._pos < len(messages):
            message = messages[self._pos]
            if message.sender == "client":
                if self._passed >= self.received:
                    return WebSocketSignal.NEED_CLIENT
                self._anchor = (self._arrivals[self._passed], message.at_ms / 1000.0)
                self._passed += 1
                self._pos += 1
                continue
            self._pos += 1
            return WebSocketStep(self._due(message.at_ms), message.data, message.binary)
        close = self.log.close
        if close is None or close.by in ("client", "client-dropped"):
            return WebSocketSignal.NEED_CLIENT  # the client ends it, as recorded
        step = WebSocketStep(
            self._due(close.at_ms),
            close=None if close.by == "upstream-dropped" else (close.code, close.reason),
            drop=close.by == "upstream-dropped",
        )
        self._done = True
        self._end()
        self.outcome = f"complete: the server {'dropped the connection' if step.drop else 'closed'}"
        return step

    def _due(self, at_ms: float) -> float | None:
        arrival, recorded = self._anchor
        due = arrival + self.timing.schedule(max(at_ms / 1000.0 - recorded, 0.0))
        if due <= self._waited:
            return None
        self._waited = due
        return due


def _client_messages(log: WebSocketLog) -> list[tuple[int, WebSocketMessage]]:
    """The client messages of ``log``, with their positions in it."""
    return [(i, m) for i, m in enumerate(log.messages) if m.sender == "client"]


def _after_client(client: list[tuple[int, WebSocketMessage]], j: int) -> int:
    """The position right after client message ``j - 1`` (0 for ``j == 0``)."""
    return client[j - 1][0] + 1 if j else 0
