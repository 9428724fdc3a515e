"""The public facade: nothing outside the core imports a private core module;
the facade stays small, and every public name is documented.

Bindings, scripts, benchmarks and the examples in the docs use only the
names ``reel_core`` and ``reel_core.tools`` export (their ``__all__``); a
private module (``reel_core._match``...) may move or change in any release.
"""

from __future__ import annotations

import ast
import inspect
import re
import types
from pathlib import Path

import pytest

import reel_core
import reel_core.tools

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


# -- the two public namespaces ---------------------------------------------------

#: The most names the facade may have: what a user of the core and a binding
#: author need; every other helper is in ``reel_core.tools``.
FACADE_LIMIT = 60
NAMESPACES = (reel_core, reel_core.tools)


def test_the_facade_stays_small_and_the_namespaces_do_not_overlap() -> None:
    assert len(reel_core.__all__) <= FACADE_LIMIT, sorted(reel_core.__all__)
    assert not set(reel_core.__all__) & set(reel_core.tools.__all__)
    for namespace in NAMESPACES:
        assert len(namespace.__all__) == len(set(namespace.__all__)), namespace.__name__


def test_tools_only_re_exports() -> None:
    tree = ast.parse(Path(reel_core.tools.__file__).read_text(encoding="utf-8"))
    defined = [
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    ]
    assert sorted(defined) == ["__dir__", "__getattr__"]
    for name in reel_core.tools.__all__:
        assert hasattr(reel_core.tools, name), name
    public = {n for n in dir(reel_core.tools) if not n.startswith("_")}
    modules = {n for n in public if isinstance(getattr(reel_core.tools, n), types.ModuleType)}
    assert public - modules - {"annotations"} <= set(reel_core.tools.__all__)


def test_a_name_asked_of_the_other_namespace_says_where_it_is() -> None:
    with pytest.raises(AttributeError, match=r"it is reel_core\.tools\.shown_url"):
        reel_core.shown_url  # noqa: B018
    with pytest.raises(AttributeError, match=r"it is reel_core\.Engine"):
        reel_core.tools.Engine  # noqa: B018
    with pytest.raises(AttributeError, match=r"no attribute 'NoSuchThing'$"):
        reel_core.tools.NoSuchThing  # noqa: B018


def _documented_assignments() -> dict[str, bool]:
    """Every module-level assignment of the core by name: whether one of its
    definitions is documented (a ``#:`` comment right above it, or a
    string right after it, as Sphinx reads them)."""
    found: dict[str, bool] = {}
    for path in sorted(Path(reel_core.__file__).parent.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines, body = text.splitlines(), ast.parse(text).body
        for i, node in enumerate(body):
            if isinstance(node, ast.Assign):
                targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                targets = [node.target.id]
            else:
                continue
            after = body[i + 1] if i + 1 < len(body) else None
            documented = lines[node.lineno - 2].lstrip().startswith("#:") or (
                isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            )
            for name in targets:
                found[name] = found.get(name, False) or documented
    return found


def _undocumented(namespace: types.ModuleType, assignments: dict[str, bool]) -> list[str]:
    missing: list[str] = []
    for name in namespace.__all__:
        obj = inspect.unwrap(getattr(namespace, name))
        if inspect.isclass(obj) or inspect.isfunction(obj):
            source = ast.parse(Path(inspect.getfile(obj)).read_text(encoding="utf-8"))
            nodes = [
                node
                for node in ast.walk(source)
                if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == obj.__name__
            ]
            if not nodes or not ast.get_docstring(nodes[0]):
                missing.append(f"{namespace.__name__}.{name}")
        elif not assignments.get(name, False):
            missing.append(f"{namespace.__name__}.{name}")
    return missing


def test_every_public_name_is_documented() -> None:
    assignments = _documented_assignments()
    missing = [m for ns in NAMESPACES for m in _undocumented(ns, assignments)]
    assert not missing, "public names without a docstring (or a #: comment):\n" + "\n".join(missing)


def test_the_check_would_notice_an_undocumented_name() -> None:
    fake = types.ModuleType("fake")
    fake.__all__ = ["record_exchange", "PROVIDERS", "NOWHERE"]  # type: ignore[attr-defined]
    fake.record_exchange = reel_core.tools.record_exchange  # type: ignore[attr-defined]
    fake.PROVIDERS = reel_core.tools.PROVIDERS  # type: ignore[attr-defined]
    fake.NOWHERE = 1  # type: ignore[attr-defined]
    assignments = _documented_assignments()
    assert _undocumented(fake, assignments) == ["fake.NOWHERE"]
    assert _undocumented(fake, {**assignments, "PROVIDERS": False}) == [
        "fake.PROVIDERS",
        "fake.NOWHERE",
    ]


def test_the_architecture_page_lists_the_facade() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = page.split("\n## The facade\n", 1)[1].split("\n## ", 1)[0]
    table = "\n".join(line for line in section.splitlines() if line.startswith("|"))
    listed = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", table))
    assert set(reel_core.__all__) <= listed, sorted(set(reel_core.__all__) - listed)
    tools = listed & set(reel_core.tools.__all__)
    assert not tools, sorted(tools)
