"""Cutting a response stream into the frames a cassette stores.

Server-sent events are cut into byte-exact events: everything up to and
including the blank line that ends each event, whatever its line endings (LF,
CRLF or CR), so the frames joined give back the body byte for byte.  Other
streamed bodies (Gemini's JSON array, NDJSON, plain chunked) are kept as the
chunks they arrived in.  :func:`parse_sse_event` reads the fields of one such
event.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "SSEEvent",
    "SSESplitter",
    "is_sse_stream",
    "looks_like_sse",
    "parse_sse_event",
    "sse_event_ends",
]

_EOL = re.compile(rb"\r\n|\r|\n")


def sse_event_ends(data: bytes) -> list[int] | None:
    """Where each complete event of ``data`` ends, cut as :class:`SSESplitter`
    cuts them, found in one pass when every line ends in LF (what servers
    send); ``None`` when ``data`` holds a CR (feed a splitter instead).

    Linear in ``data``: an event ends at the first blank line after its
    start, so each search starts where the last event ended and an
    unfinished last event is read once (a pattern tried at every byte of
    it read it once per byte)."""
    if b"\r" in data:
        return None
    ends = []
    pos = 0
    size = len(data)
    while pos < size:
        if data[pos] == 10:  # a blank line right at the start: an event of its own
            pos += 1
        else:
            blank = data.find(b"\n\n", pos)
            if blank < 0:
                break
            pos = blank + 2
        ends.append(pos)
    return ends


class SSESplitter:
    """Incremental SSE event splitter.

    ``feed`` returns the events completed by a chunk; ``close`` returns what
    is left when the stream ends (an unterminated last event, or ``b""``).

    Linear in the bytes fed, however they are cut: the unfinished tail is
    kept in one growing buffer (never copied per chunk), and scanning
    resumes where the last ``feed`` stopped, so a long event that arrives in
    many small chunks is read once.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0  # where scanning resumes
        self._line_start = 0  # start of the line being scanned

    def feed(self, data: bytes) -> list[bytes]:
        """Buffer ``data``; return the events it completes."""
        return self._scan(data, final=False)

    def close(self) -> list[bytes]:
        """End of stream: the remaining events, the last one possibly
        unterminated.  Joined with everything ``feed`` returned, they are
        exactly the bytes fed."""
        frames = self._scan(b"", final=True)
        if self._buf:
            frames.append(bytes(self._buf))
        self._buf = bytearray()
        self._pos = self._line_start = 0
        return frames

    def _scan(self, data: bytes, *, final: bool) -> list[bytes]:
        buf = self._buf
        buf += data
        frames: list[bytes] = []
        frame_start = 0
        pos, line_start = self._pos, self._line_start
        end = len(buf)
        while True:
            match = _EOL.search(buf, pos)
            if match is None:
                pos = end  # no line ends before the end: never read again
                break
            eol_start, eol_end = match.span()
            if not final and eol_end == end and eol_end - eol_start == 1 and buf[eol_start] == 13:
                pos = eol_start  # a lone CR at the end may be the first half of CRLF: wait
                break
            if eol_start == line_start:  # a blank line ends the event
                frames.append(bytes(buf[frame_start:eol_end]))
                frame_start = eol_end
            pos = line_start = eol_end
        del buf[:frame_start]  # cheap: a bytearray drops its head in place
        self._pos = pos - frame_start
        self._line_start = line_start - frame_start
        return frames


@dataclass(frozen=True)
class SSEEvent:
    """The fields of one server-sent event."""

    #: The ``event:`` field as sent; ``None`` when absent.  EventSource
    #: dispatches an event without one (or with an empty one) as
    #: ``"message"``; the raw value is kept so callers can tell.
    event: str | None = None
    #: The ``data:`` lines joined with ``"\n"``; ``None`` when the event has no
    #: data line (a keep-alive comment, a lone ``event:``): EventSource does
    #: not dispatch such an event, and it is up to the caller to skip it.
    data: str | None = None
    #: The ``id:`` field; ``None`` when absent.
    id: str | None = None


def parse_sse_event(frame: bytes) -> SSEEvent:
    """The fields of one event, as :class:`SSESplitter` cuts them.

    As the WHATWG EventSource parser reads them: UTF-8 with U+FFFD for
    invalid bytes; LF, CRLF or CR end a line; a line starting with ``:`` is a
    comment; a field's name runs up to the first colon (the whole line when
    there is none, so a bare ``data`` is an empty data line) and one space
    after the colon is dropped; ``data`` lines add up, ``event`` and ``id``
    keep the last one; an ``id`` holding NUL, ``retry`` (a setting of the
    connection, not of the event) and unknown fields are ignored.

    Blank lines are skipped: the frame ends with the one that ends the event,
    so a frame holding several events (only a hand-written cassette has one)
    reads as one event.
    """
    event: str | None = None
    event_id: str | None = None
    data: list[str] = []
    text = frame.decode("utf-8", "replace")
    # Not str.splitlines: it also breaks at U+2028, form feeds and the like,
    # which SSE keeps as data.
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if not line or line[0] == ":":  # a blank line, a comment
            continue
        name, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "id" and "\0" not in value:
            event_id = value
    return SSEEvent(event, "\n".join(data) if data else None, event_id)


#: How a server-sent event stream starts: a field or a comment.
_SSE_STARTS = (b"data:", b"event:", b"id:", b"retry:", b":")


def looks_like_sse(head: bytes) -> bool:
    """Whether a body starting with ``head`` (its first few bytes are enough)
    reads as server-sent events: for a stream stored or served without its
    ``text/event-stream`` content type."""
    return head.lstrip().startswith(_SSE_STARTS)


def is_sse_stream(body: bytes) -> bool:
    """Whether a whole body, stored without its content type, is a stream
    of server-sent events: it starts like one (:func:`looks_like_sse`) and
    holds the blank line that ends an event."""
    return looks_like_sse(body) and (b"\n\n" in body or b"\r\n\r\n" in body or b"\r\r" in body)
