"""Reading YAML and JSON cassettes safely, for every importer.

PyYAML's safe loader (PyYAML is an optional extra, imported when a YAML
file is read), plus the tags recorders wrote that build plain data: the
Python 2 era ``!!python/unicode``, ``!!python/str`` and ``!!python/tuple``
vcrpy wrote, and Ruby's ``!binary`` (base64 bytes).  Any other tag becomes
an :class:`Unsupported` marker, never an object: :func:`find_unsupported`
names it, so the entry holding it is skipped and the rest still imports.

A YAML file is a graph: an alias (``*name``) stands for its anchored node
wherever it is used, so a 1 KB file of aliases of aliases ("billion
laughs") stands for a document of billions of nodes, and anything that
walks the document (the tag check, an importer, an export) walks each of
them.  Before anything is built, :func:`load` measures the document the
file stands for, aliases expanded, in one pass over its nodes (each node
measured once): a file whose document is larger than a small multiple of
the file (:data:`EXPANSION`) is refused, and a node nested deeper than the
one depth limit (:data:`~reel_core._nesting.MAX_DEPTH`) or inside itself (a
recursive alias) is refused where it is used, as an :class:`Unsupported`.
"""

from __future__ import annotations

import base64
import binascii
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from .._errors import CassetteError, ConfigError
from .._nesting import MAX_DEPTH, TooDeep, load_json

__all__ = ["EXPANSION", "Unsupported", "find_unsupported", "load", "load_interactions"]

#: How much larger than its file a YAML document may be, aliases expanded
#: (counting a node as one and a scalar as its characters), beyond a first
#: megabyte: what lets a recorder share a headers map between entries, not
#: what lets a kilobyte stand for gigabytes.
EXPANSION = 10
_EXPANSION_FLOOR = 1 << 20
#: The tag of a scalar standing in for a refused use of a node, its value
#: the reason (no file can write the tag: a space is no URI character).
_REFUSED = "reel refused"
_ENDLESS = "it holds a YAML alias inside its own anchor (data that never ends)"


@dataclass(frozen=True)
class Unsupported:
    """A YAML node that is not constructed: its tag would build an object,
    or (``reason``) its aliases make it too large, too deep or endless."""

    tag: str
    #: Why the node was refused, when it is not for its tag: the whole
    #: sentence an importer skips the entry with.
    reason: str | None = None


@functools.cache
def _loader() -> Any:
    try:
        import yaml
    except ImportError:  # pragma: no cover - pyyaml is in the test extra
        raise ConfigError(
            "reading YAML cassettes needs PyYAML: pip install 'reel-llm[vcr]' (or pyyaml)"
        ) from None
    base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):  # type: ignore[misc]
        pass

    def text(loader: Any, node: Any) -> str:
        return str(loader.construct_scalar(node))

    def sequence(loader: Any, node: Any) -> list[Any]:
        return list(loader.construct_sequence(node))

    def binary(loader: Any, node: Any) -> bytes | Unsupported:
        try:
            return base64.b64decode(str(loader.construct_scalar(node)), validate=False)
        except (binascii.Error, ValueError):
            return Unsupported("!binary (not base64)")

    def unknown(loader: Any, suffix: str, node: Any) -> Unsupported:
        return Unsupported(str(node.tag).replace("tag:yaml.org,2002:", "!!"))

    def refused(loader: Any, node: Any) -> Unsupported:
        return Unsupported("*alias", str(node.value))

    for tag in ("python/unicode", "python/str"):
        Loader.add_constructor(f"tag:yaml.org,2002:{tag}", text)
    Loader.add_constructor("tag:yaml.org,2002:python/tuple", sequence)
    Loader.add_constructor("!binary", binary)
    Loader.add_multi_constructor("", unknown)
    Loader.add_constructor(_REFUSED, refused)
    return Loader


def load(data: bytes, name: str) -> Any:
    """The document in ``data``: JSON when ``name`` ends in ``.json``, else
    YAML.  :class:`CassetteError` when it is neither, or its aliases make
    it far larger than the file (see :func:`_measure`); a YAML node nested
    too deep or inside itself is an :class:`Unsupported` marker with the
    reason, so the entry holding it is skipped and the rest imported."""
    if name.endswith(".json"):
        try:
            return load_json(data)
        except ValueError as exc:
            raise CassetteError(name, None, f"not JSON: {exc}") from None
    load_with = _loader()
    import yaml

    try:
        loader = load_with(data)  # PyYAML's own reader checks the encoding here
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _measure(node, EXPANSION * len(data) + _EXPANSION_FLOOR)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except _TooLarge as exc:
        raise CassetteError(name, None, f"not read: {exc}") from None
    except yaml.YAMLError as exc:
        if "nesting depth" in str(exc):  # libyaml's own limit, deeper than Reel's
            raise CassetteError(name, None, f"not read: {TooDeep()}") from None
        raise CassetteError(name, None, f"not YAML: {str(exc).splitlines()[0]}") from None
    except RecursionError:  # pragma: no cover - PyYAML without libyaml composes recursively
        raise CassetteError(name, None, f"not read: {TooDeep()}") from None


def _measure(root: Any, limit: int) -> None:
    """Measure the document under YAML node ``root``, aliases expanded,
    before anything is built.  Raise :class:`_TooLarge` when it weighs more
    than ``limit`` (a node counts one, a scalar also its characters): an
    alias bomb.  A use of a node (an item of its parent's list, a key or
    value of its mapping) that points back to a node it is inside (a
    recursive alias), or that puts a list or mapping deeper than
    :data:`MAX_DEPTH`, becomes a scalar of tag :data:`_REFUSED`, built as an
    :class:`Unsupported` with the reason: the entry holding it is skipped,
    the rest imported.

    Each node is measured once, whatever the number of aliases to it, and
    without recursion: linear in the file.
    """
    from yaml.nodes import ScalarNode

    measured: dict[int, tuple[int, int]] = {}  # id(node) -> (weight, height)
    open_: set[int] = set()  # the nodes being measured: the current node's ancestors
    # (node, None) to measure; (node, its uses) once its children are measured
    stack: list[tuple[Any, list[tuple[_Use, Any]] | None]] = [(root, None)]
    while stack:  # the weight and height of every node, children first
        node, uses = stack.pop()
        key = id(node)
        if isinstance(node, ScalarNode):
            measured[key] = (1 + len(node.value), 0)
        elif uses is None:
            if key not in measured:
                open_.add(key)
                uses = _uses(node)
                stack.append((node, uses))
                stack.extend((child, None) for _, child in uses if id(child) not in open_)
        else:
            weight, height = 1, 0
            for use, child in uses:
                if id(child) in open_:  # the node itself, or one it is inside
                    _refuse(node, use, _ENDLESS, measured)
                    weight += 1
                else:
                    size = measured[id(child)]
                    weight += size[0]
                    height = max(height, size[1])
            open_.discard(key)
            # no larger than what refuses the document: aliases of aliases
            # would make numbers of as many digits as there are levels
            measured[key] = (min(weight, limit + 1), height + 1)
    if measured[id(root)][0] > limit:
        raise _TooLarge(_TOO_LARGE)
    if measured[id(root)][1] > MAX_DEPTH:
        _cut_deep(root, measured)


def _cut_deep(root: Any, measured: dict[int, tuple[int, int]]) -> None:
    """Refuse each use of a list or mapping by a node at level
    :data:`MAX_DEPTH` or deeper (the root's level is 1; a node used at
    several levels is at its deepest), so that nothing is built deeper.
    The levels are found in topological order (no alias points back any
    more): each node and each use once."""
    from yaml.nodes import ScalarNode

    def collections(node: Any) -> list[tuple[_Use, Any]]:
        return [(use, child) for use, child in _uses(node) if not isinstance(child, ScalarNode)]

    waiting: dict[int, int] = {}  # id(node) -> uses not yet given a level
    for node in _nodes(root):
        for _, child in collections(node):
            waiting[id(child)] = waiting.get(id(child), 0) + 1
    level = {id(root): 1}  # 0: reached by refused uses only
    ready = [root]
    while ready:
        node = ready.pop()
        here = level.get(id(node), 0)
        for use, child in collections(node):
            if here >= MAX_DEPTH:
                _refuse(node, use, str(TooDeep()), measured)
            elif here:
                level[id(child)] = max(level.get(id(child), 0), here + 1)
            waiting[id(child)] -= 1
            if not waiting[id(child)]:  # every use seen: its level is known
                ready.append(child)


def _nodes(root: Any) -> list[Any]:
    """Every list and mapping node under ``root``, once each."""
    from yaml.nodes import ScalarNode

    seen = {id(root)}
    found = [root]
    for node in found:  # grows as it is read
        for _, child in _uses(node):
            if id(child) not in seen and not isinstance(child, ScalarNode):
                seen.add(id(child))
                found.append(child)
    return found


class _TooLarge(ValueError):
    """A YAML document its aliases make far larger than its file."""


#: Where a node is used in its parent: ``(index, None)`` in a list,
#: ``(index, 0)`` for a mapping's key and ``(index, 1)`` for its value.
_Use: TypeAlias = "tuple[int, int | None]"


def _uses(node: Any) -> list[tuple[_Use, Any]]:
    """``(use, child)`` for each child a list or mapping node uses, in order."""
    if node.id == "mapping":
        return [((i, j), pair[j]) for i, pair in enumerate(node.value) for j in (0, 1)]
    return [((i, None), child) for i, child in enumerate(node.value)]


def _refuse(node: Any, use: _Use, reason: str, measured: dict[int, tuple[int, int]]) -> None:
    """Put a :data:`_REFUSED` scalar saying ``reason`` at ``use`` in ``node``."""
    from yaml.nodes import ScalarNode

    stand_in = ScalarNode(_REFUSED, reason)
    measured[id(stand_in)] = (1, 0)
    i, j = use
    if j is None:
        node.value[i] = stand_in
    else:
        pair = list(node.value[i])
        pair[j] = stand_in
        node.value[i] = tuple(pair)


_TOO_LARGE = (
    f"its YAML aliases make it over {EXPANSION} times the size of the file (an alias bomb?): "
    "expand them by hand if it is meant"
)


def find_unsupported(value: Any) -> Unsupported | None:
    """The first :class:`Unsupported` node in ``value``."""
    if isinstance(value, Unsupported):
        return value
    if isinstance(value, Mapping):
        for k, v in value.items():
            found = find_unsupported(k) or find_unsupported(v)
            if found:
                return found
    elif isinstance(value, list):
        for v in value:
            found = find_unsupported(v)
            if found:
                return found
    return None


def load_interactions(data: bytes, name: str, what: str) -> list[Any]:
    """The ``interactions`` list of a version-1 cassette of pydantic-ai's
    kind (``what`` names it in the errors): :class:`CassetteError` for a
    document without one, or of another version."""
    doc = load(data, name)
    items = doc.get("interactions") if isinstance(doc, Mapping) else None
    if not isinstance(items, list):
        raise CassetteError(
            name,
            None,
            f'not a {what} cassette: no "interactions" list at the top '
            f"(found {type(doc).__name__})",
        )
    version = doc.get("version", 1)
    if str(version) != "1":
        raise CassetteError(
            name, None, f"{what} cassette version {version!r}: Reel reads version 1 only"
        )
    return items
