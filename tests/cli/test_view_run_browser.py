"""The run timeline in a real browser: Debian's Chromium driven by Playwright
through ``executable_path``, as in ``test_view_browser.py``.  A cassette
with LLM calls, a WebSocket session and tool calls is drawn as one timeline;
its bars open the details they stand for."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reel_bindings.cli import main
from reel_core import RecordedResponse
from reel_core.tools import CallError, CallResult, CallStream, WebSocketClose
from tests.browser import chromium

from .helpers import write
from .test_view_run import call, http, session


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    requests: list[str] = []
    opened.on("pageerror", lambda e: errors.append(str(e)))
    opened.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    opened.on("request", lambda r: requests.append(r.url))
    yield opened
    assert errors == []
    assert all(url.startswith("file://") for url in requests), requests
    context.close()


def view(tmp_path: Path, *cassettes: Path) -> Path:
    out = tmp_path / "page.html"
    assert main(["view", *map(str, cassettes), "-o", str(out), "--force"]) == 0
    return out


def bars(page: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = page.eval_on_selector_all(
        "svg.run g.bar",
        """gs => gs.map(g => {
            const body = g.querySelector("rect.body").getBBox();
            const wait = g.querySelector("rect.wait");
            return {i: Number(g.dataset.i), cls: g.getAttribute("class"),
                    x: body.x, y: body.y, w: body.width,
                    wait: wait ? wait.getBBox().width : null,
                    title: g.querySelector("title").textContent};
        })""",
    )
    return found


def test_a_run_is_one_timeline_whose_bars_open_their_details(page: Any, tmp_path: Path) -> None:
    cassette = write(
        tmp_path / "agent.jsonl",
        http("aaaaaaaaaaaa", "2026-11-29T04:00:00.100Z", 100.0, 300.0),
        session(
            "wwwwwwwwwwww", "2026-11-29T04:00:00.210Z", WebSocketClose(1000, "", "client", 490.0)
        ),
        http("bbbbbbbbbbbb", "2026-11-29T04:00:00.450Z", 50.0, 200.0),
        call("tttttttttttt", "2026-11-29T04:00:00.560Z", CallResult({"status": "shipped"})),
        call(
            "ssssssssssss",
            "2026-11-29T04:00:00.640Z",
            CallStream(((1.0, "chunk one"), (2.5, {"n": 2})), 3.0),
            total=3.0,
        ),
        http(
            "cccccccccccc",
            "2026-11-29T04:00:00.660Z",
            10.0,
            30.0,
            response=RecordedResponse(500, body=b'{"error":"overloaded"}'),
        ),
        call(
            "uuuuuuuuuuuu", "2026-11-29T04:00:00.690Z", CallError("KeyError", "builtins", "'A-9'")
        ),
    )
    page.goto(view(tmp_path, cassette).as_uri())
    page.wait_for_selector("body[data-ready='1']")
    drawn = bars(page)
    # one bar per line, in the order they began
    assert [b["i"] for b in drawn] == [0, 1, 2, 3, 4, 5, 6]
    by_row = {b["i"]: b for b in drawn}
    # HTTP, WebSocket and tool-call tracks, top to bottom
    assert by_row[0]["y"] < by_row[1]["y"] < by_row[3]["y"]
    assert by_row[0]["y"] == by_row[2]["y"] == by_row[5]["y"]
    assert by_row[3]["y"] == by_row[4]["y"] == by_row[6]["y"]
    # on one time axis: x grows with the start, the width with the duration
    assert by_row[0]["x"] < by_row[1]["x"] < by_row[2]["x"] < by_row[3]["x"]
    assert by_row[1]["w"] == pytest.approx(by_row[0]["w"] * 500 / 300, rel=0.02)
    # an HTTP bar's wait for its head: ttfb / total of its width
    assert by_row[0]["wait"] == pytest.approx(by_row[0]["w"] / 3, rel=0.02)
    assert by_row[3]["wait"] is None
    # failures stand out
    assert "error" in by_row[5]["cls"]
    assert "error" in by_row[6]["cls"]
    assert "error" not in by_row[0]["cls"]
    assert by_row[1]["title"].startswith("gpt-realtime · GET /v1/realtime: from 200 ms, 500 ms")
    page.screenshot(path=str(tmp_path / "run.png"), full_page=True)
    # the list names a call by its kind and name, and says how it ended
    call_row = page.locator("table.list tbody tr.call[data-i='6'] td")
    assert call_row.all_inner_texts()[1:5] == ["tool", "-", "lookup_order", "raised KeyError"]
    assert page.locator("header .sub").inner_text().endswith("$0 + 4 of unknown cost")

    # a bar opens the existing detail: an LLM call's
    page.click("svg.run g.bar[data-i='2']")
    page.wait_for_selector("#detail .detail[data-i='2']")
    assert page.locator("#detail .detail h2 .tag").inner_text() == "bbbbbbbbbbbb"
    assert page.locator("svg.run g.bar.open").get_attribute("data-i") == "2"
    assert page.url.endswith("#i=2")
    # the session's: its messages
    page.click("svg.run g.bar[data-i='1']")
    page.wait_for_selector("#detail .detail[data-i='1'] svg.timeline.ws")
    # a tool call's: its arguments and result
    page.click("svg.run g.bar[data-i='3']")
    page.wait_for_selector("#detail .detail.call[data-i='3']")
    assert page.locator("#detail .detail.call h2").inner_text().startswith("tool lookup_order")
    assert '"order_id": "A-1"' in page.locator("#detail .detail.call pre").nth(0).inner_text()
    assert '"status": "shipped"' in page.locator("#detail .detail.call pre").nth(1).inner_text()
    # a generator's values with their offsets
    page.click("svg.run g.bar[data-i='4']")
    page.wait_for_selector("#detail .detail.call[data-i='4'] table.yields")
    cells = page.locator("#detail table.yields tbody tr td:nth-child(2)").all_inner_texts()
    assert cells == ["1.0", "2.5", "3.0"]
    # one that raised, from the keyboard
    page.focus("svg.run g.bar[data-i='6']")
    page.keyboard.press("Enter")
    page.wait_for_selector("#detail .detail.call[data-i='6']")
    assert page.locator("#detail .raised").inner_text() == "KeyError: 'A-9'"
    page.screenshot(path=str(tmp_path / "call.png"), full_page=True)


def test_each_cassette_shown_is_its_own_run(page: Any, tmp_path: Path) -> None:
    one = write(tmp_path / "one.jsonl", http("aaaaaaaaaaaa", "2026-11-29T04:00:00.100Z", 100, 300))
    two = write(
        tmp_path / "two.jsonl",
        call("tttttttttttt", "2026-11-29T05:00:00.000Z", CallResult(1)),
        http("bbbbbbbbbbbb", None, 0, 10),
    )
    page.goto(view(tmp_path, one, two).as_uri())
    page.wait_for_selector("body[data-ready='1']")
    assert page.locator("#run .run-name").all_inner_texts() == [str(one), str(two)]
    assert page.locator("svg.run").count() == 2
    assert page.locator("svg.run[data-cassette='1'] g.bar.undated").get_attribute("data-i") == "2"
    page.click("svg.run[data-cassette='1'] g.bar[data-i='1']")
    page.wait_for_selector("#detail .detail.call[data-i='1']")
