"""The miss marker: an answer carries ``x-reel-miss`` exactly when it is a
miss, with the missed request's key as its value.

A tool (or the pytest plugin's users) tells a miss from a real 404 by the
header alone, so it must hold for the whole family: any recorded response,
whatever its status and headers (a hand-edited line that carries the
marker in any spelling included), any request sequence past or within the
recorded counts, repeat on or off, GET, POST or HEAD.  Every binding takes
the head from these events, so the engine is where it is proved.
"""

from __future__ import annotations

import dataclasses
import json

from hypothesis import given
from hypothesis import strategies as st

from reel_core import (
    Cassette,
    Config,
    Engine,
    Interaction,
    MatchConfig,
    Miss,
    RecordedRequest,
    RecordedResponse,
    Request,
    ResponseHead,
    Signal,
)
from reel_core.tools import MISS_HEADER, match_key

from .strategies import llm_bodies, recorded_responses

PATH = "/v1/chat/completions"
#: How a hand-edited (or foreign) line may spell the marker.
SPELLINGS = ("x-reel-miss", "X-Reel-Miss", "X-REEL-MISS", " x-reel-miss ")


@st.composite
def marked_responses(draw: st.DrawFn) -> RecordedResponse:
    """A recorded response, the marker slipped into its headers or not."""
    response = draw(recorded_responses())
    if not draw(st.booleans()):
        return response
    headers = list(response.headers)
    where = draw(st.integers(0, len(headers)))
    headers.insert(where, (draw(st.sampled_from(SPELLINGS)), draw(st.text(max_size=20))))
    return dataclasses.replace(response, headers=tuple(headers))


def _body(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


def _cassette(bodies: list[bytes], responses: list[RecordedResponse]) -> Cassette:
    cassette = Cassette()
    for i, (body, response) in enumerate(zip(bodies, responses, strict=False)):
        key = match_key("POST", PATH, (), body, MatchConfig())
        recorded = RecordedRequest("POST", PATH, (), body)
        cassette.add(Interaction(key, f"rec{i}", recorded, response), played=False)
    return cassette


@given(
    recorded=st.lists(llm_bodies().map(_body), min_size=1, max_size=3),
    responses=st.lists(marked_responses(), min_size=3, max_size=3),
    sent=st.lists(
        st.tuples(
            st.sampled_from(("POST", "GET", "HEAD")),
            # mostly what is recorded (a hit, or a repeat past its count)
            st.one_of(st.integers(0, 2), st.integers(0, 2), llm_bodies().map(_body)),
        ),
        min_size=1,
        max_size=5,
    ),
    repeat=st.sampled_from((None, True, False)),
)
def test_the_marker_is_on_every_miss_and_nothing_else(
    recorded: list[bytes],
    responses: list[RecordedResponse],
    sent: list[tuple[str, int | bytes]],
    repeat: bool | None,
) -> None:
    engine = Engine(_cassette(recorded, responses), Config(repeat=repeat))
    for method, which in sent:
        body = recorded[which % len(recorded)] if isinstance(which, int) else which
        engine.receive_request(Request(method, PATH, ((b"host", b"api.openai.com"),), body))
        events = []
        while not isinstance(event := engine.next_event(), Signal):
            events.append(event)
        (head,) = [e for e in events if isinstance(e, ResponseHead)]
        markers = [value for name, value in head.headers if name.strip().lower() == MISS_HEADER]
        misses = [e for e in events if isinstance(e, Miss)]
        if misses:
            assert head.status == 404
            assert markers == [misses[0].report.key.encode("ascii")]
        else:
            assert markers == []
        engine.start_next_cycle()
