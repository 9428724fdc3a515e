"""Nothing the proxy or a player keeps grows with the requests it serves
(issue 36, part 3; docs/reliability.md, "Memory stays bounded").

One test per structure that could grow: the parsed lines of a cassette
(at most ``--parsed-lines`` / ``REEL_PARSED_LINES``), the cassettes of a
``--cassette-dir`` (one each, however often named; a missing one is not
kept), the connections waiting (gone with them), the recording queue
(empty once settled), each cassette's keying memo and replay caches (one
per settings, not per connection), and the run log (a proxy serving for
days keeps counts only).  What does grow is bounded by something other
than the request count, and said so there: the cassettes of a directory
by its files, a recorder's lines by its file.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import httpx
import pytest

from reel_bindings._files import CassetteFile
from reel_bindings._settings import SettingError, Settings, Source
from reel_bindings.httpcore import Transport
from reel_bindings.proxy import Proxy, parse_options, running
from reel_bindings.proxy import _proxy as make_proxy
from reel_core import Interaction, MatchConfig, Mode, RecordedRequest, RecordedResponse
from reel_core.tools import PARSED_LINES
from tests.fakes.upstream import serve_fake

from .proxy_support import chat_call, options

pytestmark = pytest.mark.anyio

CHAT = "/v1/chat/completions"
LINES = 12


def _body(n: int) -> bytes:
    return b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"line %d"}]}' % n


def _cassette(path: Path, lines: int = LINES) -> Path:
    """A cassette of ``lines`` recordings, one per request ``_body(n)``."""
    out = [b'{"_meta":{"schema":1}}\n']
    for n in range(lines):
        request = RecordedRequest("POST", CHAT, (), _body(n))
        out.append(
            Interaction(
                key=request.key(MatchConfig()),
                id=f"r{n}",
                request=request,
                response=RecordedResponse(
                    200, (("content-type", "application/json"),), body=b'{"n":%d}' % n
                ),
            ).to_line()
        )
    path.write_bytes(b"".join(out))
    return path


async def _post(client: httpx.AsyncClient, n: int, cassette: str | None = None) -> httpx.Response:
    headers = {"content-type": "application/json"}
    if cassette is not None:
        headers["x-reel-cassette"] = cassette
    return await client.post(CHAT, content=_body(n), headers=headers)


async def test_a_cassette_dir_keeps_one_cassette_each_and_a_few_lines_parsed(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "cassettes"
    directory.mkdir()
    for name in "abc":
        _cassette(directory / f"{name}.jsonl")
    opts = options(Mode.REPLAY, None, cassette_dir=directory, timing="fast", parsed_lines=3)
    proxy = make_proxy(opts)
    async with running(opts, proxy=proxy) as url:
        for round_ in range(4):  # a new connection each round: 4 x 40 requests
            async with httpx.AsyncClient(base_url=url, trust_env=False, timeout=30) as client:
                for n in range(LINES * 3):
                    answer = await _post(client, n % LINES, "abc"[n % 3])
                    assert answer.json() == {"n": n % LINES}
                missing = await _post(client, 0, f"nope-{round_}")
                assert missing.status_code == 404  # not kept: a name is no cassette
                miss = await _post(client, LINES + round_, "a")
                assert miss.status_code == 404  # a miss report read every line of "a"
        with anyio.fail_after(10):  # the last connection's close reaches the proxy
            while proxy.active:
                await anyio.sleep(0.01)
        assert len(proxy._files) == len(proxy._by_label) == 3
        assert not proxy._waiting  # each connection left the timer's set as it closed
        assert len(proxy.recordings) == 0
        assert proxy.runlog.last.maxlen == 0  # a proxy serving for days: counts only
        for file in proxy.cassettes:
            cassette = file.cassette
            assert cassette.parsed_lines == 3
            assert len(cassette._lines.parsed) <= 3
            assert len(cassette._memos) == 1  # one per settings, not per connection
            assert len(cassette._caches) == 1
            assert len(cassette._generations) == 0  # each request recorded once


async def test_the_recording_queue_is_empty_once_each_exchange_ended(tmp_path: Path) -> None:
    cassette = tmp_path / "rec.jsonl"
    async with serve_fake() as fake:
        opts = options(Mode.RECORD, cassette, upstream=fake.url, timing="fast", parsed_lines=2)
        proxy = make_proxy(opts)
        async with running(opts, proxy=proxy) as url:
            async with httpx.AsyncClient(base_url=url, trust_env=False, timeout=30) as client:
                for n in range(20):
                    call = chat_call(f"queue {n}", stream=n % 2 == 1)
                    answer = await client.post(call.path, content=call.content)
                    assert answer.status_code == 200
            proxy.settle()
            assert len(proxy.recordings) == 0
            assert proxy.write_errors == 0
            kept = proxy.cassettes[0].cassette
            assert len(kept) == 20  # the lines it recorded: its file's, nothing more
            assert len(kept._lines.parsed) <= 2


def test_a_player_keeps_as_many_parsed_lines_as_reel_parsed_lines_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _cassette(tmp_path / "c.jsonl")
    monkeypatch.setenv("REEL_PARSED_LINES", "4")
    transport = Transport(path, timing="fast")
    with httpx.Client(transport=transport, base_url="https://api.openai.com") as client:
        for n in range(LINES):
            answer = client.post(CHAT, content=_body(n))
            assert answer.json() == {"n": n}
    cassette = transport.player.file.cassette
    assert cassette.parsed_lines == 4
    assert len(cassette._lines.parsed) == 4
    monkeypatch.delenv("REEL_PARSED_LINES")
    assert Transport(path).player.file.cassette.parsed_lines == PARSED_LINES


def test_reel_parsed_lines_takes_a_positive_number() -> None:
    assert Settings.resolve(env={"REEL_PARSED_LINES": "64"}).parsed_lines == 64
    assert Settings.resolve(env={}).parsed_lines is None
    for bad in ("0", "-3", "lots", "1.5"):
        with pytest.raises(SettingError, match=r"REEL_PARSED_LINES=.* is not a positive number"):
            Settings.resolve(env={"REEL_PARSED_LINES": bad})
    with pytest.raises(SettingError) as info:
        Settings.resolve({"parsed_lines": 0})
    assert info.value.source is Source.FLAG


def test_the_proxy_takes_parsed_lines_as_a_flag_or_a_variable(tmp_path: Path) -> None:
    cassette = str(_cassette(tmp_path / "c.jsonl"))
    assert parse_options(["--cassette", cassette], environ={}).parsed_lines is None
    flagged = parse_options(["--cassette", cassette, "--parsed-lines", "9"], environ={})
    assert flagged.parsed_lines == 9
    env = {"REEL_PARSED_LINES": "7"}
    assert parse_options(["--cassette", cassette], environ=env).parsed_lines == 7
    proxy = Proxy(flagged.config(), cassette=Path(cassette), parsed_lines=9)
    assert proxy.cassettes[0].cassette.parsed_lines == 9


def test_the_proxy_says_what_a_bad_parsed_lines_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cassette = str(_cassette(tmp_path / "c.jsonl"))
    with pytest.raises(SystemExit) as exit_:
        parse_options(["--cassette", cassette, "--parsed-lines", "none"], environ={})
    assert exit_.value.code == 2
    assert "--parsed-lines is not a positive number of lines" in capsys.readouterr().err


def test_a_cassette_file_passes_its_limit_on(tmp_path: Path) -> None:
    path = _cassette(tmp_path / "c.jsonl")
    assert CassetteFile(path, parsed_lines=5).cassette.parsed_lines == 5
    assert CassetteFile(path).cassette.parsed_lines == PARSED_LINES
    fresh = CassetteFile(tmp_path / "new.jsonl", mode=Mode.RECORD, parsed_lines=6)
    assert fresh.cassette.parsed_lines == 6
    assert os.path.exists(tmp_path / "new.jsonl")
