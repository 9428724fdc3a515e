"""Where the corpus is: real recordings other projects made (vcrpy, HAR,
httprr, Llama Stack, pydantic-ai...), kept beside the repository in
``../shared/corpus`` (not in it), or where ``$REEL_CORPUS`` says.

Every test that reads it takes its place from here and skips, saying so,
where it is absent: the project's own checks (the core's 100 % branch gate
included) hold on a clone without it.  What the core needs of the corpus
for that gate is covered by tests of the repository's own
(``tests/core/test_corpus_free.py``)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CORPUS", "NO_CORPUS", "have_corpus"]

CORPUS = Path(
    os.environ.get("REEL_CORPUS")
    or Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
)
#: The reason a test that needs the corpus skips.
NO_CORPUS = f"no corpus at {CORPUS} (../shared/corpus beside the repository, or $REEL_CORPUS)"


def have_corpus() -> bool:
    return (CORPUS / "MANIFEST.jsonl").is_file()
