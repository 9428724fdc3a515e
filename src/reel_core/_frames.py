"""Cutting a response stream into the frames a cassette stores.

Server-sent events are cut into byte-exact events: everything up to and
including the blank line that ends each event, whatever its line endings (LF,
CRLF or CR), so the frames joined give back the body byte for byte.  Other
streamed bodies (Gemini's JSON array, NDJSON, plain chunked) are kept as the
chunks they arrived in.
"""

from __future__ import annotations

import re

__all__ = ["SSESplitter"]

_EOL = re.compile(rb"\r\n|\r|\n")


class SSESplitter:
    """Incremental SSE event splitter.

    ``feed`` returns the events completed by a chunk; ``close`` returns what
    is left when the stream ends (an unterminated last event, or ``b""``).
    """

    def __init__(self) -> None:
        self._buf = b""
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
            frames.append(self._buf)
        self._buf = b""
        self._pos = self._line_start = 0
        return frames

    def _scan(self, data: bytes, *, final: bool) -> list[bytes]:
        buf = self._buf + data if self._buf else data
        frames: list[bytes] = []
        frame_start = 0
        pos, line_start = self._pos, self._line_start
        end = len(buf)
        while True:
            match = _EOL.search(buf, pos)
            if match is None:
                break
            eol_start, eol_end = match.span()
            if not final and eol_end == end and eol_end - eol_start == 1 and buf[eol_start] == 13:
                break  # a lone CR at the end may be the first half of CRLF: wait
            if eol_start == line_start:  # a blank line ends the event
                frames.append(buf[frame_start:eol_end])
                frame_start = eol_end
            pos = line_start = eol_end
        self._buf = buf[frame_start:]
        self._pos = pos - frame_start
        self._line_start = line_start - frame_start
        return frames
