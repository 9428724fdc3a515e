"""``reel view --store``: cassettes read from a store (a real redis-server,
``tests/redis_server.py``), written as a page or served; a served page
reloads when the Redis cassette grows, in Chromium too."""

from __future__ import annotations

import http.client
import json
import re
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reel_bindings._store_url import open_store
from reel_bindings.cli import build_parser, main
from reel_bindings.cli._common import STORE
from reel_bindings.cli._store import use_store
from reel_bindings.cli._view import live_page
from reel_bindings.view._serve import ViewServer
from reel_core import CassetteMeta
from tests.programs import in_ci, need_program

from .helpers import DEMO, chat_request, interaction


def rows_in(page: str) -> list[dict[str, Any]]:
    found = re.search(r'<script type="application/json" id="reel-data">(.*?)</script>', page)
    assert found is not None
    data: dict[str, Any] = json.loads(found.group(1))
    rows: list[dict[str, Any]] = data["rows"]
    return rows


def cassettes_in(page: str) -> list[str]:
    found = re.search(r'id="reel-data">(.*?)</script>', page)
    assert found is not None
    return [c["name"] for c in json.loads(found.group(1))["cassettes"]]


@pytest.fixture
def demo_in_redis(redis_url: str) -> str:
    store = open_store(redis_url)
    store.replace("team/demo.jsonl", DEMO.read_bytes())
    two = CassetteMeta().to_line() + interaction(chat_request("in redis")).to_line()
    store.replace("team/other.jsonl", two)
    return redis_url


def test_a_page_of_a_redis_cassette(
    demo_in_redis: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["view", "--store", demo_in_redis, "team/demo.jsonl"]) == 0
    page = (tmp_path / "demo.html").read_text("utf-8")  # the name's file, here
    assert cassettes_in(page) == ["team/demo.jsonl"]
    assert len(rows_in(page)) == 7


def test_a_prefix_names_every_cassette_under_it(demo_in_redis: str, tmp_path: Path) -> None:
    out = tmp_path / "team.html"
    assert main(["view", "--store", demo_in_redis, "team", "-o", str(out)]) == 0
    page = out.read_text("utf-8")
    assert cassettes_in(page) == ["team/demo.jsonl", "team/other.jsonl"]
    assert len(rows_in(page)) == 8


def test_store_alone_reads_reel_store(
    demo_in_redis: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "p.html"
    monkeypatch.setenv("REEL_STORE", demo_in_redis)
    assert main(["view", "team/other.jsonl", "--store", "-o", str(out)]) == 0
    assert [r["model"] for r in rows_in(out.read_text("utf-8"))] == ["gpt-4o-mini"]


def test_bad_store_usage_says_what_to_do(
    demo_in_redis: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("REEL_STORE", raising=False)
    out = tmp_path / "p.html"
    assert main(["view", "team/demo.jsonl", "--store", "-o", str(out)]) == 2
    assert "--store without a URL reads $REEL_STORE, which is not set" in capsys.readouterr().err
    assert main(["view", "--store", demo_in_redis, "nope.jsonl", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "nope.jsonl: no such cassette in the store, and none under it" in err
    assert main(["view", "--store", demo_in_redis, "../x", "-o", str(out)]) == 2
    assert "reel view:" in capsys.readouterr().err
    assert main(["view", "--store", "redis://127.0.0.1:1/0", "x.jsonl", "-o", str(out)]) == 2
    assert "cannot be reached" in capsys.readouterr().err
    assert not out.exists()


class ServedStore:
    """``reel view --serve --store URL NAME`` in a thread."""

    def __init__(self, *argv: str) -> None:
        ns = build_parser().parse_args(["view", "--serve", *argv])
        token = STORE.set(None)
        try:
            use_store(ns)
            self.server = ViewServer(live_page(ns, None, poll_ms=100))
        finally:
            STORE.reset(token)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.close()
        self.thread.join()


@pytest.fixture
def served_store() -> Iterator[Any]:
    started: list[ServedStore] = []

    def start(*argv: str) -> ServedStore:
        started.append(ServedStore(*argv))
        return started[-1]

    yield start
    for one in started:
        one.close()


def _get(url: str) -> str:
    """GET from the served page's loopback server (no proxy variables read)."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        conn.request("GET", parts.path)
        answer = conn.getresponse()
        assert answer.status == 200
        return answer.read().decode("utf-8")
    finally:
        conn.close()


def test_a_served_page_is_drawn_again_when_the_redis_cassette_grows(
    demo_in_redis: str, served_store: Any
) -> None:
    s = served_store("--store", demo_in_redis, "team/demo.jsonl")
    version = json.loads(_get(s.server.url + "_reel/version"))["version"]
    assert len(rows_in(_get(s.server.url))) == 7
    assert json.loads(_get(s.server.url + "_reel/version"))["version"] == version
    store = open_store(demo_in_redis)
    store.append("team/demo.jsonl", interaction(chat_request("appended in redis")).to_line())
    grown = json.loads(_get(s.server.url + "_reel/version"))["version"]
    assert grown != version
    assert len(rows_in(_get(s.server.url))) == 8
    # a cassette rewritten to as many lines (reel redact) is a new version too
    data = store.read("team/demo.jsonl")
    assert data is not None
    store.replace("team/demo.jsonl", data.replace(b"appended in redis", b"rewritten in redis"))
    assert json.loads(_get(s.server.url + "_reel/version"))["version"] not in (version, grown)


def test_a_served_prefix_shows_a_new_cassette(demo_in_redis: str, served_store: Any) -> None:
    s = served_store("--store", demo_in_redis, "team/")
    assert len(cassettes_in(_get(s.server.url))) == 2
    store = open_store(demo_in_redis)
    store.replace("team/third.jsonl", CassetteMeta().to_line())
    assert cassettes_in(_get(s.server.url))[-1] == "team/third.jsonl"


# -- in the browser ------------------------------------------------------------------

if in_ci():  # CI installs playwright with the test extra: never skip there
    import playwright.sync_api as sync_api
else:
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")


def test_the_browser_reloads_when_the_redis_cassette_grows(
    demo_in_redis: str, served_store: Any, tmp_path: Path
) -> None:
    chromium = need_program("chromium")
    s = served_store("--store", demo_in_redis, "team/demo.jsonl")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium)
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(s.server.url)
            page.wait_for_selector("body[data-parsed='1']")
            assert page.locator("table.list tbody tr").count() == 7
            store = open_store(demo_in_redis)
            store.append("team/demo.jsonl", interaction(chat_request("seen live")).to_line())
            page.wait_for_function(
                "() => document.querySelectorAll('table.list tbody tr').length === 8",
                timeout=20_000,
            )
            page.locator("table.list tbody tr").last.click()
            page.wait_for_selector("#detail .detail")
            assert "seen live" in page.inner_text("#detail")
            page.screenshot(path=str(tmp_path / "served-redis.png"), full_page=True)
            assert errors == []
        finally:
            browser.close()
