"""Property 3: SSE frames are byte-exact.

The frames :class:`reel_core.SSESplitter` cuts a body into join back to
exactly the body, whatever pieces the body was fed in; each frame but the
last ends with a blank line, and the cut agrees with a line-by-line reading
of the whole body.  The same holds for the frames of a recorded stream.
"""

from __future__ import annotations

import itertools
import re
from unittest import mock

from hypothesis import example, given
from hypothesis import strategies as st

from reel_core import (
    Cassette,
    Config,
    Engine,
    Frame,
    Mode,
    RecordedRequest,
    Redactor,
    Request,
    Signal,
)
from reel_core._frames import sse_event_ends
from reel_core._record import Recorder
from reel_core.tools import SSEEvent, SSESplitter, parse_sse_event

from .strategies import chunkings, sse_bodies

_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def reference_frames(body: bytes) -> list[bytes]:
    """The events of ``body`` read as whole lines (an oracle, not fast)."""
    frames: list[bytes] = []
    start = 0
    for m in _LINE.finditer(body):
        line = m.group(0)
        if line in (b"\n", b"\r", b"\r\n"):  # a blank line ends the event
            frames.append(body[start : m.end()])
            start = m.end()
    if start < len(body):
        frames.append(body[start:])
    return frames


def ends_with_blank_line(frame: bytes) -> bool:
    lines = [m.group(0) for m in _LINE.finditer(frame)]
    return b"".join(lines) == frame and lines[-1] in (b"\n", b"\r", b"\r\n")


def split(chunks: list[bytes]) -> list[bytes]:
    splitter = SSESplitter()
    frames: list[bytes] = []
    for chunk in chunks:
        frames += splitter.feed(chunk)
    return frames + splitter.close()


@given(st.data(), sse_bodies())
@example(None, b"data: a\r")
@example(None, b"data: a\r\r\n")
@example(None, b"\r\n\r\n")
@example(None, b"data: a\n\rdata: b\r\n\r")
def test_frames_rejoin_for_any_chunking(data: st.DataObject | None, body: bytes) -> None:
    expected = reference_frames(body)
    whole = split([body])
    assert b"".join(whole) == body
    assert whole == expected
    if data is not None:
        chunks = data.draw(chunkings(body, allow_empty=True), label="chunks")
        assert split(chunks) == expected
    assert all(frame for frame in whole)
    for frame in whole[:-1]:
        assert ends_with_blank_line(frame), frame


@given(st.data(), sse_bodies())
def test_splitter_is_reusable_after_close(data: st.DataObject, body: bytes) -> None:
    splitter = SSESplitter()
    for _ in range(2):
        frames: list[bytes] = []
        for chunk in data.draw(chunkings(body)):
            frames += splitter.feed(chunk)
        frames += splitter.close()
        assert frames == reference_frames(body)


@given(sse_bodies())
@example(b"\n\n\ndata: a\n\ndata: b\n")
@example(b"data: a\ndata: b\n\n\n")
def test_event_ends_in_one_pass_are_the_splitters(body: bytes) -> None:
    ends = sse_event_ends(body)
    if b"\r" in body:
        assert ends is None
        return
    complete = SSESplitter().feed(body)  # without close(): complete events only
    assert ends == list(itertools.accumulate(map(len, complete)))


def _recorder_frames(chunks: list[bytes], times: list[float], one_by_one: bool) -> object:
    request = RecordedRequest("POST", "/v1/chat/completions")
    recorder = Recorder(request, key="k", id="i", redactor=Redactor())
    recorder.head(200, ((b"content-type", b"text/event-stream"),), 10.0, 9.5)
    for chunk, now in zip(chunks, times, strict=True):
        recorder.data(chunk, now)
    if one_by_one:
        with mock.patch.object(Recorder, "_take_sse_at_once", return_value=False):
            interaction = recorder.end(12.0)
    else:
        interaction = recorder.end(12.0)
    response = interaction.response
    return response.frames, response.end_ms, interaction.meta["bytes"]


@given(st.data(), sse_bodies())
def test_recorded_events_are_stamped_alike_in_one_pass(data: st.DataObject, body: bytes) -> None:
    # Each event is stamped with the arrival of the chunk completing it,
    # whether the body is cut in one pass or chunk by chunk.
    chunks = data.draw(chunkings(body), label="chunks")
    offsets = data.draw(st.lists(st.floats(0, 1), min_size=len(chunks), max_size=len(chunks)))
    times = [10.0 + offset for offset in offsets]  # not always in order
    assert _recorder_frames(chunks, times, one_by_one=False) == _recorder_frames(
        chunks, times, one_by_one=True
    )


def _record(body: bytes, chunks: list[bytes], mode: Mode) -> tuple[list[bytes], bytes]:
    session = Engine(Cassette(), Config(mode=mode))
    session.receive_request(
        Request("POST", "/v1/chat/completions", (), b'{"model":"m","stream":true}')
    )
    session.next_event()  # Forward
    session.upstream_head(200, [(b"content-type", b"text/event-stream")], mono=10.0)
    for i, chunk in enumerate(chunks):
        session.upstream_data(chunk, mono=10.0 + i / 100)
    session.upstream_end(mono=11.0)
    forwarded: list[bytes] = []
    line = b""
    while True:
        event = session.next_event()
        if isinstance(event, Frame):
            forwarded.append(event.data)
        elif isinstance(event, Signal):
            break
    recorded = session.record()
    if recorded is not None:
        line = recorded.line
    return forwarded, line


@given(st.data(), sse_bodies(), st.sampled_from([Mode.AUTO, Mode.RECORD]))
def test_recorded_frames_join_to_the_body(data: st.DataObject, body: bytes, mode: Mode) -> None:
    chunks = data.draw(chunkings(body), label="chunks")
    forwarded, line = _record(body, chunks, mode)
    assert b"".join(forwarded) == body  # what is forwarded is never altered
    assert line
    (interaction,) = Cassette.loads(line)
    assert interaction.response.stream == "sse"
    frames = [frame for _, frame in interaction.response.frames]
    redactor = Redactor()
    # Frames are stored redacted, one by one, and otherwise byte for byte.
    assert frames == [redactor.data(f) for f in reference_frames(body)]
    for frame in frames[:-1]:
        assert ends_with_blank_line(frame)


# -- the fields of each event --------------------------------------------------

# A field value is any text without a line end (NUL is no value for an id).
_values = st.text(st.characters(codec="utf-8", exclude_characters="\r\n"), max_size=12)
_ids = _values.filter(lambda value: "\0" not in value)
sse_events = st.builds(
    SSEEvent,
    event=st.none() | _values,
    # The data may hold LFs: each line of it is sent as a data line.
    data=st.none() | st.lists(_values, min_size=1, max_size=3).map("\n".join),
    id=st.none() | _ids,
)


@st.composite
def encoded(draw: st.DrawFn, event: SSEEvent, eol: str) -> bytes:
    """``event`` as a server would send it: its field lines in any order
    (data lines in theirs), with or without the space after the colon,
    comments between them, and the blank line that ends it."""
    fields = [("data", line) for line in ([] if event.data is None else event.data.split("\n"))]
    for name, value in (("event", event.event), ("id", event.id)):
        if value is not None:
            fields.insert(draw(st.integers(0, len(fields))), (name, value))
    lines: list[str] = []
    for name, value in fields:
        if draw(st.booleans()):
            lines.append(":" + draw(_values))
        style = draw(st.sampled_from(("space", "no space", "no colon")))
        if style == "no colon" and not value:
            lines.append(name)
        elif style == "no space" and not value.startswith(" "):  # else that space is lost
            lines.append(f"{name}:{value}")
        else:
            lines.append(f"{name}: {value}")
    return "".join(line + eol for line in [*lines, ""]).encode()


# One line end per body: a CR ending a line and the LF of a blank line after it
# would read as one CRLF (the splitter's tests mix them).
@given(st.data(), st.lists(sse_events, max_size=5), st.sampled_from(("\n", "\r\n", "\r")))
def test_fields_round_trip(data: st.DataObject, events: list[SSEEvent], eol: str) -> None:
    body = b"".join(data.draw(encoded(event, eol)) for event in events)
    frames = split(data.draw(chunkings(body), label="chunks"))
    assert [parse_sse_event(frame) for frame in frames] == events
