"""The keying memo: a request sent again is not keyed again, and is
answered exactly as if it had been."""

from __future__ import annotations

from typing import Any

import pytest

from reel_core import (
    Config,
    Engine,
    Forward,
    Frame,
    MatchConfig,
    MatchMode,
    Miss,
    Mode,
    Redactor,
    Replay,
    Request,
    _memo,
)
from reel_core._memo import KeyMemo

from ._helpers import cassette_of, interaction, pull, request

KEY = b"sk-proj-" + b"A" * 40


def _counting(value: int) -> tuple[list[int], object]:
    calls: list[int] = []

    def compute() -> int:
        calls.append(value)
        return value

    return calls, compute


def test_the_same_request_is_computed_once() -> None:
    memo: KeyMemo[int] = KeyMemo()
    calls, compute = _counting(1)
    first = request(b'{"a":1}')
    again = request(b'{"a":1}')  # equal, not the same object
    assert memo.get(first, compute) == 1  # type: ignore[arg-type]
    assert memo.get(again, compute) == 1  # type: ignore[arg-type]
    assert calls == [1]
    assert len(memo) == 1


@pytest.mark.parametrize(
    "other",
    [
        request(b'{"a":2}'),
        request(b'{"a":1}', target="/v1/chat/completions?x=1"),
        request(b'{"a":1}', method="PUT"),
        request(b'{"a":1}', headers=[(b"authorization", b"Bearer " + KEY)]),
    ],
)
def test_any_difference_is_another_entry(other: Request) -> None:
    memo: KeyMemo[int] = KeyMemo()
    memo.get(request(b'{"a":1}'), lambda: 1)
    calls, compute = _counting(2)
    assert memo.get(other, compute) == 2  # type: ignore[arg-type]
    assert calls == [2]


def test_a_large_body_is_never_kept() -> None:
    memo: KeyMemo[int] = KeyMemo()
    big = request(b"x" * (_memo.MAX_BODY + 1))
    calls, compute = _counting(3)
    memo.get(big, compute)  # type: ignore[arg-type]
    memo.get(big, compute)  # type: ignore[arg-type]
    assert calls == [3, 3]
    assert len(memo) == 0


def test_the_oldest_go_first_past_the_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_memo, "MAX_ENTRIES", 2)
    memo: KeyMemo[int] = KeyMemo()
    for n in range(3):
        memo.get(request(str(n).encode()), lambda n=n: n)  # type: ignore[misc]
    assert len(memo) == 2
    calls, compute = _counting(0)
    memo.get(request(b"0"), compute)  # type: ignore[arg-type]
    assert calls == [0]  # forgotten: computed again
    calls, compute = _counting(2)
    memo.get(request(b"2"), compute)  # type: ignore[arg-type]
    assert calls == []


def test_the_oldest_go_first_past_the_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_memo, "MAX_BYTES", 10)
    memo: KeyMemo[int] = KeyMemo()
    memo.get(request(b"a" * 6), lambda: 1)
    memo.get(request(b"b" * 6), lambda: 2)  # 12 bytes: the first goes
    assert len(memo) == 1
    calls, compute = _counting(1)
    memo.get(request(b"a" * 6), compute)  # type: ignore[arg-type]
    assert calls == [1]


# -- through the engine ------------------------------------------------------


def _play(engine: Engine, req: Request) -> list[Any]:
    engine.receive_request(req)
    events, _ = pull(engine)
    engine.start_next_cycle()
    return events


def test_a_retried_request_gets_each_recording_in_turn() -> None:
    body = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'
    cassette = cassette_of(
        interaction(body=body, id="first", response_body=b'{"n":1}'),
        interaction(body=body, id="second", response_body=b'{"n":2}'),
    )
    engine = Engine(cassette, Config(repeat=False))
    answers = [_play(engine, request(body))[0] for _ in range(3)]
    assert [a.interaction_id for a in answers[:2]] == ["first", "second"]
    assert isinstance(answers[2], Miss)  # past the count: the cursor, not the memo, decides
    assert len(engine._memo) == 1


def test_a_remembered_answer_is_the_computed_one() -> None:
    """A request with a credential header and a secret in its body: the
    memo's redactor, redacted request and key equal a fresh keying's."""
    body = b'{"model":"m","messages":[{"role":"user","content":"' + KEY + b'"}]}'
    req = request(body, headers=[(b"authorization", b"Bearer " + KEY)])
    cassette = cassette_of(interaction())
    engine = Engine(cassette, Config())
    first = _play(engine, req)
    second = _play(engine, request(body, headers=[(b"authorization", b"Bearer " + KEY)]))
    fresh = Engine(cassette_of(interaction()), Config())
    assert isinstance(first[0], Miss)
    assert isinstance(second[0], Miss)
    assert first[0].report.key == second[0].report.key
    remembered = engine._memo.get(req, lambda: pytest.fail("keyed again"))
    assert fresh._key(req)[1:] == remembered[1:]
    assert fresh._key(req)[0] == remembered[0]
    assert KEY.decode() not in remembered[0].text(KEY.decode())  # its credential scrubbed


def test_a_cassette_that_grows_finds_a_remembered_request() -> None:
    """Auto mode: a miss is forwarded and recorded; the same request sent
    again (its key remembered) now finds the new recording."""
    cassette = cassette_of(interaction(body=b'{"model":"other"}'))
    engine = Engine(cassette, Config(mode=Mode.AUTO))
    req = request()
    engine.receive_request(req)
    forward, _ = pull(engine)
    assert isinstance(forward[0], Forward)
    engine.upstream_head(200, [(b"content-type", b"application/json")], mono=0.0)
    engine.upstream_data(b'{"ok":1}', mono=0.0)
    engine.upstream_end(mono=0.0)
    pull(engine)
    assert engine.record() is not None
    engine.start_next_cycle()
    again = Engine(cassette, Config(mode=Mode.REPLAY))
    assert isinstance(_play(again, request())[0], Replay)


def test_settings_do_not_share_a_memo() -> None:
    """The same request under other match settings or another redactor is
    keyed again, under those settings."""
    body = b'{"model":"m","messages":[],"temperature":0.5}'
    cassette = cassette_of(interaction(body=body))
    normalized = Engine(cassette, Config())
    ignore = MatchConfig(MatchMode.IGNORE_FIELDS, ("temperature",))
    ignoring = Engine(cassette, Config(match=ignore))
    no_pii = Engine(cassette, Config(redactor=Redactor(pii=False)))
    played = [_play(e, request(body))[0] for e in (normalized, ignoring, no_pii)]
    assert all(isinstance(p, Replay) for p in played)
    keys = [p.key for p in played]
    assert keys[0] == keys[2] != keys[1]  # ignoring "temperature": another key
    memos = {id(e._memo) for e in (normalized, ignoring, no_pii)}
    assert len(memos) == 3


# -- a recording's replay events, made once -----------------------------------


def test_a_recording_played_again_replays_the_same_events() -> None:
    one = interaction(body=b'{"model":"a"}', id="one", response_body=b'{"n":1}')
    two = interaction(
        body=b'{"model":"b"}',
        id="two",
        stream="sse",
        frames=[(0.0, b"data: 1\n\n"), (5.0, b"data: 2\n\n")],
        end_ms=6.0,
    )
    cassette = cassette_of(one, two)
    cassette.parsed_lines = 1  # the second recording evicts the first (its events too)
    engine = Engine(cassette, Config())
    first = [_play(engine, request(b'{"model":"a"}'))[1:] for _ in range(2)]
    assert first[0] == first[1]
    assert [type(e).__name__ for e in first[0]] == ["ResponseHead", "Frame", "EndOfResponse"]
    stream = _play(engine, request(b'{"model":"b"}'))[1:]
    assert [e.data for e in stream if isinstance(e, Frame)] == [b"data: 1\n\n", b"data: 2\n\n"]
    assert _play(engine, request(b'{"model":"a"}'))[1:] == first[0]  # made again
    head = _play(engine, request(b'{"model":"a"}', method="HEAD"))[1:]
    assert [type(e).__name__ for e in head] == ["ResponseHead", "EndOfResponse"]
