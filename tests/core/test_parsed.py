"""A cassette keeps the lines used last parsed, not every line it served
(issue 36, part 3: "a proxy or Player that serves every line of a huge
cassette ends up holding every parsed line").  The property tests
(``tests/property/test_parsed_lines.py``) hold a bounded cassette to an
unbounded one; these pin the examples."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import pytest

from reel_core import (
    Cassette,
    CassetteError,
    Config,
    ConfigError,
    Engine,
    Interaction,
    Refused,
    Replay,
)
from reel_core._parsed import PARSED_LINES, ParsedLines

from ._helpers import cassette_of, interaction, pull, request


def _bodies(n: int) -> list[bytes]:
    return [b'{"model":"m","messages":[],"n":%d}' % i for i in range(n)]


def _play(engine: Engine, body: bytes) -> list[Any]:
    engine.receive_request(request(body))
    events, _ = pull(engine)
    engine.start_next_cycle()
    return events


def test_serving_every_line_keeps_at_most_the_limit_parsed() -> None:
    """The issue's example: every line served once, each parsed, and the
    cassette holds the last few, not all (it held all 50 before)."""
    bodies = _bodies(50)
    cassette = cassette_of(*(interaction(body=b, id=f"r{i}") for i, b in enumerate(bodies)))
    cassette.parsed_lines = 8
    engine = Engine(cassette, Config())
    for i, body in enumerate(bodies):
        decision = _play(engine, body)[0]
        assert isinstance(decision, Replay)
        assert decision.interaction_id == f"r{i}"
        assert len(cassette._lines.parsed) <= 8
    assert sorted(p for p in range(50) if p in cassette._lines.parsed) == list(range(42, 50))


def test_a_line_let_go_is_served_again_in_its_sequence() -> None:
    """Three recordings of one request and a limit of one: each play parses
    the next again, and the sequence (a count by key, not by object) holds."""
    body = _bodies(1)[0]
    recorded = [interaction(body=body, id=f"take{i}", response_body=b"%d" % i) for i in range(3)]
    other = interaction(body=b'{"other":1}', id="other")
    cassette = cassette_of(*recorded, other)
    cassette.parsed_lines = 1
    engine = Engine(cassette, Config(repeat=False))
    served = []
    for _ in range(3):
        served.append(_play(engine, body)[0].interaction_id)
        _play(engine, b'{"other":1}')  # lets the recording just served go
    assert served == ["take0", "take1", "take2"]
    assert type(_play(engine, body)[0]).__name__ == "Miss"  # all served, no repeat


def test_a_line_parsed_again_is_the_same_recording() -> None:
    lines = [interaction(body=b, id=f"r{i}") for i, b in enumerate(_bodies(3))]
    cassette = cassette_of(*lines)
    cassette.parsed_lines = 1
    first = list(cassette)
    again = list(cassette)
    assert first == again == [Cassette.loads(i.to_line()).interactions()[0] for i in lines]
    assert first[0] is not again[0]  # parsed twice, equal by value


def test_a_recording_added_live_and_let_go_is_parsed_from_its_line() -> None:
    cassette = Cassette()
    cassette.parsed_lines = 1
    added: list[Interaction] = [interaction(body=b, id=f"r{i}") for i, b in enumerate(_bodies(3))]
    for recording in added:
        cassette.add(recording)
    assert list(cassette) == added
    assert len(cassette._lines.parsed) == 1


def test_a_line_changed_under_the_cassette_is_a_bad_line_never_another_answer() -> None:
    """A large file's lines are read again from the file; one rewritten
    since it was indexed (another key at that place) is refused, as a line
    never parsed would be."""
    one, two = (interaction(body=b, id=f"r{i}") for i, b in enumerate(_bodies(2)))
    data = bytearray(one.to_line() + two.to_line())
    source = _Changing(data)
    cassette = Cassette.load_pieces([(0, bytes(data))], source)
    cassette.parsed_lines = 1
    engine = Engine(cassette, Config())
    assert _play(engine, _bodies(2)[0])[0].interaction_id == "r0"
    assert _play(engine, _bodies(2)[1])[0].interaction_id == "r1"  # r0 let go
    source.data[:] = two.to_line() + one.to_line()  # rewritten in place
    refused = _play(engine, _bodies(2)[0])[0]
    assert isinstance(refused, Refused)
    assert refused.status == 500
    with pytest.raises(CassetteError, match="key changed while parsing"):
        list(cassette)


class _Changing:
    """A line source whose bytes can be rewritten (a file edited in place)."""

    def __init__(self, data: bytearray) -> None:
        self.data = data

    def __getitem__(self, index: slice, /) -> bytes:
        return bytes(self.data[index])

    def __len__(self) -> int:
        return len(self.data)

    def find(self, sub: bytes, start: int, end: int, /) -> int:
        return self.data.find(sub, start, end)

    def startswith(self, prefix: bytes, start: int, end: int, /) -> bool:
        return self.data.startswith(prefix, start, end)


def test_the_replay_events_kept_are_bounded_by_the_same_limit() -> None:
    """What an engine derives from each recording (its replay events) holds
    that recording: no more of them than the cassette keeps parsed."""
    bodies = _bodies(20)
    cassette = cassette_of(*(interaction(body=b, id=f"r{i}") for i, b in enumerate(bodies)))
    cassette.parsed_lines = 4
    engine = Engine(cassette, Config())
    for body in bodies:
        _play(engine, body)
        assert len(engine._replays) <= 4


def test_the_limit_is_a_positive_number_and_defaults_to_parsed_lines() -> None:
    assert Cassette().parsed_lines == PARSED_LINES == 4096
    cassette = Cassette(parsed_lines=3)
    assert cassette.parsed_lines == 3
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ConfigError, match="positive number of parsed lines"):
            cassette.parsed_lines = bad  # type: ignore[assignment]
    assert cassette.parsed_lines == 3


def test_lowering_the_limit_lets_the_oldest_go_at_once() -> None:
    cassette = cassette_of(*(interaction(body=b, id=f"r{i}") for i, b in enumerate(_bodies(6))))
    list(cassette)
    assert len(cassette._lines.parsed) == 6
    cassette.parsed_lines = 2
    assert [p for p in range(6) if p in cassette._lines.parsed] == [4, 5]


# -- engines on other threads share a cassette --------------------------------------


class _Raced(OrderedDict[int, Any]):
    """What another thread does between two steps of ours: the entry we
    move was let go, the oldest we pop was popped (all of them)."""

    def move_to_end(self, key: int, last: bool = True) -> None:
        self.pop(key, None)
        raise KeyError(key)

    def popitem(self, last: bool = True) -> tuple[int, Any]:
        self.clear()
        raise KeyError("dictionary is empty")


def test_a_line_another_thread_let_go_is_still_served() -> None:
    lines = ParsedLines(2)
    value = interaction(id="x")
    lines.keep(0, value)
    lines._kept = _Raced(lines._kept)
    assert lines.get(0) is value  # found before it went: ours to serve
    assert 0 not in lines


def test_lines_another_thread_popped_meanwhile_end_the_trim() -> None:
    lines = ParsedLines(1)
    lines._kept = _Raced()
    lines._kept[0] = interaction(id="a")
    lines.keep(1, interaction(id="b"))  # two kept, the pop finds none: done
    assert len(lines) == 0
