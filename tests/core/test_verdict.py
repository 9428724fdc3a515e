"""The core says what happened to each request (``reel_core._verdict``):
the rule's rows one by one, for the cases the engine property
(``tests/property/test_verdict.py``) does not walk: a replay its client
left, the viewer, a test's outcome gate."""

from __future__ import annotations

import pytest

from reel_core import (
    Abort,
    Config,
    Engine,
    Forward,
    Miss,
    Mode,
    Refused,
    Replay,
    Signal,
    UpstreamError,
    Verdict,
)
from reel_core._verdict import label_of, verdict_of, websocket_label
from reel_core.tools import routed_verdict

from ._helpers import cassette_of, interaction, pull, request

HIT = interaction(body=b'{"model":"m","messages":[]}')


def test_a_replay_its_client_left_says_so_and_gives_no_grace() -> None:
    engine = Engine(cassette_of(HIT), Config(mode=Mode.REPLAY))
    engine.receive_request(request())
    assert isinstance(engine.next_event(), Replay)
    assert engine.client_left("a write to the client failed", mono=1.0) == 0.0
    pull(engine)
    assert (engine.verdict, engine.label) == (Verdict.HIT, "hit (client left)")
    engine.start_next_cycle()
    # the next exchange starts with a clean slate
    engine.receive_request(request())
    assert isinstance(engine.next_event(), Replay)
    assert engine.label == "hit"


def test_the_viewer_is_its_own_verdict() -> None:
    """A request an HTTP adapter routed to the viewer never reaches the
    engine: its verdict is the answer's (a refusal is REFUSED)."""
    assert routed_verdict(200) is Verdict.VIEWER
    assert routed_verdict(304) is Verdict.VIEWER
    assert routed_verdict(403) is Verdict.REFUSED
    assert routed_verdict(405) is Verdict.REFUSED


def test_only_a_dropped_recording_changes_at_the_gate() -> None:
    for verdict in Verdict:
        assert verdict.gated(True) is verdict
        expected = Verdict.DROPPED if verdict is Verdict.RECORDED else verdict
        assert verdict.gated(False) is expected


@pytest.mark.parametrize(
    ("failure", "verdict", "label"),
    [
        (None, Verdict.RECORDED, "recorded (the recording was stale)"),
        (UpstreamError.TIMEOUT, Verdict.FAILED, "upstream timeout"),
        (Abort.STORE, Verdict.REFUSED, "refused"),
        (
            Abort.CLIENT_CLOSED,
            Verdict.RECORDED,
            "recorded (the recording was stale) (client left)",
        ),
    ],
)
def test_a_forward_s_words_by_how_it_ended(
    failure: UpstreamError | None, verdict: Verdict, label: str
) -> None:
    refresh = Forward(request(), "sha256:k", True, refresh=True)
    assert verdict_of(refresh, failure) is verdict
    assert label_of(refresh, failure) == label
    live = Forward(request(), None, False)
    assert label_of(live, None, "reset", left=True) == "live (cut: reset)"  # the cut says it


def test_decisions_and_websocket_sessions_words() -> None:
    from reel_core import MissReport

    report = MissReport(
        "c", "replay", "normalized", "sha256:k", "POST", "/v1", "no recording matches", 0, None
    )
    assert label_of(Miss(request(), report)) == "miss"
    assert label_of(Refused(request(), 421, "no upstream")) == "refused"
    fuzzy = Replay(request(), "one", "sha256:k", similarity=0.875)
    assert label_of(fuzzy) == "hit (fuzzy 0.88)"
    assert websocket_label("hit (stale)", False, "complete: the server closed") == (
        "hit (stale) (complete: the server closed)"
    )
    assert websocket_label("hit", True, "client message 0 does not match") == "miss"
    assert websocket_label("recorded", False, None) == "recorded"


def test_nothing_is_said_before_a_decision() -> None:
    engine = Engine(cassette_of(), Config())
    assert engine.verdict is None
    assert engine.label == "-"
    assert engine.next_event() is Signal.NEED_DATA


def test_a_cut_replay_taken_whole_is_labelled_cut() -> None:
    from reel_core import Cut, StreamCut

    cut = interaction(
        stream="sse",
        frames=((0.0, b"data: one\n\n"),),
        cut=StreamCut(5.0, "reset", "reset by peer"),
    )
    engine = Engine(cassette_of(cut), Config(mode=Mode.REPLAY))
    engine.receive_request(request())
    assert isinstance(engine.next_event(), Replay)
    events = engine.take_replay()
    assert isinstance(events[-1], Cut)
    assert (engine.verdict, engine.label) == (Verdict.HIT, "hit (cut: reset)")
