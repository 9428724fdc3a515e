"""One scenario table through every binding: they record equivalent lines and
replay the same bytes, and a cassette recorded by any binding replays in
every other.

Bindings: the proxy (on asyncio and on trio), the sync transport on httpx
and on httpx2, the async transport on httpx and httpx2 (each on asyncio and
on trio), and the requests adapter.
"""

from __future__ import annotations

import base64
import gzip
import itertools
import json
import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from reel_core import CassetteMeta, Mode, Redactor
from reel_core._literals import exchange_redactor
from tests.fakes.upstream import SCENARIO_HEADER, FakeUpstreamThread
from tests.secrets import AZURE_KEY, COOKIE_VALUE, GATEWAY_TOKEN, OPENAI_KEY, forms

from .openers import BINDINGS as OPENERS
from .openers import Call, Opener, Reply

SECRET = OPENAI_KEY
PLACEHOLDER = b"[REDACTED:openai-key]"
#: Sent by every row: a gateway token with no known shape.
AUTHORIZATION = f"Bearer {GATEWAY_TOKEN}"
#: An Azure key and a session cookie, with no known shape either.
AZURE = (("api-key", AZURE_KEY), ("cookie", f"theme=dark; session={COOKIE_VALUE}"))
ECHO = ((SCENARIO_HEADER, "echo-key"), *AZURE)
UNSHAPED = {"azure-key": AZURE_KEY, "gateway-token": GATEWAY_TOKEN, "cookie": COOKIE_VALUE}


#: The body and headers a row sends: JSON unless the row says otherwise.
Wire = Callable[[dict[str, Any]], tuple[bytes, dict[str, str]]]


@dataclass(frozen=True)
class Row:
    """One scenario: a request and what must hold of its answer."""

    name: str
    path: str
    body: dict[str, Any]
    headers: tuple[tuple[str, str], ...] = ()
    recorded: bool = True
    #: How ``body`` goes on the wire; called for every request, so what a
    #: client draws per call (a multipart boundary, a gzip mtime) differs
    #: between the recording and each replay.
    wire: Wire | None = None


_MTIMES = itertools.count(1_700_000_000, 17)
FORM_SECRET = "hunter2-" + "Zx9" * 6


def gzipped(body: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    """JSON, gzip-compressed, with a new gzip header time on every call."""
    packed = gzip.compress(json.dumps(body).encode(), mtime=next(_MTIMES))
    return packed, {"content-type": "application/json", "content-encoding": "gzip"}


def form(body: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    from urllib.parse import urlencode

    return urlencode(body).encode(), {"content-type": "application/x-www-form-urlencoded"}


def multipart(body: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    """A multipart body with a fresh random boundary, as clients draw one."""
    boundary = uuid.uuid4().hex
    out = b""
    for name, value in body.items():
        disposition = f'form-data; name="{name}"'
        head = ""
        if isinstance(value, list):  # [filename, content type, content]
            filename, ctype, content = value
            disposition += f'; filename="{filename}"'
            head = f"Content-Type: {ctype}\r\n"
            data = content.encode("latin-1")
        else:
            data = str(value).encode()
        out += f"--{boundary}\r\nContent-Disposition: {disposition}\r\n{head}\r\n".encode()
        out += data + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return out, {"content-type": f"multipart/form-data; boundary={boundary}"}


def chat(content: str, **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": content}], **extra}


def tool_result(result: dict[str, Any]) -> dict[str, Any]:
    """A chat request whose last message is a tool's ``result``."""
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    return {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "user", "content": "look it up"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": json.dumps(result)},
        ],
    }


TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}

TABLE = [
    Row("json", "/v1/chat/completions", chat("hello")),
    Row("sse", "/v1/chat/completions", chat("hello", stream=True)),
    Row("tool-stream", "/v1/chat/completions", chat("weather?", stream=True, tools=[TOOL])),
    Row("429", "/v1/chat/completions", {**chat("hello"), "model": "fake-429"}),
    Row("secret", "/v1/chat/completions", chat(f"my key is {SECRET}")),
    Row("gzip", "/v1/chat/completions", chat("squeeze"), ((SCENARIO_HEADER, "gzip"),)),
    Row(
        "anthropic-sse",
        "/v1/messages",
        {
            "model": "claude-sonnet-4-6",
            "max_tokens": 64,
            "stream": True,
            "messages": [{"role": "user", "content": "hello"}],
        },
    ),
    # Redaction never decides a match: a logprobs answer ("token" fields) is
    # kept whole, tool results differing in a "key" field and prompts
    # differing in an e-mail are two recordings, each replaying its own.
    Row("logprobs", "/v1/chat/completions", chat("hello there", logprobs=True)),
    Row("tool-key-1", "/v1/chat/completions", tool_result({"key": "user-1"})),
    Row("tool-key-2", "/v1/chat/completions", tool_result({"key": "user-2"})),
    Row("email-1", "/v1/chat/completions", chat("write to ann@example.com")),
    Row("email-2", "/v1/chat/completions", chat("write to bob@example.com")),
    # The upstream echoes the credentials (in a 401 body; split across two
    # writes of an SSE stream); the client puts one in its prompt, encoded.
    Row("echo-key-401", "/v1/chat/completions", chat("who am I?"), ECHO),
    Row("echo-key-stream", "/v1/chat/completions", chat("who am I?", stream=True), ECHO),
    Row(
        "key-in-body",
        "/v1/chat/completions",
        chat(
            "see data:image/png;base64,"
            + base64.b64encode(b"::" + AZURE_KEY.encode()).decode()
            + f" and ?k={quote(GATEWAY_TOKEN, safe='')}"
        ),
        AZURE,
    ),
    Row("gzip-request", "/v1/chat/completions", chat(f"zipped {SECRET}"), wire=gzipped),
    Row(
        "form",
        "/oauth/token",
        {"grant_type": "client_credentials", "client_id": "reel", "client_secret": FORM_SECRET},
        wire=form,
    ),
    Row(
        "multipart",
        "/v1/files",
        {
            "purpose": "fine-tune",
            "file": ["train.jsonl", "application/jsonl", '{"prompt": "hi"}\n'],
            "extra": ["blob.bin", "application/octet-stream", "".join(map(chr, range(256)))],
        },
        wire=multipart,
    ),
    Row("miss", "/v1/chat/completions", chat("never recorded"), recorded=False),
]
#: Every cassette of the table is recorded under this salt (a new cassette
#: gets a random one: test_every_binding_salts_a_new_cassette).
SALT = "a9" * 16
SALTED = Redactor(salt=SALT)


RowSend = Callable[[Row], Reply]
RowOpener = Callable[[Path, Mode, str], AbstractContextManager[RowSend]]


def _request(row: Row) -> tuple[bytes, dict[str, str]]:
    """The body and headers of one request of ``row``."""
    if row.wire is None:
        payload, headers = json.dumps(row.body).encode(), {"content-type": "application/json"}
    else:
        payload, headers = row.wire(row.body)
    return payload, {**headers, "authorization": AUTHORIZATION, **dict(row.headers)}


def _wire_headers(row: Row) -> tuple[tuple[bytes, bytes], ...]:
    return tuple((k.encode(), v.encode()) for k, v in _request(row)[1].items())


def _rows(opener: Opener) -> RowOpener:
    """A binding that sends the table's rows (each a POST of its wire body)."""

    @contextmanager
    def open_rows(cassette: Path, mode: Mode, url: str) -> Iterator[RowSend]:
        with opener(cassette, mode, url) as send:

            def send_row(row: Row) -> Reply:
                payload, headers = _request(row)
                return send(Call("POST", row.path, payload, headers))

            yield send_row

    return open_rows


BINDINGS: dict[str, RowOpener] = {name: _rows(opener) for name, opener in OPENERS.items()}


def comparable(path: Path) -> list[dict[str, Any]]:
    """A cassette's lines with what differs between runs removed: timestamps,
    offsets, timings and multipart boundaries."""
    lines = []
    for raw in path.read_bytes().splitlines()[1:]:
        line = json.loads(raw)
        del line["ts"]
        body = line["request"]["body"]
        if line["request"].get("content_type") == "multipart/form-data":
            data = base64.b64decode(body["base64"]) if "base64" in body else body["text"].encode()
            boundary = data[2 : data.index(b"\r\n")]
            line["request"]["body"] = data.replace(boundary, b"BOUNDARY").decode("latin-1")
        for name in ("ttfb_ms", "total_ms", "ttft_ms"):
            line["meta"].pop(name, None)
        response = line["response"]
        if "frames" in response:
            response["frames"] = [data for _, data in response["frames"]]
            response.pop("end", None)
            response.get("cut", {}).pop("at", None)
        lines.append(line)
    return sorted(lines, key=lambda line: line["key"])


@pytest.fixture(scope="module")
def recordings(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[Path, dict[str, Reply]]]:
    """Each binding records the table into its own cassette; the live replies too."""
    out: dict[str, tuple[Path, dict[str, Reply]]] = {}
    with FakeUpstreamThread() as fake:
        for name, opener in BINDINGS.items():
            cassette = tmp_path_factory.mktemp(name) / "table.jsonl"
            # record mode keeps the cassette's salt: every binding the same one
            cassette.write_bytes(CassetteMeta(extra={"redact": {"salt": SALT}}).to_line())
            with opener(cassette, Mode.RECORD, fake.url) as send:
                out[name] = (cassette, {row.name: send(row) for row in TABLE if row.recorded})
    return out


def test_every_binding_records_equivalent_lines(
    recordings: dict[str, tuple[Path, dict[str, Reply]]],
) -> None:
    reference = comparable(recordings["proxy-asyncio"][0])
    assert len(reference) == sum(row.recorded for row in TABLE)
    for name, (cassette, _) in recordings.items():
        assert comparable(cassette) == reference, name


def test_every_binding_got_the_same_live_answers(
    recordings: dict[str, tuple[Path, dict[str, Reply]]],
) -> None:
    reference = recordings["proxy-asyncio"][1]
    assert reference["429"].status == 429
    assert reference["json"].status == 200
    assert b"data: [DONE]" in reference["sse"].body
    for name, (_, replies) in recordings.items():
        assert replies == reference, name


def test_secrets_never_reach_the_cassette(
    recordings: dict[str, tuple[Path, dict[str, Reply]]],
) -> None:
    for name, (cassette, replies) in recordings.items():
        data = cassette.read_bytes()
        assert SECRET.encode() not in data
        assert b"[REDACTED:openai-key:" in data
        assert b"ann@example.com" not in data
        # no shape: found by value, in every form, in the 401 body, the
        # split stream and the request
        for kind, value in UNSHAPED.items():
            assert not [form for form in forms(value) if form in data], (name, kind)
        assert data.count(b"[REDACTED:credential]") >= 8, name
        # and the upstream did echo them to the client, so there was something to scrub
        assert AZURE_KEY.encode() in replies["echo-key-401"].body
        assert AZURE_KEY.encode() in replies["echo-key-stream"].body


def test_redaction_kept_apart_what_differs(
    recordings: dict[str, tuple[Path, dict[str, Reply]]],
) -> None:
    reference = recordings["proxy-asyncio"][1]
    assert reference["tool-key-1"] != reference["tool-key-2"]
    assert reference["email-1"] != reference["email-2"]
    entries = json.loads(reference["logprobs"].body)["choices"][0]["logprobs"]["content"]
    assert entries
    assert all("REDACTED" not in entry["token"] for entry in entries)
    for cassette, _ in recordings.values():
        lines = [json.loads(raw) for raw in cassette.read_bytes().splitlines()[1:]]
        assert len({line["key"] for line in lines}) == len(lines)  # no two share a key
        (logprobs,) = [line for line in lines if '"logprobs": true' in json.dumps(line)]
        assert "REDACTED" not in json.dumps(logprobs)


@pytest.mark.parametrize("binding", list(BINDINGS))
def test_every_binding_salts_a_new_cassette(binding: str, tmp_path: Path) -> None:
    salts = []
    with FakeUpstreamThread() as fake:
        for n in range(2):
            cassette = tmp_path / f"new-{n}.jsonl"
            with BINDINGS[binding](cassette, Mode.AUTO, fake.url) as send:
                assert send(TABLE[0]).status == 200
            meta = json.loads(cassette.read_bytes().splitlines()[0])["_meta"]
            salts.append(meta["redact"]["salt"])
    assert all(re.fullmatch("[0-9a-f]{32}", s) for s in salts)
    assert salts[0] != salts[1]


def lines_of(cassette: Path, needle: bytes) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in cassette.read_bytes().splitlines()[1:] if needle in raw]


def test_a_gzip_request_body_is_stored_decoded_and_redacted(
    recordings: dict[str, tuple[Path, dict[str, Reply]]],
) -> None:
    for name, (cassette, _) in recordings.items():
        (line,) = lines_of(cassette, b"zipped")
        request = line["request"]
        assert request["encoding"] == "gzip", name
        content = request["body"]["json"]["messages"][0]["content"]
        assert content.startswith("zipped [REDACTED:openai-key:"), name


def test_a_form_body_is_redacted_by_field(
    recordings: dict[str, tuple[Path, dict[str, Reply]]],
) -> None:
    for name, (cassette, _) in recordings.items():
        assert FORM_SECRET not in cassette.read_text(), name
        (line,) = lines_of(cassette, b"oauth/token")
        assert line["request"]["content_type"] == "application/x-www-form-urlencoded"
        assert line["request"]["body"] == {
            "text": "grant_type=client_credentials&client_id=reel"
            "&client_secret=[REDACTED:query-secret]"
        }, name


def test_a_multipart_body_is_stored_as_sent_and_keyed_by_its_parts(
    recordings: dict[str, tuple[Path, dict[str, Reply]]],
) -> None:
    keys = set()
    for name, (cassette, _) in recordings.items():
        (line,) = lines_of(cassette, b"/v1/files")
        assert line["request"]["content_type"] == "multipart/form-data", name
        assert "base64" in line["request"]["body"]  # a binary part: the body as sent
        keys.add(line["key"])
    assert len(keys) == 1  # every binding drew its own boundary; one key


def test_gzip_is_stored_decoded(recordings: dict[str, tuple[Path, dict[str, Reply]]]) -> None:
    for cassette, _ in recordings.values():
        (line,) = [
            json.loads(raw) for raw in cassette.read_bytes().splitlines()[1:] if b"squeeze" in raw
        ]
        headers = dict(line["response"]["headers"])
        assert "content-encoding" not in headers
        assert "json" in line["response"]["body"]


@pytest.mark.parametrize("replayer", list(BINDINGS))
def test_any_cassette_replays_in_every_binding(
    replayer: str, recordings: dict[str, tuple[Path, dict[str, Reply]]]
) -> None:
    reference = dict(recordings["proxy-asyncio"][1])
    # The fake echoes the prompt: the secret (and e-mail) in it is redacted on
    # disk too, each with its digest under the cassette's salt; the
    # credentials it echoes are replayed as placeholders.
    assert SECRET.encode() in reference["secret"].body
    assert SECRET.encode() in reference["gzip-request"].body
    reference = {
        row.name: Reply(
            reference[row.name].status,
            exchange_redactor(SALTED, _wire_headers(row)).data(reference[row.name].body),
        )
        for row in TABLE
        if row.recorded
    }
    assert PLACEHOLDER[:-1] + b":" in reference["secret"].body
    for row in TABLE:
        if dict(row.headers).get("api-key"):
            assert b"[REDACTED:credential]" in reference[row.name].body, row.name
    assert PLACEHOLDER[:-1] + b":" in reference["gzip-request"].body
    gone = "http://127.0.0.1:9"  # nothing listens there: replay must not need it
    for recorder, (cassette, _) in recordings.items():
        with BINDINGS[replayer](cassette, Mode.REPLAY, gone) as send:
            for row in TABLE:
                reply = send(row)
                if row.recorded:
                    assert reply == reference[row.name], (recorder, replayer, row.name)
                else:
                    assert reply.status == 404
                    error = json.loads(reply.body)["error"]
                    assert error["type"] == "reel_miss"
                    assert error["closest"]["diff"][0]["path"] == "messages[0].content"
