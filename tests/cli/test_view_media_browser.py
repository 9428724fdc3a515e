"""The viewer's images and sounds in a real browser (Debian's Chromium
through Playwright, as ``test_view_browser.py``): an image recorded as an
asset is drawn, a realtime session's PCM16 audio plays as a WAV, and the
page asks the network for nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reel_bindings._files import CassetteFile
from reel_bindings._store import FileStore
from reel_bindings.view._media import wav
from reel_core import Mode

from .media import PCM, realtime, vision
from .test_view_browser import Opened, browser, view

__all__ = ["browser"]  # the fixture, shared


class MediaPage(Opened):
    def close(self) -> None:
        assert self.errors == []
        # the file, and the data: URLs of its own images and sounds
        assert all(url.startswith(("file://", "data:")) for url in self.requests), self.requests
        self.context.close()


@pytest.fixture
def opened(browser: Any, tmp_path: Path) -> Iterator[Any]:
    pages: list[MediaPage] = []

    def open_(path: Path) -> MediaPage:
        page = MediaPage(browser, path, tmp_path)
        pages.append(page)
        return page

    yield open_
    for page in pages:
        page.close()


def duration(page: Any, selector: str) -> float:
    """The seconds of the ``<audio>`` at ``selector``, once the browser read them."""
    seconds: float = page.evaluate(
        """(sel) => new Promise((ok, fail) => {
            const a = document.querySelector(sel);
            if (a.readyState >= 1) return ok(a.duration);
            a.addEventListener("loadedmetadata", () => ok(a.duration));
            a.addEventListener("error", () => fail(String(a.error && a.error.message)));
            a.load();
        })""",
        selector,
    )
    return seconds


def test_an_image_from_an_asset_is_drawn_and_audio_plays(opened: Any, tmp_path: Path) -> None:
    cassette = tmp_path / "media.jsonl"
    file = CassetteFile(cassette, mode=Mode.AUTO, store=FileStore(), asset_threshold=128)
    for interaction in (vision(answer_audio=wav(PCM, 24000)), realtime()):
        file.append(interaction.to_line())
    assert len(FileStore().assets(str(cassette))) >= 2  # the image and the answer's sound
    p = opened(view(tmp_path, str(cassette)))
    rows = p.page.locator("table.list tbody tr")
    rows.nth(0).click()
    detail = p.page.locator("#detail .detail")
    detail.wait_for()
    image = detail.locator(".media img")
    assert image.count() == 1
    assert p.page.evaluate(
        "() => { const i = document.querySelector('#detail .media img'); "
        "return [i.complete, i.naturalWidth, i.naturalHeight]; }"
    ) == [True, 3, 2]
    captions = detail.locator(".media figcaption").all_inner_texts()
    assert captions[0].startswith("request messages[0].content[1].image_url.url · image/png")
    assert duration(p.page, "#detail .media audio") == pytest.approx(0.5, abs=0.01)
    p.shot("media-vision")
    rows.nth(1).click()
    p.page.wait_for_selector("#detail .detail[data-i='1']")
    assert p.page.locator("#detail .media audio").count() == 2
    for n in (1, 2):
        selector = f"#detail .media figure:nth-child({n}) audio"
        assert duration(p.page, selector) == pytest.approx(0.5, abs=0.01)
    assert (
        p.page.locator("#detail .media figcaption")
        .all_inner_texts()[0]
        .startswith("client audio (4 messages) · audio/wav")
    )
    p.shot("media-realtime")
