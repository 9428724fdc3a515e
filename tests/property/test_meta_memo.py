"""A ``_meta`` line read from the memo reads as one parsed afresh.

The class of defect: per-test work whose answer cannot change.  A suite's
cassettes (one a test) mostly carry the same ``_meta`` line, and every
cassette opened parsed and checked it again (its JSON, its match, freeze,
redact and asset settings: about 10 us a cassette).  ``read_meta_line``
keeps the values of the lines read lately, by their bytes.  The invariant
(docs/reliability.md, "Work done once per run"): for any sequence of head
lines (good ones, bad ones, repeats, lines differing by a byte) and
cassettes appended to in between, the memo's answer is the uncached one
(the same value, or the same error naming the cassette at hand), and it
never holds more than ``READ_MAX`` lines.  Each cassette has a salt of its
own, so lines that differ only in the salt are read from the memo too: the
family below holds salts in every place and spelling a hand may put one.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reel_core import (
    Cassette,
    CassetteError,
    Interaction,
    MatchConfig,
    RecordedRequest,
    RecordedResponse,
)
from reel_core._codec import decode_head
from reel_core._meta import _READ, _UNSALTED, READ_MAX, meta_from_json, read_meta_line
from reel_core._nesting import load_json

#: ``_meta`` objects, the first seven good, the rest bad (each failing a different check).
_METAS: list[Any] = [
    {"schema": 3},
    {"schema": 3, "reel": "0.1.0"},
    {"schema": 3, "match": "exact"},
    {"schema": 3, "match": "fuzzy", "ignore_fields": ["$.user"]},
    {"schema": 3, "repeat": False, "max_age": "7d"},
    {"schema": 3, "redact": {"pii": True, "salt": "0" * 32}},
    {"schema": 3, "redact": {"fields": ["token"]}, "assets": {"threshold": 64}},
    {"schema": 2},
    {"schema": 3, "freeze": {"time": 1}},  # bad: no such freeze value
    {"schema": 3, "repeat": "yes"},  # bad: not a bool
    {"schema": 99},  # bad: newer schema
    {"schema": 3, "match": "nope"},  # bad: no such match mode
    {"schema": 3, "redact": []},  # bad: not an object
    {"schema": 3, "max_age": "soon"},  # bad duration
    "not an object",
]
_LINES = [json.dumps({"_meta": m}).encode() for m in _METAS] + [
    b'{"_meta":{"schema":3}',  # bad: torn JSON
    b'{"_meta": {"schema": 3}}',  # the first line's value, other bytes
]
#: Salts: Reel's form, and near misses (upper case, short, not hex).
_salts = st.one_of(
    st.sampled_from(["0" * 32, "f" * 32, "0123456789abcdef" * 2]),
    st.text("0123456789abcdefA", min_size=31, max_size=33),
)
#: Where a salt may be: the redact settings' (Reel's), another object's, or
#: both, spelled plainly or with an escape.
_SALTED = [
    '{{"_meta":{{"schema":3,"reel":"0.1.0","match":"normalized","redact":{{"salt":"{a}"}}}}}}',
    '{{"_meta":{{"schema":3,"redact":{{"pii":false,"salt":"{a}","fields":["token"]}}}}}}',
    '{{"_meta":{{"schema":3,"redact":{{"salt":"{a}"}},"note":{{"salt":"{b}"}}}}}}',
    '{{"_meta":{{"schema":3,"redact":{{"\\u0073alt":"{a}"}},"note":{{"salt":"{b}"}}}}}}',
    '{{"_meta":{{"schema":3,"redact":{{"salt":"{a}"}},"note":"\\u0073alt"}}}}',
    '{{"_meta":{{"schema":3,"redact":{{"salt":"{a}","salt":"{b}"}}}}}}',
    '{{"_meta":{{"schema":3,"redact":{{"fields":["salt"],"salt":"{a}"}}}}}}',
    '{{"_meta":{{"schema":3,"redact":{{"patterns":{{"k":"{b}"}}}},"x":{{"salt":"{a}"}}}}}}',
    '{{"_meta":{{"schema":3,"repeat":"no","redact":{{"salt":"{a}"}}}}}}',
]
_lines = st.one_of(
    st.sampled_from(_LINES),
    st.integers(0, 40).map(lambda n: json.dumps({"_meta": {"schema": 3, "n": n}}).encode()),
    st.builds(
        lambda form, a, b: form.format(a=a, b=b).encode(),
        st.sampled_from(_SALTED),
        _salts,
        _salts,
    ),
)


def _recording(n: int) -> Interaction:
    request = RecordedRequest("POST", f"/v1/{n}", (), b"{}")
    return Interaction(
        key=request.key(MatchConfig()),
        id=f"r-{n}",
        request=request,
        response=RecordedResponse(200, body=b'{"n":%d}' % n),
    )


def _uncached(line: bytes, name: str) -> object:
    """The value (or the error's type and text) without the memo."""
    try:
        obj = load_json(line)
    except ValueError as exc:
        return (CassetteError, str(CassetteError(name, 1, f"the _meta line is not JSON ({exc})")))
    try:
        return meta_from_json(obj, name)
    except CassetteError as exc:
        return (type(exc), str(exc))


def _cached(line: bytes, name: str) -> object:
    try:
        return read_meta_line(line, name)
    except CassetteError as exc:
        return (type(exc), str(exc))


@given(st.lists(st.tuples(_lines, st.sampled_from(["a.jsonl", "b.jsonl"])), max_size=60))
def test_memo_answers_as_a_fresh_parse(reads: list[tuple[bytes, str]]) -> None:
    _READ.clear()
    _UNSALTED.clear()
    for line, name in reads:
        assert _cached(line, name) == _uncached(line, name)
        assert len(_READ) <= READ_MAX
        assert len(_UNSALTED) <= READ_MAX
        # a value kept is one the line reads as, whatever name asked first
        for kept, meta in _READ.items():
            assert meta == meta_from_json(load_json(kept), name)


@given(st.lists(st.sampled_from(_LINES[:7]), min_size=1, max_size=8), st.integers(0, 4))
def test_cassettes_appended_to_keep_their_head(heads: list[bytes], appended: int) -> None:
    """Cassettes opened, recorded into (lines appended) and opened again
    read their ``_meta`` as a fresh parse does, every time."""
    _READ.clear()
    for head in heads:
        data = head + b"\n"
        for i in range(appended + 1):
            fresh = meta_from_json(load_json(head), "c.jsonl")
            assert Cassette.loads(data, name="c.jsonl").meta == fresh
            assert decode_head(data, "c.jsonl").meta == fresh
            data += _recording(i).to_line()


def test_the_same_bytes_are_the_same_value() -> None:
    _READ.clear()
    first = read_meta_line(_LINES[0], "a.jsonl")
    assert read_meta_line(_LINES[0], "b.jsonl") is first
    assert read_meta_line(_LINES[-1], "b.jsonl") == first  # other bytes: parsed, equal


def test_a_bad_line_is_refused_each_time_with_its_cassette_named() -> None:
    _READ.clear()
    for name in ("a.jsonl", "b.jsonl"):
        with pytest.raises(CassetteError, match=name):
            read_meta_line(b'{"_meta":{"schema":3}', name)
        with pytest.raises(CassetteError, match=f'{name}.*"_meta.repeat"'):
            read_meta_line(b'{"_meta":{"schema":3,"repeat":"yes"}}', name)
    assert not _READ


def test_more_lines_than_kept_clear_the_memo() -> None:
    _READ.clear()
    lines = [json.dumps({"_meta": {"schema": 3, "n": n}}).encode() for n in range(READ_MAX + 1)]
    for line in lines:
        read_meta_line(line, "a.jsonl")
    assert list(_READ) == lines[READ_MAX:]


def test_lines_differing_only_in_the_salt_are_read_once() -> None:
    """A suite's cassettes, one salt each: the second line is not parsed
    again, and its value carries its own salt."""
    _READ.clear()
    _UNSALTED.clear()
    form = '{"_meta":{"schema":3,"reel":"0.1.0","redact":{"salt":"%s"}}}'
    first = read_meta_line((form % ("a" * 32)).encode(), "a.jsonl")
    second = read_meta_line((form % ("b" * 32)).encode(), "b.jsonl")
    assert len(_UNSALTED) == 1
    assert second.extra["redact"] == {"salt": "b" * 32}
    assert first.extra["redact"] == {"salt": "a" * 32}  # the kept value unchanged
    assert second == meta_from_json(json.loads(form % ("b" * 32)), "b.jsonl")
    assert read_meta_line((form % ("a" * 32)).encode(), "c.jsonl") is first


def test_the_salted_memo_is_bounded_and_answers_its_own_line() -> None:
    _READ.clear()
    _UNSALTED.clear()
    form = '{"_meta":{"schema":3,"n":%d,"redact":{"salt":"%s"}}}'
    for n in range(READ_MAX + 1):
        read_meta_line((form % (n, "c" * 32)).encode(), "a.jsonl")
    assert len(_UNSALTED) == 1  # cleared when full, then the newest kept
    _READ.clear()  # the line itself again, from the salted memo: the same value
    line = (form % (READ_MAX, "c" * 32)).encode()
    assert read_meta_line(line, "a.jsonl") is _UNSALTED[next(iter(_UNSALTED))][0]
