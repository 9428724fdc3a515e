"""``_meta.freeze``: the base values of ``freeze=``, read, checked, written,
and the ``uuid4`` sequence derived from them (reel_core._freeze)."""

from __future__ import annotations

import json
import random
import uuid
from datetime import datetime, timedelta, timezone
from itertools import islice
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reel_core import Cassette, CassetteError, CassetteMeta, ConfigError, Freeze
from reel_core._freeze import MAX_SEED, freeze_from_json, freeze_json
from reel_core.tools import FREEZABLE, check_features, format_instant, uuid_ints

BASE = Freeze(clock_us=1_795_838_400_123_456, utc_offset=3600, uuid_seed=5, random_seed=7)

seeds = st.integers(0, MAX_SEED)
instants = st.integers(0, 253_402_300_799_999_999)  # up to 9999-12-31T23:59:59.999999Z


@st.composite
def freezes(draw: st.DrawFn) -> Freeze:
    """Any valid base values (an offset only with a clock, values only with a seed)."""
    clock = draw(st.none() | instants)
    offset = draw(st.integers(-86399, 86399)) if clock is not None else 0
    uuid_seed = draw(st.none() | seeds)
    values = draw(st.lists(st.uuids().map(str), max_size=3)) if uuid_seed is not None else []
    return Freeze(clock, offset, uuid_seed, tuple(values), draw(st.none() | seeds))


@given(freezes())
def test_the_freeze_object_reads_back_as_written(freeze: Freeze) -> None:
    written = json.loads(json.dumps(freeze_json(freeze)))
    assert freeze_from_json(written or None, "c.jsonl") == freeze
    # and through a whole _meta line
    meta = CassetteMeta(freeze=freeze)
    assert Cassette.loads(meta.to_line(), name="c.jsonl").meta.freeze == freeze


def test_the_documented_shape() -> None:
    line = freeze_json(Freeze(clock_us=BASE.clock_us, utc_offset=3600, uuid_seed=5, random_seed=7))
    assert line == {
        "clock": {"at": "2026-11-28T04:00:00.123456Z", "utc_offset": 3600},
        "uuid": {"seed": 5},
        "random": {"seed": 7},
    }
    assert b'"freeze":{"clock":' in CassetteMeta(freeze=BASE).to_line()
    assert b"freeze" not in CassetteMeta().to_line()  # nothing frozen: no key
    assert freeze_from_json(None, "c") == Freeze()


def test_an_instant_without_microseconds_or_with_fewer_digits() -> None:
    assert freeze_from_json({"clock": {"at": "1970-01-01T00:00:01Z"}}, "c").clock_us == 1_000_000
    assert freeze_from_json({"clock": {"at": "1970-01-01T00:00:00.5Z"}}, "c").clock_us == 500_000
    assert format_instant(1) == "1970-01-01T00:00:00.000001Z"
    assert BASE.time == 1_795_838_400.123456
    assert Freeze().time == 0


BAD = [
    ([], '"_meta.freeze" must be an object, not []'),
    ({"clocks": {}}, "\"_meta.freeze\" holds clock, uuid, random, not 'clocks'"),
    ({"clock": 5}, '"_meta.freeze.clock" must be an object, not 5'),
    ({"clock": {}}, '"_meta.freeze.clock" holds at, utc_offset (at required)'),
    ({"clock": {"at": "x", "tz": 1}}, '"_meta.freeze.clock" holds at, utc_offset'),
    ({"clock": {"at": "2026-11-29 04:00:00Z"}}, '"_meta.freeze.clock.at" must be a UTC instant'),
    ({"clock": {"at": "2026-13-29T04:00:00Z"}}, '"_meta.freeze.clock.at" must be a UTC instant'),
    ({"clock": {"at": 1795838400}}, '"_meta.freeze.clock.at" must be a UTC instant'),
    (
        {"clock": {"at": "2026-11-29T04:00:00Z", "utc_offset": 86400}},
        '"_meta.freeze.clock.utc_offset" must be whole seconds within a day, not 86400',
    ),
    (
        {"clock": {"at": "2026-11-29T04:00:00Z", "utc_offset": 1.5}},
        '"_meta.freeze.clock.utc_offset" must be whole seconds',
    ),
    ({"uuid": {"seed": -1}}, '"_meta.freeze.uuid.seed" must be an integer from 0 to 2**53-1'),
    ({"uuid": {"seed": 2**53}}, '"_meta.freeze.uuid.seed" must be an integer'),
    ({"uuid": {"seed": True}}, '"_meta.freeze.uuid.seed" must be an integer'),
    ({"uuid": {"seed": 1, "values": "x"}}, '"_meta.freeze.uuid.values" must be a list of UUIDs'),
    ({"uuid": {"seed": 1, "values": ["nope"]}}, '"_meta.freeze.uuid.values" must be a list'),
    ({"uuid": {"seed": 1, "values": [1]}}, '"_meta.freeze.uuid.values" must be a list'),
    ({"random": {"seed": "7"}}, '"_meta.freeze.random.seed" must be an integer'),
    ({"random": {"seed": 7, "state": []}}, '"_meta.freeze.random" holds seed (seed required)'),
    ({"clock": {"at": "x" * 100}}, "xxx... (see"),  # a long value is shortened
]


@pytest.mark.parametrize(("value", "says"), BAD)
def test_a_bad_freeze_object_says_what_is_wrong(value: Any, says: str) -> None:
    line = json.dumps({"_meta": {"schema": 1, "freeze": value}}).encode() + b"\n"
    with pytest.raises(CassetteError) as caught:
        Cassette.loads(line, name="run.jsonl", strict=True)
    message = str(caught.value)
    assert message.startswith("run.jsonl:1: ")
    assert says in message
    assert "record the cassette again, in record mode" in message


def test_check_features() -> None:
    assert check_features(["random", "clock", "clock"]) == ("clock", "random")
    assert check_features(()) == ()
    assert check_features(iter(FREEZABLE)) == FREEZABLE
    with pytest.raises(
        ConfigError,
        match=r"takes a list such as \['clock', 'uuid', 'random'\], not the string 'clock'",
    ):
        check_features("clock")
    with pytest.raises(ConfigError, match="not 5"):
        check_features(5)  # type: ignore[arg-type]
    with pytest.raises(
        ConfigError, match=r"takes clock, uuid, random \(any of them\), not 'time', 'os'"
    ):
        check_features(["clock", "time", "os"])


def test_filled_keeps_what_is_there_and_adds_what_is_missing() -> None:
    empty = Freeze()
    assert empty.features == ()
    assert empty.missing(["uuid", "clock"]) == ("uuid", "clock")
    filled = empty.filled(
        ["clock", "uuid", "random"], now_us=10, utc_offset=-3600, uuid_seed=1, random_seed=2
    )
    assert filled == Freeze(clock_us=10, utc_offset=-3600, uuid_seed=1, random_seed=2)
    assert filled.features == FREEZABLE
    again = filled.filled(FREEZABLE, now_us=99, utc_offset=0, uuid_seed=9, random_seed=9)
    assert again == filled  # a base once taken is kept
    clock_only = empty.filled(["clock"], now_us=10, utc_offset=0, uuid_seed=1, random_seed=2)
    assert clock_only.features == ("clock",)
    more = clock_only.filled(["uuid"], now_us=11, utc_offset=5, uuid_seed=3, random_seed=4)
    assert more == Freeze(clock_us=10, utc_offset=0, uuid_seed=3)


def test_merged_prefers_its_own_bases() -> None:
    ours = Freeze(clock_us=1, uuid_seed=2)
    theirs = Freeze(clock_us=9, utc_offset=60, uuid_seed=8, uuids=("x",), random_seed=7)
    assert ours.merged(theirs) == Freeze(clock_us=1, uuid_seed=2, random_seed=7)
    assert Freeze().merged(theirs) == theirs
    assert theirs.merged(Freeze()) == theirs


def test_the_uuid_sequence() -> None:
    given_values = ("0A5D3F3C-0000-4000-8000-000000000001", "0a5d3f3c00004000800000000000000a")
    read = freeze_from_json({"uuid": {"seed": 3, "values": list(given_values)}}, "c")
    assert read.uuids == (
        "0a5d3f3c-0000-4000-8000-000000000001",
        "0a5d3f3c-0000-4000-8000-00000000000a",
    )
    first = [uuid.UUID(int=n) for n in islice(uuid_ints(read), 5)]
    assert [str(u) for u in first[:2]] == list(read.uuids)  # the recorded values first
    # then drawn from the seed: the same in every process, version 4
    assert first[2:] == [uuid.UUID(int=n) for n in islice(uuid_ints(Freeze(uuid_seed=3)), 3)]
    assert all(u.version == 4 and u.variant == uuid.RFC_4122 for u in first[2:])
    assert first[2:] != [uuid.UUID(int=n) for n in islice(uuid_ints(Freeze(uuid_seed=4)), 3)]


@given(seeds)
def test_the_drawn_uuids_are_uuid4_values_of_the_seeded_generator(seed: int) -> None:
    draw = random.Random(seed)
    for n in islice(uuid_ints(Freeze(uuid_seed=seed)), 3):
        assert uuid.UUID(int=n) == uuid.UUID(int=draw.getrandbits(128), version=4)


@given(instants)
def test_an_instant_is_written_as_datetime_reads_it(us: int) -> None:
    text = format_instant(us)
    moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    assert moment == datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=us)
    assert freeze_from_json({"clock": {"at": text}}, "c").clock_us == us
