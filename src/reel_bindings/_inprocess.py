"""What the in-process bindings share: a cassette file, the session config,
and the few steps between a client library's request and the core's events.

The httpx/httpx2 transports and the requests adapter stay thin pumps over
:class:`Player`: it decides (under a lock, so threads may share it) and
hands back either a :class:`Decision` (a value: the replayed head and timed
frames) or, for a forward, an :class:`Upstreaming` that takes the upstream
response and appends the recorded line when it ends.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from reel_core import (
    Abort,
    Cut,
    EndOfResponse,
    Engine,
    Event,
    Forward,
    Frame,
    Limits,
    Miss,
    Mode,
    Refused,
    Replay,
    Request,
    ResponseHead,
    Signal,
    Timing,
    UpstreamError,
)
from reel_core.tools import check_upstream, parse_duration

from ._call_context import running_on
from ._files import CassetteFile
from ._options import BindingOptions, Options
from ._relay import CLIENT_CLOSED
from ._runlog import RunLog
from ._settings import Settings, mode_from_env
from ._store import StoreUnavailableError

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from reel_core import MissReport
    from reel_core.tools import GrpcCallRecorder, GrpcCallReplay

    from ._freeze import Frozen

__all__ = [
    "CLIENT_CLOSED",
    "Binding",
    "BindingOptions",
    "Decision",
    "Options",
    "Player",
    "Upstreaming",
    "given_upstream",
    "mode_from_env",
    "whole_body",
]


def given_upstream(upstream: object, takes: str, is_pool: bool) -> tuple[str | None, object]:
    """An in-process binding's ``upstream=``, as ``(base URL, pool)``: a
    string is a base URL every forward goes to, its path kept (the proxy's
    ``--upstream``, checked by the same :func:`~reel_core.check_upstream`);
    else the client library's own ``takes`` (``is_pool``: it is one) that
    forwards go through.  Anything else is refused, naming what to pass."""
    if upstream is None:
        return None, None
    if isinstance(upstream, str):
        return check_upstream(upstream, "upstream="), None
    if not is_pool:
        raise TypeError(
            f"upstream= takes a base URL such as 'https://api.openai.com' or {takes}, "
            f"not {upstream!r}"
        )
    return None, upstream


def limits_from_env() -> Limits:
    """The request limits: ``$REEL_MAX_BODY`` (bytes) raises the body's."""
    return Settings.from_env(mode=Mode.REPLAY).limits


@dataclass(frozen=True, slots=True)
class Decision:
    """What the core answered for one request it did not forward: the
    decision, the response head, then the timed events.  (A dataclass, as
    in the core: attrs costs an in-process binding's import ~8 ms.)"""

    event: Replay | Miss | Refused | None
    head: ResponseHead
    events: tuple[Event, ...] = ()
    #: The whole body when nothing in ``events`` waits (see :func:`whole_body`):
    #: answered as bytes, with no frame schedule.  ``None``: follow ``events``.
    body: bytes | None = None
    #: A gRPC call decided on its first message whose recording plays as a
    #: session: its replay, gated by the client's later messages (the
    #: binding opens it and feeds them; ``events`` end with the head).
    session: GrpcCallReplay | None = None

    @property
    def miss(self) -> MissReport | None:
        return self.event.report if isinstance(self.event, Miss) else None


def whole_body(events: Iterable[Event]) -> bytes | None:
    """The whole body of a replay's timed ``events`` (those after its head)
    when it has nothing to wait for: at most one frame then the end, none of
    them due after the head, no cut.  ``None`` otherwise: the binding then
    follows the core's batches (:func:`~reel_core.replay_batches`).

    A non-stream replay (nearly every one) is answered from this in one
    step, without a :class:`~reel_core.Step` per event; it decides exactly
    what the schedule's steps would (``tests/property/test_schedule.py``)."""
    if type(events) is tuple and len(events) == 2:  # nearly every replay: one body
        frame, end = events
        if (
            type(frame) is Frame
            and type(end) is EndOfResponse
            and not (frame.at is not None and frame.at > 0)
            and not (end.at is not None and end.at > 0)
        ):
            return frame.data
    parts: list[bytes] = []
    steps = 0
    for event in events:
        if not isinstance(event, (Frame, EndOfResponse, Cut)):
            continue
        steps += 1
        if steps > 2 or isinstance(event, Cut) or (event.at is not None and event.at > 0):
            return None
        if not isinstance(event, Frame):
            break
        parts.append(event.data)
    return b"".join(parts)


class Player:
    """One cassette file and the config every in-process request shares."""

    def __init__(
        self,
        cassette: str | os.PathLike[str] | CassetteFile,
        options: Options | None = None,
        **kwargs: Unpack[BindingOptions],
    ) -> None:
        #: What the player was asked (``options`` with ``kwargs`` set).
        self.options = given = Options.of(kwargs, options)
        store, upstream = given.store, given.upstream
        if upstream is not None and not isinstance(upstream, str):
            raise TypeError(f"a player's upstream= is a base URL, not {upstream!r}")
        settings = Settings.from_env(
            mode=given.mode,
            store=store if isinstance(store, str) else None,
            max_age=None if given.max_age is None else parse_duration(given.max_age),
            record_grace=given.record_grace,
            drop_response_headers=given.drop_response_headers,
            proto_descriptor=given.proto_descriptor,
        )
        if isinstance(cassette, CassetteFile):
            self.file = cassette
        else:  # a name in ``store`` (or $REEL_STORE's); by default a file path
            if store is None or isinstance(store, str):
                store = settings.open_store()  # a server down: StoreUnavailableError
            name = str(Path(cassette)) if store is None else os.fspath(cassette)
            self.file = CassetteFile(
                name,
                mode=settings.mode,
                strict=given.strict_load,
                store=store,
                asset_threshold=settings.asset_threshold,
                parsed_lines=settings.parsed_lines,
            )
        timing = given.timing
        self.config = settings.config(
            match=given.match,
            timing=Timing.parse(timing) if isinstance(timing, str) else timing,
            repeat=given.repeat,
            redactor=given.redactor,
            hint=given.hint,
            # a base URL given: every forward goes there (Forward.url)
            routing=upstream is not None,
            upstream=upstream,
        )
        self.lock = threading.Lock()
        #: The engine that served the last replay, ready for the next request
        #: (an engine that forwards is handed to its :class:`Upstreaming`).
        self._engine: Engine | None = None
        #: What each request got (the core's verdict), the misses (the
        #: pytest plugin fails a test on them) and what freshness found:
        #: bounded, however long the player serves.
        self.runlog = RunLog()

    @property
    def mode(self) -> Mode:
        return self.config.mode

    def _store_down(self) -> str | None:
        """Why the cassette's store cannot keep a recording now (a Redis
        server gone), or ``None``."""
        try:
            self.file.store.check()
        except StoreUnavailableError as exc:
            return str(exc)
        return None

    def streams(self, head: Request) -> bool:
        """Whether a gRPC call whose head is ``head`` is decided on its first
        message (``decide(..., streamed=True)``) rather than whole, at its
        client's end: the engine's one answer, :meth:`Engine.streams_call`
        (asked of an engine of its own: the question sets up an exchange)."""
        with self.lock:
            config = self.config
            if running_on(self.file):  # as decide(): inside a call recorded on this cassette
                config = replace(config, mode=Mode.LIVE)
            return Engine(self.file.cassette, config).streams_call(head)

    def decide(
        self, request: Request, *, streamed: bool = False, trailers: bool = False
    ) -> Decision | Upstreaming:
        """The answer to ``request``, or (to send it upstream) the feed of
        its forward.  ``streamed``: ``request`` is a gRPC call's head with
        its first client message as the body (none: its client ended with
        none), the rest to come; the engine says whether it plays as a
        session (:meth:`Engine.streams_call`): a session's replay is the
        decision's ``session``, a forward recorded as one has a
        :attr:`Upstreaming.recorder` that took the first message.
        ``trailers``: the caller reads trailers (a gRPC channel), so Reel's
        own answers to a gRPC call are gRPC statuses
        (:attr:`Engine.reads_trailers`)."""
        with self.lock:  # the engine plays the shared cassette
            engine, self._engine = self._engine, None
            nested = running_on(self.file)
            if nested:  # inside a call recorded on this cassette: it holds the answer
                self._engine = engine
                engine = Engine(self.file.cassette, replace(self.config, mode=Mode.LIVE))
            elif engine is None or engine.cassette is not self.file.cassette:
                engine = Engine(self.file.cassette, self.config)
            session = streamed and engine.streams_call(request)
            engine.reads_trailers = trailers
            engine.receive_request(request, wall=time.time())
            event = engine.next_event()
            if isinstance(event, Forward):
                reason = self._store_down() if event.record else None
                if reason is None:  # noted in the run log as it ends
                    upstreaming = Upstreaming(self, engine, event)
                    if session:
                        upstreaming.recording_session(request.body)
                    return upstreaming
                # Its recording could not be kept: not forwarded, answered 502.
                engine.upstream_error(Abort.STORE, reason, mono=time.monotonic())
                event = engine.next_event()
            decision = event if isinstance(event, (Replay, Miss, Refused)) else None
            if isinstance(decision, Replay) and engine.replaying is not None:
                head, events, body = _reply(engine)
            else:
                head, events, body = _answer(engine, event)
            replay = None
            if isinstance(decision, Replay) and decision.grpc is not None:
                from reel_core.tools import GrpcCallReplay  # the gRPC room: loaded by a session

                replay = GrpcCallReplay.for_engine(engine, decision)  # the exchange's redactor
            runlog = self.runlog
            if isinstance(decision, Miss):
                runlog.missed(decision.report)
            if isinstance(decision, Replay) and decision.stale is not None:
                runlog.stale_served(request.method, request.path, decision.stale)
            verdict = engine.verdict
            assert verdict is not None  # decided above
            runlog.served(request.method, request.path, verdict)
            engine.start_next_cycle()
            if not nested:
                self._engine = engine
            return Decision(decision, head, events, body, replay)


_Reply = tuple[ResponseHead, tuple[Event, ...], "bytes | None"]


def _reply(engine: Engine) -> _Reply:
    """The head, the timed events and the whole body (:func:`whole_body`)
    of the replay ``engine`` decided, taken whole (``take_replay``) rather
    than pulled event by event."""
    events = engine.take_replay()
    head, rest = events[0], events[1:]
    assert isinstance(head, ResponseHead)
    return head, rest, whole_body(rest)


def _answer(engine: Engine, event: Event | Signal) -> _Reply:
    """The head, the timed events and the whole body of any other answer
    (a miss, a refusal, a WebSocket replay's 101), pulled event by event."""
    head = event if isinstance(event, ResponseHead) else engine.next_event()
    assert isinstance(head, ResponseHead)
    events = []
    while True:
        item = engine.next_event()
        assert not isinstance(item, Signal)
        events.append(item)
        if isinstance(item, (EndOfResponse, Cut)):
            break
    return head, tuple(events), whole_body(events)


class Upstreaming:
    """Feeds a forwarded exchange's upstream response to its engine;
    appends the recorded line at the end."""

    def __init__(self, player: Player, engine: Engine, forward: Forward) -> None:
        self._player = player
        self._engine = engine
        self.forward = forward
        self.sent_at = time.monotonic()
        #: A gRPC call's recorder, when the call may turn out a session
        #: (:meth:`recording_session`): it stores the call.
        self.recorder: GrpcCallRecorder | None = None

    def recording_session(self, first: bytes) -> None:
        """Keep the call's conversation (a :class:`~reel_core.tools.GrpcCallRecorder`
        opened now, its first client message ``first``, if any, sent now):
        stored as a session if the core's rule says it is one."""
        from reel_core.tools import GrpcCallRecorder  # the gRPC room: loaded by a call

        self.recorder = GrpcCallRecorder(self._engine.redactor, opened=self.sent_at)
        if first:
            self.recorder.client_message(first, self.sent_at)

    def head(self, status: int, headers: Iterable[tuple[bytes, bytes]]) -> None:
        self._engine.upstream_head(
            status,
            list(headers),
            mono=time.monotonic(),
            sent_at=self.sent_at,
            wall=time.time(),
        )
        self._drain()  # only events: a line comes after the end

    def data(self, chunk: bytes) -> None:
        self._engine.upstream_data(chunk, mono=time.monotonic())
        self._drain()

    def trailers(self, headers: Iterable[tuple[bytes, bytes]]) -> None:
        """The response's trailers (a gRPC call's status), after its data."""
        self._engine.upstream_trailers(list(headers), mono=time.monotonic())
        self._drain()

    def end(self) -> None:
        self._engine.upstream_end(mono=time.monotonic())
        self._record()

    def error(self, error: UpstreamError | Abort, detail: str) -> None:
        self._engine.upstream_error(error, detail, mono=time.monotonic())
        self._record()

    def left(self, why: str) -> float:
        return self._engine.client_left(why, mono=time.monotonic())

    def _drain(self) -> None:
        # The client gets the upstream's own bytes, not these events.
        while not isinstance(self._engine.next_event(), Signal):
            pass

    def _record(self) -> None:
        self._drain()
        engine, runlog = self._engine, self._player.runlog
        with self._player.lock:  # recording adds to the shared cassette (and the run log)
            request, verdict = self.forward.request, engine.verdict
            assert verdict is not None  # the forward's
            runlog.served(request.method, request.path, verdict)
            if self.recorder is None:
                recorded = engine.record()
            else:
                recorded = self.recorder.record(engine, mono=time.monotonic())
            if recorded is not None:
                runlog.recorded(recorded)
        if recorded is not None:
            self._player.file.append(recorded.line)


class Binding:
    """What every in-process binding holds, whatever its client library: a
    :class:`Player` on the cassette, and whether a miss raises.  The
    httpx/httpx2 transports and the requests adapter take the same
    arguments; an ``upstream`` base URL (see :func:`given_upstream`) is
    the player's, the library's own pool the binding's."""

    def __init__(
        self,
        cassette: str | os.PathLike[str] | CassetteFile,
        options: Options | None = None,
        **kwargs: Unpack[BindingOptions],
    ) -> None:
        super().__init__()  # the client library's base, if it has one
        self.player = Player(cassette, Options.of(kwargs, options))
        self.strict = self.player.options.strict
        #: ``freeze=``: in force from here, in the context that made the
        #: binding, until it is closed (see :mod:`reel_bindings._freeze`).
        self.frozen: Frozen | None = None
        if self.player.options.freeze:
            from ._freeze import frozen_for

            self.frozen = frozen_for(self.player.file, self.player.options.freeze).start()

    def _unfreeze(self) -> None:
        """End the binding's ``freeze=`` (its close does)."""
        frozen, self.frozen = self.frozen, None
        if frozen is not None:
            frozen.stop()

    @property
    def misses(self) -> list[MissReport]:
        """Miss reports served so far (the first :data:`~reel_bindings._runlog.KEPT`
        of them: ``player.runlog.misses.dropped`` counts the rest)."""
        return list(self.player.runlog.misses)

    def _check(self, decision: Decision) -> None:
        """Raise the miss of ``decision`` when ``strict``."""
        if decision.miss is not None and self.strict:
            from reel_core import MissError  # the miss room: loaded by a miss

            raise MissError(decision.miss)
