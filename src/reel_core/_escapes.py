"""Escaped text, read back: the decoded view a literal is searched in.

Theory of operation
-------------------
A credential echoed by an upstream may come back escaped, one character
at a time, in any of the forms text is escaped in: a JSON ``\\uXXXX``
(either case, a surrogate pair for a character past U+FFFF) or short
escape (``\\/``), a ``%XX`` (either case), an HTML entity (named,
``&#43;``, ``&#x2B;``).  The escapes of one text may be mixed, and there
are too many spellings of one value to list (each character escaped or
not), so the value is not spelled out: the text is read back instead.

An :class:`Escapes` is made for the characters of the values looked for
(the only ones whose escapes matter: an escape of any other character
cannot be part of a match).  :meth:`Escapes.view` decodes every escape of
one of them in a text, in one scan by a regular expression of fixed-width
alternatives (linear in the text: each escape is a few bytes, and the
Python work is per escape of those characters, not per byte), and returns
a :class:`View`: the decoded bytes, and where each decoded escape came
from, so that a match in the view is mapped back onto the text
(:meth:`View.span`).  A text with no such escape has no view (``None``):
it is searched as it is.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from html.entities import html5

__all__ = ["Escapes", "View"]

#: JSON's short escapes: the character after the backslash -> what it means.
_SHORT = {"/": "/", '"': '"', "\\": "\\", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_SHORT_OF = {meaning: letter for letter, meaning in _SHORT.items()}


def _hex(number: int, width: int) -> str:
    """``number`` in hexadecimal, ``width`` digits, matched in either case."""
    return f"{number:0{width}x}"


def _entities(chars: frozenset[str]) -> list[str]:
    """The names of the HTML entities (``plus;``, ``amp``...) that stand for
    one of ``chars``, longest first (``amp;`` before ``amp``)."""
    return sorted((n for n, v in html5.items() if v in chars), key=lambda n: (-len(n), n))


def _pattern(chars: frozenset[str]) -> str | None:
    """The regular expression of the escapes of ``chars`` (``None``: no
    character has one worth reading)."""
    units, pairs, numbers = [], [], []
    for char in sorted(chars):
        point = ord(char)
        numbers.append(point)
        if point > 0xFFFF:
            high, low = 0xD800 + ((point - 0x10000) >> 10), 0xDC00 + ((point - 0x10000) & 0x3FF)
            pairs.append(rf"{_hex(high, 4)}\\u{_hex(low, 4)}")
        else:
            units.append(_hex(point, 4))
    octets = sorted({b for char in chars for b in char.encode("utf-8", "surrogatepass")})
    short = [re.escape(_SHORT_OF[c]) for c in sorted(chars) if c in _SHORT_OF]
    names = _entities(chars)
    alternatives = [
        r"\\u(?i:" + "|".join(pairs + units) + ")",
        r"%(?i:" + "|".join(_hex(b, 2) for b in octets) + ")",
        r"&\#(?:[xX]0*(?i:"
        + "|".join(f"{n:x}" for n in numbers)
        + r")(?![0-9A-Fa-f])|0*(?:"
        + "|".join(str(n) for n in numbers)
        + r")(?![0-9]));?",
    ]
    if short:
        alternatives.append(r"\\(?:" + "|".join(short) + ")")
    if names:
        alternatives.append("&(?:" + "|".join(map(re.escape, names)) + ")")
    return "|".join(alternatives) if numbers else None


@functools.lru_cache(maxsize=4096)
def _decode(token: bytes) -> bytes:
    """What one escape stands for, as UTF-8 (a ``%XX``: that byte)."""
    if token[:2] == b"\\u":
        point = int(token[2:6], 16)
        if len(token) == 12:  # a surrogate pair
            point = 0x10000 + ((point - 0xD800) << 10) + (int(token[8:12], 16) - 0xDC00)
        char = chr(point)
    elif token[:1] == b"\\":
        char = _SHORT[token[1:2].decode("ascii")]
    elif token[:1] == b"%":
        return bytes.fromhex(token[1:].decode("ascii"))
    elif token[:2] == b"&#":
        number = token[2:].rstrip(b";")
        char = chr(int(number[1:], 16) if number[:1] in b"xX" else int(number))
    else:
        char = html5[token[1:].decode("ascii")]
    return char.encode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class View:
    """A text with the escapes of the characters looked for decoded.

    ``data`` is the decoded text; decoded escape *i* is ``data[at[i]:
    ends[i]]`` and came from ``text[froms[i]:tos[i]]``.  Every other byte
    is the text's own, shifted by the escapes before it.
    """

    data: bytes
    at: list[int] = field(repr=False)
    ends: list[int] = field(repr=False)
    froms: list[int] = field(repr=False)
    tos: list[int] = field(repr=False)

    def _offset(self, position: int, *, end: bool) -> int:
        """Where ``position`` of the view is in the text.  A position inside
        a decoded escape moves to the escape's start (``end`` false) or past
        its end (``end`` true): a match never keeps part of an escape."""
        i = bisect.bisect_right(self.at, position) - 1
        if i < 0:
            return position
        if position == self.at[i]:
            return self.froms[i]
        if position < self.ends[i]:
            return self.tos[i] if end else self.froms[i]
        return self.tos[i] + position - self.ends[i]

    def span(self, start: int, stop: int) -> tuple[int, int]:
        """The part of the text the view's ``data[start:stop]`` came from."""
        return self._offset(start, end=False), self._offset(stop, end=True)


class Escapes:
    """The escapes of a set of characters (those of the values looked for),
    and how to decode them in a text."""

    def __init__(self, values: Iterable[bytes]) -> None:
        chars: set[str] = set()
        for value in values:
            try:
                chars.update(value.decode("utf-8"))
            except UnicodeDecodeError:  # a Latin-1 header value
                chars.update(value.decode("latin-1"))
        pattern = _pattern(frozenset(chars))
        self._bytes = None if pattern is None else re.compile(pattern.encode("ascii"))
        self._text = None if pattern is None else re.compile(pattern)

    def occur(self, text: str | bytes) -> bool:
        """Whether ``text`` holds an escape of one of the characters."""
        if isinstance(text, str):
            return self._text is not None and self._text.search(text) is not None
        return self._bytes is not None and self._bytes.search(text) is not None

    def view(self, data: bytes) -> View | None:
        """``data`` with every escape of the characters decoded, or ``None``
        when it holds none."""
        if self._bytes is None:
            return None
        pieces: list[bytes] = []
        at: list[int] = []
        ends: list[int] = []
        froms: list[int] = []
        tos: list[int] = []
        position = length = 0
        for match in self._bytes.finditer(data):
            start, stop = match.span()
            pieces.append(data[position:start])
            length += start - position
            decoded = _decode(match.group())
            pieces.append(decoded)
            at.append(length)
            length += len(decoded)
            ends.append(length)
            froms.append(start)
            tos.append(stop)
            position = stop
        if not at:
            return None
        pieces.append(data[position:])
        return View(b"".join(pieces), at, ends, froms, tos)
