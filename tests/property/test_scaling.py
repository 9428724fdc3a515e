"""Every parser and scanner that reads input Reel did not write is linear.

The invariant (docs/reliability.md, "Every parser is linear and bounded"):
for each member of the family, the time to read ten times the input is
about ten times the time to read the input.  Each case builds an input of
``n`` and of ``10 * n`` units in the shape most likely to make its parser
super-linear (an unfinished tail, a run of near-matches, aliases of
aliases), and the ratio of the best of five timings must stay under
:data:`RATIO`: 10 for a linear parser, about 100 for a quadratic one.  No
wall-clock bound is asserted: the machine may be loaded, and best-of-five
timings of inputs that take milliseconds keep the ratio steady.

The depth half of the invariant is the last part of this module: one limit,
:data:`reel_core.MAX_DEPTH`, and one error, for JSON and YAML everywhere.
"""

from __future__ import annotations

import gc
import gzip
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from reel_core import (
    Cassette,
    CassetteError,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    Redactor,
    Request,
)
from reel_core._body import encode_body, parse_json
from reel_core._codec import decode_lines
from reel_core._formats import har, httprr, nock
from reel_core._formats._yaml import load as load_yaml
from reel_core._forms import form_fields, parse_multipart
from reel_core._frames import SSESplitter, sse_event_ends
from reel_core._literals import Literals, exchange_redactor
from reel_core._meta import CassetteMeta
from reel_core._record import Recorder
from reel_core._upstream import UpstreamError
from reel_core._usage import extract_usage
from reel_core._websocket import WebSocketRecorder
from reel_core.tools import MAX_DEPTH, TooDeep, load_json

#: time(10 x input) / time(input) stays under this: near 10 when linear,
#: near 100 when quadratic; generous, for a loaded machine.
RATIO = 30.0
#: Timings per input; the best one counts.
ROUNDS = 5


@dataclass(frozen=True)
class Case:
    """One parser of the family: ``run(make(n))`` reads an input of ``n``
    units; ``n`` is chosen so that it takes a few milliseconds."""

    make: Callable[[int], Any]
    run: Callable[[Any], object]
    n: int


def best_time(run: Callable[[Any], object], value: Any) -> float:
    best = float("inf")
    for _ in range(ROUNDS):
        start = time.thread_time()
        run(value)
        best = min(best, time.thread_time() - start)
    return best


def scaling_ratio(case: Case) -> float:
    """time(10 n) / time(n), garbage collection paused while timed."""
    small, large = case.make(case.n), case.make(10 * case.n)
    case.run(small)  # warm: imports, compiled patterns, caches
    gc.collect()
    gc.disable()
    try:
        return best_time(case.run, large) / best_time(case.run, small)
    finally:
        gc.enable()


# -- SSE and NDJSON framing ------------------------------------------------------------


def _fed(chunk: int) -> Callable[[bytes], object]:
    def run(body: bytes) -> list[bytes]:
        splitter = SSESplitter()
        frames = []
        for i in range(0, len(body), chunk):
            frames += splitter.feed(body[i : i + chunk])
        return frames + splitter.close()

    return run


def _unfinished_event(n: int) -> bytes:
    """A stream cut inside one event of ``n`` bytes (an image streamed as
    one base64 ``data:`` line), after a few whole events."""
    return b"data: {}\n\n" * 100 + b"data: " + b"QUJD" * (n // 4)


def _event_lines(n: int) -> bytes:
    """One unfinished event of ``n`` bytes in short lines: no blank line."""
    return b"data: x\n" * (n // 8)


def _recorded_cut(body: bytes) -> Interaction:
    recorder = Recorder(
        RecordedRequest("POST", "/v1/images/generations"),
        key="sha256:" + "0" * 64,
        id="id0",
        redactor=Redactor(),
    )
    recorder.head(200, ((b"content-type", b"text/event-stream"),), 0.0, None)
    for i in range(0, len(body), 1024):
        recorder.data(body[i : i + 1024], 0.001)
    return recorder.fail(UpstreamError.CLOSED, "cut", 1.0)


def _ndjson_usage(frames: tuple[tuple[float, bytes], ...]) -> object:
    response = RecordedResponse(200, stream="chunks", frames=frames)
    return extract_usage("generic", "/api/chat", b"{}", response)


def _ndjson(n: int) -> tuple[tuple[float, bytes], ...]:
    """Ollama's NDJSON, each line opening an array the next line goes on
    (no line reads alone, every read runs to the nesting limit)."""
    line = b'{"message": {"content": "hi"}, "done": false}\n[\n'
    return tuple((i / 1000, line) for i in range(n // len(line)))


# -- bodies: JSON, forms, multipart, query --------------------------------------------


def _json_doc(n: int) -> bytes:
    """A wide JSON array whose strings are full of brackets and escapes."""
    item = {"text": '[{"[\\', "more": [[1, 2], {"a": "}]"}]}
    return json.dumps([item] * (n // 50)).encode()


def _multipart(n: int) -> bytes:
    """A multipart body whose part headers hold unclosed quotes and
    semicolons: a parameter pattern's worst case."""
    head = b'Content-Disposition: form-data; name="f"' + b'; x="\\' * (n // 8)
    return b"--b\r\n" + head + b"\r\n\r\nvalue\r\n--b--\r\n"


def _form(n: int) -> bytes:
    return b"a=%41%42+c&" * (n // 11)


def _query(n: int) -> Request:
    return Request("GET", "/v1/models?" + "key=%41%42&" * (n // 11))


# -- imported recordings ------------------------------------------------------------------


def _har(n: int) -> bytes:
    entry = {
        "startedDateTime": "2026-01-01T00:00:00.000Z",
        "time": 1,
        "request": {
            "method": "POST",
            "url": "https://api.openai.com/v1/chat/completions",
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "content-type", "value": "application/json"}],
            "queryString": [],
            "cookies": [],
            "headersSize": -1,
            "bodySize": 2,
            "postData": {"mimeType": "application/json", "text": "{}"},
        },
        "response": {
            "status": 200,
            "statusText": "OK",
            "httpVersion": "HTTP/1.1",
            "headers": [],
            "cookies": [],
            "content": {"size": 2, "mimeType": "application/json", "text": '{"ok":1}'},
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": 2,
        },
        "cache": {},
        "timings": {"send": 0, "wait": 1, "receive": 0},
    }
    doc = {"log": {"version": "1.2", "creator": {"name": "t"}, "entries": [entry] * (n // 700)}}
    return json.dumps(doc).encode()


def _nock(n: int) -> bytes:
    item = {
        "scope": "https://api.openai.com:443",
        "method": "POST",
        "path": "/v1/chat/completions",
        "body": {"model": "m"},
        "status": 200,
        "response": {"ok": 1},
        "rawHeaders": ["content-type", "application/json"],
    }
    return json.dumps([item] * (n // 200)).encode()


def _httprr(n: int) -> bytes:
    body = b'{"model":"m"}'
    request = (
        b"POST https://api.anthropic.com/v1/messages HTTP/1.1\r\nHost: api.anthropic.com\r\n"
        b"Content-Length: %d\r\nContent-Type: application/json\r\n\r\n%s" % (len(body), body)
    )
    answer = b'{"ok":1}'
    response = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(answer), answer)
    record = b"%d %d\n%s%s" % (len(request), len(response), request, response)
    return gzip.compress(b"httprr trace v1\n" + record * (n // len(record)), 1)


def _yaml_aliases(n: int) -> bytes:
    """A vcrpy-like file that shares one headers map through aliases."""
    head = b"headers: &h {content-type: [application/json], x: [y]}\ninteractions:\n"
    item = b"- {request: {headers: *h, uri: 'https://a/b'}, response: {headers: *h}}\n"
    return head + item * (n // len(item))


def _yaml_doubling(n: int) -> bytes:
    """Aliases of aliases, each doubling the one before ("billion laughs"),
    ``n`` bytes of them: refused, after reading each node once."""
    lines = [b"a0: &a0 [x, x]\n"]
    i = 1
    while sum(map(len, lines)) < n:
        lines.append(b"a%d: &a%d [*a%d, *a%d]\n" % (i, i, i - 1, i - 1))
        i += 1
    return b"".join(lines)


def _yaml_deep(n: int) -> bytes:
    """Entries nested deeper than the limit, each cut where it gets too deep."""
    entry = b"- " + b"[" * (MAX_DEPTH + 20) + b"1" + b"]" * (MAX_DEPTH + 20) + b"\n"
    return entry * (n // len(entry))


def _refused(data: bytes) -> str:
    with pytest.raises(CassetteError) as caught:
        load_yaml(data, "c.yaml")
    return caught.value.reason


# -- the cassette, WebSocket messages ------------------------------------------------------


def _cassette(n: int) -> bytes:
    line = (
        b'{"key":"sha256:' + b"0" * 64 + b'","id":"000000000000","request":{"method":"POST",'
        b'"path":"/v1/x","body":{"json":{"a":[1,2,{"b":"[{"}]}}},"response":{"status":200,'
        b'"body":{"text":"ok"}}}\n'
    )
    return CassetteMeta().to_line() + line * (n // len(line))


def _websocket(n: int) -> Interaction:
    recorder = WebSocketRecorder(
        Request("GET", "/v1/realtime?model=m&key=opaque-key-0001", ((b"host", b"a"),)),
        Redactor(),
        opened=0.0,
    )
    message = b'{"type":"response.text.delta","delta":"opaque-key-000 sk-a a@b \\"key\\":\\""}'
    for i in range(n // len(message)):
        recorder.server_message(message, False, i / 1000)
    upgrade = Interaction(
        "sha256:" + "0" * 64,
        "0" * 12,
        RecordedRequest("GET", "/v1/realtime"),
        RecordedResponse(101),
    )
    return recorder.finish(upgrade, mono=1.0)


# -- redaction: runs of near-matches of every shape ------------------------------------


NEAR_MISSES = {
    "email-local-part": b"x.y%40a.b- ",
    "email-domain": b"x@a.",
    "phone": b"+1 (5",
    "field-unclosed": b'"api_key": "\\"',
    "escaped-field": b'\\"password\\": \\"a',
    "bearer": b"Bearer Bearer ",
    "secret-prefixes": b"sk-xoxeyJAKIAghp_",
    "placeholder": b"[REDACTED:",
    "percent": b"%2B%2f",
}


def _near_misses(unit: bytes) -> Callable[[int], bytes]:
    """``n`` bytes of ``unit`` again and again, after a secret's prefix (so
    the cheap checks that skip text holding no hint of one let it through)."""
    return lambda n: b"sk-proj- a@b.co +1 " + unit * (n // len(unit))


def _redact(data: bytes) -> bytes:
    return Redactor().data(data)


_LITERALS = exchange_redactor(
    Redactor(), ((b"x-api-key", b"opaque+key/value=0001"), (b"authorization", b"Bearer tok-1"))
)


def _scrub_literals(data: bytes) -> bytes:
    return _LITERALS.data(data)


def _literal_frames(n: int) -> list[tuple[float, bytes]]:
    """A stream of short frames, a credential split across every two."""
    pair = (b"data: opaque+key/", b"value=0001 Bearer tok-1\n\n")
    return [(i / 1000, pair[i % 2]) for i in range(n // 20)]


_FRAME_LITERALS = Literals((b"opaque+key/value=0001", b"tok-1"))


def _scrub_frames(frames: list[tuple[float, bytes]]) -> object:
    return _FRAME_LITERALS.frames(frames)


CASES: dict[str, Case] = {
    "sse-unfinished-event-at-once": Case(
        _unfinished_event, lambda body: sse_event_ends(body), 400_000
    ),
    "sse-unfinished-event-fed": Case(_unfinished_event, _fed(64), 40_000),
    "sse-unfinished-lines-fed": Case(_event_lines, _fed(64), 40_000),
    "sse-cr-lines-fed": Case(lambda n: b"data: x\r" * (n // 8), _fed(64), 40_000),
    "sse-recorded-cut-mid-event": Case(_unfinished_event, _recorded_cut, 100_000),
    "ndjson-usage": Case(_ndjson, _ndjson_usage, 20_000),
    "json-load": Case(_json_doc, load_json, 200_000),
    "json-body-stored": Case(_json_doc, lambda body: encode_body(body), 50_000),
    "json-body-parsed": Case(_json_doc, parse_json, 200_000),
    "multipart": Case(_multipart, parse_multipart, 20_000),
    "form": Case(_form, form_fields, 20_000),
    "query": Case(_query, lambda request: request.query, 20_000),
    "har": Case(_har, lambda data: har.parse(data, "a.har"), 100_000),
    "nock": Case(_nock, lambda data: nock.parse(data, "a.json"), 50_000),
    "httprr": Case(_httprr, lambda data: httprr.parse(data, "a.httprr"), 10_000),
    "yaml-aliases": Case(_yaml_aliases, lambda data: load_yaml(data, "c.yaml"), 10_000),
    "yaml-alias-bomb": Case(_yaml_doubling, _refused, 5_000),
    "yaml-too-deep": Case(_yaml_deep, lambda data: load_yaml(data, "c.yaml"), 2_000),
    "cassette-lines": Case(_cassette, lambda data: decode_lines(data, "c.jsonl"), 50_000),
    "cassette-opened": Case(_cassette, lambda data: list(Cassette.loads(data)), 50_000),
    "websocket-messages": Case(lambda n: n, _websocket, 10_000),
    "literal-frames": Case(_literal_frames, _scrub_frames, 100_000),
    "literal-credentials": Case(
        _near_misses(b"opaque+key/valu opaque%2Bkey Bearer tok-"), _scrub_literals, 8_000
    ),
    **{
        f"redaction-{name}": Case(_near_misses(unit), _redact, 8_000)
        for name, unit in NEAR_MISSES.items()
    },
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_parser_is_linear(name: str) -> None:
    ratio = scaling_ratio(CASES[name])
    for _ in range(2):  # measured again: a loaded machine's stall (CI saw 33 once)
        if ratio < RATIO:
            break
        ratio = min(ratio, scaling_ratio(CASES[name]))  # a quadratic parser fails all three
    assert ratio < RATIO, f"{name}: time(10 x input) / time(input) = {ratio:.1f}"


# -- depth: one limit, one error -------------------------------------------------------


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def test_json_as_deep_as_the_limit_reads_and_one_level_more_is_refused() -> None:
    assert load_json(nested(MAX_DEPTH)) == json.loads(nested(MAX_DEPTH))
    for deeper in (MAX_DEPTH + 1, 100_000):
        with pytest.raises(TooDeep, match=f"^nested more than {MAX_DEPTH} levels deep"):
            load_json(nested(deeper))
    assert parse_json(nested(100_000)) == (False, None)  # a body that deep is kept as text
