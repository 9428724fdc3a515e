"""Importing an in-process binding costs only what it needs: a client family
(httpx, httpx2) is imported by the code that uses it, never by Reel's import
or by making a transport.  Checked by what a fresh interpreter holds in
``sys.modules`` afterwards, not by timing (``bench/run.py --only import``
measures the milliseconds)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import pytest

from tests.fresh import modules_after

#: Neither client family, nor what only a forward or the proxy needs (the
#: proxy's upstream client: ssl and anyio's TLS streams; an event loop).
NOT_ON_IMPORT = (
    "httpx",
    "httpx2",
    "httpcore",
    "httpcore2",
    "requests",
    "urllib3",
    "ssl",
    "http.client",
    "anyio.streams.tls",
    "anyio._backends",
    "asyncio",
    "trio",
    "attrs",
)

DEMO = str(files("reel_bindings") / "demo" / "demo.jsonl")
BODY = '{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Say hello to Reel."}]}'


def _unwanted(loaded: set[str], names: tuple[str, ...] = NOT_ON_IMPORT) -> list[str]:
    return sorted(m for m in loaded for n in names if m == n or m.startswith(n + "."))


def test_importing_reel_core_imports_no_client_family() -> None:
    loaded = modules_after("import reel_core")
    assert "reel_core" in loaded
    assert _unwanted(loaded) == []


def test_importing_the_transports_imports_no_client_family() -> None:
    loaded = modules_after("import reel_bindings.httpcore")
    assert "reel_bindings._sync.transport" in loaded
    assert _unwanted(loaded) == []


def test_the_async_transport_and_anyio_load_when_first_asked_for() -> None:
    # a sync program never needs them
    loaded = modules_after("import reel_bindings.httpcore")
    assert _unwanted(loaded, ("anyio", "reel_bindings._async")) == []
    loaded = modules_after(
        "import reel_bindings.httpcore as h\n"
        "from reel_bindings._async.transport import AsyncTransport\n"
        "assert h.AsyncTransport is AsyncTransport\n"
        "assert 'AsyncTransport' in dir(h) and 'Transport' in dir(h)\n"
        "try:\n"
        "    h.Nope\n"
        "except AttributeError as exc:\n"
        "    assert 'Nope' in str(exc)\n"
        "else:\n"
        "    raise AssertionError('h.Nope resolved')\n"
    )
    assert "anyio" in loaded


def test_importing_the_transports_leaves_the_write_and_log_helpers() -> None:
    # tempfile (atomic rewrites) and logging (something stale or drifting to
    # say) load when first needed; h11 with the proxy's byte reader.
    loaded = modules_after("import reel_bindings.httpcore")
    assert _unwanted(loaded, ("tempfile", "logging", "h11", "wsproto")) == []


def test_making_transports_imports_no_client_family() -> None:
    loaded = modules_after(
        "from reel_bindings.httpcore import AsyncTransport, Transport\n"
        f"Transport({DEMO!r}, mode='replay').close()\n"
        f"AsyncTransport({DEMO!r}, mode='replay')\n"
    )
    assert _unwanted(loaded) == []


@pytest.mark.parametrize(("family", "other"), [("httpx", "httpx2"), ("httpx2", "httpx")])
def test_a_replay_imports_only_the_family_of_its_client(family: str, other: str) -> None:
    loaded = modules_after(
        f"import {family}\n"
        "from reel_bindings.httpcore import Transport\n"
        f"transport = Transport({DEMO!r}, mode='replay', timing='fast')\n"
        f"with {family}.Client(transport=transport) as client:\n"
        "    r = client.post('http://127.0.0.1:9/v1/chat/completions', "
        f"content={BODY!r}, headers={{'content-type': 'application/json'}})\n"
        "    assert r.status_code == 200, r.text\n"
        "    assert r.extensions['reel'] == 'replay'\n"
    )
    assert family in loaded
    assert _unwanted(loaded, (other, other.replace("httpx", "httpcore"))) == []


#: The core's rooms a replay never enters: other recorders' formats,
#: WebSocket sessions (and wsproto), miss reports, drift, the recorder.
COLD_ROOMS = (
    "wsproto",
    "reel_core._formats",
    "reel_core._ws_session",
    "reel_core._websocket",
    "reel_core._miss",
    "reel_core._shape",
    "reel_core._generations",
    "reel_core._report",
    "reel_core._ui",
    "reel_core._record",
    "reel_core._usage",
    "reel_core._calls",
)


def test_a_replay_loads_none_of_the_cold_rooms() -> None:
    # Measured after the replay, not after the import: what the request
    # itself needs (keying, matching, the response) must not pull them in.
    loaded = modules_after(
        "import httpx\n"
        "from reel_bindings.httpcore import Transport\n"
        f"transport = Transport({DEMO!r}, mode='replay', timing='fast')\n"
        "with httpx.Client(transport=transport) as client:\n"
        "    r = client.post('http://127.0.0.1:9/v1/chat/completions', "
        f"content={BODY!r}, headers={{'content-type': 'application/json'}})\n"
        "    assert r.status_code == 200, r.text\n"
        "    assert r.extensions['reel'] == 'replay'\n"
        "    assert transport.misses == []\n"
    )
    assert "reel_core._engine" in loaded
    assert _unwanted(loaded, COLD_ROOMS) == []


def test_the_requests_adapter_imports_only_requests() -> None:
    # requests (and urllib3 under it) is the adapter's own family; nothing
    # else: no event loop, no attrs (the proxy's), no httpx, no cold room.
    loaded = modules_after("import reel_bindings.requests")
    assert "requests" in loaded
    others = tuple(
        n for n in NOT_ON_IMPORT if n not in ("requests", "urllib3", "ssl", "http.client")
    )
    assert _unwanted(loaded, (*others, "anyio", *COLD_ROOMS)) == []


def test_the_cli_starts_without_a_network_stack() -> None:
    # ``reel --help`` (any subcommand): the viewer's HTTP server, sockets, TLS
    # and an event loop load only for ``reel view --serve``.
    loaded = modules_after(
        "import contextlib\n"
        "from reel_bindings._cli import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(None):\n"
        "    main(['--help'])\n"
    )
    assert "reel_bindings.cli._view" in loaded
    unwanted = ("socket", "ssl", "http.server", "socketserver", "asyncio", "trio", "wsproto")
    assert _unwanted(loaded, unwanted) == []


def test_a_miss_loads_the_miss_room_when_it_happens() -> None:
    # The other side of the same coin: the room is loaded by its first use.
    loaded = modules_after(
        "import httpx\n"
        "from reel_bindings.httpcore import Transport\n"
        f"transport = Transport({DEMO!r}, mode='replay', timing='fast')\n"
        "with httpx.Client(transport=transport) as client:\n"
        "    r = client.post('http://127.0.0.1:9/v1/chat/completions', content=b'{}')\n"
        "    assert r.status_code == 404, r.text\n"
        "    assert transport.misses\n"
    )
    assert "reel_core._miss" in loaded
    assert _unwanted(loaded, ("wsproto", "reel_core._formats")) == []


#: What only some proxies need: WebSocket sessions (wsproto and the core's
#: rooms), HTTP/2 and gRPC (h2, the pump, a streamed call), the command
#: line and TLS listener, the viewer, a store named per request, the
#: rooms of a miss and of usage, the in-process call engine.  A plain
#: HTTP/1.1 replay needs none.
PROXY_COLD = (
    "reel_core._call_engine",
    "reel_core._calls",
    "wsproto",
    "h2",
    "hpack",
    "hyperframe",
    "grpc",
    "reel_core._websocket",
    "reel_core._ws_session",
    "reel_core._h2_session",
    "reel_core._grpc_session",
    "reel_core._miss",
    "reel_core._usage",
    "reel_bindings.proxy._websocket",
    "reel_bindings.proxy._http2",
    "reel_bindings.proxy._grpc_call",
    "reel_bindings.proxy._options",
    "reel_bindings.proxy._tls",
    "reel_bindings._upstream_h2",
    "reel_bindings.view",
)

#: The per-test proxy as the plugin starts it (``ReelCassette.proxy_url``:
#: the same imports, a ``Proxy`` on the test's open cassette, served by a
#: ``SessionProxy``), one plain HTTP/1.1 replay through it, then its end.
PLUGIN_PROXY_REPLAY = f"""
import contextlib, http.client
from urllib.parse import urlsplit
from reel_bindings._files import CassetteFile
from reel_bindings.pytest_plugin import ReelCassette
from reel_core import Mode, Timing
stack = contextlib.ExitStack()
file = CassetteFile({DEMO!r}, mode=Mode.REPLAY)
reel = ReelCassette(path=file.path, mode=Mode.REPLAY, timing=Timing(), match=None,
    repeat=None, upstream=None, file=file, hint="", stack=stack)
url = urlsplit(reel.proxy_url)
conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
conn.request("POST", "/v1/chat/completions", {BODY!r}, {{"content-type": "application/json"}})
answer = conn.getresponse()
assert answer.status == 200 and answer.read(), answer.status
conn.close()
assert reel.misses == []
stack.close()
"""


def test_importing_the_proxy_loads_only_the_http11_path() -> None:
    loaded = modules_after("import reel_bindings.proxy")
    assert "reel_bindings.proxy._http11" in loaded
    assert _unwanted(loaded, PROXY_COLD) == []


def test_a_plain_replay_through_the_plugins_proxy_loads_no_cold_room() -> None:
    # Measured after the replay and the test's end, not after the import:
    # serving the request and stopping the proxy must not pull them in.
    loaded = modules_after(PLUGIN_PROXY_REPLAY)
    assert "reel_bindings._session_proxy" in loaded
    assert "reel_core._session" in loaded
    assert _unwanted(loaded, PROXY_COLD) == []


def test_the_per_test_proxys_environment_loads_no_in_process_binding() -> None:
    # The variables a proxied test gets (the placeholder key among them)
    # come without the SDK helpers and the in-process transports.
    loaded = modules_after(
        "from reel_bindings.pytest_plugin import proxy_environment\n"
        "env = proxy_environment('http://127.0.0.1:9', replay=True, environ={})\n"
        "assert env['OPENAI_API_KEY'] == 'reel-replay-no-key', env"
    )
    in_process = ("reel_bindings.sdk", "reel_bindings._inprocess", "reel_bindings.httpcore")
    assert _unwanted(loaded, in_process) == []


def test_the_proxys_options_load_when_first_asked_for() -> None:
    loaded = modules_after(
        "import reel_bindings.proxy as p\n"
        "from reel_bindings.proxy._options import ProxyOptions, parse_options\n"
        "assert p.ProxyOptions is ProxyOptions and p.parse_options is parse_options\n"
        "assert 'ProxyOptions' in vars(p)  # kept: the next look-up is a plain one\n"
        "assert 'build_parser' in dir(p) and 'Proxy' in dir(p)\n"
        "try:\n"
        "    p.Nope\n"
        "except AttributeError as exc:\n"
        "    assert 'Nope' in str(exc)\n"
        "else:\n"
        "    raise AssertionError('p.Nope resolved')\n"
    )
    assert "reel_bindings.proxy._options" in loaded


#: What only a process that plays or records loads: an xdist controller
#: checks the run's settings and runs no test.
PLAYING = (
    "reel_core._engine",
    "reel_core._cassette",
    "reel_core._codec",
    "reel_core._interaction",
    "reel_core._call_engine",
    "reel_bindings._files",
    "reel_bindings._inprocess",
    "reel_bindings.httpcore",
    "reel_bindings.proxy",
)


def test_the_runs_settings_load_no_engine_and_no_cassette() -> None:
    # the plugin's configure hook in every process, a controller's included
    loaded = modules_after(
        "import reel_bindings.pytest_plugin\n"
        "from reel_bindings._settings import Settings\n"
        "settings = Settings.resolve({}, {}, None, {}, extra=('record_on', 'phases'))\n"
        "assert settings.mode.value == 'replay', settings\n"
    )
    assert "reel_core._config" in loaded
    assert _unwanted(loaded, PLAYING) == []


def test_the_probe_would_notice_a_client_family() -> None:
    loaded = modules_after("import reel_bindings.httpcore, httpx")
    assert _unwanted(loaded) != []
    assert "httpx" in _unwanted(loaded)


def test_a_proxied_test_loads_no_in_process_transport(tmp_path: Path) -> None:
    # The plugin says which test's cassette boundaries and shared clients
    # use for every test using Reel, without importing either of them.
    (tmp_path / "test_proxied.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.reel(proxy=True)\n"
        "def test_proxied(reel):\n"
        "    assert reel.proxy_url.startswith('http://127.0.0.1:')\n"
    )
    loaded = modules_after(
        "import os, pytest\n"
        "os.environ['PYTEST_DISABLE_PLUGIN_AUTOLOAD'] = '1'\n"
        "os.environ.pop('PYTEST_ADDOPTS', None)\n"  # the outer run's (CI: --cov)
        f"os.chdir({str(tmp_path)!r})\n"
        "code = pytest.main(['-q', '-p', 'no:cacheprovider', '-p', "
        "'reel_bindings.pytest_plugin', '-W', 'ignore', 'test_proxied.py'])\n"
        "assert code == 0, code"
    )
    assert "reel_bindings._session_proxy" in loaded
    in_process = (
        "reel_bindings._shared_transport",
        "reel_bindings._inprocess",
        "reel_bindings._transport",
        "reel_bindings.httpcore",
        "reel_bindings.sdk",
    )
    assert _unwanted(loaded, in_process) == []
