"""Match keys, JSON paths and field diffs."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pytest

from reel_core import ConfigError, MatchConfig, MatchMode
from reel_core._jsonpath import WILDCARD, JSONPath, format_path, parse_path
from reel_core._match import _remove, canonical_body, diff_json
from reel_core.tools import FieldDiff, match_key

NORMALIZED = MatchConfig()
EXACT = MatchConfig(MatchMode.EXACT)


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("messages[*].id", ("messages", WILDCARD, "id")),
        ("metadata.user_id", ("metadata", "user_id")),
        ("a[0]", ("a", 0)),
        ("a[12][3].b", ("a", 12, 3, "b")),
        ("[0]", (0,)),
        ("[*]", (WILDCARD,)),
        ("  user  ", ("user",)),
        ("a-b.c d", ("a-b", "c d")),
    ],
)
def test_parse_path(text: str, path: JSONPath) -> None:
    assert parse_path(text) == path


@pytest.mark.parametrize(
    ("text", "where"),
    [(".a", 1), ("a..b", 2), ("a[x]", 2), ("a[", 2), ("a]", 2), ("a[-1]", 2), ("a.", 2)],
)
def test_parse_path_errors_say_where(text: str, where: int) -> None:
    with pytest.raises(ConfigError, match=f"at character {where}: use names"):
        parse_path(text)


@pytest.mark.parametrize("text", ["", "   "])
def test_parse_path_empty(text: str) -> None:
    with pytest.raises(ConfigError, match="an empty JSON path ignores nothing"):
        parse_path(text)


@pytest.mark.parametrize(
    ("segments", "text"),
    [
        ((), "$"),
        (("messages", 3, "content"), "messages[3].content"),
        ((0, "a"), "[0].a"),
        (("a.b", "c"), '["a.b"].c'),
        (("x", "[y]"), 'x["[y]"]'),
        (("",), '[""]'),
    ],
)
def test_format_path(segments: tuple[str | int, ...], text: str) -> None:
    assert format_path(segments) == text


def test_match_config() -> None:
    assert NORMALIZED.mode is MatchMode.NORMALIZED
    assert NORMALIZED.paths == ()
    c = MatchConfig(MatchMode.IGNORE_FIELDS, ["user", "messages[*].id"])  # type: ignore[arg-type]
    assert c.ignore_fields == ("user", "messages[*].id")
    assert c.paths == (("user",), ("messages", WILDCARD, "id"))
    assert c == MatchConfig(MatchMode.IGNORE_FIELDS, ("user", "messages[*].id"))
    assert hash(c) == hash(MatchConfig(MatchMode.IGNORE_FIELDS, ("user", "messages[*].id")))
    assert "_paths" not in repr(c)


def test_match_config_errors() -> None:
    with pytest.raises(ConfigError, match="need match mode ignore-fields or fuzzy, not exact"):
        MatchConfig(MatchMode.EXACT, ("user",))
    with pytest.raises(ConfigError, match="bad JSON path"):
        MatchConfig(MatchMode.IGNORE_FIELDS, ("a..b",))


DOC: Any = {
    "model": "m",
    "user": "u1",
    "messages": [{"id": 1, "content": "a"}, {"id": 2, "content": "b"}],
    "meta": {"x": {"k": 1}, "y": {"k": 2}},
}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("user", {k: v for k, v in DOC.items() if k != "user"}),
        ("nope", DOC),
        ("user.deeper", DOC),
        ("messages[*].id", {**DOC, "messages": [{"content": "a"}, {"content": "b"}]}),
        ("messages[*]", {**DOC, "messages": []}),
        ("messages[1]", {**DOC, "messages": [{"id": 1, "content": "a"}]}),
        (
            "messages[0].content",
            {**DOC, "messages": [{"id": 1}, {"id": 2, "content": "b"}]},
        ),
        ("messages[5]", DOC),
        ("messages.id", DOC),
        ("meta[*].k", {**DOC, "meta": {"x": {}, "y": {}}}),
        ("meta[*]", {**DOC, "meta": {}}),
        ("meta[0]", DOC),
        ("[0]", DOC),
    ],
)
def test_remove(path: str, expected: Any) -> None:
    before = json.dumps(DOC, sort_keys=True)
    assert _remove(DOC, parse_path(path)) == expected
    assert json.dumps(DOC, sort_keys=True) == before  # never mutates
    assert _remove(DOC, ()) is DOC


def test_canonical_body() -> None:
    body = b'{"b": 1, "a": "\xc3\xa9"}'
    assert canonical_body(body, EXACT) == body
    assert canonical_body(body, NORMALIZED) == '{"a":"é","b":1}'.encode()
    assert canonical_body(b"", NORMALIZED) == b""
    assert canonical_body(b"not json", NORMALIZED) == b"not json"
    ignore = MatchConfig(MatchMode.IGNORE_FIELDS, ("a",))
    assert canonical_body(body, ignore) == b'{"b":1}'


def test_match_key_format_and_inputs() -> None:
    key = match_key("POST", "/v1/x", [("b", "2"), ("a", "1")], b'{"a":1}', NORMALIZED)
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", key)
    expected = hashlib.sha256(b'POST\n/v1/x\n[["a","1"],["b","2"]]\n{"a":1}').hexdigest()
    assert key == "sha256:" + expected
    # method case, query order, and JSON formatting do not matter (normalized)
    assert key == match_key("post", "/v1/x", [("a", "1"), ("b", "2")], b'{ "a" : 1 }', NORMALIZED)
    # path, query values and body values do
    assert key != match_key("POST", "/v1/y", [("a", "1"), ("b", "2")], b'{"a":1}', NORMALIZED)
    assert key != match_key("POST", "/v1/x", [("a", "1")], b'{"a":1}', NORMALIZED)
    assert key != match_key("POST", "/v1/x", [("a", "1"), ("b", "2")], b'{"a":2}', NORMALIZED)


def test_exact_keys_see_formatting() -> None:
    a = match_key("POST", "/p", (), b'{"a":1,"b":2}', EXACT)
    b = match_key("POST", "/p", (), b'{"b":2,"a":1}', EXACT)
    assert a != b
    assert match_key("POST", "/p", (), b'{"a":1,"b":2}', NORMALIZED) == match_key(
        "POST", "/p", (), b'{"b":2,"a":1}', NORMALIZED
    )


def test_ignore_fields_keys() -> None:
    cfg = MatchConfig(MatchMode.IGNORE_FIELDS, ("user", "messages[*].id"))
    a = json.dumps(DOC).encode()
    b = json.dumps({**DOC, "user": "u2", "messages": [{"id": 9, "content": "a"}, {"content": "b"}]})
    assert match_key("POST", "/p", (), a, cfg) == match_key("POST", "/p", (), b.encode(), cfg)
    assert match_key("POST", "/p", (), a, NORMALIZED) != match_key(
        "POST", "/p", (), b.encode(), NORMALIZED
    )


def test_query_separators_cannot_collide() -> None:
    assert match_key("GET", "/p", [("a", "b,c")], b"", EXACT) != match_key(
        "GET", "/p", [("a", "b"), ("c", "")], b"", EXACT
    )


def test_diff_json() -> None:
    recorded = {"a": 1, "b": {"c": [1, 2, 3], "d": "x"}, "gone": True, "t": 1}
    received = {"a": 1, "b": {"c": [1, 5], "d": "x", "e": None}, "t": True, "new": [0]}
    assert list(diff_json(recorded, received)) == [
        FieldDiff("b.c[1]", "changed", 2, 5),
        FieldDiff("b.c[2]", "removed", recorded=3),
        FieldDiff("b.e", "added", received=None),
        FieldDiff("gone", "removed", recorded=True),
        FieldDiff("t", "changed", 1, True),  # equal in Python, not in JSON
        FieldDiff("new", "added", received=[0]),
    ]


def test_diff_json_lists_and_scalars() -> None:
    assert list(diff_json([1], [1, 2, 3])) == [
        FieldDiff("[1]", "added", received=2),
        FieldDiff("[2]", "added", received=3),
    ]
    assert list(diff_json("a", "a")) == []
    assert list(diff_json({"a": 1}, {"a": 1})) == []
    assert list(diff_json({"a": 1}, [1])) == [FieldDiff("$", "changed", {"a": 1}, [1])]
    assert list(diff_json(1, 1.0)) == [FieldDiff("$", "changed", 1, 1.0)]


def test_fuzzy_settings() -> None:
    fuzzy = MatchConfig(MatchMode.FUZZY)
    assert fuzzy.threshold == 0.85
    assert fuzzy.similarity is None
    assert fuzzy.keying() == NORMALIZED
    with_fields = MatchConfig(MatchMode.FUZZY, ("user",), threshold=0.5)
    assert with_fields.keying() == MatchConfig(MatchMode.IGNORE_FIELDS, ("user",))
    assert NORMALIZED.keying() is NORMALIZED
    assert EXACT.keying() is EXACT
    # the similarity function does not take part in equality
    assert MatchConfig(MatchMode.FUZZY, similarity=lambda a, b: 1.0) == fuzzy
    for bad in (-0.1, 1.5):
        with pytest.raises(ConfigError, match="fuzzy threshold must be from 0 to 1"):
            MatchConfig(MatchMode.FUZZY, threshold=bad)


def test_drift_fields_are_ignored_except_in_exact_mode() -> None:
    a = b'{"model":"m","messages":[],"user":"u1","metadata":{"run":1}}'
    b = b'{"model":"m","messages":[],"user":"u2","prompt_cache_key":"k"}'
    path = "/v1/chat/completions"
    assert match_key("POST", path, (), a, NORMALIZED) == match_key("POST", path, (), b, NORMALIZED)
    assert match_key("POST", path, (), a, EXACT) != match_key("POST", path, (), b, EXACT)
    # only for the provider the path belongs to
    assert match_key("POST", "/api/chat", (), a, NORMALIZED) != match_key(
        "POST", "/api/chat", (), b, NORMALIZED
    )
    assert (
        canonical_body(a, NORMALIZED, "/v1/messages") == b'{"messages":[],"model":"m","user":"u1"}'
    )
    assert canonical_body(
        b'{"labels":{"a":"b"},"x":1}', NORMALIZED, "/v1beta/models/g:generateContent"
    ) == (b'{"x":1}')
