"""A recorded request's JSON body is rendered when first read, not when its
line is parsed: a replay never sends it.  What a line says, and what is
wrong with it, is decided as before."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
import threading
from typing import Any

import pytest

from reel_core import Config, Engine, Interaction, Mode, RecordedRequest, Replay, Request
from reel_core.tools import decode_body, read_line

from ._helpers import cassette_of, interaction

#: Bodies as a client may send them, each stored in another style.
SENT = [
    b'{"model":"m","messages":[{"role":"user","content":"hi \\u00e9"}]}',
    b'{"model": "m", "n": [1, 2.5, null, true]}\n',
    json.dumps({"a": {"b": ["\u00e9", {}]}, "c": []}, indent=2).encode(),
    json.dumps({"a": "\u00e9"}, indent=4, ensure_ascii=True).encode(),
    b"[]",
    b"plain text, not JSON",
    b"\xff\xfe binary",
    b"",
]


def _unrendered(request: RecordedRequest) -> bool:
    return "_json_value" in dir(request)


@pytest.mark.parametrize("sent", SENT)
def test_a_parsed_requests_body_is_the_bytes_recorded(sent: bytes) -> None:
    recorded = interaction(body=sent)
    line = recorded.to_line()
    stored = json.loads(line)["request"]["body"]
    parsed = read_line(line)
    assert _unrendered(parsed.request) == (isinstance(stored, dict) and "json" in stored)
    assert parsed.request.body == sent == decode_body(stored)
    assert not _unrendered(parsed.request)  # rendered once, then kept
    assert parsed.request.body is parsed.request.body
    assert parsed == recorded
    assert read_line(line).to_line() == line


def test_an_unrendered_request_is_a_value_like_any_other() -> None:
    line = interaction(body=SENT[0]).to_line()
    one, two = read_line(line).request, read_line(line).request
    assert hash(one) == hash(RecordedRequest("POST", "/v1/chat/completions", (), SENT[0]))
    assert one == two
    for copied in (
        copy.copy(read_line(line).request),
        copy.deepcopy(read_line(line).request),
        pickle.loads(pickle.dumps(read_line(line).request)),
        dataclasses.replace(read_line(line).request, path="/other"),
    ):
        assert copied.body == SENT[0]
    assert "body=b'{" in repr(read_line(line).request)
    assert RecordedRequest("GET", "/").body == b""  # the field's default


def test_threads_rendering_one_body_at_once_read_the_same_bytes() -> None:
    request = read_line(interaction(body=SENT[2]).to_line()).request
    seen: list[bytes] = []
    start = threading.Barrier(4)

    def read() -> None:
        start.wait()
        seen.append(request.body)

    threads = [threading.Thread(target=read) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == [SENT[2]] * 4


def test_a_replay_leaves_the_recorded_requests_body_unrendered() -> None:
    recorded = interaction(body=SENT[0])
    cassette = cassette_of(recorded)  # read from its line, as a file is
    engine = Engine(cassette, Config(mode=Mode.REPLAY))
    engine.receive_request(
        Request("POST", "/v1/chat/completions", ((b"host", b"h"),), SENT[0]), wall=0.0
    )
    assert isinstance(engine.next_event(), Replay)
    (played,) = cassette
    assert _unrendered(played.request)
    assert played.request.body == SENT[0]


def _line_with_body(body: Any) -> bytes:
    obj = json.loads(interaction().to_line())
    obj["request"]["body"] = body
    return json.dumps(obj).encode()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"json": {}, "style": "indent=99"}, "unknown JSON style 'indent=99'"),
        ({"json": {}, "style": "tabs"}, "unknown JSON style 'tabs'"),
        ({"json": {}, "style": "indent=x"}, "invalid literal for int()"),
        ({"json": {}, "style": 2}, "body style must be a string"),
        ({"base64": "not base64!"}, "bad base64 body"),
        ({"texts": "x"}, 'a body needs one of "json", "text" or "base64"'),
        ("raw", "a body must be an object or null"),
    ],
)
def test_a_bad_request_body_still_makes_the_line_bad(body: Any, message: str) -> None:
    with pytest.raises(ValueError, match=r'"request\.body": ') as caught:
        read_line(_line_with_body(body))
    assert message in str(caught.value)


def test_the_same_bad_body_in_a_response_is_refused_alike() -> None:
    obj = json.loads(interaction().to_line())
    obj["response"]["body"] = {"json": {}, "style": "tabs"}
    with pytest.raises(ValueError, match=r"\"response\.body\": unknown JSON style 'tabs'"):
        Interaction.from_json(obj)


def test_a_render_that_lost_the_race_reads_the_winners_bytes() -> None:
    """Thread A renders and lets the JSON value go while thread B, which
    found no ``body`` yet, is inside the descriptor: B reads A's bytes."""
    request = read_line(interaction(body=SENT[0]).to_line()).request
    descriptor = vars(RecordedRequest)["body"]
    assert request.body == SENT[0]  # A: rendered, the value let go
    assert not _unrendered(request)
    assert descriptor.__get__(request, RecordedRequest) == SENT[0]  # B, late
