"""One depth limit for every JSON document read from outside, one error.

:func:`reel_core.load_json` reads at C speed what ``json.loads`` reads, and
refuses a document nested deeper than :data:`reel_core.MAX_DEPTH` with
:class:`reel_core.TooDeep`, on every Python.  The naive twin, the depth of
the value ``json.loads`` built, is the oracle.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reel_core import RecordedRequest
from reel_core._body import parse_json
from reel_core._formats import Skipped, har
from reel_core._formats._export import request_type
from reel_core._nesting import LINE_DEPTH, check_depth
from reel_core.tools import MAX_DEPTH, TooDeep, load_json, read_line
from tests.cli.helpers import interaction

TOO_DEEP = f"nested more than {MAX_DEPTH} levels deep: Reel reads no deeper JSON or YAML"


def depth(value: Any) -> int:
    """How deep ``value``'s lists and dicts nest (the oracle)."""
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    return 0


def nest(value: Any, levels: int, keyed: bool, escaped: bool) -> Any:
    """``value`` inside ``levels`` objects or lists, each beside a string of
    brackets (and, when ``escaped``, of what JSON writes escaped)."""
    extra = '\\"' if escaped else ""
    for _ in range(levels):
        value = {"[{" + extra: value} if keyed else [value, "]}" + extra]
    return value


#: Strings full of what a depth scan could mistake for structure.
TRICKY = st.text(alphabet='[]{}"\\/ aé\u2028\x00', max_size=8) | st.text("[]{} aé", max_size=8)
LEAVES = st.none() | st.booleans() | st.integers() | TRICKY
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TRICKY, inner, max_size=3),
    max_leaves=12,
)


@given(
    value=VALUES,
    levels=st.integers(0, 8) | st.integers(MAX_DEPTH - 8, MAX_DEPTH + 3),
    keyed=st.booleans(),
    escaped=st.booleans(),
    ascii_=st.booleans(),
    indent=st.sampled_from([None, 0, 2]),
    encoding=st.sampled_from(["str", "utf-8", "utf-16", "utf-32-be"]),
    hooked=st.booleans(),
    padded=st.booleans(),
)
def test_a_document_is_read_exactly_when_it_is_no_deeper_than_the_limit(
    value: Any,
    levels: int,
    keyed: bool,
    escaped: bool,
    ascii_: bool,
    indent: int | None,
    encoding: str,
    hooked: bool,
    padded: bool,
) -> None:
    value = nest(value, levels, keyed, escaped)
    if padded:  # a large document: measured on its text when it has no escape
        value = [value, "a" * 70_000]
    text = json.dumps(value, ensure_ascii=ascii_, indent=indent)
    document: str | bytes = text if encoding == "str" else text.encode(encoding)
    # a hook builds values of its own: the depth is read from the text
    options: dict[str, Any] = {"object_pairs_hook": dict} if hooked else {}
    if depth(value) <= MAX_DEPTH:
        assert load_json(document, **options) == value
    else:
        with pytest.raises(TooDeep):
            load_json(document, **options)


@pytest.mark.parametrize("deeper", [MAX_DEPTH + 1, 990, 100_000])
def test_any_depth_past_the_limit_is_the_same_error(deeper: int) -> None:
    with pytest.raises(TooDeep) as caught:
        load_json(b"[" * deeper + b"]" * deeper)
    assert str(caught.value) == TOO_DEEP
    with pytest.raises(TooDeep, match=TOO_DEEP):  # with escapes, read another way
        load_json(b'["\\"",' * deeper + b"1" + b"]" * deeper)
    assert isinstance(caught.value, ValueError)  # every caller refusing bad JSON refuses it
    assert load_json(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH) is not None
    line = b"[" * LINE_DEPTH + b"]" * LINE_DEPTH
    check_depth(json.loads(line), line, LINE_DEPTH)


def test_a_body_deeper_than_the_limit_is_not_json_and_exports_as_bytes() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    assert parse_json(deep) == (False, None)
    request = RecordedRequest("POST", "/v1/chat/completions", body=deep)
    assert request_type(interaction(request)) == "application/octet-stream"
    shallow = RecordedRequest("POST", "/v1/chat/completions", body=b"[[1]]")
    assert request_type(interaction(shallow)) == "application/json"


def test_a_line_holds_a_body_as_deep_as_the_limit_and_refuses_a_deeper_one() -> None:
    line = interaction().to_line()
    assert b'{"ok":true}' in line
    for levels, reads in ((MAX_DEPTH - 1, True), (LINE_DEPTH, False)):
        deep = line.replace(b'{"ok":true}', b"[" * levels + b"{}" + b"]" * levels)
        if reads:
            assert read_line(deep).response.content.startswith(b"[[")
        else:
            with pytest.raises(ValueError, match=f"^not a JSON line \\({TOO_DEEP}\\)$"):
                read_line(deep)


def test_a_har_base64_list_nested_too_deep_skips_its_entry() -> None:
    entry = {
        "request": {"method": "GET", "url": "https://a/v1", "headers": []},
        "response": {
            "status": 200,
            "headers": [],
            "content": {"encoding": "base64", "text": "[" * 100_000 + "]" * 100_000},
        },
    }
    (item,) = har.parse(json.dumps({"log": {"entries": [entry]}}).encode(), "a.har")
    assert isinstance(item, Skipped)
    assert "the response body says base64 but is not base64 or a list of it" in item.reason


def test_objects_read_as_pairs_count_one_level_each() -> None:
    # the matcher reads objects as lists of (name, value) pairs
    def objects(levels: int) -> bytes:
        return b'{"\\"":' * levels + b"1" + b"}" * levels

    pairs = load_json(objects(MAX_DEPTH), object_pairs_hook=list)
    assert pairs[0][0] == '"'
    with pytest.raises(TooDeep):
        load_json(objects(MAX_DEPTH + 1), object_pairs_hook=list)
