"""The command outputs shown in docs/cli.md, docs/matching.md and
docs/troubleshooting.md are the real ones: scripts/gen_docs_examples.py
produces them, and the pages hold exactly that."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    path = ROOT / "scripts" / "gen_docs_examples.py"
    spec = importlib.util.spec_from_file_location("gen_docs_examples", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def script() -> ModuleType:
    return _script()


@pytest.fixture(scope="module")
def outputs(script: ModuleType) -> dict[str, str]:
    generated: dict[str, str] = script.generate()
    return generated


def test_every_example_block_holds_the_current_output(
    script: ModuleType, outputs: dict[str, str]
) -> None:
    shown: set[str] = set()
    for page in script.PAGES:
        text = (ROOT / "docs" / page).read_text("utf-8")
        for name, _, body in script.MARK.findall(text):
            shown.add(name)
            assert body == outputs[name], (
                f"docs/{page}: example {name} is stale; run `python scripts/gen_docs_examples.py`"
            )
    assert shown == set(script.EXAMPLES)


def test_the_examples_cover_the_cli_and_the_miss_report(outputs: dict[str, str]) -> None:
    assert outputs["help"].startswith("$ reel --help\nusage: reel ")
    assert (
        "\n$ reel validate empty.jsonl\nempty.jsonl: empty: no _meta line"
        in (outputs["validate-junk"])
    )
    assert '"type": "reel_miss"' in outputs["miss-json"]
    assert "temperature: the same number written 0.70" in outputs["miss-exact"]
    # nothing volatile: no temporary path, no clock
    for text in outputs.values():
        assert "/tmp" not in text
        assert "reel-docs-" not in text


def test_check_mode_finds_drift(
    script: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "cli.md"
    page.write_text("<!-- example: errors -->\n```\n$ reel old output\n```\n", "utf-8")
    monkeypatch.setattr(script, "DOCS", tmp_path)
    monkeypatch.setattr(script, "PAGES", ("cli.md",))
    monkeypatch.setattr(script, "EXAMPLES", {"errors": script.EXAMPLES["errors"]})
    assert script.main(["--check"]) == 1
    assert "$ reel old output" in page.read_text("utf-8")
    assert script.main([]) == 0
    assert re.search(r"reel inspect: missing.jsonl: no such file", page.read_text("utf-8"))
    assert script.main(["--check"]) == 0
