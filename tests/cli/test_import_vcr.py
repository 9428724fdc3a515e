"""``reel import vcr``: vcrpy / pytest-recording cassettes that then replay."""

from __future__ import annotations

import base64
import gzip
import json
import re
import zlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from reel_bindings.cli import main
from reel_core import (
    Cassette,
    Config,
    Engine,
    Frame,
    MatchConfig,
    Mode,
    Redactor,
    Replay,
    Request,
    ResponseHead,
    Signal,
)
from reel_core.tools import ImportReport, import_source, match_key

CHAT = '{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}'
ANSWER = '{"choices": [{"message": {"content": "hello"}}], "model": "gpt-4o-mini"}'


def cassette_yaml(*interactions: dict[str, Any]) -> str:
    return yaml.safe_dump({"interactions": list(interactions), "version": 1})


def exchange(
    body: Any = CHAT,
    response_body: Any = None,
    *,
    uri: str = "https://api.openai.com/v1/chat/completions",
    status: Any = None,
    headers: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    return {
        "request": {
            "body": body,
            "headers": {"Authorization": ["Bearer sk-proj-" + "z" * 30]},
            "method": "POST",
            "uri": uri,
        },
        "response": {
            "body": {"string": ANSWER} if response_body is None else response_body,
            "headers": headers
            if headers is not None
            else {
                "Content-Type": ["application/json"],
                "Set-Cookie": ["__cf_bm=secret"],
                "X-Request-Id": ["req_1"],
                "Content-Length": ["70"],
            },
            "status": status if status is not None else {"code": 200, "message": "OK"},
        },
    }


def replay(cassette: Cassette, method: str, target: str, body: bytes) -> tuple[int, bytes]:
    """Serve a request from ``cassette`` as the proxy would: status and body."""
    session = Engine(cassette, Config(mode=Mode.REPLAY))
    session.receive_request(Request(method, target, (), body))
    events = []
    while not isinstance(event := session.next_event(), Signal):
        events.append(event)
    assert isinstance(events[0], Replay), events[0]
    head = events[1]
    assert isinstance(head, ResponseHead)
    return head.status, b"".join(e.data for e in events if isinstance(e, Frame))


def imported(tmp_path: Path, text: str | bytes, name: str = "test_chat.yaml") -> Path:
    source = tmp_path / name
    source.write_bytes(text if isinstance(text, bytes) else text.encode())
    return source


def test_a_plain_exchange(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = imported(
        tmp_path, cassette_yaml(exchange(uri="https://api.openai.com/v1/chat/completions?x=1"))
    )
    assert main(["import", "vcr", str(source)]) == 0
    out = tmp_path / "test_chat.jsonl"
    assert capsys.readouterr().out == f"{source} -> {out}: 1 of 1 interaction\n"
    meta, line = (json.loads(x) for x in out.read_bytes().splitlines())
    assert meta["_meta"]["match"] == "normalized"
    key = match_key("POST", "/v1/chat/completions", [("x", "1")], CHAT.encode(), MatchConfig())
    assert line["key"] == key
    assert line["id"] == key[7:19]
    assert line["provider"] == "openai"
    assert line["request"] == {
        "method": "POST",
        "path": "/v1/chat/completions",
        "query": [["x", "1"]],
        "body": {"json": json.loads(CHAT), "style": "spaced"},
    }
    # Title-Case names lowercased, only the safe set kept
    assert line["response"]["headers"] == [
        ["content-type", "application/json"],
        ["x-request-id", "req_1"],
    ]
    assert line["response"]["body"] == {"json": json.loads(ANSWER), "style": "spaced"}
    assert line["meta"]["ttfb_ms"] is None
    assert line["meta"]["imported"] == "vcrpy"
    assert "Bearer" not in out.read_text()
    cassette = Cassette.loads(out.read_bytes())
    assert replay(cassette, "POST", "/v1/chat/completions?x=1", CHAT.encode()) == (
        200,
        ANSWER.encode(),
    )


def test_an_imported_cassette_gets_a_salt_and_keeps_prompts_apart(tmp_path: Path) -> None:
    """Two prompts differing only in an e-mail stay two recordings, each
    answering its own prompt: their placeholders carry the new cassette's
    digests."""

    def ask(mail: str) -> str:
        return json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": mail}]})

    answers = [json.dumps({"choices": [{"message": {"content": n}}]}) for n in ("one", "two")]
    prompts = [ask("write to ann@example.com"), ask("write to bob@example.com")]
    source = imported(
        tmp_path,
        cassette_yaml(*(exchange(p, {"string": a}) for p, a in zip(prompts, answers, strict=True))),
    )
    assert main(["import", "vcr", str(source)]) == 0
    out = tmp_path / "test_chat.jsonl"
    raw = out.read_bytes()
    meta = json.loads(raw.splitlines()[0])["_meta"]
    assert re.fullmatch("[0-9a-f]{32}", meta["redact"]["salt"])
    assert b"ann@" not in raw
    assert b"bob@" not in raw
    assert len(re.findall(rb"\[REDACTED:email:[0-9a-f]{12}\]", raw)) == 2
    cassette = Cassette.loads(raw)
    assert len({ix.key for ix in cassette}) == 2
    for prompt, answer in zip(prompts, answers, strict=True):
        assert replay(cassette, "POST", "/v1/chat/completions", prompt.encode()) == (
            200,
            answer.encode(),
        )


def test_repeats_get_numbered_ids_and_replay_in_order(tmp_path: Path) -> None:
    first = exchange(response_body={"string": '{"n": 1}'})
    second = exchange(response_body={"string": '{"n": 2}'})
    conversion = convert_vcr(cassette_yaml(first, second).encode(), "x.yaml", Redactor())
    one, two = conversion.interactions
    assert two.id == one.id + "-2"
    assert one.key == two.key
    cassette = Cassette.loads(conversion.dumps())
    assert replay(cassette, "POST", "/v1/chat/completions", CHAT.encode())[1] == b'{"n": 1}'
    assert replay(cassette, "POST", "/v1/chat/completions", CHAT.encode())[1] == b'{"n": 2}'


def test_gzip_binary_bodies_are_decoded(tmp_path: Path) -> None:
    packed = gzip.compress(ANSWER.encode())
    text = (
        "interactions:\n- request:\n    body: '" + CHAT + "'\n    headers: {}\n    method: POST\n"
        "    uri: https://api.openai.com/v1/chat/completions\n  response:\n    body:\n"
        "      string: !!binary |\n        " + base64.b64encode(packed).decode() + "\n"
        "    headers:\n      Content-Encoding:\n      - gzip\n      Content-Type:\n"
        "      - application/json\n    status:\n      code: 200\n      message: OK\nversion: 1\n"
    )
    conversion = convert_vcr(text.encode(), "x.yaml", Redactor())
    (ix,) = conversion.interactions
    assert ix.response.body == ANSWER.encode()
    assert ix.response.headers == (("content-type", "application/json"),)
    assert conversion.notes == []


def test_a_body_stored_decoded_under_a_gzip_header(tmp_path: Path) -> None:
    headers = {"Content-Encoding": ["gzip"], "Content-Type": ["application/json"]}
    conversion = convert_vcr(
        cassette_yaml(exchange(headers=headers)).encode(), "x.yaml", Redactor()
    )
    (ix,) = conversion.interactions
    assert ix.response.body == ANSWER.encode()
    assert conversion.notes == [
        (
            0,
            "content-encoding gzip dropped: the body was stored decoded (it is no gzip data) "
            "and is kept as it is",
        )
    ]


def test_raw_and_zlib_deflate_bodies_are_decoded() -> None:
    for packed in (zlib.compress(ANSWER.encode()), zlib.compress(ANSWER.encode())[2:-4]):
        text = (
            "interactions:\n- request:\n    body: '" + CHAT + "'\n    headers: {}\n"
            "    method: POST\n    uri: https://api.openai.com/v1/chat/completions\n"
            "  response:\n    body:\n      string: !!binary |\n        "
            + base64.b64encode(packed).decode()
            + "\n    headers:\n      Content-Encoding:\n      - deflate\n"
            "    status:\n      code: 200\n      message: OK\nversion: 1\n"
        )
        conversion = convert_vcr(text.encode(), "x.yaml", Redactor())
        (ix,) = conversion.interactions
        assert ix.response.body == ANSWER.encode()
        assert conversion.notes == []


@pytest.mark.parametrize(
    ("encoding", "body"),
    [
        ("gzip", gzip.compress(ANSWER.encode(), mtime=0)[:12] + b"\xff" * 30),
        ("gzip", b"\x1f\x8b\x08\x00garbage"),
        ("deflate", b"\x78\x9c" + b"\xff" * 20),
        ("br", b"\xff\xfe\xfd not brotli"),
        ("gzip", gzip.compress(b"x" * 1000, mtime=0)[:-10]),  # cut short
        ("deflate", zlib.compress(b"x" * 1000)[:-8]),
    ],
)
def test_a_corrupt_encoded_body_is_not_converted_and_says_why(
    tmp_path: Path, encoding: str, body: bytes
) -> None:
    if encoding == "br":
        pytest.importorskip("brotli", reason="pip install brotli (in the test extra)")
    text = (
        "interactions:\n- request:\n    body: '" + CHAT + "'\n    headers: {}\n    method: POST\n"
        "    uri: https://api.openai.com/v1/chat/completions\n  response:\n    body:\n"
        "      string: !!binary |\n        " + base64.b64encode(body).decode() + "\n"
        f"    headers:\n      Content-Encoding:\n      - {encoding}\n      Content-Type:\n"
        "      - application/json\n    status:\n      code: 200\n      message: OK\nversion: 1\n"
    )
    conversion = convert_vcr(text.encode(), "x.yaml", Redactor())
    assert conversion.interactions == []
    assert conversion.notes == []
    ((index, reason),) = conversion.failures
    assert index == 0
    assert reason.startswith(
        f"the body is {encoding}-encoded (content-encoding {encoding}) but corrupt: "
    )
    assert reason.endswith("; re-record it")


def test_pydantic_ais_parsed_body_dialect(tmp_path: Path) -> None:
    item: dict[str, Any] = {
        "request": {
            "headers": {"content-type": ["application/json"]},
            "method": "POST",
            "parsed_body": {"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": []},
            "uri": "https://api.anthropic.com/v1/messages?beta=true",
        },
        "response": {
            "headers": {"content-type": ["application/json"]},
            "parsed_body": {"type": "message", "content": [{"type": "text", "text": "ok"}]},
            "status": {"code": 200, "message": "OK"},
        },
    }
    text = cassette_yaml(item)
    conversion = convert_vcr(text.encode(), "x.yaml", Redactor())
    (ix,) = conversion.interactions
    assert ix.provider == "anthropic"
    # pydantic-ai's loader: json.dumps of the YAML data, in the file's key order
    loaded = yaml.safe_load(text)["interactions"][0]["request"]["parsed_body"]
    request_body = json.dumps(loaded).encode()
    assert ix.request.body == request_body
    cassette = Cassette.loads(conversion.dumps())
    status, body = replay(cassette, "POST", "/v1/messages?beta=true", request_body)
    assert (status, json.loads(body)) == (200, item["response"]["parsed_body"])


def test_sse_bodies_become_byte_exact_frames_at_offset_0(tmp_path: Path) -> None:
    events = 'event: a\r\ndata: {"x": 1}\r\n\r\nevent: b\r\ndata: {"x": 2}\r\n\r\n'
    with_type = exchange(
        response_body={"string": events}, headers={"Content-Type": ["text/event-stream"]}
    )
    without = exchange(body='{"stream": true}', response_body={"string": events}, headers={})
    conversion = convert_vcr(cassette_yaml(with_type, without).encode(), "x.yaml", Redactor())
    for ix in conversion.interactions:
        assert ix.response.stream == "sse"
        assert ix.response.frames == (
            (0.0, b'event: a\r\ndata: {"x": 1}\r\n\r\n'),
            (0.0, b'event: b\r\ndata: {"x": 2}\r\n\r\n'),
        )
        assert ix.response.headers == (("content-type", "text/event-stream"),)
    assert conversion.notes == [
        (1, "no content-type: the body is server-sent events, stored as SSE frames")
    ]


def test_binary_bodies_are_kept(tmp_path: Path) -> None:
    data = bytes(range(256))
    text = (
        "interactions:\n- request:\n    body: !!binary |\n      "
        + base64.b64encode(data).decode()
        + "\n    headers: {}\n    method: POST\n    uri: https://bedrock.example/model/invoke\n"
        "  response:\n    body:\n      string: !!binary |\n        "
        + base64.b64encode(data[::-1]).decode()
        + "\n    headers: {}\n    status:\n      code: 200\n      message: OK\n"
    )
    conversion = convert_vcr(text.encode(), "x.yaml", Redactor())
    cassette = Cassette.loads(conversion.dumps())
    assert replay(cassette, "POST", "/model/invoke", data) == (200, data[::-1])


def test_secrets_are_redacted_like_a_recording(tmp_path: Path) -> None:
    key = "AIza" + "k" * 35
    item = exchange(
        body='{"contents": [{"parts": [{"text": "write to ann@example.com"}]}]}',
        uri=f"https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent?key={key}",
    )
    source = imported(tmp_path, cassette_yaml(item))
    assert main(["import", "vcr", str(source), "-o", str(tmp_path / "out.jsonl")]) == 0
    text = (tmp_path / "out.jsonl").read_text()
    assert key not in text
    assert "ann@example.com" not in text
    assert "[REDACTED:query-secret]" in text
    assert main(["check", str(tmp_path / "out.jsonl")]) == 0
    cassette = Cassette.loads((tmp_path / "out.jsonl").read_bytes())
    target = f"/v1beta/models/gemini-2.5-flash:generateContent?key={key}"
    body = b'{"contents": [{"parts": [{"text": "write to ann@example.com"}]}]}'
    assert replay(cassette, "POST", target, body)[0] == 200


def test_python_tags_are_never_loaded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = cassette_yaml(exchange())
    evil = (
        "- request:\n    body: !!python/object/apply:os.system ['echo pwned']\n"
        "    headers: {}\n    method: POST\n    uri: https://api.openai.com/v1/x\n"
        "  response:\n    body: {string: ok}\n    headers: {}\n    status: {code: 200}\n"
    )
    text = good.replace("version: 1\n", "").replace("interactions:\n", "interactions:\n" + evil)
    source = imported(tmp_path, text)
    assert main(["import", "vcr", str(source)]) == 1
    captured = capsys.readouterr()
    assert captured.out == f"{source} -> {tmp_path / 'test_chat.jsonl'}: 1 of 2 interactions\n"
    assert captured.err == (
        f"reel import vcr: {source}: interaction 0: NOT converted: it holds a "
        "!!python/object/apply:os.system YAML tag, which Reel does not load "
        "(it would build a Python object)\n"
    )


@pytest.mark.parametrize(
    ("response", "why"),
    [
        ({"body": {"bytes": "x"}, "status": {"code": 200}}, 'the response body has no "string"'),
        ({"body": {"string": "x"}, "status": {"code": "teapot"}}, "'teapot' is not an HTTP"),
        ({"body": {"string": 5}, "status": {"code": 200}}, "the response body is a int"),
    ],
)
def test_what_cannot_be_converted_is_said(
    response: dict[str, Any], why: str, tmp_path: Path
) -> None:
    item = {"request": exchange()["request"], "response": response}
    conversion = convert_vcr(cassette_yaml(item, exchange()).encode(), "x.yaml", Redactor())
    assert len(conversion.interactions) == 1
    ((index, reason),) = conversion.failures
    assert index == 0
    assert why in reason


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("interactions: [\n", "not YAML: "),
        ("- a\n- b\n", 'not a vcrpy cassette: no "interactions" list at the top (found a list'),
        ("hello\n", 'not a vcrpy cassette: no "interactions" list at the top (found str)'),
    ],
)
def test_files_that_are_no_vcrpy_cassette(
    text: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = imported(tmp_path, text)
    assert main(["import", "vcr", str(source)]) == 2
    assert f"reel import vcr: {source}: {message}" in capsys.readouterr().err
    assert not (tmp_path / "test_chat.jsonl").exists()


def test_output_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = imported(tmp_path, cassette_yaml(exchange()), "a.yaml")
    b = imported(tmp_path, cassette_yaml(exchange()), "b.yaml")
    assert main(["import", "vcr", str(a), str(b), "-o", "x.jsonl"]) == 2
    assert "-o names one output, but 2 files were given: use --out-dir DIR" in (
        capsys.readouterr().err
    )
    out_dir = tmp_path / "out"
    assert main(["import", "vcr", str(a), str(b), "--out-dir", str(out_dir)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "converted 2 interactions in 2 of 2 files; 0 could not be converted"
    )
    assert sorted(p.name for p in out_dir.iterdir()) == ["a.jsonl", "b.jsonl"]
    # existing output: refused without --force
    assert main(["import", "vcr", str(a), "--out-dir", str(out_dir)]) == 2
    assert "a.jsonl exists: pass --force to overwrite it" in capsys.readouterr().err
    assert main(["import", "vcr", str(a), "--out-dir", str(out_dir), "--force"]) == 0
    # two inputs with one name
    (tmp_path / "sub").mkdir()
    other = imported(tmp_path / "sub", cassette_yaml(exchange()), "a.yaml")
    assert main(["import", "vcr", str(a), str(other), "--out-dir", str(tmp_path / "o2")]) == 2
    assert "would both be written to" in capsys.readouterr().err
    # the default: next to the input
    assert main(["import", "vcr", str(b)]) == 0
    assert (tmp_path / "b.jsonl").is_file()


def test_json_vcrpy_cassettes(tmp_path: Path) -> None:
    source = imported(tmp_path, json.dumps({"interactions": [exchange()]}), "c.json")
    assert main(["import", "vcr", str(source)]) == 0
    assert len(Cassette.loads((tmp_path / "c.jsonl").read_bytes())) == 1


def test_python_2_string_tags_are_plain_strings(tmp_path: Path) -> None:
    text = (
        "interactions:\n- request:\n    body: !!python/unicode '" + CHAT + "'\n"
        "    headers: {}\n    method: !!python/str POST\n"
        "    uri: https://api.openai.com/v1/chat/completions\n"
        "  response:\n    body: {string: !!python/unicode 'ok'}\n    headers: {}\n"
        "    status: {code: 200, message: OK}\nversion: 1\n"
    )
    conversion = convert_vcr(text.encode(), "x.yaml", Redactor())
    assert conversion.failures == []
    (ix,) = conversion.interactions
    assert (ix.request.body, ix.response.body) == (CHAT.encode(), b"ok")


def test_credential_values_of_the_recorded_headers_are_scrubbed(tmp_path: Path) -> None:
    # (not a secret of tests/secrets.py: the vcrpy file written here holds it)
    key = "f00dfeed" * 4  # an Azure-like key: no shape, found by its value
    item = exchange(
        response_body={"string": json.dumps({"error": f"Incorrect API key provided: {key}"})},
        status={"code": 401, "message": "Unauthorized"},
    )
    item["request"]["headers"] = {"api-key": [key]}
    source = imported(tmp_path, cassette_yaml(item))
    assert main(["import", "vcr", str(source), "-o", str(tmp_path / "out.jsonl")]) == 0
    text = (tmp_path / "out.jsonl").read_text()
    assert key not in text
    assert "Incorrect API key provided: [REDACTED:credential]" in text


def convert_vcr(data: bytes, name: str, redactor: Redactor) -> ImportReport:
    return import_source("vcr", data, name, redactor)
