"""The viewer's run timeline and call details, without a browser
(:mod:`reel_bindings.view._run`): every line a bar where the core places it,
in its track and lane, opening its row; a call line's detail."""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

from reel_bindings.cli import main
from reel_bindings.view import Source, render_page, view_data
from reel_bindings.view import _run as run_view
from reel_bindings.view._data import detail, row
from reel_bindings.view._page import unpack
from reel_bindings.view._run import TRACKS, call_detail, timeline
from reel_core import (
    CallLog,
    Interaction,
    MatchConfig,
    RecordedRequest,
    RecordedResponse,
    StreamCut,
)
from reel_core._interaction import CALL_RESPONSE, call_request
from reel_core._run import line_times
from reel_core.tools import (
    Call,
    CallError,
    CallResult,
    CallStream,
    WebSocketClose,
    WebSocketLog,
    WebSocketMessage,
)
from tests.runs import any_lines

from .helpers import interaction, write


def at(ms: int) -> str:
    return f"2026-11-29T04:00:{ms // 1000:02d}.{ms % 1000:03d}Z"


def http(id: str, ts: str | None, ttfb: float, total: float, **kw: Any) -> Interaction:
    ix = interaction(id=id, meta={"ttfb_ms": ttfb, "total_ms": total}, **kw)
    return Interaction(**{**ix.__dict__, "timestamp": ts})


def session(id: str, ts: str, close: WebSocketClose | None) -> Interaction:
    request = RecordedRequest("GET", "/v1/realtime", (("model", "gpt-realtime"),))
    log = WebSocketLog((WebSocketMessage("client", 1.0, b"{}"),), close)
    return Interaction(
        key=request.key(MatchConfig()),
        id=id,
        request=request,
        response=RecordedResponse(101),
        timestamp=ts,
        provider="openai",
        meta={"ttfb_ms": 10.0, "total_ms": 490.0},
        websocket=log,
    )


def call(
    id: str, ts: str | None, outcome: CallResult | CallStream | CallError, total: Any = 40.0
) -> Interaction:
    log = CallLog(Call("lookup_order", {"order_id": "A-1"}), outcome)
    request = call_request(log.call)
    return Interaction(
        key=request.key(MatchConfig()),
        id=id,
        request=request,
        response=CALL_RESPONSE,
        timestamp=ts,
        meta={"total_ms": total},
        call=log,
    )


def agent() -> list[Interaction]:
    """An agent's run: a chat, a tool call while a second chat runs, a
    realtime session, a failed chat, a call that raised."""
    return [
        http("a", at(100), 100.0, 300.0),  # 0 .. 300
        session("w", at(210), WebSocketClose(1000, "", "client", 490.0)),  # 200 .. 700
        http("b", at(450), 50.0, 200.0),  # 400 .. 600
        call("t", at(560), CallResult({"status": "shipped"})),  # 520 .. 560
        http("c", at(660), 10.0, 30.0, response=RecordedResponse(500)),  # 650 .. 680
        call("u", at(690), CallError("KeyError", "builtins", "'A-9'")),  # 650 .. 690
    ]


def test_a_run_is_one_timeline_in_the_order_things_began() -> None:
    (only,) = timeline([Source("agent.jsonl", list(enumerate(agent())))])
    bars = only["bars"]
    assert [b["i"] for b in bars] == [0, 1, 2, 3, 4, 5]
    assert [(b["track"], b["lane"], b["start_ms"], b["end_ms"]) for b in bars] == [
        ("http", 0, 0.0, 300.0),
        ("websocket", 0, 200.0, 700.0),
        ("http", 0, 400.0, 600.0),
        ("call", 0, 520.0, 560.0),
        ("http", 0, 650.0, 680.0),
        ("call", 0, 650.0, 690.0),
    ]
    assert [b["ttfb_ms"] for b in bars] == [100.0, 10.0, 50.0, None, 10.0, None]
    assert [b["error"] for b in bars] == [False, False, False, False, True, True]
    assert bars[0]["label"] == "gpt-4o-mini · POST /v1/chat/completions"
    assert bars[1]["label"] == "gpt-realtime · GET /v1/realtime"
    assert bars[3]["label"] == "tool lookup_order"
    assert all(b["dated"] for b in bars)
    assert only["lanes"] == {"http": 1, "websocket": 1, "call": 1}
    assert (only["span_ms"], only["more"], only["cassette"]) == (700.0, 0, 0)


def test_overlapping_work_takes_the_next_free_lane() -> None:
    lines = [
        http("a", at(100), 100.0, 300.0),  # 0 .. 300, lane 0
        http("b", at(150), 100.0, 300.0),  # 50 .. 350, lane 1
        http("c", at(420), 100.0, 100.0),  # 320 .. 420: lane 0 is free again
        http("d", at(430), 100.0, 100.0),  # 330 .. 430: lane 1 is not (350): lane 2
    ]
    (only,) = timeline([Source("c.jsonl", list(enumerate(lines)))])
    assert [(b["i"], b["lane"]) for b in only["bars"]] == [(0, 0), (1, 1), (2, 0), (3, 2)]
    assert only["lanes"]["http"] == 3


def test_bars_open_the_rows_of_every_cassette_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_view, "MAX_BARS", 2)
    one = Source("one.jsonl", [(2, http("a", at(5), 1.0, 2.0)), (3, http("b", None, 0, 1.0))])
    two = Source("two.jsonl", [(2, ix) for ix in agent()])
    empty = Source("empty.jsonl", [])
    listing, _ = view_data([one, two, empty])
    first, second, third = listing["timeline"]
    assert [b["i"] for b in first["bars"]] == [0, 1]
    assert first["bars"][1]["dated"] is False  # no ts: right after the line before it
    assert first["bars"][1]["start_ms"] == 2.0
    # at most MAX_BARS a cassette, the first to begin; the rest counted
    assert [b["i"] for b in second["bars"]] == [2, 3]
    assert second["more"] == 4
    assert [listing["rows"][b["i"]]["id"] for b in second["bars"]] == ["a", "w"]
    assert third == {
        "cassette": 2,
        "bars": [],
        "more": 0,
        "lanes": dict.fromkeys(TRACKS, 0),
        "span_ms": 0.0,
    }


def test_a_session_or_stream_that_ended_badly_is_a_failed_bar() -> None:
    cut = interaction(
        id="cut",
        response=RecordedResponse(
            200, stream="sse", frames=((0.0, b"data: {}\n\n"),), cut=StreamCut(5.0, "reset")
        ),
    )
    lines = [
        session("d", at(10), WebSocketClose(None, "", "upstream-dropped", 5.0)),
        session("x", at(10), WebSocketClose(1011, "boom", "server", 5.0)),
        session("n", at(10), None),
        cut,
        call("s", at(10), CallStream(((1.0, "a"),), 2.0, CallError("E", "m", "x"))),
        call("g", at(10), CallStream(((1.0, "a"),), 2.0)),
    ]
    (only,) = timeline([Source("c.jsonl", list(enumerate(lines)))])
    failed = {b["i"]: b["error"] for b in only["bars"]}
    assert failed == {0: True, 1: True, 2: False, 3: True, 4: True, 5: False}


def test_a_call_line_shows_what_was_called_and_how_it_ended() -> None:
    returned = call("t", at(10), CallResult({"status": "shipped", "x": math.nan}))
    d = detail(returned)
    assert d["call"] == {
        "name": "lookup_order",
        "kind": "tool",
        "args": {"order_id": "A-1"},
        "total_ms": 40.0,
        "returned": {"status": "shipped", "x": None},  # NaN is no JSON a browser reads
    }
    listed = row(returned, index=0, cassette=0, line=2)
    assert listed["call"] == {"kind": "tool", "name": "lookup_order", "raised": None}
    assert (listed["cost_usd"], listed["cost_unknown"]) == (0.0, None)  # no tokens
    assert listed["duration_ms"] == 40.0
    stream = CallStream(((1.25, "a"), (2.0, {"b": 1})), 3.5, CallError("E", "mod", "bad"))
    assert call_detail(CallLog(Call("f", {}), stream), {"total_ms": True}) == {
        "name": "f",
        "kind": "tool",
        "args": {},
        "total_ms": None,
        "yields": [[1.25, "a"], [2.0, {"b": 1}]],
        "end_ms": 3.5,
        "raised": {"type": "E", "module": "mod", "message": "bad"},
    }
    assert row(call("s", None, stream), index=0, cassette=0, line=2)["call"]["raised"] == "E"
    clean = call_detail(CallLog(Call("f", {}), CallStream()), {"total_ms": 1})
    assert (clean["raised"], clean["total_ms"]) == (None, 1)
    raised = call("u", None, CallError("KeyError", "builtins", "'A-9'"), total=math.inf)
    assert detail(raised)["call"]["raised"] == {
        "type": "KeyError",
        "module": "builtins",
        "message": "'A-9'",
    }
    assert detail(raised)["call"]["total_ms"] is None
    assert row(raised, index=0, cassette=0, line=2)["call"]["raised"] == "KeyError"
    assert detail(interaction())["call"] is None
    assert row(interaction(), index=0, cassette=0, line=2)["call"] is None


@settings(max_examples=40, deadline=None)
@given(any_lines(4))
def test_every_line_is_a_bar_where_the_core_places_it(lines: list[Interaction]) -> None:
    """Any lines (HTTP exchanges, sessions, calls): one bar each, at the
    core's times (the export's), bars in the order they began, no two bars
    of a lane overlapping, and the page renders."""
    source = Source("c.jsonl", list(enumerate(lines, start=2)))
    (only,) = timeline([source])
    bars = only["bars"]
    assert sorted(b["i"] for b in bars) == list(range(len(lines)))
    times = line_times(lines)
    origin = min((t.start_ns for t in times), default=0)
    for b in bars:
        t = times[b["i"]]
        assert b["start_ms"] == round((t.start_ns - origin) / 1_000_000, 3)
        assert b["end_ms"] == round((t.end_ns - origin) / 1_000_000, 3)
        assert 0 <= b["start_ms"] <= b["end_ms"] <= only["span_ms"]
    assert [b["start_ms"] for b in bars] == sorted(b["start_ms"] for b in bars)
    for track in TRACKS:
        for lane in range(only["lanes"][track]):
            mine = [b for b in bars if (b["track"], b["lane"]) == (track, lane)]
            for earlier, later in itertools.pairwise(mine):
                assert times[earlier["i"]].end_ns <= times[later["i"]].start_ns
    page = render_page([source], title="t")
    assert "reel-data" in page
    page.encode("utf-8")  # whatever a line holds: a lone surrogate too


def test_a_lone_surrogate_is_written_as_its_escape(tmp_path: Path) -> None:
    """Found by the property above: a line's JSON may escape a lone
    surrogate, and the page could not be written (its JSON did not encode)."""
    request = RecordedRequest(
        "POST", "/v1/chat/completions", (("q", "\ud800"),), b'{"a":"\\udfff"}'
    )
    cassette = write(tmp_path / "c.jsonl", interaction(request))
    out = tmp_path / "c.html"
    assert main(["view", str(cassette), "-o", str(out)]) == 0
    (block,) = re.findall(r'id="reel-z-0">([^<]*)<', out.read_text("utf-8"))
    (shown,) = unpack(block)
    assert shown["request"]["query"] == [["q", "\ud800"]]  # as the line had it
    assert shown["request"]["body"] == {"json": {"a": "\udfff"}}
