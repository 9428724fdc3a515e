"""Property 2: a cassette line is a faithful, stable encoding.

An interaction dumped to a line, loaded back and dumped again gives the same
line, and the loaded value equals the original; a stored body decodes to
exactly the bytes it was made from.
"""

from __future__ import annotations

import itertools
import json

from hypothesis import example, given
from hypothesis import strategies as st

from reel_core import (
    Cassette,
    CassetteMeta,
    Config,
    Engine,
    Interaction,
    MatchConfig,
    Mode,
    RecordedRequest,
    RecordedResponse,
    Request,
    Signal,
    UpstreamError,
)
from reel_core.tools import decode_body, encode_body

from .strategies import interactions, json_bodies, json_values, sse_bodies


def reload(line: bytes) -> Interaction:
    cassette = Cassette.loads(line, strict=True)
    loaded = list(cassette)
    assert len(loaded) == 1
    return loaded[0]


@given(interactions())
@example(
    Interaction(
        "sha256:" + "0" * 64,
        "\ud800",
        RecordedRequest("GET", "\ud800", (("q", "\udfff"),)),
        RecordedResponse(200),
    )
)
def test_dump_load_dump_is_identical(interaction: Interaction) -> None:
    line = interaction.to_line()
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert line.startswith(b'{"key":"sha256:')  # the fast index path takes it
    loaded = reload(line)
    assert loaded == interaction
    assert loaded.to_line() == line
    assert loaded.response.content == interaction.response.content
    assert loaded.request.key(MatchConfig()) == interaction.request.key(MatchConfig())


@given(st.lists(interactions(), max_size=3))
def test_cassette_dumps_loads_dumps(items: list[Interaction]) -> None:
    cassette = Cassette(meta=CassetteMeta())
    for item in items:
        cassette.add(item)
    data = cassette.dumps()
    again = Cassette.loads(data)
    assert again.interactions() == items
    assert again.dumps() == data


bodies = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=100).map(str.encode),
    json_bodies(),
    json_bodies(json_values()),
    sse_bodies(),
)


@given(bodies)
@example(b'{"a":"\\ud800"}')
@example(b'{"a":NaN}')
@example(b"[1e400]")
@example(b'{"a":1,"a":2}')
@example(b'{"\\u00e9":"\\u00e9"}')
@example(b"[]\n")
@example(b"{\x00}\x00")
def test_body_round_trips_exactly(body: bytes) -> None:
    stored = encode_body(body)
    assert decode_body(stored) == body
    # ... also after the stored form went through a cassette line's JSON.
    through = json.loads(json.dumps(stored, ensure_ascii=False).encode())
    assert decode_body(through) == body
    if not body:
        assert stored is None


@given(
    st.lists(st.binary(min_size=1, max_size=30), max_size=6),
    st.sampled_from((b"text/event-stream", b"application/json", b"application/x-ndjson")),
    st.sampled_from((200, 429, 500)),
    st.booleans(),
    st.lists(st.floats(0, 1e4, allow_nan=False), min_size=1, max_size=8),
)
@example([], b"text/event-stream", 200, True, [0.0, 1.0])
def test_a_recorded_line_loads_as_the_interaction_recorded(
    chunks: list[bytes], content_type: bytes, status: int, cut: bool, nows: list[float]
) -> None:
    """What a session holds after recording is what a later run loads."""
    cassette = Cassette()
    session = Engine(cassette, Config(mode=Mode.RECORD))
    session.receive_request(Request("POST", "/v1/chat/completions", (), b'{"stream":true}'))
    session.next_event()
    clock = itertools.cycle(nows)
    session.upstream_head(status, [(b"content-type", content_type)], mono=next(clock), sent_at=0.0)
    for chunk in chunks:
        session.upstream_data(chunk, mono=next(clock))
    if cut:
        session.upstream_error(UpstreamError.RESET, "reset by peer", mono=next(clock))
    else:
        session.upstream_end(mono=next(clock))
    while not isinstance(session.next_event(), Signal):
        pass
    recorded = session.record()
    assert recorded is not None
    line = recorded.line
    (in_memory,) = cassette.interactions()
    loaded = reload(line)
    assert loaded == in_memory
    assert loaded.to_line() == line == in_memory.to_line()
