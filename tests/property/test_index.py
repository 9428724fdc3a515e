"""The match index and the replay cursor against their naive twins.

:class:`KeyIndex` (bare positions for keys recorded once, a bulk-load fast
path) must answer every lookup as :class:`NaiveKeyIndex`, a plain dict of
lists, does.  :class:`Cursor` (a play count per key) must serve what a list
of the plays made so far says.  And a :class:`Cassette`, composing both over
lines loaded in bulk, lines it parsed and lines added live, must serve each
recording once per occurrence, in recorded order, then the last one again or
none, as a naive model of the recordings does.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

from hypothesis import given
from hypothesis import strategies as st

from reel_core import (
    Cassette,
    Interaction,
    MatchConfig,
    MatchMode,
    RecordedRequest,
    RecordedResponse,
)
from reel_core._cursor import Cursor
from reel_core._index import KeyIndex, NaiveKeyIndex
from reel_core.tools import CassetteWarning

# -- the index ------------------------------------------------------------------------

_keys = st.sampled_from(["a", "b", "c", "d", "sha256:" + "0" * 64])
_positions = st.integers(min_value=0, max_value=10**6)
_index_ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), _keys, _positions),
        st.tuples(st.just("bulk"), st.lists(_keys, max_size=8), _positions),
        st.tuples(st.just("lookup"), _keys, st.just(0)),
    ),
    max_size=40,
)


@given(_index_ops)
def test_the_index_answers_as_a_dict_of_lists(ops: list[tuple[str, object, int]]) -> None:
    fast, naive = KeyIndex(), NaiveKeyIndex()
    for op, arg, position in ops:
        if op == "add":
            assert isinstance(arg, str)
            fast.add(arg, position)
            naive.add(arg, position)
        elif op == "bulk":
            assert isinstance(arg, list)
            fast.bulk_load(arg, position)
            naive.bulk_load(arg, position)
        else:
            assert isinstance(arg, str)
            assert list(fast.positions(arg)) == list(naive.positions(arg))
    assert sorted(fast) == sorted(naive)
    assert len(fast) == len(naive)
    for key in naive:
        assert list(fast.positions(key)) == list(naive.positions(key))


def test_a_bulk_load_of_a_key_recorded_before_keeps_both() -> None:
    index = KeyIndex()
    index.bulk_load(["a", "b"], 0)
    index.bulk_load(["b", "c", "c"], 2)
    assert [list(index.positions(k)) for k in "abcd"] == [[0], [1, 2], [3, 4], []]


# -- the cursor -----------------------------------------------------------------------

_CONFIGS = [MatchConfig(), MatchConfig(MatchMode.EXACT)]
_cursor_ops = st.lists(
    st.tuples(
        st.sampled_from(["next", "next", "next", "record", "played", "clear"]),
        st.sampled_from(_CONFIGS),
        st.sampled_from(["a", "b"]),
        st.booleans(),
    ),
    max_size=50,
)


class NaiveCursor:
    """The plays of each key as a list (``None`` for a recording served
    live); the next play serves the recording at the list's length, in
    recorded order, or the last one again, or none."""

    def __init__(self) -> None:
        self.served: dict[tuple[MatchConfig, str], list[int | None]] = {}

    def next(self, config: MatchConfig, key: str, recorded: int, *, repeat: bool) -> int | None:
        served = self.served.setdefault((config, key), [])
        in_order = list(range(recorded))
        if len(served) < len(in_order):
            rank: int | None = in_order[len(served)]
        elif repeat and in_order:
            rank = in_order[-1]
        else:
            return None
        served.append(rank)
        return rank

    def played(self, config: MatchConfig, key: str) -> None:
        self.served.setdefault((config, key), []).append(None)

    def plays(self, config: MatchConfig, key: str) -> int:
        return len(self.served.get((config, key), []))


@given(_cursor_ops)
def test_the_cursor_serves_as_a_list_of_plays_says(
    ops: list[tuple[str, MatchConfig, str, bool]],
) -> None:
    fast, naive = Cursor(), NaiveCursor()
    recorded = {"a": 0, "b": 0}  # as a cassette's lines grow
    for op, config, key, repeat in ops:
        if op == "next":
            got = fast.next(config, key, recorded[key], repeat=repeat)
            assert got == naive.next(config, key, recorded[key], repeat=repeat)
        elif op == "record":
            recorded[key] += 1
        elif op == "played":
            recorded[key] += 1
            fast.played(config, key)
            naive.played(config, key)
        else:
            fast.clear()
            naive = NaiveCursor()
        for c in _CONFIGS:
            assert fast.plays(c, key) == naive.plays(c, key)


# -- the cassette: lines, index and cursor together ------------------------------------

_LABELS = "ab"


def _recording(label: str, n: int) -> Interaction:
    request = RecordedRequest("POST", "/v1/x", (), b'{"q":"%s"}' % label.encode())
    return Interaction(
        key=request.key(MatchConfig()),
        id=f"{label}-{n}",
        request=request,
        response=RecordedResponse(200, body=label.encode()),
    )


@dataclass
class Model:
    """The recordings in order, and the plays of each (label, settings)."""

    labels: list[str] = field(default_factory=list)
    plays: dict[tuple[str, int], int] = field(default_factory=dict)

    def play(self, label: str, settings: int, repeat: bool) -> str | None:
        ids = [f"{lab}-{i}" for i, lab in enumerate(self.labels) if lab == label]
        n = self.plays.get((label, settings), 0)
        if not ids or (n >= len(ids) and not repeat):
            return None
        self.plays[(label, settings)] = n + 1
        return ids[min(n, len(ids) - 1)]


def _line_of(interaction: Interaction, hand_edited: bool) -> bytes:
    line = interaction.to_line()
    # a hand-edited line (a space before the key): read by parsing, not in bulk
    return line.replace(b'{"key"', b'{ "key"', 1) if hand_edited else line


@given(
    loaded=st.lists(st.tuples(st.sampled_from(_LABELS), st.booleans()), max_size=8),
    junk=st.booleans(),
    cuts=st.none() | st.sets(st.integers(min_value=1, max_value=9)),
    ops=st.lists(
        st.tuples(
            st.sampled_from(["play", "play", "play", "add", "add-unplayed"]),
            st.sampled_from(_LABELS),
            st.sampled_from([0, 1]),
            st.booleans(),
        ),
        max_size=40,
    ),
)
def test_a_cassette_serves_recordings_once_each_in_order(
    loaded: list[tuple[str, bool]],
    junk: bool,
    cuts: set[int] | None,
    ops: Sequence[tuple[str, str, int, bool]],
) -> None:
    """``cuts``: loaded in pieces cut before those lines
    (``Cassette.load_pieces``), each line then read from the source."""
    model = Model()
    lines = [b'{"_meta":{"schema":1}}\n']
    for label, hand_edited in loaded:
        lines.append(_line_of(_recording(label, len(model.labels)), hand_edited))
        model.labels.append(label)
    if junk:
        lines.insert(len(lines) // 2 + 1, b"not json\n")  # skipped by a tolerant load
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CassetteWarning)
        data = b"".join(lines)
        if cuts is None:
            cassette = Cassette.loads(data, strict=False)
        else:
            bounds = [0, *sorted(c for c in cuts if c < len(lines)), len(lines)]
            offsets = [sum(map(len, lines[:b])) for b in bounds]
            pieces = [
                (offsets[i], data[offsets[i] : offsets[i + 1]]) for i in range(len(bounds) - 1)
            ]
            cassette = Cassette.load_pieces(pieces, data, strict=False)
    settings = [cassette.keying, MatchConfig(MatchMode.EXACT)]
    for op, label, which, repeat in ops:
        config = settings[which]
        key = _recording(label, 0).request.key(config)
        if op == "play":
            played = cassette.play(key, config, repeat=repeat)
            assert (played.id if played else None) == model.play(label, which, repeat)
        else:
            cassette.add(_recording(label, len(model.labels)), played=op == "add")
            model.labels.append(label)
            if op == "add":  # served live: counted under every settings indexed so far
                for w in (0, 1) if cassette_indexed(cassette, settings[1]) else (0,):
                    model.plays[(label, w)] = model.plays.get((label, w), 0) + 1
        assert cassette.count(key, config) == model.labels.count(label)
        assert cassette.plays(key, config) == model.plays.get((label, which), 0)
    assert [i.id for i in cassette] == [f"{lab}-{i}" for i, lab in enumerate(model.labels)]


def cassette_indexed(cassette: Cassette, config: MatchConfig) -> bool:
    """Whether ``cassette`` has indexed its lines under ``config`` yet."""
    return config in cassette._indexes
