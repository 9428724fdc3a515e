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

The check is linear and runs at C speed: a document with no more than
:data:`MAX_DEPTH` brackets cannot be too deep and is not looked at again;
otherwise its strings are cut out (escapes first, so every quote left is a
string's own) and the depth is the highest running count of the brackets
left.
"""

from __future__ import annotations

import json
from array import array
from itertools import accumulate
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
#: An opening bracket counts +1, a closing one -1 (as a signed byte).
_STEP = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")


class TooDeep(ValueError):
    """A document nested deeper than Reel reads."""

    def __init__(self) -> None:
        super().__init__(
            f"nested more than {MAX_DEPTH} levels deep: Reel reads no deeper JSON or YAML"
        )


def check_depth(text: bytes | str, limit: int = MAX_DEPTH) -> None:
    """Raise :class:`TooDeep` when ``text``, a valid JSON document, nests
    its arrays and objects deeper than ``limit``."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if data.count(b"[") + data.count(b"{") <= limit:
        return  # not enough brackets to be too deep
    if b"\x00" in data:  # UTF-16 or UTF-32, which json.loads reads too
        data = data.decode(json.detect_encoding(data)).encode("utf-8", "surrogatepass")
    # An escaped backslash, then an escaped quote: every quote left opens or
    # closes a string, and the brackets outside strings are every other piece.
    data = data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURE)
    steps = b"".join(data.split(b'"')[::2]).translate(_STEP)
    if max(accumulate(array("b", steps))) > limit:
        raise TooDeep


def load_json(text: bytes | str, *, limit: int = MAX_DEPTH, **options: Any) -> Any:
    """``json.loads(text, **options)``, refusing a document nested deeper
    than ``limit`` with :class:`TooDeep`, whatever the Python's own
    recursion limit."""
    try:
        value = json.loads(text, **options)
    except RecursionError:
        raise TooDeep from None
    check_depth(text, limit)
    return value
