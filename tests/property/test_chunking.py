"""Property 1: how request bytes are cut up never changes the decision.

Whatever pieces the client's bytes arrive in -- whole, one byte at a time,
or cut anywhere -- the session makes the same decisions (Replay, Forward or
Miss, with equal requests and keys) as when the bytes come whole, also
for several requests pipelined on one connection.
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from reel_core import Config, Miss, Mode, Session

from ._drive import Decision, feed
from .strategies import (
    HIT_BODY,
    HIT_PATH,
    chunkings,
    hit_cassette,
    pipelines,
    raw_requests,
    request_specs,
)

modes = st.sampled_from(list(Mode))
_hit_spec = st.just(("POST", HIT_PATH, [(b"Content-Type", b"application/json")], HIT_BODY))


@given(
    data=st.data(),
    raw=st.one_of(_hit_spec, request_specs()).flatmap(raw_requests),
    mode=modes,
)
@example(None, b"HEAD /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:7878\r\n\r\n", Mode.REPLAY)
def test_one_request_any_chunking(data: st.DataObject | None, raw: bytes, mode: Mode) -> None:
    config = Config(mode=mode)
    whole = feed(Session(hit_cassette(), config), [raw])
    assert len(whole) == 1
    if data is None:  # an explicit example: one byte at a time
        chunks = [raw[i : i + 1] for i in range(len(raw))]
    else:
        chunks = data.draw(chunkings(raw), label="chunks")
    assert b"".join(chunks) == raw
    assert feed(Session(hit_cassette(), config), chunks) == whole


@given(data=st.data(), requests=pipelines(3), mode=modes)
def test_pipelined_requests_any_chunking(
    data: st.DataObject, requests: list[bytes], mode: Mode
) -> None:
    raw = b"".join(requests)
    config = Config(mode=mode)
    whole = feed(Session(hit_cassette(), config), [raw])
    assert len(whole) == len(requests)
    chunks = data.draw(chunkings(raw), label="chunks")
    assert feed(Session(hit_cassette(), config), chunks) == whole
    if mode is Mode.REPLAY:  # nothing is recorded: every decision is independent...
        # ... so the same as sending each request on a connection of its own.
        one_by_one = [feed(Session(hit_cassette(), config), [r])[0] for r in requests]
        assert one_by_one == whole


@given(spec=request_specs(), data=st.data())
def test_chunked_and_content_length_bodies_decide_alike(
    spec: tuple[str, str, list[tuple[bytes, bytes]], bytes], data: st.DataObject
) -> None:
    """The same request framed differently on the wire gets the same key."""
    config = Config(mode=Mode.AUTO)
    first = feed(Session(hit_cassette(), config), [data.draw(raw_requests(spec))])
    second = feed(Session(hit_cassette(), config), [data.draw(raw_requests(spec))])
    assert len(first) == len(second) == 1
    assert type(first[0]) is type(second[0])
    assert first[0].request.body == second[0].request.body == spec[3]
    assert first[0].request.target == second[0].request.target
    assert key_of(first[0]) == key_of(second[0])


def key_of(decision: Decision) -> str:
    if isinstance(decision, Miss):
        return decision.report.key
    assert decision.key is not None  # auto mode keys every request
    return decision.key
