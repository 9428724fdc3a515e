"""The public facade: nothing outside the core imports a private core module.

Bindings, scripts, benchmarks and the examples in the docs use only the
names ``reel_core`` exports (``reel_core.__all__``); a private module
(``reel_core._match``...) may move or change in any release.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import reel_core

ROOT = Path(__file__).resolve().parents[1]
#: Where code outside the core lives (docs: the Python in their examples).
OUTSIDE = ("src/reel_bindings", "scripts", "bench", "docs")
_MD_IMPORT = re.compile(r"^\s*(?:from\s+(reel_core\S*)\s+import\s+(.+)|import\s+(reel_core\S*))")


def private_imports_py(source: str) -> list[str]:
    """The private core imports of Python ``source``, as written."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("reel_core._")]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module is not None:
            if node.module.startswith("reel_core._"):
                found.append(node.module)
            elif node.module == "reel_core":
                found += [f"reel_core.{a.name}" for a in node.names if _private(a.name)]
    return found


def private_imports_md(text: str) -> list[str]:
    """The private core imports in the lines of a Markdown page."""
    found: list[str] = []
    for line in text.splitlines():
        m = _MD_IMPORT.match(line)
        if m is None:
            continue
        module = m.group(1) or m.group(3)
        if module.startswith("reel_core._"):
            found.append(module)
        elif module == "reel_core" and m.group(2):
            names = m.group(2).strip("() ").split(",")
            found += [f"reel_core.{n.strip()}" for n in names if _private(n.strip())]
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_the_readers_find_private_imports() -> None:
    source = (
        "import reel_core._http\n"
        "from reel_core._match import diff_json\n"
        "from reel_core import Session, _cassette, __version__\n"
        "from reel_core import Session\n"
        "def f() -> None:\n"
        "    from reel_core._miss import shorten\n"
    )
    assert sorted(private_imports_py(source)) == [
        "reel_core._cassette",
        "reel_core._http",
        "reel_core._match",
        "reel_core._miss",
    ]
    page = (
        "text naming `reel_core._redact.EMAIL_TLDS` is no import\n"
        "```python\nfrom reel_core._literals import exchange_redactor\n"
        "from reel_core import Redactor, _body\nimport reel_core._http as h\n```\n"
    )
    assert private_imports_md(page) == [
        "reel_core._literals",
        "reel_core._body",
        "reel_core._http",
    ]


def test_nothing_outside_the_core_imports_a_private_core_module() -> None:
    found: list[str] = []
    for top in OUTSIDE:
        for path in sorted((ROOT / top).rglob("*")):
            if path.suffix == ".py":
                names = private_imports_py(path.read_text(encoding="utf-8"))
            elif path.suffix == ".md":
                names = private_imports_md(path.read_text(encoding="utf-8"))
            else:
                continue
            found += [f"{path.relative_to(ROOT)}: {name}" for name in names]
    assert not found, (
        "private core modules imported from outside the core (export the name from "
        "reel_core/__init__.py instead):\n" + "\n".join(found)
    )


def test_every_public_name_is_there_and_the_package_only_re_exports() -> None:
    for name in reel_core.__all__:
        assert hasattr(reel_core, name), name
    tree = ast.parse(Path(reel_core.__file__).read_text(encoding="utf-8"))
    defined = [
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    ]
    # Only the PEP 562 hooks that re-export the rooms loaded on first use.
    assert sorted(defined) == ["__dir__", "__getattr__"]
    public = {n for n in dir(reel_core) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(reel_core, n)).__name__ == "module"}
    assert public - modules - {"annotations"} <= set(reel_core.__all__)
