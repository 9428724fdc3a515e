"""Re-create the screenshots of ``reel view`` in docs/images/view-*.png.

Pages of the demo cassette (reel_bindings/demo/demo.jsonl) written by the
``reel`` command, opened in Debian's Chromium through Playwright:

- ``view-list.png``: the list;
- ``view-stream.png``: a stream opened (its timeline and frames);
- ``view-miss.png``: a miss report beside its closest recording;
- ``view-diff.png``: ``reel diff --html`` of the demo against a copy with
  one answer changed and one stream slowed down;
- ``view-websocket.png``: an OpenAI Realtime session opened (its message
  lanes and messages).

Run from the project root: ``python scripts/view_screenshots.py``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from playwright.sync_api import Page, sync_playwright  # noqa: E402

from reel_bindings.cli import main as reel  # noqa: E402
from reel_core import (  # noqa: E402
    Cassette,
    CassetteMeta,
    Config,
    Engine,
    Interaction,
    Miss,
    Mode,
    RecordedRequest,
    RecordedResponse,
    Request,
    Signal,
    StreamCut,
)
from reel_core.tools import WebSocketClose, WebSocketLog, WebSocketMessage  # noqa: E402

DEMO = ROOT / "src" / "reel_bindings" / "demo" / "demo.jsonl"
IMAGES = ROOT / "docs" / "images"
WIDTH, HEIGHT = 1200, 760


def miss_report() -> dict[str, object]:
    """What Reel answers when the demo is asked "Say hi" instead of "Say hello"."""
    cassette = Cassette.loads(DEMO.read_bytes(), name="demo.jsonl")
    engine = Engine(cassette, Config(mode=Mode.REPLAY))
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Say hi to Reel."}]}
    headers = ((b"host", b"api.openai.com"), (b"content-type", b"application/json"))
    engine.receive_request(
        Request("POST", "/v1/chat/completions", headers, json.dumps(body).encode())
    )
    while not isinstance(event := engine.next_event(), Signal):
        if isinstance(event, Miss):
            return event.report.to_json()
    raise RuntimeError("the demo cassette answered: no miss to show")


def changed_demo(path: Path) -> None:
    """The demo with its first answer changed, and its Anthropic stream 3x
    slower and cut before its last three frames."""
    lines = [CassetteMeta().to_line()]
    first = True
    for ix in Cassette.loads(DEMO.read_bytes()).interactions():
        response = ix.response
        if first:
            body = json.loads(response.body)
            body["choices"][0]["message"]["content"] = "Hello! Reel here."
            response = dataclasses.replace(response, body=json.dumps(body).encode())
            first = False
        elif response.stream and ix.provider == "anthropic":
            frames = tuple((at * 3, data) for at, data in response.frames[:-3])
            cut = StreamCut(frames[-1][0] + 250.0, "reset", "connection reset by peer")
            response = dataclasses.replace(response, frames=frames, end_ms=0.0, cut=cut)
        meta = {"ttfb_ms": ix.meta.get("ttfb_ms")}  # the rest is read from the response
        lines.append(dataclasses.replace(ix, response=response, meta=meta).to_line())
    path.write_bytes(b"".join(lines))


def realtime(path: Path) -> str:
    """A cassette of one OpenAI Realtime session (a text turn and an audio
    turn); the session's id."""
    turn = [
        ("client", {"type": "conversation.item.create", "item": {"type": "message"}}),
        ("client", {"type": "response.create"}),
        ("server", {"type": "response.created"}),
    ]
    messages = [WebSocketMessage("server", 35.0, b'{"type":"session.created"}')]
    at = 200.0
    for round_ in range(2):
        for sender, event in turn:
            messages.append(WebSocketMessage(sender, at, json.dumps(event).encode()))
            at += 40.0
        for n in range(8):
            delta = {"type": "response.output_text.delta", "delta": f"word{n} "}
            messages.append(WebSocketMessage("server", at, json.dumps(delta).encode()))
            at += 25.0 + 10 * n
        if round_:
            messages.append(WebSocketMessage("server", at, b"\x00" * 4800, binary=True))
            at += 60.0
        usage = {"usage": {"input_tokens": 40 + round_, "output_tokens": 8}}
        done = {"type": "response.done", "response": usage}
        messages.append(WebSocketMessage("server", at, json.dumps(done).encode()))
        at += 600.0
    session = Interaction(
        "sha256:" + "5e" * 32,
        "5e55105e5510",
        RecordedRequest("GET", "/v1/realtime", (("model", "gpt-realtime"),)),
        RecordedResponse(101, (("sec-websocket-protocol", "realtime"),), stream="websocket"),
        provider="openai",
        endpoint="GET /v1/realtime",
        websocket=WebSocketLog(tuple(messages), WebSocketClose(1000, "", "client", at)),
    )
    path.write_bytes(CassetteMeta().to_line() + session.to_line())
    return session.id


#: Scroll so that the (first) timeline sits this far below the window's top.
ABOVE_PLOT = 330


def shoot(page: Page, url: str, name: str, click: str | None = None) -> None:
    page.goto(url)
    page.wait_for_selector("body[data-parsed='1']")
    if click is not None:
        page.click(click)
        page.wait_for_selector("#detail svg.timeline")
        page.evaluate(
            "(above) => { const top = document.querySelector('#detail svg.timeline')"
            ".getBoundingClientRect().top; window.scrollTo(0, window.scrollY + top - above); }",
            ABOVE_PLOT,
        )
    else:
        page.evaluate("() => window.scrollTo(0, 0)")
    page.screenshot(path=str(IMAGES / f"view-{name}.png"))
    print(f"docs/images/view-{name}.png")


def main() -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        sys.exit("chromium is not installed: apt-get install -y chromium")
    IMAGES.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="reel-shots-"))
    here = Path.cwd()
    try:
        os.chdir(work)  # the pages name the cassettes as given: short relative names
        shutil.copy(DEMO, "demo.jsonl")
        assert reel(["view", "demo.jsonl", "-o", "demo.html"]) == 0
        Path("miss.json").write_text(json.dumps(miss_report()))
        assert reel(["view", "--miss", "miss.json", "demo.jsonl", "-o", "miss.html"]) == 0
        changed_demo(Path("demo-new.jsonl"))
        assert reel(["diff", "demo.jsonl", "demo-new.jsonl", "--html", "diff.html"]) == 1
        ws_id = realtime(Path("realtime.jsonl"))
        assert reel(["view", "realtime.jsonl", "-o", "realtime.html"]) == 0
        page_all, page_miss, page_diff = (work / n for n in ("demo.html", "miss.html", "diff.html"))
        stream = next(
            ix.id
            for ix in Cassette.loads(DEMO.read_bytes()).interactions()
            if ix.response.stream and ix.provider == "anthropic"
        )
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium)
            page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
            shoot(page, page_all.as_uri(), "list")
            shoot(page, page_all.as_uri(), "stream", f"table.list tbody tr:has-text('{stream}')")
            shoot(page, page_miss.as_uri(), "miss")
            shoot(page, page_diff.as_uri(), "diff", "table.difflist tbody tr.d-changed >> nth=1")
            page_ws = (work / "realtime.html").as_uri()
            shoot(page, page_ws, "websocket", f"table.list tbody tr:has-text('{ws_id}')")
            browser.close()
    finally:
        os.chdir(here)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
