"""Request bodies that are not plain JSON: content-encoded bodies (decoded
before redaction and keying), form-urlencoded bodies (redacted and keyed by
field) and multipart bodies (keyed and diffed by part, never by boundary)."""

from __future__ import annotations

import gzip
import json
import sys
import types
import zlib
from typing import Any

import pytest

from reel_core import (
    Cassette,
    Config,
    Engine,
    Forward,
    Limits,
    MatchConfig,
    MatchMode,
    Miss,
    Mode,
    Recorded,
    RecordedRequest,
    Redactor,
    Replay,
    Request,
    Signal,
)
from reel_core._body import ContentDecoder, decode_request_body
from reel_core._cassette import Interaction
from reel_core._decode import decode_content
from reel_core._forms import (
    FORM,
    MULTIPART,
    body_kind,
    canonical_form,
    canonical_multipart,
    form_fields,
    multipart_value,
    parse_multipart,
)
from reel_core._match import canonical_body
from reel_core._miss import form_diff, request_diff

from ._helpers import pull

SECRET = "sk-proj-" + "Q7w8E9r0" * 4
CHAT = "/v1/chat/completions"
NORMALIZED = MatchConfig()
EXACT = MatchConfig(MatchMode.EXACT)
PLAIN = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()


def post(
    body: bytes, *headers: tuple[bytes, bytes], target: str = CHAT, method: str = "POST"
) -> Request:
    return Request(method, target, ((b"host", b"api.openai.com"), *headers), body)


def record(req: Request, cassette: Cassette | None = None, **config: Any) -> Recorded:
    """``req`` recorded (the upstream answers ``{"ok":true}``)."""
    session = Engine(cassette if cassette is not None else Cassette(), Config(**config))
    session.receive_request(req)
    events, _ = pull(session)
    assert isinstance(events[0], Forward)
    assert events[0].request is req  # forwarded exactly as sent
    session.upstream_head(200, [(b"content-type", b"application/json")], mono=1.0)
    session.upstream_data(b'{"ok":true}', mono=1.0)
    session.upstream_end(mono=1.0)
    _, signal = pull(session)
    assert signal is Signal.PAUSED
    recorded = session.record()
    assert isinstance(recorded, Recorded)
    return recorded


def line_request(recorded: Recorded) -> dict[str, Any]:
    request: dict[str, Any] = json.loads(recorded.line)["request"]
    return request


def decision(cassette: Cassette, req: Request, **config: Any) -> Replay | Miss:
    session = Engine(cassette, Config(**config))
    session.receive_request(req)
    event = session.next_event()
    assert isinstance(event, (Replay, Miss))
    return event


# -- decoding ---------------------------------------------------------------------


def gz(data: bytes, mtime: int = 0) -> bytes:
    return gzip.compress(data, mtime=mtime)


def raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize(
    ("packed", "encoding", "name"),
    [
        (gz(PLAIN), b"gzip", "gzip"),
        (gz(PLAIN), b" X-GZIP ", "x-gzip"),
        (gz(PLAIN[:10]) + gz(PLAIN[10:]), b"gzip", "gzip"),  # two members
        (zlib.compress(PLAIN), b"deflate", "deflate"),
        (raw_deflate(PLAIN), b"Deflate", "deflate"),
        (gz(zlib.compress(PLAIN)), b"deflate, gzip", "deflate, gzip"),
        (gz(PLAIN), b"identity, gzip,", "gzip"),
    ],
)
def test_encoded_request_bodies_decode(packed: bytes, encoding: bytes, name: str) -> None:
    assert decode_request_body(packed, encoding, 1 << 20) == (PLAIN, name, None)


def test_brotli_request_bodies_decode() -> None:
    brotli = pytest.importorskip("brotli", reason="pip install brotli (in the test extra)")
    assert decode_request_body(brotli.compress(PLAIN), b"br", 1 << 20) == (PLAIN, "br", None)
    packed = brotli.compress(b"x" * 100_000)
    body, name, error = decode_request_body(packed, b"br", 1000)
    assert (body, name, error) == (packed, "br", "br body decodes to over 1000 bytes")
    body, _, error = decode_request_body(brotli.compress(PLAIN)[:-2], b"br", 1 << 20)
    assert error is not None
    assert "br body" in error


@pytest.mark.parametrize(
    ("encoding", "body"),
    [(None, gz(PLAIN)), (b"identity", b"abc"), (b" , ", b"abc"), (b"gzip", b"")],
)
def test_nothing_to_decode(encoding: bytes | None, body: bytes) -> None:
    assert decode_request_body(body, encoding, 100) == (body, None, None)


@pytest.mark.parametrize(
    ("packed", "encoding", "error"),
    [
        (b"not gzip at all", b"gzip", "corrupt gzip body"),
        (gz(PLAIN)[:-9], b"gzip", "truncated gzip body"),
        (gz(PLAIN) + b"junk", b"gzip", "corrupt gzip body"),
        (zlib.compress(PLAIN) + b"junk", b"deflate", "bytes after its end"),
        (gz(b"x" * 5000), b"gzip", "gzip body decodes to over 1000 bytes"),
        (b"abc", b"zstd", "cannot decode content-encoding 'zstd'"),
        (b"abc", b"gzip, zstd", "cannot decode content-encoding 'zstd'"),
    ],
)
def test_bodies_that_do_not_decode_are_kept_as_sent(
    packed: bytes, encoding: bytes, error: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "zstandard", None)  # zstd not installed
    body, name, why = decode_request_body(packed, encoding, 1000)
    assert body == packed
    assert name == encoding.decode().strip().lower().replace(", ", ", ")
    assert why is not None
    assert error in why


def test_a_bomb_is_refused_without_inflating_it() -> None:
    bomb = gz(b"\0" * (64 << 20))  # 64 MiB of zeros in ~64 KB
    assert len(bomb) < 100_000
    body, _, error = decode_request_body(bomb, b"gzip", 1 << 20)
    assert body == bomb
    assert error == "gzip body decodes to over 1048576 bytes"


def test_br_without_brotli_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "brotli", None)
    monkeypatch.setitem(sys.modules, "brotlicffi", None)
    with pytest.raises(ValueError, match=r"pip install 'reel-llm\[brotli\]'"):
        decode_content(b"\x8b\x02\x80", "br", 100)


def test_a_brotli_that_cannot_cap_its_output_is_not_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A brotli before 1.2 decodes a body whole, however large: Reel does
    not decode with it (the body is flagged instead)."""

    class Decompressor:
        def process(self, data: bytes) -> bytes:  # pragma: no cover - never called
            return data.upper()

    fake = types.ModuleType("brotlicffi")
    fake.Decompressor = Decompressor  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "brotli", None)
    monkeypatch.setitem(sys.modules, "brotlicffi", fake)
    with pytest.raises(ValueError, match=r"brotli 1\.2 or later"):
        decode_content(b"a" * 600, "br", 1000)


def test_decode_whole_of_identity_is_the_data() -> None:
    assert ContentDecoder("identity").decode_whole(b"abc", 1) == b"abc"


# -- encoded request bodies through a session ---------------------------------------


def gzipped_chat(content: str, mtime: int) -> Request:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": content}]})
    return post(
        gz(body.encode(), mtime),
        (b"content-type", b"application/json"),
        (b"content-encoding", b"gzip"),
    )


def test_a_gzip_request_body_is_stored_decoded_and_redacted() -> None:
    recorded = record(gzipped_chat(f"key {SECRET}", mtime=1), mode=Mode.RECORD)
    assert SECRET.encode() not in recorded.line
    request = line_request(recorded)
    assert request["encoding"] == "gzip"
    assert "encoding_error" not in request
    assert request["body"]["json"]["messages"][0]["content"] == "key [REDACTED:openai-key]"
    # another mtime in the gzip header, the same request: it replays
    cassette = Cassette.loads(recorded.line)
    assert isinstance(decision(cassette, gzipped_chat(f"key {SECRET}", mtime=99)), Replay)
    # the same body sent plain keys alike: the encoding is not part of the key
    plain = json.loads(gzip.decompress(gzipped_chat(f"key {SECRET}", 5).body))
    req = post(json.dumps(plain).encode(), (b"content-type", b"application/json"))
    assert decision(cassette, req).key == recorded.key  # type: ignore[union-attr]


def test_a_request_body_that_does_not_decode_is_kept_as_sent_but_its_secrets() -> None:
    junk = b"\x1f\x8b\x08\x00 this is not gzip " + SECRET.encode()
    req = post(junk, (b"content-encoding", b"gzip"), (b"content-type", b"application/json"))
    recorded = record(req, mode=Mode.RECORD)
    request = line_request(recorded)
    assert request["encoding"] == "gzip"
    assert request["encoding_error"].startswith("corrupt gzip body")
    assert "base64" in request["body"]
    (ix,) = Cassette.loads(recorded.line)
    # kept byte for byte but for its key (it is no UTF-8 text: it was
    # stored, key and all, before the text rules read binary bodies)
    assert ix.request.body == junk.replace(SECRET.encode(), b"[REDACTED:openai-key]")
    assert isinstance(decision(Cassette.loads(recorded.line), req), Replay)


def test_the_decoded_size_is_bounded_by_the_body_limit() -> None:
    req = gzipped_chat("x" * 5000, mtime=0)
    recorded = record(req, mode=Mode.RECORD, limits=Limits(max_body=1000))
    request = line_request(recorded)
    assert request["encoding_error"] == "gzip body decodes to over 1000 bytes"
    assert "base64" in request["body"]


def test_a_gzip_form_body_is_decoded_then_read_as_a_form() -> None:
    body = gz(b"grant_type=client_credentials&client_secret=hunter2hunter2")
    req = post(
        body,
        (b"content-type", b"application/x-www-form-urlencoded"),
        (b"content-encoding", b"gzip"),
        target="/oauth/token",
    )
    request = line_request(record(req, mode=Mode.RECORD))
    assert request["content_type"] == FORM
    assert request["body"] == {
        "text": "grant_type=client_credentials&client_secret=[REDACTED:query-secret]"
    }


def test_a_body_that_did_not_decode_is_never_read_as_a_form() -> None:
    req = post(
        b"a=1&b=2",
        (b"content-type", b"application/x-www-form-urlencoded"),
        (b"content-encoding", b"gzip"),
    )
    request = line_request(record(req, mode=Mode.RECORD))
    assert "content_type" not in request
    assert request["body"] == {"text": "a=1&b=2"}


# -- form-urlencoded -----------------------------------------------------------------

FORM_HEADER = (b"content-type", b"application/x-www-form-urlencoded; charset=utf-8")


def form_post(body: bytes, target: str = "/oauth/token") -> Request:
    return post(body, FORM_HEADER, target=target)


def test_a_form_body_is_redacted_by_field_name_keeping_order_and_encoding() -> None:
    body = (
        b"grant_type=client_credentials&client_id=reel+app&client_secret=hunter2%21x"
        b"&scope=a%20b&api_key=&note=mail+bob%40example.com"
    )
    request = line_request(record(form_post(body), mode=Mode.RECORD))
    assert request["content_type"] == FORM
    assert request["body"] == {
        "text": "grant_type=client_credentials&client_id=reel+app"
        "&client_secret=[REDACTED:query-secret]&scope=a%20b&api_key="
        "&note=mail+[REDACTED:email]"
    }


def test_form_field_names_follow_the_redactors_query_rules() -> None:
    redactor = Redactor(fields=("session_id",))
    body = b"session_id=abc123&other=abc123"
    recorded = record(form_post(body), mode=Mode.RECORD, redactor=redactor)
    assert line_request(recorded)["body"] == {
        "text": "session_id=[REDACTED:query-secret]&other=abc123"
    }


def test_form_redaction_is_idempotent_and_reported() -> None:
    plain = RecordedRequest("POST", "/t", body=b"a=1&token=xyz&&b", content_type=FORM)
    found: list[tuple[str, list[str]]] = []
    once = plain.redacted(Redactor(), lambda where, kinds: found.append((where, kinds)))
    assert once.body == b"a=1&token=[REDACTED:query-secret]&&b"
    assert ("request.body", ["query-secret"]) in found
    assert once.redacted(Redactor()).body == once.body


def test_form_bodies_match_by_fields_in_any_order() -> None:
    recorded = record(form_post(b"a=1&b=2&b=3&c=x+y"), mode=Mode.RECORD)
    cassette = Cassette.loads(recorded.line)
    assert isinstance(decision(cassette, form_post(b"c=x%20y&b=2&a=1&b=3")), Replay)
    assert isinstance(decision(cassette, form_post(b"a=1&b=2&b=3&c=x+z")), Miss)


def test_exact_mode_matches_form_bodies_byte_for_byte() -> None:
    recorded = record(form_post(b"a=1&b=2"), mode=Mode.RECORD, match=EXACT)
    cassette = Cassette.loads(recorded.line)
    assert isinstance(decision(cassette, form_post(b"a=1&b=2"), match=EXACT), Replay)
    assert isinstance(decision(cassette, form_post(b"b=2&a=1"), match=EXACT), Miss)


def test_ignored_and_drifting_fields_leave_form_keys() -> None:
    ignore = MatchConfig(MatchMode.IGNORE_FIELDS, ("nonce", "deep.path"))
    a = canonical_body(b"a=1&nonce=1", ignore, "/t", FORM)
    assert a == canonical_body(b"nonce=2&a=1", ignore, "/t", FORM)
    # "user" drifts on OpenAI paths: a form field of that name too
    assert canonical_body(b"user=u1&a=1", NORMALIZED, CHAT, FORM) == canonical_body(
        b"a=1&user=u2", NORMALIZED, CHAT, FORM
    )
    assert canonical_form(b"a=1", frozenset()) == b'form:[["a","1"]]'


def test_form_miss_reports_diff_fields() -> None:
    recorded = record(form_post(b"grant_type=a&scope=x&only=1"), mode=Mode.RECORD)
    miss = decision(Cassette.loads(recorded.line), form_post(b"grant_type=b&scope=x&new=2"))
    assert isinstance(miss, Miss)
    assert miss.report.closest is not None
    rows = [(d.path, d.kind, d.recorded, d.received) for d in miss.report.closest.diffs]
    assert rows == [
        ("form.grant_type", "changed", "a", "b"),
        ("form.only", "removed", "1", None),
        ("form.new", "added", None, "2"),
    ]


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        (b"application/x-www-form-urlencoded", b"\xff\xfe=1"),  # not UTF-8
        (b"application/json", b"a=1"),
        (b"text/plain", b"a=1"),
        (None, b"a=1"),
        (b"application/x-www-form-urlencoded", b""),
    ],
)
def test_what_is_not_read_as_a_form(content_type: bytes | None, body: bytes) -> None:
    assert body_kind(content_type, body) is None


def test_form_fields() -> None:
    assert form_fields(b"a=1&&b&c=%41+B") == [("a", "1"), ("b", ""), ("c", "A B")]
    assert form_fields(b"\xff") is None


# -- multipart -------------------------------------------------------------------------

WAV = bytes(range(256)) * 4


def multipart(
    boundary: str,
    *parts: tuple[str, str | None, str | None, bytes],
    preamble: bytes = b"",
    epilogue: bytes = b"\r\n",
) -> tuple[bytes, bytes]:
    """A multipart body and its content-type header value."""
    out = [preamble]
    for name, filename, ctype, content in parts:
        disposition = f'form-data; name="{name}"'
        if filename is not None:
            disposition += f'; filename="{filename}"'
        head = f"--{boundary}\r\nContent-Disposition: {disposition}\r\n"
        if ctype is not None:
            head += f"Content-Type: {ctype}\r\n"
        out.append(head.encode() + b"\r\n" + content + b"\r\n")
    out.append(f"--{boundary}--".encode() + epilogue)
    return b"".join(out), f"multipart/form-data; boundary={boundary}".encode()


UPLOAD = (
    ("purpose", None, None, b"fine-tune"),
    ("file", "train.jsonl", "application/jsonl", b'{"prompt": "hi"}\n'),
    ("audio", "a.wav", "audio/wav", WAV),
)


def upload(boundary: str, *parts: tuple[str, str | None, str | None, bytes]) -> Request:
    body, header = multipart(boundary, *(parts or UPLOAD))
    return post(body, (b"content-type", header), target="/v1/files")


def test_multipart_bodies_replay_whatever_their_boundary() -> None:
    recorded = record(upload("aaaa1111"), mode=Mode.RECORD)
    request = line_request(recorded)
    assert request["content_type"] == MULTIPART
    cassette = Cassette.loads(recorded.line)
    for boundary in ("bbbb2222", "----WebKitFormBoundary7MA4YWxkTrZu0gW", "x"):
        assert isinstance(decision(cassette, upload(boundary)), Replay), boundary
    exact = Cassette.loads(record(upload("cc"), mode=Mode.RECORD, match=EXACT).line)
    assert isinstance(decision(exact, upload("dd"), match=EXACT), Replay)


def test_multipart_keys_follow_the_parts() -> None:
    cassette = Cassette.loads(record(upload("b1"), mode=Mode.RECORD).line)
    purpose, file, audio = UPLOAD
    other_wav = (*audio[:3], WAV[::-1])
    renamed = (file[0], "other.jsonl", *file[2:])
    assert isinstance(decision(cassette, upload("b2", purpose, file, other_wav)), Miss)
    assert isinstance(decision(cassette, upload("b2", purpose, renamed, audio)), Miss)
    assert isinstance(decision(cassette, upload("b2", purpose, file)), Miss)
    # outside exact mode, parts of different names may come in any order
    assert isinstance(decision(cassette, upload("b2", audio, purpose, file)), Replay)
    exact = Cassette.loads(record(upload("b1"), mode=Mode.RECORD, match=EXACT).line)
    assert isinstance(decision(exact, upload("b2", audio, purpose, file), match=EXACT), Miss)


def test_parts_of_one_name_keep_their_order() -> None:
    a, b = ("tag", None, None, b"a"), ("tag", None, None, b"b")
    body_ab, _ = multipart("q", a, b)
    body_ba, _ = multipart("q", b, a)
    assert canonical_multipart(body_ab, frozenset(), exact=False) != canonical_multipart(
        body_ba, frozenset(), exact=False
    )
    assert multipart_value(body_ab) == {"tag": ["a", "b"]}
    body_aab, _ = multipart("q", a, a, b)
    assert multipart_value(body_aab) == {"tag": ["a", "a", "b"]}


def test_ignored_parts_leave_the_key() -> None:
    ignore = MatchConfig(MatchMode.IGNORE_FIELDS, ("nonce",))
    one, _ = multipart("z", ("nonce", None, None, b"1"), ("a", None, None, b"x"))
    two, _ = multipart("y", ("a", None, None, b"x"), ("nonce", None, None, b"2"))
    assert canonical_body(one, ignore, "/v1/files", MULTIPART) == canonical_body(
        two, ignore, "/v1/files", MULTIPART
    )
    assert canonical_body(one, NORMALIZED, "/v1/files", MULTIPART) != canonical_body(
        two, NORMALIZED, "/v1/files", MULTIPART
    )


def test_multipart_fields_and_text_files_are_redacted_binary_kept() -> None:
    secret_file = f'{{"key": "{SECRET}"}}\n'.encode()
    req = upload(
        "sep42",
        ("purpose", None, None, b"assistants"),
        ("api_key", None, None, b"plain-value-123"),
        ("note", None, None, b"from bob@example.com"),
        ("file", "from bob@example.com", "application/jsonl", secret_file),
        ("audio", "a.wav", "audio/wav", WAV),
    )
    recorded = record(req, mode=Mode.RECORD)
    (ix,) = Cassette.loads(recorded.line)
    value = multipart_value(ix.request.body)
    assert value is not None
    assert value["purpose"] == "assistants"
    assert value["api_key"] == "[REDACTED:query-secret]"
    assert value["note"] == "from [REDACTED:email]"
    assert value["file"] == {
        "filename": "from [REDACTED:email]",
        "content_type": "application/jsonl",
        "body": '{"key": "[REDACTED:openai-key]"}\n',
    }
    assert value["audio"]["body"].startswith(f"{len(WAV)} bytes, sha256:")
    assert ix.request.body.startswith(b"--sep42\r\n")  # the boundary as sent
    # the live request, secrets and all, replays its redacted recording
    assert isinstance(decision(Cassette.loads(recorded.line), req), Replay)


def test_binary_bodies_and_file_parts_are_scrubbed_too() -> None:
    # issue: the text rules skipped bytes that are not UTF-8 as a whole, so a
    # key inside a binary file part or an octet-stream upload reached disk
    token = b"gw1.Qm8vTz3LxR7pWn2KdY5sHj9c"  # no known shape: the request's own
    blob = WAV[:200] + b"\xe2\x82" + SECRET.encode() + WAV[:50] + token + WAV
    req = upload("sep9", ("purpose", None, None, b"x"), ("audio", "a.wav", "audio/wav", blob))
    req = Request(req.method, req.target, (*req.headers, (b"x-api-key", token)), req.body)
    recorded = record(req, mode=Mode.RECORD)
    (ix,) = Cassette.loads(recorded.line)
    assert SECRET.encode() not in ix.request.body
    assert token not in ix.request.body
    assert b"\xe2\x82[REDACTED:openai-key]" in ix.request.body
    assert WAV in ix.request.body  # every other byte as sent
    # the live request, key and all, replays its recording
    assert isinstance(decision(Cassette.loads(recorded.line), req), Replay)
    octets = post(WAV + SECRET.encode() + WAV, (b"content-type", b"application/octet-stream"))
    (ix,) = Cassette.loads(record(octets, mode=Mode.RECORD).line)
    assert ix.request.body == WAV + b"[REDACTED:openai-key]" + WAV


def test_multipart_miss_reports_diff_parts_not_the_boundary() -> None:
    cassette = Cassette.loads(record(upload("one"), mode=Mode.RECORD).line)
    _purpose, file, audio = UPLOAD
    miss = decision(
        cassette,
        upload("two", ("purpose", None, None, b"batch"), file, (*audio[:3], WAV[:-1])),
    )
    assert isinstance(miss, Miss)
    assert miss.report.closest is not None
    diffs = {d.path: (d.recorded, d.received) for d in miss.report.closest.diffs}
    assert set(diffs) == {"parts.purpose", "parts.audio.body"}
    assert diffs["parts.purpose"] == ("fine-tune", "batch")
    old, new = diffs["parts.audio.body"]
    assert old.startswith("1024 bytes, sha256:")
    assert new.startswith("1023 bytes, sha256:")
    assert "one" not in miss.report.render()
    assert "two" not in miss.report.render()


def test_form_diff_needs_two_forms_of_one_kind() -> None:
    body, _ = multipart("b", ("a", None, None, b"1"))
    form = RecordedRequest("POST", "/x", body=b"a=1", content_type=FORM)
    parts = RecordedRequest("POST", "/x", body=body, content_type=MULTIPART)
    broken = RecordedRequest("POST", "/x", body=b"--b\r\njunk", content_type=MULTIPART)
    plain = RecordedRequest("POST", "/x", body=b"a=1")
    assert form_diff(form, parts) is None
    assert form_diff(plain, plain) is None
    assert form_diff(parts, broken) is None
    assert form_diff(form, form) == []
    assert [d.path for d in request_diff(parts, broken)] == ["body"]


@pytest.mark.parametrize(
    ("body", "header"),
    [
        (b"--b\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--b--", b"boundary=other"),
        (b"--b\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--b--", b"charset=x"),
        (b"preamble\r\n--b\r\n", b"boundary=b"),
        (b"--\r\n", b"boundary="),
        (b"--b", b"boundary=b"),
        (b"--" + b"b" * 201 + b"\r\n", b"boundary=" + b"b" * 201),
        (b"--b\r\nContent-Disposition: form-data; name=a\r\n", b"boundary=b"),  # no blank line
        (b"--b\r\nContent-Disposition: form-data; name=a\r\n\r\n1", b"boundary=b"),  # no end
        (b"--b\r\nContent-Disposition: form-data\r\n\r\n1\r\n--b--", b"boundary=b"),  # no name
        (b"--b\r\nX: \xff\r\n\r\n1\r\n--b--", b"boundary=b"),  # headers not UTF-8
        (b"--b\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--bxx", b"boundary=b"),
    ],
)
def test_what_is_not_read_as_multipart(body: bytes, header: bytes) -> None:
    assert body_kind(b"multipart/form-data; " + header, body) is None


def test_multipart_parsing_details() -> None:
    body = (
        b'--"b"\r\n'
        b'Content-Disposition: form-data; NAME="a \\"q\\""; filename=plain.txt\r\n'
        b"content-type:  text/plain \r\n"
        b"X-Other: 1\r\n\r\n"
        b"x\r\n--b\r\n"  # a line that is no delimiter
        b'\r\n--"b"--\r\nepilogue'
    )
    assert body_kind(b'Multipart/Form-Data; charset=x; Boundary="\\"b\\""', body) is None
    parts = parse_multipart(body)
    assert parts is not None
    (part,) = parts
    assert (part.name, part.filename, part.content_type) == ('a "q"', "plain.txt", "text/plain")
    assert body[part.start : part.end] == b"x\r\n--b\r\n"
    assert body_kind(b'multipart/form-data; boundary=""b""', body) is None
    crafted, header = multipart("q", ("a", None, None, b""), epilogue=b"")
    assert body_kind(header, crafted) == MULTIPART
    assert multipart_value(crafted) == {"a": ""}
    assert multipart_value(b"junk") is None
    assert canonical_multipart(b"junk", frozenset(), exact=True) is None


def test_a_part_with_a_content_type_but_no_filename_is_shown_whole() -> None:
    body, _ = multipart("q", ("meta", None, "application/json", b'{"a":1}'))
    assert multipart_value(body) == {
        "meta": {"filename": None, "content_type": "application/json", "body": '{"a":1}'}
    }


def test_stored_lines_that_no_longer_parse_key_as_bytes() -> None:
    # a hand-edited line: a multipart or form body that does not parse
    for kind, body in ((MULTIPART, b"--b\r\nbroken"), (FORM, b"\xff=1")):
        req = RecordedRequest("POST", "/x", body=body, content_type=kind)
        plain = RecordedRequest("POST", "/x", body=body)
        assert req.key(NORMALIZED) == plain.key(NORMALIZED)
        assert req.redacted(Redactor()).body == body


# -- the line --------------------------------------------------------------------------


def test_the_new_request_fields_round_trip() -> None:
    request = RecordedRequest(
        "POST",
        "/v1/files",
        body=b"a=1",
        content_type=FORM,
        encoding="gzip",
        encoding_error="corrupt gzip body",
    )
    line = Interaction(request.key(NORMALIZED), "i", request, _response()).to_line()
    stored = json.loads(line)["request"]
    assert list(stored) == [
        "method",
        "path",
        "body",
        "content_type",
        "encoding",
        "encoding_error",
    ]
    (again,) = Cassette.loads(line)
    assert again.request == request


def test_lines_without_the_new_fields_read_as_before() -> None:
    request = RecordedRequest("POST", CHAT, body=PLAIN)
    line = Interaction(request.key(NORMALIZED), "i", request, _response()).to_line()
    assert b"content_type" not in line
    assert b"encoding" not in line
    (again,) = Cassette.loads(line)
    assert again.request == request


@pytest.mark.parametrize("name", ["content_type", "encoding", "encoding_error"])
def test_a_new_field_that_is_not_a_string_is_refused(name: str) -> None:
    request = RecordedRequest("POST", CHAT, body=PLAIN)
    obj = json.loads(Interaction(request.key(NORMALIZED), "i", request, _response()).to_line())
    obj["request"][name] = 7
    with pytest.raises(ValueError, match=f'"request.{name}" must be a string when present'):
        Interaction.from_json(obj)


def test_plain_json_keys_do_not_change() -> None:
    # The key of a JSON request is what it was before forms were read.
    request = RecordedRequest("POST", CHAT, body=b'{"model":"m","messages":[]}')
    assert request.key(NORMALIZED) == (
        "sha256:ff2b427363be05e26a6f651495be5574051e30701a443eab2e82f080a1427774"
    )


def _response() -> Any:
    from reel_core import RecordedResponse

    return RecordedResponse(200, (), b"{}")


def test_decode_whole_of_nothing_is_nothing() -> None:
    assert ContentDecoder("deflate").decode_whole(b"", 10) == b""
    assert decode_content(b"", "gzip", 10) == b""
