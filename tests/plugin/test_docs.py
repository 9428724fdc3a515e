"""The test examples of docs/pytest-plugin.md run: recorded against the fake
upstream, then replayed with no upstream and no key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.fakes.upstream import FakeUpstreamThread, closed_port_url

from .conftest import FAKE_KEY

PAGE = Path(__file__).parents[2] / "docs" / "pytest-plugin.md"
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def examples() -> list[str]:
    """The page's Python blocks that define tests; those naming a real
    provider URL are left out (they would record from it)."""
    blocks = BLOCK.findall(PAGE.read_text("utf-8"))
    return [b for b in blocks if "def test_" in b and "https://" not in b]


def test_the_page_has_examples() -> None:
    assert len(examples()) >= 4


def test_documented_examples_record_and_replay(
    pytester: pytest.Pytester, fake: FakeUpstreamThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {f"test_doc_{i}": source for i, source in enumerate(examples())}
    pytester.makepyfile(**files)
    tests = sum(
        source.count("\ndef test_") + source.startswith("def test_") for source in files.values()
    )
    # Recording: in-process clients follow OPENAI_BASE_URL, the proxy REEL_UPSTREAM.
    monkeypatch.setenv("OPENAI_BASE_URL", fake.url + "/v1")
    monkeypatch.setenv("REEL_UPSTREAM", fake.url)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    pytester.runpytest_subprocess("--reel-mode", "record").assert_outcomes(passed=tests)

    fake.stop()
    monkeypatch.setenv("FAKE_URL", closed_port_url())
    for variable in ("OPENAI_BASE_URL", "REEL_UPSTREAM", "OPENAI_API_KEY"):
        monkeypatch.delenv(variable)
    pytester.runpytest_subprocess().assert_outcomes(passed=tests)
