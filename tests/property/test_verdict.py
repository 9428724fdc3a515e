"""The core says what happened to a request: ``Engine.verdict`` and
``Engine.label`` agree with what the engine did, for every mode, hit or
miss, stale or fresh recording, fuzzy match, refusal, and every way a
forward ends (answered, cut, failed before its head, not sent for the
store, left by its client before or after the head).

What the engine did is read from what a binding sees (the decision, the
status answered, the cut handed out, the line ``record()`` gives), never
from the verdict itself: a label that drifted from the engine's doing (a
"recorded" exchange with no line, a "hit" that was a forward) fails.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from reel_core import (
    Abort,
    Cassette,
    Config,
    Cut,
    Engine,
    Forward,
    MatchConfig,
    MatchMode,
    Miss,
    Mode,
    Recorded,
    Refused,
    Replay,
    Request,
    ResponseHead,
    Signal,
    UpstreamError,
    Verdict,
)

DAY = 86400.0
T0 = 1_700_000_000.0
SSE = [(b"content-type", b"text/event-stream")]
RECORDED_BODY = b'{"model":"m","messages":[{"role":"user","content":"what is reel?"}]}'
#: Close to the recorded one (a fuzzy match finds it), never equal to it.
SIMILAR_BODY = b'{"model":"m","messages":[{"role":"user","content":"what is reel, again?"}]}'
#: How a forward ends: answered whole, cut after its head, failed before
#: it (each upstream failure), not sent for the store, left by its client.
ENDINGS = (
    "answered",
    "cut",
    "left-before-head",
    "left-mid-stream",
    *(f"failed:{e.value}" for e in UpstreamError),
    f"failed:{Abort.STORE.value}",
)


@dataclass(frozen=True)
class Case:
    mode: Mode
    recorded: bool  # the cassette holds a recording of the request
    recorded_cut: bool  # ...whose stream was cut
    stale: bool  # older than the max_age in force
    similar: bool  # the request only resembles it (fuzzy matching on)
    unroutable: bool  # routing on, and the path is no provider's
    ending: str  # how a forward ends


cases = st.builds(
    Case,
    mode=st.sampled_from(Mode),
    recorded=st.booleans(),
    recorded_cut=st.booleans(),
    stale=st.booleans(),
    similar=st.booleans(),
    unroutable=st.booleans(),
    ending=st.sampled_from(ENDINGS),
)


def chat(body: bytes, target: str = "/v1/chat/completions") -> Request:
    return Request("POST", target, ((b"host", b"api.openai.com"),), body)


def cassette_for(case: Case) -> Cassette:
    """A cassette holding the recorded request (or nothing), recorded at T0
    through an engine, as a binding records."""
    cassette = Cassette("c.jsonl")
    if not case.recorded:
        return cassette
    engine = Engine(cassette, Config(mode=Mode.RECORD))
    engine.receive_request(chat(RECORDED_BODY), wall=T0)
    assert isinstance(engine.next_event(), Forward)
    engine.upstream_head(200, SSE, mono=1.0, sent_at=0.9, wall=T0)
    engine.upstream_data(b"data: one\n\n", mono=1.1)
    if case.recorded_cut:
        engine.upstream_error(UpstreamError.RESET, "reset by peer", mono=1.2)
    else:
        engine.upstream_end(mono=1.2)
    while not isinstance(engine.next_event(), Signal):
        pass
    assert engine.record() is not None
    engine.start_next_cycle()
    return cassette


@dataclass
class Seen:
    """What a binding saw of the exchange."""

    decision: Replay | Miss | Refused | Forward | None = None
    status: int = 0
    cut: str | None = None
    recorded: Recorded | None = None
    left: bool = False
    failure: UpstreamError | Abort | None = None


def pull(engine: Engine, seen: Seen) -> None:
    while not isinstance(event := engine.next_event(), Signal):
        if isinstance(event, ResponseHead):
            seen.status = event.status
        elif isinstance(event, Cut):
            seen.cut = event.error
        elif isinstance(event, (Replay, Miss, Refused, Forward)):
            seen.decision = event


def serve(engine: Engine, forward: Forward, ending: str, seen: Seen) -> None:
    """Feed the upstream's side of a forward as ``ending`` says."""
    if ending.startswith("failed:"):
        value = ending.split(":", 1)[1]
        seen.failure = Abort.STORE if value == Abort.STORE.value else UpstreamError(value)
        engine.upstream_error(seen.failure, "it failed", mono=1.0)
        return
    if ending == "left-before-head":
        seen.left = True
        engine.client_left("the client closed the connection", mono=1.0)
        engine.upstream_error(Abort.CLIENT_CLOSED, "gone", mono=1.0)
        return
    engine.upstream_head(200, SSE, mono=1.0, sent_at=0.9, wall=T0 + 30 * DAY)
    pull(engine, seen)
    engine.upstream_data(b"data: two\n\n", mono=1.1)
    if ending == "cut":
        engine.upstream_error(UpstreamError.TIMEOUT, "no next chunk", mono=1.2)
    elif ending == "left-mid-stream":
        seen.left = True
        engine.client_left("the client closed the connection", mono=1.15)
        engine.upstream_error(Abort.CLIENT_CLOSED, "gone", mono=1.2)
    else:
        engine.upstream_end(mono=1.2)


def expected_verdict(seen: Seen) -> Verdict:
    """The verdict, from what the engine did alone."""
    decision = seen.decision
    if isinstance(decision, Replay):
        return Verdict.HIT
    if isinstance(decision, Miss):
        assert seen.status == 404
        return Verdict.MISS
    if isinstance(decision, Refused):
        return Verdict.REFUSED
    assert isinstance(decision, Forward)
    if seen.failure is Abort.STORE:  # not sent: the store cannot keep it
        assert seen.status == 502
        assert seen.recorded is None
        return Verdict.REFUSED
    if seen.failure is not None:  # the upstream failed before answering
        assert seen.status == seen.failure.status
        assert seen.recorded is None
        return Verdict.FAILED
    # a forward left before its head records nothing; any other records iff it should
    assert (seen.recorded is not None) == (decision.record and seen.status == 200)
    return Verdict.RECORDED if decision.record else Verdict.LIVE


def nothing_said(engine: Engine) -> None:
    """Before its first decision, an engine has no verdict."""
    assert engine.verdict is None
    assert engine.label == "-"


@given(cases)
def test_the_verdict_and_label_say_what_the_engine_did(case: Case) -> None:
    cassette = cassette_for(case)
    match = MatchConfig(MatchMode.FUZZY, threshold=0.0) if case.similar else None
    config = Config(
        mode=case.mode,
        match=match,
        max_age=DAY if case.stale else None,
        routing=case.unroutable,
        upstream=None,
    )
    engine = Engine(cassette, config)
    nothing_said(engine)
    target = "/not/a/provider" if case.unroutable else "/v1/chat/completions"
    engine.receive_request(
        chat(SIMILAR_BODY if case.similar else RECORDED_BODY, target), wall=T0 + 30 * DAY
    )
    seen = Seen()
    pull(engine, seen)
    if isinstance(seen.decision, Forward):
        serve(engine, seen.decision, case.ending, seen)
        pull(engine, seen)
        seen.recorded = engine.record()
    verdict = engine.verdict
    assert verdict is expected_verdict(seen)

    label = engine.label
    if verdict is Verdict.FAILED:
        assert seen.failure is not None
        assert label.startswith(f"upstream {seen.failure.value}")
    else:
        assert label.split(" (")[0] == verdict.value
    decision = seen.decision
    stale = isinstance(decision, Replay) and decision.stale is not None
    fuzzy = isinstance(decision, Replay) and decision.similarity is not None
    assert (" (stale)" in label) == (stale and not fuzzy)
    assert ("(fuzzy " in label) == fuzzy
    refreshed = isinstance(decision, Forward) and decision.refresh
    assert ("(the recording was stale)" in label) == (refreshed and verdict is Verdict.RECORDED)
    assert (f" (cut: {seen.cut})" in label) == (seen.cut is not None)
    assert label.endswith(" (client left)") == (seen.left and seen.cut is None)
    # the verdict stays the exchange's until the next one is decided
    engine.start_next_cycle()
    assert engine.verdict is verdict
    assert engine.label == label
