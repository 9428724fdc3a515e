"""Indented JSON bodies are re-rendered by Reel's own encoder: it writes
exactly what ``json.dumps(value, indent=N)`` writes."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from reel_core._body import _dumps

LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
)
VALUES = st.recursive(
    LEAVES,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=40,
)


@given(VALUES, st.sampled_from([0, 1, 2, 4]), st.booleans(), st.booleans())
@example({"a": [], "b": {}, "c": [1.5, -0.0, 10**30]}, 2, False, True)
@example([math.nan, math.inf, -math.inf], 2, True, False)
@example("a whole body that is one string", 2, False, False)
@example({"n": 1, "t": True, "s": "x", "l": ["y", 2, None], "f": 0.5}, 2, True, False)
def test_indent_styles_match_json_dumps(value: Any, indent: int, ascii_: bool, nl: bool) -> None:
    flags = "+".join(f for f in ("ascii" if ascii_ else "", "nl" if nl else "") if f)
    style = f"indent={indent}" + (f",{flags}" if flags else "")
    expected = json.dumps(value, indent=indent, ensure_ascii=ascii_) + ("\n" if nl else "")
    assert _dumps(value, style) == expected


def test_non_string_keys_fall_back_to_json() -> None:
    assert _dumps({1: True, None: 2.5}, "indent=2") == json.dumps({1: True, None: 2.5}, indent=2)


def test_other_objects_fall_back_to_json() -> None:
    assert _dumps([(1, 2)], "indent=2") == json.dumps([(1, 2)], indent=2)
