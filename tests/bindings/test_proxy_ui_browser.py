"""The proxy's viewer (``--ui``) in Chromium: a recording made through the
proxy appears on the open page by itself (live reload), on both backends.

The proxy and the fake upstream run in an anyio blocking portal (asyncio or
trio); Playwright's sync API drives Debian's Chromium from the test thread.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from anyio.from_thread import start_blocking_portal

from reel_bindings.proxy import running
from reel_core import Mode
from tests.fakes.server import serve_fake
from tests.programs import in_ci, need_program

from .proxy_support import chat_call, options

if in_ci():  # CI installs playwright with the test extra: never skip there
    import playwright.sync_api as sync_api
else:
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")

DEMO = Path(__file__).resolve().parents[2] / "src" / "reel_bindings" / "demo" / "demo.jsonl"


@pytest.fixture(params=["asyncio", "trio"])
def proxy_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A proxy in auto mode with ``--ui`` over a copy of the demo cassette,
    recording what it misses from the fake upstream."""
    cassette = tmp_path / "live.jsonl"
    shutil.copy(DEMO, cassette)
    with (
        start_blocking_portal(request.param) as portal,
        portal.wrap_async_context_manager(serve_fake(frame_delay=0.0)) as fake,
        portal.wrap_async_context_manager(
            running(options(Mode.AUTO, cassette, upstream=fake.url, ui=True))
        ) as url,
    ):
        yield url


def test_a_recording_appears_on_the_open_page(proxy_url: str, tmp_path: Path) -> None:
    chromium = need_program("chromium")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            errors: list[str] = []
            asked: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: asked.append(r.url))
            page.goto(proxy_url + "/_reel/")
            page.wait_for_selector("body[data-parsed='1']")
            assert page.locator("#live").count() == 1
            assert page.locator("table.list tbody tr").count() == 7
            page.fill("#f-path", "/v1/chat")
            page.wait_for_function(
                "() => document.querySelectorAll('table.list tbody tr').length === 2"
            )
            call = chat_call("recorded while the viewer is open")
            with httpx.Client(base_url=proxy_url, trust_env=False, timeout=30) as client:
                answer = client.post(call.path, content=call.content)
            assert answer.status_code == 200
            # the page polls its version, reloads, and keeps its filter
            page.wait_for_function(
                "() => document.querySelectorAll('table.list tbody tr').length === 3",
                timeout=20_000,
            )
            assert page.input_value("#f-path") == "/v1/chat"
            page.locator("table.list tbody tr").last.click()
            page.wait_for_selector("#detail .detail")
            assert "recorded while the viewer is open" in page.inner_text("#detail")
            page.screenshot(path=str(tmp_path / "proxy-ui.png"), full_page=True)
            assert errors == []
            # the page asked its proxy only for itself and its version
            paths = {u.removeprefix(proxy_url) for u in asked}
            assert paths <= {"/_reel/", "/_reel/version"}, paths
        finally:
            browser.close()
