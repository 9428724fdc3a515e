"""``reel view`` on a large cassette: how long the page takes to write, and
to open in Chromium (Debian's, through Playwright), to open one interaction
and to search every body.

    python -m bench.view                 # 10,000 interactions, about 100 MB
    python -m bench.view --n 2000 --mb 20
    python -m bench.view --text repeated # the words of every answer repeated

The answers are words drawn from a vocabulary of 4,000 made-up words with
the frequencies of a natural language (Zipf's law), so that the page's
compressed details weigh what real answers' would (a third or so of the
text), not a repeated phrase's (a hundredth).

Figures, not assertions: the page's own ``performance.now()`` when its
script has drawn the first page of the list and when the whole file is read
(the details follow the script), then the wall time of a click and of a
search as Playwright sees them.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from reel_bindings.cli import main as reel
from reel_core import CassetteMeta, Interaction, MatchConfig, RecordedRequest, RecordedResponse

__all__ = ["build", "main"]


@functools.cache
def _vocabulary() -> tuple[list[str], list[float]]:
    rng = random.Random(20)
    letters = "etaoinshrdlucmfwypvbgkqjxz"
    words = [
        "".join(rng.choices(letters, weights=range(26, 0, -1), k=rng.randint(2, 9)))
        for _ in range(4000)
    ]
    return words, [1 / rank for rank in range(1, len(words) + 1)]


def _words(n: int, size: int, varied: bool) -> str:
    if not varied:
        return ("alpha beta gamma delta epsilon " * (size // 30 + 1))[:size]
    words, weights = _vocabulary()
    text = " ".join(random.Random(n).choices(words, weights=weights, k=size // 5 + 1))
    return text[:size]


def _interaction(n: int, body_bytes: int, varied: bool = True) -> Interaction:
    words = _words(n, body_bytes, varied)
    request = RecordedRequest(
        "POST",
        "/v1/chat/completions",
        body=json.dumps(
            {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"q{n:05d}"}]}
        ).encode(),
    )
    if n % 50 == 0:  # a stream now and then, with a long gap in it
        frames = tuple(
            (
                i * 20.0 + (500.0 if i > 10 else 0.0),
                b'data: {"choices":[{"delta":{"content":"w "}}]}\n\n',
            )
            for i in range(40)
        )
        response = RecordedResponse(200, stream="sse", frames=frames, end_ms=1400.0)
    else:
        body = {"choices": [{"message": {"content": f"answer {n:05d} {words}"}}]}
        response = RecordedResponse(200, body=json.dumps(body).encode())
    key = request.key(MatchConfig())
    return Interaction(
        key=key,
        id=f"{n:012d}",
        request=request,
        response=response,
        provider="openai",
        endpoint="POST /v1/chat/completions",
        meta={"ttfb_ms": 120.0, "total_ms": 300.0},
    )


def build(path: Path, n: int, megabytes: float, *, varied: bool = True) -> None:
    """A cassette of ``n`` interactions weighing about ``megabytes``."""
    body_bytes = max(100, int(megabytes * 1e6 / n) - 600)
    with path.open("wb") as out:
        out.write(CassetteMeta().to_line())
        for i in range(n):
            out.write(_interaction(i, body_bytes, varied).to_line())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000, help="interactions (10,000)")
    parser.add_argument("--mb", type=float, default=100.0, help="cassette size in MB (100)")
    parser.add_argument(
        "--text",
        choices=("varied", "repeated"),
        default="varied",
        help="answers of words in a natural frequency (default), or one phrase repeated",
    )
    ns = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="reel-bench-view-"))
    try:
        cassette = work / "big.jsonl"
        build(cassette, ns.n, ns.mb, varied=ns.text == "varied")
        page = work / "big.html"
        start = time.perf_counter()
        assert reel(["view", str(cassette), "-o", str(page)]) == 0
        written = time.perf_counter() - start
        print(
            f"cassette {cassette.stat().st_size / 1e6:.1f} MB, {ns.n:,} interactions; "
            f"reel view wrote {page.stat().st_size / 1e6:.1f} MB in {written:.1f} s"
        )
        chromium = shutil.which("chromium")
        try:
            from playwright.sync_api import sync_playwright
        except ImportError:
            chromium = None
        if chromium is None:
            print("no chromium or playwright: the browser figures are skipped")
            return 0
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium)
            tab = browser.new_page(viewport={"width": 1300, "height": 900})
            tab.goto(page.as_uri(), timeout=120_000, wait_until="commit")
            tab.wait_for_selector("body[data-ready='1']", timeout=120_000)
            ready = tab.evaluate("Number(document.body.dataset.loadMs)")
            tab.wait_for_selector("body[data-parsed='1']", timeout=120_000)
            parsed = tab.evaluate("Number(document.body.dataset.parsedMs)")
            start = time.perf_counter()
            tab.click("table.list tbody tr")
            tab.wait_for_selector("#detail .detail")
            opened = time.perf_counter() - start
            start = time.perf_counter()
            tab.fill("#q", f"answer {ns.n - 1:05d}")
            tab.wait_for_function(
                "() => document.querySelectorAll('table.list tbody tr').length === 1"
            )
            searched = time.perf_counter() - start
            browser.close()
        print(
            f"chromium: the list drawn {ready} ms after navigation, the whole file read at "
            f"{parsed} ms; one interaction opened (its block inflated) in "
            f"{opened * 1000:.0f} ms; a search of every body in {searched * 1000:.0f} ms "
            "(every block inflated, 150 ms of it the search box's debounce)"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
