"""Property 5: what the match key sees.

The normalized key ignores JSON key order and formatting (and the query
order) and changes with any change of the method, path, a query value or
any leaf of the body -- except the provider's drift fields
(``reel_core._providers.DRIFT_FIELDS``), which every mode but exact
ignores; the exact key changes with formatting; ignore-fields ignores
exactly the named paths (plus the drift fields).
"""

from __future__ import annotations

import json
import re
import string
from typing import Any

from hypothesis import assume, example, given
from hypothesis import strategies as st

from reel_core import MatchConfig, MatchMode
from reel_core._jsonpath import WILDCARD, parse_path
from reel_core._providers import DRIFT_FIELDS, endpoint_family
from reel_core.tools import match_key

from .strategies import (
    METHODS,
    PROVIDER_PATHS,
    JSONValue,
    json_values,
    llm_bodies,
    render_json,
    surrogate_texts,
)

NORMALIZED = MatchConfig()
EXACT = MatchConfig(MatchMode.EXACT)

Path = tuple[str | int, ...]

#: Request paths of every API family, and of none (no drift fields).
endpoints = st.sampled_from((*PROVIDER_PATHS, "/v1/p", "/proxy/v1/chat/completions", "/x"))


def drift(path: str) -> list[Path]:
    """The JSON paths every mode but exact ignores for requests to ``path``."""
    fields = DRIFT_FIELDS.get(endpoint_family(path) or "", ())
    return [tuple("*" if seg is WILDCARD else seg for seg in parse_path(field)) for field in fields]


def leaves(value: JSONValue, path: Path = ()) -> list[Path]:
    """The path of every leaf (scalar, empty list or empty object)."""
    if isinstance(value, dict) and value:
        return [p for k, v in value.items() for p in leaves(v, (*path, k))]
    if isinstance(value, list) and value:
        return [p for i, v in enumerate(value) for p in leaves(v, (*path, i))]
    return [path]


def get(value: JSONValue, path: Path) -> JSONValue:
    for seg in path:
        value = value[seg]
    return value


def replaced(value: JSONValue, path: Path, new: JSONValue) -> JSONValue:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: replaced(value[head], rest, new)}
    copy = list(value)
    assert isinstance(head, int)
    copy[head] = replaced(copy[head], rest, new)
    return copy


def canon(value: JSONValue) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def is_under(path: Path, ignored: Path) -> bool:
    return len(path) >= len(ignored) and all(
        i == "*" or i == p for p, i in zip(path, ignored, strict=False)
    )


def key(body: bytes, config: MatchConfig = NORMALIZED, **over: Any) -> str:
    method = over.get("method", "POST")
    path = over.get("path", "/v1/p")
    query = over.get("query", (("api-version", "2024-06-01"),))
    return match_key(method, path, query, body, config)


bodies = st.one_of(llm_bodies(), json_values().filter(lambda v: isinstance(v, (dict, list))))
odd_bodies = st.dictionaries(
    surrogate_texts, st.one_of(surrogate_texts, json_values(4)), max_size=4
)


@given(st.data(), st.one_of(bodies, odd_bodies), endpoints)
@example(None, {"a": "\ud800"}, "/v1/chat/completions")
def test_normalized_ignores_order_and_formatting(
    data: st.DataObject | None, value: JSONValue, path: str
) -> None:
    compact = json.dumps(value, separators=(",", ":")).encode()
    if data is None:
        other = json.dumps(value, indent=3).encode()
    else:
        other = data.draw(render_json(value)).encode()
    assert json.loads(other) == value
    assert key(other, path=path) == key(compact, path=path)
    query = (("b", "2"), ("a", "1"), ("a", "0"))
    assert match_key("POST", path, query, other, NORMALIZED) == match_key(
        "POST", path, tuple(reversed(query)), compact, NORMALIZED
    )


@given(st.data(), st.one_of(bodies, odd_bodies), json_values(6), endpoints)
def test_normalized_changes_with_any_leaf_but_drift_fields(
    data: st.DataObject, value: JSONValue, new: JSONValue, path: str
) -> None:
    leaf = data.draw(st.sampled_from(leaves(value)), label="leaf")
    assume(canon(get(value, leaf)) != canon(new))
    before = key(json.dumps(value).encode(), path=path)
    after = key(json.dumps(replaced(value, leaf, new)).encode(), path=path)
    if isinstance(value, dict) and any(is_under(leaf, d) for d in drift(path)):
        assert before == after
    else:
        assert before != after


@given(
    bodies,
    st.sampled_from(METHODS),
    st.sampled_from(METHODS),
    st.text(max_size=10),
    st.text(max_size=10),
    st.text(max_size=10),
    st.text(max_size=10),
)
def test_request_line_changes_the_key(
    value: JSONValue, m1: str, m2: str, p1: str, p2: str, q1: str, q2: str
) -> None:
    body = json.dumps(value).encode()
    same = key(body, method=m1, path="/" + p1, query=(("q", q1),))
    assert same == key(body, method=m1.lower(), path="/" + p1, query=(("q", q1),))
    assert (m1 == m2) == (same == key(body, method=m2, path="/" + p1, query=(("q", q1),)))
    assert (p1 == p2) == (same == key(body, method=m1, path="/" + p2, query=(("q", q1),)))
    assert (q1 == q2) == (same == key(body, method=m1, path="/" + p1, query=(("q", q2),)))


@given(st.data(), bodies)
def test_exact_sees_formatting(data: st.DataObject, value: JSONValue) -> None:
    one = data.draw(render_json(value)).encode()
    two = data.draw(render_json(value)).encode()
    assert (one == two) == (key(one, EXACT) == key(two, EXACT))
    assert key(one, EXACT) != key(one + b" ", EXACT)


NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_names = st.tuples(
    st.sampled_from(string.ascii_letters + "_"),
    st.text(string.ascii_letters + string.digits + "_", max_size=6),
).map("".join)
_objects = st.recursive(
    st.dictionaries(_names, json_values(3), min_size=1, max_size=4),
    lambda inner: st.dictionaries(
        _names, st.one_of(inner, st.lists(inner, min_size=1, max_size=3)), min_size=1, max_size=4
    ),
    max_leaves=12,
)


def with_wildcard(path: Path, star: int | None) -> Path:
    if star is None or not isinstance(path[star], int):
        return path
    return (*path[:star], "*", *path[star + 1 :])


def render(path: Path) -> str:
    """``messages[*].content`` style, as a user writes an ignored field."""
    out = ""
    for seg in path:
        if isinstance(seg, int):
            out += f"[{seg}]"
        elif seg == "*":
            out += "[*]"
        else:
            out += f".{seg}" if out else seg
    return out


@given(st.data(), _objects, json_values(4), endpoints)
def test_ignore_fields_ignores_exactly_the_named_paths(
    data: st.DataObject, value: dict[str, JSONValue], new: JSONValue, endpoint: str
) -> None:
    paths = leaves(value)
    # Ignore a leaf or any object member on the way to one.
    full = data.draw(st.sampled_from(paths), label="path")
    # Members a path can name (any key below the top level may be odd).
    nameable = 1
    while nameable < len(full) and (
        isinstance(full[nameable], int) or NAME.fullmatch(str(full[nameable]))
    ):
        nameable += 1
    cut = data.draw(st.integers(1, nameable), label="depth")
    while not isinstance(full[cut - 1], str):  # name an object member, not a list slot
        cut -= 1
    ignored = with_wildcard(
        full[:cut],
        data.draw(
            st.sampled_from([None, *[i for i, s in enumerate(full[:cut]) if isinstance(s, int)]]),
            label="star",
        ),
    )
    config = MatchConfig(MatchMode.IGNORE_FIELDS, (render(ignored),))
    everything_ignored = [ignored, *drift(endpoint)]
    base = key(json.dumps(value).encode(), config, path=endpoint)
    for path in paths:
        if canon(get(value, path)) == canon(new):
            continue
        changed = key(json.dumps(replaced(value, path, new)).encode(), config, path=endpoint)
        if any(is_under(path, i) for i in everything_ignored):
            assert changed == base, (path, everything_ignored)
        else:
            assert changed != base, (path, everything_ignored)
