"""The miss report: loud, useful, and built from redacted requests."""

from __future__ import annotations

import json

import pytest

from reel_core import (
    Cassette,
    CassetteMeta,
    Closest,
    Engine,
    FieldDiff,
    Hints,
    MatchConfig,
    MatchMode,
    Miss,
    MissReport,
    RecordedRequest,
)
from reel_core._miss import (
    MAX_DIFFS,
    MAX_VALUE,
    _describe,
    _similarity,
    build_miss_report,
    closest_to,
    diff_row,
    request_diff,
    shorten,
)

from ._helpers import cassette_of, interaction, pull, request

DEFAULT_HINT = Hints.miss

NORMALIZED = MatchConfig()
KEY = "sha256:" + "ab" * 32


def _report(closest: Closest | None, **kw: object) -> MissReport:
    fields: dict[str, object] = {
        "cassette": "chat.jsonl",
        "mode": "replay",
        "match": "normalized",
        "key": KEY,
        "method": "POST",
        "path": "/v1/chat/completions",
        "reason": "no recording matches",
        "recorded": 3,
        "closest": closest,
    }
    fields.update(kw)
    return MissReport(**fields)  # type: ignore[arg-type]


def test_summary_without_closest() -> None:
    text = _report(None).summary()
    assert text == (
        "Reel miss: no recording matches for POST /v1/chat/completions in cassette chat.jsonl "
        f"(match=normalized, key {KEY[:19]}...). To record it: {DEFAULT_HINT}."
    )


def test_summary_names_the_first_differences() -> None:
    diffs = tuple(FieldDiff(f"messages[{i}].content", "changed", "a", "b") for i in range(2))
    c = Closest("id1", "POST", "/v1/chat/completions", 0.9, diffs)
    assert (
        "closest recording id1 (similarity 0.90) differs at messages[0].content, "
        "messages[1].content." in _report(c).summary()
    )
    many = tuple(FieldDiff(f"f{i}", "added", received=i) for i in range(4))
    text = _report(Closest("id2", "POST", "/p", 0.5, many)).summary()
    assert "differs at f0, f1, f2, ...." in text
    more = _report(Closest("id3", "POST", "/p", 0.5, diffs[:1], more=7)).summary()
    assert "differs at messages[0].content, ...." in more
    same = _report(Closest("id4", "POST", "/p", 1.0, ())).summary()
    assert "differs at nothing in the body." in same


def test_to_json_and_bytes() -> None:
    diffs = (
        FieldDiff("model", "changed", "gpt-4o", "gpt-4.1"),
        FieldDiff("user", "added", received="u"),
        FieldDiff("seed", "removed", recorded=1),
    )
    report = _report(Closest("id1", "POST", "/v1/chat/completions", 0.87654, diffs, more=2))
    body = report.to_json()
    error = body["error"]
    assert error["type"] == error["code"] == "reel_miss"
    assert error["message"] == report.summary()
    assert error["cassette"] == "chat.jsonl"
    assert error["key"] == KEY
    assert error["request"] == {"method": "POST", "path": "/v1/chat/completions"}
    assert error["recorded_interactions"] == 3
    assert error["rerecord"] == DEFAULT_HINT
    assert error["closest"] == {
        "id": "id1",
        "method": "POST",
        "path": "/v1/chat/completions",
        "similarity": 0.877,
        "diff": [
            {"path": "model", "kind": "changed", "recorded": "gpt-4o", "received": "gpt-4.1"},
            {"path": "user", "kind": "added", "received": "u"},
            {"path": "seed", "kind": "removed", "recorded": 1},
        ],
        "more_differences": 2,
    }
    raw = report.to_bytes()
    assert raw.endswith(b"\n")
    assert json.loads(raw) == body
    assert _report(None).to_json()["error"]["closest"] is None


def test_render() -> None:
    diffs = (
        FieldDiff("model", "changed", "a", "b"),
        FieldDiff("user", "added", received="u"),
        FieldDiff("seed", "removed", recorded=1),
    )
    text = _report(Closest("id1", "POST", "/v1/x", 0.5, diffs, more=4), hint="do X").render()
    lines = text.splitlines()
    assert lines[0].startswith("Reel miss: ")
    assert lines[1:] == [
        "  cassette: chat.jsonl (3 interactions)",
        f"  mode: replay, match: normalized, key: {KEY}",
        "  closest: id1 POST /v1/x (similarity 0.50)",
        '    model: recorded "a", received "b"',
        '    user: only in this request: "u"',
        "    seed: only in the recording: 1",
        "    ... and 4 more differences",
        "  to record it: do X",
    ]
    one = _report(None, recorded=1).render()
    assert "  cassette: chat.jsonl (1 interaction)\n" in one
    none = _report(None).render()
    assert "  closest: none (the cassette has no recordings)" in none
    assert "more differences" not in _report(Closest("i", "GET", "/", 1.0, ())).render()


def test_short() -> None:
    long = "x" * (MAX_VALUE + 50)
    assert shorten(long) == "x" * MAX_VALUE + f"... ({MAX_VALUE + 50} characters)"
    assert shorten("short") == "short"
    assert shorten(5) == 5
    assert shorten(None) is None
    assert shorten({"a": 1}) == {"a": 1}
    big = {"a": "y" * MAX_VALUE}
    text = json.dumps(big)
    assert shorten(big) == text[:MAX_VALUE] + f"... ({len(text)} characters)"
    assert isinstance(shorten(["z" * MAX_VALUE]), str)


def test_diff_json_and_describe_per_kind() -> None:
    added = FieldDiff("a", "added", received="x")
    removed = FieldDiff("b", "removed", recorded=["y"])
    changed = FieldDiff("c", "changed", 1, "é")
    assert diff_row(added) == {"path": "a", "kind": "added", "received": "x"}
    assert diff_row(removed) == {"path": "b", "kind": "removed", "recorded": ["y"]}
    assert diff_row(changed) == {"path": "c", "kind": "changed", "recorded": 1, "received": "é"}
    assert _describe(added) == 'only in this request: "x"'
    assert _describe(removed) == 'only in the recording: ["y"]'
    assert _describe(changed) == 'recorded 1, received "é"'


def R(
    method: str = "POST",
    path: str = "/p",
    query: tuple[tuple[str, str], ...] = (),
    body: bytes = b"",
) -> RecordedRequest:
    return RecordedRequest(method, path, query, body)


def test_request_diff() -> None:
    assert request_diff(R(body=b'{"a":1}'), R(body=b'{ "a": 1 }')) == []
    diffs = request_diff(
        R("POST", "/a", (("x", "1"), ("y", "2"), ("z", "3")), b'{"m":"a"}'),
        R("GET", "/b", (("x", "1"), ("y", "9"), ("w", "0")), b'{"m":"b"}'),
    )
    assert diffs == [
        FieldDiff("method", "changed", "POST", "GET"),
        FieldDiff("path", "changed", "/a", "/b"),
        FieldDiff("query.w", "added", received="0"),
        FieldDiff("query.y", "changed", "2", "9"),
        FieldDiff("query.z", "removed", recorded="3"),
        FieldDiff("m", "changed", "a", "b"),
    ]


def test_request_diff_non_json_bodies() -> None:
    assert request_diff(R(body=b"abc"), R(body=b"abc")) == []
    assert request_diff(R(body=b"abc"), R(body=b"\xffabd")) == [
        FieldDiff("body", "changed", "abc", "\ufffdabd")
    ]
    # one JSON, one not: compared as text
    assert request_diff(R(body=b'{"a":1}'), R(body=b"")) == [
        FieldDiff("body", "changed", '{"a":1}', "")
    ]


def test_similarity() -> None:
    assert _similarity(b"same", b"same") == 1.0
    assert _similarity(b"", b"abc") == 0.0
    assert 0.5 < _similarity(b"hello world", b"hello wordl") < 1.0


def test_closest_prefers_same_method_and_path() -> None:
    near_text_other_path = interaction(id="other", path="/v1/embeddings", body=b'{"q":"hello"}')
    same_path = interaction(id="same", path="/v1/chat", body=b'{"zzz":1}')
    c = cassette_of(near_text_other_path, same_path)
    found = closest_to(R("POST", "/v1/chat", body=b'{"q":"hello"}'), c, NORMALIZED)
    assert found is not None
    assert found[0].id == "same"


def test_closest_without_same_path_is_penalized() -> None:
    c = cassette_of(interaction(id="x", path="/v1/a", body=b'{"q":1}'))
    found = closest_to(R("POST", "/v1/b", body=b'{"q":1}'), c, NORMALIZED)
    assert found is not None
    assert found[0].id == "x"
    assert found[1] == pytest.approx(0.5)


def test_closest_query_difference_costs_a_little() -> None:
    c = cassette_of(interaction(id="x", path="/v1/a", body=b'{"q":1}', query=[("alt", "sse")]))
    found = closest_to(R("POST", "/v1/a", body=b'{"q":1}'), c, NORMALIZED)
    assert found is not None
    assert found[1] == pytest.approx(0.9)


def test_closest_picks_the_most_similar() -> None:
    items = [
        interaction(id=f"i{n}", body=json.dumps({"messages": [{"content": "x" * n}]}).encode())
        for n in range(0, 60, 2)
    ]
    c = cassette_of(*items)
    wanted = json.dumps({"messages": [{"content": "x" * 31}]}).encode()
    found = closest_to(R("POST", "/v1/chat/completions", body=wanted), c, NORMALIZED)
    assert found is not None
    assert found[0].id in ("i30", "i32")
    assert closest_to(R(), Cassette(), NORMALIZED) is None


def test_build_miss_report() -> None:
    recorded = interaction(id="rec", body=b'{"model":"a","messages":[{"content":"hi"}]}')
    c = cassette_of(recorded)
    received = R(
        "POST", "/v1/chat/completions", body=b'{"model":"a","messages":[{"content":"ho"}]}'
    )
    report = build_miss_report(received, KEY, c, NORMALIZED, mode="replay", hint="h")
    assert report.cassette == "test.jsonl"
    assert report.mode == "replay"
    assert report.match == "normalized"
    assert report.key == KEY
    assert report.reason == "no recording matches"
    assert report.recorded == 1
    assert report.hint == "h"
    assert report.closest is not None
    assert report.closest.id == "rec"
    assert report.closest.diffs == (FieldDiff("messages[0].content", "changed", "hi", "ho"),)
    assert report.closest.more == 0
    empty = build_miss_report(received, KEY, Cassette("e"), NORMALIZED, mode="auto", reason="r")
    assert empty.closest is None
    assert empty.reason == "r"
    assert empty.hint == DEFAULT_HINT


def test_build_miss_report_caps_the_diff() -> None:
    n = MAX_DIFFS + 5
    c = cassette_of(interaction(body=json.dumps({f"k{i}": 0 for i in range(n)}).encode()))
    received = R(
        "POST", "/v1/chat/completions", body=json.dumps({f"k{i}": 1 for i in range(n)}).encode()
    )
    report = build_miss_report(received, KEY, c, NORMALIZED, mode="replay")
    assert report.closest is not None
    assert len(report.closest.diffs) == MAX_DIFFS
    assert report.closest.more == 5
    assert "... and 5 more differences" in report.render()


# -- exact mode: the same JSON value, spelled differently -------------------------

EXACT = MatchConfig(MatchMode.EXACT)


def _exact_miss(recorded: list[bytes], sent: bytes) -> MissReport:
    """The miss report a replay session in exact mode serves for ``sent``."""
    items = [interaction(id=f"rec{i}", body=body, config=EXACT) for i, body in enumerate(recorded)]
    cassette = cassette_of(*items, meta=CassetteMeta(match=EXACT))
    session = Engine(cassette)
    session.receive_request(request(sent))
    (miss, *_), _ = pull(session)
    assert isinstance(miss, Miss)
    return miss.report


def test_exact_miss_names_a_number_spelled_differently() -> None:
    report = _exact_miss([b'{"model":"m","temperature":0.70}'], b'{"model":"m","temperature":0.7}')
    assert report.closest is not None
    assert report.closest.diffs == (FieldDiff("temperature", "spelled", "0.70", "0.7"),)
    summary = report.summary()
    assert "differs at nothing" not in summary
    assert "differs at temperature (the same JSON value written differently:" in summary
    assert "exact mode compares bytes; match=normalized" in summary
    assert (
        "    temperature: the same number written 0.70 in the recording, 0.7 in this request"
        in report.render()
    )
    row = report.to_json()["error"]["closest"]["diff"]
    assert row == [
        {"path": "temperature", "kind": "spelled", "recorded": "0.70", "received": "0.7"}
    ]


def test_exact_miss_names_keys_in_another_order_not_an_unrelated_recording() -> None:
    reordered = b'{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":1}'
    # byte for byte nearer to what is sent, but a different value
    other = b'{"temperature":2,"model":"m","messages":[{"role":"user","content":"hi"}]}'
    sent = b'{"temperature":1,"model":"m","messages":[{"role":"user","content":"hi"}]}'
    report = _exact_miss([other, reordered], sent)
    assert report.closest is not None
    assert report.closest.id == "rec1"
    assert report.closest.diffs == (
        FieldDiff(
            "body",
            "reordered",
            ["model", "messages", "temperature"],
            ["temperature", "model", "messages"],
        ),
    )
    text = report.render()
    assert "keys in a different order" in text
    assert "exact mode compares bytes" in text


def test_exact_miss_nested_reorder_and_spelling_with_value_changes() -> None:
    recorded = b'{"model":"m","opts":{"a":1,"b":2.50},"n":1}'
    sent = b'{"model":"x","opts":{"b":2.5,"a":1},"n":1}'
    report = _exact_miss([recorded], sent)
    assert report.closest is not None
    assert report.closest.diffs == (
        FieldDiff("model", "changed", "m", "x"),
        FieldDiff("opts", "reordered", ["a", "b"], ["b", "a"]),
        FieldDiff("opts.b", "spelled", "2.50", "2.5"),
    )


def test_exact_miss_other_formatting() -> None:
    report = _exact_miss([b'{"a": 1, "s": "\\u00e9"}'], '{"a":1,"s":"é"}'.encode())
    assert report.closest is not None
    (diff,) = report.closest.diffs
    assert (diff.path, diff.kind) == ("body", "formatting")
    assert diff.recorded == '{"a": 1, "s": "\\u00e9"}'
    assert diff.received == '{"a":1,"s":"é"}'
    assert "the same JSON value, other formatting (whitespace or escapes)" in report.render()


def test_normalized_mode_ignores_spelling() -> None:
    a = R(body=b'{"t":0.70,"u":1}')
    b = R(body=b'{"u":1,"t":0.7}')
    assert request_diff(a, b) == []
    assert request_diff(a, b, exact=True) == [
        FieldDiff("body", "reordered", ["t", "u"], ["u", "t"]),
        FieldDiff("t", "spelled", "0.70", "0.7"),
    ]
    # ints and floats, NaN, lists and odd shapes: only equal numbers count
    assert request_diff(R(body=b"[1, 2.0]"), R(body=b"[1, 2.00]"), exact=True) == [
        FieldDiff("[1]", "spelled", "2.0", "2.00")
    ]
    assert request_diff(R(body=b"[1e2, 1]"), R(body=b"[100.0, 1.0]"), exact=True) == [
        FieldDiff("[1]", "changed", 1, 1.0),  # an int and a float: a changed value
        FieldDiff("[0]", "spelled", "1e2", "100.0"),
    ]
    assert request_diff(R(body=b"[Infinity]"), R(body=b"[ Infinity]"), exact=True) == [
        FieldDiff("body", "formatting", "[Infinity]", "[ Infinity]")
    ]
    assert request_diff(R(body=b'{"a":1}'), R(body=b'{"a":1}'), exact=True) == []
    assert request_diff(R(body=b'{"a":[1]}'), R(body=b'{"a":{"b":1}}'), exact=True) == [
        FieldDiff("a", "changed", [1], {"b": 1})
    ]


def test_diff_spelling_edges() -> None:
    from reel_core._match import diff_spelling

    assert diff_spelling(b"not json", b"{}") == []
    assert diff_spelling(b"{}", b"[") == []
    # keys only on one side: no reordering, the values are diffed elsewhere
    assert diff_spelling(b'{"a":1.0,"b":2}', b'{"a":1.00,"c":2}') == [
        FieldDiff("a", "spelled", "1.0", "1.00")
    ]
