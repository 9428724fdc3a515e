"""Regenerate the command outputs shown in the docs from the real output.

Each example block of ``docs/cli.md``, ``docs/matching.md`` and
``docs/troubleshooting.md`` is marked by an HTML comment on the line before
its fence::

    <!-- example: inspect-demo -->
    ```
    $ reel inspect demo.jsonl
    ...
    ```

This script runs each example (the ``reel`` commands in a scratch directory
holding the demo cassette and the other files the examples name; the miss
reports through a replay session) and writes what they print into the
block.  ``--check`` changes nothing and exits 1 when a page holds other
text than the current output (``tests/test_docs_examples.py`` runs it).

Run from the project root: ``python scripts/gen_docs_examples.py``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import gzip
import io
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reel_core import MissReport

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = ("cli.md", "matching.md", "troubleshooting.md", "freshness.md")
DEMO = ROOT / "src" / "reel_bindings" / "demo" / "demo.jsonl"
MARK = re.compile(r"<!-- example: ([a-z0-9-]+) -->\n```([a-z]*)\n(.*?)```", re.DOTALL)

# -- the scratch directory ----------------------------------------------------------


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in path.read_bytes().splitlines()]


def _write_lines(path: Path, lines: list[dict[str, Any]]) -> None:
    text = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
    path.write_text(text, encoding="utf-8")


def _edited(demo: Path, out: Path) -> None:
    """A re-recording of the demo: one chat answer and one streamed Anthropic
    answer changed, the Responses call gone, a chat call new, a Gemini
    request edited by hand."""
    from reel_core import Interaction, MatchConfig, RecordedRequest

    meta, *lines = _lines(demo)
    out_lines = [meta]
    for line in lines:
        endpoint = line["endpoint"]
        if endpoint == "POST /v1/responses":
            continue
        if line["id"] == "f95b67df3fce":
            body = line["response"]["body"]["json"]
            body["choices"][0]["message"]["content"] = "Hello from Reel!"
            body["usage"]["completion_tokens"] = 5
            line["meta"]["tokens_out"] = 5
        elif endpoint == "POST /v1/messages" and "stream" in line["response"]:
            frames = line["response"]["frames"]
            for frame in frames:
                frame[0] = round(frame[0] + 38.0, 3)
                frame[1] = frame[1].replace('"text":"Fake"', '"text":"Real"')
            line["response"]["end"]["at"] = round(line["response"]["end"]["at"] + 38.0, 3)
            line["meta"]["ttft_ms"] = round(line["meta"]["ttft_ms"] + 38.0, 3)
        elif endpoint.endswith(":generateContent"):
            contents = line["request"]["body"]["json"]["contents"]
            contents[0]["parts"][0]["text"] = "Say goodbye to Reel."
            # edited by hand and keyed again: the id alone still pairs it
            line["key"] = Interaction.from_json(line).request.key(MatchConfig())
        out_lines.append(line)
    first = Interaction.from_json(lines[0])
    body = first.request.body.replace(b"Say hello to Reel.", b"Say hello again.")
    request = RecordedRequest(first.request.method, first.request.path, body=body)
    key = request.key(MatchConfig())
    new = json.loads(Interaction.from_json(lines[0]).to_line())
    new.update(key=key, id=key[7:19])
    new["request"] = json.loads(Interaction(key, key[7:19], request, first.response).to_line())[
        "request"
    ]
    out_lines.append(new)
    _write_lines(out, out_lines)


def _leaky(out: Path) -> None:
    from reel_core import (
        CassetteMeta,
        Interaction,
        MatchConfig,
        RecordedRequest,
        RecordedResponse,
    )

    body = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "Write to jane.doe@example.com"}],
    }
    request = RecordedRequest(
        "POST",
        "/v1/chat/completions",
        (("api_key", "k3y-" + "7" * 24),),
        json.dumps(body).encode(),
    )
    response = RecordedResponse(
        200,
        (("content-type", "application/json"), ("set-cookie", "session=0123456789abcdef")),
        body=b'{"reply": "Sent to jane.doe@example.com"}',
    )
    key = request.key(MatchConfig())
    leaky = Interaction(key, key[7:19], request, response, provider="openai")
    out.write_bytes(CassetteMeta().to_line() + leaky.to_line())


def _broken(demo: Path, out: Path) -> None:
    raw = demo.read_bytes().splitlines(keepends=True)
    good, other = raw[1], raw[2]
    bad_status = raw[4].replace(b'"status":200', b'"status":"200"', 1)
    torn = other[:200]
    out.write_bytes(raw[0] + good + b'{not json": 1}\n' + bad_status + torn)


def _vcr(out: Path) -> None:
    chat = json.dumps(
        {"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "Hi"}]}
    )
    events = (
        "".join(
            f"data: {json.dumps(chunk)}\n\n"
            for chunk in (
                {"object": "chat.completion.chunk", "model": "gpt-4o-mini", "choices": []},
                {
                    "object": "chat.completion.chunk",
                    "model": "gpt-4o-mini",
                    "choices": [{"index": 0, "delta": {"content": "Hello"}}],
                },
            )
        )
        + "data: [DONE]\n\n"
    )
    packed = base64.b64encode(gzip.compress(b"ok", mtime=0)).decode()
    text = (
        "interactions:\n"
        "- request:\n"
        "    body: !!python/object/apply:builtins.bytes\n"
        "    - !!binary |\n"
        f"      {base64.b64encode(b'{}').decode()}\n"
        "    headers: {}\n"
        "    method: POST\n"
        "    uri: https://api.openai.com/v1/embeddings\n"
        "  response:\n"
        "    body:\n"
        "      string: !!binary |\n"
        f"        {packed}\n"
        "    headers: {}\n"
        "    status: {code: 200, message: OK}\n"
        "- request:\n"
        f"    body: {json.dumps(chat)}\n"
        "    headers: {}\n"
        "    method: POST\n"
        "    uri: https://api.openai.com/v1/chat/completions\n"
        "  response:\n"
        f"    body: {{string: {json.dumps(events)}}}\n"
        "    headers:\n"
        "      Content-Type: [text/event-stream]\n"
        "    status: {code: 200, message: OK}\n"
        "version: 1\n"
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "test_chat.yaml").write_text(text)
    (out / "other.yaml").write_text(text)


def _chat_cassette(out: Path) -> None:
    """A small recording: a chat answer (sent gzip'd by the upstream) and a
    streamed one with its frame timing, for the export examples."""
    from reel_core import CassetteMeta, Redactor
    from reel_core.tools import Exchange, import_exchanges

    chat = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Say hi"}]}
    answer = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi!"}}]}
    events = [
        b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n',
        b'data: {"choices":[{"index":0,"delta":{"content":" there"}}]}\n\n',
        b"data: [DONE]\n\n",
    ]
    url = "https://api.openai.com/v1/chat/completions"
    json_type = ("content-type", "application/json")
    exchanges = [
        Exchange(
            0,
            "POST",
            url,
            (json_type,),
            json.dumps(chat).encode(),
            200,
            (json_type, ("content-encoding", "gzip"), ("x-request-id", "req_1")),
            gzip.compress(json.dumps(answer).encode(), mtime=0),
            ttfb=0.31,
            timestamp=1_795_000_000.0,
        ),
        Exchange(
            1,
            "POST",
            url,
            (json_type,),
            json.dumps({**chat, "stream": True}).encode(),
            200,
            (("content-type", "text/event-stream"), ("x-request-id", "req_2")),
            ((0.0, events[0]), (0.05, events[1]), (0.09, events[2]), (0.1, b"")),
            ttfb=0.28,
            timestamp=1_795_000_001.0,
        ),
    ]
    report = import_exchanges(exchanges, tool="docs", redactor=Redactor(), meta=CassetteMeta())
    out.write_bytes(report.dumps())


def _rerecorded(out: Path) -> None:
    """A chat request answered 429 then 200 (the SDK's retry), recorded on
    14 November 2023, then re-recorded a month later in auto mode with
    max_age 7d: the new 200 carries a field the old one did not."""
    from reel_core import (
        Cassette,
        CassetteMeta,
        Config,
        Engine,
        Forward,
        Mode,
        Request,
        Signal,
    )

    day, t0 = 86400.0, 1_700_000_000.0
    request = Request(
        "POST",
        "/v1/chat/completions",
        ((b"content-type", b"application/json"), (b"host", b"api.openai.com")),
        _chat("Say hi"),
    )
    limited = b'{"error":{"message":"Rate limit reached","type":"requests"}}'
    old = (
        b'{"id":"chatcmpl-1","choices":[{"index":0,"message":{"role":"assistant",'
        b'"content":"Hi!"}}]}'
    )
    new = (
        b'{"id":"chatcmpl-2","choices":[{"index":0,"message":{"role":"assistant",'
        b'"content":"Hi!","refusal":null}}],"service_tier":"default"}'
    )

    def call(cassette: Cassette, config: Config, now: float, status: int, body: bytes) -> None:
        engine = Engine(cassette, config)
        engine.receive_request(request, wall=now)
        event = engine.next_event()
        if isinstance(event, Forward):
            head = [(b"content-type", b"application/json")]
            engine.upstream_head(status, head, mono=0.0, sent_at=0.0, wall=now)
            engine.upstream_data(body, mono=0.2)
            engine.upstream_end(mono=0.2)
        while not isinstance(engine.next_event(), Signal):
            pass
        engine.record()
        engine.start_next_cycle()

    cassette = Cassette("chat.jsonl", CassetteMeta(max_age="7d"))
    auto = Config(mode=Mode.AUTO)
    call(cassette, auto, t0, 429, limited)
    call(cassette, auto, t0 + 1, 200, old)
    cassette = Cassette.loads(cassette.dumps())
    call(cassette, auto, t0 + 30 * day, 429, limited)
    call(cassette, auto, t0 + 30 * day + 1, 200, new)
    out.write_bytes(cassette.dumps())


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    """A directory holding the files the examples name, as the cwd; REEL_*
    variables cleared."""
    saved_env = {k: v for k, v in os.environ.items() if k.startswith("REEL_")}
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="reel-docs-") as tmp:
        where = Path(tmp)
        shutil.copy(DEMO, where / "demo.jsonl")
        _edited(where / "demo.jsonl", where / "edited.jsonl")
        _leaky(where / "leaky.jsonl")
        _broken(where / "demo.jsonl", where / "broken.jsonl")
        _vcr(where / "cassettes")
        _chat_cassette(where / "chat.jsonl")
        _rerecorded(where / "rerecorded.jsonl")
        shutil.copy(where / "rerecorded.jsonl", where / "compact-me.jsonl")
        (where / "notes.txt").write_text("Meeting notes\n- buy milk\n")
        (where / "empty.jsonl").write_bytes(b"")
        for name in saved_env:
            del os.environ[name]
        columns = os.environ.get("COLUMNS")
        os.environ["COLUMNS"] = "100"  # argparse wraps help to the terminal's width
        os.chdir(where)
        try:
            yield where
        finally:
            os.chdir(cwd)
            os.environ.update(saved_env)
            if columns is None:
                del os.environ["COLUMNS"]
            else:
                os.environ["COLUMNS"] = columns


# -- running examples ----------------------------------------------------------------


def run(command: str) -> str:
    """``$ command`` and what it prints (stdout and stderr, in order)."""
    import shlex

    from reel_bindings.cli import main

    words = shlex.split(command)
    env: dict[str, str] = {}
    while "=" in words[0]:
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    assert words[0] == "reel", command
    out = io.StringIO()
    os.environ.update(env)
    try:
        with (
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(out),
            contextlib.suppress(SystemExit),
        ):
            main(words[1:])
    finally:
        for name in env:
            del os.environ[name]
    return f"$ {command}\n{out.getvalue()}"


def commands(*lines: str) -> Callable[[], str]:
    return lambda: "".join(run(line) for line in lines)


def usage(command: str) -> Callable[[], str]:
    """The usage lines of ``reel COMMAND --help``."""

    def text() -> str:
        full = run(f"reel {command} --help").split("\n", 1)[1]
        return full.split("\n\n", 1)[0] + "\n"

    return text


def _miss(cassette_lines: list[bytes], body: bytes, name: str = "m.jsonl") -> MissReport:
    from reel_bindings.proxy import ProxyOptions
    from reel_core import Cassette, Engine, Miss, Request

    cassette = Cassette.loads(b"".join(cassette_lines), name=name)
    session = Engine(cassette, ProxyOptions().config())
    session.receive_request(
        Request(
            "POST",
            "/v1/chat/completions",
            ((b"host", b"127.0.0.1:7878"), (b"content-type", b"application/json")),
            body,
        )
    )
    miss = session.next_event()
    assert isinstance(miss, Miss), miss
    return miss.report


def _chat(content: str, **extra: Any) -> bytes:
    return json.dumps(
        {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": content}], **extra}
    ).encode()


def miss_json() -> str:
    raw = DEMO.read_bytes().splitlines(keepends=True)
    report = _miss(raw[:3], _chat("Say hi to Reel."))
    return report.to_bytes().decode()


def miss_text() -> str:
    raw = DEMO.read_bytes().splitlines(keepends=True)
    return _miss(raw[:3], _chat("Say hi to Reel.")).render() + "\n"


def miss_exact() -> str:
    from reel_core import CassetteMeta, MatchConfig, MatchMode

    exact = MatchConfig(MatchMode.EXACT)
    lines = [CassetteMeta(match=exact).to_line()]
    for raw in DEMO.read_bytes().splitlines(keepends=True)[1:3]:
        line = json.loads(raw)
        body = dict(line["request"]["body"]["json"], temperature="__T__")
        text = json.dumps(body, separators=(",", ":")).replace('"__T__"', "0.70")
        from reel_core import RecordedRequest

        request = RecordedRequest("POST", "/v1/chat/completions", body=text.encode())
        key = request.key(exact)
        line.update(key=key, id=key[7:19])
        line["request"]["body"] = {"text": text}
        lines.append(json.dumps(line, separators=(",", ":")).encode() + b"\n")
        break
    sent = _chat("Say hello to Reel.", temperature=0.7)
    sent = sent.replace(b'"temperature": 0.7', b'"temperature":0.7')
    return _miss(lines, sent, name="exact.jsonl").render() + "\n"


def proxy_missing() -> str:
    from reel_bindings.proxy import main

    out = io.StringIO()
    with (
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(out),
        contextlib.suppress(SystemExit),
    ):
        main(["--cassette", "tests/cassettes/chat.jsonl"], prog="reel replay")
    return "$ reel replay --cassette tests/cassettes/chat.jsonl\n" + out.getvalue()


def export_vcr() -> str:
    return (
        run("reel export vcr chat.jsonl")
        + "$ cat chat.yaml\n"
        + Path("chat.yaml").read_text("utf-8")
        + run("reel export vcr chat.jsonl")
    )


def check_leaky() -> str:
    _leaky(Path("leaky.jsonl"))  # as it was before the `reel redact` example
    return commands(
        "reel check leaky.jsonl demo.jsonl", "REEL_REDACT_PII=0 reel check leaky.jsonl"
    )()


EXAMPLES: dict[str, Callable[[], str]] = {
    "errors": commands("reel inspect missing.jsonl", "reel diff demo.jsonl"),
    "help": commands("reel --help"),
    "usage-inspect": usage("inspect"),
    "inspect-demo": commands("reel inspect demo.jsonl"),
    "inspect-none": commands("reel inspect demo.jsonl --status 4xx"),
    "inspect-id": commands("reel inspect demo.jsonl --id fed99"),
    "inspect-unknown-id": commands("reel inspect demo.jsonl --id zzz"),
    "usage-cost": usage("cost"),
    "cost-demo": commands("reel cost demo.jsonl"),
    "usage-diff": usage("diff"),
    "diff-demo": commands("reel diff demo.jsonl edited.jsonl", "reel diff demo.jsonl demo.jsonl"),
    "usage-view": usage("view"),
    "view-demo": commands("reel view demo.jsonl", "reel view demo.jsonl"),
    "usage-redact": usage("redact"),
    "redact-leaky": commands(
        "reel redact --dry-run leaky.jsonl", "reel redact leaky.jsonl", "reel redact leaky.jsonl"
    ),
    "usage-check": usage("check"),
    "check-leaky": check_leaky,
    "usage-validate": usage("validate"),
    "validate-broken": commands("reel validate demo.jsonl broken.jsonl"),
    "validate-junk": commands(
        "reel validate notes.txt", "reel validate empty.jsonl", "reel inspect notes.txt"
    ),
    "usage-import": usage("import vcr"),
    "import-one": commands(
        "reel import vcr cassettes/test_chat.yaml",
        "reel inspect cassettes/test_chat.jsonl",
        "reel import vcr cassettes/test_chat.yaml",
    ),
    "import-several": commands(
        "reel import vcr cassettes/test_chat.yaml cassettes/other.yaml --out-dir converted"
    ),
    "usage-export-vcr": usage("export vcr"),
    "export-vcr": export_vcr,
    "miss-json": miss_json,
    "miss-text": miss_text,
    "miss-exact": miss_exact,
    "proxy-missing": proxy_missing,
    "usage-drift": usage("drift"),
    "drift-rerecorded": commands("reel drift rerecorded.jsonl", "reel inspect rerecorded.jsonl"),
    "drift-json": commands("reel drift rerecorded.jsonl --json"),
    "usage-compact": usage("compact"),
    "compact-rerecorded": commands(
        "reel compact compact-me.jsonl --dry-run",
        "reel compact compact-me.jsonl",
        "reel compact compact-me.jsonl",
        "reel drift compact-me.jsonl",
    ),
}


def generate() -> dict[str, str]:
    """Every example's current output."""
    with scratch():
        return {name: make() for name, make in EXAMPLES.items()}


def rewrite(text: str, outputs: dict[str, str]) -> str:
    def block(m: re.Match[str]) -> str:
        name, lang = m.group(1), m.group(2)
        if name not in outputs:
            raise SystemExit(f"docs: unknown example {name!r}: add it to EXAMPLES")
        return f"<!-- example: {name} -->\n```{lang}\n{outputs[name]}```"

    return MARK.sub(block, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail on drift, write nothing")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    outputs = generate()
    stale = []
    used: set[str] = set()
    for page in PAGES:
        path = DOCS / page
        text = path.read_text("utf-8")
        used.update(MARK.findall(text)[i][0] for i in range(len(MARK.findall(text))))
        new = rewrite(text, outputs)
        if new != text:
            stale.append(page)
            if not args.check:
                path.write_text(new, "utf-8")
    unused = sorted(set(EXAMPLES) - used)
    if unused:
        print(f"examples no page shows: {', '.join(unused)}", file=sys.stderr)
        return 1
    if stale and args.check:
        print(
            f"docs out of date: {', '.join(stale)}; run `python scripts/gen_docs_examples.py`",
            file=sys.stderr,
        )
        return 1
    for page in stale:
        print(f"rewrote docs/{page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
