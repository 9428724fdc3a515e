"""The core's modules import each other in layers: no import circle.

Every ``import`` of a ``reel_core`` module inside ``src/reel_core`` counts,
the ones under ``if TYPE_CHECKING:`` and inside functions too: a circle
drawn by any of them is a knot the next room would have to untie.
"""

from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "src" / "reel_core"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(CORE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(source: str, name: str, *, package: bool) -> list[tuple[str, tuple[str, ...]]]:
    """What ``name`` imports of ``reel_core``: ``(module, names)`` per
    statement (``names`` empty for ``import module``)."""
    here = name.split(".") if package else name.split(".")[:-1]
    found: list[tuple[str, tuple[str, ...]]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(a.name, ()) for a in node.names if a.name.split(".")[0] == "reel_core"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target.split(".")[0] == "reel_core":
                found.append((target, tuple(a.name for a in node.names)))
    return found


def core_graph(root: Path = CORE) -> dict[str, set[str]]:
    """Module -> the core modules it imports; ``from package import module``
    counts as the module alone (itself and the package ``reel_core``, which
    only re-exports, left out)."""
    files = {module_name(p): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        source = path.read_text(encoding="utf-8")
        deps: set[str] = set()
        for target, names in imports_of(source, name, package=path.stem == "__init__"):
            submodules = {f"{target}.{n}" for n in names} & files.keys()
            deps |= submodules
            if len(submodules) < len(names) or not names:
                deps.add(target)
        graph[name] = deps & files.keys() - {name, "reel_core"}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of ``graph`` as ``[a, b, ..., a]``, or ``None``."""
    done: set[str] = set()
    path: list[str] = []
    on_path: set[str] = set()

    def visit(node: str) -> list[str] | None:
        path.append(node)
        on_path.add(node)
        for dep in sorted(graph[node]):
            if dep in on_path:
                return [*path[path.index(dep) :], dep]
            if dep not in done:
                cycle = visit(dep)
                if cycle is not None:
                    return cycle
        path.pop()
        on_path.discard(node)
        done.add(node)
        return None

    for start in sorted(graph):
        if start not in done:
            cycle = visit(start)
            if cycle is not None:
                return cycle
    return None


def test_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_reads_relative_type_only_and_function_imports() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from ._b import x\n"
        "from . import _c\n"
        "if TYPE_CHECKING:\n"
        "    from ._d import y\n"
        "def f() -> None:\n"
        "    from reel_core._e import z\n"
        "import os\n"
    )
    assert imports_of(source, "reel_core._a", package=False) == [
        ("reel_core._b", ("x",)),
        ("reel_core", ("_c",)),
        ("reel_core._d", ("y",)),
        ("reel_core._e", ("z",)),
    ]
    assert imports_of("from .._x import y\n", "reel_core._p.m", package=False) == [
        ("reel_core._x", ("y",))
    ]
    assert imports_of("from . import m\n", "reel_core._p", package=True) == [
        ("reel_core._p", ("m",))
    ]


def test_the_core_imports_in_layers() -> None:
    graph = core_graph()
    assert "reel_core._codec" in graph
    assert "reel_core._providers.openai" in graph
    cycle = find_cycle(graph)
    assert cycle is None, "reel_core modules import in a circle: " + " -> ".join(cycle or [])
