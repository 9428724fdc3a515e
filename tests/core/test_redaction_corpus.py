"""Redaction precision on real recordings (../shared/corpus).

``scripts/redaction_precision.py`` runs every redaction rule over every text
value of the corpus.  Each value a rule redacts was judged by hand; the true
positives are listed (by kind and the sha256 of the matched text) in
``redaction_corpus_true_positives.json``, and docs/redaction.md shows the
table.  Anything else a rule redacts is a false positive, and fails here: a
rule change that starts blanking ordinary content cannot slip in unseen,
nor one that stops catching a credential listed there.

Without ../shared/corpus this module is skipped.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.corpus import CORPUS, NO_CORPUS

ROOT = Path(__file__).resolve().parents[2]
if not (CORPUS / "MANIFEST.jsonl").is_file():
    pytest.skip(NO_CORPUS, allow_module_level=True)

KNOWN = Path(__file__).with_name("redaction_corpus_true_positives.json")


def _script() -> ModuleType:
    name = "redaction_precision"
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def findings() -> set[tuple[str, str]]:
    script = _script()
    return {(f.kind, f.digest) for f in script.scan(CORPUS)}


def _known() -> set[tuple[str, str]]:
    entries = json.loads(KNOWN.read_text())
    assert all(e["verdict"].startswith("true positive") for e in entries)
    return {(e["kind"], e["sha256"]) for e in entries}


def test_no_rule_redacts_anything_but_a_known_true_positive(
    findings: set[tuple[str, str]],
) -> None:
    false_positives = findings - _known()
    assert not false_positives, (
        "a redaction rule now replaces corpus values not judged true positives: run "
        "`python scripts/redaction_precision.py --full`, judge them, then fix the rule "
        "or add them to redaction_corpus_true_positives.json and docs/redaction.md"
    )


def test_every_known_true_positive_is_still_redacted(findings: set[tuple[str, str]]) -> None:
    assert _known() <= findings
