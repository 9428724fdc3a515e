"""What ``reel view``'s page shows, without a browser: the rows and details
(:mod:`reel_bindings.view._data`, pure functions of the interactions) and
the page they are embedded in (:mod:`reel_bindings.view._page`)."""

from __future__ import annotations

import base64
import dataclasses
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from reel_bindings.cli import main
from reel_bindings.view import Source, miss_view, render_page, view_data
from reel_bindings.view._data import MAX_BINARY, MAX_WHOLE_ANSWER, body_value, detail, row
from reel_bindings.view._page import embed_json, pack_details, unpack
from reel_core import Cassette, Interaction, RecordedRequest, RecordedResponse, StreamCut
from reel_core.tools import WebSocketLog

from .helpers import DEMO, anthropic_stream, chat_body, interaction, openai_stream


def demo_source() -> Source:
    interactions = list(Cassette.loads(DEMO.read_bytes()).interactions())
    return Source("demo.jsonl", [(n + 2, ix) for n, ix in enumerate(interactions)])


def stream(frames: list[bytes], *, step: float = 10.0, cut: StreamCut | None = None) -> Any:
    timed = tuple((i * step, f) for i, f in enumerate(frames))
    end = 0.0 if cut is not None else len(frames) * step
    return RecordedResponse(
        200,
        headers=(("content-type", "text/event-stream"),),
        stream="sse",
        frames=timed,
        end_ms=end,
        cut=cut,
    )


# -- bodies -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", {"empty": True}),
        (b'{"a": [1, 2.5, null]}', {"json": {"a": [1, 2.5, None]}}),
        (b"[1]", {"json": [1]}),
        (b'"just a string"', {"json": "just a string"}),
        (b"plain text \xc3\xa9", {"text": "plain text \u00e9"}),
        # NaN is no JSON a browser parses: the body is shown as its text
        (b'{"x": NaN}', {"text": '{"x": NaN}'}),
        (b'{"x": -Infinity}', {"text": '{"x": -Infinity}'}),
        (b"[" * 100_000 + b"]" * 100_000, {"text": "[" * 100_000 + "]" * 100_000}),
    ],
    ids=["empty", "object", "array", "scalar", "text", "nan", "infinity", "deep"],
)
def test_a_body_is_json_text_or_empty(data: bytes, expected: dict[str, Any]) -> None:
    assert body_value(data) == expected


def test_a_binary_body_is_counted_and_its_head_kept() -> None:
    data = bytes(range(256)) * 40
    value = body_value(data)
    assert value["binary"] == len(data)
    assert base64.b64decode(value["base64"]) == data[:MAX_BINARY]
    assert "json" not in value
    assert "text" not in value


# -- rows ---------------------------------------------------------------------


def test_rows_carry_inspects_figures(capsys: pytest.CaptureFixture[str]) -> None:
    listing, details = view_data([demo_source()])
    assert main(["inspect", str(DEMO), "--json"]) == 0
    inspected = json.loads(capsys.readouterr().out)["interactions"]
    assert len(listing["rows"]) == len(details) == len(inspected) == 7
    for r, ins in zip(listing["rows"], inspected, strict=True):
        assert r["id"] == ins["id"]
        assert r["line"] == ins["line"]
        assert r["model"] == ins["model"]
        assert r["status"] == ins["status"]
        assert r["stream"] == ins["stream"]
        assert r["frames"] == ins["frames"]
        assert (r["tokens_in"], r["tokens_out"]) == (ins["tokens_in"], ins["tokens_out"])
        assert r["cost_usd"] == ins["cost_usd"]  # not rounded away: $0.0000048 stays
        assert r["ttfb_ms"] == ins["ttfb_ms"]
        assert r["duration_ms"] == ins["total_ms"]
    assert listing["cassettes"] == [{"name": "demo.jsonl", "interactions": 7, "skipped": []}]
    assert [r["i"] for r in listing["rows"]] == list(range(7))


def test_an_unknown_cost_stays_unknown_and_says_why() -> None:
    response = stream(openai_stream(["Hi"]), step=5.0)
    # usage in the stream: priced
    assert row(interaction(response=response), index=0, cassette=0, line=2)["cost_usd"]
    bare = stream(openai_stream(["Hi"])[:1])  # no usage chunk
    r = row(interaction(response=bare), index=0, cassette=0, line=2)
    assert r["cost_usd"] is None
    assert "no token usage in the stream" in r["cost_unknown"]


def test_a_line_without_timing_meta_takes_the_streams_own_length() -> None:
    cut = StreamCut(25.0, "reset", "peer reset")
    r = row(
        interaction(response=stream(openai_stream(["a", "b"]), cut=cut)),
        index=3,
        cassette=1,
        line=9,
    )
    assert (r["i"], r["cassette"], r["line"]) == (3, 1, 9)
    assert r["duration_ms"] == 25.0
    assert r["ttfb_ms"] is None
    assert r["cut"] == "reset"
    clean = row(interaction(response=stream([b"data: 1\n\n"] * 3)), index=0, cassette=0, line=2)
    assert clean["duration_ms"] == 30.0
    assert clean["cut"] is None
    whole = row(interaction(), index=0, cassette=0, line=2)
    assert whole["duration_ms"] is None
    assert whole["frames"] is None


def test_infinite_or_nan_numbers_in_meta_become_null() -> None:
    ix = interaction(meta={"ttfb_ms": float("inf"), "cost_usd": float("nan"), "x": [float("nan")]})
    r = row(ix, index=0, cassette=0, line=2)
    d = detail(ix)
    assert r["ttfb_ms"] is None
    assert d["meta"] == {"ttfb_ms": None, "cost_usd": None, "x": [None]}
    embed_json([r, d])  # allow_nan=False: raises if any slipped through


# -- details ------------------------------------------------------------------


def test_a_streams_detail_has_every_frame_in_order_with_its_text() -> None:
    frames = openai_stream(["Hel", "lo", "!"])
    ix = interaction(
        RecordedRequest("POST", "/v1/chat/completions", body=chat_body(stream=True)),
        stream(frames, step=12.5),
    )
    d = detail(ix)
    resp = d["response"]
    assert resp["stream"] == "sse"
    assert "body" not in resp
    assert [f[0] for f in resp["frames"]] == [0.0, 12.5, 25.0, 37.5, 50.0]
    assert [f[1] for f in resp["frames"]] == [len(f) for f in frames]
    assert [f[2] for f in resp["frames"][:3]] == ["delta"] * 3
    assert [f[4] for f in resp["frames"][:3]] == ["Hel", "lo", "!"]
    assert resp["frames"][-1][4] == "[DONE]"
    assert resp["end_ms"] == 62.5
    assert resp["cut"] is None
    assert d["text"] == "Hello!"
    assert d["tool_calls"] == []
    assert d["request"]["body"] == {"json": json.loads(chat_body(stream=True))}
    assert d["usage"]["tokens_in"] == 5
    assert d["usage"]["tokens_out"] == 3


def test_a_cut_stream_says_where_and_why() -> None:
    cut = StreamCut(17.25, "reset", "peer reset")
    d = detail(interaction(response=stream(openai_stream(["a"]), cut=cut)))
    assert d["response"]["cut"] == {"at_ms": 17.25, "error": "reset", "detail": "peer reset"}
    assert d["response"]["end_ms"] is None


def test_tool_calls_and_their_arguments() -> None:
    ix = interaction(
        RecordedRequest("POST", "/v1/messages", body=b'{"model":"claude-sonnet-4-5"}'),
        stream(anthropic_stream("Let me look.", tool=("get_weather", '{"city": "Paris"}'))),
        provider="anthropic",
    )
    d = detail(ix)
    assert d["text"] == "Let me look."
    assert d["tool_calls"] == [{"name": "get_weather", "arguments": '{"city": "Paris"}'}]
    assert d["usage"]["model"] == "claude-sonnet-4-5"


def test_a_whole_body_headers_query_and_redaction_markers_are_kept_as_stored() -> None:
    request = RecordedRequest(
        "GET",
        "/v1/models",
        query=(("limit", "2"), ("key", "[REDACTED:google-api-key]")),
        encoding="gzip",
    )
    response = RecordedResponse(
        429,
        headers=(("retry-after", "3"), ("x-request-id", "req_1")),
        body=b'{"error":{"message":"slow down [REDACTED:email]"}}',
    )
    d = detail(interaction(request, response))
    assert d["request"]["query"] == [["limit", "2"], ["key", "[REDACTED:google-api-key]"]]
    assert d["request"]["encoding"] == "gzip"
    assert "content_type" not in d["request"]
    assert d["request"]["body"] == {"empty": True}
    assert d["response"]["reason"] == "Too Many Requests"
    assert d["response"]["headers"] == [["retry-after", "3"], ["x-request-id", "req_1"]]
    assert d["response"]["body"]["json"]["error"]["message"] == "slow down [REDACTED:email]"
    assert d["text"] is None  # nothing recognised: no answer, not an empty one
    assert detail(interaction(response=RecordedResponse(599)))["response"]["reason"] == ""


# -- miss reports ---------------------------------------------------------------


def report(closest: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "error": {
            "type": "reel_miss",
            "message": "Reel miss: ...",
            "cassette": "demo.jsonl",
            "mode": "replay",
            "match": "normalized",
            "key": "sha256:00",
            "request": {"method": "POST", "path": "/v1/chat/completions"},
            "reason": "no recording matches",
            "closest": closest,
        }
    }


def test_a_miss_report_points_at_its_closest_recording_on_the_page() -> None:
    closest = {
        "id": "e5172d3a877d",
        "method": "POST",
        "path": "/v1/responses",
        "similarity": 0.9,
        "diff": [
            {"path": "input", "kind": "changed", "recorded": "a", "received": "b"},
            {"path": "temperature", "kind": "added", "received": 0.2},
        ],
        "more_differences": 3,
    }
    two = [demo_source(), demo_source()]
    miss = miss_view(report(closest), two)
    assert miss["closest_row"] == 2  # the first cassette's third interaction
    assert miss["method"] == "POST"
    assert miss["reason"] == "no recording matches"
    assert miss["closest"]["more_differences"] == 3
    assert miss["diff"][1] == {
        "path": "temperature",
        "kind": "added",
        "recorded": None,
        "received": 0.2,
        "has_recorded": False,
        "has_received": True,
    }
    assert miss_view(report({**closest, "id": "nope"}), two)["closest_row"] is None
    empty = miss_view(report(None), two)
    assert empty["closest"] is None
    assert empty["diff"] == []
    assert empty["closest_row"] is None


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ([], "not a Reel miss report"),
        ({"error": {"type": "rate_limit"}}, "not a Reel miss report"),
        ({"error": {"type": "reel_miss", "closest": 3}}, '"error.closest" must be'),
        ({"error": {"type": "reel_miss", "closest": {"diff": [1]}}}, '"error.closest.diff"'),
        ({"error": {"type": "reel_miss", "closest": {"diff": {}}}}, '"error.closest.diff"'),
    ],
)
def test_json_that_is_no_miss_report_is_refused(value: Any, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        miss_view(value, [demo_source()])


# -- the page -------------------------------------------------------------------


class _Scripts(HTMLParser):
    """The page's elements: every script's type, id and text; links."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self._open: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._open = dict(attrs)
            self.scripts.append((self._open, ""))

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._open = None


def parse_page(page: str) -> _Scripts:
    parser = _Scripts()
    parser.feed(page)
    parser.close()
    return parser


def test_the_page_embeds_the_data_and_inlines_everything() -> None:
    source = demo_source()
    page = render_page([source], title="T <&>")
    parsed = parse_page(page)
    listing, details = view_data([source])
    data = [(a, t) for a, t in parsed.scripts if a.get("type") == "application/json"]
    assert data[0][0]["id"] == "reel-data"
    assert json.loads(data[0][1]) == {
        **listing,
        "title": "T <&>",
        "miss": None,
        "diff": None,
        "serve": None,
        "error": None,
    }
    assert len(data) == 1
    blocks = [(a, t) for a, t in parsed.scripts if a.get("type") == "application/octet-stream"]
    assert [a["id"] for a, _ in blocks] == ["reel-z-0"]
    assert unpack(blocks[0][1]) == details
    code = [t for a, t in parsed.scripts if a.get("type") is None]
    assert len(code) == 1
    assert "reel-data" in code[0]
    # nothing is fetched: no src, no href, no stylesheet link; a CSP forbids it anyway
    for tag, attrs in parsed.tags:
        assert "src" not in attrs, (tag, attrs)
        assert "href" not in attrs, (tag, attrs)
    assert "<title>T &lt;&amp;&gt;</title>" in page
    assert "default-src 'none'" in page
    assert not re.search(r"https?://(?!www\.w3\.org)", page.split("<script>")[-1])


@pytest.mark.parametrize(
    "text",
    ["</script><script>alert(1)</script>", "<!--<script>", "</SCRIPT >", "a\u2028b</"],
)
def test_a_body_cannot_end_or_bend_its_script_element(text: str) -> None:
    ix = interaction(response=RecordedResponse(200, body=json.dumps({"t": text}).encode()))
    page = render_page([Source("x.jsonl", [(2, ix)])], title="x")
    parsed = parse_page(page)
    (d,) = [t for a, t in parsed.scripts if a.get("id") == "reel-z-0"]
    assert unpack(d)[0]["response"]["body"] == {"json": {"t": text}}
    assert "<" not in d
    assert "<" not in embed_json({"t": text})
    assert len(parsed.scripts) == 3  # the list, the details, the code: none injected


def test_details_are_packed_in_blocks_of_a_hundred_in_order() -> None:
    details = [{"i": n, "text": "é\n\u2028</script>" * (n % 3)} for n in range(250)]
    blocks = pack_details(details)
    assert len(blocks) == 3
    assert [len(unpack(b)) for b in blocks] == [100, 100, 50]
    assert [d for b in blocks for d in unpack(b)] == details
    assert pack_details([]) == []


def test_the_page_files_are_package_files_the_wheel_takes() -> None:
    from importlib import resources

    files = resources.files("reel_bindings.view")
    for name in ("page.js", "page.css", "run.css"):
        assert files.joinpath(name).is_file(), name
    root = Path(__file__).resolve().parents[2]
    config = (root / "pyproject.toml").read_text()
    assert 'packages = ["src/reel_core", "src/reel_bindings"]' in config  # whole dirs


def test_a_long_whole_answer_is_not_written_twice() -> None:
    long = "word " * 1000
    body = json.dumps({"choices": [{"message": {"content": long}}]}).encode()
    d = detail(interaction(response=RecordedResponse(200, body=body)))
    assert d["text"] == long[:MAX_WHOLE_ANSWER]
    assert d["text_more"] == len(long) - MAX_WHOLE_ANSWER
    assert d["response"]["body"]["json"]["choices"][0]["message"]["content"] == long
    # a stream's answer is assembled from its frames: kept whole
    frames = openai_stream([long])
    streamed = detail(interaction(response=stream(frames)))
    assert streamed["text"] == long
    assert streamed["text_more"] == 0


def realtime_session(close: bool = True) -> Interaction:
    """An OpenAI Realtime session as the proxy records it: two client
    messages, three server ones (one binary), usage in response.done."""
    from reel_core.tools import WebSocketClose, WebSocketMessage

    done = {
        "type": "response.done",
        "response": {"usage": {"input_tokens": 11, "output_tokens": 4}},
    }
    messages = (
        WebSocketMessage("server", 12.5, b'{"type":"session.created","event_id":"e1"}'),
        WebSocketMessage("client", 40.0, b'{"type":"response.create","key":"[REDACTED:x]"}'),
        WebSocketMessage("server", 90.0, b"\x00\x01\xff" * 10, binary=True),
        WebSocketMessage("client", 120.0, b"plain text"),
        WebSocketMessage("server", 300.0, json.dumps(done).encode()),
    )
    return Interaction(
        "sha256:" + "ab" * 32,
        "abababababab",
        RecordedRequest("GET", "/v1/realtime", (("model", "gpt-realtime"),)),
        RecordedResponse(101, (("sec-websocket-protocol", "realtime"),), stream="websocket"),
        provider="openai",
        endpoint="GET /v1/realtime",
        websocket=WebSocketLog(
            messages, WebSocketClose(1000, "done", "client", 450.0) if close else None
        ),
    )


def test_a_websocket_session_row_and_detail() -> None:
    ix = realtime_session()
    r = row(ix, index=0, cassette=0, line=2)
    assert r["stream"] == "websocket"
    assert r["ws"] == {"client": 2, "server": 3}
    assert (r["tokens_in"], r["tokens_out"], r["model"]) == (11, 4, "gpt-realtime")
    assert r["duration_ms"] == 450.0  # the close
    d = detail(ix)
    ws = d["response"]["websocket"]
    assert [m[:3] for m in ws["messages"]] == [
        ["server", 12.5, 42],
        ["client", 40.0, 47],
        ["server", 90.0, 30],
        ["client", 120.0, 10],
        ["server", 300.0, len(ix.websocket.messages[-1].data)],  # type: ignore[union-attr]
    ]
    assert ws["messages"][0][3] == {"json": {"type": "session.created", "event_id": "e1"}}
    assert ws["messages"][2][3]["binary"] == 30
    assert ws["messages"][3][3] == {"text": "plain text"}
    assert ws["close"] == {"code": 1000, "reason": "done", "by": "client", "at_ms": 450.0}
    assert "frames" not in d["response"]
    assert "body" not in d["response"]
    assert d["usage"]["tokens_in"] == 11
    json.dumps(d, allow_nan=False)  # what the page embeds


def test_a_websocket_session_without_its_close() -> None:
    ix = realtime_session(close=False)
    assert detail(ix)["response"]["websocket"]["close"] is None
    assert row(ix, index=0, cassette=0, line=2)["duration_ms"] == 300.0  # its last message
    empty = dataclasses.replace(ix, websocket=WebSocketLog())
    assert row(empty, index=0, cassette=0, line=2)["duration_ms"] is None
    assert row(empty, index=0, cassette=0, line=2)["ws"] == {"client": 0, "server": 0}


def test_a_body_reel_could_not_decode_is_shown_flagged() -> None:
    flagged = RecordedResponse(
        200,
        headers=(("content-encoding", "zstd"),),
        body=b"\x28\xb5\x2f\xfd",
        encoding="zstd",
        encoding_error="cannot decode content-encoding 'zstd'",
    )
    response = detail(interaction(response=flagged))["response"]
    assert (response["encoding"], response["encoding_error"]) == (
        "zstd",
        "cannot decode content-encoding 'zstd'",
    )
    assert "encoding" not in detail(interaction())["response"]
