"""Every entry point on a real Redis store: the proxy (asyncio and trio),
the in-process transports, the pytest plugin, the ``reel`` commands
(pull/push byte for byte, --store on the readers), and what happens when
the server is down at start or goes away mid-run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from reel_bindings._cli import main as reel
from reel_bindings._settings import Settings
from reel_bindings._store import MemoryStore, StoreUnavailableError, StoreURLError
from reel_bindings._store_url import open_store
from reel_bindings.httpcore import Transport
from reel_core import ConfigError, Mode, ReelError
from tests.fakes.upstream import FakeUpstreamThread, serve_fake
from tests.inner import inner_ini
from tests.redis_server import CHAT_TEST, RedisServer, free_port

from .proxy_support import chat_call, fetch, options, proxied

redis = pytest.importorskip("redis", reason="pip install redis (in the test extra)")

from reel_bindings._redis import RedisStore  # noqa: E402

NAME = "openai/chat.jsonl"


def lines(url: str, name: str = NAME, prefix: str = "reel") -> list[dict[str, object]]:
    data = RedisStore(url, prefix=prefix).read(name)
    assert data is not None
    return [json.loads(line) for line in data.splitlines()]


# -- the proxy ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_proxy_records_into_redis_and_replays_from_it(redis_url: str) -> None:
    calls = [chat_call("hello", stream=True), chat_call("again")]
    async with serve_fake(frame_delay=0.001) as fake:
        record = options(Mode.RECORD, Path(NAME), upstream=fake.url, store=redis_url)
        async with proxied(record) as client:
            recorded = [await fetch(client, call) for call in calls]
    assert [r.status for r in recorded] == [200, 200]
    written = lines(redis_url)
    assert "_meta" in written[0]
    assert len(written) == 3
    replay = options(Mode.REPLAY, Path(NAME), store=redis_url, timing="fast")
    async with proxied(replay) as client:
        replayed = [await fetch(client, call) for call in calls]
    assert [r.body for r in replayed] == [r.body for r in recorded]


@pytest.mark.anyio
async def test_the_proxy_picks_a_cassette_of_the_store_per_request(redis_url: str) -> None:
    async with serve_fake(frame_delay=0.001) as fake:
        opts = options(Mode.AUTO, None, upstream=fake.url, store=redis_url, store_prefix="team")
        async with proxied(opts) as client:
            for name in ("a/one.jsonl", "b/two.jsonl"):
                call = chat_call(name)
                call.headers["x-reel-cassette"] = name  # type: ignore[index]
                assert (await fetch(client, call)).status == 200
            bad = chat_call("bad")
            bad.headers["x-reel-cassette"] = "../x"  # type: ignore[index]
            assert (await fetch(client, bad)).status == 400
    assert RedisStore(redis_url, prefix="team").list() == ["a/one.jsonl", "b/two.jsonl"]


def test_the_proxy_says_the_store_is_down_and_exits_2(tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    for args in (["--cassette", NAME], []):
        done = subprocess.run(
            [sys.executable, "-m", "reel_bindings.proxy", "--store", url, "--port", "0", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert f"cannot open the store: the cassette store {url} cannot be reached" in done.stderr
        assert "start Redis or fix the URL" in done.stderr


def test_proxy_flags_and_variables_for_the_store() -> None:
    from reel_bindings.proxy import parse_options

    opts = parse_options(["--store", "redis://h:1/0", "--store-prefix", "p", "--cassette", NAME])
    assert (opts.store, opts.store_prefix, opts.cassette) == ("redis://h:1/0", "p", Path(NAME))
    env = {"REEL_STORE": "rediss://h:2/1", "REEL_STORE_PREFIX": "team"}
    opts = parse_options(["--mode", "auto"], env)
    assert (opts.store, opts.store_prefix, opts.cassette) == ("rediss://h:2/1", "team", None)
    for argv, env, message in (
        (["--store", "redis://h/0", "--cassette-dir", "d"], {}, "--cassette-dir is a directory"),
        ([], {"REEL_STORE": "reddis://h/0"}, "REEL_STORE: unknown store reddis://h/0"),
        ([], {"REEL_STORE": "redis://h/0", "REEL_STORE_PREFIX": "a b"}, "REEL_STORE_PREFIX"),
    ):
        with pytest.raises(SystemExit) as caught:
            parse_options(argv, env)
        assert caught.value.code == 2, message


def test_settings_read_the_store_variables() -> None:
    settings = Settings.from_env({"REEL_STORE": " redis://h:1/0 ", "REEL_STORE_PREFIX": "p"})
    assert (settings.store, settings.store_prefix) == ("redis://h:1/0", "p")
    assert Settings.from_env({"REEL_STORE": "x"}, store="redis://given/0").store == (
        "redis://given/0"
    )
    assert Settings.from_env({}).open_store() is None
    with pytest.raises(ConfigError, match=r"REEL_STORE: unknown store http://h: give a dir"):
        Settings.from_env({"REEL_STORE": "http://h"})
    with pytest.raises(ConfigError, match="REEL_STORE_PREFIX='a b' is not a key prefix"):
        Settings.from_env({"REEL_STORE_PREFIX": "a b"})


# -- in process ----------------------------------------------------------------------


def test_the_in_process_transport_records_and_replays_through_a_store_url(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REEL_MODE", raising=False)
    call = chat_call("in process")
    with FakeUpstreamThread(frame_delay=0.001) as fake:
        with httpx.Client(
            transport=Transport(NAME, mode="auto", store=redis_url), base_url=fake.url
        ) as client:
            first = client.post(call.path, content=call.content)
        assert first.status_code == 200
    assert len(lines(redis_url)) == 2
    monkeypatch.setenv("REEL_STORE", redis_url)  # the variable names the store too
    with httpx.Client(transport=Transport(NAME, mode="replay"), base_url="http://x") as client:
        again = client.post(call.path, content=call.content)
    assert again.content == first.content


def test_the_in_process_transport_refuses_a_store_that_is_down() -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    with pytest.raises(StoreUnavailableError, match=f"the cassette store {url} cannot be reached"):
        Transport(NAME, mode="auto", store=url)


def test_in_process_recording_answers_502_while_redis_is_gone(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    redis_server.flush()
    monkeypatch.delenv("REEL_MODE", raising=False)
    with FakeUpstreamThread(frame_delay=0.001) as fake:
        recorder = httpx.Client(
            transport=Transport(NAME, mode="auto", store=redis_server.url), base_url=fake.url
        )
        with recorder:
            hit = chat_call("kept")
            first = recorder.post(hit.path, content=hit.content)
            assert first.status_code == 200
            player = httpx.Client(
                transport=Transport(NAME, mode="replay", store=redis_server.url),
                base_url="http://x",
            )
            redis_server.kill()
            replayed = player.post(hit.path, content=hit.content)  # loaded: still served
            assert replayed.content == first.content
            new = chat_call("new")
            answer = recorder.post(new.path, content=new.content)
            assert answer.status_code == 502
            assert "Reel did not forward" in answer.text
            assert redis_server.url in answer.text
            assert len(fake.server.requests) == 1  # the new request never went upstream
            redis_server.start()  # back (empty: the test server keeps nothing)
            assert recorder.post(new.path, content=new.content).status_code == 200
            player.close()
    written = lines(redis_server.url)
    assert len(written) == 2  # a fresh _meta line, then the new recording
    assert "new" in json.dumps(written[1])


# -- the pytest plugin -------------------------------------------------------------------


def test_the_pytest_plugin_records_and_replays_with_reel_store(
    pytester: pytest.Pytester, redis_url: str
) -> None:
    pytester.makepyfile(test_redis_chat=CHAT_TEST)
    pytester.makeini(inner_ini())
    with FakeUpstreamThread(frame_delay=0.001) as fake:
        pytester.makeconftest(
            f"import pytest\n@pytest.fixture\ndef fake_url():\n    return {fake.url!r}\n"
        )
        recorded = pytester.runpytest_subprocess(
            "-p", "reel", "--reel-mode", "auto", "--reel-store", redis_url
        )
        recorded.assert_outcomes(passed=1)
        recorded.stdout.fnmatch_lines(["reel: mode auto (--reel-mode)*cassettes in RedisStore(*"])
    store = RedisStore(redis_url)
    assert store.list() == ["test_redis_chat/test_chat.jsonl"]
    assert not (pytester.path / "tests" / "cassettes").exists()  # nothing on disk
    pytester.makeini(inner_ini(f"reel_store = {redis_url}"))
    replayed = pytester.runpytest_subprocess("-p", "reel")  # the ini names the store
    replayed.assert_outcomes(passed=1)
    down = f"redis://127.0.0.1:{free_port()}/0"
    refused = pytester.runpytest_subprocess("-p", "reel", "--reel-store", down)
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines([f"*the cassette store {down} cannot be reached*"])


# -- the reel commands --------------------------------------------------------------------


def test_push_then_pull_is_byte_identical(
    tmp_path: Path, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cassette = tmp_path / "chat.jsonl"
    meta = b'{"_meta":{"schema":1,"reel":"0.1"}}\n'
    body = {"id": "x", "request": {}, "response": {}}
    cassette.write_bytes(meta + json.dumps(body).encode() + b"\r\n" + b'{"bad line\n\n')
    assert reel(["push", str(cassette), redis_url, "--as", NAME]) == 0
    assert reel(["push", str(cassette), redis_url, "--as", NAME]) == 2  # exists: --force
    assert "give --force" in capsys.readouterr().err
    out = tmp_path / "back.jsonl"
    assert reel(["pull", redis_url, NAME, "-o", str(out)]) == 0
    assert out.read_bytes() == cassette.read_bytes()
    assert reel(["pull", redis_url, NAME, "-o", str(out)]) == 2  # exists: --force
    assert reel(["push", str(out), redis_url, "--as", NAME, "--force"]) == 0
    assert reel(["pull", redis_url, "nothing.jsonl", "-o", str(tmp_path / "n")]) == 2
    assert "no such cassette" in capsys.readouterr().err
    not_a_cassette = tmp_path / "junk.jsonl"
    not_a_cassette.write_bytes(b"\xff\xfe junk")
    assert reel(["push", str(not_a_cassette), redis_url]) == 2
    assert reel(["push", str(cassette), "reddis://h/0"]) == 2
    assert "unknown store" in capsys.readouterr().err


def test_the_reading_commands_take_store(
    tmp_path: Path, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from reel_bindings.proxy import DEMO_CASSETTE as demo

    assert reel(["push", str(demo), redis_url, "--as", "demo.jsonl"]) == 0
    capsys.readouterr()
    assert reel(["inspect", "--store", redis_url, "demo.jsonl"]) == 0
    from_store = capsys.readouterr().out
    assert reel(["inspect", str(demo)]) == 0
    assert capsys.readouterr().out == from_store
    assert reel(["validate", "--store", redis_url, "demo.jsonl"]) == 0
    assert reel(["cost", "--store", redis_url, "demo.jsonl"]) == 0
    assert reel(["diff", "--store", redis_url, "demo.jsonl", "demo.jsonl"]) == 0
    capsys.readouterr()
    assert reel(["inspect", "--store", redis_url, "missing.jsonl"]) == 2
    assert "no such cassette in the store" in capsys.readouterr().err
    down = f"redis://127.0.0.1:{free_port()}/0"
    assert reel(["inspect", "--store", down, "demo.jsonl"]) == 2
    assert f"the cassette store {down} cannot be reached" in capsys.readouterr().err


def test_a_store_that_cannot_be_reached_is_an_outage_not_a_config_error() -> None:
    # issue 33: a server down is no bad setting (a refused REEL_STORE is one)
    assert issubclass(StoreUnavailableError, ReelError)
    assert not issubclass(StoreUnavailableError, (ConfigError, ValueError))
    # a bad URL is a bad setting (and a store that cannot be used, as before)
    assert issubclass(StoreURLError, ConfigError)
    assert issubclass(StoreURLError, StoreUnavailableError)
    with pytest.raises(StoreURLError, match="bad Redis URL"):
        open_store("redis://127.0.0.1:6379/0?db=notanumber")
    with pytest.raises(StoreUnavailableError) as down:
        open_store(f"redis://127.0.0.1:{free_port()}/0").check()
    assert not isinstance(down.value, ConfigError)


@pytest.mark.anyio
async def test_the_proxy_when_redis_goes_away(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A cassette first named once the server is gone is answered 502; a
    line whose append fails after the check (the server went in between)
    is logged NOT recorded and counted, the client having its answer."""
    from reel_bindings.proxy import Proxy, running

    redis_server.flush()
    url = redis_server.url
    async with serve_fake(frame_delay=0.001) as fake:
        opts = options(Mode.AUTO, None, upstream=fake.url, store=url)
        proxy = Proxy(opts.config(), store=RedisStore(url))
        async with (
            running(opts, proxy=proxy) as base,
            httpx.AsyncClient(base_url=base, trust_env=False) as client,
        ):
            call = chat_call("first")
            call.headers["x-reel-cassette"] = "a.jsonl"  # type: ignore[index]
            assert (await fetch(client, call)).status == 200
            store = RedisStore(url)
            with anyio.fail_after(10):  # the line is appended after the answer
                while (store.read("a.jsonl") or b"").count(b"\n") < 2:
                    await anyio.sleep(0.005)
            redis_server.kill()
            other = chat_call("other")
            other.headers["x-reel-cassette"] = "b.jsonl"  # type: ignore[index]
            answer = await fetch(client, other)
            assert answer.status == 502
            assert url in answer.body.decode()
            # the check passes, the append fails: the client still has its answer
            monkeypatch.setattr(RedisStore, "check", lambda self: None)
            late = chat_call("late")
            late.headers["x-reel-cassette"] = "a.jsonl"  # type: ignore[index]
            assert (await fetch(client, late)).status == 200
    assert proxy.write_errors == 1
    assert "was NOT recorded; the client got its answer" in caplog.text
    redis_server.start()


class _DownStore(MemoryStore):
    """A store whose server is gone (what a Redis store's check says then)."""

    down = False

    def check(self) -> None:
        if self.down:
            raise StoreUnavailableError("the cassette store redis://gone:6379/0 cannot be reached")


@pytest.mark.parametrize("binding", ["httpx", "httpx-async", "httpx2", "requests"])
def test_every_in_process_binding_answers_502_unforwarded_when_the_store_is_down(
    binding: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import anyio
    import httpx2
    import requests

    from reel_bindings.httpcore import AsyncTransport
    from reel_bindings.requests import Adapter

    monkeypatch.delenv("REEL_MODE", raising=False)
    store = _DownStore()
    call = chat_call(f"down via {binding}")
    with FakeUpstreamThread(frame_delay=0.001) as fake:

        def post() -> tuple[int, str]:
            if binding == "requests":
                session = requests.Session()
                session.mount("http://", Adapter(NAME, mode="auto", store=store))
                with session:
                    got = session.post(fake.url + call.path, data=call.content)
                    return got.status_code, got.text
            if binding == "httpx-async":

                async def run() -> tuple[int, str]:
                    transport = AsyncTransport(NAME, mode="auto", store=store)
                    async with httpx.AsyncClient(transport=transport, base_url=fake.url) as c:
                        got = await c.post(call.path, content=call.content)
                        return got.status_code, got.text

                return anyio.run(run)
            family: Any = httpx2 if binding == "httpx2" else httpx
            with family.Client(
                transport=Transport(NAME, mode="auto", store=store), base_url=fake.url
            ) as client:
                got = client.post(call.path, content=call.content)
                return got.status_code, got.text

        store.down = True
        status, text = post()
        assert status == 502
        assert "Reel did not forward" in text
        assert "redis://gone:6379/0 cannot be reached" in text
        assert fake.requests == []  # nothing was sent upstream
        assert store.read(NAME) is None  # nothing recorded
        store.down = False
        status, _ = post()
        assert status == 200
    data = store.read(NAME)
    assert data is not None
    assert data.count(b"\n") == 2
