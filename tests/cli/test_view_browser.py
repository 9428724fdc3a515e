"""``reel view``'s page in a real browser: Debian's Chromium driven by
Playwright (from PyPI) through ``executable_path``, as in
``test_export_har_browser.py``.

Each test writes a page with the ``reel`` command, opens it from its file,
and works it as a person would: search, filter, page, open an interaction,
read its timeline.  Screenshots go to the test's temporary directory.  No
test asserts a duration: the 10,000-interaction test prints its load time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reel_bindings.cli import main
from reel_core import Cassette, RecordedRequest, RecordedResponse, StreamCut
from tests.browser import chromium

from .helpers import DEMO, anthropic_stream, chat_body, chat_request, interaction, write
from .test_view import miss_report


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


class Opened:
    """A page opened from its file, with what it asked the network for and
    every script error."""

    def __init__(self, browser: Any, path: Path, shots: Path) -> None:
        self.context = browser.new_context(viewport={"width": 1300, "height": 900})
        self.page = self.context.new_page()
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.shots = shots
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.goto(path.as_uri())
        self.page.wait_for_selector("body[data-ready='1']")

    def shot(self, name: str) -> None:
        self.page.screenshot(path=str(self.shots / f"{name}.png"), full_page=True)

    def rows(self) -> list[str]:
        ids: list[str] = self.page.locator(
            "table.list tbody tr td.mono:first-child"
        ).all_inner_texts()
        return ids

    def search(self, text: str) -> None:
        self.page.fill("#q", text)
        self.settle()

    def settle(self) -> None:
        """Wait out the search box's debounce (150 ms) for the list to redraw."""
        self.page.evaluate("() => new Promise((ok) => setTimeout(ok, 400))")

    def close(self) -> None:
        assert self.errors == []
        # Nothing but the file itself was loaded: no network, no CDN.
        assert all(url.startswith("file://") for url in self.requests), self.requests
        self.context.close()


@pytest.fixture
def opened(browser: Any, tmp_path: Path) -> Iterator[Any]:
    pages: list[Opened] = []

    def open_(path: Path) -> Opened:
        page = Opened(browser, path, tmp_path)
        pages.append(page)
        return page

    yield open_
    for page in pages:
        page.close()


def view(tmp_path: Path, *argv: str) -> Path:
    out = tmp_path / "page.html"
    assert main(["view", *argv, "-o", str(out), "--force"]) in (0, 1)
    return out


def sse(frames: list[bytes], step: float, cut: StreamCut | None = None) -> RecordedResponse:
    return RecordedResponse(
        200,
        headers=(("content-type", "text/event-stream"),),
        stream="sse",
        frames=tuple((i * step, f) for i, f in enumerate(frames)),
        end_ms=0.0 if cut else len(frames) * step,
        cut=cut,
    )


def test_the_demo_lists_searches_and_opens_a_stream(
    opened: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = opened(view(tmp_path, str(DEMO)))
    demo = list(Cassette.loads(DEMO.read_bytes()).interactions())
    assert p.rows() == [ix.id for ix in demo]
    p.shot("list")
    # search: the Gemini requests' paths
    p.search("generateContent")
    assert p.rows() == [ix.id for ix in demo if "generateContent" in ix.request.path]
    p.search("")
    p.page.select_option("#f-model", "claude-sonnet-4-6")
    assert p.rows() == [ix.id for ix in demo if ix.provider == "anthropic"]
    p.page.select_option("#f-model", "")
    # open the OpenAI stream: its plot has one point per recorded frame
    stream = next(ix for ix in demo if ix.response.stream and ix.provider == "openai")
    p.page.click(f"table.list tbody tr:has-text('{stream.id}')")
    detail = p.page.locator("#detail .detail")
    assert detail.get_attribute("data-i") == str(demo.index(stream))
    plot = p.page.locator("#detail svg.timeline")
    assert plot.locator("circle.frame").count() == len(stream.response.frames) == 10
    assert plot.get_attribute("data-frames") == "10"
    assert plot.locator("line.ttfb").count() == 1
    assert plot.locator("line.end").count() == 1
    assert plot.locator("line.cutline").count() == 0
    # frames in order with their offsets, then the end
    offsets = p.page.locator("#detail table.frames tbody tr td:nth-child(2)").all_inner_texts()
    assert offsets[:-1] == [f"{at:.1f}" for at, _ in stream.response.frames]
    assert p.page.locator("#detail pre.answer").inner_text() == "Fake reply to: Say hello to Reel."
    p.shot("stream")
    capsys.readouterr()


def test_search_is_in_bodies_and_escapes_like_the_embedded_json(
    opened: Any, tmp_path: Path
) -> None:
    quoted = 'a "quoted" <b>tag</b> \\ back'
    cassette = write(
        tmp_path / "c.jsonl",
        interaction(chat_request("plain question"), id="aaaaaaaaaaaa"),
        interaction(chat_request(f"pineapple {quoted}"), id="bbbbbbbbbbbb"),
        interaction(
            chat_request("third"),
            RecordedResponse(503, body=b'{"error": "Pineapple overloaded"}'),
            id="cccccccccccc",
        ),
    )
    p = opened(view(tmp_path, str(cassette)))
    assert p.rows() == ["aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc"]
    p.search("pineapple")  # lower case: any case, requests and responses
    assert p.rows() == ["bbbbbbbbbbbb", "cccccccccccc"]
    p.search("Pineapple")  # an upper-case letter: exact case
    assert p.rows() == ["cccccccccccc"]
    p.search(quoted)  # quotes, < and a backslash, as typed (the JSON escapes them)
    assert p.rows() == ["bbbbbbbbbbbb"]
    p.search("no such text")
    assert p.rows() == []
    assert p.page.locator("#empty").is_visible()
    p.search("")
    p.page.select_option("#f-status", "5xx")
    assert p.rows() == ["cccccccccccc"]
    p.page.select_option("#f-status", "200")
    p.page.fill("#f-path", "/v1/CHAT")
    p.settle()
    assert p.rows() == ["aaaaaaaaaaaa", "bbbbbbbbbbbb"]
    # a row's link opens it
    p.page.click("table.list tbody tr:has-text('bbbbbbbbbbbb')")
    p.page.wait_for_selector("#detail .detail")  # its details' block inflated
    link = p.page.url
    assert link.endswith("#i=1")
    again = opened(Path(link.split("#")[0].removeprefix("file://")))
    again.page.goto(link)
    again.page.wait_for_selector("#detail .detail")
    assert again.page.locator("#detail .detail h2 .tag").inner_text() == "bbbbbbbbbbbb"


def test_a_cut_stream_tool_calls_and_redaction_markers(opened: Any, tmp_path: Path) -> None:
    frames = anthropic_stream("Looking it up.", tool=("get_weather", '{"city": "Paris"}'))
    cut = StreamCut(75.0, "reset", "peer reset")
    request = RecordedRequest(
        "POST",
        "/v1/messages",
        body=json.dumps(
            {"model": "claude-sonnet-4-5", "api_key": "[REDACTED:anthropic-key]"}
        ).encode(),
    )
    cassette = write(
        tmp_path / "c.jsonl",
        interaction(request, sse(frames, 10.0, cut), provider="anthropic", id="cut000000000"),
    )
    p = opened(view(tmp_path, str(cassette)))
    p.page.click("table.list tbody tr")
    p.page.wait_for_selector("#detail svg.timeline")  # its details' block inflated
    plot = p.page.locator("#detail svg.timeline")
    assert plot.locator("circle.frame").count() == len(frames)
    assert plot.locator("line.cutline").count() == 1
    assert plot.locator("text.cutlabel").text_content() == "cut: reset"
    assert p.page.locator("#detail code.tool-name").inner_text() == "get_weather"
    assert json.loads(p.page.locator("#detail .tool pre").inner_text()) == {"city": "Paris"}
    marks = p.page.locator("#detail pre.body mark.redacted").all_inner_texts()
    assert marks == ["[REDACTED:anthropic-key]"]
    p.shot("cut")


def test_a_miss_report_beside_its_closest_recording(opened: Any, tmp_path: Path) -> None:
    body = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "Say hi to Reel."}],
        "temperature": 0.2,
    }
    miss = tmp_path / "miss.json"
    report = miss_report(DEMO, body)
    miss.write_text(json.dumps(report))
    p = opened(view(tmp_path, "--miss", str(miss), str(DEMO)))
    closest = report["error"]["closest"]
    rows = p.page.locator("#miss table.missdiff tbody tr")
    assert rows.count() == len(closest["diff"])
    cells = [rows.nth(n).locator("td").all_inner_texts() for n in range(rows.count())]
    by_path = {c[0]: c for c in cells}
    assert by_path["messages[0].content"][1:] == [
        "changed",
        '"Say hello to Reel."',
        '"Say hi to Reel."',
    ]
    assert by_path["temperature"][1:] == ["added", "", "0.2"]
    left, right = p.page.locator("#miss .side pre.body").all()
    recorded = json.loads(left.inner_text())
    received = json.loads(right.inner_text())
    assert recorded["messages"][0]["content"] == "Say hello to Reel."
    # the recorded request with the report's differences applied is the one sent
    assert received == body
    assert right.locator(".marked").all_inner_texts() == ['"Say hi to Reel."', "0.2"]
    p.shot("miss")
    p.page.click("#miss button.open-closest")
    assert p.page.locator("#detail .detail h2 .tag").inner_text() == closest["id"]


#: Markup that runs script wherever a page inserts it as HTML.
INJECTED = [
    '</script><img src=x onerror="window.__pwned=1">',
    "<script>window.__pwned=1</script>",
    '"><svg onload="window.__pwned=1">',
]


def test_a_hostile_miss_report_runs_no_script(opened: Any, tmp_path: Path) -> None:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Say hi to Reel."}]}
    report = miss_report(DEMO, body)
    error = report["error"]
    for n, key in enumerate(("message", "cassette", "mode", "match", "key", "reason", "rerecord")):
        error[key] = INJECTED[n % len(INJECTED)]
    error["request"] = {"method": INJECTED[0], "path": INJECTED[1]}
    closest = error["closest"]
    closest.update(method=INJECTED[2], path=INJECTED[0])
    closest["similarity"] = INJECTED[1]  # numbers that are not numbers
    closest["more_differences"] = INJECTED[0]
    closest["diff"] += [
        {"path": INJECTED[n], "kind": INJECTED[n - 1], "recorded": INJECTED[n - 2]}
        for n in range(len(INJECTED))
    ]
    closest["diff"].append({"path": "__proto__.polluted", "kind": "changed", "received": "x"})
    closest["diff"].append(
        {"path": "constructor.prototype.polluted", "kind": "changed", "received": "x"}
    )
    miss = tmp_path / "miss.json"
    miss.write_text(json.dumps(report))
    p = opened(view(tmp_path, "--miss", str(miss), str(DEMO)))
    p.page.wait_for_selector("#miss-side .side")
    p.shot("hostile-miss")
    assert p.page.evaluate("() => window.__pwned") is None
    assert p.page.evaluate("() => ({}).polluted") is None
    injected = "#miss img, #miss svg, #miss script, #miss iframe, header img, header svg"
    assert p.page.locator(injected).count() == 0
    text = p.page.locator("#miss").inner_text()
    assert 'onerror="window.__pwned=1"' in text  # shown as text, not run


def test_diff_html_shows_changes_side_by_side(opened: Any, tmp_path: Path) -> None:
    a = write(
        tmp_path / "a.jsonl",
        interaction(chat_request("one"), sse([b"data: 1\n\n"] * 3, 10.0), id="one000000000"),
        interaction(chat_request("two"), id="two000000000"),
    )
    b = write(
        tmp_path / "b.jsonl",
        interaction(chat_request("one"), sse([b"data: 1\n\n"] * 5, 40.0), id="one000000000"),
        interaction(chat_request("two"), id="two000000000"),
        interaction(chat_request("new"), id="new000000000"),
    )
    out = tmp_path / "diff.html"
    assert main(["diff", str(a), str(b), "--html", str(out)]) == 1
    p = opened(out)
    visible = p.page.locator("table.difflist tbody tr:visible")
    assert [visible.nth(n).locator("td").first.inner_text() for n in range(2)] == [
        "changed",
        "added",
    ]
    assert visible.count() == 2  # the same pair is hidden
    p.page.check("#show-same")
    assert p.page.locator("table.difflist tbody tr:visible").count() == 3
    p.page.click("table.difflist tbody tr.d-changed")
    p.page.wait_for_selector("#detail svg.timeline")  # its details' block inflated
    plots = p.page.locator("#detail svg.timeline")
    assert plots.count() == 2
    assert [plots.nth(n).locator("circle.frame").count() for n in range(2)] == [3, 5]
    p.shot("diff")


@pytest.mark.slow
def test_ten_thousand_interactions_open_and_paginate(
    opened: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    words = ["alpha", "beta", "gamma", "delta"] * 40
    lines = []
    for n in range(10_000):
        text = f"question {n:05d} " + " ".join(words)
        response = RecordedResponse(
            200,
            headers=(("content-type", "application/json"),),
            body=json.dumps({"choices": [{"message": {"content": text}}]}).encode(),
        )
        if n % 100 == 0:
            response = sse([b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n'] * 20, 5.0)
        request = RecordedRequest("POST", "/v1/chat/completions", body=chat_body(text))
        lines.append(interaction(request, response, id=f"{n:012d}"))
    cassette = write(tmp_path / "big.jsonl", *lines)
    page = view(tmp_path, str(cassette))
    p = opened(page)
    load_ms = p.page.evaluate("Number(document.body.dataset.loadMs)")
    parsed_ms = p.page.evaluate("Number(document.body.dataset.parsedMs)")
    with capsys.disabled():
        size = page.stat().st_size / 1e6
        print(
            f"\nreel view: 10,000 interactions, {size:.1f} MB page: list drawn in {load_ms} ms, "
            f"the whole file read in {parsed_ms} ms"
        )
    assert p.rows() == [f"{n:012d}" for n in range(100)]
    assert p.page.locator("#pageinfo").inner_text() == "rows 1-100, page 1 of 100"
    p.page.click("#next")
    assert p.rows()[0] == f"{100:012d}"
    assert p.page.locator("#pageinfo").inner_text() == "rows 101-200, page 2 of 100"
    p.search("question 09999")
    # the first search inflates every block first: wait for its answer
    p.page.wait_for_function(
        "() => document.querySelectorAll('table.list tbody tr').length === 1", timeout=60_000
    )
    assert p.rows() == [f"{9999:012d}"]
    p.page.click("table.list tbody tr")
    assert p.page.locator("#detail .detail h2 .tag").inner_text() == f"{9999:012d}"
    p.shot("big")


def test_a_websocket_session_its_messages_and_timeline(opened: Any, tmp_path: Path) -> None:
    from .test_view_data import realtime_session

    cassette = write(tmp_path / "rt.jsonl", realtime_session(), interaction(chat_request("hi")))
    p = opened(view(tmp_path, str(cassette)))
    row = p.page.locator("table.list tbody tr").first
    assert "websocket (2 ↑ 3 ↓)" in row.inner_text()
    p.search("response.create")  # the messages are searched like bodies
    assert p.rows() == ["abababababab"]
    row.click()
    detail = p.page.locator("#detail .detail")
    detail.wait_for()
    assert "101 Switching Protocols (WebSocket session, 5 messages)" in detail.inner_text()
    plot = detail.locator("svg.timeline.ws")
    assert plot.get_attribute("data-messages") == "5"
    assert detail.locator("svg.timeline circle.message.client").count() == 2
    assert detail.locator("svg.timeline circle.message.server").count() == 3
    assert "close 1000 by client" in (plot.text_content() or "")
    cells = [r.split("\t") for r in detail.locator("table.messages tbody tr").all_inner_texts()]
    assert [c[1] for c in cells[:5]] == ["server ↓", "client ↑", "server ↓", "client ↑", "server ↓"]
    assert [c[2] for c in cells[:5]] == ["12.5", "40.0", "90.0", "120.0", "300.0"]
    assert [c[5] for c in cells[:5]] == [
        "session.created",
        "response.create",
        "",
        "",
        "response.done",
    ]
    assert cells[2][6].startswith("(30 bytes of binary data)")
    assert cells[3][6] == "plain text"
    assert cells[5][5:] == ["close", "code 1000: done"]
    # the redaction marker in a client message is highlighted
    assert detail.locator("table.messages mark.redacted").inner_text() == "[REDACTED:x]"
    # usage read from response.done
    assert "in 11, out 4" in detail.inner_text()
    p.shot("websocket")
