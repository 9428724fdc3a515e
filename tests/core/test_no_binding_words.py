"""The core names no flag, variable or command of a binding (issue #33):
what a message tells its reader to do comes from the binding
(``reel_core.Hints``, an ``AssetSource``'s ``mend``), so a proxy user reads
``--max-body`` where an in-process user reads ``REEL_MAX_BODY``.  This
reads every string the core's code holds (docstrings aside: they explain
the bindings) and fails on one that names a ``REEL_*`` variable, a
``--flag`` or a ``reel`` command."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import reel_core

CORE = Path(reel_core.__file__).parent

#: A binding's words: an environment variable, a command-line flag, a
#: ``reel`` subcommand.
BINDING_WORDS = re.compile(
    r"REEL_[A-Z_]+"
    r"|(?<![\w-])--[a-z][a-z-]+"
    r"|\breel (?:validate|import|export|record|auto|replay|check|compact|redact|view|diff"
    r"|inspect|cost|drift|fresh|push|pull|store)\b"
)


def _docstrings(tree: ast.AST) -> set[int]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, kinds) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def binding_words(source: str) -> list[tuple[int, str]]:
    """Where ``source``'s code strings (not its docstrings) name a binding's word."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    return [
        (node.lineno, found.group(0))
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
        if (found := BINDING_WORDS.search(node.value))
    ]


def test_the_scan_finds_a_binding_word() -> None:
    """The check can fail: each kind of word, in a plain string, an
    f-string's text and a concatenation, is found; a docstring is not."""
    source = '''
def f(n):
    """Set REEL_MODE=auto, or --mode auto, then `reel check`."""
    a = "raise it with REEL_MAX_BODY=BYTES"
    b = f"{n} bytes: start the proxy with --max-body " + "N"
    c = "`reel validate " + "c.jsonl`"
    return a, b, c
'''
    found = sorted(word for _, word in binding_words(source))
    assert found == ["--max-body", "REEL_MAX_BODY", "reel validate"]


def test_no_core_string_names_a_binding_word() -> None:
    found = [
        f"{path.relative_to(CORE)}:{line}: {word}"
        for path in sorted(CORE.rglob("*.py"))
        for line, word in binding_words(path.read_text(encoding="utf-8"))
    ]
    assert found == []
