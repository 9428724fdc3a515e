"""Cassettes gone wrong, seen from every entry point at once.

One damaged file (a torn last line, a corrupt middle line, wrong types,
bytes that are not UTF-8) is loaded strictly and tolerantly, checked with
``reel validate``, replayed through the proxy and an in-process transport,
appended to in auto mode and redacted in place: every entry point names the
same file and lines, the proxy answers a bad line with a 500 and goes on,
and nothing ever rewrites the file without the lines it could not read.
Then newer schemas, unknown fields, and a 100 MB body (timed and measured).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import httpx
import pytest

from reel_bindings.cli import main as reel
from reel_bindings.httpcore import Transport
from reel_bindings.proxy import Proxy, ProxyOptions, running
from reel_core import Cassette, CassetteError, Mode, SchemaVersionError
from reel_core.tools import CassetteWarning
from tests.bindings.proxy_support import Call, chat_call, fetch, options
from tests.fakes.upstream import serve_fake

from ._support import check_cassette, record

GOOD = chat_call("a good line")
TYPES = chat_call("a line with wrong types")
UTF8 = chat_call("a line with bytes that are not UTF-8")
STREAM = chat_call("a good stream", stream=True)
TORN = chat_call("the line the crash tore", stream=True)
GARBAGE = b'{"id": "a line that lost its key", "request": {"method": "POST", oops'

#: Line numbers in the damaged cassette.
LINE_TYPES, LINE_UTF8, LINE_GARBAGE, LINE_TORN = 3, 4, 5, 7


def prompt_of(line: bytes) -> str:
    content: str = json.loads(line)["request"]["body"]["json"]["messages"][0]["content"]
    return content


async def damaged_cassette(path: Path) -> bytes:
    """Record five calls, then damage the file; its bytes.

    1 ``_meta``; 2 good; 3 ``"status": "200"``; 4 an id with bytes that are
    not UTF-8 (3 and 4 keep their key first: indexed, and found bad only
    when served); 5 garbage; 6 a good stream; 7 half a line, no newline.
    """
    await record(path, [GOOD, TYPES, UTF8, STREAM, TORN])
    meta, *lines = path.read_bytes().splitlines()
    by_prompt = {prompt_of(line): line for line in lines}
    types = by_prompt["a line with wrong types"].replace(b'"status":200', b'"status":"200"', 1)
    utf8 = by_prompt["a line with bytes that are not UTF-8"].replace(
        b'"id":"', b'"id":"\xff\xfe', 1
    )
    torn = by_prompt["the line the crash tore"]
    data = b"\n".join(
        [
            meta,
            by_prompt["a good line"],
            types,
            utf8,
            GARBAGE,
            by_prompt["a good stream"],
            torn[: len(torn) // 2],
        ]
    )
    path.write_bytes(data)
    return data


def lines_of(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def tolerant_load(data: bytes, name: str) -> tuple[Cassette, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cassette = Cassette.loads(data, name=name, strict=False)
    assert all(issubclass(w.category, CassetteWarning) for w in caught)
    return cassette, [str(w.message) for w in caught]


@pytest.mark.anyio
async def test_every_entry_point_names_the_bad_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "damaged.jsonl"
    data = await damaged_cassette(path)
    name = str(path)

    # strict: the first line that fails to index, named with file and line
    with pytest.raises(CassetteError) as info:
        Cassette.loads(data, name=name, strict=True)
    assert info.value.name == name
    assert info.value.line == LINE_GARBAGE
    assert str(info.value).startswith(f"{name}:{LINE_GARBAGE}: not a JSON line")
    with pytest.raises(CassetteError, match=rf"^{name}:{LINE_GARBAGE}: "):
        Proxy(options(Mode.REPLAY, path).config(), cassette=path, strict=True)

    # tolerant: a warning per line it cannot index, the rest kept
    cassette, messages = tolerant_load(data, name)
    assert len(cassette) == 4
    assert messages[0].startswith(f"{name}:{LINE_GARBAGE}: skipped: not a JSON line")
    assert messages[1].startswith(f"{name}:{LINE_TORN}: skipped: ")
    assert messages[1].endswith("(a torn last line: a write cut short)")
    assert len(messages) == 2

    # reel validate: every bad line, including the two that index fine
    assert reel(["validate", name]) == 1
    out, err = capsys.readouterr()
    reported = [line.split(":")[1] for line in err.splitlines() if line.startswith(f"{name}:")]
    assert reported == [str(n) for n in (LINE_TYPES, LINE_UTF8, LINE_GARBAGE, LINE_TORN)]
    assert '"response.status" must be an integer' in err
    assert "torn last line" in err
    assert "4 bad lines, 2 interactions ok" in out
    assert path.read_bytes() == data  # validating writes nothing


@pytest.mark.anyio
async def test_the_proxy_answers_a_bad_line_500_and_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "damaged.jsonl"
    data = await damaged_cassette(path)
    opts = options(Mode.REPLAY, path)
    with pytest.warns(CassetteWarning):
        proxy = Proxy(opts.config(), cassette=path)
    async with (
        running(opts, proxy=proxy) as url,
        httpx.AsyncClient(base_url=url, timeout=10) as client,
    ):
        answers = [await fetch(client, call) for call in (GOOD, TYPES, UTF8, STREAM, TORN, GOOD)]
    assert [a.status for a in answers] == [200, 500, 500, 200, 404, 200], answers[4].body
    for answer, line in ((answers[1], LINE_TYPES), (answers[2], LINE_UTF8)):
        error = answer.json()["error"]
        assert error["type"] == "reel_bad_cassette"
        assert error["message"].startswith(f"{path}:{line}: ")
        assert f"reel validate {path}" in error["message"]
    assert answers[4].json()["error"]["type"] == "reel_miss"  # the torn line was skipped
    assert path.read_bytes() == data


@pytest.mark.anyio
async def test_appending_and_redacting_keep_every_line_they_cannot_read(tmp_path: Path) -> None:
    path = tmp_path / "damaged.jsonl"
    data = await damaged_cassette(path)
    old = lines_of(data)

    # auto mode through the proxy: what is missing is recorded after the
    # damaged lines, on a line of its own
    async with serve_fake() as fake:
        opts = options(Mode.AUTO, path, upstream=fake.url)
        with pytest.warns(CassetteWarning):
            proxy = Proxy(opts.config(), cassette=path)
        async with (
            running(opts, proxy=proxy) as url,
            httpx.AsyncClient(base_url=url, timeout=10) as client,
        ):
            assert (await fetch(client, TORN)).status == 200
            assert (await fetch(client, TYPES)).status == 500  # not re-recorded over it
    now = path.read_bytes()
    assert now.startswith(data + b"\n")
    assert lines_of(now)[: len(old)] == old
    new = lines_of(now)[len(old)]
    assert prompt_of(new) == "the line the crash tore"

    # an in-process transport appending: the same
    with pytest.warns(CassetteWarning):
        transport = Transport(path, mode="auto", timing="fast")
    with httpx.Client(transport=transport, base_url="http://api.openai.com") as client:
        bad = client.post(TYPES.path, content=TYPES.content)
    assert bad.status_code == 500
    assert bad.json()["error"]["message"].startswith(f"{path}:{LINE_TYPES}: ")
    assert path.read_bytes() == now

    # reel redact rewrites the file, keeping every line it cannot read byte for byte
    assert reel(["redact", str(path)]) == 0
    redacted = lines_of(path.read_bytes())
    assert len(redacted) == len(lines_of(now))
    for number in (LINE_TYPES, LINE_UTF8, LINE_GARBAGE, LINE_TORN):
        assert redacted[number - 1] == old[number - 1], number


NEWER = b'{"_meta":{"schema":4,"reel":"9.0","match":"normalized"}}\n'


@pytest.mark.parametrize("mode", [Mode.REPLAY, Mode.AUTO, Mode.RECORD])
def test_a_newer_schema_is_refused_and_never_overwritten(tmp_path: Path, mode: Mode) -> None:
    path = tmp_path / "newer.jsonl"
    data = NEWER + b'{"key":"sha256:' + b"0" * 64 + b'","whatever":"schema 4 holds"}\n'
    path.write_bytes(data)
    for strict in (True, False):
        with pytest.raises(SchemaVersionError, match=rf"^{path}:1: cassette schema 4 "):
            Proxy(options(mode, path).config(), cassette=path, strict=strict)
    with pytest.raises(SchemaVersionError):
        Transport(path, mode=mode)
    assert path.read_bytes() == data


def test_the_proxy_command_says_what_is_wrong_with_a_cassette(tmp_path: Path) -> None:
    """A cassette the proxy cannot open stops it with one line naming the
    file and line (exit 1, no traceback) and leaves the file as it was."""
    newer = tmp_path / "newer.jsonl"
    newer.write_bytes(NEWER)
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(b'{"_meta":{"schema":"one"}}\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("REEL_")}
    for path, args, message in (
        (newer, ["--mode", "record"], f"{newer}:1: cassette schema 4 (written by Reel 9.0)"),
        (broken, ["--mode", "replay"], f'{broken}:1: "_meta.schema" must be a positive integer'),
    ):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "reel_bindings.proxy",
                "--port",
                "0",
                "--cassette",
                str(path),
                *args,
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert done.returncode == 1
        assert done.stderr.startswith("reel: cannot open the cassette: " + message), done.stderr
        assert "Traceback" not in done.stderr
        assert done.stdout == ""  # no URL: it never listened
    assert newer.read_bytes() == NEWER


@pytest.mark.anyio
async def test_a_bad_cassette_in_a_directory_is_500_and_the_others_serve(tmp_path: Path) -> None:
    root = tmp_path / "cassettes"
    root.mkdir()
    (root / "newer.jsonl").write_bytes(NEWER)
    await record(root / "ok.jsonl", [GOOD])
    async with serve_fake() as fake:
        opts = ProxyOptions(mode=Mode.AUTO, cassette_dir=root, upstream=fake.url, port=0)
        async with (
            running(opts) as url,
            httpx.AsyncClient(base_url=url, timeout=10) as client,
        ):
            to_newer = Call(GOOD.path, GOOD.body, {"x-reel-cassette": "newer"})
            bad = await fetch(client, to_newer)
            again = await fetch(client, to_newer)  # still refused, still not written
            good = await fetch(client, Call(GOOD.path, GOOD.body, {"x-reel-cassette": "ok"}))
        assert fake.requests == []
    assert bad.status == again.status == 500
    assert bad.json()["error"]["message"].startswith(f"{root / 'newer.jsonl'}:1: cassette schema 4")
    assert good.status == 200
    assert (root / "newer.jsonl").read_bytes() == NEWER


@pytest.mark.anyio
async def test_unknown_fields_of_the_same_schema_are_read_and_replayed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fields a later Reel adds within schema 1 do not break this one."""
    path = tmp_path / "c.jsonl"
    await record(path, [GOOD])
    meta, line = path.read_bytes().splitlines()
    obj: dict[str, Any] = json.loads(line)
    obj["future_field"] = {"anything": [1, 2, 3]}
    obj["response"]["also_new"] = True
    meta_obj = json.loads(meta)
    meta_obj["_meta"]["added_later"] = "x"
    path.write_bytes(json.dumps(meta_obj).encode() + b"\n" + json.dumps(obj).encode() + b"\n")
    check_cassette(path)
    assert reel(["validate", str(path)]) == 0
    capsys.readouterr()
    async with (
        running(options(Mode.REPLAY, path)) as url,
        httpx.AsyncClient(base_url=url, timeout=10) as client,
    ):
        assert (await fetch(client, GOOD)).status == 200


# ------------------------------------------------------------- 100 MB body

BIG_MB = 100

GENERATE = """
import json, sys
from reel_core import CassetteMeta, Interaction, MatchConfig, RecordedRequest
from reel_core import RecordedResponse
from reel_core.tools import match_key

def line(prompt, body):
    request = json.dumps({"model": "m", "messages": [{"role": "user", "content": prompt}]})
    request = request.encode()
    key = match_key("POST", "/v1/chat/completions", (), request, MatchConfig())
    return Interaction(
        key, key[7:19], RecordedRequest("POST", "/v1/chat/completions", (), request),
        RecordedResponse(200, (("content-type", "application/json"),), body),
    ).to_line()

with open(sys.argv[1], "wb") as f:
    f.write(CassetteMeta().to_line())
    for n in range(200):
        f.write(line(f"small {n}", b'{"ok": true}'))
        if n == 100:
            f.write(line("big", b'{"data": "' + b"x" * (int(sys.argv[2]) << 20) + b'"}'))
"""

MEASURE = """
import hashlib, json, resource, sys, time
import anyio, httpx
from reel_bindings import CassetteFile
from reel_bindings.proxy import ProxyOptions, running
from reel_core import Config, EndOfResponse, Engine, Frame, Mode, Request, Timing

def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

def body(prompt):
    return json.dumps({"model": "m", "messages": [{"role": "user", "content": prompt}]}).encode()

out = {"baseline_mb": peak_mb()}
path = sys.argv[1]
if sys.argv[2] == "core":
    start = time.perf_counter()
    file = CassetteFile(path, mode=Mode.AUTO)
    out["load_s"] = time.perf_counter() - start
    out["load_peak_mb"] = peak_mb()
    out["lines"] = len(file.cassette)
    for prompt in ("small 150", "big"):
        start = time.perf_counter()
        session = Engine(file.cassette, Config(mode=Mode.REPLAY, timing=Timing.parse("fast")))
        session.receive_request(Request("POST", "/v1/chat/completions", (), body(prompt)))
        size = 0
        while not isinstance(event := session.next_event(), EndOfResponse):
            size += len(event.data) if isinstance(event, Frame) else 0
        out[prompt.split()[0] + "_s"] = time.perf_counter() - start
        out[prompt.split()[0] + "_bytes"] = size
        out[prompt.split()[0] + "_peak_mb"] = peak_mb()
    out["play_peak_mb"] = peak_mb()
else:
    async def main():
        options = ProxyOptions(mode=Mode.REPLAY, cassette=path, port=0, timing=Timing.parse("fast"))
        async with running(options) as url, httpx.AsyncClient(base_url=url, timeout=60) as client:
            start = time.perf_counter()
            digest = hashlib.sha256()
            size = 0
            request = client.build_request("POST", "/v1/chat/completions", content=body("big"))
            response = await client.send(request, stream=True)
            async for chunk in response.aiter_raw():
                size += len(chunk)
                digest.update(chunk)
            out["proxy_status"] = response.status_code
            out["proxy_s"] = time.perf_counter() - start
            out["proxy_bytes"] = size
            out["proxy_sha"] = digest.hexdigest()
            start = time.perf_counter()
            small = await client.post("/v1/chat/completions", content=body("small 7"))
            out["proxy_small_s"] = time.perf_counter() - start
            out["proxy_small_status"] = small.status_code
    anyio.run(main)
    out["proxy_peak_mb"] = peak_mb()
print(json.dumps(out))
"""


def run_python(code: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow
def test_a_100_mb_body_loads_and_serves_in_bounded_memory(tmp_path: Path) -> None:
    """Loading indexes the big line without parsing it; serving a small
    recording does not touch it; serving it costs a few times its size.
    Each phase runs in a fresh process so its peak memory is its own."""
    import hashlib

    path = tmp_path / "big.jsonl"
    run_python(GENERATE, str(path), str(BIG_MB))
    size_mb = path.stat().st_size / 2**20
    assert size_mb > BIG_MB
    core = json.loads(run_python(MEASURE, str(path), "core"))
    served = json.loads(run_python(MEASURE, str(path), "proxy"))
    big = b'{"data": "' + b"x" * (BIG_MB << 20) + b'"}'
    figures = {"file_mb": round(size_mb, 1), "core": core, "proxy": served}
    print("100 MB cassette:", json.dumps(figures))  # shown with -s, quoted in docs/reliability.md
    assert core["lines"] == 201
    # Memory, not time (speed is the benchmarks' job; the figures are printed):
    assert core["load_peak_mb"] - core["baseline_mb"] < 3 * size_mb
    # the big line is not parsed to serve another: serving the small one
    # grows the peak by far less than the big line's size
    assert core["small_peak_mb"] - core["load_peak_mb"] < size_mb / 4
    assert core["small_bytes"] > 0
    assert core["big_bytes"] == len(big)
    assert core["play_peak_mb"] - core["baseline_mb"] < 6 * size_mb
    assert served["proxy_status"] == 200
    assert served["proxy_bytes"] == len(big)
    assert served["proxy_sha"] == hashlib.sha256(big).hexdigest()
    assert served["proxy_small_status"] == 200
    assert served["proxy_peak_mb"] - served["baseline_mb"] < 8 * size_mb
