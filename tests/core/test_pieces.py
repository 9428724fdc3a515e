"""A cassette handed over in pieces, its lines left in a source read on
demand (``Cassette.load_pieces``), reads exactly as the same bytes whole."""

from __future__ import annotations

import json
import warnings

import pytest

from reel_core import Cassette, CassetteError, CassetteMeta, MatchConfig
from reel_core.tools import CassetteWarning

from ._helpers import interaction

NORMALIZED = MatchConfig()


def _lines() -> list[bytes]:
    """Lines of every kind a loader meets: Reel's own, hand-formatted ones
    (parsed to be read), blank and bad ones."""
    ours = [interaction(body=b'{"model":"m","n":%d}' % n, id=f"i{n}").to_line() for n in range(5)]
    edited = json.dumps(json.loads(ours[2]), indent=None, separators=(", ", ": ")).encode()
    return [
        CassetteMeta().to_line(),
        ours[0],
        ours[1],
        b"\n",
        b"not json\n",
        edited.replace(b'"i2"', b'"edited"') + b"\n",
        ours[3],
        b'{"key":"sha256:zz"}\n',  # starts like ours, is not
        ours[4],
        b'{"key":"sha256:' + b"a" * 20,  # torn last line
    ]


def _pieces(lines: list[bytes], cuts: list[int]) -> list[tuple[int, bytes]]:
    """``lines`` joined, cut before the lines numbered in ``cuts``."""
    pieces, offset = [], 0
    for a, b in zip([0, *cuts], [*cuts, len(lines)], strict=True):
        piece = b"".join(lines[a:b])
        pieces.append((offset, piece))
        offset += len(piece)
    return pieces


def _load(load: object) -> tuple[list[tuple[str, str]], list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cassette = load()  # type: ignore[operator]
    read = [(i.key, i.id) for i in cassette.readable()]
    return read, [str(w.message) for w in caught if w.category is CassetteWarning]


@pytest.mark.parametrize("cuts", [[], [1], [3, 4], [1, 2, 3, 5, 6, 7, 8, 9], [9], [2, 8]])
def test_pieces_read_as_the_whole(cuts: list[int]) -> None:
    lines = _lines()
    data = b"".join(lines)
    whole = _load(lambda: Cassette.loads(data, name="c.jsonl", strict=False))
    pieces = _load(
        lambda: Cassette.load_pieces(_pieces(lines, cuts), data, name="c.jsonl", strict=False)
    )
    assert pieces == whole
    assert [id for _, id in whole[0]] == ["i0", "i1", "edited", "i3", "i4"]
    # the bad lines, by their numbers in the file, the last one torn
    assert [w.split(": ")[0] for w in whole[1]] == ["c.jsonl:5", "c.jsonl:8", "c.jsonl:10"]
    assert whole[1][-1].endswith("(a torn last line: a write cut short)")


def test_a_bad_line_in_a_later_piece_names_its_line_strictly() -> None:
    lines = _lines()
    data = b"".join(lines)
    with pytest.raises(CassetteError) as whole:
        Cassette.loads(data, name="c.jsonl")
    with pytest.raises(CassetteError) as pieces:
        Cassette.load_pieces(_pieces(lines, [4]), data, name="c.jsonl")
    assert str(pieces.value) == str(whole.value)
    assert pieces.value.line == 5


def test_no_piece_is_an_empty_cassette() -> None:
    assert len(Cassette.load_pieces([], b"")) == 0


class _Gone:
    """A source whose file changed: every read fails."""

    def __init__(self, size: int, *, found: bool) -> None:
        self._size = size
        self._found = found  # whether find() fails too, or finds nothing

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, index: slice, /) -> bytes:
        raise ValueError("the cassette file was cut short since it was opened")

    def find(self, sub: bytes, start: int, end: int, /) -> int:
        if self._found:
            raise ValueError("gone")
        return -1

    def startswith(self, prefix: bytes, start: int, end: int, /) -> bool:
        raise ValueError("gone")


@pytest.mark.parametrize("found", [True, False])
def test_a_line_the_source_cannot_give_back_is_a_bad_line(found: bool) -> None:
    first = interaction(body=b'{"model":"m","n":1}', id="one")
    data = CassetteMeta().to_line() + first.to_line() + interaction(id="two").to_line()
    cassette = Cassette.load_pieces(
        _pieces([data], []), _Gone(len(data), found=found), name="c.jsonl", strict=False
    )
    assert len(cassette) == 2  # indexed from the pieces
    with pytest.raises(CassetteError, match="cut short") as error:
        cassette.play(first.key, NORMALIZED)
    assert error.value.line == 2
    # a miss report's search for the same endpoint skips it, without failing
    assert list(cassette.same_endpoint("POST", "/v1/chat/completions")) == []


def test_lines_are_read_from_the_source_not_kept() -> None:
    lines = _lines()[:3]
    data = b"".join(lines)
    reads: list[tuple[int, int]] = []

    class Counting(bytes):
        def __getitem__(self, index: slice, /) -> bytes:  # type: ignore[override]
            reads.append((index.start, index.stop))
            return bytes(self)[index]

    cassette = Cassette.load_pieces(_pieces(lines, [1, 2]), Counting(data), name="c.jsonl")
    assert reads == []
    played = cassette.play(json.loads(lines[2])["key"], NORMALIZED)
    assert played is not None
    assert played.id == "i1"
    start = len(lines[0]) + len(lines[1])
    assert reads == [(start, start + len(lines[2]) - 1)]
