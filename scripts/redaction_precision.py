"""Measure the precision of Reel's redaction rules on real recordings.

Runs every rule of ``reel_core.Redactor`` (secret shapes, PII shapes, the
credential-name rule for JSON fields and query parameters) over every text
value of the corpus in ``../shared/corpus`` (other projects' cassettes:
vcrpy and Ruby VCR YAML, HAR, Llama Stack JSON, httprr...) and reports, per
rule, how many values it redacts and what it redacts.  Each finding can then
be judged: a true secret or personal datum, or a false positive.

    python scripts/redaction_precision.py [CORPUS] [--json]

``--json`` prints one object per finding (kind, file, the sha256 of the
matched text and a masked preview) instead of the table; the list of known
true positives checked in for ``tests/core/test_redaction_corpus.py`` is
made from it.  Values are read as the cassettes hold them: strings in YAML
and JSON documents (recursively; ``!!binary`` and gzip bodies decoded when
they are UTF-8), each line of an httprr trace, and the query of every
string that looks like a URL.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from reel_core import Redactor  # noqa: E402
from reel_core.tools import is_credential_name  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpus"
SKIPPED = {"MANIFEST.jsonl", "PROVENANCE.md"}
_FORM = re.compile(r"[\w.\-]+=[^&\s]*(?:&[\w.\-]+=[^&\s]*)+")


@dataclass(frozen=True)
class Finding:
    kind: str
    file: str
    text: str
    #: Up to 40 characters either side, for a person to judge.
    context: str = ""

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8", "surrogatepass")).hexdigest()

    @property
    def preview(self) -> str:
        """The text with its middle masked: enough to judge, not to reuse."""
        t = self.text.replace("\n", "\\n")
        if len(t) <= 12:
            return t
        return t[:8] + "..." + t[-4:]


def _decode(data: bytes) -> str | None:
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError):
            return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, bytes):
        text = _decode(value)
        if text is not None:
            yield text
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def values(path: Path) -> Iterator[str]:
    """Every text value of one corpus file."""
    data = path.read_bytes()
    name = path.name
    if name.endswith(".gz"):
        data = gzip.decompress(data)
        name = name[:-3]
    if name.endswith((".yaml", ".yml")):
        import yaml

        loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        try:
            docs = list(yaml.load_all(data, Loader=loader))
        except yaml.YAMLError:
            docs = [data.decode("utf-8", "replace")]
        for doc in docs:
            yield from _strings(doc)
    elif name.endswith((".json", ".har")):
        try:
            yield from _strings(json.loads(data))
        except ValueError:
            yield data.decode("utf-8", "replace")
    elif name.endswith(".jsonl"):
        for line in data.splitlines():
            try:
                yield from _strings(json.loads(line))
            except ValueError:
                yield line.decode("utf-8", "replace")
    elif name.endswith(".httprr"):
        text = data.decode("utf-8", "replace")
        yield from text.split("\n")
    # other files (the sqlite index) hold no text value to scan


def findings(redactor: Redactor, file: str, text: str) -> Iterator[Finding]:
    """What ``redactor`` replaces in ``text``, rule by rule."""
    pattern = redactor._pattern
    kinds = redactor._kinds
    for m in pattern.finditer(text):
        around = text[max(0, m.start() - 40) : m.end() + 40]
        yield Finding(kinds[m.lastgroup or ""], file, m.group(0), around)
    for m in redactor._field.finditer(text):
        if "secret-field" in redactor.text(m.group(0)):
            yield Finding("secret-field", file, m.group(0), m.group(0))
    query = None
    if "?" in text and len(text) < 4096 and "://" in text[:16]:
        try:
            query = urlsplit(text.strip().split(" ")[-2 if text.startswith("GET ") else 0]).query
        except (ValueError, IndexError):
            return
    elif _FORM.fullmatch(text.strip()):
        query = text.strip()  # a form body: the form helper redacts it as a query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        for k, v in pairs:
            if v and (is_credential_name(k, query=True) or k in redactor.fields):
                yield Finding("query-secret", file, f"{k}={v}", text)


def scan(corpus: Path, redactor: Redactor | None = None) -> list[Finding]:
    """Every finding of every rule in the corpus, file by file."""
    redactor = redactor or Redactor()
    out: list[Finding] = []
    for path in sorted(corpus.rglob("*")):
        if not path.is_file() or path.name in SKIPPED:
            continue
        rel = str(path.relative_to(corpus))
        seen: set[str] = set()
        for text in values(path):
            if text in seen:
                continue
            seen.add(text)
            out.extend(findings(redactor, rel, text))
    return out


def count_values(corpus: Path) -> int:
    return sum(
        len(set(values(p)))
        for p in sorted(corpus.rglob("*"))
        if p.is_file() and p.name not in SKIPPED
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", nargs="?", type=Path, default=CORPUS)
    parser.add_argument("--json", action="store_true", help="one JSON object per finding")
    parser.add_argument(
        "--full", action="store_true", help="show each finding whole, in context (to judge it)"
    )
    ns = parser.parse_args(argv)
    if not (ns.corpus / "MANIFEST.jsonl").is_file():
        print(f"no corpus at {ns.corpus} (MANIFEST.jsonl missing)", file=sys.stderr)
        return 2
    found = scan(ns.corpus)
    if ns.json:
        for f in found:
            print(json.dumps({"kind": f.kind, "sha256": f.digest, "preview": f.preview}))
        return 0
    by_kind: dict[str, Counter[str]] = defaultdict(Counter)
    for f in found:
        shown = f"{f.file}: {f.context!r}" if ns.full else f.preview
        by_kind[f.kind][shown] += 1
    print(f"{count_values(ns.corpus)} distinct text values scanned")
    for kind in sorted(by_kind):
        print(f"\n{kind}: {sum(by_kind[kind].values())} findings")
        for preview, n in by_kind[kind].most_common():
            print(f"  {n:4d}  {preview}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
