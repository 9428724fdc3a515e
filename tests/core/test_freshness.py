"""Freshness in the core: max_age, generations of recordings, stale replays."""

from __future__ import annotations

import json

import pytest

from reel_core import (
    Cassette,
    CassetteError,
    CassetteMeta,
    Config,
    ConfigError,
    Engine,
    Forward,
    LocalProtocolError,
    MatchConfig,
    MatchMode,
    Miss,
    Mode,
    Recorded,
    Replay,
    Request,
    Session,
    Signal,
)
from reel_core.tools import Staleness, format_age, recorded_epoch, staleness

DAY = 86400.0
T0 = 1_700_000_000.0  # when the first recordings were made

CHAT = Request(
    "POST",
    "/v1/chat/completions",
    ((b"content-type", b"application/json"),),
    b'{"model":"m","messages":[{"role":"user","content":"hi"}]}',
)


def run(
    cassette: Cassette,
    config: Config,
    now: float | None,
    answer: tuple[int, bytes] = (200, b'{"id":"x","choices":[]}'),
    request: Request = CHAT,
) -> tuple[Replay | Forward | Miss, Recorded | None, bytes]:
    """One request through an engine at wall-clock ``now``; a forward is
    answered ``answer``, stamped ``now``.  The decision, the recorded line
    (if any) and the body the client got."""
    engine = Engine(cassette, config)
    engine.receive_request(request, wall=now)
    decision = engine.next_event()
    assert isinstance(decision, (Replay, Forward, Miss))
    body = b""
    if isinstance(decision, Forward):
        status, data = answer
        head = [(b"content-type", b"application/json")]
        engine.upstream_head(status, head, mono=0.0, sent_at=0.0, wall=now)
        engine.upstream_data(data, mono=0.01)
        engine.upstream_end(mono=0.02)
    while not isinstance(event := engine.next_event(), Signal):
        data = getattr(event, "data", b"")
        body += data if isinstance(data, bytes) else b""
    recorded = engine.record()
    engine.start_next_cycle()
    return decision, recorded, body


def lines_of(cassette: Cassette) -> list[dict[str, object]]:
    return [json.loads(line) for line in cassette.dumps().splitlines()[1:]]


# -- the values --------------------------------------------------------------------


def test_recorded_epoch_reads_what_reel_writes_and_refuses_nothing() -> None:
    assert recorded_epoch("2023-11-14T22:13:20.000Z") == T0
    assert recorded_epoch("2023-11-14T22:13:20+00:00") == T0
    assert recorded_epoch("2023-11-14T23:13:20+01:00") == T0
    assert recorded_epoch("2023-11-14T22:13:20") == T0  # no zone: UTC
    assert recorded_epoch(None) is None
    assert recorded_epoch("yesterday") is None


def test_staleness_is_judged_against_the_time_handed_in() -> None:
    ts = "2023-11-14T22:13:20.000Z"
    assert staleness(ts, 7 * DAY, T0 + 7 * DAY) is None  # exactly max_age: still fresh
    stale = staleness(ts, 7 * DAY, T0 + 9 * DAY)
    assert stale == Staleness(ts, 9 * DAY, 7 * DAY)
    assert stale.describe() == "recorded 9d ago, max_age 7d"
    assert staleness(ts, 60, T0 - DAY) is None  # stamped in the future: a wrong clock
    unknown = staleness(None, 3600, T0)
    assert unknown == Staleness(None, None, 3600)
    assert unknown.describe() == "age unknown (no time of recording), max_age 1h"
    odd = staleness("noon", 90, T0)
    assert odd is not None
    assert odd.describe() == "age unknown (ts 'noon'), max_age 1m"


def test_format_age() -> None:
    assert [format_age(s) for s in (0, 59.9, 60, 3599, 3600, DAY - 1, 10 * DAY)] == [
        "0s",
        "59s",
        "1m",
        "59m",
        "1h",
        "23h",
        "10d",
    ]
    assert format_age(-5) == "0s"


def test_config_refuses_a_max_age_that_is_not_positive() -> None:
    with pytest.raises(ConfigError, match="max_age must be more than zero"):
        Config(max_age=0)
    assert Config(max_age=1.5).max_age == 1.5


def test_meta_max_age_round_trips_and_bad_ones_name_the_line() -> None:
    meta = CassetteMeta(max_age="7d")
    cassette = Cassette.loads(meta.to_line(), name="c.jsonl")
    assert cassette.meta.max_age == "7d"
    assert cassette.meta.max_age_seconds == 7 * DAY
    assert json.loads(cassette.meta.to_line())["_meta"]["max_age"] == "7d"
    seconds = Cassette.loads(b'{"_meta":{"schema":1,"max_age":90}}\n')
    assert seconds.meta.max_age_seconds == 90
    assert CassetteMeta().max_age_seconds is None
    for bad in ('"soon"', "0", "true", '["7d"]', "-1"):
        with pytest.raises(CassetteError, match=r'c.jsonl:1: "_meta.max_age": bad duration'):
            Cassette.loads(b'{"_meta":{"schema":1,"max_age":%s}}\n' % bad.encode(), name="c.jsonl")


def test_a_generation_on_a_line_is_checked() -> None:
    cassette = Cassette()
    run(cassette, Config(mode=Mode.AUTO), T0)
    line = lines_of(cassette)[0]
    assert "gen" not in line  # generation 0 is not written
    for bad in (-1, "1", True, 1.5):
        line["gen"] = bad
        with pytest.raises(CassetteError, match='"gen" must be a whole number'):
            Cassette.loads(json.dumps(line).encode() + b"\n").validate()


# -- auto mode: a stale recording is recorded again ---------------------------------


def test_auto_re_records_a_stale_recording_and_the_new_line_supersedes_it() -> None:
    cassette = Cassette()
    run(cassette, Config(mode=Mode.AUTO), T0, (200, b'{"v":1}'))
    data = cassette.dumps()

    # a week and a day later, with max_age 7d: forwarded, recorded as generation 1
    later = Cassette.loads(data)
    decision, recorded, body = run(
        later, Config(mode=Mode.AUTO, max_age=7 * DAY), T0 + 8 * DAY, (200, b'{"v":2}')
    )
    assert isinstance(decision, Forward)
    assert decision.refresh
    assert recorded is not None
    assert recorded.supersedes == lines_of(later)[0]["id"]
    assert recorded.drift is None  # the same shape
    assert body == b'{"v":2}'
    assert [line.get("gen", 0) for line in lines_of(later)] == [0, 1]

    # replayed: the newest line answers; the old one stays until compact
    again = Cassette.loads(later.dumps())
    assert len(again) == 2
    for _ in range(3):
        decision, _, body = run(again, Config(mode=Mode.REPLAY), T0 + 8 * DAY)
        assert isinstance(decision, Replay)
        assert body == b'{"v":2}'


def test_a_fresh_recording_is_served_in_auto_mode() -> None:
    cassette = Cassette()
    run(cassette, Config(mode=Mode.AUTO), T0, (200, b'{"v":1}'))
    loaded = Cassette.loads(cassette.dumps())
    decision, recorded, body = run(loaded, Config(mode=Mode.AUTO, max_age=7 * DAY), T0 + DAY)
    assert isinstance(decision, Replay)
    assert decision.stale is None
    assert recorded is None
    assert body == b'{"v":1}'


def test_a_429_then_200_pair_is_re_recorded_as_one_generation() -> None:
    """The retry after a re-recorded 429 is recorded into the new
    generation (never served the old 200), and replay then serves the new
    429 and the new 200 in order."""
    cassette = Cassette()
    auto = Config(mode=Mode.AUTO)
    run(cassette, auto, T0, (429, b'{"error":{"type":"rate_limit"}}'))
    run(cassette, auto, T0 + 1, (200, b'{"v":1}'))
    old = lines_of(cassette)

    later = Cassette.loads(cassette.dumps())
    fresh = Config(mode=Mode.AUTO, max_age=7 * DAY)
    now = T0 + 30 * DAY
    first, rec1, body1 = run(later, fresh, now, (429, b'{"error":{"type":"rate_limit"}}'))
    second, rec2, body2 = run(later, fresh, now + 1, (200, b'{"v":2,"extra":true}'))
    assert isinstance(first, Forward)
    assert first.refresh
    assert isinstance(second, Forward)  # not the old 200: the sequence starts over
    assert not second.refresh  # it joins the generation the 429 started
    assert body1.startswith(b'{"error"')
    assert body2 == b'{"v":2,"extra":true}'
    assert rec1 is not None
    assert rec2 is not None
    assert (rec1.supersedes, rec2.supersedes) == (old[0]["id"], old[1]["id"])
    assert rec1.drift is None
    assert rec2.drift is not None
    assert rec2.drift.changes == ("+ extra: boolean",)
    assert rec2.drift.old_id == old[1]["id"]
    assert "drift POST /v1/chat/completions" in rec2.drift.line()
    ids = [line["id"] for line in lines_of(later)]
    assert len(set(ids)) == 4  # every line keeps its own id
    assert [line.get("gen", 0) for line in lines_of(later)] == [0, 0, 1, 1]

    replayed = Cassette.loads(later.dumps())
    replay = Config(mode=Mode.REPLAY, repeat=False)
    bodies = [run(replayed, replay, now)[2] for _ in range(2)]
    assert bodies == [b'{"error":{"type":"rate_limit"}}', b'{"v":2,"extra":true}']
    third, _, _ = run(replayed, replay, now)
    assert isinstance(third, Miss)  # past the newest generation's count of 2
    assert "recorded 2 times" in third.report.reason


def test_a_third_generation_supersedes_the_second() -> None:
    cassette = Cassette()
    for day, value in ((0, 1), (10, 2), (20, 3)):
        run(cassette, Config(mode=Mode.AUTO, max_age=7 * DAY), T0 + day * DAY, (200, b"%d" % value))
        cassette = Cassette.loads(cassette.dumps())
    assert [line.get("gen", 0) for line in lines_of(cassette)] == [0, 1, 2]
    assert run(cassette, Config(mode=Mode.REPLAY), T0)[2] == b"3"


def test_a_stale_sequence_is_judged_by_its_first_recording() -> None:
    """Mid-sequence, a recording is served even once stale: the sequence was
    judged fresh when it started."""
    cassette = Cassette()
    auto = Config(mode=Mode.AUTO)
    run(cassette, auto, T0, (429, b"{}"))
    run(cassette, auto, T0 + 5 * DAY, (200, b'{"v":1}'))
    loaded = Cassette.loads(cassette.dumps())
    fresh = Config(mode=Mode.AUTO, max_age=7 * DAY)
    first, _, _ = run(loaded, fresh, T0 + 6 * DAY)
    second, _, body = run(loaded, fresh, T0 + 8 * DAY)
    assert isinstance(first, Replay)
    assert isinstance(second, Replay)
    assert body == b'{"v":1}'


def test_a_recording_without_a_time_is_stale() -> None:
    cassette = Cassette()
    run(cassette, Config(mode=Mode.AUTO), None)  # no timestamp handed in: "ts": null
    assert lines_of(cassette)[0]["ts"] is None
    loaded = Cassette.loads(cassette.dumps())
    decision, _, _ = run(loaded, Config(mode=Mode.REPLAY, max_age=DAY), T0)
    assert isinstance(decision, Replay)
    assert decision.stale == Staleness(None, None, DAY)


def test_the_cassette_max_age_applies_and_the_config_wins() -> None:
    cassette = Cassette(meta=CassetteMeta(max_age="1d"))
    run(cassette, Config(mode=Mode.AUTO), T0)
    loaded = Cassette.loads(cassette.dumps())
    decision, _, _ = run(loaded, Config(mode=Mode.REPLAY), T0 + 2 * DAY)
    assert isinstance(decision, Replay)
    assert decision.stale is not None
    assert decision.stale.max_age == DAY
    decision, _, _ = run(loaded, Config(mode=Mode.REPLAY, max_age=3 * DAY), T0 + 2 * DAY)
    assert isinstance(decision, Replay)
    assert decision.stale is None


def test_replay_serves_a_stale_recording_and_says_so() -> None:
    cassette = Cassette()
    run(cassette, Config(mode=Mode.AUTO), T0, (200, b'{"v":1}'))
    loaded = Cassette.loads(cassette.dumps())
    decision, recorded, body = run(loaded, Config(mode=Mode.REPLAY, max_age=DAY), T0 + 3 * DAY)
    assert isinstance(decision, Replay)
    assert decision.stale is not None
    assert decision.stale.describe() == "recorded 3d ago, max_age 1d"
    assert recorded is None
    assert body == b'{"v":1}'
    assert len(loaded) == 1  # replay writes nothing


def test_a_max_age_needs_the_time_with_each_request() -> None:
    cassette = Cassette()
    run(cassette, Config(mode=Mode.AUTO), T0)
    engine = Engine(cassette, Config(mode=Mode.REPLAY, max_age=DAY))
    engine.receive_request(CHAT)
    with pytest.raises(LocalProtocolError, match="hand the wall-clock time in"):
        engine.next_event()
    # without a max_age, no time is needed
    assert isinstance(run(cassette, Config(mode=Mode.REPLAY), None)[0], Replay)


def test_the_session_hands_the_time_of_the_bytes_to_the_engine() -> None:
    cassette = Cassette()
    run(cassette, Config(mode=Mode.AUTO), T0)
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n" % len(CHAT.body)
    )
    session = Session(cassette, Config(mode=Mode.REPLAY, max_age=DAY))
    session.receive_data(head, wall=T0 + 2 * DAY)
    session.receive_data(CHAT.body)  # no time: the last one given stands
    decision = session.next_event()
    assert isinstance(decision, Replay)
    assert decision.stale is not None
    assert decision.stale.age == 2 * DAY


def test_a_bad_first_line_of_a_sequence_counts_as_of_unknown_age() -> None:
    cassette = Cassette()
    auto = Config(mode=Mode.AUTO)
    run(cassette, auto, T0, (429, b"{}"))
    run(cassette, auto, T0, (200, b"{}"))
    first, second = cassette.dumps().splitlines()[1:]
    broken = first.replace(b'"status":429', b'"status":"429"')
    loaded = Cassette.loads(cassette.dumps().splitlines()[0] + b"\n" + broken + b"\n" + second)
    engine = Engine(loaded, Config(mode=Mode.REPLAY, max_age=DAY))
    engine.receive_request(CHAT, wall=T0)
    assert engine.next_event().__class__.__name__ == "Refused"  # the bad line, named
    decision, _, _ = run(loaded, Config(mode=Mode.REPLAY, max_age=DAY), T0)
    assert isinstance(decision, Replay)
    assert decision.stale == Staleness(None, None, DAY)


def test_other_match_settings_see_the_newest_generation_too() -> None:
    first = Cassette()
    run(first, Config(mode=Mode.AUTO, max_age=DAY), T0, (200, b"1"))
    cassette = Cassette.loads(first.dumps())  # the next run
    run(cassette, Config(mode=Mode.AUTO, max_age=DAY), T0 + 2 * DAY, (200, b"2"))

    exact = Config(mode=Mode.REPLAY, match=MatchConfig(MatchMode.EXACT))
    assert run(cassette, exact, T0)[2] == b"2"
    # a re-record under other match settings starts the count over there too
    exact_auto = Config(mode=Mode.AUTO, match=MatchConfig(MatchMode.EXACT), max_age=DAY)
    fresh = Cassette.loads(cassette.dumps())
    decision, recorded, _ = run(fresh, exact_auto, T0 + 9 * DAY, (200, b"3"))
    assert isinstance(decision, Forward)
    assert recorded is not None
    assert json.loads(recorded.line)["gen"] == 2
    assert run(fresh, exact, T0)[2] == b"3"
    assert run(fresh, Config(mode=Mode.REPLAY), T0)[2] == b"3"


def test_generations_are_kept_up_to_date_as_lines_are_added() -> None:
    """The cassette groups a key's lines by generation once and then files
    only the lines added since: the same cassette, kept in memory while a
    sequence is recorded, re-recorded and replayed, answers as the same
    lines loaded afresh."""
    recorded_first = Cassette()
    auto = Config(mode=Mode.AUTO)
    for value in (1, 2, 3):  # three recordings of one request, generation 0
        run(recorded_first, Config(mode=Mode.RECORD), T0, (200, b"%d" % value))
    cassette = Cassette.loads(recorded_first.dumps())  # the next run
    assert cassette.count(*_key_of(cassette)) == 3  # grouped now
    stale = Config(mode=Mode.AUTO, max_age=DAY)
    decision, recorded, _ = run(cassette, stale, T0 + 2 * DAY, (200, b"4"))
    assert isinstance(decision, Forward)
    assert recorded is not None
    assert recorded.supersedes is not None  # the first of generation 0
    decision, recorded, _ = run(cassette, stale, T0 + 2 * DAY, (200, b"5"))
    assert isinstance(decision, Forward)  # its sequence was served: recorded on
    assert recorded is not None
    assert json.loads(recorded.line)["gen"] == 1
    assert recorded.supersedes == json.loads(cassette.dumps().splitlines()[2])["id"]
    reloaded = Cassette.loads(cassette.dumps())
    for kept in (cassette, reloaded):
        key, keying = _key_of(kept)
        assert kept.generation(key, keying) == 1
        assert kept.count(key, keying) == 2
        assert kept.lines_of(key, keying) == 5
        first = kept.first(key, keying)
        assert first is not None
        assert first.response.body == b"4"
    assert [run(reloaded, auto, T0 + 2 * DAY)[2] for _ in range(2)] == [b"4", b"5"]


def _key_of(cassette: Cassette) -> tuple[str, MatchConfig]:
    (interaction, *_) = cassette.interactions()
    return interaction.key, cassette.keying
