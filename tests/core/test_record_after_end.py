"""A recording is built after the response's end was handed out, so a
binding can give the client its whole answer before the recording work."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reel_core import (
    Cassette,
    Config,
    Cut,
    EndOfResponse,
    Engine,
    Forward,
    Frame,
    Interaction,
    LocalProtocolError,
    Mode,
    PendingRecording,
    Recorded,
    ResponseHead,
    Signal,
    State,
    UpstreamError,
    _engine,
)
from reel_core._http import Headers
from reel_core._literals import Sent, exchange_redactor
from reel_core._record import Recorder
from reel_core._redact import Redactor

from ._helpers import pull, request, state

SSE = [(b"content-type", b"text/event-stream")]


def forwarded(cassette: Cassette, body: bytes = b'{"model":"m","stream":true}') -> Engine:
    session = Engine(cassette, Config(mode=Mode.RECORD))
    session.receive_request(request(body))
    assert isinstance(session.next_event(), Forward)
    session.upstream_head(200, SSE, mono=1.0, sent_at=0.9, wall=1_700_000_000.0)
    session.upstream_data(b"data: 1\n\n", mono=1.1)
    return session


def test_the_end_comes_out_before_the_line_is_built() -> None:
    cassette = Cassette("c")
    session = forwarded(cassette)
    session.upstream_end(mono=1.2)
    assert isinstance(session.next_event(), ResponseHead)
    assert session.next_event() == Frame(b"data: 1\n\n")
    assert session.next_event() == EndOfResponse()
    assert len(cassette) == 0  # nothing built yet: the client is answered first
    assert session.next_event() is Signal.PAUSED  # pulling builds nothing
    assert len(cassette) == 0
    assert session.record_due
    recorded = session.record()
    assert isinstance(recorded, Recorded)
    assert len(cassette) == 1
    (stored,) = Cassette.loads(recorded.line).interactions()
    assert stored.response.frames == ((100.0, b"data: 1\n\n"),)
    assert session.record() is None  # recorded once
    assert session.next_event() is Signal.PAUSED
    session.start_next_cycle()
    assert state(session) is State.IDLE


def test_a_cut_comes_out_before_the_line_is_built() -> None:
    cassette = Cassette("c")
    session = forwarded(cassette)
    session.upstream_error(UpstreamError.RESET, "peer reset", mono=1.3)
    events, _ = pull(session)
    assert [type(e) for e in events] == [ResponseHead, Frame, Cut]
    recorded = session.record()
    assert isinstance(recorded, Recorded)
    (stored,) = Cassette.loads(recorded.line).interactions()
    assert stored.response.cut is not None
    assert stored.response.cut.error == "reset"


def test_the_next_exchange_waits_for_the_line_to_be_recorded() -> None:
    session = forwarded(Cassette("c"))
    session.upstream_end(mono=1.2)
    for _ in range(3):  # head, frame, end
        session.next_event()
    with pytest.raises(LocalProtocolError, match=r"call record\(\) for the finished exchange"):
        session.start_next_cycle()
    assert state(session) is State.ERROR


def test_a_failure_while_building_is_raised_by_record(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: Recorder, now: float) -> None:
        raise RuntimeError("bug in the recorder")

    monkeypatch.setattr(Recorder, "_finish", broken)
    cassette = Cassette("c")
    session = forwarded(cassette)
    session.upstream_end(mono=1.2)
    events = [session.next_event() for _ in range(3)]
    assert isinstance(events[-1], EndOfResponse)  # the client's answer is whole
    assert session.next_event() is Signal.PAUSED  # pulling events never raises it
    with pytest.raises(RuntimeError, match="bug in the recorder"):
        session.record()
    assert len(cassette) == 0
    assert session.record() is None  # raised once, not again


def test_identical_requests_finishing_together_are_numbered_when_stored() -> None:
    cassette = Cassette("c")
    first, second = forwarded(cassette), forwarded(cassette)  # both decided before either ends
    first.upstream_end(mono=1.2)
    second.upstream_end(mono=1.2)
    for s in (first, second):
        pull(s)
    lines = [r for s in (first, second) if (r := s.record()) is not None]
    assert [r.interaction_id for r in lines] == [lines[0].key[7:19], lines[0].key[7:19] + "-2"]
    assert len(cassette) == 2


def test_a_chunk_is_passed_on_uncopied() -> None:
    session = forwarded(Cassette("c"))
    chunk = b"data: 2\n\n"
    session.upstream_data(chunk, mono=1.15)
    events, _ = pull(session)
    frame = events[-1]
    assert isinstance(frame, Frame)
    assert frame.data is chunk  # bytes are passed on as they are, not copied


def test_a_recording_taken_out_is_recorded_later_as_record_would_have() -> None:
    """``take_recording`` lets the engine go on at once: the line built
    later, after the engine served another request on another cassette, is
    the line ``record()`` gives, and goes to the cassette of its exchange."""
    first, other = Cassette("first"), Cassette("other")
    chosen = [first]
    engine = Engine(lambda _request: chosen[0], Config(mode=Mode.RECORD))
    reference = forwarded(Cassette("reference"))
    for session in (engine, reference):
        if session is engine:
            session.receive_request(request(b'{"model":"m","stream":true}'))
            assert isinstance(session.next_event(), Forward)
            session.upstream_head(200, SSE, mono=1.0, sent_at=0.9, wall=1_700_000_000.0)
            session.upstream_data(b"data: 1\n\n", mono=1.1)
        session.upstream_end(mono=1.2)
        pull(session)
    pending = engine.take_recording()
    assert isinstance(pending, PendingRecording)
    assert pending.cassette is first
    assert engine.take_recording() is None  # taken once
    assert not engine.record_due
    engine.start_next_cycle()  # nothing waits on it
    chosen[0] = other
    engine.receive_request(request(b'{"model":"n"}'))
    assert isinstance(engine.next_event(), Forward)
    assert engine.cassette is other
    recorded = pending.record()
    expected = reference.record()
    assert expected is not None
    assert recorded.line == expected.line
    assert (len(first), len(other)) == (1, 0)


def test_recordings_taken_out_are_numbered_in_the_order_they_are_recorded() -> None:
    cassette = Cassette("c")
    first, second = forwarded(cassette), forwarded(cassette)
    for s in (first, second):
        s.upstream_end(mono=1.2)
        pull(s)
    taken = [first.take_recording(), second.take_recording()]
    ids = [p.record().interaction_id for p in taken if p is not None]
    assert ids == [ids[0], ids[0] + "-2"]


def test_an_amended_recording_stores_what_the_change_made() -> None:
    """``amend`` is how an adapter adds to a recording (the WebSocket one
    adds a session's messages): the change sees the built interaction, and
    what it returns is stored and keyed, through the one recording path;
    once building began, a change comes too late."""
    cassette = Cassette("c")
    engine = forwarded(cassette)
    engine.upstream_end(mono=1.2)
    pull(engine)
    pending = engine.take_recording()
    assert pending is not None
    seen: list[str] = []

    def change(interaction: Interaction) -> Interaction:
        seen.append(interaction.id)
        return replace(interaction, provider="amended")

    assert pending.amend(change) is pending
    recorded = pending.record()
    assert seen == [recorded.interaction_id]
    assert b'"provider":"amended"' in recorded.line
    assert [i.provider for i in cassette.interactions()] == ["amended"]
    with pytest.raises(LocalProtocolError, match="before building"):
        pending.amend(change)


@pytest.mark.parametrize("mode", [Mode.RECORD, Mode.LIVE])
def test_a_forwards_credential_values_are_read_when_first_asked_for(
    monkeypatch: pytest.MonkeyPatch, mode: Mode
) -> None:
    """Deciding a forward reads none of the request's credential values
    (nothing needs them before the request has gone upstream); the
    exchange's redactor, asked for later, still scrubs them, from what is
    said and from the recording, and is made once for both."""
    made: list[bytes] = []

    def spy(
        base: Redactor, headers: Headers, names: frozenset[bytes], sent: Sent | None = None
    ) -> Redactor:
        made.append(dict(headers)[b"x-api-key"])
        return exchange_redactor(base, headers, names, sent)

    monkeypatch.setattr(_engine, "exchange_redactor", spy)
    key = b"sk-ant-api03-" + b"k" * 40
    cassette = Cassette("c")
    engine = Engine(cassette, Config(mode=mode))
    body = b'{"model":"m","echo":"' + key[::-1] + b'"}'  # not a key shape
    engine.receive_request(request(body, headers=[(b"x-api-key", key[::-1])]))
    assert isinstance(engine.next_event(), Forward)
    assert made == []  # not on the request's way upstream
    engine.upstream_head(200, [(b"content-type", b"application/json")], mono=1.0)
    engine.upstream_data(b'{"echo": "' + key[::-1] + b'"}', mono=1.1)
    engine.upstream_end(mono=1.2)
    pull(engine)
    assert key[::-1].decode() not in engine.redactor.text(f"failed: {key[::-1].decode()}")
    assert engine.redactor is engine.redactor
    pending = engine.take_recording()
    engine.start_next_cycle()
    if mode is Mode.LIVE:
        assert pending is None
    else:
        assert pending is not None
        line = pending.record().line
        assert key[::-1] not in line  # the echo and the request body, scrubbed
        assert b"REDACTED" in line
    assert len(made) == 1  # one redactor for the exchange: what is said and the line


def _taken(cassette: Cassette, cut: bool = False) -> PendingRecording:
    session = forwarded(cassette)
    if cut:
        session.upstream_error(UpstreamError.RESET, "peer reset", mono=1.3)
    else:
        session.upstream_end(mono=1.2)
    pull(session)
    pending = session.take_recording()
    assert pending is not None
    return pending


@pytest.mark.parametrize("cut", [False, True], ids=["end", "cut"])
def test_a_recording_built_step_by_step_is_the_one_record_builds(cut: bool) -> None:
    """A binding may build a recording a step at a time, serving others in
    between: the cassette changes only at the last step, and the line is
    the one ``record()`` builds at once."""
    whole, stepped = Cassette("c"), Cassette("c")
    expected = _taken(whole, cut).record()
    pending = _taken(stepped, cut)
    steps = 1
    while (recorded := pending.step()) is None:
        assert len(stepped) == 0  # nothing stored before the last step
        steps += 1
    assert steps >= 7  # keyed, recorder, body, redacted, interaction, line, stored
    assert recorded == expected
    assert len(stepped) == 1
    assert pending.step() is recorded  # done: asked again, the same line
    assert pending.record() is recorded


def test_a_step_that_fails_loses_that_recording_only(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: Recorder, now: float) -> None:
        raise RuntimeError("bug in the recorder")

    cassette = Cassette("c")
    with monkeypatch.context() as patch:
        patch.setattr(Recorder, "_finish", broken)
        pending = _taken(cassette)
        assert pending.step() is None  # the request keyed
        assert pending.step() is None  # its recorder
        with pytest.raises(RuntimeError, match="bug in the recorder"):
            pending.step()  # the body taken
    with pytest.raises(LocalProtocolError, match="build failed"):
        pending.step()  # nothing half-built is stored later
    assert len(cassette) == 0
    assert _taken(cassette).record().line  # the next recording is not affected
    assert len(cassette) == 1
