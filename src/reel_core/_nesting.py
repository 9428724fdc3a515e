"""How deep a document Reel reads: one limit, for JSON and YAML, everywhere.

Input Reel did not write (a cassette line, a body, an imported file) is
parsed by ``json.loads`` or PyYAML, then walked by code that recurses: the
exporters, the viewer, the matcher.  How deep ``json.loads`` itself goes
depends on the Python (3.11 stops near 1,000 levels, later ones go much
further), so without a limit of Reel's own a cassette that ``reel validate``
accepts could crash ``reel export`` with a ``RecursionError``.

So every JSON document read from outside goes through :func:`load_json`, which
refuses one nested deeper than :data:`MAX_DEPTH` with :class:`TooDeep` (a
``ValueError``, so every caller that refuses bad JSON refuses it the same
way, with the same message), and the YAML loader counts its nodes against
the same limit.  A cassette line wraps its bodies in a few levels of its
own (:data:`LINE_DEPTH`), so a body Reel stores as JSON is always a line
Reel reads back.

The check is linear, and costs little beside the parse.  A document with
no more than the limit's number of brackets cannot be too deep and is not
looked at again; a larger one has the containers of its value counted
level by level, except a large UTF-8 document without escapes, whose text
is cut down to its brackets and quotes at C speed, its strings dropped,
the depth being the highest running count of the brackets left.  A large
document with escapes (a recorded stream's line) goes straight to its
containers: counting its brackets would cost as much.  A value a hook
built is measured on its text, escapes removed first.
"""

from __future__ import annotations

import json
import re
from array import array
from itertools import accumulate, chain
from typing import Any

__all__ = ["LINE_DEPTH", "MAX_DEPTH", "TooDeep", "check_depth", "load_json"]

#: How deep a JSON or YAML document may nest (arrays and objects, sequences
#: and mappings): serde_json's default, far deeper than any API sends.
MAX_DEPTH = 128
#: How deep a cassette line may nest: a body of :data:`MAX_DEPTH` levels,
#: inside the line's own (the line, the response, its body, a frame list).
LINE_DEPTH = MAX_DEPTH + 8

#: Every byte but the ones that nest or delimit a string.
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"')
#: A string, once nothing but brackets and quotes is left of the document.
_STRING = re.compile(rb'"[^"]*"')
#: What ``json.loads`` nests.
_NESTING = frozenset({dict, list})
#: From this size, a document without escapes is measured on its text (a
#: few C passes, whatever it holds) rather than on its value (a step per
#: item, cheaper for a small one).
_LARGE = 64 * 1024
#: An opening bracket counts +1, a closing one -1 (as a signed byte).
_STEP = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")


class TooDeep(ValueError):
    """A document nested deeper than Reel reads."""

    def __init__(self) -> None:
        super().__init__(
            f"nested more than {MAX_DEPTH} levels deep: Reel reads no deeper JSON or YAML"
        )


def check_depth(value: Any, text: bytes | str, limit: int = MAX_DEPTH) -> None:
    """Raise :class:`TooDeep` when ``value``, which ``json.loads`` read from
    ``text`` (``None`` when a hook built it), nests its arrays and objects
    deeper than ``limit``."""
    large = isinstance(text, bytes) and len(text) >= _LARGE
    if large and value is not None and b"\\" in text:
        # escapes (a recorded stream's line): counting its brackets would
        # cost as much as counting its containers
        deep = _deeper(value, limit)
    elif _brackets(text) <= limit:
        return  # not enough brackets to be too deep
    elif isinstance(text, bytes) and large and b"\\" not in text and b"\x00" not in text:
        deep = _text_depth(text) > limit  # large UTF-8 without an escape
    elif value is not None:
        deep = _deeper(value, limit)
    else:
        if isinstance(text, bytes) and b"\x00" in text:  # UTF-16 or UTF-32
            text = text.decode(json.detect_encoding(text))
        data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
        # an escaped backslash, then an escaped quote: no quote left is escaped
        deep = _text_depth(data.replace(b"\\\\", b"").replace(b'\\"', b"")) > limit
    if deep:
        raise TooDeep


def _brackets(text: bytes | str) -> int:
    """How many arrays and objects ``text`` could open (its strings too)."""
    if isinstance(text, str):
        return text.count("[") + text.count("{")
    return text.count(b"[") + text.count(b"{")


def _text_depth(data: bytes) -> int:
    """How deep UTF-8 JSON ``data``, whose quotes all open or close a
    string, nests: its strings dropped, the highest running count of the
    brackets left."""
    steps = _STRING.sub(b"", data.translate(None, _NOT_STRUCTURE)).translate(_STEP)
    return max(accumulate(array("b", steps)), default=0)


def _deeper(value: Any, limit: int) -> bool:
    """Whether ``value``, lists and dicts as ``json.loads`` builds them, has
    some nested deeper than ``limit``: its containers, level by level."""
    level = [value] if type(value) in _NESTING else []
    for _ in range(limit):
        items = chain.from_iterable([c.values() if type(c) is dict else c for c in level])
        level = [item for item in items if type(item) in _NESTING]
        if not level:
            return False
    return True


def load_json(text: bytes | str, *, limit: int = MAX_DEPTH, **options: Any) -> Any:
    """``json.loads(text, **options)``, refusing a document nested deeper
    than ``limit`` with :class:`TooDeep`, whatever the Python's own
    recursion limit."""
    try:
        value = json.loads(text, **options)
    except RecursionError:
        raise TooDeep from None
    check_depth(None if options else value, text, limit)
    return value
