"""No URL credential reaches any output: every place that shows a store,
upstream or proxy URL shows it through :func:`reel_core.shown_url`.  The
issue's examples, end to end against a real redis-server whose user needs
a password: ``reel push`` and ``reel pull``, the proxy's start line, the
pytest plugin's header, report and JSON report, and the errors of a URL
with a scheme typo or an unencoded ``/`` in its password."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from reel_bindings._cli import main as reel
from reel_bindings._settings import Settings
from reel_bindings._store import StoreUnavailableError
from reel_bindings._store_url import open_store
from reel_bindings.proxy import DEMO_CASSETTE
from reel_core import ConfigError, Mode
from tests.fakes.upstream import FakeUpstreamThread
from tests.inner import inner_ini
from tests.redis_server import CHAT_TEST, RedisServer

from .proxy_support import options, proxied

pytest.importorskip("redis", reason="pip install 'reel-llm[redis]'")

#: The password of the test's Redis user: no output may hold it.
SECRET = "hunter2-SeCrEt"
USER = "reelsecret"


@pytest.fixture
def secret_url(redis_server: RedisServer, redis_url: str) -> Iterator[str]:
    """The server's URL with the password in its query (``?password=``): a
    user that exists only with that password (the default user is left
    alone, for the other tests)."""
    reply = redis_server.command("ACL", "SETUSER", USER, "on", f">{SECRET}", "~*", "&*", "+@all")
    assert reply.startswith(b"+OK"), reply
    try:
        yield f"{redis_url}?username={USER}&password={SECRET}"
    finally:
        redis_server.command("ACL", "DELUSER", USER)


def test_push_and_pull_do_not_show_a_query_password(
    tmp_path: Path, secret_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert reel(["push", str(DEMO_CASSETTE), secret_url, "--as", "demo.jsonl"]) == 0
    pushed = capsys.readouterr()
    assert "pushed" in pushed.err
    assert "password=***" in pushed.err
    out = tmp_path / "back.jsonl"
    assert reel(["pull", secret_url, "demo.jsonl", "-o", str(out)]) == 0
    assert out.read_bytes() == DEMO_CASSETTE.read_bytes()  # the password did reach Redis
    assert reel(["pull", secret_url, "missing.jsonl", "-o", str(tmp_path / "m")]) == 2
    assert reel(["inspect", "--store", secret_url, "demo.jsonl"]) == 0
    shown = capsys.readouterr()
    assert "pulled" in shown.err
    assert "no such cassette" in shown.err
    assert SECRET not in pushed.out + pushed.err + shown.out + shown.err


def test_a_wrong_password_is_not_shown_either(
    secret_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = secret_url.replace(SECRET, "wrong-SeCrEt")
    assert reel(["inspect", "--store", wrong, "demo.jsonl"]) == 2
    err = capsys.readouterr().err
    assert "cannot be reached" in err
    assert "SeCrEt" not in err


@pytest.mark.parametrize(
    "url",
    [
        f"reddis://:{SECRET}@127.0.0.1:6379/0",  # a scheme typo
        f"unix://:{SECRET}@/run/redis.sock?db=0",  # a scheme Reel does not take
        f"redis://{USER}:hun/ter2-SeCrEt@127.0.0.1:6379/0",  # an unencoded / in the password
        "redis://:hunter2-SeCrEt/x@127.0.0.1:6379/0",
        f"redis:/:{SECRET}@127.0.0.1:6379/0",  # a slash short
        f"redis://127.0.0.1:6379/0?password={SECRET}&db=notanumber",
    ],
)
def test_a_bad_store_url_is_refused_without_its_password(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "x.jsonl"
    assert reel(["pull", url, "demo.jsonl", "-o", str(out)]) == 2
    assert reel(["push", str(DEMO_CASSETTE), url]) == 2
    shown = capsys.readouterr()
    assert "SeCrEt" not in shown.out + shown.err
    assert "'hun'" not in shown.err  # redis-py quotes the part before the / as the port
    assert "store" in shown.err or "Redis URL" in shown.err
    if "hun/ter2" in url:
        assert "percent-encode a / ? # or @ in the password" in shown.err
    assert not out.exists()
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"REEL_STORE": url}).open_store()
    assert "SeCrEt" not in str(caught.value)
    with pytest.raises(StoreUnavailableError) as refused:
        open_store(url).check()
    assert "SeCrEt" not in str(refused.value)
    assert refused.value.__cause__ is None


def test_the_proxy_exits_on_a_bad_store_url_without_its_password() -> None:
    url = f"reddis://:{SECRET}@127.0.0.1:6379/0"
    done = subprocess.run(
        [sys.executable, "-m", "reel_bindings.proxy", "--store", url, "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "unknown store reddis://***@127.0.0.1:6379/0" in done.stderr
    assert "SeCrEt" not in done.stdout + done.stderr


@pytest.mark.anyio
async def test_the_proxy_start_line_does_not_show_the_password(
    secret_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="reel.proxy")
    open_store(secret_url).replace("demo.jsonl", DEMO_CASSETTE.read_bytes())
    opts = options(Mode.REPLAY, Path("demo.jsonl"), store=secret_url)
    async with proxied(opts):
        await anyio.sleep(0)
    (start,) = [r.getMessage() for r in caplog.records if "listening on" in r.getMessage()]
    assert "RedisStore('redis://127.0.0.1:" in start
    assert "password=***" in start
    assert SECRET not in caplog.text


@pytest.mark.parametrize(
    "upstream",
    [
        f"htps://user:{SECRET}@127.0.0.1:9/v1?key=AIza-SeCrEt",  # a scheme typo
        f"http://user:{SECRET}@127.0.0.1:9/v1",  # credentials: refused at start
        "http://127.0.0.1:9/v1?key=AIza-SeCrEt",  # a query: refused at start
    ],
)
def test_an_upstream_url_refused_at_start_is_not_shown_with_its_credentials(
    upstream: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError) as info:
        options(Mode.AUTO, tmp_path / "c.jsonl", upstream=upstream).config()
    assert "SeCrEt" not in str(info.value)
    assert "is not an upstream base URL" in str(info.value)


def test_the_pytest_header_report_and_json_do_not_show_the_password(
    pytester: pytest.Pytester, secret_url: str
) -> None:
    pytester.makepyfile(test_secret_store=CHAT_TEST)
    pytester.makeini(inner_ini())
    report = pytester.path / "report.json"
    with FakeUpstreamThread(frame_delay=0.001) as fake:
        pytester.makeconftest(
            f"import pytest\n@pytest.fixture\ndef fake_url():\n    return {fake.url!r}\n"
        )
        run = pytester.runpytest_subprocess(
            "-p",
            "reel",
            "--reel-mode",
            "auto",
            "--reel-store",
            secret_url,
            "--reel-report",
            str(report),
            "-v",
        )
    run.assert_outcomes(passed=1)
    output = run.stdout.str() + run.stderr.str()
    run.stdout.fnmatch_lines(["reel: mode auto*cassettes in RedisStore('redis://*password=***')*"])
    assert "reel report" in output
    text = report.read_text("utf-8")
    assert "password=***" in text
    assert SECRET not in output
    assert SECRET not in text
    json.loads(text)
