"""A HAR from ``reel export har`` opens in a real browser: Playwright's
``routeFromHAR`` answers a page's ``fetch`` calls from it.

Chromium is Debian's package, driven by Playwright from PyPI through
``executable_path`` (Playwright's own browser download cannot run here).
Every answer must come from the HAR: the context aborts any request the HAR
does not hold, and the test checks that it does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from reel_bindings.cli import main
from reel_core import Cassette
from tests.browser import chromium
from tests.core.formats.test_har_export import SSE, exchange, recorded

from .helpers import DEMO, write

# The page the fetches run from, served at each API host so they are same-origin.
PAGE = "/__reel_page__"

FETCH = """async ([url, method, body, type]) => {
    const init = {method};
    if (body !== null) { init.body = body; init.headers = {"content-type": type}; }
    try {
        const r = await fetch(url, init);
        const bytes = new Uint8Array(await r.arrayBuffer());
        return {status: r.status, bytes: Array.from(bytes)};
    } catch (e) {
        return {error: String(e)};
    }
}"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


def export(cassette: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out.har"
    assert main(["export", "har", str(cassette), "-o", str(out)]) == 0
    return out


def replay_in_browser(browser: Any, har: Path, requests: list[dict[str, Any]]) -> list[Any]:
    """Each HAR request fetched by a page at its own origin, answered by
    ``routeFromHAR`` (anything not in the HAR is aborted)."""
    context = browser.new_context()
    try:
        context.route_from_har(str(har), not_found="abort")
        page = context.new_page()
        page.route(
            f"**{PAGE}",
            lambda route: route.fulfill(status=200, content_type="text/html", body="<p>app</p>"),
        )
        results = []
        for request in requests:
            url = urlsplit(request["url"])
            page.goto(f"{url.scheme}://{url.netloc}{PAGE}")
            post = request.get("postData")
            args = [
                request["url"],
                request["method"],
                None if post is None else post["text"],
                None if post is None else post["mimeType"],
            ]
            results.append(page.evaluate(FETCH, args))
        return results
    finally:
        context.close()


def test_the_demo_cassette_replays_in_chromium_from_its_har(browser: Any, tmp_path: Path) -> None:
    har = export(DEMO, tmp_path)
    entries = json.loads(har.read_bytes())["log"]["entries"]
    results = replay_in_browser(browser, har, [entry["request"] for entry in entries])
    interactions = list(Cassette.loads(DEMO.read_bytes()).interactions())
    assert len(results) == len(interactions) == 7
    for result, interaction in zip(results, interactions, strict=True):
        assert result.get("error") is None, result
        assert result["status"] == interaction.response.status
        # Two chat completions share url and method: the page gets the one
        # whose request body it sent (the stream or the whole answer).
        assert bytes(result["bytes"]) == interaction.response.content


def test_binary_errors_and_get_requests_come_back_as_stored(browser: Any, tmp_path: Path) -> None:
    audio = bytes(range(256)) * 4
    stream = b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'
    items = recorded(
        exchange(
            0,
            target="https://api.openai.com/v1/audio/speech",
            body=audio,
            response_headers=(("content-type", "audio/mpeg"),),
        ),
        exchange(1, status=429, body=b'{"error":{"type":"rate_limit"}}'),
        exchange(
            2,
            method="GET",
            target="https://api.openai.com/v1/models?limit=2",
            request_headers=(),
            request_body=b"",
            body=b'{"data":[]}',
        ),
        exchange(
            3, target="https://api.openai.com/v1/completions", body=stream, response_headers=SSE
        ),
    )
    cassette = write(tmp_path / "mixed.jsonl", *items)
    har = export(cassette, tmp_path)
    entries = json.loads(har.read_bytes())["log"]["entries"]
    assert entries[0]["response"]["content"]["encoding"] == "base64"
    results = replay_in_browser(browser, har, [entry["request"] for entry in entries])
    for result, interaction in zip(results, items, strict=True):
        assert result.get("error") is None, result
        assert result["status"] == interaction.response.status
        assert bytes(result["bytes"]) == interaction.response.content
    assert [r["status"] for r in results] == [200, 429, 200, 200]


def test_a_request_the_har_does_not_hold_is_not_answered(browser: Any, tmp_path: Path) -> None:
    har = export(DEMO, tmp_path)
    (result,) = replay_in_browser(
        browser,
        har,
        [
            {
                "url": "https://api.openai.com/v1/embeddings",
                "method": "POST",
                "postData": {"text": "{}", "mimeType": "application/json"},
            }
        ],
    )
    assert "Failed to fetch" in result["error"]
