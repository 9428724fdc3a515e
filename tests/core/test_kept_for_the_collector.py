"""What a first play leaves alive for the garbage collector to walk.

Each object a replay keeps (its parsed line, its key in the memo, its
replay events, its play count) is walked again by every full collection,
and the more there are, the more often full collections come: a first
play's mean cost grows with them.  What can be kept as bytes, strings and
numbers (tuples and dicts of only those, which CPython stops tracking at
a collection) is; these tests hold each piece to it."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator

import pytest

from reel_core import Config, EndOfResponse, Engine, Mode, Replay
from reel_core._cursor import Cursor
from reel_core._match import MatchConfig
from reel_core._memo import KeyMemo
from reel_core.tools import read_line

from ._helpers import cassette_of, interaction, request

#: What one first play of a whole-body recording may leave tracked: the
#: parsed line (interaction, request, response), its request's JSON body
#: not yet rendered (three containers here), its memo entry (the answer and
#: the request's redacted form) and its replay events (the head, the body's
#: frame, their tuple and the cache's entry): 12, as many as before the
#: body was left unrendered (the memo's key, the play count and the end
#: event left the count).  A few caches filled once add a fraction.
KEPT_PER_FIRST_PLAY = 12.5


@pytest.fixture(autouse=True)
def _frozen() -> Iterator[None]:
    """What the test process holds already is moved out of the collector's
    sight (``gc.freeze``): a collection then walks what the test made, not
    the whole test worker (six of them took seconds a test), and
    ``gc.get_objects()`` counts only those."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _collect() -> None:
    """Collect until nesting no longer matters: a tuple (or dict) is let go
    by a collection that finds every part of it let go already, so a tuple
    of tuples of tuples may take three."""
    for _ in range(3):
        gc.collect()


def _body(n: int) -> bytes:
    return json.dumps({"model": "m", "messages": [{"role": "user", "content": f"q{n}"}]}).encode()


def test_a_first_play_keeps_few_objects_a_collector_walks() -> None:
    plays = 60
    cassette = cassette_of(*[interaction(body=_body(n), id=f"i{n}") for n in range(plays)])
    engine = Engine(cassette, Config(mode=Mode.REPLAY))

    def play(n: int) -> None:
        engine.receive_request(request(_body(n)), wall=0.0)
        assert isinstance(engine.next_event(), Replay)
        engine.take_replay()
        engine.start_next_cycle()

    play(0)  # the caches every play shares, made once
    _collect()
    before = len(gc.get_objects())
    for n in range(1, plays):
        play(n)
    _collect()
    kept = (len(gc.get_objects()) - before) / (plays - 1)
    assert kept <= KEPT_PER_FIRST_PLAY, f"{kept:.1f} tracked objects kept per first play"


def test_memo_keys_are_let_go_by_the_collector() -> None:
    memo: KeyMemo[str] = KeyMemo()
    for n in range(3):
        memo.get(request(_body(n)), lambda: "answer")
    _collect()
    assert len(memo) == 3
    assert not any(gc.is_tracked(key) for key in memo._entries)
    # and found again by value, from a request built anew
    assert memo.get(request(_body(1)), lambda: "again") == "answer"


def test_play_counts_are_let_go_by_the_collector() -> None:
    cursor = Cursor()
    config = MatchConfig()
    for key in ("a", "b"):
        cursor.next(config, key, 2, repeat=True)
    cursor.played(config, "c")
    _collect()
    assert not gc.is_tracked(cursor._plays[config])
    assert [cursor.plays(config, k) for k in "abcd"] == [1, 1, 1, 0]
    cursor.restart(config, "a")
    assert cursor.plays(config, "a") == 0


def test_whole_bodies_replayed_share_one_end() -> None:
    cassette = cassette_of(*[interaction(body=_body(n), id=f"i{n}") for n in range(2)])
    engine = Engine(cassette, Config(mode=Mode.REPLAY))
    ends = []
    for n in range(2):
        engine.receive_request(request(_body(n)), wall=0.0)
        engine.next_event()
        events = engine.take_replay()
        assert events[-1] == EndOfResponse(0.0)
        ends.append(events[-1])
        engine.start_next_cycle()
    assert ends[0] is ends[1]


def test_a_rendered_request_body_lets_its_json_value_go() -> None:
    parsed = read_line(interaction(body=_body(7)).to_line())
    assert parsed.request.body == _body(7)
    _collect()
    assert not gc.is_tracked(vars(parsed.request))  # bytes and strings only now
