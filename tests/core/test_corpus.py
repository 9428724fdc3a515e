"""Real recorded traffic from ../shared/corpus, driven through the core.

Every vcrpy cassette of the corpus (recordings other projects made of real
OpenAI, Anthropic, Gemini, Ollama... traffic) is replayed *into* a recording
session as if it were the upstream: the response head, then the body in
several splittings (whole, a byte at a time, random pieces).  The line the
core writes must load back, round-trip byte for byte, hold SSE events
byte-exact, and replay the original (decoded) body.

The corpus is not part of the repository: without ../shared/corpus this
module is skipped.
"""

from __future__ import annotations

import gzip
import json
import random
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

import pytest

from reel_core import (
    Cassette,
    Config,
    EndOfResponse,
    Engine,
    Forward,
    Frame,
    Interaction,
    Mode,
    Recorded,
    Redactor,
    Replay,
    Request,
    ResponseHead,
    Signal,
)
from tests.corpus import CORPUS, NO_CORPUS

from ._helpers import pull, random_split

if not (CORPUS / "MANIFEST.jsonl").is_file():
    pytest.skip(NO_CORPUS, allow_module_level=True)

import yaml  # only needed with a corpus

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # both read !!binary
T0 = 1000.0


@dataclass(frozen=True)
class Exchange:
    """One corpus interaction, as the core would see it live."""

    file: str
    index: int
    request: Request
    status: int
    headers: tuple[tuple[bytes, bytes], ...]
    #: The body bytes as they came off the wire (still encoded).
    wire: bytes
    #: The body after content decoding.
    decoded: bytes
    #: The content-encoding the core must decode (``None``: identity).
    encoding: str | None
    #: The manifest's label for this interaction (``sse``, ``ndjson``...).
    label: str

    @property
    def id(self) -> str:
        return f"{self.file}#{self.index}"

    @property
    def content_type(self) -> str:
        for k, v in self.headers:
            if k.lower() == b"content-type":
                return v.decode("latin-1").lower()
        return ""


def _header_pairs(headers: Any) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for name, values in (headers or {}).items():
        for value in values if isinstance(values, list) else [values]:
            pairs.append((str(name), str(value)))
    return pairs


def _body_bytes(body: Any) -> bytes:
    if body is None:
        return b""
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, dict) and "string" in body:
        return _body_bytes(body["string"])
    return json.dumps(body, separators=(",", ":")).encode()


def _decode(data: bytes, encoding: str) -> bytes | None:
    """The decoded body, or ``None`` when the bytes are not so encoded
    (vcrpy's decode_compressed_response stores them decoded)."""
    try:
        if encoding in ("gzip", "x-gzip"):
            return gzip.decompress(data)
        if encoding == "deflate":
            return zlib.decompress(data)
    except (OSError, zlib.error, EOFError):
        return None
    return None


def _exchange(file: str, index: int, item: Any, label: str) -> Exchange | None:
    req, resp = item.get("request"), item.get("response")
    if not isinstance(req, dict) or not isinstance(resp, dict):
        return None
    req_body = _body_bytes(req["body"] if "body" in req else req.get("parsed_body"))
    if "body" in resp:
        wire = _body_bytes(resp["body"])
    elif "parsed_body" in resp:
        wire = _body_bytes(resp["parsed_body"])
    else:
        return None
    headers = _header_pairs(resp.get("headers"))
    encoding = None
    decoded = wire
    for name, value in headers:
        if name.lower() == "content-encoding" and value.strip().lower() not in ("", "identity"):
            got = _decode(wire, value.strip().lower())
            if got is None:  # stored decoded: the header no longer applies
                headers = [h for h in headers if h[0].lower() != "content-encoding"]
            else:
                encoding, decoded = value.strip().lower(), got
            break
    if encoding is None:
        headers = [h for h in headers if h[0].lower() != "content-length"]
    status = resp.get("status", {})
    code = status.get("code") if isinstance(status, dict) else status
    request = Request(
        str(req.get("method", "GET")),
        str(req["uri"]),
        tuple(
            (k.encode("latin-1", "replace"), v.encode("utf-8"))
            for k, v in _header_pairs(req.get("headers"))
        ),
        req_body,
    )
    return Exchange(
        file=file,
        index=index,
        request=request,
        status=int(code) if isinstance(code, (int, str)) else 0,
        headers=tuple((k.encode("latin-1"), v.encode("utf-8")) for k, v in headers),
        wire=wire,
        decoded=decoded,
        encoding=encoding,
        label=label,
    )


@cache
def corpus() -> dict[str, list[Exchange]]:
    """Every vcrpy cassette of the corpus, by file (relative path)."""
    out: dict[str, list[Exchange]] = {}
    for line in (CORPUS / "MANIFEST.jsonl").read_text().splitlines():
        entry = json.loads(line)
        if entry.get("format") != "vcrpy":
            continue
        path = CORPUS / entry["file"]
        if not path.is_file():
            continue
        try:
            doc = yaml.load(path.read_bytes(), Loader=_Loader)
        except yaml.YAMLError:  # e.g. !!python/... tags: not ours to read
            continue
        items = doc.get("interactions") if isinstance(doc, dict) else None
        if not isinstance(items, list):
            continue
        labels = [str(f.get("stream_kind", "")) for f in entry.get("interactions", [])]
        if len(labels) != len(items):
            labels = [""] * len(items)
        exchanges = []
        for i, item in enumerate(items):
            ex = _exchange(entry["file"], i, item, labels[i])
            if ex is not None:
                exchanges.append(ex)
        if exchanges:
            out[entry["file"]] = exchanges
    return out


def all_exchanges() -> Iterator[Exchange]:
    for exchanges in corpus().values():
        yield from exchanges


# -- an independent SSE event cutter (bytes.splitlines knows LF, CR, CRLF) -------


def sse_events(data: bytes) -> list[bytes]:
    events: list[bytes] = []
    current = b""
    for line in data.splitlines(keepends=True):
        current += line
        if line in (b"\n", b"\r", b"\r\n"):
            events.append(current)
            current = b""
    if current:
        events.append(current)
    return events


def ends_an_event(frame: bytes) -> bool:
    return frame.splitlines(keepends=True)[-1] in (b"\n", b"\r", b"\r\n")


# -- driving the core ------------------------------------------------------------

REDACTOR = Redactor()
CONFIG = Config(mode=Mode.RECORD, redactor=REDACTOR)


@dataclass
class Run:
    forwarded: bytes
    head: ResponseHead
    recorded: Recorded


def record(ex: Exchange, chunks: list[bytes], cassette: Cassette | None = None) -> Run:
    session = Engine(cassette if cassette is not None else Cassette("corpus"), CONFIG)
    session.receive_request(ex.request)
    events, signal = pull(session)
    assert signal is Signal.PAUSED
    (forward,) = events
    assert isinstance(forward, Forward)
    assert forward.record
    session.upstream_head(ex.status, list(ex.headers), mono=T0, sent_at=T0 - 0.25, wall=1.7e9)
    for i, chunk in enumerate(chunks):
        session.upstream_data(chunk, mono=T0 + 0.002 * (i + 1))
    session.upstream_end(mono=T0 + 0.002 * (len(chunks) + 1))
    events, signal = pull(session)
    assert signal is Signal.PAUSED
    head, *body, end = events
    recorded = session.record()
    assert isinstance(head, ResponseHead)
    assert head.status == ex.status
    assert all(isinstance(f, Frame) and f.at is None for f in body)
    assert end == EndOfResponse()
    assert isinstance(recorded, Recorded)
    assert recorded.line.endswith(b"\n")
    assert recorded.line.count(b"\n") == 1
    return Run(b"".join(f.data for f in body if isinstance(f, Frame)), head, recorded)


def expected_content(ex: Exchange, kind: str | None) -> bytes:
    """What the cassette must hold: the decoded body, redacted as the core
    redacts (per SSE event, or whole) -- for nearly all corpus bodies that
    is the decoded body itself."""
    if kind == "sse":
        return b"".join(REDACTOR.data(e) for e in sse_events(ex.decoded))
    return REDACTOR.data(ex.decoded)


def chunkings(ex: Exchange) -> list[list[bytes]]:
    data = ex.wire
    rng = random.Random(zlib.crc32(ex.id.encode()))
    out = [[data]]
    if len(data) <= 1024:
        out.append([data[i : i + 1] for i in range(len(data))])
    out.append(random_split(data, rng, rng.randint(2, 12)))
    out.append(random_split(data, rng, rng.randint(20, 200)))
    return out


def load_line(line: bytes) -> Interaction:
    loaded = Cassette.loads(line, name="corpus.jsonl")
    (stored,) = loaded.interactions()
    assert stored.to_line() == line  # dump -> load -> dump is identical
    assert Cassette.loads(loaded.dumps()).dumps() == loaded.dumps()
    return stored


def check_replay(ex: Exchange, line: bytes, stored: Interaction) -> None:
    session = Engine(Cassette.loads(line), Config(mode=Mode.REPLAY))
    session.receive_request(ex.request)
    events, signal = pull(session)
    assert signal is Signal.PAUSED
    replay, head, *frames, end = events
    assert isinstance(replay, Replay)
    assert replay.interaction_id == stored.id
    assert isinstance(head, ResponseHead)
    assert head.status == ex.status
    names = [k for k, _ in head.headers]
    if ex.encoding is not None:
        assert b"content-encoding" not in names  # stored decoded, replayed decoded
    body = b"".join(f.data for f in frames if isinstance(f, Frame))
    assert body == stored.response.content
    if stored.response.stream is None:
        assert dict(head.headers)[b"content-length"] == str(len(body)).encode()
        assert names.count(b"content-length") == 1
    else:
        assert b"content-length" not in names
        offsets = [f.at or 0.0 for f in frames if isinstance(f, Frame)]
        assert offsets == [at / 1000.0 for at, _ in stored.response.frames]
        assert offsets == sorted(offsets)
    assert isinstance(end, EndOfResponse)


FILES = sorted(corpus())


def test_the_corpus_has_what_these_tests_need() -> None:
    exchanges = list(all_exchanges())
    assert len(FILES) >= 100
    assert len(exchanges) >= 250
    assert sum(ex.encoding == "gzip" for ex in exchanges) >= 10
    for category in CATEGORIES:
        assert CATEGORIES[category](), f"no {category} recording in the corpus"


@pytest.mark.parametrize("file", FILES, ids=FILES)
def test_corpus_recording_round_trips(file: str) -> None:
    for ex in corpus()[file]:
        runs = [record(ex, chunks) for chunks in chunkings(ex)]
        first = runs[0]
        stored = load_line(first.recorded.line)
        kind = stored.response.stream
        assert stored.response.cut is None
        assert stored.response.status == ex.status
        for run in runs:
            # forwarded to the client unchanged (still encoded), whatever the chunks
            assert run.forwarded == ex.wire
            assert run.head == first.head
            again = load_line(run.recorded.line)
            assert again.response.stream == kind
            assert again.response.content == stored.response.content
            assert again.response.headers == stored.response.headers
            if kind == "sse":  # SSE events do not depend on how bytes arrived
                assert [d for _, d in again.response.frames] == [
                    d for _, d in stored.response.frames
                ]
        expected = expected_content(ex, kind)
        assert stored.response.content == expected
        if REDACTOR.data(ex.decoded) == ex.decoded:
            assert stored.response.content == ex.decoded  # byte-exact
        if kind == "sse":
            frames = [d for _, d in stored.response.frames]
            assert len(frames) == len(sse_events(ex.decoded))
            assert all(ends_an_event(f) for f in frames[:-1])
            assert stored.meta["frames"] == len(frames)
        header_names = [k for k, _ in stored.response.headers]
        if ex.encoding is not None:
            assert "content-encoding" not in header_names
        assert not set(header_names) & {"set-cookie", "content-length", "transfer-encoding"}
        check_replay(ex, first.recorded.line, stored)


@pytest.mark.parametrize("file", FILES, ids=FILES)
def test_corpus_file_as_one_cassette(file: str) -> None:
    """Record a whole file on one connection, then replay it in order."""
    exchanges = corpus()[file]
    cassette = Cassette("one.jsonl")
    contents = []
    for ex in exchanges:
        run = record(ex, [ex.wire], cassette)
        contents.append(load_line(run.recorded.line).response.content)
    data = cassette.dumps()
    assert data.count(b"\n") == len(exchanges) + 1
    session = Engine(Cassette.loads(data, name="one.jsonl"), Config(repeat=False))
    for ex, content in zip(exchanges, contents, strict=True):
        session.receive_request(ex.request)
        events, _ = pull(session)
        assert isinstance(events[0], Replay), ex.id
        assert b"".join(e.data for e in events if isinstance(e, Frame)) == content
        session.start_next_cycle()


# -- what each kind of stream must look like -----------------------------------


def _recorded(ex: Exchange) -> Interaction:
    return load_line(record(ex, [ex.wire]).recorded.line)


def _path(ex: Exchange) -> str:
    return ex.request.path


def _openai_chat_sse() -> list[Exchange]:
    return [
        ex
        for ex in all_exchanges()
        if _path(ex).endswith("/chat/completions")
        and ex.content_type.startswith("text/event-stream")
        and b"data: [DONE]" in ex.decoded
    ]


def _responses_sse() -> list[Exchange]:
    return [
        ex
        for ex in all_exchanges()
        if _path(ex).endswith("/responses")
        and ex.content_type.startswith("text/event-stream")
        and ex.decoded.startswith(b"event: response.")
    ]


def _anthropic_sse() -> list[Exchange]:
    return [
        ex
        for ex in all_exchanges()
        if _path(ex) == "/v1/messages" and ex.content_type.startswith("text/event-stream")
    ]


def _gemini_sse() -> list[Exchange]:
    return [
        ex
        for ex in all_exchanges()
        if ":streamGenerateContent" in _path(ex) and ("alt", "sse") in ex.request.query
    ]


def _gemini_json_array() -> list[Exchange]:
    return [
        ex
        for ex in all_exchanges()
        if ":streamGenerateContent" in _path(ex)
        and ("alt", "sse") not in ex.request.query
        and ex.decoded.lstrip().startswith(b"[")
    ]


def _ndjson() -> list[Exchange]:
    return [ex for ex in all_exchanges() if "ndjson" in ex.content_type]


def _gzip() -> list[Exchange]:
    return [ex for ex in all_exchanges() if ex.encoding == "gzip"]


CATEGORIES = {
    "openai-chat-sse": _openai_chat_sse,
    "openai-responses-sse": _responses_sse,
    "anthropic-sse": _anthropic_sse,
    "gemini-sse": _gemini_sse,
    "gemini-json-array": _gemini_json_array,
    "ndjson": _ndjson,
    "gzip": _gzip,
}


def _ids(ex: object) -> str:
    assert isinstance(ex, Exchange)
    return ex.id


@pytest.mark.parametrize("ex", _openai_chat_sse(), ids=_ids)
def test_openai_chat_stream_ends_with_done(ex: Exchange) -> None:
    stored = _recorded(ex)
    assert stored.response.stream == "sse"
    frames = [d for _, d in stored.response.frames if d.strip()]
    assert frames[-1].strip() == b"data: [DONE]"
    assert all(f.lstrip().startswith((b"data:", b":")) for f in frames)


@pytest.mark.parametrize("ex", _responses_sse(), ids=_ids)
def test_openai_responses_stream_has_typed_events(ex: Exchange) -> None:
    stored = _recorded(ex)
    assert stored.response.stream == "sse"
    for _, frame in stored.response.frames:
        if not frame.strip():
            continue
        name, _, rest = frame.partition(b"\n")
        assert name.startswith(b"event: response."), frame[:80]
        assert rest.startswith(b"data: ")
        payload = json.loads(rest[len(b"data: ") :].split(b"\n")[0])
        assert payload["type"] == name[len(b"event: ") :].decode()


@pytest.mark.parametrize("ex", _anthropic_sse(), ids=_ids)
def test_anthropic_stream_events(ex: Exchange) -> None:
    stored = _recorded(ex)
    assert stored.response.stream == "sse"
    names = [d.partition(b"\n")[0] for _, d in stored.response.frames if d.strip()]
    assert names[0] == b"event: message_start"
    assert names[-1] == b"event: message_stop"
    assert all(n.startswith(b"event: ") for n in names)


def test_anthropic_pings_are_kept_as_frames() -> None:
    pinged = [ex for ex in _anthropic_sse() if b"event: ping" in ex.decoded]
    assert pinged
    for ex in pinged:
        frames = [d for _, d in _recorded(ex).response.frames]
        assert b'event: ping\ndata: {"type": "ping"}\n\n' in frames


@pytest.mark.parametrize("ex", _gemini_sse(), ids=_ids)
def test_gemini_sse_keeps_crlf_framing(ex: Exchange) -> None:
    stored = _recorded(ex)
    assert stored.response.stream == "sse"
    frames = [d for _, d in stored.response.frames]
    assert b"\r\n" in ex.decoded
    assert all(f.endswith(b"\r\n\r\n") for f in frames)
    for frame in frames:
        assert frame.startswith(b"data: ")
        json.loads(frame[len(b"data: ") :])


@pytest.mark.parametrize("ex", _gemini_json_array(), ids=_ids)
def test_gemini_json_array_is_kept_as_timed_chunks(ex: Exchange) -> None:
    chunks = random_split(ex.wire, random.Random(3), 8)
    stored = load_line(record(ex, chunks).recorded.line)
    assert stored.response.stream == "chunks"
    assert stored.response.content == ex.decoded
    assert isinstance(json.loads(stored.response.content), list)
    offsets = [at for at, _ in stored.response.frames]
    assert offsets == sorted(offsets)
    assert len(offsets) >= 1


@pytest.mark.parametrize("ex", _ndjson(), ids=_ids)
def test_ndjson_is_kept_as_timed_chunks(ex: Exchange) -> None:
    lines = ex.decoded.splitlines(keepends=True)
    stored = load_line(record(ex, lines).recorded.line)
    assert stored.response.stream == "chunks"
    # one chunk per line as they arrived, each stamped later than the last
    assert [d for _, d in stored.response.frames] == lines
    assert [at for at, _ in stored.response.frames] == [2.0 * (i + 1) for i in range(len(lines))]
    for line in lines:
        json.loads(line)


@pytest.mark.parametrize("ex", _gzip(), ids=_ids)
def test_gzip_bodies_are_stored_and_replayed_decoded(ex: Exchange) -> None:
    assert ex.wire[:2] == b"\x1f\x8b"
    stored = _recorded(ex)
    assert stored.response.content == REDACTOR.data(ex.decoded) or stored.response.stream
    assert "content-encoding" not in dict(stored.response.headers)
    line = stored.to_line()
    assert b"\x1f\x8b" not in line
    session = Engine(Cassette.loads(line))
    session.receive_request(ex.request)
    events, _ = pull(session)
    head = events[1]
    assert isinstance(head, ResponseHead)
    headers = dict(head.headers)
    assert b"content-encoding" not in headers
    body = b"".join(e.data for e in events if isinstance(e, Frame))
    assert body == stored.response.content
    if stored.response.stream is None:
        assert headers[b"content-length"] == str(len(body)).encode()
