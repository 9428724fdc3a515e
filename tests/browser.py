"""Debian's chromium driven by Playwright, for the tests that open Reel's
pages in a real browser (the viewer, the exported HAR).  In CI Playwright
comes with the test extra and chromium with ``.ci/run``: nothing skips
there; elsewhere a test without them skips with the reason."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.programs import in_ci, need_program


def playwright_api() -> Any:
    """``playwright.sync_api`` (a skip with the reason where it is not installed)."""
    if in_ci():  # CI installs playwright with the test extra: never skip there
        import playwright.sync_api as sync_api

        return sync_api
    return pytest.importorskip("playwright.sync_api", reason="pip install playwright")


@contextmanager
def chromium() -> Iterator[Any]:
    """A launched chromium, closed at the end."""
    api = playwright_api()
    program = need_program("chromium")
    with api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=program)
        try:
            yield browser
        finally:
            browser.close()
