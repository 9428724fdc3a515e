"""A cassette that keeps few lines parsed serves as one that keeps them all.

The class of defect: memory that grows with every line served.  A proxy or
player serving every line of a large cassette kept every line parsed (about
twice the file).  The fix keeps the lines used last (``ParsedLines``, an
LRU) and parses a line let go again when next used.  The invariant
(docs/reliability.md, "Memory stays bounded"): for any cassette, any
sequence of uses and any limit, a cassette keeping at most ``limit`` parsed
lines gives the same interactions and the same replay decisions (which
recording, in which sequence, with which events) as one keeping every line,
and never holds more than ``limit`` parsed lines.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reel_core import (
    Cassette,
    Config,
    ConfigError,
    Engine,
    Interaction,
    MatchConfig,
    MatchMode,
    Mode,
    RecordedRequest,
    RecordedResponse,
    Request,
    Signal,
)
from reel_core._parsed import ParsedLines
from reel_core.tools import CassetteWarning

_LABELS = "abc"
#: As good as unbounded for these cassettes: every line stays parsed.
_ALL = 10**6


def _recording(label: str, n: int, generation: int = 0, stream: bool = False) -> Interaction:
    request = RecordedRequest("POST", "/v1/x", (), b'{"q":"%s"}' % label.encode())
    if stream:
        frames = ((0.0, b"data: %d\n\n" % n), (3.0, b"data: [DONE]\n\n"))
        response = RecordedResponse(200, stream="sse", frames=frames, end_ms=4.0)
    else:
        response = RecordedResponse(200, body=b'{"n":%d}' % n)
    return Interaction(
        key=request.key(MatchConfig()),
        id=f"{label}-{n}",
        request=request,
        response=response,
        generation=generation,
    )


def _request(label: str) -> Request:
    body = b'{"q":"%s"}' % label.encode()
    return Request("POST", "/v1/x", ((b"content-type", b"application/json"),), body)


_line_specs = st.tuples(
    st.sampled_from(_LABELS),
    st.booleans(),  # hand-edited: parsed at load, not filed in bulk
    st.integers(0, 1),  # generation
    st.booleans(),  # a stream
)


def _cassettes(
    specs: list[tuple[str, bool, int, bool]], pieces: bool, limit: int
) -> tuple[Cassette, Cassette]:
    """The same bytes loaded twice: keeping ``limit`` parsed lines, and all."""
    lines = [b'{"_meta":{"schema":1}}\n']
    for n, (label, hand_edited, generation, stream) in enumerate(specs):
        line = _recording(label, n, generation, stream).to_line()
        lines.append(line.replace(b'{"key"', b'{ "key"', 1) if hand_edited else line)
    data = b"".join(lines)
    made = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CassetteWarning)
        for keep in (limit, _ALL):
            if pieces:  # read again from the source, as a large file's lines are
                half = sum(map(len, lines[: len(lines) // 2 + 1]))
                cassette = Cassette.load_pieces([(0, data[:half]), (half, data[half:])], data)
            else:
                cassette = Cassette.loads(data)
            cassette.parsed_lines = keep
            made.append(cassette)
    return made[0], made[1]


_ops = st.lists(
    st.tuples(
        st.sampled_from(
            ["play", "play", "play", "first", "add", "add-unplayed", "iter", "endpoint", "pred"]
        ),
        st.sampled_from(_LABELS),
        st.sampled_from([0, 1]),  # match settings: the cassette's, or exact
        st.booleans(),  # repeat / a newer generation / a stream
    ),
    max_size=40,
)


def _key(label: str, config: MatchConfig) -> str:
    return _recording(label, 0).request.key(config)


@given(
    specs=st.lists(_line_specs, max_size=10),
    pieces=st.booleans(),
    limit=st.integers(1, 4),
    ops=_ops,
)
def test_a_bounded_cassette_answers_as_an_unbounded_one(
    specs: list[tuple[str, bool, int, bool]],
    pieces: bool,
    limit: int,
    ops: list[tuple[str, str, int, bool]],
) -> None:
    bounded, unbounded = _cassettes(specs, pieces, limit)
    configs = [bounded.keying, MatchConfig(MatchMode.EXACT)]
    added = len(specs)
    for op, label, which, flag in ops:
        config = configs[which]
        key = _key(label, config)
        answers: list[Any] = []
        for cassette in (bounded, unbounded):
            if op == "play":
                answers.append(cassette.play(key, config, repeat=flag))
            elif op == "first":
                answers.append(
                    (
                        cassette.first(key, config),
                        cassette.generation(key, config),
                        cassette.count(key, config),
                        cassette.plays(key, config),
                    )
                )
            elif op in ("add", "add-unplayed"):
                newest = cassette.generation(_key(label, cassette.keying), cassette.keying)
                fresh = _recording(label, added, newest + flag, stream=flag)
                answers.append(cassette.predecessor(fresh))
                cassette.add(fresh, played=op == "add")
            elif op == "iter":
                answers.append(list(cassette))
            elif op == "endpoint":
                answers.append(list(cassette.same_endpoint("POST", "/v1/x")))
            else:
                answers.append(cassette.predecessor(_recording(label, added, 1)))
            assert len(bounded._lines.parsed) <= limit
        if op in ("add", "add-unplayed"):
            added += 1
        assert answers[0] == answers[1]
    assert list(bounded) == list(unbounded)
    assert len(bounded._lines.parsed) <= limit


def _serve(engine: Engine, request: Request) -> list[Any]:
    """The events ``engine`` hands out for ``request``, ended as a binding does."""
    engine.receive_request(request)
    events: list[Any] = []
    while True:
        event = engine.next_event()
        if isinstance(event, Signal):
            break
        events.append(event)
    engine.start_next_cycle()
    return events


@given(
    specs=st.lists(_line_specs, min_size=1, max_size=8),
    pieces=st.booleans(),
    limit=st.integers(1, 3),
    repeat=st.booleans(),
    requests=st.lists(st.sampled_from(_LABELS + "z"), max_size=25),
)
def test_replay_decisions_do_not_depend_on_the_lines_kept(
    specs: list[tuple[str, bool, int, bool]],
    pieces: bool,
    limit: int,
    repeat: bool,
    requests: list[str],
) -> None:
    """Every request (misses too: ``z`` was never recorded) gets the same
    decision and the same events from engines playing either cassette."""
    bounded, unbounded = _cassettes(specs, pieces, limit)
    config = Config(mode=Mode.REPLAY, repeat=repeat)
    engines = [Engine(bounded, config), Engine(unbounded, config)]
    for label in requests:
        answers = [_serve(engine, _request(label)) for engine in engines]
        assert answers[0] == answers[1]
        assert len(bounded._lines.parsed) <= limit


# -- the LRU alone ---------------------------------------------------------------------


@given(
    limit=st.integers(1, 5),
    uses=st.lists(st.tuples(st.booleans(), st.integers(0, 8)), max_size=60),
)
def test_the_lru_keeps_the_lines_used_last(limit: int, uses: list[tuple[bool, int]]) -> None:
    """Against a list of the positions in order of last use."""
    lines = ParsedLines(limit)
    order: list[int] = []  # least lately used first
    values = {p: _recording("a", p) for p in range(9)}
    for keep, position in uses:
        if keep:
            lines.keep(position, values[position])
            order = [p for p in order if p != position] + [position]
            order = order[-limit:]
        else:
            found = lines.get(position)
            assert found == (values[position] if position in order else None)
            if found is not None:
                order = [p for p in order if p != position] + [position]
        assert len(lines) == len(order) <= limit
        assert all(p in lines for p in order)
    smaller = max(1, limit - 2)
    lines.resize(smaller)
    order = order[len(order) - min(len(order), smaller) :]
    assert len(lines) == len(order)
    assert all(p in lines for p in order)
    lines.clear()
    assert len(lines) == 0


@given(st.one_of(st.integers(max_value=0), st.just(True), st.just(2.5), st.just("8")))
def test_a_limit_is_a_positive_number_of_lines(bad: Any) -> None:
    with pytest.raises(ConfigError, match="positive number of parsed lines"):
        ParsedLines(bad)
