"""The run report: tallies per cassette merged across processes, as text and JSON."""

from __future__ import annotations

import json

from reel_core.tools import REPORT_SCHEMA, CassetteTally, Outcome, render_report, report_json


def tally(cassette: str, test: str, **counts: int) -> CassetteTally:
    outcomes = [Outcome(test, "POST", "/v1/chat/completions", "hit")] * counts.get("hits", 0)
    tally = CassetteTally(cassette, "files", outcomes=outcomes)
    for name, value in counts.items():
        setattr(tally, name, value)
    return tally


def test_workers_figures_are_added_per_cassette() -> None:
    parts = [
        tally("b.jsonl", "t::b2", hits=1, recorded=2),
        tally("a.jsonl", "t::a", misses=1),
        tally("b.jsonl", "t::b1", hits=2, stale=1, superseded=1),
    ]
    report = report_json(parts)
    assert report["schema"] == REPORT_SCHEMA
    assert report["totals"] == {
        "hits": 3,
        "misses": 1,
        "recorded": 2,
        "stale": 1,
        "superseded": 1,
        "websocket": {},
    }
    a, b = report["cassettes"]
    assert (a["cassette"], b["cassette"]) == ("a.jsonl", "b.jsonl")
    assert (b["hits"], b["recorded"], b["store"]) == (3, 2, "files")
    assert [o["test"] for o in b["outcomes"]] == ["t::b1", "t::b1", "t::b2"]
    # it travels as JSON (xdist's workeroutput) and comes back the same
    back = [CassetteTally.from_json(json.loads(json.dumps(c))) for c in report["cassettes"]]
    assert report_json(back) == report
    assert parts[1].misses == 1  # the parts are left as they were


def test_the_same_name_in_two_stores_is_two_cassettes() -> None:
    one = CassetteTally("a.jsonl", "files", hits=1)
    two = CassetteTally("a.jsonl", "redis://h:1/0", hits=2)
    assert len(report_json([one, two])["cassettes"]) == 2


def test_rendered() -> None:
    parts = [tally("a.jsonl", "t::a", hits=1, misses=2)]
    assert render_report(parts) == [
        "a.jsonl (files): 1 hits, 2 misses, 0 recorded, 0 stale, 0 superseded"
    ]
    verbose = render_report(parts, verbose=True)
    assert verbose[1] == "    hit       POST /v1/chat/completions  [t::a]"
    assert render_report([]) == []


def test_stale_replays_and_drifts_are_listed_and_merged() -> None:
    one = CassetteTally("a.jsonl", "files", stale=1, superseded=1)
    one.stale_replays.append(
        {
            "test": "t::b",
            "method": "POST",
            "path": "/v1/chat/completions",
            "recorded": "2024-01-01T00:00:00.000Z",
            "age_seconds": 9 * 86400.0,
            "max_age_seconds": 7 * 86400.0,
        }
    )
    two = CassetteTally("a.jsonl", "files", stale=1)
    two.stale_replays.append(
        {
            "test": "t::a",
            "method": "GET",
            "path": "/v1/models",
            "recorded": None,
            "age_seconds": None,
            "max_age_seconds": 3600.0,
        }
    )
    two.drifts.append(
        {"test": "t::a", "endpoint": "POST /v1/x", "changes": ["+ b: number", "status 200 -> 201"]}
    )
    report = report_json([one, two])
    assert report["totals"]["stale"] == 2
    assert [s["test"] for s in report["stale"]] == ["t::a", "t::b"]
    assert report["stale"][0]["cassette"] == "a.jsonl"
    assert report["drift"] == [
        {
            "cassette": "a.jsonl",
            "test": "t::a",
            "endpoint": "POST /v1/x",
            "changes": ["+ b: number", "status 200 -> 201"],
        }
    ]
    back = [CassetteTally.from_json(json.loads(json.dumps(c))) for c in report["cassettes"]]
    assert report_json(back) == report
    assert render_report([one, two]) == [
        "a.jsonl (files): 0 hits, 0 misses, 0 recorded, 2 stale, 1 superseded",
        "    stale     GET /v1/models: age unknown, max_age 1h  [t::a]",
        "    stale     POST /v1/chat/completions: recorded 9d ago, max_age 7d  [t::b]",
        "    drift     POST /v1/x: + b: number; status 200 -> 201  [t::a]",
    ]


def test_websocket_sessions_are_counted_by_outcome_and_merged() -> None:
    from reel_core.tools import CassetteTally, Outcome, render_report, report_json

    a = CassetteTally(
        "rt.jsonl",
        "files",
        hits=1,
        misses=1,
        outcomes=[
            Outcome("t::a", "GET", "/v1/realtime", "hit", "websocket"),
            Outcome("t::a", "POST", "/v1/responses", "miss"),
        ],
    )
    b = CassetteTally.from_json(
        CassetteTally(
            "rt.jsonl",
            "files",
            misses=1,
            outcomes=[Outcome("t::b", "GET", "/v1/realtime", "miss", "websocket")],
        ).to_json()
    )  # as an xdist worker sends it
    report = report_json([a, b])
    assert report["totals"]["websocket"] == {"hit": 1, "miss": 1}
    assert report["totals"]["misses"] == 2
    (cassette,) = report["cassettes"]
    assert cassette["websocket"] == {"hit": 1, "miss": 1}
    assert cassette["outcomes"][0]["kind"] == "websocket"
    lines = render_report([a, b], verbose=True)
    assert lines[0].endswith("; WebSocket sessions: 1 hit, 1 miss")
    assert "    hit       GET /v1/realtime (WebSocket)  [t::a]" in lines
    assert "    miss      POST /v1/responses  [t::a]" in lines
    # an HTTP-only cassette says nothing of sessions
    plain = CassetteTally("p.jsonl", "files", outcomes=[Outcome("t", "GET", "/x", "hit")])
    assert render_report([plain])[0].endswith("0 superseded")
    assert report_json([plain])["totals"]["websocket"] == {}
