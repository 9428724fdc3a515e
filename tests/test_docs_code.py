"""The Python examples of the docs run, and print what the docs show.

docs/architecture.md drives the core the way a wire and an in-process
binding do; docs/cassette-format.md's script writes the example cassette
shown at the top of that page; docs/matching.md's fuzzy example reads it.
Each runs in a fresh interpreter, in a temporary directory.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
FENCE = re.compile(r"```(\w*)\n(.*?)```", re.S)


def blocks(page: str) -> list[tuple[str, str]]:
    """``(language, text)`` of each fenced block of ``page``, in order."""
    return [(m.group(1), m.group(2)) for m in FENCE.finditer((DOCS / page).read_text())]


def examples(page: str) -> list[tuple[str, str]]:
    """Each Python block of ``page`` with the plain block that follows it
    (what it prints)."""
    found = blocks(page)
    return [
        (code, found[i + 1][1])
        for i, (language, code) in enumerate(found)
        if language == "python" and i + 1 < len(found) and found[i + 1][0] == ""
    ]


def run(code: str, where: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=where, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def timeless(text: str) -> str:
    """``text`` with measured durations (``0.12 s``) blanked."""
    return re.sub(r"\d+\.\d+ s\b", "N s", text)


@pytest.mark.parametrize("index", range(2))
def test_architecture_examples_print_what_the_page_shows(index: int, tmp_path: Path) -> None:
    found = examples("architecture.md")
    assert len(found) == 2  # the wire binding, the in-process binding
    code, shown = found[index]
    assert timeless(run(code, tmp_path)) == timeless(shown)


def test_the_cassette_format_script_writes_the_example_and_matching_reads_it(
    tmp_path: Path,
) -> None:
    found = blocks("cassette-format.md")
    example = next(text for language, text in found if text.startswith('{"_meta"'))
    script = next(text for language, text in found if language == "python" and "chat.jsonl" in text)
    run(script, tmp_path)
    assert (tmp_path / "chat.jsonl").read_text() == example
    fuzzy = [(code, shown) for code, shown in examples("matching.md") if "FUZZY" in code]
    assert len(fuzzy) == 1
    code, shown = fuzzy[0]
    assert run(code, tmp_path) == shown
