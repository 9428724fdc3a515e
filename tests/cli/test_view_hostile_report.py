"""``reel view --miss REPORT`` shows a report someone handed over: every
value read from it is type-checked or escaped, whatever the file claims.
A hypothesis property over hostile reports (markup in every string field,
wrong types where numbers go, prototype paths) checks the page's data and
its HTML; ``test_view_browser.py`` runs one in Chromium."""

from __future__ import annotations

import json
import math
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reel_bindings.cli import main
from reel_bindings.view import Source, miss_view, render_page

from .helpers import DEMO, interaction

#: Markup a report may carry, each of which runs script if inserted as HTML.
PAYLOADS = [
    '</script><img src=x onerror="window.__pwned=1">',
    "<script>window.__pwned=1</script>",
    '"><svg onload="window.__pwned=1">',
    '\'><iframe srcdoc="<script>parent.__pwned=1</script>">',
    "<!--<script>",
]

_markup = st.one_of(
    st.sampled_from(PAYLOADS),
    st.builds(
        lambda a, p, b: a + p + b,
        st.text(max_size=5),
        st.sampled_from(PAYLOADS),
        st.text(max_size=5),
    ),
)
_scalars = st.one_of(
    _markup,
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False, allow_infinity=False),  # a report file holds neither
    st.booleans(),
    st.none(),
)
#: Any JSON value, markup in every string (keys included).
hostile = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(_markup, inner, max_size=3)
    ),
    max_leaves=6,
)
_paths = st.one_of(
    hostile,
    st.sampled_from(
        ["__proto__.polluted", "constructor.prototype.polluted", "messages[0].content"]
    ),
)


@st.composite
def reports(draw: st.DrawFn) -> dict[str, Any]:
    """A miss report as a file may hold it: the right shape where the page
    needs one (an object, a list of objects), anything at all elsewhere."""
    diff = draw(
        st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "path": _paths,
                    "kind": hostile,
                    "recorded": hostile,
                    "received": hostile,
                },
            ),
            max_size=3,
        )
    )
    closest = st.fixed_dictionaries(
        {"diff": st.just(diff)},
        optional=dict.fromkeys(("id", "method", "path", "similarity", "more_differences"), hostile),
    )
    names = ("message", "cassette", "mode", "match", "key", "reason", "rerecord")
    fields = dict.fromkeys(names, hostile)
    error = draw(
        st.fixed_dictionaries(
            {"type": st.just("reel_miss")},
            optional={
                **fields,
                "request": st.one_of(
                    hostile,
                    st.fixed_dictionaries({}, optional={"method": hostile, "path": hostile}),
                ),
                "closest": st.one_of(st.none(), closest),
            },
        )
    )
    return {"error": error}


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)


def _tags(page: str) -> list[str]:
    parser = _Tags()
    parser.feed(page)
    return parser.tags


SOURCES = [Source("c.jsonl", [(2, interaction(id="x"))])]
BASELINE = _tags(render_page(SOURCES, title="t", miss=None))


@given(reports())
def test_a_hostile_report_gives_typed_data_and_no_markup(report: dict[str, Any]) -> None:
    miss = miss_view(report, SOURCES)
    for key in ("cassette", "mode", "match", "key", "method", "path", "reason", "rerecord"):
        assert miss[key] is None or isinstance(miss[key], str)
    assert isinstance(miss["message"], str)
    closest = miss["closest"]
    if closest is not None:
        for key in ("id", "method", "path"):
            assert closest[key] is None or isinstance(closest[key], str)
        similarity = closest["similarity"]
        assert similarity is None or (type(similarity) is float and math.isfinite(similarity))
        more = closest["more_differences"]
        assert type(more) is int
        assert more >= 0
    for row in miss["diff"]:
        assert isinstance(row["path"], str)
        assert isinstance(row["kind"], str)
    page = render_page(SOURCES, title="t", miss=miss)
    # no element but the page's own: the report's markup is data, not HTML
    assert _tags(page) == BASELINE
    for markup in ("<img src=x", "<script>window", "<svg onload", "<iframe srcdoc", "<!--<"):
        assert markup not in page


def test_the_issue_example_more_differences_is_a_number(tmp_path: Path) -> None:
    report = {
        "error": {
            "type": "reel_miss",
            "closest": {"id": "x", "diff": [], "more_differences": PAYLOADS[0]},
        }
    }
    miss = miss_view(report, SOURCES)
    assert miss["closest"]["more_differences"] == 0


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_a_report_with_nan_is_not_json(
    constant: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    miss = tmp_path / "miss.json"
    miss.write_text(
        '{"error": {"type": "reel_miss", "closest": {"id": "x", "similarity": C, "diff": '
        '[{"path": "a", "kind": "changed", "received": C}]}}}'.replace("C", constant)
    )
    assert main(["view", str(DEMO), "--miss", str(miss), "-o", str(tmp_path / "p.html")]) == 2
    assert "not JSON" in capsys.readouterr().err
    json.loads(miss.read_text())  # Python's own reader takes it: the view does not
