"""The call engine: a call is decided as a request is (modes, sequences,
staleness, fuzzy, misses) and stored through the one recording path."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from reel_core import (
    CallEngine,
    CallLog,
    Cassette,
    CassetteError,
    CassetteMeta,
    Config,
    Interaction,
    LocalProtocolError,
    MatchConfig,
    MatchMode,
    Mode,
    RecordedRequest,
    RecordedResponse,
    Redactor,
    Verdict,
)
from reel_core._interaction import call_request
from reel_core._miss import closest_to
from reel_core.tools import (
    Call,
    CallError,
    CallMiss,
    CallReplay,
    CallResult,
    CallRun,
    CallStream,
    read_line,
)

NOW = 1_800_000_000.0
LOOKUP = Call("lookup_order", {"order_id": "A-1"})


def record(cassette: Cassette, call: Call, value: object, *, at: float = NOW) -> Interaction:
    engine = CallEngine(cassette, Config(mode=Mode.RECORD))
    run = engine.decide(call)
    assert isinstance(run, CallRun)
    assert run.record
    recorded = engine.finish(run, CallResult(value), total_ms=1.23456, wall=at)
    assert recorded is not None
    return read_line(recorded.line[:-1])


def test_record_then_replay_in_order_then_the_last_again() -> None:
    cassette = Cassette()
    first = record(cassette, LOOKUP, 1)
    second = record(cassette, LOOKUP, 2)
    assert (first.id[-2:], second.id[-2:]) == (first.id[-2:], "-2")
    assert first.meta == {"total_ms": 1.235}
    assert first.timestamp == "2027-01-15T08:00:00.000Z"
    # (a recording made counts as served once: a replay starts from the file)
    engine = CallEngine(Cassette.loads(cassette.dumps()), Config(mode=Mode.REPLAY))
    got = [engine.decide(LOOKUP) for _ in range(3)]
    assert [g.log.outcome for g in got if isinstance(g, CallReplay)] == [
        CallResult(1),
        CallResult(2),
        CallResult(2),
    ]


def test_live_records_nothing_and_auto_records_a_miss() -> None:
    cassette = Cassette()
    live = CallEngine(cassette, Config(mode=Mode.LIVE))
    run = live.decide(LOOKUP)
    assert isinstance(run, CallRun)
    assert not run.record
    assert live.finish(run, CallResult(1), total_ms=1.0) is None
    assert len(cassette) == 0
    auto = CallEngine(cassette, Config(mode=Mode.AUTO))
    run = auto.decide(LOOKUP)
    assert isinstance(run, CallRun)
    assert run.record
    stream = CallStream(((0.5, "a"),), 1.0)
    recorded = auto.finish(run, stream, total_ms=1.0, meta={"note": "x"})
    assert recorded is not None
    assert json.loads(recorded.line)["meta"] == {"total_ms": 1.0, "yields": 1, "note": "x"}
    again = CallEngine(Cassette.loads(cassette.dumps()), Config(mode=Mode.AUTO)).decide(LOOKUP)
    assert isinstance(again, CallReplay)
    assert again.log.outcome == stream


def test_a_stale_recording_is_served_in_replay_and_recorded_again_in_auto() -> None:
    cassette = Cassette(meta=CassetteMeta(max_age="1h"))
    old = record(cassette, LOOKUP, "old", at=NOW - 7200)
    replay = CallEngine(cassette, Config(mode=Mode.REPLAY))
    served = replay.decide(LOOKUP, wall=NOW)
    assert isinstance(served, CallReplay)
    assert served.stale is not None
    auto = CallEngine(Cassette.loads(cassette.dumps()), Config(mode=Mode.AUTO))
    run = auto.decide(LOOKUP, wall=NOW)
    assert isinstance(run, CallRun)
    assert run.superseding == old.generation + 1
    recorded = auto.finish(run, CallResult("new"), total_ms=1.0, wall=NOW)
    assert recorded is not None
    assert recorded.supersedes == old.id
    fresh = CallEngine(Cassette.loads(auto.cassette.dumps()), Config(mode=Mode.AUTO)).decide(
        LOOKUP, wall=NOW
    )
    assert isinstance(fresh, CallReplay)
    assert fresh.log.outcome == CallResult("new")
    with pytest.raises(LocalProtocolError, match="hand the wall-clock time in"):
        CallEngine(cassette, Config(mode=Mode.REPLAY)).decide(LOOKUP)


def test_a_miss_names_the_closest_call_and_never_an_http_exchange() -> None:
    cassette = Cassette()
    record(cassette, Call("other", {"q": "x"}), 1)
    http = RecordedRequest("POST", "/v1/chat/completions", (), b'{"args":{"order_id":"A-1"}}')
    cassette.add(Interaction(http.key(MatchConfig()), "000000000001", http, RecordedResponse(200)))
    miss = CallEngine(cassette, Config(mode=Mode.REPLAY)).decide(LOOKUP)
    assert isinstance(miss, CallMiss)
    assert miss.report.closest is not None
    assert miss.report.closest.path == "tool:other"
    assert miss.report.reason == "no recording matches"
    # and a request's closest is never a call
    found = closest_to(RecordedRequest("POST", "/v1/x", (), b"{}"), cassette, MatchConfig())
    assert found is not None
    assert found[0].call is None


def test_fuzzy_serves_the_nearest_call_and_its_miss_reports_the_nearest_below() -> None:
    cassette = Cassette()
    record(cassette, Call("ask", {"q": "What is the capital of France?"}), "Paris")
    fuzzy = Config(mode=Mode.REPLAY, match=MatchConfig(MatchMode.FUZZY, threshold=0.8))
    near = CallEngine(cassette, fuzzy).decide(Call("ask", {"q": "what's the capital of France"}))
    assert isinstance(near, CallReplay)
    assert near.similarity is not None
    assert near.similarity > 0.8
    far = CallEngine(cassette, fuzzy).decide(Call("ask", {"q": "How do magnets work?"}))
    assert isinstance(far, CallMiss)
    assert far.report.reason == "no recording reaches the fuzzy threshold 0.8"
    assert far.report.closest is not None  # below the threshold, still shown
    empty = CallEngine(cassette, fuzzy).decide(Call("ask", {"q": None}))
    assert isinstance(empty, CallMiss)  # no text: nothing to be near


def test_past_the_recorded_count_with_repeat_off() -> None:
    cassette = Cassette(meta=CassetteMeta(repeat=False))
    record(cassette, LOOKUP, 1)
    engine = CallEngine(Cassette.loads(cassette.dumps()), Config(mode=Mode.REPLAY))
    assert isinstance(engine.decide(LOOKUP), CallReplay)
    miss = engine.decide(LOOKUP)
    assert isinstance(miss, CallMiss)
    assert miss.report.served == 1
    assert "this call was recorded once" in miss.report.reason


def test_a_hand_edited_http_line_at_a_calls_key_is_refused() -> None:
    request = call_request(LOOKUP)
    cassette = Cassette()
    cassette.add(
        Interaction(request.key(MatchConfig()), "000000000002", request, RecordedResponse(200)),
        played=False,
    )
    with pytest.raises(CassetteError, match="records an HTTP exchange"):
        CallEngine(cassette, Config(mode=Mode.REPLAY)).decide(LOOKUP)


def test_arguments_are_redacted_before_the_key_and_results_before_disk() -> None:
    secret = "sk-proj-" + "Q1w2E3r4" * 4
    cassette = Cassette()
    engine = CallEngine(cassette, Config(mode=Mode.RECORD))
    run = engine.decide(Call("t", {"key": secret}))
    assert isinstance(run, CallRun)
    assert secret not in json.dumps(run.call.args)
    error = CallError("E", "m", secret)
    recorded = engine.finish(run, error, total_ms=0.0)
    assert recorded is not None
    assert secret.encode() not in recorded.line
    # a live call carrying the secret finds it
    replay = CallEngine(Cassette.loads(cassette.dumps()), Config(mode=Mode.REPLAY)).decide(
        Call("t", {"key": secret})
    )
    assert isinstance(replay, CallReplay)


def test_keys_under_other_match_settings_than_the_cassettes() -> None:
    cassette = Cassette()
    ignoring = Config(
        mode=Mode.RECORD,
        match=MatchConfig(MatchMode.IGNORE_FIELDS, ignore_fields=("args.request_id",)),
    )
    engine = CallEngine(cassette, ignoring)
    run = engine.decide(Call("f", {"request_id": "r-1"}))
    assert isinstance(run, CallRun)
    recorded = engine.finish(run, CallResult(1), total_ms=0.0)
    assert recorded is not None
    assert recorded.key == call_request(Call("f", {"request_id": "r-1"})).key(MatchConfig())
    served = CallEngine(
        Cassette.loads(cassette.dumps()), replace(ignoring, mode=Mode.REPLAY)
    ).decide(Call("f", {"request_id": "r-2"}))
    assert isinstance(served, CallReplay)


def test_reel_redact_scrubs_a_call_line_and_keys_it_again() -> None:
    secret = "sk-proj-" + "Z9x8C7v6" * 4
    call = Call("t", {"prompt": secret})
    request = call_request(call)  # as an import might have written it: not redacted
    log_line = Interaction(
        request.key(MatchConfig()),
        "000000000003",
        request,
        RecordedResponse(200),
        endpoint="CALL tool:t",
        call=CallLog(call, CallResult({"echo": secret})),
    )
    redacted = log_line.redacted(Redactor(), MatchConfig())
    assert secret.encode() not in redacted.to_line()
    assert redacted.key != log_line.key
    assert redacted.key == redacted.request.key(MatchConfig())
    assert redacted.endpoint == "CALL tool:t"
    clean = record(Cassette(), Call("t", {"prompt": "hi"}), 1)
    assert clean.redacted(Redactor(), MatchConfig()) is clean


def test_http_exporters_leave_calls_out_and_say_so() -> None:
    from reel_core._formats import har_export, vcr_export

    cassette = Cassette()
    call = record(cassette, LOOKUP, 1)
    http = RecordedRequest("GET", "/v1/models")
    exchange = Interaction(http.key(MatchConfig()), "000000000004", http, RecordedResponse(200))
    both = [call, exchange]
    har = json.loads(har_export.export(both))
    assert [e["request"]["url"] for e in har["log"]["entries"]] == ["http://localhost/v1/models"]
    assert har_export.losses(both) == ["1 tool call: NOT exported (a HAR holds HTTP only)"]
    assert har_export.losses([exchange]) == []
    assert vcr_export.losses(both) == ["1 tool call: NOT exported (vcrpy holds HTTP only)"]
    assert b"/v1/models" in vcr_export.export(both)
    assert b"lookup_order" not in vcr_export.export(both)


@pytest.mark.parametrize(
    ("mode", "recorded", "verdict"),
    [
        (Mode.REPLAY, True, Verdict.HIT),
        (Mode.REPLAY, False, Verdict.MISS),
        (Mode.AUTO, False, Verdict.RECORDED),
        (Mode.RECORD, True, Verdict.RECORDED),
        (Mode.LIVE, True, Verdict.LIVE),
    ],
)
def test_the_core_says_what_happened_to_a_call(
    mode: Mode, recorded: bool, verdict: Verdict
) -> None:
    """A call's decision carries its verdict, as an HTTP exchange's does:
    the bindings count it, never label it themselves."""
    cassette = Cassette()
    if recorded:
        record(cassette, LOOKUP, 1)
    decision = CallEngine(Cassette.loads(cassette.dumps()), Config(mode=mode)).decide(LOOKUP)
    assert decision.verdict is verdict
