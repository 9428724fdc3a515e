"""The call engine: a call in, a decision out; the call's outcome in, its
cassette line out.  Sans-IO, like :class:`~reel_core.Engine`, and decided
by the same parts: a call is keyed as a request
(:func:`~reel_core._interaction.call_request`), served by the cassette's
cursor (:meth:`~reel_core.Cassette.play`: once each in recorded order,
then the last again or a miss, as :func:`~reel_core._cursor.repeats_last`
says), found near by :func:`~reel_core._fuzzy.nearest`, reported on by
:func:`~reel_core._miss.build_miss_report`, judged stale by
:func:`~reel_core._freshness.staleness` and stored by
:class:`~reel_core.PendingRecording` (its generation, its id).

A binding (``reel_bindings.calls``) drives it::

    engine = CallEngine(cassette, config)
    decision = engine.decide(Call("lookup_order", {"order_id": "A-1"}), wall=time.time())
    if isinstance(decision, CallReplay):   # return (or raise) decision.log.outcome
    elif isinstance(decision, CallMiss):   # raise MissError(decision.report)
    else:                                   # CallRun: call the function, then
        recorded = engine.finish(decision, outcome, total_ms=..., wall=time.time())
        # append recorded.line when it is not None (live mode records nothing)

The engine reads no clock: the wall-clock time comes with each call (for
a ``max_age``) and with its end (for the line's ``ts``), the duration is
the binding's to measure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._calls import Call, CallError, CallLog, CallResult, CallStream
from ._cassette import Cassette
from ._config import Config, Mode
from ._cursor import repeats_last
from ._engine import Engine, PendingRecording
from ._events import Recorded
from ._exchange import interaction_id
from ._interaction import Interaction, call_interaction, call_request, format_timestamp
from ._match import MatchMode
from ._verdict import Verdict

if TYPE_CHECKING:
    from ._freshness import Staleness
    from ._miss import MissReport
    from ._record import Steps

__all__ = ["CallEngine", "CallMiss", "CallReplay", "CallRun"]


@dataclass(frozen=True)
class CallReplay:
    """Answer the call from its recording: return ``log.outcome``'s value
    (yield its values, raise its error)."""

    log: CallLog
    #: The id of the recording served.
    id: str
    key: str
    #: The fuzzy match's similarity (``None``: an exact hit).
    similarity: float | None = None
    #: Why the recording is stale (a ``max_age``), else ``None``.
    stale: Staleness | None = None

    @property
    def verdict(self) -> Verdict:
        """What happened to the call: a recording answered it."""
        return Verdict.HIT


@dataclass(frozen=True)
class CallMiss:
    """No recording answers the call (replay mode): raise
    :class:`~reel_core.MissError` with ``report``."""

    report: MissReport

    @property
    def verdict(self) -> Verdict:
        """What happened to the call: nothing answered it."""
        return Verdict.MISS


@dataclass(frozen=True)
class CallRun:
    """Call the function, then hand its outcome to
    :meth:`CallEngine.finish` (``record``: it is recorded; in live mode it
    is not)."""

    call: Call
    key: str
    record: bool
    #: The generation a re-record of a stale recording starts (else 0).
    superseding: int = 0

    @property
    def verdict(self) -> Verdict:
        """What happened to the call: it ran, recorded or not (live mode)."""
        return Verdict.RECORDED if self.record else Verdict.LIVE


class CallEngine:
    """Decides calls against ``cassette`` with ``config``'s mode, match,
    repeat, ``max_age``, redaction and hint: the settings an
    :class:`~reel_core.Engine` of the same arguments decides requests with
    (it is asked for them).  Not for threads at once: a binding holds the
    lock it holds for the cassette's engines."""

    def __init__(self, cassette: Cassette, config: Config | None = None) -> None:
        settings = Engine(cassette, config)  # the settings in force, read as requests are
        self.cassette = cassette
        self.config = settings.config
        self.match = settings.match
        self._keying = self.match.keying()
        #: The cassette's redactor (its salt, its paths), as for a request.
        self.redactor = settings.redactor
        self._repeat = repeats_last(self.config.mode, self.config.repeat, cassette.meta.repeat)
        max_age = self.config.max_age
        self._max_age = max_age if max_age is not None else cassette.meta.max_age_seconds

    def decide(self, call: Call, *, wall: float | None = None) -> CallReplay | CallMiss | CallRun:
        """What to do with ``call`` (its arguments as the function got
        them; they are redacted here, before the key).  ``wall``, the
        wall-clock time, is needed when a ``max_age`` is in force."""
        mode = self.config.mode
        call = call.redacted(self.redactor)
        recorded = call_request(call)
        key = recorded.key(self._keying)
        superseding = 0
        if mode in (Mode.REPLAY, Mode.AUTO):
            cassette, keying = self.cassette, self._keying
            starts = self._max_age is not None and cassette.plays(key, keying) == 0
            interaction = cassette.play(key, keying, repeat=self._repeat)
            similarity = None
            stale = None if interaction is None else self._staleness(key, wall)
            if stale is not None and interaction is not None and mode is Mode.AUTO and starts:
                superseding = interaction.generation + 1  # recorded again from its start
                interaction = None
            # fuzzy stands in for a call never recorded, as for a request
            if (
                interaction is None
                and self.match.mode is MatchMode.FUZZY
                and not cassette.count(key, keying)
            ):
                from ._fuzzy import nearest

                found = nearest(recorded, cassette, self.match)
                if found is not None:
                    interaction, similarity = found
            if interaction is not None:
                if interaction.call is None:  # a hand-edited line: no call's answer
                    from ._errors import CassetteError

                    raise CassetteError(
                        cassette.name,
                        None,
                        f"recording {interaction.id} has the key of call {call.name!r} "
                        "but records an HTTP exchange: delete it, or record the call again",
                    )
                return CallReplay(interaction.call, interaction.id, key, similarity, stale)
            if mode is Mode.REPLAY:
                return CallMiss(self._miss_report(call, key))
        return CallRun(call, key, mode.records, superseding)

    def _staleness(self, key: str, now: float | None) -> Staleness | None:
        if self._max_age is None:
            return None
        if now is None:
            from ._errors import LocalProtocolError

            raise LocalProtocolError(
                "a max_age is in force: hand the wall-clock time in with each call "
                "(decide(call, wall=time.time()))"
            )
        from ._freshness import staleness

        first = self.cassette.first(key, self._keying)
        return staleness(first.timestamp if first else None, self._max_age, now)

    def _miss_report(self, call: Call, key: str) -> MissReport:
        from ._miss import report_miss

        return report_miss(
            call_request(call),
            key,
            self.cassette,
            self._keying,
            self.match,
            mode=self.config.mode.value,
            hint=self.config.hints.miss,
            what="call",
            nth="call",
        )

    def finish(
        self,
        run: CallRun,
        outcome: CallResult | CallStream | CallError,
        *,
        total_ms: float,
        wall: float | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Recorded | None:
        """The call ``run`` ended with ``outcome`` (as the function gave it:
        it is redacted here) after ``total_ms``, at the wall-clock time
        ``wall``: add its recording to the cassette and return the
        line to append; ``None`` in live mode.  ``meta`` adds facts to the
        line's ``meta``."""
        if not run.record:
            return None
        log = CallLog(run.call, outcome).redacted(self.redactor)
        facts: dict[str, Any] = {"total_ms": round(total_ms, 3)}
        if isinstance(outcome, CallStream):
            facts["yields"] = len(outcome.items)
        facts.update(meta or {})
        cassette, stored = self.cassette, self.cassette.keying
        key = run.key if stored == self._keying else call_request(log.call).key(stored)
        ts = format_timestamp(wall)

        def built() -> Steps[Interaction]:
            yield
            # numbered when stored: calls of one key in the order they are stored
            return call_interaction(
                log,
                keying=stored,
                id=interaction_id(key, cassette.lines_of(key, stored)),
                timestamp=ts,
                meta=facts,
            )

        return PendingRecording(cassette, built, run.superseding).record()
