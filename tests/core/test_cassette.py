"""Cassette schema 1: lines, the _meta line, the index, and bad cassettes."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from reel_core import (
    SCHEMA_VERSION,
    Cassette,
    CassetteError,
    CassetteMeta,
    Interaction,
    MatchConfig,
    MatchMode,
    RecordedRequest,
    RecordedResponse,
    RemoteProtocolError,
    SchemaVersionError,
    StreamCut,
    __version__,
)
from reel_core._cassette import format_timestamp
from reel_core.tools import CassetteWarning, safe_cassette_name

from ._helpers import cassette_of, interaction

NORMALIZED = MatchConfig()


def test_recorded_request_key_is_the_match_key() -> None:
    r = RecordedRequest("POST", "/p", (("a", "1"),), b'{"x": 1}')
    assert r.key(NORMALIZED) == interaction("POST", "/p", b'{"x":1}', query=[("a", "1")]).key
    assert r.key(MatchConfig(MatchMode.EXACT)) != r.key(NORMALIZED)


def test_response_content() -> None:
    assert RecordedResponse(200, body=b"abc").content == b"abc"
    stream = RecordedResponse(200, stream="sse", frames=((0.0, b"a"), (1.5, b"b")), body=b"x")
    assert stream.content == b"ab"


def test_line_layout_puts_the_key_first() -> None:
    i = interaction(query=[("alt", "sse")])
    line = i.to_line()
    assert line.startswith(b'{"key":"sha256:')
    assert line.endswith(b"}\n")
    assert line.count(b"\n") == 1
    obj = json.loads(line)
    assert list(obj) == [
        "key",
        "id",
        "ts",
        "provider",
        "endpoint",
        "request",
        "response",
        "meta",
    ]
    assert obj["request"] == {
        "method": "POST",
        "path": "/v1/chat/completions",
        "query": [["alt", "sse"]],
        "body": {"json": {"model": "m", "messages": []}},
    }
    assert obj["response"] == {
        "status": 200,
        "headers": [["content-type", "application/json"]],
        "body": {"json": {"ok": True}},
    }
    assert "headers" not in obj["request"]  # request headers are never stored


def test_line_without_query_or_body() -> None:
    obj = json.loads(interaction("GET", "/v1/models", b"", response_body=b"").to_line())
    assert obj["request"] == {"method": "GET", "path": "/v1/models", "body": None}
    assert obj["response"]["body"] is None


def _round_trip(i: Interaction) -> Interaction:
    line = i.to_line()
    back = Interaction.from_json(json.loads(line))
    assert back.to_line() == line
    return back


def test_stream_lines_round_trip() -> None:
    frames = ((0.0, b"data: 1\n\n"), (12.5, b"data: \xff\n\n"), (40.0, "data: é\n\n".encode()))
    i = interaction(stream="sse", frames=frames, end_ms=41.25)
    back = _round_trip(i)
    assert back == i
    obj = json.loads(i.to_line())
    assert obj["response"]["frames"][1] == [12.5, {"base64": "ZGF0YTog/woK"}]
    assert obj["response"]["frames"][2] == [40.0, "data: é\n\n"]
    assert obj["response"]["end"] == {"at": 41.25}
    assert "cut" not in obj["response"]


def test_cut_lines_round_trip() -> None:
    cut = StreamCut(33.0, "reset", "connection reset by peer")
    i = interaction(stream="chunks", frames=((1.0, b"[{"),), cut=cut)
    back = _round_trip(i)
    assert back.response.cut == cut
    obj = json.loads(i.to_line())
    assert obj["response"]["cut"] == {
        "at": 33.0,
        "error": "reset",
        "detail": "connection reset by peer",
    }
    assert "end" not in obj["response"]


def test_full_interaction_round_trip() -> None:
    i = Interaction(
        key=interaction().key,
        id="abc",
        request=RecordedRequest("POST", "/v1/chat/completions", (), b'{"model":"m","messages":[]}'),
        response=RecordedResponse(429, (("retry-after", "2"),), b"rate limited"),
        timestamp="2026-01-01T00:00:00.000Z",
        provider="openai",
        endpoint="POST /v1/chat/completions",
        meta={"ttfb_ms": 1.5, "tokens": {"in": 3}},
    )
    assert _round_trip(i) == i


def test_from_json_defaults() -> None:
    obj = {
        "key": interaction().key,
        "id": "x",
        "request": {"method": "GET", "path": "/"},
        "response": {"status": 204},
    }
    i = Interaction.from_json(obj)
    assert i.provider == "generic"
    assert i.endpoint == ""
    assert i.timestamp is None
    assert i.meta == {}
    assert i.request.query == ()
    assert i.request.body == b""
    assert i.response.headers == ()
    assert i.response.body == b""
    assert i.response.stream is None


GOOD: dict[str, Any] = json.loads(
    interaction(stream="sse", frames=((0.0, b"data: 1\n\n"),), end_ms=1.0).to_line()
)


def _with(path: str, value: Any) -> Any:
    obj = copy.deepcopy(GOOD)
    *parents, last = path.split(".")
    target = obj
    for p in parents:
        target = target[p]
    if value is _DELETE:
        del target[last]
    else:
        target[last] = value
    return obj


_DELETE = object()

BAD_LINES = [
    ("key", _DELETE, '"key" must be a string'),
    ("key", "sha1:abc", '"key" must be "sha256:" and 64 lowercase hex digits'),
    ("key", "sha256:" + "A" * 64, '"key" must be "sha256:" and 64 lowercase hex digits'),
    ("id", 5, '"id" must be a string'),
    ("request", [], '"request" must be an object'),
    ("request.query", {"a": "b"}, '"request.query" must be a list'),
    ("request.query", [["a", 1]], '"request.query" must be a list'),
    ("request.query", [["a"]], '"request.query" must be a list'),
    ("request.method", None, '"request.method" must be a string'),
    ("request.path", 1, '"request.path" must be a string'),
    ("request.body", "raw", '"request.body": a body must be an object or null'),
    ("response", None, '"response" must be an object'),
    ("response.status", "200", '"response.status" must be an integer from 100 to 999'),
    ("response.status", True, '"response.status" must be an integer'),
    ("response.status", 99, '"response.status" must be an integer'),
    ("response.status", 1000, '"response.status" must be an integer'),
    ("response.headers", {"a": "b"}, '"response.headers" must be a list'),
    (
        "response.stream",
        "ws",
        '"response.stream" must be "sse", "chunks", "grpc", "grpc-session" or "websocket", '
        "not 'ws'",
    ),
    ("response.frames", {}, '"response.frames" must be a list'),
    ("response.frames", [[0]], '"response.frames[0]" must be an [offset_ms, data] pair'),
    ("response.frames", ["x"], '"response.frames[0]" must be an [offset_ms, data] pair'),
    ("response.frames", [[-1, "x"]], '"response.frames[0][0]" must be a number'),
    ("response.frames", [[True, "x"]], '"response.frames[0][0]" must be a number'),
    ("response.frames", [["1", "x"]], '"response.frames[0][0]" must be a number'),
    ("response.frames", [[float("nan"), "x"]], '"response.frames[0][0]" must be a number'),
    ("response.frames", [[5, "x"], [4, "y"]], '"response.frames[1]" goes back in time'),
    ("response.frames", [[1, {"b64": "x"}]], '"response.frames[0][1]": a body needs'),
    ("response.frames", [[1, 7]], '"response.frames[0][1]": a body must be an object or null'),
    ("response.end", _DELETE, '"response.end" must be an object'),
    ("response.end", {"at": -0.5}, '"response.end.at" must be a number'),
    ("response.end", {"at": float("inf")}, '"response.end.at" must be a finite number'),
    ("response.end", {"at": 10**400}, '"response.end.at" must be a finite number'),
    ("ts", 17, '"ts" must be a string or null'),
    ("meta", [], '"meta" must be an object'),
]


@pytest.mark.parametrize(("path", "value", "message"), BAD_LINES, ids=[b[2] for b in BAD_LINES])
def test_from_json_says_what_is_wrong(path: str, value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=_re(message)):
        Interaction.from_json(_with(path, value))


def _re(text: str) -> str:
    import re

    return re.escape(text)


def test_from_json_bad_cut_and_body_response() -> None:
    obj = _with("response.cut", "reset")
    with pytest.raises(ValueError, match=_re('"response.cut" must be an object')):
        Interaction.from_json(obj)
    obj = _with("response.cut", {"at": 1, "error": 5})
    with pytest.raises(ValueError, match=_re('"response.cut.error" must be a string')):
        Interaction.from_json(obj)
    obj = _with("response.cut", {"at": "soon", "error": "reset"})
    with pytest.raises(ValueError, match=_re('"response.cut.at" must be a number')):
        Interaction.from_json(obj)
    with pytest.raises(ValueError, match=_re("not an interaction (a JSON array, not an object)")):
        Interaction.from_json([1])
    plain = json.loads(interaction().to_line())
    plain["response"]["body"] = {"base64": "@@"}
    with pytest.raises(ValueError, match=_re('"response.body": bad base64 body')):
        Interaction.from_json(plain)


def test_cut_detail_defaults_and_frames_may_repeat_offsets() -> None:
    obj = _with("response.cut", {"at": 2, "error": "timeout"})
    obj["response"]["frames"] = [[1, "a"], [1, "b"], [2, {"base64": "Yw=="}]]
    i = Interaction.from_json(obj)
    assert i.response.cut == StreamCut(2.0, "timeout", "")
    assert i.response.frames == ((1.0, b"a"), (1.0, b"b"), (2.0, b"c"))


def test_format_timestamp() -> None:
    assert format_timestamp(None) is None
    assert format_timestamp(0) == "1970-01-01T00:00:00.000Z"
    assert format_timestamp(1_700_000_000.1234) == "2023-11-14T22:13:20.123Z"


# -- _meta ---------------------------------------------------------------------


def test_meta_line() -> None:
    meta = CassetteMeta(
        match=MatchConfig(MatchMode.IGNORE_FIELDS, ("user",)),
        extra={"redact": {"pii": False}},
    )
    line = meta.to_line()
    assert line.endswith(b"\n")
    assert json.loads(line) == {
        "_meta": {
            "schema": SCHEMA_VERSION,
            "reel": __version__,
            "match": "ignore-fields",
            "ignore_fields": ["user"],
            "redact": {"pii": False},
        }
    }
    back = CassetteMeta.from_json(json.loads(line), "c")
    assert back == meta
    assert back.extra == {"redact": {"pii": False}}
    assert "ignore_fields" not in json.loads(CassetteMeta().to_line())["_meta"]


def test_meta_defaults() -> None:
    meta = CassetteMeta.from_json({"_meta": {}}, "c")
    assert meta.schema == SCHEMA_VERSION
    assert meta.match == MatchConfig()
    assert meta.writer == "unknown"
    assert meta.extra == {}


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ([], '"_meta" must be an object'),
        ({"_meta": 1}, '"_meta" must be an object'),
        ({"_meta": {"schema": "1"}}, '"_meta.schema" must be a positive integer'),
        ({"_meta": {"schema": True}}, '"_meta.schema" must be a positive integer'),
        ({"_meta": {"schema": 0}}, '"_meta.schema" must be a positive integer'),
        ({"_meta": {"match": "fuzzyish"}}, 'bad "_meta" match settings'),
        ({"_meta": {"ignore_fields": "user"}}, '"_meta.ignore_fields" must be a list'),
        ({"_meta": {"ignore_fields": [1]}}, '"_meta.ignore_fields" must be a list'),
        ({"_meta": {"ignore_fields": ["user"]}}, "need match mode ignore-fields"),
        (
            {"_meta": {"match": "ignore-fields", "ignore_fields": ["a..b"]}},
            "bad JSON path",
        ),
    ],
)
def test_bad_meta(obj: Any, message: str) -> None:
    with pytest.raises(CassetteError, match=_re(message)) as info:
        CassetteMeta.from_json(obj, "c.jsonl")
    assert info.value.line == 1
    assert info.value.name == "c.jsonl"
    assert not isinstance(info.value, SchemaVersionError)


def test_newer_schema_is_refused_with_an_upgrade_hint() -> None:
    data = b'{"_meta":{"schema":4,"reel":"9.0"}}\n' + interaction().to_line()
    for strict in (True, False):
        with pytest.raises(SchemaVersionError) as info:
            Cassette.loads(data, name="new.jsonl", strict=strict)
        err = info.value
        assert isinstance(err, CassetteError)
        assert err.line == 1
        assert "cassette schema 4 (written by Reel 9.0) is newer" in err.reason
        assert "pip install -U 'reel-llm>=9.0'" in err.reason
        assert str(err).startswith("new.jsonl:1: ")


def test_older_schema_is_read() -> None:
    c = Cassette.loads(b'{"_meta":{"schema":1}}\n' + interaction().to_line())
    assert len(c) == 1
    assert c.meta.schema == 1


# -- loading -------------------------------------------------------------------


def test_loads_empty() -> None:
    for data in (b"", b"\n", b"\n\n  \n"):
        c = Cassette.loads(data)
        assert len(c) == 0
        assert c.meta == CassetteMeta()
        assert c.interactions() == []


def test_loads_indexes_without_parsing() -> None:
    a = interaction(id="a")
    # a body that is not valid as stored: the fast path does not see it ...
    broken = a.to_line().replace(b'"body":{"json":{"ok":true}}', b'"body":{"nope":1}')
    c = Cassette.loads(broken, name="lazy.jsonl")
    assert len(c) == 1
    assert c.count(a.key, NORMALIZED) == 1
    # ... until the line is used
    with pytest.raises(CassetteError) as info:
        c.play(a.key, NORMALIZED)
    assert info.value.line == 1
    assert "response.body" in info.value.reason
    with pytest.raises(CassetteError):
        c.validate()


def test_loads_lines_that_need_the_slow_path() -> None:
    a = interaction(id="a", body=b'{"n":1}')
    b = interaction(id="b", body=b'{"n":2}')
    reordered = json.dumps({"id": "b", **json.loads(b.to_line())}).encode()  # key not first
    spaced = a.to_line()[:-1] + b"  "  # does not end with "}"
    crlf = interaction(id="c", body=b'{"n":3}').to_line()[:-1] + b"\r\n"
    c = Cassette.loads(spaced + b"\n" + reordered + b"\n" + crlf)
    assert [i.id for i in c] == ["a", "b", "c"]
    assert c.play(b.key, NORMALIZED) is not None


def test_loads_meta_and_lines() -> None:
    i = interaction()
    meta = CassetteMeta(match=MatchConfig(MatchMode.EXACT))
    exact_key = i.request.key(MatchConfig(MatchMode.EXACT))
    line = Interaction(exact_key, "x", i.request, i.response).to_line()
    c = Cassette.loads(meta.to_line() + line, name="m.jsonl")
    assert c.meta == meta
    assert c.name == "m.jsonl"
    assert c.count(exact_key, meta.match) == 1


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (b"not json", "not a JSON line"),
        (b"[" * 100_000, "not a JSON line"),
        (b'{"_meta":{}}', "a _meta line must be the first line"),
        (b'{"key":"sha256:zz"}', '"key" must be "sha256:" and 64 lowercase hex digits'),
        (b"42", "not an interaction (a JSON number, not an object)"),
    ],
)
def test_strict_load_names_the_bad_line(bad: bytes, reason: str) -> None:
    good = interaction().to_line()
    data = good + bad + b"\n" + good
    with pytest.raises(CassetteError) as info:
        Cassette.loads(data, name="bad.jsonl")
    assert info.value.line == 2
    assert info.value.name == "bad.jsonl"
    assert reason in info.value.reason
    assert "torn" not in info.value.reason
    assert str(info.value).startswith("bad.jsonl:2: ")


def test_bad_meta_json_is_line_one() -> None:
    with pytest.raises(CassetteError) as info:
        Cassette.loads(b'{"_meta": oops}\n', name="m")
    assert info.value.line == 1
    assert "the _meta line is not JSON" in info.value.reason


def test_torn_last_line_is_named_as_such() -> None:
    good = interaction().to_line()
    torn = good[: len(good) // 2]
    with pytest.raises(CassetteError, match="a torn last line: a write cut short") as info:
        Cassette.loads(good + torn, name="t")
    assert info.value.line == 2


def test_tolerant_load_skips_bad_lines_with_warnings() -> None:
    a, b = interaction(id="a", body=b'{"n":1}'), interaction(id="b", body=b'{"n":2}')
    data = a.to_line() + b"garbage\n" + b.to_line() + a.to_line()[:30]
    with pytest.warns(CassetteWarning) as record:
        c = Cassette.loads(data, name="tol.jsonl", strict=False)
    messages = [str(w.message) for w in record]
    assert len(messages) == 2
    assert messages[0].startswith("tol.jsonl:2: skipped: not a JSON line")
    assert messages[1].startswith("tol.jsonl:4: skipped:")
    assert "torn last line" in messages[1]
    assert [i.id for i in c] == ["a", "b"]


def _broken(i: Interaction) -> bytes:
    """``i``'s line (no newline), with a body that fails only once parsed:
    loading indexes such a line of Reel's without a complaint."""
    line = i.to_line()[:-1]
    assert line.count(b'"body":{"json":{"ok":true}}') == 1
    return line.replace(b'"body":{"json":{"ok":true}}', b'"body":{"nope":1}')


def test_lines_between_runs_of_reel_lines_keep_every_number() -> None:
    a, b, c = (interaction(id=x, body=b'{"n":"%s"}' % x.encode()) for x in ("a", "b", "c"))
    reordered = json.dumps({"id": "b", **json.loads(b.to_line())}).encode()  # key not first
    data = b"\n".join(
        [
            b"\xef\xbb\xbf" + CassetteMeta().to_line()[:-1],  # 1
            _broken(a),  # 2: Reel's
            b"",  # 3
            _broken(c),  # 4: Reel's, then
            reordered,  # 5: a line Reel did not write
            _broken(c),  # 6: Reel's, then
            b'{"key":"sha256:' + b"A" * 64 + b'"}',  # 7: one that only starts like Reel's
            _broken(a),  # 8: Reel's, the last line, with no newline
        ]
    )
    with pytest.warns(CassetteWarning) as record:
        cassette = Cassette.loads(data, name="runs.jsonl", strict=False)
    assert [str(w.message) for w in record] == [
        'runs.jsonl:7: skipped: "key" must be "sha256:" and 64 lowercase hex digits'
    ]
    kept = [_broken(a), _broken(c), reordered, _broken(c), _broken(a)]
    assert cassette.dumps() == CassetteMeta().to_line() + b"".join(k + b"\n" for k in kept)
    assert [i.id for i in cassette.same_endpoint("POST", "/v1/chat/completions")] == ["b"]
    assert cassette.count(a.key, NORMALIZED) == cassette.count(c.key, NORMALIZED) == 2
    played = cassette.play(b.key, NORMALIZED)
    assert played is not None
    assert played.id == "b"
    # Reel's lines are parsed once used, and name their own lines
    numbers = []
    for key in (a.key, a.key, c.key, c.key):
        with pytest.raises(CassetteError) as info:
            cassette.play(key, NORMALIZED)
        numbers.append(info.value.line)
    assert numbers == [2, 8, 4, 6]
    with pytest.raises(CassetteError) as info:
        Cassette.loads(data, name="runs.jsonl")
    assert info.value.line == 7


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        # shorter than a key, with a line of Reel's after it
        (b'{"key":"sha256:}\n', "not a JSON line"),
        # its key cut short by the end of the file
        (b'{"key":"sha256:0f}', "a torn last line"),
        # a key one digit short
        (b'{"key":"sha256:' + b"0" * 63 + b'"}\n', '"key" must be "sha256:" and 64'),
    ],
)
def test_a_line_that_only_starts_like_reel_s_is_read_alone(bad: bytes, reason: str) -> None:
    good = interaction().to_line()
    data = good + bad + (good if bad.endswith(b"\n") else b"")
    with pytest.raises(CassetteError, match=_re(reason)) as info:
        Cassette.loads(data, name="x.jsonl")
    assert info.value.line == 2
    with pytest.warns(CassetteWarning) as record:
        cassette = Cassette.loads(data, name="x.jsonl", strict=False)
    [message] = [str(w.message) for w in record]
    assert message.startswith("x.jsonl:2: skipped: ")
    assert reason in message
    assert len(cassette) == data.count(good)


def test_crlf_line_ends_are_read() -> None:
    exact = MatchConfig(MatchMode.EXACT)
    a, b = interaction(id="a", body=b'{"n":1}'), interaction(id="b", body=b'{"n":2}')
    lines = [Interaction(i.request.key(exact), i.id, i.request, i.response) for i in (a, b)]
    data = CassetteMeta(match=exact).to_line() + b"".join(i.to_line() for i in lines)
    cassette = Cassette.loads(data.replace(b"\n", b"\r\n"))
    assert cassette.meta.match == exact
    assert [i.id for i in cassette] == ["a", "b"]
    assert cassette.count(lines[1].key, exact) == 1


# -- playing -------------------------------------------------------------------


def test_play_serves_recordings_in_order_then_repeats() -> None:
    first = interaction(id="first", response_body=b"1")
    second = interaction(id="second", response_body=b"2")
    other = interaction(id="other", body=b'{"other":1}')
    c = cassette_of(first, other, second)
    key = first.key
    assert c.count(key, NORMALIZED) == 2
    assert c.plays(key, NORMALIZED) == 0
    got = [c.play(key, NORMALIZED) for _ in range(4)]
    assert [g.id if g else None for g in got] == ["first", "second", "second", "second"]
    assert c.plays(key, NORMALIZED) == 4
    assert c.play("sha256:" + "0" * 64, NORMALIZED) is None


def test_play_without_repeat_runs_out() -> None:
    c = cassette_of(interaction(id="a"), interaction(id="b"))
    key = interaction().key
    ids = [c.play(key, NORMALIZED, repeat=False) for _ in range(3)]
    assert [i.id if i else None for i in ids] == ["a", "b", None]
    assert c.plays(key, NORMALIZED) == 2


def test_other_match_settings_index_lazily() -> None:
    a = interaction(id="a", body=b'{"model":"m","user":"u1"}')
    c = cassette_of(a)
    cfg = MatchConfig(MatchMode.IGNORE_FIELDS, ("user",))
    key = RecordedRequest("POST", a.request.path, (), b'{"model": "m", "user": "u9"}').key(cfg)
    assert c.count(key, cfg) == 1
    played = c.play(key, cfg)
    assert played is not None
    assert played.id == "a"
    # plays are counted per match settings
    assert c.plays(key, cfg) == 1
    assert c.plays(a.key, NORMALIZED) == 0


def test_add_counts_as_played_and_updates_every_index() -> None:
    c = Cassette("mem")
    exact = MatchConfig(MatchMode.EXACT)
    c.count("sha256:" + "1" * 64, exact)  # builds the exact index (empty)
    a = interaction(id="a")
    c.add(a)
    assert len(c) == 1
    assert c.count(a.key, NORMALIZED) == 1
    assert c.plays(a.key, NORMALIZED) == 1
    exact_key = a.request.key(exact)
    assert c.count(exact_key, exact) == 1
    assert c.plays(exact_key, exact) == 1
    # already served once: the next play repeats it (or is none without repeat)
    assert c.play(a.key, NORMALIZED, repeat=False) is None
    b = interaction(id="b")
    c.add(b, played=False)
    assert c.plays(a.key, NORMALIZED) == 1
    played = c.play(a.key, NORMALIZED, repeat=False)
    assert played is not None
    assert played.id == "b"


def test_dumps_loads_round_trip() -> None:
    c = Cassette("x", CassetteMeta(extra={"note": "hi"}))
    items = [
        interaction(id="a"),
        interaction(id="b", stream="sse", frames=((0.0, b"data: x\n\n"),), end_ms=3.0),
        interaction(
            id="c", stream="chunks", frames=((0.0, b"\x00\xff"),), cut=StreamCut(1, "closed")
        ),
    ]
    for i in items:
        c.add(i)
    data = c.dumps()
    assert data.startswith(b'{"_meta":')
    assert data.endswith(b"\n")
    back = Cassette.loads(data)
    assert back.interactions() == items
    assert back.meta == c.meta
    assert back.dumps() == data


def test_clear_forgets_everything() -> None:
    c = cassette_of(interaction())
    key = interaction().key
    c.play(key, NORMALIZED)
    c.count(key, MatchConfig(MatchMode.EXACT))
    c.clear()
    assert len(c) == 0
    assert c.count(key, NORMALIZED) == 0
    assert c.plays(key, NORMALIZED) == 0
    assert c.dumps() == c.meta.to_line()


def test_iteration_parses_each_line_once() -> None:
    c = cassette_of(interaction(id="a"), interaction(id="b", body=b"{}"))
    first = list(c)
    assert [i.id for i in first] == ["a", "b"]
    assert all(x is y for x, y in zip(first, c, strict=True))
    c.validate()


# -- cassette names ------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "safe"),
    [
        ("chat", "chat.jsonl"),
        ("openai/chat-basic", "openai/chat-basic.jsonl"),
        ("a/b/c.jsonl", "a/b/c.jsonl"),
        ("v1.2/x_y", "v1.2/x_y.jsonl"),
        ("x.json", "x.json"),
        ("a" * 200, "a" * 200 + ".jsonl"),
    ],
)
def test_safe_cassette_name(name: str, safe: str) -> None:
    assert safe_cassette_name(name) == safe


@pytest.mark.parametrize(
    "name",
    ["", "/etc/passwd", "../x", "a/../b", ".hidden", "a//b", "a/", "a\\b", "a b", "a" * 201, "é"],
)
def test_unsafe_cassette_names_are_refused(name: str) -> None:
    with pytest.raises(RemoteProtocolError, match="bad cassette name") as info:
        safe_cassette_name(name)
    assert info.value.status == 400


@pytest.mark.parametrize(
    "first",
    [
        b'{ "_meta": {"schema": 1, "match": "exact"}}',
        b'{"_meta" : {"schema": 1, "match": "exact"}}\r',
        b'\xef\xbb\xbf{"_meta":{"schema":1,"match":"exact"}}',
        b"  {\n",  # not a _meta line at all: an ordinary bad line
    ],
)
def test_a_hand_edited_meta_line_is_still_the_meta_line(first: bytes) -> None:
    i = interaction(config=MatchConfig(MatchMode.EXACT))
    data = first + b"\n" + i.to_line()
    if b"_meta" not in first:
        with pytest.raises(CassetteError, match="not a JSON line") as info:
            Cassette.loads(data)
        assert info.value.line == 1
        return
    c = Cassette.loads(data)
    assert c.meta.match == MatchConfig(MatchMode.EXACT)
    assert len(c) == 1
    assert c.play(i.key, c.meta.match) is not None


def test_a_hand_edited_newer_schema_is_refused() -> None:
    with pytest.raises(SchemaVersionError):
        Cassette.loads(b'{ "_meta": {"schema": 99}}\n')


@pytest.mark.parametrize(
    "redact",
    [b'"x"', b'{"patterns": {"k": "("}}', b'{"fields": "token"}'],
)
def test_bad_redact_settings_are_refused_at_load(redact: bytes) -> None:
    data = b'{"_meta":{"schema":1,"redact":' + redact + b"}}\n"
    with pytest.raises(CassetteError, match=r'bad "_meta" redact settings') as info:
        Cassette.loads(data, name="c.jsonl")
    assert info.value.line == 1


def test_a_bad_line_is_left_out_of_an_index_for_other_settings() -> None:
    good = Interaction(
        "sha256:" + "1" * 64, "good", RecordedRequest("POST", "/v1/x", (), b"{}"),
        RecordedResponse(200),
    )  # fmt: skip
    broken = b'{"key":"sha256:' + b"2" * 64 + b'","id":oops}\n'
    cassette = Cassette.loads(good.to_line() + broken)
    exact = MatchConfig(MatchMode.EXACT)
    assert cassette.count(good.request.key(exact), exact) == 1
    assert sum(cassette.count(key, exact) for key in cassette._index(exact)) == 1


def test_a_line_whose_key_is_given_twice_is_refused_when_used() -> None:
    """The index reads a line's first "key", JSON parsing keeps its last: a
    hand-edited line holding two is named, not served under either key."""
    one = interaction()
    doubled = one.to_line()[:-2] + b',"key":"sha256:' + b"b" * 64 + b'"}\n'
    cassette = Cassette.loads(doubled, name="two-keys.jsonl")
    assert cassette.count(one.key, cassette.keying) == 1
    with pytest.raises(CassetteError, match=r"two-keys.jsonl:1: key changed while parsing"):
        cassette.play(one.key, cassette.keying)


# -- what a cassette that is not one, or not UTF-8, says ------------------------------


@pytest.mark.parametrize(
    ("writer", "wanted"),
    [
        ("9.0", "upgrade with `pip install -U 'reel-llm>=9.0'`"),
        ("0.10.0rc1", "upgrade with `pip install -U 'reel-llm>=0.10.0rc1'`"),
        # the same version as ours (a hand-edited line): no pin that cannot help
        (__version__, "it needs a Reel that reads schema 4"),
        ("0.0.9", "it needs a Reel that reads schema 4"),
        ("unknown", "it needs a Reel that reads schema 4"),
        ("1.0; rm -rf /", "it needs a Reel that reads schema 4"),
    ],
)
def test_newer_schema_suggests_only_an_upgrade_that_can_help(writer: str, wanted: str) -> None:
    data = json.dumps({"_meta": {"schema": 4, "reel": writer}}).encode() + b"\n"
    with pytest.raises(SchemaVersionError) as info:
        Cassette.loads(data, name="new.jsonl")
    reason = info.value.reason
    assert wanted in reason
    if "reel-llm>=" not in wanted:
        assert ">=" not in reason
        assert "`pip install -U reel-llm`" in reason  # the newest may read it


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"_meta":{}}\n'.decode().encode("utf-16"), "this file is UTF-16, not UTF-8"),
        (b'{"_meta":{}}\n'.decode().encode("utf-16-le"), "this file is UTF-16, not UTF-8"),
        (b'{"_meta":{}}\n'.decode().encode("utf-16-be"), "this file is UTF-16, not UTF-8"),
        (b"\xfe\xff\x00{", "this file is UTF-16, not UTF-8"),
        (b'{"_meta":{}}\n'.decode().encode("utf-32"), "this file is UTF-32, not UTF-8"),
        (b"\x1f\x8b\x08\x00\x00\x00\x00\x00", "this file is gzip-compressed"),
        (b"\x00\x01\x02\x03binary", "NUL bytes"),
    ],
)
def test_a_file_not_in_utf8_is_named_as_such(data: bytes, reason: str) -> None:
    for strict in (True, False):
        with pytest.raises(CassetteError) as info:
            Cassette.loads(data, name="enc.jsonl", strict=strict)
        assert reason in info.value.reason
        assert info.value.line is None
        assert "UTF-8" in info.value.reason


def test_a_line_not_in_utf8_names_the_byte() -> None:
    good = interaction(body=b'{"q":"caf\xc3\xa9"}').to_line()
    latin1 = good.replace(b"caf\xc3\xa9", b"caf\xe9")
    assert latin1 != good
    # indexed by its key (fast path), parsed when used
    c = Cassette.loads(good + latin1, name="l1.jsonl")
    with pytest.raises(CassetteError) as info:
        c.validate()
    at = latin1.index(b"\xe9") + 1
    assert info.value.line == 2
    assert info.value.reason == (
        f"not UTF-8 at byte {at} of the line (0xe9): re-save the file as UTF-8"
    )
    # parsed while loading (slow path)
    with pytest.raises(CassetteError) as info:
        Cassette.loads(good + b"[" + latin1, name="l1.jsonl")
    assert info.value.reason.startswith("not UTF-8 at byte ")


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b'{"a":1}', 'not an interaction (no "request" or "response"): is this a Reel cassette?'),
        (b"42", "not an interaction (a JSON number, not an object): is this a Reel cassette?"),
        (b"[1]", "not an interaction (a JSON array, not an object): is this a Reel cassette?"),
        (b'"s"', "not an interaction (a JSON string, not an object): is this a Reel cassette?"),
        (b"null", "not an interaction (a JSON null, not an object): is this a Reel cassette?"),
        (b"true", "not an interaction (a JSON boolean, not an object): is this a Reel cassette?"),
    ],
)
def test_json_that_is_not_an_interaction(line: bytes, reason: str) -> None:
    with pytest.raises(CassetteError) as info:
        Cassette.loads(interaction().to_line() + line, name="j.jsonl")
    assert info.value.reason == reason


@pytest.mark.parametrize(
    "data",
    [
        b"Meeting notes\n- buy milk\n",
        b'{"a":1}\n{"b":2}\n',
        b"just one line without a newline",
        b"[]\n",
    ],
)
def test_a_file_with_no_interaction_and_no_meta_is_not_a_cassette(data: bytes) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # refused, not a warning per line
        with pytest.raises(CassetteError) as info:
            Cassette.loads(data, name="notes.txt", strict=False)
    assert info.value.line is None
    assert info.value.reason.startswith("not a Reel cassette: no line is an interaction (line 1: ")
    assert "is this a Reel cassette?" not in info.value.reason.split("(line 1: ")[0]


def test_a_cassette_with_a_meta_line_and_only_bad_lines_loads_tolerantly() -> None:
    data = CassetteMeta().to_line() + b'{"key":"sha256:torn'
    with pytest.warns(CassetteWarning):
        c = Cassette.loads(data, name="torn.jsonl", strict=False)
    assert len(c) == 0
    # and a good line among junk is a cassette with bad lines
    with pytest.warns(CassetteWarning):
        c = Cassette.loads(b"junk\n" + interaction().to_line(), name="x.jsonl", strict=False)
    assert len(c) == 1


def test_a_file_whose_only_line_is_a_torn_line_of_reel_s_is_a_cassette() -> None:
    torn = interaction().to_line()[:120]
    with pytest.warns(CassetteWarning, match="torn last line"):
        c = Cassette.loads(torn, name="t.jsonl", strict=False)
    assert len(c) == 0
