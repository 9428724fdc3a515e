"""A test that needs an optional package skips saying what to install
(issue 31, part 5): every ``pytest.importorskip`` in the suite names a
reason, so a run without the package tells the reader what it lacks.
(Whether the README's install holds what the tests need is checked by
``.ci/run``, which runs the README's test command in a venv holding only
the ``test`` extra.)"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _calls(path: Path) -> list[ast.Call]:
    tree = ast.parse(path.read_text("utf-8"), str(path))
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "importorskip"
    ]


def test_every_importorskip_names_a_reason() -> None:
    found = {path: _calls(path) for path in sorted(TESTS.rglob("*.py"))}
    assert sum(map(len, found.values())) > 10  # the walk finds them
    unexplained = [
        f"{path.relative_to(TESTS)}:{call.lineno}"
        for path, calls in found.items()
        for call in calls
        if not any(keyword.arg == "reason" for keyword in call.keywords)
    ]
    assert unexplained == []
