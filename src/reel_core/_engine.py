"""The engine: a request in, a decision and response events out.

The engine knows no protocol.  A binding hands it one parsed request at a
time (:meth:`Engine.receive_request`) and pulls events, as from h11: a
decision (:class:`Replay`, :class:`Miss`, :class:`Refused` or
:class:`Forward`), then the response.  For a forward the binding feeds the
upstream response back (``upstream_head`` / ``upstream_data`` /
``upstream_end`` or ``upstream_error``) and passes the events on; once the
client has the whole answer it calls :meth:`Engine.record` for the cassette
line.  Every transition goes through :mod:`reel_core._state`.

Protocol adapters wrap an engine: :class:`reel_core.Session` reads HTTP/1.1
bytes with h11 and serializes the answer, as wsproto composes its handshake
and its connection.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from ._cassette import Cassette, Interaction, RecordedRequest
from ._config import REPLAY_KEY, Config, Mode
from ._cursor import repeats_last
from ._errors import CassetteError, LocalProtocolError, RemoteProtocolError
from ._events import (
    Cut,
    EndOfResponse,
    Event,
    Forward,
    Frame,
    Miss,
    Recorded,
    Refused,
    Replay,
    ResponseHead,
    Signal,
    Trailers,
)
from ._exchange import new_recorder, plain_request
from ._grpc import is_grpc
from ._http import HOP_BY_HOP, MISS_HEADER, Headers, Request, normalize_fields
from ._literals import CREDENTIAL_HEADERS, exchange_redactor, header_names
from ._match import MatchConfig, MatchMode
from ._memo import KeyMemo
from ._own_answers import own_answer
from ._providers import route, routed_titles
from ._redact import Redactor
from ._sent import DEFAULT, literals_absent, sent_digest, writes_sent
from ._shown_url import shown_url
from ._state import Input, State, transition
from ._upstream import Abort, UpstreamError
from ._verdict import Decision, Verdict, label_of, verdict_of

if TYPE_CHECKING:
    # Rooms of rare paths (a fuzzy match, a miss, a max_age, a
    # recording, a superseded one's drift): imported where they are taken,
    # so a replay does not load them.
    from ._freshness import Staleness
    from ._miss import MissReport
    from ._record import Recorder, Steps

__all__ = ["Engine", "PendingRecording"]

_DEFAULT_MATCH = MatchConfig()
#: The end of every whole body replayed: a value, so one object serves all
#: (the replay events of each recording are kept: one fewer object apiece
#: for the garbage collector to walk).
_ENDED_AT_ONCE = EndOfResponse(0.0)

#: The deadline of every frame of a fast replay (one float, not one a frame).
_AT_ONCE = 0.0


#: Response headers a replay never sends from its recording.
_NOT_REPLAYED = HOP_BY_HOP | {b"content-length", MISS_HEADER}


@functools.lru_cache(maxsize=1024)
def _wire_headers(headers: tuple[tuple[str, str], ...]) -> Headers:
    """A recording's response headers as sent, but for its framing: a
    replay frames the body it sends itself (a ``Content-Length`` for a
    whole body, none for a stream), so the framing and hop-by-hop headers a
    hand-edited line may hold (Reel records none) are left out: kept, they
    would be sent twice, or contradict the body.  So is the miss marker
    (:data:`MISS_HEADER`): a replay is a hit, whatever its line says.
    Each value is sent as recorded (the adapter says it in its protocol,
    see :mod:`reel_core._fields`)."""
    return tuple(
        (name, value) for name, value in normalize_fields(headers) if name not in _NOT_REPLAYED
    )


_PLACEHOLDER = REPLAY_KEY.encode("ascii")


def _carries_placeholder(request: Request) -> bool:
    """Whether ``request`` carries Reel's replay placeholder key where a
    key goes: a header's value (``authorization``, ``x-api-key``, gRPC
    metadata...) or its target (a ``key=`` query parameter).  Such a
    request is never forwarded, in any binding (the one check of it)."""
    return REPLAY_KEY in request.target or any(_PLACEHOLDER in v for _, v in request.headers)


class Engine:
    """Decides one request at a time, with no protocol of its own.

    ``cassette`` is shared by every engine replaying or recording it;
    ``config`` too.  ``cassette`` may instead be a function choosing the
    cassette for each request (a proxy serving a directory of cassettes);
    it may raise :class:`RemoteProtocolError` to refuse the request as the
    client's fault (its ``status``), or :class:`CassetteError` for a cassette
    that cannot be used (refused with 500, saying how to fix it).
    """

    def __init__(
        self,
        cassette: Cassette | Callable[[Request], Cassette],
        config: Config | None = None,
    ) -> None:
        self.config = config if config is not None else Config()
        #: Whether the client reads trailers (its adapter sets it: HTTP/2, a
        #: gRPC channel in process).  Reel's own answers to a gRPC call are
        #: then gRPC statuses in the trailers; over HTTP/1.1, which carries
        #: none, they stay the status and JSON error (a ``200`` with its
        #: status in trailers never sent would read as a success).
        self.reads_trailers = False
        self._select = None if isinstance(cassette, Cassette) else cassette
        self.state = State.IDLE
        self._use(cassette if isinstance(cassette, Cassette) else Cassette())
        self._pending: Request | None = None
        self._events: deque[Event] = deque()
        #: The replay events of the recording being served (shared, cached:
        #: see ``_replay``), while none of them was pulled yet.
        self._replaying: tuple[Event, ...] | None = None
        #: What the upstream of the exchange being recorded sent so far.
        self._capture: _Capture | None = None
        #: Builds the recording of a finished forward, in pieces (see
        #: :meth:`PendingRecording.step`): called by ``record``.
        self._unstored: Callable[[], Steps[Interaction]] | None = None
        #: The forwarded request's redacted form and key, computed when first
        #: asked for (``forward_key``, ``record``), not on the way upstream.
        self._keyed: Callable[[], tuple[RecordedRequest, str]] | None = None
        self._request: Request | None = None
        #: The base URL a routed forward went to (named, redacted, in a
        #: failure's message: not worked out unless one comes).
        self._routed_to: str | None = None
        #: The wall-clock time (epoch seconds) the request came with.
        self._now: float | None = None
        #: The generation a forward of a stale recording starts (else 0).
        self._superseding = 0
        #: What the current (or last) exchange was decided, and how it went
        #: since: a failure before the upstream's head, the kind of a cut
        #: handed out, whether the client left (see :attr:`verdict`).
        self._decision: Decision | None = None
        self._failure: UpstreamError | Abort | None = None
        self._cut: str | None = None
        self._left = False
        #: The upstream response being fed had its trailers (nothing follows
        #: them but its end or a failure).
        self._trailed = False
        #: The exchange is a gRPC call decided at its first message
        #: (:meth:`streams_call`): its recording plays as a session.
        self._streamed = False

    def _use(self, cassette: Cassette) -> None:
        self.cassette = cassette
        #: The match settings in force: the config's, else the cassette's
        #: (read through the config's descriptor set, if any).
        match = self.config.match or cassette.meta.match
        if self.config.proto is not None:
            match = replace(match, proto=self.config.proto)
        self.match: MatchConfig = match
        self._keying = self.match.keying()
        #: Whether a request's key may be found by its digest as sent
        #: (:mod:`reel_core._sent`): under the default match settings only,
        #: the cassette's lines keyed under them too.
        self._by_sent = self.match == _DEFAULT_MATCH and cassette.keying == DEFAULT
        #: Serve the last recording again once all were served?  Never in
        #: auto mode: a retry of a recorded 429 must reach the upstream.
        self._repeat = repeats_last(self.config.mode, self.config.repeat, cassette.meta.repeat)
        #: How old a recording may be (the config's, else the cassette's).
        max_age = self.config.max_age
        self._max_age = max_age if max_age is not None else cassette.meta.max_age_seconds
        redact = cassette.meta.extra.get("redact", {})
        settings = redact if isinstance(redact, dict) else {}
        #: The redactor of the settings (a redactor given in code digests
        #: with the cassette's salt); ``redactor`` is the current request's
        #: (it also scrubs the request's credential values), made when first
        #: asked for in record and live modes (see ``_Scrub``).
        self._redactor = (
            self.config.redactor.with_salt(settings.get("salt"))
            if self.config.redactor is not None
            else Redactor.from_settings(settings, pii=self.config.pii)
        )
        self._scrub: Redactor | _Scrub = self._redactor
        names = (
            *header_names({"headers": list(self.config.credential_headers)}),
            *header_names(settings),
        )
        self._credentials = (
            CREDENTIAL_HEADERS | {n.encode("ascii") for n in names} if names else CREDENTIAL_HEADERS
        )
        #: Keying's answers for requests seen before, under these settings.
        self._memo: KeyMemo[tuple[Redactor, RecordedRequest, str]] = cassette.memo(
            (self._redactor, self._credentials, self._keying, self.config.limits.max_body)
        )
        #: The events replaying each recording served lately (they are
        #: values), shared by the engines of this cassette and timing:
        #: ``(id, head only) -> (the recording, its events)``.
        self._replays: dict[tuple[int, bool], tuple[Interaction, tuple[Event, ...]]] = (
            cassette.cache(("replays", self.config.timing))
        )

    @property
    def redactor(self) -> Redactor:
        """Scrubs what is logged or said about the current exchange: the
        settings' redactor, and the credential values of its request."""
        scrub = self._scrub
        return scrub if isinstance(scrub, Redactor) else scrub()

    # -- client side ---------------------------------------------------------

    def receive_request(self, request: Request, *, wall: float | None = None) -> None:
        """Hand over the next request, parsed (the body whole).  ``wall`` is
        the wall-clock time (epoch seconds), which a ``max_age`` needs to
        tell a stale recording.

        Two clocks are named apart everywhere: ``wall`` is the wall clock
        (``time.time()``: what a line's ``ts`` and a ``max_age`` read),
        ``mono`` a monotonic one (``time.monotonic()`` or the event loop's:
        what offsets and durations are measured on)."""
        if self.state is not State.IDLE or self._pending is not None:
            raise self._misuse(f"a request is already being served (state {self.state.value})")
        if len(request.body) > self.config.limits.max_body:
            raise self.config.limits.body_too_large(len(request.body), self.config.hints.max_body)
        self._pending = request
        self._now = wall

    def next_event(self) -> Event | Signal:
        """The next event, or a :class:`Signal` saying what the engine waits
        on: ``NEED_DATA`` for a request, ``PAUSED`` for the upstream or for
        the binding (``record``, ``start_next_cycle``)."""
        if self._events:
            event = self._events.popleft()
            if type(event) is Frame:  # most of a long stream: nothing to decide
                return event
            if self.state is State.SERVING and isinstance(event, (EndOfResponse, Cut)):
                if type(event) is Cut:
                    self._cut = event.error
                self._to(Input.SERVED)
            return event
        if self.state is State.IDLE:
            if self._pending is None:
                return Signal.NEED_DATA
            request, self._pending = self._pending, None
            self._decide(request)
            return self.next_event()
        if self.state is State.CLOSED:
            return Signal.CLOSED
        if self.state is State.ERROR:
            raise LocalProtocolError("the session failed earlier; close the connection")
        return Signal.PAUSED

    def pull(self) -> Iterator[Event]:
        """The events :meth:`next_event` hands out, until it gives a
        :class:`Signal`: for a binding that sends a response as its events
        come (a replay's are all at hand).  The same events, in the same
        order, with the same effects; a replay's frames are handed on
        without a call each (a long stream has hundreds of thousands)."""
        events = self._events
        while True:
            if events and type(events[0]) is Frame:
                yield events.popleft()
                continue
            event = self.next_event()
            if isinstance(event, Signal):
                return
            yield event

    @property
    def replaying(self) -> tuple[Event, ...] | None:
        """After a :class:`Replay` decision (of a recording that is no
        WebSocket session) was pulled, and before any event of its response
        is: the whole response, the events ``next_event`` would hand out
        next, up to its end or cut.  The same tuple each time the same
        recording is replayed with the same timing (and ``HEAD`` or not), so
        an adapter can key what it derives from a response by its identity
        (:meth:`reel_core.Session.send_replay` serializes it once).
        ``None`` otherwise."""
        events = self._replaying
        if events is None or len(self._events) != len(events):
            return None
        return events

    def take_replay(self) -> tuple[Event, ...]:
        """Pull the whole response :attr:`replaying` holds at once, as if
        each event had been pulled by ``next_event``: the exchange is then
        served.  For an adapter that sends a recording's response in one
        piece."""
        events = self.replaying
        if events is None:
            raise self._misuse("take_replay() is for a replay's response none of which was pulled")
        self._events.clear()
        self._replaying = None
        last = events[-1]
        if type(last) is Cut:
            self._cut = last.error
        self._to(Input.SERVED)
        return events

    def fail(self) -> None:
        """A binding misused its adapter: the engine can serve no more."""
        self.state = State.ERROR

    def client_closed(self) -> None:
        """The client closed its connection between requests (adapters)."""
        self._to(Input.CLIENT_CLOSED)

    def client_error(self, error: RemoteProtocolError) -> RemoteProtocolError:
        """The client sent something invalid (adapters): the engine fails,
        and the error to raise comes back scrubbed of the request's secrets
        (its message is logged and answered)."""
        self._to(Input.PROTOCOL_ERROR)
        return RemoteProtocolError(self.redactor.text(str(error)), error.status)

    def start_next_cycle(self) -> None:
        """After a finished exchange, get ready for the next request."""
        if self._events:
            raise self._misuse("pull every event of the exchange before the next one")
        if self._unstored is not None:
            raise self._misuse("call record() for the finished exchange before the next one")
        self._to(Input.NEXT_CYCLE)
        self._request = None
        self._replaying = None
        self._keyed = None
        self._superseding = 0
        self._scrub = self._redactor
        self._streamed = False

    # -- decisions -----------------------------------------------------------

    def streams_call(self, head: Request) -> bool:
        """Whether the gRPC call whose head is ``head`` (its body not come
        yet) goes to the engine at its first client message rather than
        whole, at the end of its stream: in record and live modes always
        (the call may turn out a session, whose messages go upstream as
        they come), in replay and auto modes when the recordings of its
        path are sessions (:func:`reel_core._grpc_rule.plays_as_session`),
        and in auto mode when its path has none (it will be forwarded).
        ``False`` for any other request.  A cassette that cannot be chosen
        for it says ``False``: the request, whole, is refused as usual.

        When it says ``True``, this exchange's recording plays as a
        session: one that is no session (recorded whole, or imported) as
        the session it was (:func:`~reel_core._grpc_rule.as_session`),
        so a client that sends more than it did gets NOT_FOUND, not its
        answer."""
        self._streamed = self._streams(head)
        return self._streamed

    def _streams(self, head: Request) -> bool:
        if not is_grpc(head.header("content-type")):
            return False
        if self.config.mode in (Mode.RECORD, Mode.LIVE):
            return True
        cassette = self.cassette
        if self._select is not None:
            try:
                cassette = self._select(head)
            except (RemoteProtocolError, CassetteError):
                return False
        from ._grpc_rule import plays_as_session

        forwards = self.config.mode is Mode.AUTO
        return plays_as_session(cassette, head.method, head.path, forwards=forwards)

    def recorded_request(self, request: Request) -> RecordedRequest:
        """The redacted form of ``request`` that is keyed and stored (its
        credential values, its headers', query's and body's, scrubbed too)."""
        plain = plain_request(request, self.config.limits.max_body)
        return plain.redacted(
            exchange_redactor(self._redactor, request.headers, self._credentials, plain)
        )

    @property
    def verdict(self) -> Verdict | None:
        """What happened to the current exchange, or the last one once it
        ended (``None`` before the first decision): decided with the
        decision, and by a failure before the upstream's head.  The rule is
        :mod:`reel_core._verdict`'s."""
        decision = self._decision
        return None if decision is None else verdict_of(decision, self._failure)

    @property
    def label(self) -> str:
        """The words a log line says for the exchange of :attr:`verdict`:
        its word and how it went (``hit (stale)``, ``recorded (cut:
        reset)``, ``upstream timeout``...); ``-`` before the first
        decision."""
        decision = self._decision
        if decision is None:
            return "-"
        return label_of(decision, self._failure, self._cut, self._left)

    def _decide(self, request: Request) -> None:
        self._request = request
        self._failure = self._cut = None
        self._left = False
        try:
            if self._select is not None:
                self._use(self._select(request))
            self._match_and_decide(request)
        except RemoteProtocolError as exc:
            self._refuse(exc.status, "reel_bad_cassette", str(exc))
        except CassetteError as exc:
            # A line that passed indexing but does not parse (or a selected
            # cassette that is no cassette at all): answer, keep serving.
            if exc.line is None:
                fix = "Fix the file, or record it again."
            else:
                listed = self.config.hints.bad_line_of(exc.name)
                listed = f" ({listed})" if listed else ""
                fix = f"Fix or delete that line{listed}, or re-record the cassette."
            self._refuse(500, "reel_bad_cassette", f"{exc}. {fix}")

    def _match_and_decide(self, request: Request) -> None:
        mode = self.config.mode
        keyed: Callable[[], tuple[RecordedRequest, str]]
        if mode in (Mode.REPLAY, Mode.AUTO):
            # Until the next cycle: everything written or said about this
            # exchange is scrubbed of the request's credential values too.
            self._scrub, recorded, key = self._memo.get(request, lambda: self._key(request))
            keyed = lambda: (recorded, key)  # noqa: E731 - for a miss forwarded in auto mode
            # only a max_age makes a recording stale: the play count is read then
            starts = self._max_age is not None and self.cassette.plays(key, self._keying) == 0
            interaction = self.cassette.play(key, self._keying, repeat=self._repeat)
            similarity = None
            stale = None if interaction is None else self._staleness(key)
            if stale is not None and interaction is not None and mode is Mode.AUTO and starts:
                # A stale sequence is recorded again from its start: the new
                # recordings are the next generation, which supersedes it.
                self._superseding = interaction.generation + 1
                interaction = None
            # fuzzy only stands in for a request never recorded: one whose
            # recordings were all served stays a miss (auto: is recorded again)
            fuzzy = self.match.mode is MatchMode.FUZZY and not self.cassette.count(
                key, self._keying
            )
            if interaction is None and fuzzy:
                from ._fuzzy import nearest

                found = nearest(recorded, self.cassette, self.match)
                if found is not None:
                    interaction, similarity = found
            if interaction is not None:
                self._to(Input.HIT)
                lease = None
                if similarity is None:
                    if interaction.websocket is not None:
                        lease = self.cassette.websocket_lease(key, self._keying)
                        interaction = lease.interaction
                    elif interaction.grpc is not None:
                        lease = self.cassette.grpc_lease(key, self._keying)
                        interaction = lease.interaction
                if self._streamed and interaction.grpc is None and interaction.websocket is None:
                    from ._grpc_rule import as_session

                    interaction = as_session(interaction)
                session = interaction.grpc is not None
                self._decision = Replay(
                    request,
                    interaction.id,
                    key,
                    similarity,
                    interaction.websocket,
                    interaction.provider,
                    stale,
                    lease,
                    interaction if session else None,
                )
                self._events.append(self._decision)
                events = self._replay(interaction, head_only=request.method == "HEAD")
                self._events.extend(events)
                if interaction.websocket is None and not session:
                    self._replaying = events  # a session's adapter takes over after the head
                return
            if mode is Mode.REPLAY:
                report = self._miss_report(recorded, key)
                self._to(Input.MISS)
                self._decision = Miss(request, report)
                self._events.append(self._decision)
                # a 404 with the report, or NOT_FOUND in a gRPC call's trailers
                self._events.extend(
                    own_answer(
                        request.header("content-type"),
                        404,
                        "reel_miss",
                        report.summary(),
                        body=report.to_bytes(),
                        trailers=self.reads_trailers,
                        head_only=request.method == "HEAD",
                        extra=((MISS_HEADER, key.encode("ascii")),),
                    )
                )
                return
        else:
            # Nothing here needs the key in record and live modes: the secret
            # check, the key and the recording's name wait until the binding
            # sent the request (for the recording, until the client has its
            # answer), so they are not on the request's way upstream; nor do
            # the request's credential values (a failure's message, a log
            # line and the recording ask for them).
            scrub = self._scrub = _Scrub(
                self._redactor, request, self._credentials, self.config.limits.max_body
            )
            keyed = self._keyer(request, scrub)
        if _carries_placeholder(request):
            self._refuse(
                401,
                "reel_placeholder_key",
                f"Reel did not send {request.method} {self.redactor.target(request.target)} "
                f"upstream: its key is Reel's replay placeholder ({REPLAY_KEY}), which a "
                f"client made in replay mode without a key is given, and in {mode.value} "
                "mode the provider's refusal of it would be recorded as the truth. Set the "
                "provider's key variable (OPENAI_API_KEY...) before the client is made, or "
                "pass api_key=.",
            )
            return
        url = None
        if self.config.routing:
            url = route(request.path, request.headers, self.config.upstream)
            if url is None:
                self._refuse(
                    421,
                    "reel_no_upstream",
                    f"Reel does not know where to send {request.method} "
                    f"{self.redactor.target(request.target)}: it is not an API path of "
                    f"{routed_titles()}. Name the base URL to send every request to with "
                    f"{self.config.hints.upstream}.",
                )
                return
            self._routed_to = url[: len(url) - len(request.path)]
            url += request.target[len(request.path) :]
        self._to(Input.FORWARD)
        self._keyed = keyed
        if mode.records:
            self._capture = _Capture(
                keyed,
                functools.partial(
                    _new_recorder,
                    self.cassette,
                    self.config,
                    self._keying,
                    request,
                    keyed,
                    self._scrub,
                    self._sent_of(request) if self._by_sent else None,
                    self.config.limits.max_body,
                ),
            )
        known = keyed()[1] if mode in (Mode.REPLAY, Mode.AUTO) else None
        self._decision = Forward(
            request, known, mode.records, url, request.websocket, bool(self._superseding)
        )
        self._events.append(self._decision)

    def _staleness(self, key: str) -> Staleness | None:
        """Why ``key``'s answering recordings are stale, or ``None``: the
        first of its newest generation is judged, so a sequence (a 429, then
        the 200 of the retry) is fresh or stale as a whole."""
        if self._max_age is None:
            return None
        if self._now is None:
            raise self._misuse(
                "a max_age is in force: hand the wall-clock time in with each request "
                "(receive_request(request, wall=time.time()))"
            )
        from ._freshness import staleness

        first = self.cassette.first(key, self._keying)  # None: a line that does not parse
        return staleness(first.timestamp if first else None, self._max_age, self._now)

    def _key(self, request: Request) -> tuple[Redactor, RecordedRequest, str]:
        """The exchange's redactor, ``request`` redacted and its match key.
        A request some line records as sent byte for byte, with none of
        this request's credential values in it, is not keyed: redaction
        would change nothing in it, so its key is that line's."""
        plain = plain_request(request, self.config.limits.max_body)
        redactor = exchange_redactor(self._redactor, request.headers, self._credentials, plain)
        self._scrub = redactor  # in force even if keying raises
        if self._by_sent and literals_absent(redactor, plain):
            key = self.cassette.sent_key(sent_digest(request, self._redactor))
            if key is not None:
                return redactor, plain, key
        recorded = plain.redacted(redactor)
        return redactor, recorded, recorded.key(self._keying)

    def _sent_of(self, request: Request) -> Callable[[RecordedRequest], str | None]:
        """What the recording of ``request`` stored as a given redacted form
        carries as its digest as sent (``None``: redaction changed it, or
        it may be keyed otherwise than its bytes say)."""
        base, limit = self._redactor, self.config.limits.max_body

        def sent(recorded: RecordedRequest) -> str | None:
            plain = plain_request(request, limit)
            return sent_digest(request, base) if writes_sent(request, plain, recorded) else None

        return sent

    def _keyer(self, request: Request, scrub: _Scrub) -> Callable[[], tuple[RecordedRequest, str]]:
        """``request`` redacted (by its exchange's redactor, ``scrub``), and
        its match key: computed once, when first asked for, with this
        request's match settings."""
        keying = self._keying
        done: list[tuple[RecordedRequest, str]] = []  # functools.cache costs more

        def keyed() -> tuple[RecordedRequest, str]:
            if not done:
                recorded = scrub.plain().redacted(scrub())
                done.append((recorded, recorded.key(keying)))
            return done[0]

        return keyed

    def _refuse(self, status: int, kind: str, message: str) -> None:
        self._to(Input.REFUSE)
        assert self._request is not None
        self._decision = Refused(self._request, status, message)
        self._events.append(self._decision)
        self._events.extend(self._own(status, kind, message))

    def _own(
        self, status: int, kind: str, message: str, *, failure: str | None = None
    ) -> tuple[Event, ...]:
        """An answer of Reel's own to the request (a refusal, a failure):
        JSON, or for a gRPC call whose client reads trailers a gRPC status
        (:func:`own_answer`)."""
        request = self._request
        assert request is not None
        return own_answer(
            request.header("content-type"),
            status,
            kind,
            message,
            failure=failure,
            trailers=self.reads_trailers,
            head_only=request.method == "HEAD",
        )

    def _miss_report(self, recorded: RecordedRequest, key: str) -> MissReport:
        from ._miss import report_miss

        return report_miss(
            recorded,
            key,
            self.cassette,
            self._keying,
            self.match,
            mode=self.config.mode.value,
            hint=self.config.hints.miss,
        )

    def forward_key(self) -> str:
        """The match key of the request being forwarded.  In record and live
        modes it is computed here, on first call (a secret check and a
        canonical hash of the body), so the request goes upstream first."""
        if self._keyed is None:
            raise self._misuse("forward_key() is for a forwarded request, before the next one")
        return self._keyed()[1]

    def raise_for_miss(self, event: Event | Signal) -> None:
        """Raise :class:`MissError` if ``event`` is a :class:`Miss`."""
        if isinstance(event, Miss):
            from ._miss import MissError

            raise MissError(event.report)

    def _replay(self, interaction: Interaction, *, head_only: bool) -> tuple[Event, ...]:
        """The events replaying ``interaction``, made once for each
        recording played again (the same request sent again, a retry)."""
        cached = self._replays.get((id(interaction), head_only))
        if cached is not None and cached[0] is interaction:
            return cached[1]
        # they hold their recordings: no more of them than the cassette
        # keeps parsed (see reel_core._parsed)
        if len(self._replays) >= self.cassette.parsed_lines:
            self._replays.clear()
        events = tuple(self._replay_events(interaction, head_only=head_only))
        self._replays[(id(interaction), head_only)] = (interaction, events)
        return events

    def _replay_events(self, interaction: Interaction, *, head_only: bool) -> list[Event]:
        response = interaction.response
        headers = _wire_headers(response.headers)
        timing = self.config.timing
        events: list[Event] = []
        if interaction.grpc is not None:  # its replay plays the rest (GrpcCallReplay)
            return [ResponseHead(response.status, headers), _ENDED_AT_ONCE]
        if response.stream is None:
            body = response.body
            headers += ((b"content-length", str(len(body)).encode()),)
            events.append(ResponseHead(response.status, headers))
            if body and not head_only:
                events.append(Frame(body, 0.0))
            events.append(_ENDED_AT_ONCE)
            return events
        events.append(ResponseHead(response.status, headers))
        if not head_only:
            scale = timing.scale  # a recording's offsets are finite: schedule's product
            if scale:
                events += [Frame(data, at_ms / 1000.0 * scale) for at_ms, data in response.frames]
            else:  # fast: every frame at the head, one float for them all
                events += [Frame(data, _AT_ONCE) for _, data in response.frames]
        if response.cut is not None:
            cut = response.cut
            events.append(Cut(cut.error, cut.detail, timing.schedule(cut.at_ms / 1000.0)))
        else:
            end = timing.schedule(response.end_ms / 1000.0)
            if response.trailers:
                events.append(Trailers(_wire_headers(response.trailers), end))
            events.append(EndOfResponse(end))
        return events

    # -- upstream side -------------------------------------------------------

    def upstream_head(
        self,
        status: int,
        headers: Headers | list[tuple[bytes, bytes]],
        *,
        mono: float,
        sent_at: float | None = None,
        wall: float | None = None,
        reason: bytes = b"",
    ) -> None:
        """The upstream answered ``status`` and ``headers`` at monotonic time
        ``mono``; ``sent_at`` is when the request went out (on the same
        clock: the time to first byte) and ``wall`` the wall-clock time
        (epoch seconds) stored on the line."""
        self._to(Input.UPSTREAM_HEAD)
        self._trailed = False
        headers = normalize_fields(headers)
        passed = tuple((k, v) for k, v in headers if k not in HOP_BY_HOP)
        self._events.append(ResponseHead(status, passed, reason))
        if self._capture is not None:
            self._capture.head = (status, headers, mono, sent_at, wall)

    def upstream_data(self, data: bytes, *, mono: float) -> None:
        """A chunk of the upstream body (as received, still encoded), at
        monotonic time ``mono``."""
        if self._trailed:
            raise self._misuse("upstream_data() after upstream_trailers(): trailers come last")
        self._to(Input.UPSTREAM_DATA)
        if data:
            data = bytes(data)  # one copy at most (none for bytes), shared by both
            self._events.append(Frame(data))
            if self._capture is not None:
                self._capture.chunks.append((data, mono))

    def upstream_trailers(
        self, trailers: Headers | list[tuple[bytes, bytes]], *, mono: float
    ) -> None:
        """The upstream response's trailers (HTTP/2; gRPC's ``grpc-status``
        and ``grpc-message``), at monotonic time ``mono``: after its last
        :meth:`upstream_data`, before :meth:`upstream_end`, at most once.
        Handed on as a :class:`Trailers` event and recorded with the
        response (redacted as its headers are)."""
        if self._trailed:
            raise self._misuse("upstream_trailers() twice: a response has one set of trailers")
        self._to(Input.UPSTREAM_TRAILERS)
        self._trailed = True
        trailers = normalize_fields(trailers)
        self._events.append(Trailers(trailers))
        if self._capture is not None:
            self._capture.trailers = trailers

    def upstream_end(self, *, mono: float) -> None:
        """The upstream response ended cleanly, at monotonic time ``mono``."""
        self._to(Input.UPSTREAM_END)
        self._events.append(EndOfResponse())
        if self._capture is not None:
            capture, self._capture = self._capture, None
            self._unstored = lambda: _built(capture, lambda recorder: recorder.ending(mono))

    def client_left(self, why: str, *, mono: float) -> float:
        """The client stopped reading a forwarded response before its end
        (``why``: it closed the response or the connection, or a write to
        it failed); the seconds the binding reads the upstream on, for the
        recording: ``Config.record_grace`` while a response is recorded
        (record and auto modes, after its head), else 0 (live mode, or no
        answer yet: close the upstream now).

        The binding passes on nothing more to the client, and feeds what it
        reads as before.  If the upstream ends within the grace, the
        exchange is recorded whole: an SDK stops reading at a stream's
        last event (``data: [DONE]``), before the body's end, and the
        stream it saw was whole.  If not (the binding feeds
        :meth:`upstream_error`, whatever went wrong, once the grace ran
        out), the exchange is recorded as the client saw it: the chunks
        fed before it left, cut by the client (``client-closed``, ``why``)
        when it left.

        A binding calls it for any answer its client left midway (a
        replay's write that failed too): :attr:`label` says so."""
        self._left = True
        capture = self._capture
        if capture is None or self.state is not State.STREAMING:
            return 0.0
        capture.left = (len(capture.chunks), why, mono)
        return self.config.record_grace

    def upstream_error(
        self, error: UpstreamError | Abort, detail: str = "", *, mono: float
    ) -> None:
        """The exchange with the upstream ended early: the upstream failed
        (an :class:`UpstreamError`), or the binding ended it (an
        :class:`Abort`: the client left, or the store cannot keep the
        recording, so the request was not forwarded).  Before the head: the
        client gets a 502 (504 for a timeout) saying what failed and
        nothing is recorded.  After it: the stream is cut at monotonic time
        ``mono``, and recorded as cut."""
        if not isinstance(error, (UpstreamError, Abort)):
            raise self._misuse(f"error must be an UpstreamError or an Abort, not {error!r}")
        if self.state is State.AWAIT_UPSTREAM:
            self._to(Input.UPSTREAM_ERROR)
            self._capture = None  # nothing came: nothing is recorded
            self._failure = error
            target = self.redactor.target(self._request.target) if self._request else ""
            if error is Abort.STORE:
                message = (
                    f"Reel did not forward {target}: the cassette store cannot keep its "
                    f"recording ({self.redactor.text(detail)}). Nothing was sent upstream; "
                    "send it again once the store is back."
                )
            else:
                message = f"Reel could not reach the upstream for {target}: {error.value}"
                if detail:
                    message += f" ({self.redactor.text(detail)})"
            # routed: the binding did not choose the upstream (not at fault for a store)
            if self._routed_to is not None and error is not Abort.STORE:
                base = (
                    self.redactor.text(shown_url(self.config.upstream))
                    if self.config.upstream is not None
                    else f"the provider's own host ({self._routed_to})"
                )
                message += (
                    f". Forwards go to {base}: check that it is reachable, or "
                    f"name another base URL with {self.config.hints.upstream}."
                )
            self._events.extend(
                self._own(error.status, "reel_upstream_error", message, failure=error.value)
            )
            return
        self._to(Input.UPSTREAM_ERROR)
        capture, self._capture = self._capture, None
        if capture is not None and capture.left is not None:  # what the client saw
            seen, detail, mono = capture.left
            del capture.chunks[seen:]
            error = Abort.CLIENT_CLOSED
        detail = self.redactor.text(detail)
        self._cut = error.value
        self._events.append(Cut(error.value, detail))
        if capture is not None:
            self._unstored = lambda: _built(
                capture, lambda recorder: recorder.failing(error, detail, mono)
            )

    @property
    def record_due(self) -> bool:
        """Whether a finished forward waits for :meth:`record`."""
        return self._unstored is not None

    def record(self) -> Recorded | None:
        """Build the recording of the finished forward, add it to the
        cassette, and return the line to append; ``None`` when there is
        nothing to record (live mode, a replay, a failure before the head).
        The same as ``take_recording().record()``, the one way a recording
        is made.

        This is the costly part of recording (decoding, redaction, usage,
        the JSON line), so a binding calls it after the client has its whole
        answer.  It raises only on a bug; the recording is then lost.
        """
        pending = self.take_recording()
        return None if pending is None else pending.record()

    def take_recording(self) -> PendingRecording | None:
        """The finished forward's recording, not built yet, taken out of
        the engine (``None`` when there is nothing to record): the engine
        may go on to its next request, and the binding builds and stores
        it later with :meth:`PendingRecording.record`, which gives what
        :meth:`record` would have given then.  Recordings of one cassette
        must be recorded in the order their exchanges ended (identical
        requests are numbered, and replayed, in the order stored), and
        before any decision that looks the cassette up (a replay must see
        every recording whose answer the client has)."""
        if self._unstored is None:
            return None
        build, self._unstored = self._unstored, None
        return PendingRecording(self.cassette, build, self._superseding)

    def _to(self, event: Input) -> None:
        try:
            self.state = transition(self.state, event)
        except LocalProtocolError:
            self.state = State.ERROR
            raise

    def _misuse(self, message: str) -> LocalProtocolError:
        """A caller error: the session is in ERROR, like after a pair the
        transition table does not allow."""
        self.state = State.ERROR
        return LocalProtocolError(message)


class PendingRecording:
    """A finished forward's recording, to build and store later (see
    :meth:`Engine.take_recording`)."""

    __slots__ = ("_build", "_done", "_steps", "_superseding", "cassette")

    def __init__(
        self, cassette: Cassette, build: Callable[[], Steps[Interaction]], superseding: int
    ) -> None:
        #: The cassette the recording goes to.
        self.cassette = cassette
        self._build = build
        self._superseding = superseding
        self._steps: Steps[Recorded] | None = None
        self._done: Recorded | None = None

    def amend(self, change: Callable[[Interaction], Interaction]) -> PendingRecording:
        """Have ``change`` make the stored interaction out of the one built
        (the WebSocket adapter adds a session's messages to its upgrade's);
        before the first :meth:`step`.  Returns itself."""
        if self._steps is not None:
            raise LocalProtocolError("amend a recording before building it")
        build = self._build

        def amended() -> Steps[Interaction]:
            return change((yield from build()))

        self._build = amended
        return self

    def record(self) -> Recorded:
        """Build the recording, add it to its cassette, and return the line
        to append.  It raises only on a bug; the recording is then lost."""
        while (recorded := self.step()) is None:
            pass
        return recorded

    def step(self) -> Recorded | None:
        """Build the next step of the recording: ``None`` while steps are
        left, then what :meth:`record` returns (again on later calls).

        Building a recording takes a few hundred microseconds, in seven
        steps of tens to a hundred or two each: the request redacted and
        keyed, its recorder, the body taken, the response redacted, the
        interaction (its usage), the line, the cassette's add (the only
        step that changes the cassette).  A binding that serves other
        requests meanwhile builds a step at a time and lets them go in
        between: an answer that arrives while a recording is built waits
        for one step, not for the whole.  Recordings of one cassette are
        still built one after the other, in the order their exchanges
        ended (see :meth:`Engine.take_recording`).  It raises only on a
        bug; the recording is then lost (later calls raise
        :class:`LocalProtocolError`)."""
        if self._done is not None:
            return self._done
        if self._steps is None:
            self._steps = self._built()
        try:
            next(self._steps)
        except StopIteration as end:
            if end.value is None:  # a step raised before: nothing is left
                raise LocalProtocolError("this recording's build failed: it is lost") from None
            self._done = end.value
            return self._done
        return None

    def _built(self) -> Steps[Recorded]:
        interaction = yield from self._build()
        yield
        return (yield from _storing(self.cassette, interaction, self._superseding))


def _built(
    capture: _Capture, finish: Callable[[Recorder], Steps[Interaction]]
) -> Steps[Interaction]:
    """A recording's steps up to its interaction: the request redacted and
    keyed, its recorder, then ``finish``'s (the response's)."""
    capture.keyed()
    yield
    recorder = capture.recorder()
    yield
    return (yield from finish(recorder))


def _storing(cassette: Cassette, interaction: Interaction, superseding: int) -> Steps[Recorded]:
    """Add ``interaction`` to ``cassette``, in two steps (its line, then the
    cassette's add); the line to append.

    It joins its request's newest generation, or starts the next one when
    it records a stale recording again (``superseding``: that generation);
    the recording it supersedes (the one at its rank in the older
    generation) is compared with it, and a different shape of response is
    the ``drift`` of the answer."""
    generation = max(cassette.generation(interaction.key, cassette.keying), superseding)
    if generation != interaction.generation:
        interaction = replace(interaction, generation=generation)
    line = interaction.to_line()
    yield
    previous = cassette.predecessor(interaction)
    cassette.add(interaction, line=line)
    if previous is None:
        return Recorded(line, interaction.id, interaction.key)
    from ._shape import drift_of

    drift = drift_of(previous, interaction)
    return Recorded(line, interaction.id, interaction.key, previous.id, drift)


def _new_recorder(
    cassette: Cassette,
    config: Config,
    keying: MatchConfig,
    request: Request,
    keyed: Callable[[], tuple[RecordedRequest, str]],
    scrub: Redactor | _Scrub,
    sent: Callable[[RecordedRequest], str | None] | None,
    max_body: int,
) -> Recorder:
    """The recorder of a forwarded ``request`` to ``cassette`` (decided with
    ``keying``), made when the recording is built; ``sent`` gives the
    digest its line carries (``None``: none); a body decodes to at most
    ``max_body`` bytes.  The response headers ``config`` and the cassette
    name are worked out here, for a recording only."""
    recorded, key = keyed()
    stored_config = cassette.keying
    stored_key = key if stored_config == keying else recorded.key(stored_config)
    # Made when the recording is stored: identical requests recorded at
    # the same time are numbered -2, -3... in the order they are stored.
    seen = cassette.lines_of(stored_key, stored_config)
    digest = None if sent is None else sent(recorded)
    redactor = scrub if isinstance(scrub, Redactor) else scrub()
    drop = cassette.meta.drop_response_headers.union(config.drop_response_headers)
    return new_recorder(
        request,
        recorded,
        stored_key,
        seen,
        redactor,
        digest,
        drop=drop,
        max_body=max_body,
        proto=config.proto,
    )


class _Scrub:
    """The redactor of one forwarded exchange, made when first asked for
    and kept: the settings' redactor, and the credential values the
    request carries (its headers', query's and body's: in record and live
    modes nothing needs them before the request has gone upstream).  The
    request as read for its recording (``plain``) is kept with it."""

    __slots__ = ("_base", "_credentials", "_limit", "_made", "_plain", "_request")

    def __init__(
        self, base: Redactor, request: Request, credentials: frozenset[bytes], limit: int
    ) -> None:
        self._base = base
        self._request = request
        self._credentials = credentials
        self._limit = limit
        self._plain: RecordedRequest | None = None
        self._made: Redactor | None = None

    def plain(self) -> RecordedRequest:
        """The request read for its recording, not redacted."""
        if self._plain is None:
            self._plain = plain_request(self._request, self._limit)
        return self._plain

    def __call__(self) -> Redactor:
        if self._made is None:
            self._made = exchange_redactor(
                self._base, self._request.headers, self._credentials, self.plain()
            )
        return self._made


class _Capture:
    """What the upstream of a recorded exchange sent, kept as it came.  The
    :class:`Recorder` (which needs the request's secret check and key) is
    made from it when the recording is built, after the client's answer."""

    def __init__(self, keyed: Callable[[], object], new_recorder: Callable[[], Recorder]) -> None:
        #: The request redacted and keyed (computed once, then kept).
        self.keyed = keyed
        self._new_recorder = new_recorder
        #: ``Recorder.head``'s arguments (a capture without a head is dropped).
        self.head: tuple[int, Headers, float, float | None, float | None] = (0, (), 0.0, None, None)
        #: ``(chunk, arrival)`` of each body chunk, in order.
        self.chunks: list[tuple[bytes, float]] = []
        #: The response's trailers, if it had any.
        self.trailers: Headers = ()
        #: Once the client left (:meth:`Engine.client_left`): how many
        #: chunks it was sent, why it left, and when.
        self.left: tuple[int, str, float] | None = None

    def recorder(self) -> Recorder:
        """A recorder fed with everything captured."""
        recorder = self._new_recorder()
        recorder.head(*self.head)
        for chunk, now in self.chunks:
            recorder.data(chunk, now)
        if self.trailers:
            recorder.trailers(self.trailers)
        return recorder
