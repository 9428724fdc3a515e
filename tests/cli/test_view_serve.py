"""``reel view --serve``: the page on 127.0.0.1, drawn again when a cassette
changes; in Chromium, the page reloads itself and keeps its filters."""

from __future__ import annotations

import http.client
import json
import re
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reel_bindings.cli import build_parser, main
from reel_bindings.cli._view import live_page
from reel_bindings.view._page import CSP_SERVED
from reel_bindings.view._serve import LOOPBACK, ViewServer
from tests.programs import in_ci, need_program

from .helpers import DEMO, chat_request, interaction, write


class Served:
    def __init__(self, *argv: str) -> None:
        ns = build_parser().parse_args(["view", "--serve", *argv])
        self.server = ViewServer(live_page(ns, None, poll_ms=100))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def get(self, path: str, host: str | None = None) -> tuple[int, str, dict[str, str]]:
        conn = http.client.HTTPConnection(LOOPBACK, self.server.port, timeout=30)
        try:
            headers = {} if host is None else {"Host": host}
            conn.request("GET", path, headers=headers)
            answer = conn.getresponse()
            body = answer.read().decode("utf-8")
            return answer.status, body, {k.lower(): v for k, v in answer.getheaders()}
        finally:
            conn.close()

    def version(self) -> str:
        status, body, _ = self.get("/_reel/version")
        assert status == 200
        value: str = json.loads(body)["version"]
        return value

    def rows(self) -> list[dict[str, Any]]:
        status, body, _ = self.get("/")
        assert status == 200
        found = re.search(r'<script type="application/json" id="reel-data">(.*?)</script>', body)
        assert found is not None
        rows: list[dict[str, Any]] = json.loads(found.group(1))["rows"]
        return rows

    def close(self) -> None:
        self.server.close()
        self.thread.join()


@pytest.fixture
def served() -> Iterator[Any]:
    started: list[Served] = []

    def start(*argv: str) -> Served:
        one = Served(*argv)
        started.append(one)
        return one

    yield start
    for one in started:
        one.close()


def test_the_page_is_drawn_again_when_the_cassette_grows(served: Any, tmp_path: Path) -> None:
    cassette = tmp_path / "live.jsonl"
    shutil.copy(DEMO, cassette)
    s = served(str(cassette))
    assert s.server.url == f"http://127.0.0.1:{s.server.port}/"
    status, body, headers = s.get("/")
    assert status == 200
    assert headers["content-type"] == "text/html; charset=utf-8"
    assert headers["cache-control"] == "no-store"
    assert CSP_SERVED in body  # the page may ask its own server, nothing else
    before = s.version()
    assert s.version() == before  # nothing changed: the same version
    assert len(s.rows()) == 7
    with cassette.open("ab") as f:  # a proxy records one more
        f.write(interaction(chat_request("and one more")).to_line())
    assert s.version() != before
    assert len(s.rows()) == 8


def test_a_new_cassette_in_a_served_directory_shows(served: Any, tmp_path: Path) -> None:
    write(tmp_path / "a.jsonl", interaction())
    s = served(str(tmp_path))
    assert len(s.rows()) == 1
    write(tmp_path / "b.jsonl", interaction(chat_request("b")), interaction(chat_request("c")))
    assert len(s.rows()) == 3


def test_a_cassette_gone_bad_is_said_on_the_page_until_fixed(served: Any, tmp_path: Path) -> None:
    cassette = write(tmp_path / "c.jsonl", interaction())
    good = cassette.read_bytes()
    s = served(str(cassette))
    cassette.write_text("notes, not a cassette\n")
    status, body, _ = s.get("/")
    assert status == 200
    assert "not a Reel cassette" in body
    assert s.rows() == []
    cassette.write_bytes(good)
    assert len(s.rows()) == 1


@pytest.mark.parametrize(
    ("path", "host", "status"),
    [
        ("/", "evil.example", 403),  # DNS rebinding: another name for 127.0.0.1
        ("/", "127.0.0.1:1", 403),
        ("/etc/passwd", None, 404),
        ("/_reel/other", None, 404),
        ("/?x=1", None, 200),
    ],
)
def test_only_its_own_host_and_two_routes(
    served: Any, tmp_path: Path, path: str, host: str | None, status: int
) -> None:
    s = served(str(write(tmp_path / "c.jsonl", interaction())))
    assert s.get(path, host)[0] == status
    assert s.get("/", f"localhost:{s.server.port}")[0] == 200


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["-o", "{dir}/p.html"], "--serve writes no file: drop -o"),
        (["--port", "-5"], "--port -5: give a port from 1 to 65535"),
        (["--port", "65536"], "--port 65536: give a port"),
        (["--port", "{busy}"], "cannot listen on 127.0.0.1:{busy}"),
        (["--miss", "{dir}/other.json"], "not a Reel miss report"),
    ],
)
def test_serve_refuses_bad_usage_before_listening(
    argv: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cassette = write(tmp_path / "c.jsonl", interaction())
    (tmp_path / "other.json").write_text('{"error": {"type": "rate_limit"}}')
    with socket.socket() as busy:  # a port something else listens on
        busy.bind((LOOPBACK, 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        args = [a.replace("{dir}", str(tmp_path)).replace("{busy}", port) for a in argv]
        assert main(["view", "--serve", str(cassette), *args]) == 2
    err = capsys.readouterr().err
    assert says.replace("{busy}", port) in err
    assert err.count("\n") == 1


# -- in the browser ------------------------------------------------------------------

if in_ci():  # CI installs playwright with the test extra: never skip there
    import playwright.sync_api as sync_api
else:
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")


def test_the_browser_reloads_and_keeps_its_filters(served: Any, tmp_path: Path) -> None:
    chromium = need_program("chromium")
    cassette = tmp_path / "live.jsonl"
    shutil.copy(DEMO, cassette)
    s = served(str(cassette))
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium)
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(s.server.url)
            page.wait_for_selector("body[data-parsed='1']")
            assert page.locator("table.list tbody tr").count() == 7
            page.fill("#f-path", "/v1/chat")
            page.wait_for_function(
                "() => document.querySelectorAll('table.list tbody tr').length === 2"
            )
            with cassette.open("ab") as f:
                f.write(interaction(chat_request("recorded while watching")).to_line())
            # the page sees the new version, reloads, and filters the same way
            page.wait_for_function(
                "() => document.querySelectorAll('table.list tbody tr').length === 3",
                timeout=20_000,
            )
            assert page.input_value("#f-path") == "/v1/chat"
            assert page.locator("#count").inner_text() == "3 of 8 interactions"
            page.screenshot(path=str(tmp_path / "served.png"), full_page=True)
            assert errors == []
        finally:
            browser.close()
