"""SSE framing: byte-exact events whatever the line endings and chunking, and
the fields of each event."""

from __future__ import annotations

import random

import pytest

from reel_core._frames import sse_event_ends
from reel_core.tools import SSEEvent, SSESplitter, looks_like_sse, parse_sse_event

from ._helpers import random_split, splittings


def split_all(chunks: list[bytes]) -> tuple[list[list[bytes]], list[bytes]]:
    s = SSESplitter()
    per_feed = [s.feed(c) for c in chunks]
    return per_feed, s.close()


def frames_of(chunks: list[bytes]) -> list[bytes]:
    per_feed, rest = split_all(chunks)
    return [f for fs in per_feed for f in fs] + rest


def reference_frames(data: bytes) -> list[bytes]:
    """An independent SSE event cutter (bytes.splitlines knows LF, CR, CRLF)."""
    frames: list[bytes] = []
    current = b""
    for line in data.splitlines(keepends=True):
        current += line
        if line in (b"\n", b"\r", b"\r\n"):
            frames.append(current)
            current = b""
    if current:
        frames.append(current)
    return frames


STREAMS = {
    "lf": b'data: {"a":1}\n\ndata: {"a":2}\n\ndata: [DONE]\n\n',
    "crlf": b"data: one\r\n\r\ndata: two\r\nid: 7\r\n\r\n",
    "cr": b"data: one\r\rdata: two\r\r",
    "mixed": b"event: a\r\ndata: x\n\r\nevent: b\rdata: y\r\n\n",
    "typed": b"event: message_start\ndata: {}\n\nevent: ping\ndata: {}\n\n",
    "comments": b": OPENROUTER PROCESSING\n\n: keep-alive\n\ndata: {}\n\n",
    "leading blank": b"\n\ndata: x\n\n",
    "multiline data": b"data: a\ndata: b\ndata: c\n\n",
    "unterminated": b"data: a\n\ndata: b\n",
    "unterminated no eol": b"data: a\n\ndata: b",
    "only eols": b"\r\n\r\n\n\r\r",
    "cr then crlf": b"data: a\r\r\ndata: b\r\n\r\n",
    "no event": b"data: half",
    "unicode": "data: héllo ✓\n\n".encode(),
}


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_frames_are_byte_exact_events(name: str) -> None:
    data = STREAMS[name]
    expected = reference_frames(data)
    for seed, chunks in enumerate(splittings(data, seed=len(name), randoms=20)):
        frames = frames_of(chunks)
        assert b"".join(frames) == data, seed
        assert frames == expected, (seed, chunks)


def test_known_cuts() -> None:
    assert frames_of([STREAMS["lf"]]) == [
        b'data: {"a":1}\n\n',
        b'data: {"a":2}\n\n',
        b"data: [DONE]\n\n",
    ]
    assert frames_of([STREAMS["crlf"]]) == [b"data: one\r\n\r\n", b"data: two\r\nid: 7\r\n\r\n"]
    assert frames_of([STREAMS["cr"]]) == [b"data: one\r\r", b"data: two\r\r"]
    assert frames_of([STREAMS["leading blank"]]) == [b"\n", b"\n", b"data: x\n\n"]
    assert frames_of([STREAMS["cr then crlf"]]) == [b"data: a\r\r\n", b"data: b\r\n\r\n"]
    assert frames_of([b"data: a\n\ndata: b\n"]) == [b"data: a\n\n", b"data: b\n"]


def test_feed_returns_events_as_soon_as_they_complete() -> None:
    s = SSESplitter()
    assert s.feed(b"data: 1\n") == []
    assert s.feed(b"\ndata: 2\n\nda") == [b"data: 1\n\n", b"data: 2\n\n"]
    assert s.feed(b"ta: 3\n") == []
    assert s.feed(b"\n") == [b"data: 3\n\n"]
    assert s.close() == []


def test_a_lone_cr_at_the_end_waits_for_a_possible_lf() -> None:
    s = SSESplitter()
    assert s.feed(b"data: 1\r\n\r") == []  # may be "\r\n\r\n" still coming
    assert s.feed(b"\n") == [b"data: 1\r\n\r\n"]
    s = SSESplitter()
    assert s.feed(b"data: 1\r\n\r") == []
    # ... or the CR was a whole line ending: the next byte settles it
    assert s.feed(b"data: 2\r\r") == [b"data: 1\r\n\r"]
    assert s.close() == [b"data: 2\r\r"]


def test_close_flushes_a_trailing_cr_as_a_line_end() -> None:
    s = SSESplitter()
    assert s.feed(b"data: 1\r\r") == []
    assert s.close() == [b"data: 1\r\r"]


def test_close_returns_the_unterminated_rest_and_resets() -> None:
    s = SSESplitter()
    assert s.feed(b"data: 1\n\ndata: 2") == [b"data: 1\n\n"]
    assert s.close() == [b"data: 2"]
    assert s.close() == []
    # the splitter is reusable after close
    assert s.feed(b"data: 3\n\n") == [b"data: 3\n\n"]
    assert s.close() == []


def test_empty_feeds_change_nothing() -> None:
    s = SSESplitter()
    assert s.feed(b"") == []
    assert s.feed(b"data: x\n") == []
    assert s.feed(b"") == []
    assert s.feed(b"\n") == [b"data: x\n\n"]
    assert s.close() == []


def test_a_long_event_in_many_chunks_is_one_frame() -> None:
    payload = b"data: " + b"x" * 50_000 + b"\n\n"
    frames = frames_of(random_split(payload, random.Random(5), 500))
    assert frames == [payload]


def test_random_streams_match_the_reference() -> None:
    rng = random.Random(1234)
    alphabet = [b"\n", b"\r", b"\r\n", b"data: ", b"x", b":", b"event: e", b" "]
    for _ in range(300):
        data = b"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        for chunks in splittings(data, seed=rng.randint(0, 10**6), randoms=3):
            frames = frames_of(chunks)
            assert frames == reference_frames(data), (data, chunks)


# -- reading an event's fields ---------------------------------------------------


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_fields_whatever_the_line_endings(eol: str) -> None:
    frame = f"event: delta{eol}data: one{eol}data: two{eol}id: 7{eol}{eol}".encode()
    assert parse_sse_event(frame) == SSEEvent("delta", "one\ntwo", "7")


def test_mixed_line_endings() -> None:
    assert parse_sse_event(b"data: a\rdata: b\r\ndata: c\n\r\n").data == "a\nb\nc"


def test_data_lines_join_with_lf_keeping_empty_ones() -> None:
    assert parse_sse_event(b"data: a\ndata:\ndata: b\n\n").data == "a\n\nb"
    assert parse_sse_event(b"data: a\n\ndata: \n").data == "a\n"  # blank lines are skipped
    assert parse_sse_event(b"data:\n\n").data == ""  # one empty line is still data


def test_a_field_without_a_colon_has_an_empty_value() -> None:
    assert parse_sse_event(b"data\ndata\n\n") == SSEEvent(data="\n")
    assert parse_sse_event(b"event\ndata: x\n\n") == SSEEvent("", "x")
    assert parse_sse_event(b"id\n\n") == SSEEvent(id="")


def test_only_one_space_after_the_colon_is_dropped() -> None:
    assert parse_sse_event(b"data:x\n\n").data == "x"
    assert parse_sse_event(b"data: x\n\n").data == "x"
    assert parse_sse_event(b"data:  x \n\n").data == " x "
    assert parse_sse_event(b"data:\tx\n\n").data == "\tx"
    # ... and only after the first colon: the value keeps its own
    assert parse_sse_event(b'data: {"a": 1}\n\n').data == '{"a": 1}'
    assert parse_sse_event(b"event:  ping\n\n").event == " ping"


def test_comments_are_skipped() -> None:
    frame = b": keep-alive\ndata: a\n:data: b\n: OPENROUTER PROCESSING\ndata: c\n\n"
    assert parse_sse_event(frame) == SSEEvent(data="a\nc")
    assert parse_sse_event(b":\n\n") == SSEEvent()


def test_event_and_id_keep_the_last_value() -> None:
    frame = b"event: a\nid: 1\nevent: b\nid: 2\ndata: x\n\n"
    assert parse_sse_event(frame) == SSEEvent("b", "x", "2")


def test_an_id_holding_nul_is_ignored() -> None:
    assert parse_sse_event(b"id: 1\nid: 2\x003\ndata: x\n\n").id == "1"
    assert parse_sse_event(b"id: \x00\n\n").id is None


def test_retry_and_unknown_fields_are_ignored() -> None:
    frame = b"retry: 3000\nfoo: bar\nDATA: shout\ndata : spaced\nevent: e\ndata: x\n\n"
    assert parse_sse_event(frame) == SSEEvent("e", "x")


def test_an_event_without_a_data_line_has_no_data() -> None:
    # EventSource would not dispatch these; the caller decides.
    assert parse_sse_event(b"event: ping\n\n") == SSEEvent(event="ping")
    assert parse_sse_event(b": ping\r\n\r\n") == SSEEvent()
    assert parse_sse_event(b"id: 9\nretry: 10\n\n") == SSEEvent(id="9")
    assert parse_sse_event(b"\n") == SSEEvent()
    assert parse_sse_event(b"") == SSEEvent()


def test_an_unterminated_event_is_read_all_the_same() -> None:
    assert parse_sse_event(b"event: e\ndata: half") == SSEEvent("e", "half")


def test_bytes_are_utf8_and_bad_ones_become_replacement_characters() -> None:
    assert parse_sse_event("data: héllo ✓\n\n".encode()).data == "héllo ✓"
    assert parse_sse_event(b"data: a\xffb\n\n").data == "a\ufffdb"
    # a truncated sequence is one replacement character, and a line end after
    # it still ends the line
    assert parse_sse_event(b"data: \xe2\x82\rdata: \xe2\x82\xac\n\n").data == "\ufffd\n€"
    assert parse_sse_event(b"ev\xffent: x\n\n") == SSEEvent()


def test_only_cr_and_lf_end_lines() -> None:
    # str.splitlines would also break at these; SSE keeps them as data.
    data = "a\u2028b\x0bc\x0cd\x1ce\x85f"
    assert parse_sse_event(f"data: {data}\n\n".encode()).data == data


def test_each_frame_the_splitter_cuts_reads_as_its_event() -> None:
    body = b"event: a\r\ndata: 1\r\n\r\n: ping\n\ndata: 2\rdata: 3\r\rid: 4\n\ndata: 5"
    events = [parse_sse_event(frame) for frame in frames_of([body])]
    assert events == [
        SSEEvent("a", "1"),
        SSEEvent(),
        SSEEvent(data="2\n3"),
        SSEEvent(id="4"),
        SSEEvent(data="5"),
    ]


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"data: {}", True),
        (b"\n\r\n  event: ping", True),
        (b"id: 7", True),
        (b"retry: 100", True),
        (b": keep-alive", True),
        (b'{"data": 1}', False),
        (b"[{", False),
        (b"", False),
    ],
)
def test_looks_like_sse(head: bytes, expected: bool) -> None:
    assert looks_like_sse(head) is expected


def test_event_ends_stop_at_an_event_still_open() -> None:
    # the open event's own LF, past the last end, is not an end
    assert sse_event_ends(b"data: a\n\ndata: b\n") == [9]
    assert sse_event_ends(b"data: a\n\ndata: b\n\n") == [9, 18]
    assert sse_event_ends(b"data: a\r\n\r\n") is None
