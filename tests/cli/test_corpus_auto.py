"""Every file of ../shared/corpus through ``reel import auto``: each one
either imports whole (exit 0, every interaction converted, its format told
by its content) or is refused with one line that says why.  The counts per
manifest format are exact, so a file that stops importing, or a refusal
that changes, fails here.  (Each format's own tests replay what imports.)

The corpus is not part of the repository: without it this module is skipped.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from reel_bindings.cli import main
from tests.corpus import CORPUS, NO_CORPUS

if not (CORPUS / "MANIFEST.jsonl").is_file():
    pytest.skip(NO_CORPUS, allow_module_level=True)

ENTRIES = [json.loads(line) for line in (CORPUS / "MANIFEST.jsonl").read_text().splitlines()]

#: What a refusal is called here, by a phrase of its one-line reason.
REFUSALS = {
    "lone response": "a lone HTTP response (status 200, headers, body) with no request",
    "llama stack index": "its responses/, as the llamastack format",
    "sdk call": "is an SDK call, not an HTTP request",
}

#: manifest format -> outcome -> files.  An outcome is the format ``auto``
#: told (the file imported whole) or the refusal's name.
EXPECTED_FILES = {
    "vcrpy": {"vcr": 225},
    "llamastack": {"llamastack": 98, "sdk call": 10},
    "ruby_vcr": {"ruby-vcr": 105},
    "httprr": {"httprr": 28},
    "har": {"har": 20},
    "resp_json": {"lone response": 3},
    "pydantic-ws": {"pydantic-ws": 3},
    "pydantic-xai-grpc": {"pydantic-xai-grpc": 2},
    "llamastack-index": {"llama stack index": 1},
}
#: manifest format -> interactions imported (every one of its files' own).
EXPECTED_INTERACTIONS = {
    "vcrpy": 379,
    "ruby_vcr": 163,
    "llamastack": 98,
    "httprr": 38,
    "har": 22,
    "pydantic-ws": 3,  # one session per file
    "pydantic-xai-grpc": 2,  # one unary call per file
}

_IMPORTED = re.compile(
    r".* \(dry run, not written\): (\d+) of (\d+) interactions? \(([\w-]+)\)"
    r"(?: \(streamed: [^)]*\))?"
)


def outcome(entry: dict[str, str], capsys: pytest.CaptureFixture[str]) -> tuple[str, int]:
    """What ``reel import auto`` made of one corpus file, and how many
    interactions it imported; asserts it either imported whole or was
    refused in one line."""
    path = CORPUS / entry["file"]
    status = main(["import", "auto", str(path), "--dry-run"])
    out, err = capsys.readouterr()
    where = entry["file"]
    if status == 0:
        assert err == "", where
        found = _IMPORTED.fullmatch(out.splitlines()[0])
        assert found, (where, out)
        done, total, told = found.groups()
        assert done == total, (where, out)
        return told, int(done)
    assert status in (1, 2), (where, status, err)
    lines = err.splitlines()
    assert len(lines) == 1, (where, err)  # one line, that says why
    if status == 1:  # every interaction refused, nothing written
        assert out == f"{path}: nothing converted, {path.with_suffix('.jsonl')} not written\n"
    names = [name for name, phrase in REFUSALS.items() if phrase in lines[0]]
    assert len(names) == 1, (where, err)
    assert lines[0].startswith(f"reel import auto: {path}: "), (where, err)
    return names[0], 0


@pytest.mark.slow
def test_every_corpus_file_imports_whole_or_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    files: dict[str, Counter[str]] = {}
    interactions: Counter[str] = Counter()
    for entry in ENTRIES:
        told, done = outcome(entry, capsys)
        files.setdefault(entry["format"], Counter())[told] += 1
        if done:
            interactions[entry["format"]] += done
    assert {k: dict(v) for k, v in files.items()} == EXPECTED_FILES
    assert dict(interactions) == EXPECTED_INTERACTIONS
