"""Response shapes, drift between generations, and compacting a cassette."""

from __future__ import annotations

import json

import pytest

from reel_core import CassetteError, CassetteMeta, Interaction, RecordedRequest, RecordedResponse
from reel_core.tools import (
    WebSocketLog,
    WebSocketMessage,
    compact,
    decode_lines,
    drift_of,
    lines_drift,
    response_shape,
    shape_changes,
    superseded,
)

KEY = "sha256:" + "a" * 64
OTHER = "sha256:" + "b" * 64


def rec(
    response: RecordedResponse,
    *,
    key: str = KEY,
    id_: str = "a1",
    gen: int = 0,
    websocket: WebSocketLog | None = None,
) -> Interaction:
    return Interaction(
        key,
        id_,
        RecordedRequest("POST", "/v1/chat/completions", (), b"{}"),
        response,
        timestamp="2024-01-01T00:00:00.000Z",
        endpoint="POST /v1/chat/completions",
        generation=gen,
        websocket=websocket,
    )


def body(data: object, status: int = 200) -> Interaction:
    return rec(RecordedResponse(status, body=json.dumps(data).encode()))


def sse(*frames: bytes, status: int = 200) -> Interaction:
    timed = tuple((float(i), f) for i, f in enumerate(frames))
    return rec(RecordedResponse(status, stream="sse", frames=timed, end_ms=9.0))


def chunks(*parts: bytes) -> Interaction:
    timed = tuple((float(i), p) for i, p in enumerate(parts))
    return rec(RecordedResponse(200, stream="chunks", frames=timed, end_ms=9.0))


def changes(old: Interaction, new: Interaction) -> list[str]:
    return shape_changes(response_shape(old), response_shape(new))


def test_the_words_of_an_answer_are_not_its_shape() -> None:
    a = body({"choices": [{"message": {"content": "hi"}}], "usage": {"total": 3}})
    b = body({"choices": [{"message": {"content": "a longer answer"}}], "usage": {"total": 9}})
    assert changes(a, b) == []
    assert drift_of(a, b) is None


def test_fields_added_gone_and_retyped() -> None:
    old = body({"id": "x", "choices": [{"index": 0, "logprobs": None}], "gone": 1})
    new = body({"id": 7, "choices": [{"index": 0, "logprobs": None, "refusal": "no"}]})
    assert changes(old, new) == [
        "+ choices[*].refusal: string",
        "- gone: number",
        "~ id: string -> number",
    ]
    assert changes(body([1, True]), body([1])) == ["~ [*]: boolean|number -> number"]
    assert changes(body(None), body({})) == ["~ $: null -> object"]


def test_status_and_kind_of_body() -> None:
    assert changes(body({}, 200), body({}, 400)) == ["status 200 -> 400"]
    text = rec(RecordedResponse(200, body=b"plain words"))
    empty = rec(RecordedResponse(204, body=b"  "))
    assert changes(body({}), text) == ["body json -> text"]
    assert changes(text, empty) == ["status 200 -> 204", "body text -> empty"]


def test_sse_event_sequences_fold_repeats_and_keep_names() -> None:
    openai_a = sse(b'data: {"c":"a"}\n\n', b'data: {"c":"b"}\n\n', b"data: [DONE]\n\n")
    openai_b = sse(b'data: {"c":"x"}\n\n', b": keep-alive\n\n", b"data: [DONE]\n\n")
    assert response_shape(openai_a).events == ("message", "[DONE]")
    assert changes(openai_a, openai_b) == []  # one delta or two: the same shape
    anthropic_old = sse(
        b'event: message_start\ndata: {"type":"message_start"}\n\n',
        b'event: delta\ndata: {"type":"delta","text":"a"}\n\n',
        b'event: delta\ndata: {"type":"delta","text":"b"}\n\n',
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
    )
    anthropic_new = sse(
        b'event: message_start\ndata: {"type":"message_start"}\n\n',
        b'event: ping\ndata: {"type": "ping"}\n\n',
        b'event: delta\ndata: {"type":"delta","text":1}\n\n',
        b"event: message_stop\ndata: not json\n\n",
    )
    assert changes(anthropic_old, anthropic_new) == [
        "events message_start, delta, message_stop -> message_start, ping, delta, message_stop",
        "~ delta: text: string -> number",
        "~ message_stop: $: object -> text",
        "- message_stop: type: string",
    ]


def test_chunked_streams_json_array_and_json_lines() -> None:
    array_a = chunks(b'[{"candidates": [{"text": "a"}]}', b"]")
    array_b = chunks(b'[{"candidates": [{"text": "b"}], "usage": {}}]')
    assert changes(array_a, array_b) == ["+ [*].usage: object"]
    lines_a = chunks(b'{"a": 1}\n', b'{"a": 2}\n')
    lines_b = chunks(b'{"a": "x"}\n{"a": 2}\n')
    assert response_shape(lines_a).kind == "chunks"
    assert changes(lines_a, lines_b) == ["~ a: number -> number|string"]
    text = chunks(b"hello ", b"world")
    assert response_shape(text).kind == "text"


def test_websocket_sessions_compare_the_servers_messages() -> None:
    def session(*messages: WebSocketMessage) -> Interaction:
        return rec(RecordedResponse(101), websocket=WebSocketLog(messages))

    def server(data: bytes, binary: bool = False) -> WebSocketMessage:
        return WebSocketMessage("server", 0.0, data, binary)

    client = WebSocketMessage("client", 0.0, b'{"type":"session.update"}')
    old = session(
        client,
        server(b'{"type":"session.created","session":{"id":"s"}}'),
        server(b'{"serverContent":{"turnComplete":true}}'),
        server(b"[1]"),
        server(b"bye"),
        server(b"\x00\x01", binary=True),
    )
    new = session(
        server(b'{"type":"session.created","session":{"id":"s","model":"m"}}'),
        server(b'{"serverContent":{"turnComplete":true}}'),
    )
    assert response_shape(old).events == (
        "session.created",
        "serverContent",
        "json",
        "text",
        "binary",
    )
    assert changes(old, new) == [
        "events session.created, serverContent, json, text, binary -> "
        "session.created, serverContent",
        "+ session.created: session.model: string",
    ]
    assert response_shape(session(server(b"{}"))).events == ("{}",)


def test_a_drift_says_what_and_where() -> None:
    old, new = body({"a": 1}), body({"a": 1, "b": 2}, 201)
    drift = drift_of(old, new)
    assert drift is not None
    assert (
        drift.line() == "drift POST /v1/chat/completions (a1 -> a1): status 200 -> 201; + b: number"
    )
    assert drift.to_json() == {
        "key": KEY,
        "endpoint": "POST /v1/chat/completions",
        "old": {"id": "a1", "ts": "2024-01-01T00:00:00.000Z"},
        "new": {"id": "a1", "ts": "2024-01-01T00:00:00.000Z"},
        "changes": ["status 200 -> 201", "+ b: number"],
    }


# -- whole cassettes -----------------------------------------------------------------


def cassette(*lines: Interaction | bytes) -> bytes:
    out = [CassetteMeta(max_age="7d").to_line()]
    out += [x if isinstance(x, bytes) else x.to_line() for x in lines]
    return b"".join(out)


def line(data: object, *, gen: int = 0, id_: str = "a1", key: str = KEY) -> Interaction:
    response = RecordedResponse(200, body=json.dumps(data).encode())
    return rec(response, key=key, id_=id_, gen=gen)


def test_lines_drift_pairs_each_line_with_its_rank_in_the_generation_before() -> None:
    data = cassette(
        line({"e": 1}, id_="old429"),
        line({"v": 1}, id_="old200"),
        line({"x": 1}, key=OTHER, id_="other"),
        line({"e": 1}, gen=1, id_="new429"),
        line({"v": 1, "w": 2}, gen=1, id_="new200"),
        line({"v": 1, "w": 2}, gen=1, id_="extra"),  # past the old count: no counterpart
        line({"v": "s", "w": 2}, gen=3, id_="third"),
    )
    drifts = lines_drift(decode_lines(data, "c").lines)
    assert [(d.old_id, d.new_id, d.changes) for d in drifts] == [
        ("old200", "new200", ("+ w: number",)),
        ("new429", "third", ("- e: number", "+ v: string", "+ w: number")),
    ]
    gone = superseded(decode_lines(data, "c").lines)
    assert [g.interaction.id for g in gone if g.interaction] == [
        "old429",
        "old200",
        "new429",
        "new200",
        "extra",
    ]


def test_compact_drops_superseded_lines_and_keeps_the_rest_byte_for_byte() -> None:
    keep = line({"x": 1}, key=OTHER, id_="other").to_line()
    data = cassette(
        line({"v": 1}, id_="old"),
        keep,
        b"\n",
        b"{not json\n",
        line({"v": 2}, gen=1, id_="new"),
    )
    result = compact(data, "c")
    assert result.changed
    assert [x.interaction.id for x in result.superseded if x.interaction] == ["old"]
    assert [x.number for x in result.bad] == [5]
    assert result.kept == 2
    meta = CassetteMeta(max_age="7d").to_line()
    assert result.data == meta + keep + b"{not json\n" + line({"v": 2}, gen=1, id_="new").to_line()
    dropped = compact(data, "c", drop_bad=True)
    assert b"{not json" not in dropped.data
    assert dropped.changed
    # compacted again: nothing more to drop
    again = compact(result.data, "c")
    assert not again.changed
    assert again.data == result.data


def test_compact_of_a_cassette_without_meta_and_a_bom() -> None:
    data = b"\xef\xbb\xbf" + line({"v": 1}).to_line() + line({"v": 2}, gen=1).to_line()
    result = compact(data, "c")
    assert result.data == line({"v": 2}, gen=1).to_line()


def test_compact_refuses_what_it_cannot_read() -> None:
    with pytest.raises(CassetteError):
        compact(b'{"_meta": {"schema": "x"}}\n', "c")
    with pytest.raises(CassetteError):
        compact(b"\xff\xfe", "c")
