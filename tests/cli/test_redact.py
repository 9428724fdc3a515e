"""``reel redact`` (in place, atomic, idempotent) and ``reel check``."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from reel_bindings.cli import main
from reel_core import (
    SCHEMA_VERSION,
    Cassette,
    CassetteMeta,
    Config,
    Engine,
    Interaction,
    Mode,
    RecordedRequest,
    RecordedResponse,
    Replay,
    Request,
    Signal,
)

from .helpers import chat_body, interaction, write

OPENAI_KEY = "sk-proj-" + "a1" * 16
GOOGLE_KEY = "AIza" + "b" * 35
ROOT = Path(__file__).resolve().parents[2]


def secret_interaction() -> Interaction:
    request = RecordedRequest(
        "POST",
        "/v1/chat/completions",
        (("key", GOOGLE_KEY), ("alt", "sse")),
        chat_body(f"my key is {OPENAI_KEY}, mail jane.doe@example.com"),
    )
    response = RecordedResponse(
        200,
        (("content-type", "application/json"), ("set-cookie", "session=abc")),
        body=b'{"reply": "call +1 415-555-0100"}',
    )
    return interaction(request, response, id="secret000001")


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def test_redact_replaces_secrets_and_pii_in_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean = interaction()
    path = write(tmp_path / "c.jsonl", clean, secret_interaction())
    assert main(["redact", str(path)]) == 0
    assert capsys.readouterr().out == (
        f"{path}: replaced 5 (email 1, openai-key 1, phone 1, query-secret 1, unsafe-header 1) "
        "in 1 of 2 lines; 1 match key recomputed\n"
    )
    meta, first, second = lines(path)
    assert meta["_meta"]["schema"] == SCHEMA_VERSION
    assert first == json.loads(clean.to_line())  # untouched
    assert second["id"] == "secret000001"  # the id is kept
    assert second["request"]["query"] == [["key", "[REDACTED:query-secret]"], ["alt", "sse"]]
    content = second["request"]["body"]["json"]["messages"][0]["content"]
    assert content == "my key is [REDACTED:openai-key], mail [REDACTED:email]"
    assert second["response"]["headers"] == [["content-type", "application/json"]]
    assert second["response"]["body"]["json"] == {"reply": "call [REDACTED:phone]"}
    assert OPENAI_KEY.encode() not in path.read_bytes()


SALT = "c0ffee00" * 4


def test_redact_keeps_a_salted_cassettes_salt_and_digests(tmp_path: Path) -> None:
    salted = CassetteMeta(extra={"redact": {"salt": SALT}})
    path = write(tmp_path / "c.jsonl", secret_interaction(), meta=salted)
    assert main(["redact", str(path)]) == 0
    once = path.read_bytes()
    meta, line = lines(path)
    assert meta["_meta"]["redact"] == {"salt": SALT}  # kept
    content = line["request"]["body"]["json"]["messages"][0]["content"]
    assert re.fullmatch(
        r"my key is \[REDACTED:openai-key:[0-9a-f]{12}\], mail \[REDACTED:email:[0-9a-f]{12}\]",
        content,
    )
    # a credential position stays plain: a dummy key replays it
    assert line["request"]["query"] == [["key", "[REDACTED:query-secret]"], ["alt", "sse"]]
    assert main(["redact", str(path)]) == 0
    assert path.read_bytes() == once  # idempotent
    # the live request, secrets and all, has the recomputed key
    session = Engine(Cassette.loads(once), Config(mode=Mode.REPLAY))
    session.receive_request(
        Request(
            "POST",
            "/v1/chat/completions?key=dummy&alt=sse",
            (),
            chat_body(f"my key is {OPENAI_KEY}, mail jane.doe@example.com"),
        )
    )
    assert isinstance(session.next_event(), Replay)


def test_the_recomputed_key_matches_the_live_request(tmp_path: Path) -> None:
    path = write(tmp_path / "c.jsonl", secret_interaction())
    assert main(["redact", str(path)]) == 0
    cassette = Cassette.loads(path.read_bytes())
    session = Engine(cassette, Config(mode=Mode.REPLAY))
    target = f"/v1/chat/completions?key={GOOGLE_KEY}&alt=sse"
    body = chat_body(f"my key is {OPENAI_KEY}, mail jane.doe@example.com")
    session.receive_request(Request("POST", target, (), body))
    decision = session.next_event()
    assert isinstance(decision, Replay)
    assert decision.interaction_id == "secret000001"


def test_redact_is_idempotent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "c.jsonl", secret_interaction(), interaction())
    assert main(["redact", str(path)]) == 0
    once = path.read_bytes()
    before = path.stat().st_mtime_ns
    capsys.readouterr()
    assert main(["redact", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: nothing to redact (2 lines)\n"
    assert path.read_bytes() == once
    assert path.stat().st_mtime_ns == before  # not even rewritten
    assert main(["check", str(path)]) == 0


def test_dry_run_writes_nothing_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "c.jsonl", secret_interaction())
    original = path.read_bytes()
    assert main(["redact", "--dry-run", str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{path}: would replace 5 (")
    assert f"  {path}:2: openai-key in request.body" in out
    assert f"  {path}:2: unsafe-header in response.headers.set-cookie" in out
    assert path.read_bytes() == original
    clean = write(tmp_path / "clean.jsonl", interaction())
    assert main(["redact", "--dry-run", str(clean)]) == 0


def test_lines_it_cannot_parse_are_kept_byte_for_byte(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = b'{"torn": "sk-ant-' + b"x" * 30 + b"\n"
    blank = b"   \n"
    path = write(tmp_path / "c.jsonl", broken, secret_interaction(), blank, b"not json at all")
    assert main(["redact", str(path)]) == 1  # a secret is left for a person
    captured = capsys.readouterr()
    assert f"  {path}:2: anthropic-key in a line that is not an interaction" in captured.out
    err = captured.err
    assert f"reel redact: {path}:2: kept as is, not an interaction: not a JSON line" in err
    assert "it holds anthropic-key: edit it by hand" in err
    assert f"{path}:5: kept as is" in err
    data = path.read_bytes().split(b"\n")
    assert data[1] + b"\n" == broken
    assert data[3] + b"\n" == blank
    assert data[4] == b"not json at all"  # no newline added either
    assert len(data) == 5
    assert main(["check", str(path)]) == 1
    captured = capsys.readouterr()
    assert f"{path}:2: anthropic-key in a line that is not an interaction" in captured.out
    assert "fix the lines that are not interactions by hand" in captured.err


def test_a_failed_write_leaves_the_original_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path / "c.jsonl", secret_interaction())
    original = path.read_bytes()

    def broken_replace(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    assert main(["redact", str(path)]) == 2
    assert (
        f"reel redact: {path}: cannot write: No space left on device; the file is unchanged"
        in capsys.readouterr().err
    )
    assert path.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl"]  # no temporary file left


def test_the_file_mode_is_kept(tmp_path: Path) -> None:
    path = write(tmp_path / "c.jsonl", secret_interaction())
    path.chmod(0o600)
    assert main(["redact", str(path)]) == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_pii_stays_with_reel_redact_pii_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REEL_REDACT_PII", "0")
    path = write(tmp_path / "c.jsonl", secret_interaction())
    assert main(["check", str(path)]) == 1
    assert "email" not in capsys.readouterr().out
    assert main(["redact", str(path)]) == 0
    assert "jane.doe@example.com" in path.read_text()
    assert OPENAI_KEY not in path.read_text()


def test_the_cassettes_redact_settings_are_honoured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    meta = CassetteMeta(
        extra={"redact": {"pii": False, "patterns": {"ticket": "TICKET-[0-9]+"}, "fields": ["sid"]}}
    )
    request = RecordedRequest(
        "POST", "/v1/x", body=b'{"sid": "s-1", "note": "TICKET-42 from jane@example.com"}'
    )
    path = write(tmp_path / "c.jsonl", interaction(request), meta=meta)
    assert main(["redact", str(path)]) == 0
    assert "replaced 2 (secret-field 1, ticket 1)" in capsys.readouterr().out
    body = lines(path)[1]["request"]["body"]["json"]
    assert body == {
        "sid": "[REDACTED:secret-field]",
        "note": "[REDACTED:ticket] from jane@example.com",
    }


def test_a_secret_straddling_two_chunks_is_caught(tmp_path: Path) -> None:
    frames = ((0.0, b'[{"text": "key sk-proj-' + b"c1" * 5), (5.0, b"c1" * 11 + b'"}]'))
    response = RecordedResponse(200, stream="chunks", frames=frames, end_ms=6.0)
    path = write(tmp_path / "c.jsonl", interaction(response=response))
    assert main(["check", str(path)]) == 1
    assert main(["redact", str(path)]) == 0
    stored = Interaction.from_json(lines(path)[1])
    assert stored.response.content == b'[{"text": "key [REDACTED:openai-key]"}]'


def test_frames_of_a_stream_are_redacted_one_by_one(tmp_path: Path) -> None:
    frames = (
        (0.0, b'data: {"t": "hi"}\n\n'),
        (7.5, b'data: {"t": "mail bob@example.org"}\n\n'),
    )
    response = RecordedResponse(200, stream="sse", frames=frames, end_ms=8.0)
    path = write(tmp_path / "c.jsonl", interaction(response=response))
    assert main(["redact", str(path)]) == 0
    stored = Interaction.from_json(lines(path)[1])
    assert stored.response.frames == (
        (0.0, b'data: {"t": "hi"}\n\n'),
        (7.5, b'data: {"t": "mail [REDACTED:email]"}\n\n'),
    )


def test_check_names_file_line_kind_and_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean = write(tmp_path / "clean.jsonl", interaction())
    dirty = write(tmp_path / "dirty.jsonl", interaction(), secret_interaction())
    assert main(["check", str(clean)]) == 0
    assert capsys.readouterr() == ("", "")
    assert main(["check", str(clean), str(dirty)]) == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        f"{dirty}:3: email in request.body",
        f"{dirty}:3: openai-key in request.body",
        f"{dirty}:3: query-secret in request.query",
        f"{dirty}:3: phone in response.body",
        f"{dirty}:3: unsafe-header in response.headers.set-cookie",
    ]
    assert captured.err == (
        f"reel check: 5 secret or personal data shapes in 1 of 2 files; "
        f"replace them with `reel redact {dirty}`\n"
    )


def test_check_exits_2_on_an_unreadable_file_even_with_findings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dirty = write(tmp_path / "dirty.jsonl", secret_interaction())
    assert main(["check", str(dirty), str(tmp_path / "missing.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_the_pre_commit_hook_runs_reel_check() -> None:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    (hook,) = hooks
    assert hook["id"] == "reel-check"
    assert hook["entry"] == "reel check"
    assert hook["language"] == "python"
    assert hook["files"] == r"\.jsonl$"


def test_a_bad_meta_line_is_refused_and_the_file_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(b'{"_meta": {"schema": 9}}\n' + secret_interaction().to_line())
    original = path.read_bytes()
    assert main(["redact", str(path)]) == 2
    assert f"reel redact: {path}:1: cassette schema 9" in capsys.readouterr().err
    assert path.read_bytes() == original
    assert main(["check", str(path)]) == 2


# -- inside what is not text ------------------------------------------------------


def old_gzip_line(tmp_path: Path, packed: bytes) -> Path:
    """A cassette whose request body is stored as Reel stored a gzip request
    body before it decoded them: base64 of the compressed bytes."""
    request = RecordedRequest("POST", "/v1/chat/completions", body=packed)
    path = write(tmp_path / "old.jsonl", interaction(request, RecordedResponse(200, ())))
    assert b'"base64"' in path.read_bytes()
    return path


def test_check_looks_inside_a_gzip_request_body(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import gzip

    path = old_gzip_line(tmp_path, gzip.compress(chat_body(f"key {OPENAI_KEY}")))
    assert main(["check", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [f"{path}:2: openai-key in request.body (inside gzip data)"]
    assert "inside compressed or binary data cannot be replaced" in captured.err
    # redact cannot replace it in place: it says so, leaves the line, and
    # fails (a file that still holds a secret never passes)
    before = path.read_bytes()
    assert main(["redact", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}:2: openai-key in request.body (inside gzip data) cannot be replaced" in err
    assert path.read_bytes() == before


def test_check_looks_inside_nested_and_other_compressions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import gzip
    import zlib

    brotli = pytest.importorskip("brotli", reason="pip install brotli (in the test extra)")
    text = chat_body(f"mail jane.doe@example.com {OPENAI_KEY}")
    cases = {
        "deflate data": zlib.compress(text),
        "br data": brotli.compress(text),
        "gzip data in gzip data": gzip.compress(gzip.compress(text)),
    }
    for what, packed in cases.items():
        path = old_gzip_line(tmp_path, packed)
        assert main(["check", str(path)]) == 1
        out = capsys.readouterr().out.splitlines()
        assert out == [
            f"{path}:2: email in request.body (inside {what})",
            f"{path}:2: openai-key in request.body (inside {what})",
        ], what


def test_binary_data_is_checked_and_redacted_in_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a line written before the text rules read bytes that are not UTF-8:
    # its binary body and frame still hold a key (issue: `reel redact`
    # passed them over, as recording did)
    noise = bytes(range(128, 256))
    body = noise + f"key={OPENAI_KEY} mail jane.doe@example.com".encode() + noise
    response = RecordedResponse(
        200, (), stream="chunks", frames=((0.0, noise), (1.0, noise + GOOGLE_KEY.encode()))
    )
    request = RecordedRequest("POST", "/v1/files", body=body)
    path = write(tmp_path / "bin.jsonl", interaction(request, response))
    assert main(["check", str(path)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{path}:2: email in request.body",
        f"{path}:2: openai-key in request.body",
        f"{path}:2: google-key in response.frames",
    ]
    assert main(["redact", str(path)]) == 0
    (ix,) = Cassette.loads(path.read_bytes())
    assert ix.request.body == noise + b"key=[REDACTED:openai-key] mail [REDACTED:email]" + noise
    assert ix.response.frames[1][1] == noise + b"[REDACTED:google-key]"
    assert main(["check", str(path)]) == 0
    clean = write(tmp_path / "clean.jsonl", interaction(RecordedRequest("POST", "/x", body=noise)))
    assert main(["check", str(clean)]) == 0


def test_a_redacted_line_keeps_no_digest_of_what_it_held(tmp_path: Path) -> None:
    """Recorded with PII kept, a line carries the digest of its request as
    sent (an e-mail in it); ``reel redact`` scrubs the e-mail and drops the
    digest, a clean line keeps its own; both still replay."""
    cassette = Cassette()
    body = chat_body("mail jane.doe@example.com")
    for sent in (body, chat_body("hello")):
        engine = Engine(cassette, Config(mode=Mode.RECORD, pii=False))
        engine.receive_request(Request("POST", "/v1/chat/completions", (), sent))
        while not isinstance(engine.next_event(), Signal):
            pass
        engine.upstream_head(200, [(b"content-type", b"application/json")], mono=0.0)
        engine.upstream_data(b'{"ok":1}', mono=0.0)
        engine.upstream_end(mono=0.0)
        while not isinstance(engine.next_event(), Signal):
            pass
        engine.record()
    path = tmp_path / "c.jsonl"
    path.write_bytes(cassette.dumps())
    digests = [line["sent"] for line in lines(path)[1:]]
    assert main(["redact", str(path)]) == 0
    _, mailed, clean = lines(path)
    assert "sent" not in mailed
    assert clean["sent"] == digests[1]
    assert digests[0].encode() not in path.read_bytes()
    replayed = Cassette.loads(path.read_bytes())
    for sent in (body, chat_body("hello")):
        engine = Engine(replayed, Config(mode=Mode.REPLAY))
        engine.receive_request(Request("POST", "/v1/chat/completions", (), sent))
        assert isinstance(engine.next_event(), Replay)


def test_headers_the_cassette_names_are_dropped_and_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    response = RecordedResponse(
        200,
        (("content-type", "application/json"), ("server", "edge-7"), ("etag", '"v1"')),
        body=b"{}",
    )
    meta = CassetteMeta(extra={"redact": {"drop_response_headers": ["Server"]}})
    path = write(tmp_path / "c.jsonl", interaction(response=response), meta=meta)
    assert main(["check", str(path)]) == 1
    assert f"{path}:2: unsafe-header in response.headers.server" in capsys.readouterr().out
    assert main(["redact", str(path)]) == 0
    assert lines(path)[1]["response"]["headers"] == [
        ["content-type", "application/json"],
        ["etag", '"v1"'],
    ]
    assert main(["check", str(path)]) == 0


def flagged_interaction() -> Interaction:
    return interaction(
        response=RecordedResponse(
            200,
            headers=(("content-type", "application/json"), ("content-encoding", "zstd")),
            body=b"\x28\xb5\x2f\xfd\x00\x01",
            encoding="zstd",
            encoding_error="cannot decode content-encoding 'zstd' (install zstandard)",
        )
    )


def test_redact_and_check_name_a_body_reel_could_not_decode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "z.jsonl", flagged_interaction())
    before = path.read_bytes()
    assert main(["redact", str(path)]) == 1
    out, err = capsys.readouterr()
    assert (
        f"reel redact: {path}:2: response.body (stored zstd-encoded): cannot decode "
        "content-encoding 'zstd' (install zstandard): Reel cannot read it, so it cannot vouch "
        "for it: re-record those requests where Reel decodes them"
    ) in err
    assert path.read_bytes() == before
    assert main(["check", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == (
        f"{path}:2: response.body (stored zstd-encoded) not decoded: cannot decode "
        "content-encoding 'zstd' (install zstandard)\n"
    )
    assert err.startswith("reel check: 1 of 1 file hold bodies stored in an encoding")


@pytest.mark.parametrize("command", ["check", "redact"])
def test_a_bad_body_limit_is_refused(
    command: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REEL_MAX_BODY", "lots")
    path = write(tmp_path / "c.jsonl", interaction())
    assert main([command, str(path)]) == 2
    assert "REEL_MAX_BODY='lots' is not a positive number of bytes" in capsys.readouterr().err
