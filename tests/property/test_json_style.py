"""Recording finds the style that writes a JSON body's bytes by trying only
the spacings its first bytes allow: it finds what trying every style in
order finds, for any body."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from reel_core._body import _SPACINGS, _dumps, _json_style, parse_json

from .test_indented_json import VALUES

CONTAINERS = st.one_of(
    st.lists(VALUES, max_size=4), st.dictionaries(st.text(max_size=6), VALUES, max_size=4)
)


def every_style_in_order(data: bytes, value: Any) -> str | None:
    """The style search as it was: every spacing, in order."""
    nl = "nl" if data.endswith(b"\n") else ""
    for spacing in _SPACINGS:
        for ascii_ in ("", "ascii") if data.isascii() else ("",):
            flags = "+".join(f for f in (ascii_, nl) if f)
            style = f"{spacing},{flags}" if flags else spacing
            if _dumps(value, style).encode("utf-8") == data:
                return style
    return None


def written(value: Any, how: dict[str, Any], nl: bool) -> bytes:
    return (json.dumps(value, **how) + ("\n" if nl else "")).encode("utf-8")


HOW = st.sampled_from(
    [
        {"separators": (",", ":")},
        {},
        {"indent": 2},
        {"indent": 4},
        # written by no style: each must come out None, as before
        {"indent": 0},
        {"indent": 1},
        {"indent": 3},
        {"indent": 5},
        {"indent": "\t"},
        {"separators": (", ", ":")},
        {"separators": (",", ": ")},
        {"indent": 2, "separators": (",", ":")},
    ]
)


@given(CONTAINERS, HOW, st.booleans(), st.booleans(), st.sampled_from(["", " ", "\n", "\t"]))
@example(["a, b"], {}, False, False, "")  # one item: compact and spaced both write it
@example({}, {"indent": 2}, True, False, "")  # empty: every style writes it
@example([[]], {"indent": 4}, False, False, "")
@example({"k": "v\nw"}, {"indent": 2}, False, True, "")
def test_the_first_bytes_leave_the_same_style(
    value: Any, how: dict[str, Any], ascii_: bool, nl: bool, lead: str
) -> None:
    data = lead.encode() + written(value, {**how, "ensure_ascii": ascii_}, nl)
    is_json, parsed = parse_json(data)
    if not is_json:  # NaN and friends are JSON to json.loads, so is this
        return
    assert _json_style(data, parsed) == every_style_in_order(data, parsed)
