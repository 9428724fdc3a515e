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

__all__ = ["Escapes", "View"]

#: JSON's short escapes: the character after the backslash -> what it means.
_SHORT = {"/": "/", '"': '"', "\\": "\\", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_SHORT_OF = {meaning: letter for letter, meaning in _SHORT.items()}
_UNITS = re.compile(rb"(?<=u)[0-9A-Fa-f]{4}")


def _hex(number: int, width: int) -> str:
    return f"{number:0{width}x}"


def _grouped(codes: Iterable[str]) -> str:
    """An alternation of ``codes`` (hex digits, matched in either case)
    grouped by all but their last digit: ``3[0-9a]|4[1-6]``, which a
    regular expression tries far faster than one alternative a code."""
    groups: dict[str, list[str]] = {}
    for code in sorted(set(codes)):
        groups.setdefault(code[:-1], []).append(code[-1])
    return "(?i:" + "|".join(f"{head}[{''.join(ends)}]" for head, ends in groups.items()) + ")"


def _entities(chars: frozenset[str]) -> list[str]:
    """The names of the HTML entities (``plus;``, ``amp``...) that stand for
    one of ``chars``, longest first (``amp;`` before ``amp``)."""
    from html.entities import html5  # 2,000 names: only once a credential is seen

    return sorted((n for n, v in html5.items() if v in chars), key=lambda n: (-len(n), n))


def _patterns(chars: frozenset[str]) -> list[tuple[str, str]]:
    """``(what each escape starts with, its regular expression)`` of the
    escapes of ``chars``: each starts with a literal, which the regular
    expression engine looks for at C speed, and is only run on a text that
    holds it."""
    units, numbers = [], []
    for char in sorted(chars):
        point = ord(char)
        numbers.append(point)
        if point > 0xFFFF:  # a surrogate pair
            high, low = 0xD800 + ((point - 0x10000) >> 10), 0xDC00 + ((point - 0x10000) & 0x3FF)
            units.append((_hex(high, 4), _hex(low, 4)))
        else:
            units.append((_hex(point, 4), ""))
    singles = _grouped(unit for unit, low in units if not low)
    pairs = "|".join(rf"(?i:{high}\\\\?u{low})" for high, low in units if low)
    octets = {b for char in chars for b in char.encode("utf-8", "surrogatepass")}
    decimal = "|".join(str(n) for n in numbers)
    hexadecimal = _grouped(f"{n:x}" for n in numbers)
    patterns = [
        # one backslash, or two not after a third (JSON inside a JSON string;
        # three are an escaped backslash, then an escape)
        ("\\u", r"(?:(?<!\\)\\\\|\\)u(?:" + (pairs + "|" if pairs else "") + singles + ")"),
        ("%", "%" + _grouped(_hex(b, 2) for b in octets)),
        ("&#", rf"&\#(?:[xX]0*{hexadecimal}(?![0-9A-Fa-f])|0*(?:{decimal})(?![0-9]));?"),
    ]
    short = [re.escape(_SHORT_OF[c]) for c in sorted(chars) if c in _SHORT_OF]
    if short:
        patterns.append(("\\", r"\\[" + "".join(short) + "]"))
    names = _entities(chars)
    if names:
        patterns.append(("&", "&(?:" + "|".join(map(re.escape, names)) + ")"))
    return patterns


@functools.lru_cache(maxsize=4096)
def _decode(token: bytes) -> bytes:
    """What one escape stands for, as UTF-8 (a ``%XX``: that byte)."""
    if token[:1] == b"\\":  # a JSON escape (its backslash escaped too: JSON in JSON)
        units = [int(unit, 16) for unit in _UNITS.findall(token)]
        if len(units) == 2:  # a surrogate pair
            char = chr(0x10000 + ((units[0] - 0xD800) << 10) + (units[1] - 0xDC00))
        elif units:
            char = chr(units[0])
        else:
            char = _SHORT[token[-1:].decode("ascii")]
    elif token[:1] == b"%":
        return bytes.fromhex(token[1:].decode("ascii"))
    elif token[:2] == b"&#":
        number = token[2:].rstrip(b";")
        char = chr(int(number[1:], 16) if number[:1] in b"xX" else int(number))
    else:
        from html.entities import html5

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
        patterns = _patterns(frozenset(chars)) if chars else []
        self._bytes = [(start.encode(), re.compile(p.encode("ascii"))) for start, p in patterns]
        self._text = [(start, re.compile(p)) for start, p in patterns]

    def occur(self, text: str | bytes) -> bool:
        """Whether ``text`` holds an escape of one of the characters."""
        if isinstance(text, str):
            return any(s in text and p.search(text) for s, p in self._text)
        return any(s in text and p.search(text) for s, p in self._bytes)

    def view(self, data: bytes) -> View | None:
        """``data`` with every escape of the characters decoded, or ``None``
        when it holds none.  Where two escapes overlap, the first one counts
        (the longer of two that start together: ``\\\\u0041`` is a ``\\u0041``
        inside a JSON string, not an escaped backslash and ``u0041``)."""
        spans = (m.span() for s, p in self._bytes if s in data for m in p.finditer(data))
        found = sorted(spans, key=lambda span: (span[0], -span[1]))  # the longer first
        if not found:
            return None
        pieces: list[bytes] = []
        at: list[int] = []
        ends: list[int] = []
        froms: list[int] = []
        tos: list[int] = []
        position = length = 0
        for start, stop in found:
            if start < position:  # inside the escape before
                continue
            pieces.append(data[position:start])
            length += start - position
            decoded = _decode(data[start:stop])
            pieces.append(decoded)
            at.append(length)
            length += len(decoded)
            ends.append(length)
            froms.append(start)
            tos.append(stop)
            position = stop
        pieces.append(data[position:])
        return View(b"".join(pieces), at, ends, froms, tos)
