"""decode_lines: every line of a cassette parsed, bad ones kept with their
error (the ``reel`` commands' reader), agreeing with decode_cassette."""

from __future__ import annotations

import warnings

import pytest

from reel_core import Cassette, CassetteError, CassetteMeta, MatchConfig, MatchMode
from reel_core.tools import decode_lines

from ._helpers import interaction


def _lines(n: int) -> bytes:
    return b"".join(interaction(f"/v1/{i}").to_line() for i in range(n))


def test_a_good_cassette_reads_as_the_index_does() -> None:
    meta = CassetteMeta(match=MatchConfig(MatchMode.EXACT))
    data = b"\xef\xbb\xbf" + meta.to_line() + _lines(3) + b"\n  \n"
    decoded = decode_lines(data, "c.jsonl")
    assert decoded.has_meta
    assert decoded.meta == meta
    assert (decoded.meta_error, decoded.meta_newer) == (None, False)
    assert [line.number for line in decoded.lines] == [2, 3, 4]
    assert [line.interaction for line in decoded.lines] == list(Cassette.loads(data))
    assert all(line.error is None for line in decoded.lines)


def test_bad_lines_are_kept_with_their_error_and_a_torn_last_line_named() -> None:
    data = _lines(1) + b"[1]\n" + _lines(1) + b'{"key":"sha256:'
    decoded = decode_lines(data, "c.jsonl")
    assert not decoded.has_meta
    assert decoded.meta == CassetteMeta()
    numbers = [(line.number, line.interaction is None) for line in decoded.lines]
    assert numbers == [(1, False), (2, True), (3, False), (4, True)]
    assert decoded.lines[1].error is not None
    assert "torn last line" not in decoded.lines[1].error
    assert decoded.lines[3].error is not None
    assert decoded.lines[3].error.endswith("(a torn last line: a write cut short)")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert len(Cassette.loads(data, strict=False)) == 2  # the same two lines
    assert len(caught) == 2


def test_a_bad_meta_line_is_refused_or_tolerated() -> None:
    for first, reason in (
        (b'{"_meta": nope}\n', "the _meta line is not JSON"),
        (b'{"_meta": 5}\n', '"_meta" must be an object'),
    ):
        data = first + _lines(1)
        with pytest.raises(CassetteError, match=f"^c.jsonl:1: {reason}"):
            decode_lines(data, "c.jsonl")
        decoded = decode_lines(data, "c.jsonl", tolerant_meta=True)
        assert decoded.has_meta
        assert decoded.meta_error is not None
        assert decoded.meta == CassetteMeta()
        assert len(decoded.lines) == 1


def test_a_newer_schema_and_meta_only_read_no_line() -> None:
    newer = b'{"_meta":{"schema":99,"reel":"9.0"}}\n' + _lines(1)
    with pytest.raises(CassetteError, match=r"^c.jsonl:1: cassette schema 99 .* is newer"):
        decode_lines(newer, "c.jsonl")
    decoded = decode_lines(newer, "c.jsonl", tolerant_meta=True)
    assert decoded.meta_newer
    assert decoded.lines == []
    only = decode_lines(CassetteMeta().to_line() + _lines(2), "c.jsonl", meta_only=True)
    assert only.has_meta
    assert only.lines == []


def test_no_cassette_at_all() -> None:
    with pytest.raises(CassetteError, match=r"^x\.txt: this file is UTF-16"):
        decode_lines("hello\n".encode("utf-16"), "x.txt")
    with pytest.raises(CassetteError, match=r"^x\.txt: not a Reel cassette: no line is an inter"):
        decode_lines(b"hello\nworld\n", "x.txt")
    assert decode_lines(b"", "empty").lines == []
