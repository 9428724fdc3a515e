"""Hypothesis strategies shared by every property test of reel_core.

Everything random the property tests draw comes from here: raw HTTP request
bytes (content-length or chunked bodies, pipelined), JSON request bodies shaped
like OpenAI / Anthropic / Gemini calls and rendered with any key order and
whitespace, server-sent-event bodies with every line ending, arbitrary
chunkings of a byte string, interactions as stored in a cassette, timings,
text with embedded secrets, and the credentials a client sends with each
spelling an upstream may echo them in.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import html.entities
import itertools
import json
import math
import string
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlencode

from hypothesis import strategies as st

from reel_core import (
    Cassette,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    Request,
    StreamCut,
    Timing,
)
from reel_core._match import MatchConfig
from reel_core._redact import EMAIL_TLDS
from reel_core.tools import TimingMode, WebSocketLog, WebSocketMessage, match_key

__all__ = [
    "ASSET_THRESHOLD",
    "ECHO_TRANSFORMS",
    "HIT_BODY",
    "HIT_PATH",
    "METHODS",
    "PROVIDER_PATHS",
    "JSONValue",
    "SecretText",
    "asset_interactions",
    "chunkings",
    "credential_values",
    "echoes",
    "garbage_cassette_bytes",
    "garbage_request_bytes",
    "hit_cassette",
    "hit_request",
    "interactions",
    "json_bodies",
    "json_values",
    "llm_bodies",
    "pipelines",
    "raw_requests",
    "recorded_requests",
    "recorded_responses",
    "render_json",
    "request_specs",
    "secret_texts",
    "secrets",
    "sse_bodies",
    "surrogate_texts",
    "timings",
]

JSONValue = Any

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
PROVIDER_PATHS = (
    "/v1/chat/completions",
    "/v1/responses",
    "/v1/embeddings",
    "/v1/messages",
    "/v1/models",
    "/v1beta/models/gemini-1.5-flash:generateContent",
    "/v1beta/models/gemini-2.0-flash:streamGenerateContent",
    "/api/generate",
)
MODELS = ("gpt-4o-mini", "gpt-4.1", "claude-3-5-sonnet-latest", "gemini-1.5-flash", "llama3")

# -- JSON values ---------------------------------------------------------------

_keys = st.text(max_size=8)
json_scalars: st.SearchStrategy[JSONValue] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)


@functools.cache
def json_values(max_leaves: int = 20) -> st.SearchStrategy[JSONValue]:
    """Any JSON value without NaN or infinities (so ``==`` is meaningful)."""
    return st.recursive(
        json_scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.dictionaries(_keys, inner, max_size=4),
        ),
        max_leaves=max_leaves,
    )


_text = st.text(max_size=40)
_roles = st.sampled_from(("system", "user", "assistant", "tool"))


@functools.cache
def _openai_body() -> st.SearchStrategy[dict[str, JSONValue]]:
    message = st.fixed_dictionaries({"role": _roles, "content": _text})
    return st.fixed_dictionaries(
        {"model": st.sampled_from(MODELS), "messages": st.lists(message, min_size=1, max_size=4)},
        optional={
            "temperature": st.floats(0, 2, allow_nan=False),
            "stream": st.booleans(),
            "max_tokens": st.integers(1, 4096),
            "user": _text,
            "tools": st.lists(
                st.fixed_dictionaries(
                    {
                        "type": st.just("function"),
                        "function": st.fixed_dictionaries(
                            {"name": st.text(string.ascii_lowercase, min_size=1, max_size=8)},
                            optional={"parameters": json_values(6)},
                        ),
                    }
                ),
                max_size=2,
            ),
        },
    )


@functools.cache
def _anthropic_body() -> st.SearchStrategy[dict[str, JSONValue]]:
    block = st.fixed_dictionaries({"type": st.just("text"), "text": _text})
    content = st.one_of(_text, st.lists(block, min_size=1, max_size=3))
    message = st.fixed_dictionaries(
        {"role": st.sampled_from(("user", "assistant")), "content": content}
    )
    return st.fixed_dictionaries(
        {
            "model": st.sampled_from(MODELS),
            "max_tokens": st.integers(1, 8192),
            "messages": st.lists(message, min_size=1, max_size=4),
        },
        optional={
            "system": _text,
            "stream": st.booleans(),
            "metadata": st.fixed_dictionaries({"user_id": _text}),
        },
    )


@functools.cache
def _gemini_body() -> st.SearchStrategy[dict[str, JSONValue]]:
    part = st.fixed_dictionaries({"text": _text})
    content = st.fixed_dictionaries(
        {
            "role": st.sampled_from(("user", "model")),
            "parts": st.lists(part, min_size=1, max_size=3),
        }
    )
    return st.fixed_dictionaries(
        {"contents": st.lists(content, min_size=1, max_size=3)},
        optional={
            "generationConfig": st.fixed_dictionaries(
                {},
                optional={
                    "temperature": st.floats(0, 2, allow_nan=False),
                    "maxOutputTokens": st.integers(1, 8192),
                    "candidateCount": st.integers(1, 4),
                },
            ),
            "safetySettings": st.lists(json_values(4), max_size=2),
        },
    )


@functools.cache
def llm_bodies() -> st.SearchStrategy[dict[str, JSONValue]]:
    """A JSON request body (as a value) as an OpenAI, Anthropic or Gemini SDK
    would send it, or any JSON object."""
    return st.one_of(
        _openai_body(),
        _anthropic_body(),
        _gemini_body(),
        st.dictionaries(_keys, json_values(10), max_size=5),
    )


_ws = st.sampled_from(("", "", " ", "  ", "\n", "\t", "\r\n", "\n    ", " \n  "))


@st.composite
def render_json(draw: st.DrawFn, value: JSONValue) -> str:
    """``value`` as JSON text with a random key order, random whitespace
    between tokens, strings escaped or not, and floats in any exact form."""

    def out(v: JSONValue) -> str:
        if isinstance(v, dict):
            items = draw(st.permutations(list(v.items())))
            parts = [
                draw(_ws)
                + _string(k, draw(st.booleans()))
                + draw(_ws)
                + ":"
                + draw(_ws)
                + out(x)
                + draw(_ws)
                for k, x in items
            ]
            return "{" + (",".join(parts) if parts else draw(_ws)) + "}"
        if isinstance(v, list):
            parts = [draw(_ws) + out(x) + draw(_ws) for x in v]
            return "[" + (",".join(parts) if parts else draw(_ws)) + "]"
        if isinstance(v, str):
            return _string(v, draw(st.booleans()))
        if isinstance(v, float) and math.isfinite(v):
            form = draw(st.sampled_from(("repr", "e", "E")))
            if form == "repr":
                return repr(v)
            text = f"{v:.17e}"
            return text.upper() if form == "E" else text
        return json.dumps(v)

    return draw(_ws) + out(value) + draw(_ws)


def _string(text: str, ascii_: bool) -> str:
    """A JSON string literal; a lone surrogate can only be written escaped."""
    surrogate = any("\ud800" <= c <= "\udfff" for c in text)
    return json.dumps(text, ensure_ascii=ascii_ or surrogate)


def _no_pairs(text: str) -> bool:
    """No high surrogate right before a low one (JSON would read one character)."""
    return not any(
        "\ud800" <= a <= "\udbff" and "\udc00" <= b <= "\udfff" for a, b in itertools.pairwise(text)
    )


#: Text with lone surrogates, which JSON can carry as ``\udXXX`` escapes (and
#: which a cassette line therefore can hold).
surrogate_texts = st.text(
    st.characters(codec=None, categories=["Cs", "Ll", "Nd", "So"]), min_size=1, max_size=6
).filter(_no_pairs)


@functools.cache
def json_bodies(values: st.SearchStrategy[JSONValue] | None = None) -> st.SearchStrategy[bytes]:
    """JSON request body bytes: compact, pretty, or randomly formatted."""
    source = values if values is not None else llm_bodies()

    def styles(v: JSONValue) -> st.SearchStrategy[bytes]:
        return st.one_of(
            st.just(json.dumps(v, separators=(",", ":")).encode()),
            st.just(json.dumps(v, ensure_ascii=False).encode()),
            st.just(json.dumps(v, indent=2).encode() + b"\n"),
            render_json(v).map(str.encode),
        )

    return source.flatmap(styles)


# -- raw HTTP requests ---------------------------------------------------------

_token = st.text(string.ascii_letters + string.digits + "-_.~", min_size=1, max_size=10)
_query_pairs = st.lists(st.tuples(_token, st.text(string.printable, max_size=10)), max_size=3)

_paths = st.one_of(
    st.sampled_from(PROVIDER_PATHS),
    st.lists(_token, min_size=1, max_size=4).map(lambda p: "/" + "/".join(p)),
)
_request_bodies = st.one_of(json_bodies(), st.binary(max_size=200), st.just(b""))
_request_headers = st.lists(
    st.sampled_from(
        (
            (b"Authorization", b"Bearer sk-test-0123456789abcdefghij"),
            (b"Content-Type", b"application/json"),
            (b"User-Agent", b"OpenAI/Python 1.40.0"),
            (b"x-api-key", b"sk-ant-api03-abcdefghijklmnopqrstuvwx"),
            (b"anthropic-version", b"2023-06-01"),
            (b"Accept", b"text/event-stream"),
            (b"X-Stainless-Retry-Count", b"0"),
        )
    ),
    max_size=4,
    unique=True,
)


@st.composite
def request_specs(draw: st.DrawFn) -> tuple[str, str, list[tuple[bytes, bytes]], bytes]:
    """``(method, origin-form target, extra headers, body)`` of a sane request."""
    method = draw(st.sampled_from(METHODS))
    path = draw(_paths)
    pairs = draw(_query_pairs)
    if pairs:
        path += "?" + urlencode(pairs)
    body = b""
    if method not in ("GET", "HEAD"):
        body = draw(_request_bodies)
    headers = draw(_request_headers)
    return method, path, headers, body


@st.composite
def raw_requests(draw: st.DrawFn, spec: tuple[str, str, list[tuple[bytes, bytes]], bytes]) -> bytes:
    """The wire bytes of ``spec``: HTTP/1.1, a Host header, and the body sent
    with content-length or chunked (random chunk sizes, extensions, trailers)."""
    method, target, headers, body = spec
    if draw(st.booleans()):
        target = "http://" + draw(st.sampled_from(("api.openai.com", "127.0.0.1:7878"))) + target
    lines = [f"{method} {target} HTTP/1.1".encode(), b"Host: " + b"127.0.0.1:7878"]
    lines += [k + b": " + v for k, v in headers]
    chunked = bool(body) and draw(st.booleans())
    if chunked:
        lines.append(b"Transfer-Encoding: chunked")
    elif body or method in ("POST", "PUT", "PATCH"):
        lines.append(b"Content-Length: " + str(len(body)).encode())
    head = b"\r\n".join(lines) + b"\r\n\r\n"
    if not chunked:
        return head + body
    out = [head]
    for piece in draw(chunkings(body)):
        ext = draw(st.sampled_from((b"", b";name=value", b"; ext")))
        size = f"{len(piece):x}".encode()
        out.append(
            (size.upper() if draw(st.booleans()) else size) + ext + b"\r\n" + piece + b"\r\n"
        )
    out.append(b"0\r\n")
    if draw(st.booleans()):
        out.append(b"X-Trailer: yes\r\n")
    out.append(b"\r\n")
    return b"".join(out)


@functools.cache
def pipelines(max_requests: int = 3) -> st.SearchStrategy[list[bytes]]:
    """Several requests to send back to back on one connection."""
    return st.lists(request_specs().flatmap(raw_requests), min_size=1, max_size=max_requests)


def chunkings(
    data: bytes, *, max_cuts: int = 20, allow_empty: bool = False
) -> st.SearchStrategy[list[bytes]]:
    """``data`` whole, one byte at a time, or cut at random places; the
    pieces always join back to ``data``.  Empty pieces only with
    ``allow_empty`` (``receive_data(b"")`` means end of file)."""
    whole = st.just([data])
    bytewise = st.just([data[i : i + 1] for i in range(len(data))])
    cuts = st.lists(st.integers(0, len(data)), max_size=max_cuts).map(
        lambda points: _cut(data, sorted(points))
    )
    pieces = st.one_of(whole, bytewise, cuts)
    if allow_empty:
        return pieces
    return pieces.map(lambda chunks: [c for c in chunks if c])


def _cut(data: bytes, points: Sequence[int]) -> list[bytes]:
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


# -- garbage ---------------------------------------------------------------------

_insertions = st.one_of(
    st.binary(min_size=1, max_size=4),
    st.sampled_from((b"\r\n", b"\n", b" ", b":", b"\x00", b"\\ud800", b"[", b"{")),
)


@st.composite
def _mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` with a few bytes flipped, inserted, deleted or duplicated."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(("flip", "insert", "delete", "dup", "truncate")))
        pos = draw(st.integers(0, len(buf)))
        if op == "flip" and pos < len(buf):
            buf[pos] = draw(st.integers(0, 255))
        elif op == "insert":
            buf[pos:pos] = draw(_insertions)
        elif op == "delete":
            del buf[pos : pos + draw(st.integers(1, 8))]
        elif op == "dup":
            buf[pos:pos] = buf[pos : pos + draw(st.integers(1, 16))]
        else:
            del buf[pos:]
    return bytes(buf)


_odd_targets = st.sampled_from(
    (
        "http://[x/",
        "http://[::1/v1",
        "https://]/a",
        "http:///nohost",
        "*",
        "v1/chat",
        "//double",
        "/a?b=%ff%fe",
        "/%00",
        "http://h:99999/x",
        "/v1?key=AIza" + "A" * 35,
    )
)
_odd_bodies = st.sampled_from(
    (
        b'{"a":"\\ud800"}',
        b'{"messages":[{"content":"\\udfff x"}]}',
        b'["\\ud83d"]',
        b"[" * 3000 + b"]" * 3000,
        b'{"a":1e999}',
        b'{"a":NaN,"b":-Infinity}',
        b'{"a":1,"a":2}',
        b"\xef\xbb\xbf{}",
        b"{\x00}\x00",
    )
)

_any_targets = st.one_of(_odd_targets, st.text(string.printable, max_size=20))
_any_bodies = st.one_of(_odd_bodies, json_bodies(json_values(8)))


@st.composite
def _odd_request(draw: st.DrawFn) -> bytes:
    target = draw(_any_targets)
    body = draw(_any_bodies)
    head = f"POST {target} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode(
        "utf-8", "replace"
    )
    return head + body


@functools.cache
def garbage_request_bytes() -> st.SearchStrategy[bytes]:
    """Bytes a broken or hostile client might send: random bytes, mutated
    valid requests, odd targets and bodies, several requests back to back."""
    valid = pipelines(2).map(b"".join)
    return st.one_of(
        st.binary(max_size=300),
        valid.flatmap(_mutated),
        _odd_request(),
        st.lists(st.one_of(_odd_request(), valid), min_size=1, max_size=3).map(b"".join),
        st.tuples(valid, st.binary(max_size=50)).map(b"".join),
    )


# -- interactions ----------------------------------------------------------------

_keys_hex = st.binary(min_size=32, max_size=32).map(lambda b: "sha256:" + b.hex())
_offsets = st.one_of(
    st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False),
    st.integers(0, 10**6).map(lambda n: round(n / 7, 3)),
)


@functools.cache
def _binary_or_text() -> st.SearchStrategy[bytes]:
    return st.one_of(
        st.binary(max_size=60),
        st.text(max_size=40).map(str.encode),
        st.binary(max_size=30).map(lambda b: b"\xff" + b),  # never UTF-8
        json_bodies(json_values(8)),
    )


_sse_json = st.one_of(
    st.fixed_dictionaries(
        {
            "id": st.just("chatcmpl-1"),
            "choices": st.lists(
                st.fixed_dictionaries(
                    {"index": st.just(0), "delta": st.fixed_dictionaries({"content": _text})}
                ),
                min_size=1,
                max_size=1,
            ),
        }
    ),
    json_values(6),
)
_sse_payloads = st.one_of(
    st.sampled_from((b"[DONE]", b"")),
    st.binary(max_size=20).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b"")),
    st.text(max_size=20).map(lambda s: s.encode().replace(b"\r", b"").replace(b"\n", b"")),
)


def _sse_event_line(draw: st.DrawFn) -> list[bytes]:
    kind = draw(
        st.sampled_from(("data", "data", "json", "event", "id", "retry", "comment", "multi"))
    )
    space = draw(st.sampled_from((b" ", b"", b"  ")))
    if kind == "json":
        value = draw(_sse_json)
        text = draw(
            st.one_of(
                st.just(json.dumps(value)),
                st.just(json.dumps(value, separators=(",", ":"))),
                render_json(value).map(lambda s: s.replace("\r", " ").replace("\n", " ")),
            )
        )
        return [b"data:" + space + text.encode()]
    if kind == "event":
        name = draw(st.sampled_from((b"message_start", b"content_block_delta", b"ping", b"error")))
        return [b"event:" + space + name]
    if kind == "id":
        return [b"id:" + space + str(draw(st.integers(0, 10**6))).encode()]
    if kind == "retry":
        return [b"retry:" + space + str(draw(st.integers(0, 10**5))).encode()]
    if kind == "comment":
        return [b":" + draw(st.text(max_size=10)).encode().replace(b"\r", b"").replace(b"\n", b"")]
    count = 1 if kind == "data" else draw(st.integers(2, 4))
    return [b"data:" + space + draw(_sse_payloads) for _ in range(count)]


@st.composite
def sse_bodies(draw: st.DrawFn, *, max_events: int = 6) -> bytes:
    """A server-sent-events body: events of ``data:`` (JSON with any padding,
    multi-line, binary), ``event:``, ``id:``, ``retry:`` and comment lines,
    each line ended by LF, CRLF or CR (mixed or per body), each event ended by
    a blank line; sometimes a stray blank line, an unterminated last event,
    or plain arbitrary bytes."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=200))
    per_body = draw(st.sampled_from((b"\n", b"\r\n", b"\r", None)))
    eols = st.just(per_body) if per_body is not None else st.sampled_from((b"\n", b"\r\n", b"\r"))
    out = b""
    for _ in range(draw(st.integers(0, max_events))):
        if draw(st.integers(0, 7)) == 0:
            out += draw(eols)  # a stray blank line: an empty event
        lines: list[bytes] = []
        for _ in range(draw(st.integers(1, 3))):
            lines += _sse_event_line(draw)
        for line in lines:
            out += line + draw(eols)
        out += draw(eols)
    ending = draw(st.sampled_from(("none", "none", "partial", "line")))
    if ending == "partial":
        out += b'data: {"partial": tr'
    elif ending == "line":
        out += b"data: [DONE]" + draw(eols)
    return out


@functools.cache
def recorded_requests() -> st.SearchStrategy[RecordedRequest]:
    return st.builds(
        RecordedRequest,
        method=st.one_of(st.sampled_from(METHODS), st.text(max_size=8)),
        path=st.one_of(st.sampled_from(PROVIDER_PATHS), st.text(max_size=30), surrogate_texts),
        query=st.lists(
            st.tuples(st.text(max_size=8), st.one_of(st.text(max_size=8), surrogate_texts)),
            max_size=3,
        ).map(tuple),
        body=st.one_of(st.just(b""), _binary_or_text()),
    )


_sse_frames = sse_bodies(max_events=1)


@st.composite
def _frames(draw: st.DrawFn) -> tuple[tuple[float, bytes], ...]:
    at = 0.0
    frames = []
    sse = draw(st.booleans())
    for _ in range(draw(st.integers(0, 6))):
        at += draw(_offsets) if draw(st.booleans()) else 0.0
        data = draw(_sse_frames if sse else _binary_or_text())
        frames.append((at, data))
    return tuple(frames)


_headers = st.lists(
    st.tuples(
        st.one_of(
            st.sampled_from(("content-type", "x-request-id", "retry-after", "openai-model")),
            st.text(max_size=10),
        ),
        st.text(max_size=20),
    ),
    max_size=4,
).map(tuple)

_maybe_bodies = st.one_of(st.just(b""), _binary_or_text())
_cut_errors = st.one_of(st.sampled_from(("reset", "timeout", "closed", "protocol")), st.text())


@st.composite
def recorded_responses(draw: st.DrawFn) -> RecordedResponse:
    """A whole-body or streamed response, streams ending cleanly or cut; in
    the canonical form a cassette line gives back (a cut has ``end_ms`` 0)."""
    status = draw(st.integers(100, 999))
    headers = draw(_headers)
    if draw(st.booleans()):
        return RecordedResponse(status, headers, body=draw(_maybe_bodies))
    frames = draw(_frames())
    last = frames[-1][0] if frames else 0.0
    later = st.floats(0, 1e4, allow_nan=False).map(lambda d: last + d)
    stream = draw(st.sampled_from(("sse", "chunks")))
    if draw(st.booleans()):
        cut = StreamCut(
            draw(later),
            draw(_cut_errors),
            draw(st.text(max_size=30)),
        )
        return RecordedResponse(status, headers, stream=stream, frames=frames, cut=cut)
    return RecordedResponse(status, headers, stream=stream, frames=frames, end_ms=draw(later))


_meta_values = st.dictionaries(st.text(max_size=10), json_values(8), max_size=5)


@functools.cache
def interactions() -> st.SearchStrategy[Interaction]:
    """Any interaction a cassette can hold: JSON, text and binary bodies,
    streams with non-UTF-8 frames, cuts, unicode everywhere."""
    return st.builds(
        Interaction,
        key=_keys_hex,
        id=st.one_of(st.text(max_size=20), surrogate_texts),
        request=recorded_requests(),
        response=recorded_responses(),
        timestamp=st.one_of(st.none(), st.just("2024-05-01T12:00:00.000Z"), st.text(max_size=25)),
        provider=st.one_of(
            st.sampled_from(("openai", "anthropic", "gemini", "generic")), st.text()
        ),
        endpoint=st.text(max_size=30),
        meta=_meta_values,
    )


_meta_lines = st.sampled_from(
    (
        b'{"_meta":{"schema":99,"reel":"9.0"}}',
        b'{"_meta":{"schema":"1"}}',
        b'{"_meta":{"match":"fuzzy-ish"}}',
        b'{"_meta":{"match":["x"]}}',
        b'{"_meta":{"match":"normalized","ignore_fields":["a"]}}',
        b'{"_meta":{"match":"ignore-fields","ignore_fields":[".bad["]}}',
        b'{"_meta":{"match":"fuzzy","threshold":2}}',
        b'{"_meta":' + b"[" * 5000,
        b'{"_meta":[]}',
        b'{"_meta"',
    )
)
_meta_garbage = st.binary(max_size=40).map(lambda b: b'{"_meta"' + b)


@st.composite
def garbage_cassette_bytes(draw: st.DrawFn) -> bytes:
    """Cassette files gone wrong: random bytes, valid lines mutated, lines
    with wrong field types, torn last lines, stray or odd ``_meta`` lines."""
    lines: list[bytes] = []
    meta_choice = draw(st.integers(0, 5))
    if meta_choice == 1:
        lines.append(b'{"_meta":{"schema":1,"match":"normalized"}}')
    elif meta_choice == 2:
        lines.append(draw(_meta_lines))
    elif meta_choice == 3:
        lines.append(draw(_meta_garbage))
    for _ in range(draw(st.integers(0, 3))):
        valid = draw(interactions()).to_line()[:-1]
        choice = draw(st.integers(0, 6))
        if choice == 0:
            lines.append(valid)
        elif choice in (1, 2):
            lines.append(draw(_mutated(valid)))
        elif choice == 3:
            lines.append(draw(st.binary(max_size=80)))
        elif choice == 4:
            lines.append(draw(_field_swapped(valid)))
        elif choice == 5:
            lines.append(valid[: draw(st.integers(0, len(valid)))])
        else:
            lines.append(b'{"_meta":{}}')
    sep = draw(st.sampled_from((b"\n", b"\r\n")))
    data = sep.join(lines)
    return data + (sep if draw(st.booleans()) else b"")


_wrong_values = st.sampled_from(
    (
        "null",
        "true",
        "1",
        "-1",
        "1" + "0" * 400,
        "1e999",
        "-1e999",
        '"x"',
        "[]",
        "{}",
        "[[1]]",
        '[["a",1]]',
        '{"base64":"!!"}',
        '{"base64":"\u00e9"}',
        '{"json":[1],"style":"indent=1000000000000"}',
        '{"json":[1],"style":"indent=99999999999999999999999"}',
        '{"json":[1],"style":"indent=x"}',
        '{"json":[1],"style":1}',
        '{"json":[1],"style":"weird"}',
        '"\\ud800"',
        "[" * 3000 + "]" * 3000,
    )
)


@st.composite
def _field_swapped(draw: st.DrawFn, line: bytes) -> bytes:
    """A valid line with one field's value replaced by a wrong one."""
    obj = json.loads(line)
    paths: list[tuple[Any, ...]] = []

    def walk(v: Any, path: tuple[Any, ...]) -> None:
        paths.append(path)
        if isinstance(v, dict):
            for k, x in v.items():
                walk(x, (*path, k))
        elif isinstance(v, list):
            for i, x in enumerate(v):
                walk(x, (*path, i))

    walk(obj, ())
    target = draw(st.sampled_from(paths[1:]))
    marker = "\x00REPLACE\x00"
    node = obj
    for seg in target[:-1]:
        node = node[seg]
    node[target[-1]] = marker
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    replaced = text.replace(json.dumps(marker), draw(_wrong_values))
    return replaced.encode("utf-8", "backslashreplace")


# -- a cassette with one known recording --------------------------------------------

HIT_PATH = "/v1/chat/completions"
HIT_BODY = b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}'


def hit_cassette(response: RecordedResponse | None = None) -> Cassette:
    """A cassette answering ``POST HIT_PATH`` with ``HIT_BODY``."""
    request = RecordedRequest("POST", HIT_PATH, (), HIT_BODY)
    cassette = Cassette()
    cassette.add(
        Interaction(
            key=match_key("POST", HIT_PATH, (), HIT_BODY, MatchConfig()),
            id="hit",
            request=request,
            response=response
            if response is not None
            else RecordedResponse(200, (("content-type", "application/json"),), body=b'{"ok":1}'),
        ),
        played=False,
    )
    return cassette


def hit_request() -> Request:
    """The request ``hit_cassette`` answers."""
    return Request("POST", HIT_PATH, ((b"host", b"api.openai.com"),), HIT_BODY)


# -- timings --------------------------------------------------------------------------


@functools.cache
def timings() -> st.SearchStrategy[Timing]:
    """realtime, fast, or slow with any positive finite factor."""
    return st.one_of(
        st.just(Timing()),
        st.just(Timing(TimingMode.FAST)),
        st.one_of(
            st.integers(1, 20).map(float),
            st.floats(min_value=1e-3, max_value=1e3, allow_nan=False, exclude_min=False),
        ).map(lambda f: Timing(TimingMode.SLOW, f)),
    )


# -- secrets --------------------------------------------------------------------------

_alnum = string.ascii_letters + string.digits
_b64url = _alnum + "_-"


def _s(alphabet: str, n: int, m: int | None = None) -> st.SearchStrategy[str]:
    return st.text(alphabet, min_size=n, max_size=m if m is not None else n + 12)


def _keyish() -> st.SearchStrategy[str]:
    """16 or more letters and digits, one of them a digit."""
    return st.tuples(_s(_alnum, 15), st.sampled_from("0123456789")).map("".join)


@functools.cache
def secrets() -> st.SearchStrategy[tuple[str, str]]:
    """``(kind, text)`` of one secret shape; the text is the part that must
    never survive redaction (for a bearer token: the token)."""
    return st.one_of(
        # Plausible keys: a run of 16 letters and digits holding a digit.
        st.tuples(
            st.just("openai"),
            st.tuples(st.sampled_from(("sk-", "sk-proj-")), _keyish(), _s(_b64url, 4)).map("".join),
        ),
        st.tuples(
            st.just("anthropic"),
            st.tuples(_keyish(), _s(_b64url, 0)).map(lambda p: "sk-ant-api03-" + "".join(p)),
        ),
        st.tuples(st.just("google"), _s(_b64url, 35, 35).map(lambda s: "AIza" + s)),
        st.tuples(
            st.just("github"),
            st.tuples(st.sampled_from(("ghp_", "gho_", "ghs_")), _s(_alnum, 30)).map("".join),
        ),
        st.tuples(
            st.just("aws"),
            _s(string.ascii_uppercase + string.digits, 16, 16).map(lambda s: "AKIA" + s),
        ),
        st.tuples(
            st.just("slack"),
            st.tuples(
                st.sampled_from(("xoxb-", "xoxp-")), st.sampled_from("0123456789"), _s(_alnum, 10)
            ).map("".join),
        ),
        st.tuples(
            st.just("jwt"),
            st.tuples(_s(_b64url, 8), _s(_b64url, 8), _s(_b64url, 8)).map(
                lambda p: f"eyJ{p[0]}.eyJ{p[1]}.{p[2]}"
            ),
        ),
        # A bearer token holds a digit (prose after "bearer" does not).
        st.tuples(
            st.just("bearer"),
            st.tuples(_s(_alnum + "._~+/-", 8), st.sampled_from("0123456789"), _s(_alnum, 7)).map(
                "".join
            ),
        ),
        st.tuples(
            st.just("email"),
            st.tuples(
                _s(_alnum + "._%+-", 1, 10).filter(lambda s: s[0] in _alnum),
                _s(string.ascii_lowercase + string.digits, 1, 8),
                st.one_of(_s(string.ascii_lowercase, 2, 2), st.sampled_from(EMAIL_TLDS.split())),
            ).map(lambda p: f"{p[0]}@{p[1]}.{p[2]}"),
        ),
    )


SecretText = tuple[str, list[str]]

_filler = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        (
            '"api_key": "',
            '", "token": "x',
            '{"password":"',
            "Authorization: ",
            "aws_secret_access_key=",
            " (12) 345 6789",
            ".b@c.de",
            "555-123-4567",
            "Bearer ",
            '\\"secret\\": \\"',
        )
    ),
)


@st.composite
def secret_texts(draw: st.DrawFn, *, separated: bool) -> SecretText:
    """Text with secrets embedded, and the secrets.

    With ``separated`` each secret is set off by whitespace, the way it
    would stand in a prompt, header dump or JSON string; otherwise secrets
    and filler abut in any way."""
    pieces: list[str] = []
    found: list[str] = []
    for _ in range(draw(st.integers(1, 5))):
        if draw(st.booleans()):
            pieces.append(draw(_filler))
        kind, secret = draw(secrets())
        shown = "Bearer " + secret if kind == "bearer" else secret
        found.append(secret)
        if separated:
            pieces.append(draw(st.sampled_from((" ", "\n", "\t"))) + shown)
            pieces.append(draw(st.sampled_from((" ", "\n", "\t", "\r\n"))))
        else:
            pieces.append(shown)
    return "".join(pieces), found


# -- credentials, and their echoes ---------------------------------------------

#: Characters a credential may hold: letters and digits, those that JSON,
#: URLs, forms and HTML escape, a space, and some past ASCII (one past
#: U+FFFF: a JSON surrogate pair).
_CREDENTIAL_CHARS = (
    string.ascii_letters + string.digits + " +/=-_.~!$&'()*,:@%#?[]<>\"\\\u00e9\u20ac\U0001f600"
)


@st.composite
def credential_values(draw: st.DrawFn) -> str:
    """A credential of no known shape, 9 to 30 characters.  It starts with
    ``Q7`` and ends with ``z``, which no cassette line holds by itself (so
    finding it there means it leaked), and never with a space (a header
    value's ends are trimmed)."""
    return "Q7" + draw(st.text(_CREDENTIAL_CHARS, min_size=6, max_size=27)) + "z"


def _hex(draw: st.DrawFn, number: int, width: int) -> str:
    digits = f"{number:0{width}x}"
    return digits.upper() if draw(st.booleans()) else digits


def _units(char: str) -> list[int]:
    """The UTF-16 code units of ``char`` (two for a surrogate pair)."""
    data = char.encode("utf-16-be", "surrogatepass")
    return [data[i] << 8 | data[i + 1] for i in range(0, len(data), 2)]


def _json_escaped(draw: st.DrawFn, text: str) -> str:
    """``text`` inside a JSON string: any character may be a ``\\uXXXX``
    escape (either case; a surrogate pair past U+FFFF), ``/`` may be
    ``\\/``; a quote and a backslash always are escaped."""
    out = []
    for char in text:
        short = {"/": "\\/", '"': '\\"', "\\": "\\\\"}.get(char)
        kinds = ["u"] + ([short] if short else []) + ([] if char in '"\\' else [char])
        kind = draw(st.sampled_from(kinds))
        out.append("".join(f"\\u{_hex(draw, u, 4)}" for u in _units(char)) if kind == "u" else kind)
    return "".join(out)


def _percent(draw: st.DrawFn, text: str, *, plus: bool) -> str:
    """``text`` percent-encoded (either case), any character or all but
    ``%`` itself always; with ``plus``, a space as ``+`` (a form or a
    query), and ``+`` encoded."""
    out = []
    for char in text:
        if plus and char == " ":
            out.append("+")
        elif char in ("+%" if plus else "%") or draw(st.booleans()):
            out.append("".join(f"%{_hex(draw, b, 2)}" for b in char.encode()))
        else:
            out.append(char)
    return "".join(out)


_ENTITIES: dict[str, list[str]] = {}
for _name, _value in html.entities.html5.items():
    if _name.endswith(";"):
        _ENTITIES.setdefault(_value, []).append(_name)


def _html(draw: st.DrawFn, text: str) -> str:
    """``text`` with any character an HTML entity: named, decimal (leading
    zeros or not) or hexadecimal (either case)."""
    out = []
    for char in text:
        kinds = ["decimal", "hex"] + (["named"] if char in _ENTITIES else [])
        kinds += [] if char == "&" else ["plain"]  # an escaper always escapes "&"
        kind = draw(st.sampled_from(kinds))
        zeros = "0" * draw(st.integers(0, 2))
        if kind == "decimal":
            out.append(f"&#{zeros}{ord(char)};")
        elif kind == "hex":
            out.append(f"&#{draw(st.sampled_from('xX'))}{zeros}{_hex(draw, ord(char), 1)};")
        elif kind == "named":
            out.append("&" + draw(st.sampled_from(_ENTITIES[char])))
        else:
            out.append(char)
    return "".join(out)


def _base64(draw: st.DrawFn, text: str) -> str:
    """``text`` inside a larger base64 text, at any of the three byte
    alignments: the standard or URL alphabet, padded or not, its ``/``
    then maybe written ``\\/`` (a JSON string) or percent-encoded."""
    data = draw(st.binary(max_size=5)) + text.encode() + draw(st.binary(max_size=5))
    urlsafe = draw(st.booleans())
    encoded = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(data).decode()
    if draw(st.booleans()):
        encoded = encoded.rstrip("=")
    then = draw(st.sampled_from(["plain", "json", "percent"]))
    if then == "json":
        return encoded.replace("/", "\\/")
    if then == "percent":
        return "".join(f"%{_hex(draw, ord(c), 2)}" if c in "+/=" else c for c in encoded)
    return encoded


#: How an upstream may write a credential back: name -> the spelling.
ECHO_TRANSFORMS = {
    "as-is": lambda draw, text: text,
    "json-escapes": _json_escaped,
    "percent": lambda draw, text: _percent(draw, text, plus=False),
    "plus-for-space": lambda draw, text: _percent(draw, text, plus=True),
    "html-entities": _html,
    "base64": _base64,
}


@st.composite
def echoes(draw: st.DrawFn, value: str) -> tuple[str, str]:
    """A transform of the family, and ``value`` as it writes it."""
    name = draw(st.sampled_from(sorted(ECHO_TRANSFORMS)))
    return name, ECHO_TRANSFORMS[name](draw, value)


# -- assets: large base64 payloads anywhere a line holds one ----------------------

#: The threshold the asset properties split at: small, so payloads stay small.
ASSET_THRESHOLD = 128


def _payload_strings(data: bytes) -> st.SearchStrategy[str]:
    """``data`` as a string a body carries it in: bare base64, a data URL,
    base64 with line breaks (not canonical: stays inline), or glued to a
    word (no run of its own)."""
    text = base64.b64encode(data).decode("ascii")
    return st.sampled_from(
        (
            text,
            "data:image/png;base64," + text,
            "data:audio/wav;codec=pcm;base64," + text,
            text.rstrip("="),
            "\n".join(text[i : i + 76] for i in range(0, len(text), 76)),
            "x" + text,
            "before " + text + " after " + text,
        )
    )


_payloads = st.one_of(
    st.binary(min_size=ASSET_THRESHOLD, max_size=4 * ASSET_THRESHOLD),
    st.binary(max_size=ASSET_THRESHOLD // 2),
    st.sampled_from((b"\x89PNG\r\n\x1a\n", b"RIFF\0\0\0\0WAVE", b"\xff\xd8\xff")).flatmap(
        lambda magic: st.binary(min_size=ASSET_THRESHOLD).map(lambda rest: magic + rest)
    ),
)


@st.composite
def _with_payloads(draw: st.DrawFn) -> JSONValue:
    """A JSON value with base64 payloads at random paths, beside the
    fields vision and realtime requests name them with."""
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.text(max_size=10),
        _payloads.flatmap(_payload_strings),
    )
    value = draw(
        st.recursive(
            leaves,
            lambda inner: st.one_of(
                st.lists(inner, max_size=3),
                st.dictionaries(
                    st.sampled_from(
                        ("data", "url", "audio", "delta", "type", "mime_type", "x", "asset:")
                    ),
                    inner,
                    max_size=4,
                ),
            ),
            max_leaves=8,
        )
    )
    return {"type": draw(st.sampled_from(("response.output_audio.delta", "image"))), "v": value}


@st.composite
def _payload_bodies(draw: st.DrawFn) -> bytes:
    """A body that may carry payloads: JSON in any style, raw bytes (a file
    upload), text holding base64 (an SSE event, a multipart part)."""
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return draw(json_bodies(_with_payloads()))
    if kind == 1:
        return draw(_payloads)
    if kind == 2:
        text = draw(_payloads.flatmap(_payload_strings))
        return f'data: {{"delta":"{text}"}}\n\n'.encode()
    part = draw(_payloads)
    return (
        b'--b\r\ncontent-disposition: form-data; name="file"; filename="a.png"\r\n'
        b"content-type: image/png\r\n\r\n" + part + b"\r\n--b--\r\n"
    )


@st.composite
def asset_interactions(draw: st.DrawFn) -> Interaction:
    """Interactions whose bodies, stream frames and WebSocket messages hold
    base64 payloads over and under :data:`ASSET_THRESHOLD`, at random paths."""
    base = draw(interactions())
    request = RecordedRequest(
        base.request.method, base.request.path, base.request.query, draw(_payload_bodies())
    )
    if draw(st.booleans()):
        messages = tuple(
            WebSocketMessage(
                draw(st.sampled_from(("client", "server"))),
                float(i),
                data,
                binary=binary,
            )
            for i, (data, binary) in enumerate(
                draw(
                    st.lists(
                        st.one_of(
                            _payload_bodies().map(lambda b: (b, False)),
                            _payloads.map(lambda b: (b, True)),
                        ),
                        max_size=3,
                    )
                )
            )
        )
        # text messages are UTF-8
        messages = tuple(
            m if m.binary or _utf8(m.data) else WebSocketMessage(m.sender, m.at_ms, m.data, True)
            for m in messages
        )
        response = RecordedResponse(101, (), stream="websocket")
        return dataclasses.replace(
            base, request=request, response=response, websocket=WebSocketLog(messages)
        )
    if draw(st.booleans()):
        frames = tuple(
            (float(i), body) for i, body in enumerate(draw(st.lists(_payload_bodies(), max_size=3)))
        )
        response = RecordedResponse(200, (), stream="sse", frames=frames, end_ms=float(len(frames)))
    else:
        response = RecordedResponse(200, (), body=draw(_payload_bodies()))
    return dataclasses.replace(base, request=request, response=response)


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
