"""Reel's pytest plugin: a cassette per test, one switch for the mode, and a
miss that fails the test even when the code under test swallowed the error.

Loaded by the ``pytest11`` entry point (``-p reel``) once Reel is installed::

    import pytest


    @pytest.mark.reel(match="ignore-fields", ignore_fields=["user"])
    def test_chat(reel):
        client = reel.openai()  # an openai.OpenAI on this test's cassette
        ...

The cassette of a test is ``<reel_cassette_dir>/<module path>/<test name>.jsonl``
under the rootdir (``reel_cassette_dir`` defaults to ``tests/cassettes``).
Every setting has one precedence (``reel_bindings._settings``): a test's
marker, then the flag, then the ``$REEL_*`` variable, then the ini option.
The mode comes from the marker's ``mode=``, else ``--reel-mode``, else
``$REEL_MODE``, else ``replay``: the network is never touched unless asked.
Replay timing defaults to ``fast`` (no sleeps); the marker's ``timing=``,
``--reel-timing`` or ``$REEL_TIMING`` change it.  See docs/pytest-plugin.md.

Importing this module must not import ``reel_core``: pytest imports entry
point plugins before coverage starts, so everything Reel is imported lazily.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import os
import re
import shlex
import shutil
import tempfile
import time
from collections.abc import Generator, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from reel_bindings._phases import PhaseTimer, merged, render_phases, timed_method

if TYPE_CHECKING:
    import requests
    from typing_extensions import Unpack

    from reel_bindings._files import CassetteFile
    from reel_bindings._freeze import Frozen
    from reel_bindings._inprocess import Player
    from reel_bindings._options import BindingOptions, Options
    from reel_bindings._runlog import RunLog
    from reel_bindings._session_proxy import SessionProxy
    from reel_bindings._settings import Settings
    from reel_bindings._shared_transport import AsyncSharedTransport, SharedTransport
    from reel_bindings._store import Store
    from reel_bindings.grpc import AioChannel, Channel
    from reel_bindings.httpcore import AsyncTransport, Transport
    from reel_bindings.requests import Adapter
    from reel_core import MatchConfig, MissReport, Mode, Timing
    from reel_core.tools import CassetteTally, ProtoSchema, WebSocketMiss

__all__ = [
    "ReelCassette",
    "shared_anthropic",
    "shared_async_anthropic",
    "shared_async_openai",
    "shared_async_transport",
    "shared_openai",
    "shared_transport",
]

#: Where cassettes go, under the rootdir, unless the ``reel_cassette_dir`` ini says otherwise.
DEFAULT_CASSETTE_DIR = "tests/cassettes"
#: Replay timing when neither the marker, ``--reel-timing`` nor ``$REEL_TIMING`` names one.
DEFAULT_TIMING = "fast"

MARKER_HELP = (
    "reel(cassette=None, *, mode=None, match=None, ignore_fields=(), timing=None, "
    "repeat=None, proxy=False, upstream=None, record_on=None, max_age=None, "
    "record_grace=None, drop_response_headers=None, allow_misses=None, freeze=None, "
    "proto_descriptor=None): "
    "record/replay "
    "this test's LLM API traffic with Reel (the `reel` fixture gives the cassette; "
    "proxy=True starts a "
    "per-test proxy and points the OpenAI, Anthropic and Gemini SDKs at it; "
    "allow_misses=True: a miss does not fail the test; "
    "freeze=['clock', 'uuid', 'random']: pin them to the cassette's base values; "
    "proto_descriptor='FILE': gRPC messages matched as JSON through that descriptor set)"
)

_MARKER_KEYS = frozenset(
    (
        "cassette",
        "mode",
        "match",
        "ignore_fields",
        "timing",
        "repeat",
        "proxy",
        "upstream",
        "record_on",
        "max_age",
        "record_grace",
        "drop_response_headers",
        "allow_misses",
        "freeze",
        "proto_descriptor",
    )
)
#: When a test's recordings are kept: ``passed`` (only when it passed) or ``always``.
RECORD_ON = ("passed", "always")
DEFAULT_RECORD_ON = "passed"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.\[\]=+-]+")
_MAX_NAME = 150

_CASSETTE_KEY = pytest.StashKey["ReelCassette"]()
#: The test's cassette whose held recordings wait for the teardown's outcome.
_PENDING_KEY = pytest.StashKey["ReelCassette"]()
#: The reports of a test's setup and call phases, by phase.
_REPORTS_KEY = pytest.StashKey[dict[str, pytest.TestReport]]()
#: The run report's figures, one tally per test's cassette (JSON-ready dicts).
_TALLIES_KEY = pytest.StashKey["list[CassetteTally | dict[str, Any]]"]()
_WORKER_TALLIES = "reel_tallies"
_RUN_DIR_KEY = pytest.StashKey[Path]()
_WORKER_RUN_DIR = "reel_run_dir"
_WORKER_PHASES = "reel_phases"
#: The phases each worker timed (the controller's, under xdist).
_PHASES_KEY = pytest.StashKey[list[dict[str, Any]]]()

#: The run's phase timer (``--reel-phases``, ``$REEL_PHASES``), ``None``
#: when off: then :func:`_phase` is a shared no-op context.
_TIMER: PhaseTimer | None = None
#: The timer of the run this one runs inside (pytester's in-process runs).
_OUTER_TIMER_KEY = pytest.StashKey["PhaseTimer | None"]()
_UNTIMED = contextlib.nullcontext()


def _phase(name: str) -> contextlib.AbstractContextManager[None]:
    """Time the block as phase ``name`` of the phase timer, when it is on."""
    return _UNTIMED if _TIMER is None else _TIMER.timed(name)


def _timer() -> PhaseTimer | None:
    return _TIMER


#: A helper of the fixture timed as ``bindings`` when the timer is on.
_bindings = timed_method("bindings", _timer)


def proxy_environment(
    url: str, *, replay: bool, environ: Mapping[str, str] = os.environ
) -> dict[str, str]:
    """What the per-test proxy at ``url`` sets, from the provider registry:
    each provider's base-URL variable to the proxy (plus the provider's
    suffix: ``/v1`` for OpenAI's) and, in replay mode, the first of its
    API-key variables to a placeholder when none of them is set in
    ``environ`` (no key is needed to replay, and none is written)."""
    from reel_bindings._sdk_parts import REPLAY_KEY
    from reel_core.tools import PROVIDERS

    env: dict[str, str] = {}
    for provider in PROVIDERS.values():
        if provider.base_url_variable:
            env[provider.base_url_variable] = url + provider.base_url_suffix
        keys = provider.key_variables
        if replay and keys and not any(environ.get(k) for k in keys):
            env[keys[0]] = REPLAY_KEY
    return env


def _restore_environment(saved: Mapping[str, str | None]) -> None:
    """Put back the variables :func:`proxy_environment` set (``None``: unset)."""
    for variable, value in saved.items():
        if value is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = value


# -- hooks ---------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("reel", "Reel: record and replay LLM API traffic")
    group.addoption(
        "--reel-mode",
        dest="reel_mode",
        choices=("replay", "auto", "record", "live"),
        default=None,
        help="replay: serve cassettes, a miss fails the test, never touch the network "
        "(default); auto: replay what is recorded, record what is not; record: re-record "
        "(each cassette starts afresh once per run); live: forward, record nothing. "
        "A test's marker mode= wins over it; it wins over $REEL_MODE.",
    )
    group.addoption(
        "--reel-timing",
        dest="reel_timing",
        default=None,
        metavar="TIMING",
        help="replay timing of streamed frames for tests whose marker names none: "
        "fast (default: no sleeps), realtime (recorded offsets) or slow=N. "
        "Wins over $REEL_TIMING.",
    )
    group.addoption(
        "--reel-store",
        dest="reel_store",
        default=None,
        metavar="URL",
        help="where cassettes live: redis://host:port/db or rediss:// (a store shared by "
        "every worker and CI runner), or a directory. Wins over $REEL_STORE and the "
        "reel_store ini option; default: files under reel_cassette_dir.",
    )
    group.addoption(
        "--reel-record-on",
        dest="reel_record_on",
        choices=RECORD_ON,
        default=None,
        help="passed (default): keep what a test recorded only when it passed (a failing, "
        "erroring or xfail test leaves its cassette as it was); always: keep everything. "
        "A test's marker record_on= wins over it; it wins over the reel_record_on ini option.",
    )
    group.addoption(
        "--reel-report",
        dest="reel_report",
        default=None,
        metavar="FILE.json",
        help="write the run report (per cassette: hits, misses, recorded, stale, "
        "superseded, the store, and each interaction's outcome) to FILE.json",
    )
    group.addoption(
        "--reel-max-age",
        dest="reel_max_age",
        default=None,
        metavar="AGE",
        help="how old a recording may be (90s, 30m, 12h, 7d, 2w): in auto mode an older one "
        "is recorded again, in replay mode it is served and reported as stale. A test's "
        "marker max_age= wins over it; it wins over $REEL_MAX_AGE, the reel_max_age ini "
        "option and the cassette's _meta max_age.",
    )
    group.addoption(
        "--reel-proto-descriptor",
        dest="reel_proto_descriptor",
        default=None,
        metavar="FILE",
        help="a descriptor set (protoc --descriptor_set_out=FILE --include_imports): gRPC "
        "messages are matched as JSON through it and a miss names their fields. A test's "
        "marker proto_descriptor= wins over it; it wins over $REEL_PROTO_DESCRIPTOR and the "
        "reel_proto_descriptor ini option.",
    )
    group.addoption(
        "--reel-phases",
        dest="reel_phases",
        action="store_const",
        const=True,
        default=None,
        help="time Reel's own phases in this run (imports, configure, setup, cassette "
        "open, bindings, proxy, call, teardown, report; per xdist worker too) and show "
        "them in the run report. Wins over $REEL_PHASES.",
    )
    group.addoption(
        "--reel-strict-age",
        dest="reel_strict_age",
        action="store_true",
        default=False,
        help="fail the run when a stale recording was served (replay mode)",
    )
    parser.addini(
        "reel_allow_misses",
        help="true: a miss does not fail the test that served it (default false: it does, "
        "even when the code under test handled the 404); the marker's allow_misses= wins",
        default="",
    )
    parser.addini(
        "reel_max_age",
        help="how old a recording may be (7d...); $REEL_MAX_AGE and --reel-max-age win over it",
        default="",
    )
    parser.addini(
        "reel_proto_descriptor",
        help="a descriptor set file gRPC messages are matched through as JSON; "
        "$REEL_PROTO_DESCRIPTOR and --reel-proto-descriptor win over it",
        default="",
    )
    parser.addini(
        "reel_record_on",
        help="passed (default) or always: when a test's recordings are kept",
        default="",
    )
    parser.addini(
        "reel_store",
        help="where cassettes live (redis://host:port/db, rediss://, or a directory); "
        "$REEL_STORE and --reel-store win over it",
        default="",
    )
    parser.addini(
        "reel_cassette_dir",
        help="directory of the cassettes, relative to the rootdir "
        f"(default {DEFAULT_CASSETTE_DIR})",
        default=DEFAULT_CASSETTE_DIR,
    )


#: The runs under way, innermost last (pytester runs one inside another):
#: the shared clients' key follows the run's mode.
_RUN_CONFIGS: list[pytest.Config] = []


def pytest_configure(config: pytest.Config) -> None:
    global _TIMER
    config.addinivalue_line("markers", MARKER_HELP)
    _RUN_CONFIGS.append(config)
    start = time.perf_counter()
    from . import _settings  # noqa: F401  # the core with it: timed as imports

    imported = time.perf_counter() - start
    # Bad global settings stop the run at once, with a message saying what to fix.
    settings = _resolve(config)
    config.stash[_OUTER_TIMER_KEY] = _TIMER  # this run may run inside another (pytester)
    _TIMER = None
    if settings.phases:
        _TIMER = PhaseTimer()
        _TIMER.seconds["imports"] += imported
        if not _xdist_controller(config):  # it runs no test: it imports no more
            _TIMER.import_all()
    with _phase("configure"):
        _run_store(config)  # a Redis server that is down stops the run here, named


def _xdist_controller(config: pytest.Config) -> bool:
    """Whether this process is a pytest-xdist controller (its workers
    run the tests), as xdist decides it: a ``--dist`` mode and ``--tx``."""
    if hasattr(config, "workerinput"):
        return False
    option = config.option
    return getattr(option, "dist", "no") != "no" and bool(getattr(option, "tx", None))


def pytest_unconfigure(config: pytest.Config) -> None:
    global _TIMER
    if config in _RUN_CONFIGS:
        _RUN_CONFIGS.remove(config)
    if _TIMER is not None:
        _TIMER.close()
    _TIMER = config.stash.get(_OUTER_TIMER_KEY, None)  # the outer run's, if any
    session = config.stash.get(_SESSION_PROXY_KEY, None)
    if session is not None:
        del config.stash[_SESSION_PROXY_KEY]
        session.close()
    run_dir = config.stash.get(_RUN_DIR_KEY, None)
    if run_dir is not None:
        shutil.rmtree(run_dir, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: every worker shares the controller's run directory."""
    node.workerinput[_WORKER_RUN_DIR] = str(_run_dir(node.config))


_SESSION_PROXY_KEY = pytest.StashKey["SessionProxy"]()


def _session_proxy(config: pytest.Config) -> SessionProxy:
    """The worker's proxy listener (see reel_bindings/_session_proxy.py),
    made on first use, closed with the run."""
    session = config.stash.get(_SESSION_PROXY_KEY, None)
    if session is None:
        from reel_bindings._session_proxy import SessionProxy

        session = config.stash[_SESSION_PROXY_KEY] = SessionProxy()
    return session


def _tallies(config: pytest.Config) -> list[CassetteTally | dict[str, Any]]:
    """The run report's figures so far: this process's tests' tallies, and
    (on an xdist controller) its workers', as the JSON they sent."""
    return config.stash.setdefault(_TALLIES_KEY, [])


def _tally_objects(config: pytest.Config) -> list[CassetteTally]:
    from reel_core.tools import CassetteTally

    return [
        t if isinstance(t, CassetteTally) else CassetteTally.from_json(t) for t in _tallies(config)
    ]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """pytest-xdist: the controller adds up what each worker counted."""
    output = getattr(node, "workeroutput", None) or {}
    _tallies(node.config).extend(output.get(_WORKER_TALLIES, ()))
    if _WORKER_PHASES in output:
        node.config.stash.setdefault(_PHASES_KEY, []).append(output[_WORKER_PHASES])


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    workeroutput: dict[str, Any] | None = getattr(config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller reports
        workeroutput[_WORKER_TALLIES] = [t.to_json() for t in _tally_objects(config)]
        if _TIMER is not None:
            workeroutput[_WORKER_PHASES] = _TIMER.to_json()
        return
    target = config.getoption("reel_report", None)
    if target:
        import json

        from reel_bindings._store import atomic_write
        from reel_core.tools import report_json

        with _phase("report"):
            report = report_json(_tally_objects(config))
        if _TIMER is not None:
            report["phases"] = _phases_of(config)
        # renamed into place: never written through a link, never half written
        atomic_write(Path(target), (json.dumps(report, indent=2) + "\n").encode("utf-8"))
    if _strict_age_failed(config) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _strict_age_failed(config: pytest.Config) -> int:
    """How many stale recordings were served, when --reel-strict-age makes
    that fail the run (0 otherwise)."""
    if not config.getoption("reel_strict_age", False):
        return 0
    return sum(t.stale for t in _tally_objects(config))


def _phases_of(config: pytest.Config) -> dict[str, Any]:
    """The phases of the run: this process's, and its xdist workers'
    (``workers``: each worker's own figures, in the order they ended)."""
    assert _TIMER is not None
    workers = config.stash.get(_PHASES_KEY, [])
    # a controller runs no test: its own figures are the report's and its imports
    figures = merged([_TIMER.to_json(), *workers])
    figures["workers"] = workers
    return figures


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if getattr(config, "workeroutput", None) is not None:
        return
    if _tallies(config):
        with _phase("report"):
            from reel_core.tools import render_report

            tallies = _tally_objects(config)
            terminalreporter.write_sep("-", "reel report")
            for line in render_report(tallies, verbose=config.getoption("verbose", 0) > 0):
                terminalreporter.write_line(line)
    if _TIMER is not None:
        terminalreporter.write_sep("-", "reel phases")
        for line in render_phases(_phases_of(config)):
            terminalreporter.write_line(line)
    if not _tallies(config):
        return
    stale = _strict_age_failed(config)
    if stale:
        s = "" if stale == 1 else "s"
        terminalreporter.write_line(
            f"reel: {stale} stale recording{s} served: the run fails (--reel-strict-age). "
            "Record them again with --reel-mode auto.",
            red=True,
        )


def pytest_report_header(config: pytest.Config) -> str:
    mode, source = _global_mode(config)
    timing = _global_timing(config) or f"{DEFAULT_TIMING} (default)"
    store = _run_store(config)
    where = f"{_cassette_root(config)}" if store is None else f"{store!r}"
    return f"reel: mode {mode} ({source}), timing {timing}, cassettes in {where}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    try:
        result = yield
    except BaseException:
        with _phase("call"):
            _check_misses(item, "call", failed=True)
        raise
    with _phase("call"):
        _check_misses(item, "call", failed=False)
    return result


def _check_misses(item: pytest.Item, when: str, *, failed: bool) -> None:
    """The one check of a test's misses: every miss any binding of its
    cassette served (in-process transports, adapters and SDK clients, the
    per-test proxy; HTTP requests and WebSocket sessions) and not reported
    yet fails the test with the report, even when the test itself passed:
    the code under test may have swallowed the 404 (a fallback model, a
    retry, a friendly message).  Called after the test's call and at the
    ``reel`` fixture's teardown.  When the test already ``failed``, or
    misses are allowed (``allow_misses``), the report is added to the
    phase's output instead."""
    cassette = item.stash.get(_CASSETTE_KEY, None)
    report = cassette._take_misses() if cassette is not None else None
    if report is None:
        return
    if failed or cassette is None or cassette.allow_misses:
        item.add_report_section(when, "reel misses", report)
        return
    pytest.fail(report, pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    item.stash.setdefault(_REPORTS_KEY, {})[report.when] = report
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    """Write a passed test's held recordings once every fixture is torn
    down: a teardown that fails drops them (the test did not pass)."""
    try:
        yield
    except BaseException:
        cassette = item.stash.get(_PENDING_KEY, None)
        if cassette is not None:
            del item.stash[_PENDING_KEY]
            with _phase("teardown"):
                cassette._finish(keep=False)
        raise
    cassette = item.stash.get(_PENDING_KEY, None)
    if cassette is not None:
        del item.stash[_PENDING_KEY]
        with _phase("teardown"):
            cassette._finish(keep=True)


def _passed(item: pytest.Item) -> bool:
    """The test's setup and call passed (an xfail, expected or not, did not)."""
    reports = item.stash.get(_REPORTS_KEY, {})
    return all(
        when in reports and reports[when].passed and not hasattr(reports[when], "wasxfail")
        for when in ("setup", "call")
    )


# -- fixtures ------------------------------------------------------------------


@pytest.fixture
def reel(request: pytest.FixtureRequest) -> Iterator[ReelCassette]:
    """This test's cassette: SDK clients, transports and a proxy on it."""
    item = request.node
    with _phase("setup"):
        cassette = ReelCassette._for_item(item)
        item.stash[_CASSETTE_KEY] = cassette
    if _TIMER is not None:
        _TIMER.tests += 1
    keep = False
    try:
        yield cassette
        with _phase("teardown"):
            cassette._close()
            _check_misses(item, "teardown", failed=False)  # of fixtures, after the call's check
        keep = _passed(item)
    finally:
        with _phase("teardown"):
            del item.stash[_CASSETTE_KEY]  # items live all session: let the cassette go
            cassette._close()  # again after an error: closing twice is harmless
            if keep and cassette.file.held:
                # written by pytest_runtest_teardown, once the other fixtures are down
                item.stash[_PENDING_KEY] = cassette
            else:  # failed, errored, xfail, skipped or interrupted: the cassette as it was
                cassette._finish(keep=keep)


@pytest.fixture
def reel_proxy(reel: ReelCassette) -> str:
    """The URL of this test's proxy; the SDKs' base URL variables point at it."""
    return reel.proxy_url


@pytest.fixture(autouse=True)
def _reel_marker_proxy(request: pytest.FixtureRequest) -> None:
    """``@pytest.mark.reel(proxy=True)``: start the proxy before the test's
    own fixtures build their clients."""
    if _marker(request.node).get("proxy"):
        request.getfixturevalue("reel_proxy")


@pytest.fixture(autouse=True)
def _reel_marker_freeze(request: pytest.FixtureRequest) -> Iterator[None]:
    """``@pytest.mark.reel(freeze=[...])``: the test runs (its own fixtures
    too) with the clock, ``uuid4`` or ``random`` pinned to its cassette's
    base values (see reel_bindings/_freeze.py)."""
    features = _marker(request.node).get("freeze")
    if not features:
        yield
        return
    from reel_core import CassetteError, ConfigError
    from reel_core.tools import check_features

    from ._freeze import frozen_for

    try:
        features = check_features(features)
    except ConfigError as exc:
        _marker_error(str(exc))
    cassette: ReelCassette = request.getfixturevalue("reel")
    try:
        cassette.frozen = frozen_for(cassette.file, features)
    except CassetteError as exc:  # replay mode, and no base values to reproduce
        pytest.fail(str(exc), pytrace=False)
    with cassette.frozen:
        yield


@pytest.fixture(autouse=True)
def _reel_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """Boundaries (``reel_bindings.calls``) and clients on the shared
    transports (:func:`shared_transport`) of a ``@pytest.mark.reel`` test,
    or of one using the ``reel`` fixture, record and replay on its
    cassette: the ``reel`` fixture is set up when one of them is first
    used, not before (a test that uses none is left as it was)."""
    if "reel" not in request.fixturenames and not any(request.node.iter_markers("reel")):
        yield
        return
    from reel_bindings import _call_context

    made: list[ReelCassette] = []

    def cassette() -> ReelCassette:
        if not made:
            made.append(request.getfixturevalue("reel"))
        return made[0]

    _call_context.use_for_test(lambda: cassette()._calls_player())
    _call_context.share_for_test(cassette)
    try:
        yield
    finally:
        _call_context.share_for_test(None)
        _call_context.use_for_test(None)


# -- clients shared by tests ------------------------------------------------------


def shared_transport() -> SharedTransport:
    """A transport for an ``httpx.Client`` / ``httpx2.Client`` made once for
    many tests (at a module's import, in a session fixture): each request
    goes to the cassette of the test being run, as through its
    ``reel.transport()``.  A test uses Reel through it when it has the
    ``reel`` fixture or the ``reel`` marker; see
    ``reel_bindings._shared_transport``."""
    from reel_bindings._shared_transport import SharedTransport

    return SharedTransport()


def shared_async_transport() -> AsyncSharedTransport:
    """:func:`shared_transport` for ``httpx.AsyncClient`` / ``httpx2.AsyncClient``."""
    from reel_bindings._shared_transport import AsyncSharedTransport

    return AsyncSharedTransport()


def shared_openai(**kwargs: Any) -> Any:
    """An ``openai.OpenAI`` on :func:`shared_transport`, to make once for
    many tests (no SSL context of its own); ``kwargs`` go to it.  Without a
    key (``api_key=``, ``$OPENAI_API_KEY``) in a replay run it gets a
    placeholder."""
    return _shared_client("openai", shared_transport(), kwargs)


def shared_async_openai(**kwargs: Any) -> Any:
    """An ``openai.AsyncOpenAI`` on :func:`shared_async_transport`."""
    return _shared_client("openai", shared_async_transport(), kwargs)


def shared_anthropic(**kwargs: Any) -> Any:
    """An ``anthropic.Anthropic`` on :func:`shared_transport`."""
    return _shared_client("anthropic", shared_transport(), kwargs)


def shared_async_anthropic(**kwargs: Any) -> Any:
    """An ``anthropic.AsyncAnthropic`` on :func:`shared_async_transport`."""
    return _shared_client("anthropic", shared_async_transport(), kwargs)


def _shared_client(
    sdk: str, transport: SharedTransport | AsyncSharedTransport, kwargs: dict[str, Any]
) -> Any:
    from reel_bindings.sdk import client_on
    from reel_core import Mode

    if not _RUN_CONFIGS:
        raise RuntimeError(
            f"reel_bindings.pytest_plugin.shared_{sdk}() makes a client for the tests of a "
            "pytest run with Reel's plugin: call it from the tests' modules or fixtures "
            "(outside pytest, use reel_bindings.sdk's helpers on a cassette)"
        )
    mode = Mode(_global_mode(_RUN_CONFIGS[-1])[0])
    return client_on(sdk, transport, mode=mode, **kwargs)


# -- the cassette of a test ------------------------------------------------------


class ReelCassette:
    """One test's cassette and every binding the test asked for on it.

    All bindings share one open :class:`~reel_bindings.CassetteFile`, so what
    one records the others replay.  Each helper passes its keyword arguments
    through (to the SDK client, or to the transport / adapter).
    """

    def __init__(
        self,
        *,
        path: Path,
        mode: Mode,
        timing: Timing,
        match: MatchConfig | None,
        repeat: bool | None,
        upstream: str | None,
        file: CassetteFile,
        hint: str,
        stack: contextlib.ExitStack,
        display: str | None = None,
        lock: contextlib.ExitStack | None = None,
        first_token: Path | None = None,
    ) -> None:
        self.path = path
        #: The path as messages show it (relative to the rootdir when inside it).
        self.display = display or str(path)
        self.mode = mode
        self.timing = timing
        self.match = match
        self.repeat = repeat
        #: Where the proxy forwards in record/auto/live mode (``None``: the
        #: provider's own host, found from the request path).
        self.upstream = upstream
        self.file = file
        self.hint = hint
        self._stack = stack
        #: The cassette lock (record modes), held until the recordings are settled.
        self._lock = lock if lock is not None else contextlib.ExitStack()
        #: The run's "started afresh" token of a held record-mode cassette.
        self._first_token = first_token
        #: Set by _for_item: where the run report puts this test's figures.
        self._test = ""
        self._store_label = "files"
        self._config: pytest.Config | None = None
        self._players: list[Player] = []
        self._call_player: Player | None = None
        #: This test's transports for the shared clients, made on first use.
        self._shared_sync_transport: Transport | None = None
        self._shared_async_transport: AsyncTransport | None = None
        #: The run log of this test's proxy (the one its end seals: what
        #: races the end is noted elsewhere, see _session_proxy.py).
        self._proxy_log: RunLog | None = None
        self._proxy_url: str | None = None
        self._session: SessionProxy | None = None
        #: The misses reported so far: those kept, by id, and how many in
        #: all (requests, WebSocket sessions), counted or kept.
        self._reported: set[int] = set()
        self._reported_counts = (0, 0)
        self._forwarding_transports = False
        #: Seconds a recording stays fresh for this test (marker, else run);
        #: ``None``: the cassette's ``_meta`` says.
        self.max_age: float | None = None
        #: Seconds a recording reads on after the client left (the
        #: marker's ``record_grace=``); ``None``: ``$REEL_RECORD_GRACE``,
        #: else the core's default.
        self.record_grace: float | None = None
        #: Response headers this test's recordings never store (the
        #: marker's, else ``$REEL_DROP_RESPONSE_HEADERS``); ``None``: the
        #: environment's.
        self.drop_response_headers: tuple[str, ...] | None = None
        #: The descriptor set gRPC messages are matched through (the
        #: marker's, the flag's, ``$REEL_PROTO_DESCRIPTOR``'s or the ini
        #: option's, read); ``None``: bytes.
        self.proto_descriptor: ProtoSchema | None = None
        #: A miss does not fail this test (the marker's ``allow_misses=``,
        #: else the ``reel_allow_misses`` ini option); it is still reported.
        self.allow_misses = False
        #: The marker's ``freeze=`` in force for this test (``advance()``
        #: moves its clock on); ``None``: nothing is frozen.
        self.frozen: Frozen | None = None

    def __repr__(self) -> str:
        return f"<ReelCassette {str(self.path)!r} mode={self.mode.value} timing={self.timing}>"

    # -- in-process bindings --

    @_bindings
    def transport(self, **kwargs: Unpack[BindingOptions]) -> Transport:
        """A sync transport for ``httpx.Client`` / ``httpx2.Client``."""
        from reel_bindings.httpcore import Transport

        transport = Transport(self.file, self._options(kwargs))
        self._adopt(transport.player)
        self._stack.callback(transport.close)
        self._forwarding_transports = True
        return transport

    @_bindings
    def async_transport(self, **kwargs: Unpack[BindingOptions]) -> AsyncTransport:
        """An async transport for ``httpx.AsyncClient`` / ``httpx2.AsyncClient``."""
        from reel_bindings.httpcore import AsyncTransport

        transport = AsyncTransport(self.file, self._options(kwargs))
        self._adopt(transport.player)
        return transport

    @_bindings
    def requests_adapter(self, **kwargs: Unpack[BindingOptions]) -> Adapter:
        """A transport adapter to mount on a ``requests.Session``."""
        from reel_bindings.requests import Adapter

        adapter = Adapter(self.file, self._options(kwargs))
        self._adopt(adapter.player)
        self._stack.callback(adapter.close)
        return adapter

    @_bindings
    def requests_session(self, **kwargs: Unpack[BindingOptions]) -> requests.Session:
        """A ``requests.Session`` with :meth:`requests_adapter` mounted for
        ``http://`` and ``https://``."""
        import requests

        session = requests.Session()
        adapter = self.requests_adapter(**kwargs)
        session.mount("https://", adapter)
        session.mount("http://", adapter)
        self._stack.callback(session.close)
        return session

    # -- SDK clients (what reel_bindings.sdk builds, on this cassette) --

    @_bindings
    def openai(self, *, strict: bool = False, **kwargs: Any) -> Any:
        """An ``openai.OpenAI`` client; ``kwargs`` go to it (``base_url``, ...)."""
        from reel_bindings.sdk import client_on

        return client_on("openai", self.transport(strict=strict), **kwargs)

    @_bindings
    def async_openai(self, *, strict: bool = False, **kwargs: Any) -> Any:
        """An ``openai.AsyncOpenAI`` client (asyncio or trio)."""
        from reel_bindings.sdk import client_on

        return client_on("openai", self.async_transport(strict=strict), **kwargs)

    @_bindings
    def anthropic(self, *, strict: bool = False, **kwargs: Any) -> Any:
        """An ``anthropic.Anthropic`` client."""
        from reel_bindings.sdk import client_on

        return client_on("anthropic", self.transport(strict=strict), **kwargs)

    @_bindings
    def async_anthropic(self, *, strict: bool = False, **kwargs: Any) -> Any:
        """An ``anthropic.AsyncAnthropic`` client (asyncio or trio)."""
        from reel_bindings.sdk import client_on

        return client_on("anthropic", self.async_transport(strict=strict), **kwargs)

    @_bindings
    def genai(self, *, strict: bool = False, **kwargs: Any) -> Any:
        """A ``google.genai.Client``; its ``.aio`` side is on the cassette too.
        ``base_url=`` and an ``http_options`` dict are honored."""
        from reel_bindings.sdk import genai_on

        return genai_on(
            self.transport(strict=strict), self.async_transport(strict=strict), **kwargs
        )

    # -- gRPC (reel_bindings.grpc) and xAI's SDK on it --

    @_bindings
    def grpc_channel(
        self,
        channel: Any,
        *,
        channel_metadata: Iterable[tuple[str, str | bytes]] = (),
        **kwargs: Unpack[BindingOptions],
    ) -> Channel:
        """``channel`` (a ``grpc.Channel``) with its calls on this cassette;
        closed with the test."""
        from reel_bindings.grpc import Channel

        options = self._options(kwargs)
        wrapped = Channel(channel, self.file, options, channel_metadata=channel_metadata)
        self._adopt(wrapped.player)
        self._stack.callback(wrapped.close)
        return wrapped

    @_bindings
    def aio_grpc_channel(
        self,
        channel: Any,
        *,
        channel_metadata: Iterable[tuple[str, str | bytes]] = (),
        **kwargs: Unpack[BindingOptions],
    ) -> AioChannel:
        """``channel`` (a ``grpc.aio.Channel``) with its calls on this
        cassette (``await`` its ``close()`` yourself, in the test's loop)."""
        from reel_bindings.grpc import AioChannel

        options = self._options(kwargs)
        wrapped = AioChannel(channel, self.file, options, channel_metadata=channel_metadata)
        self._adopt(wrapped.player)
        return wrapped

    @_bindings
    def xai(self, *, strict: bool = False, **kwargs: Any) -> Any:
        """An ``xai_sdk.Client``; ``kwargs`` go to it (``api_host``, ...)."""
        from reel_bindings.sdk import xai_on

        def wrap(channel: Any, added: tuple[tuple[str, str], ...]) -> Channel:
            return self.grpc_channel(channel, channel_metadata=added, strict=strict)

        return xai_on(wrap, self.mode, is_async=False, **kwargs)

    @_bindings
    def async_xai(self, *, strict: bool = False, **kwargs: Any) -> Any:
        """An ``xai_sdk.AsyncClient`` (asyncio)."""
        from reel_bindings.sdk import xai_on

        def wrap(channel: Any, added: tuple[tuple[str, str], ...]) -> AioChannel:
            return self.aio_grpc_channel(channel, channel_metadata=added, strict=strict)

        return xai_on(wrap, self.mode, is_async=True, **kwargs)

    # -- clients on the shared transports (reel_bindings._shared_transport) --

    def _shared_sync(self) -> Transport:
        """This test's transport for the shared sync clients (made once)."""
        if self._shared_sync_transport is None:
            self._shared_sync_transport = self.transport()
        return self._shared_sync_transport

    def _shared_async(self) -> AsyncTransport:
        """This test's transport for the shared async clients (made once)."""
        if self._shared_async_transport is None:
            transport = self.async_transport()
            transport.keep_alive = False  # each test may run its own event loop
            self._shared_async_transport = transport
        return self._shared_async_transport

    # -- boundaries (reel_bindings.calls) --

    def _calls_player(self) -> Player:
        """The player this test's boundaries record and replay with (made
        once), on the cassette every binding of the test shares."""
        if self._call_player is None:
            from reel_bindings._inprocess import Player

            player = Player(self.file, self._options({}))
            self._adopt(player)
            self._call_player = player
        return self._call_player

    # -- the per-test proxy --

    @property
    def proxy_url(self) -> str:
        """The URL of a proxy serving this cassette (started on first use,
        stopped at teardown).  Starting it points ``OPENAI_BASE_URL``,
        ``ANTHROPIC_BASE_URL`` and ``GOOGLE_GEMINI_BASE_URL`` at it for the
        rest of the test (and, in replay mode, sets placeholder API keys
        that are unset), so unmodified SDK code goes through it."""
        if self._proxy_url is None:
            self._proxy_url = self._start_proxy()
        return self._proxy_url

    def proxy_openai(self, **kwargs: Any) -> Any:
        """An ``openai.OpenAI`` pointed at this test's proxy (started on
        first use) over plain HTTP: made once per worker and handed to each
        test with ``kwargs`` (``max_retries=``, ``timeout=``...) and the
        key, so a test builds no SSL context of its own; the tests asking
        with the same ``kwargs`` and key share one copy.  Do not close or
        change it: the plugin closes it at the end of the session."""
        self.proxy_url  # noqa: B018  # started on first use
        assert self._session is not None
        given = kwargs.pop("api_key", None) or os.environ.get("OPENAI_API_KEY")
        if not given:  # the SDK's own rule, said with what to do
            raise ValueError(
                "reel.proxy_openai(): no API key: set OPENAI_API_KEY (the proxy forwards "
                f"to OpenAI in {self.mode.value} mode) or pass api_key="
            )
        return self._session.openai(api_key=given, **kwargs)

    def _start_proxy(self) -> str:
        with _phase("proxy"):
            return self._started_proxy()

    def _started_proxy(self) -> str:
        with _phase("imports"):  # the proxy's modules: the first test of a process imports them
            from reel_bindings._session_proxy import SessionProxy
            from reel_bindings._settings import Settings
            from reel_bindings._upstream import AsyncUpstream
            from reel_bindings.proxy import Proxy
            from reel_core import Mode

        # the environment's PII switch and body limit, as the transports have them
        settings = Settings.from_env(
            mode=self.mode,
            record_grace=self.record_grace,
            drop_response_headers=self.drop_response_headers,
            proto_descriptor=self.proto_descriptor,
        )
        config = settings.config(
            max_age=self.max_age,
            match=self.match,
            timing=self.timing,
            repeat=self.repeat,
            routing=True,
            upstream=self.upstream,
            hint=self.hint,
        )
        proxy = Proxy(config, cassette=self.file, upstream=AsyncUpstream(), report=True)
        # stopping waits for a recording still reading a stream its test left
        # (the record grace); nothing else is left open at a test's end
        recording = self.mode in (Mode.RECORD, Mode.AUTO)
        grace = config.record_grace if recording else 0.0
        # the worker's listener (one per session), serving this test's proxy
        session = _session_proxy(self._config) if self._config is not None else None
        if session is None:  # a cassette made outside a pytest run: a listener of its own
            session = SessionProxy()
            self._stack.callback(session.close)
        url = self._stack.enter_context(session.serving(proxy, grace=grace))
        self._session = session
        self._proxy_log = proxy.runlog
        # the SDKs' variables, set for the rest of the test (one update, and
        # one restore of what was there: not a MonkeyPatch per variable)
        env = proxy_environment(url, replay=self.mode is Mode.REPLAY)
        self._stack.callback(_restore_environment, {v: os.environ.get(v) for v in env})
        os.environ.update(env)
        return url

    # -- misses --

    def _runlogs(self) -> list[RunLog]:
        """The run logs of this test's bindings: its players' and its proxy's."""
        logs = [player.runlog for player in self._players]
        if self._proxy_log is not None:
            logs.append(self._proxy_log)
        return logs

    @property
    def misses(self) -> list[MissReport]:
        """Every miss served so far, by any binding of this test (each
        binding keeps its first hundred)."""
        return [m for log in self._runlogs() for m in log.misses]

    @property
    def websocket_misses(self) -> list[WebSocketMiss]:
        """Every WebSocket session of this test's proxy that stopped on a
        client message the recording does not have (the message index and
        the field diff)."""
        log = self._proxy_log
        return list(log.websocket_misses) if log is not None else []

    def _take_misses(self) -> str | None:
        """The failure text for the misses not reported yet, if any."""
        logs = self._runlogs()
        counts = (
            sum(log.misses.total for log in logs),
            sum(log.websocket_misses.total for log in logs),
        )
        requests = counts[0] - self._reported_counts[0]
        sessions = counts[1] - self._reported_counts[1]
        if not requests and not sessions:
            return None
        self._reported_counts = counts
        new = [m for m in self.misses if id(m) not in self._reported]
        kept = [m for m in self.websocket_misses if id(m) not in self._reported]
        self._reported.update(id(m) for m in [*new, *kept])
        what = []
        if requests:
            what.append(f"{requests} request{'' if requests == 1 else 's'}")
        if sessions:
            what.append(f"{sessions} WebSocket session{'' if sessions == 1 else 's'}")
        head = (
            f"Reel: {' and '.join(what)} missed cassette {self.display} (mode {self.mode.value})."
        )
        if self.allow_misses:
            head += " Misses are allowed for this test (allow_misses): it is not failed."
        else:
            head += " A miss fails the test even when the code under test handled the error."
        body = [m.render() for m in new] + [m.render() for m in kept]
        unkept = requests + sessions - len(new) - len(kept)
        if unkept:  # past what a run log keeps: counted, not shown
            from reel_bindings._runlog import KEPT

            body.append(f"({unkept} more not shown: each binding keeps its first {KEPT}.)")
        if sessions:  # auto mode would replay the same upgrade: only record refreshes it
            body.append(
                "A WebSocket session is replayed as recorded or not at all: re-record it "
                f"with `pytest {shlex.quote(self._test)} --reel-mode record`."
            )
        return "\n\n".join([head, *body])

    # -- plumbing --

    def _options(self, kwargs: Mapping[str, Any]) -> Options:
        """The test's settings as a binding's options, ``kwargs`` over them."""
        from reel_bindings._options import Options

        if "mode" in kwargs:
            raise TypeError(
                "the mode is the test's: set it with the marker, --reel-mode or $REEL_MODE"
            )
        test = Options(
            match=self.match,
            timing=self.timing,
            repeat=self.repeat,
            max_age=self.max_age,
            record_grace=self.record_grace,
            drop_response_headers=self.drop_response_headers,
            proto_descriptor=self.proto_descriptor,
        )
        # the miss hint is the test's: the player's config is built with it
        return Options.of({**kwargs, "mode": self.mode, "hint": self.hint}, test)

    def _adopt(self, player: Player) -> None:
        self._players.append(player)

    def _close(self) -> None:
        from reel_core import Mode

        from ._relay import READING

        if self._forwarding_transports and self.mode is not Mode.REPLAY and READING:
            # A response the test dropped unread (a stream left after its first
            # chunk) still reads its upstream rest when collected, to record it
            # whole: let that happen before the transports close their pools.
            # Only while a relay is left mid-body: a full collection costs
            # ~20 ms a test in a process that imported the SDKs.
            gc.collect()
        self._stack.close()

    def _finish(self, *, keep: bool) -> None:
        """Write the held recordings (``keep``) or drop them, then let the
        cassette lock go."""
        try:
            with _phase("report"):
                self._tally(keep=keep)
            if keep:
                self.file.commit()
            else:
                fresh = self.file.fresh_pending
                self.file.discard()
                if fresh and self._first_token is not None:
                    # nothing was started afresh: the next test to record it does
                    self._first_token.unlink(missing_ok=True)
        finally:
            self._lock.close()

    def _tally(self, *, keep: bool) -> None:
        """Add this test's figures to the run report: the counts of its
        bindings' run logs, and their last exchanges (each binding keeps
        its last thousand) as its outcomes."""
        from reel_core import Verdict
        from reel_core.tools import CassetteTally, Outcome

        logs = self._runlogs()
        served = sum(log.total for log in logs)
        if (not served and not self.file.written) or self._config is None:
            return
        stale = [s for log in logs for s in log.stale]
        # what a dropped test recorded was never written: it superseded
        # nothing, and its exchanges' verdicts say "dropped" (the core's rule)
        written = keep or not self.file.held
        drifts = [d for log in logs for d in log.drifts] if written else []
        tally = CassetteTally(
            self.display,
            self._store_label,
            hits=sum(log.counts[Verdict.HIT] for log in logs),
            misses=sum(log.counts[Verdict.MISS] for log in logs),
            recorded=self.file.written + (self.file.held if keep else 0),
            stale=sum(log.stale.total for log in logs),
            superseded=sum(log.superseded for log in logs) if written else 0,
            outcomes=[
                Outcome(self._test, s.method, s.path, s.verdict.gated(written).value, s.kind)
                for log in logs
                for s in log.last
            ],
            stale_replays=[
                {
                    "test": self._test,
                    "method": s.method,
                    "path": s.path,
                    "recorded": s.staleness.recorded,
                    "age_seconds": s.staleness.age,
                    "max_age_seconds": s.staleness.max_age,
                }
                for s in stale
            ],
            drifts=[{"test": self._test, **d.to_json()} for d in drifts],
        )
        _tallies(self._config).append(tally)

    @classmethod
    def _for_item(cls, item: pytest.Item) -> ReelCassette:
        from reel_bindings._files import CassetteFile
        from reel_bindings._settings import Source
        from reel_bindings._store import FileStore
        from reel_core import CassetteMeta, Mode

        settings = _marker(item)
        path, display = _cassette_path(item, settings.get("cassette"))
        resolved = _resolve(item.config, settings)
        mode = resolved.mode
        timing = resolved.timing or _default_timing()
        match = _match(settings.get("match"), settings.get("ignore_fields"))
        repeat = settings.get("repeat")
        if repeat is not None and not isinstance(repeat, bool):
            _marker_error(f"repeat= takes True, False or None (the cassette's), not {repeat!r}")
        upstream = resolved.upstream
        store: Store | None = _run_store(item.config)
        run_store = store
        if store is None:
            store, name = FileStore(), str(path)
        else:  # its name in the store: the path under the cassette directory
            try:
                name = path.relative_to(_cassette_root(item.config)).as_posix()
            except ValueError:
                _marker_error(
                    f"cassette {str(path)!r} is outside the cassette directory: with a store "
                    "(--reel-store), name it relative to it"
                )
        record_on = resolved.record_on or DEFAULT_RECORD_ON
        with contextlib.ExitStack() as stack:
            if mode.records:
                # One writer per cassette at a time, across xdist workers.
                stack.enter_context(store.lock(name))
            # A cassette re-recorded earlier in this run is added to (only
            # record mode starts one afresh: no other mode needs the token).
            token = _first_token(item.config, path) if mode is Mode.RECORD else None
            refreshed = token is not None and not _first_in_run(token)
            # A match setting goes into a new cassette's _meta line, as the proxy does.
            meta = CassetteMeta(match=match) if match is not None else None
            # A missing cassette in replay mode fails the test that uses it
            # (each request misses, naming the path and the command that
            # records it), never the whole session.
            with _phase("open"):
                file = CassetteFile(
                    name,
                    mode=mode,
                    meta=meta,
                    missing_ok=True,
                    store=store,
                    refreshed=refreshed,
                    held=mode.records and record_on == "passed",
                    asset_threshold=resolved.asset_threshold,
                )
            cassette = cls(
                path=path,
                mode=mode,
                timing=timing,
                match=match,
                repeat=repeat,
                upstream=upstream,
                file=file,
                hint=_hint(
                    item,
                    display,
                    exists=file.existed,
                    name=name,
                    marked=resolved.source("mode") is Source.MARKER,
                ),
                display=display,
                stack=contextlib.ExitStack(),
                first_token=None if refreshed else token,
            )
            cassette._test = item.nodeid
            cassette.max_age = resolved.max_age
            cassette.record_grace = resolved.record_grace
            cassette.drop_response_headers = resolved.drop_response_headers
            cassette.proto_descriptor = resolved.proto_descriptor
            cassette.allow_misses = resolved.allow_misses
            cassette._store_label = "files" if run_store is None else repr(store)
            cassette._config = item.config
            cassette._lock = stack.pop_all()  # the lock is the cassette's now
        return cassette


# -- settings --------------------------------------------------------------------


def _marker(item: pytest.Item) -> dict[str, Any]:
    """The ``reel`` marker's settings; the closest marker wins per key."""
    settings: dict[str, Any] = {}
    for marker in reversed(list(item.iter_markers("reel"))):
        if len(marker.args) > 1:
            _marker_error(
                f"takes at most one positional argument (the cassette), not {marker.args}"
            )
        unknown = set(marker.kwargs) - _MARKER_KEYS
        if unknown:
            _marker_error(
                f"unknown argument(s) {', '.join(sorted(unknown))}; "
                f"use {', '.join(sorted(_MARKER_KEYS))}"
            )
        if marker.args:
            settings["cassette"] = marker.args[0]
        settings.update(marker.kwargs)
    return settings


def _marker_error(message: str) -> NoReturn:
    pytest.fail(f"@pytest.mark.reel: {message}", pytrace=False)


_ROOT_KEY = pytest.StashKey[Path]()


def _cassette_root(config: pytest.Config) -> Path:
    """The run's cassette directory (read once)."""
    root = config.stash.get(_ROOT_KEY, None)
    if root is None:
        value = str(config.getini("reel_cassette_dir") or DEFAULT_CASSETTE_DIR)
        root = config.stash[_ROOT_KEY] = config.rootpath / value
    return root


def _safe(name: str) -> str:
    safe = _UNSAFE.sub("-", name).strip("-").lstrip(".") or "test"
    if len(safe) > _MAX_NAME:
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        safe = f"{safe[: _MAX_NAME - 13]}-{digest}"
    return safe


def _cassette_path(item: pytest.Item, name: object) -> tuple[Path, str]:
    """``<cassette dir>/<module path>/<test name>.jsonl`` (or the marker's
    cassette name inside the module's directory), and the path as messages
    show it (relative to the rootdir when it is inside)."""
    config = item.config
    directory, shown = _module_directory(config, item.path)
    if name is None:
        parts = item.nodeid.split("::")[1:] or [item.name]
        file = _safe(".".join(parts)) + ".jsonl"
        return directory / file, file if shown is None else os.path.join(shown, file)
    if not isinstance(name, (str, os.PathLike)):
        _marker_error(f"the cassette is a name or a path, not {name!r}")
    path = Path(name)
    if not path.suffix:
        path = path.with_name(path.name + ".jsonl")
    path = path if path.is_absolute() else directory / path
    return path, _display(config, path)


_DIRECTORIES_KEY = pytest.StashKey[dict[Path, tuple[Path, "str | None"]]]()


def _module_directory(config: pytest.Config, module: Path) -> tuple[Path, str | None]:
    """The cassette directory of the tests in ``module`` (a test file), and
    it as messages show it (``None``: the rootdir itself); worked out once
    per module, not per test."""
    known = config.stash.setdefault(_DIRECTORIES_KEY, {})
    found = known.get(module)
    if found is None:
        try:
            relative = module.relative_to(config.rootpath).with_suffix("")
        except ValueError:  # a test file outside the rootdir
            relative = Path(module.stem)
        directory = _cassette_root(config) / relative
        shown = _display(config, directory)
        found = known[module] = (directory, None if shown == "." else shown)
    return found


@functools.cache
def _default_timing() -> Timing:
    from reel_core import Timing

    return Timing.parse(DEFAULT_TIMING)


#: The plugin's flags, by setting.
_FLAGS = {
    "phases": "reel_phases",
    "mode": "reel_mode",
    "timing": "reel_timing",
    "max_age": "reel_max_age",
    "store": "reel_store",
    "record_on": "reel_record_on",
    "proto_descriptor": "reel_proto_descriptor",
}
#: The marker's keys that are settings (the rest, the cassette, its match
#: and repeat and proxy=, are the test's own).
_MARKER_SETTINGS = (
    "mode",
    "timing",
    "max_age",
    "record_grace",
    "drop_response_headers",
    "upstream",
    "record_on",
    "allow_misses",
    "proto_descriptor",
)
#: The plugin's ini options, by setting (``reel_<name>``).
_INI_SETTINGS = ("max_age", "store", "record_on", "allow_misses", "proto_descriptor")


def _flag(name: str) -> str:
    return "--reel-" + name.replace("_", "-")


def _resolve(config: pytest.Config, marker: dict[str, Any] | None = None) -> Settings:
    """The settings of the run, or of a test with its ``marker`` settings:
    one precedence for each (the marker, then the flag, then the
    variable, then the ini option), read now (a test may have changed the
    environment).  A bad marker value fails the test; any other stops the
    run."""
    from ._settings import SettingError, Settings, Source

    flags = {name: config.getoption(option, None) for name, option in _FLAGS.items()}
    ini = {name: str(config.getini(f"reel_{name}") or "") for name in _INI_SETTINGS}
    given = {k: marker[k] for k in _MARKER_SETTINGS if k in marker} if marker else None
    try:
        return Settings.resolve(
            flags,
            None,
            given,
            ini,
            flag_label=_flag,
            extra=("record_on", "allow_misses", "phases"),
        )
    except SettingError as exc:  # says which marker key, flag, variable or option
        if exc.source is Source.MARKER:
            _marker_error(str(exc))
        raise pytest.UsageError(str(exc)) from None


_STORE_KEY = pytest.StashKey["Store | None"]()


def _run_store(config: pytest.Config) -> Store | None:
    """The store of the run (``--reel-store``, else ``$REEL_STORE``, else
    the ``reel_store`` ini option), opened and checked once; ``None``:
    files named by path."""
    if _STORE_KEY in config.stash:
        return config.stash[_STORE_KEY]
    from reel_core import ConfigError

    from ._store import StoreUnavailableError

    settings = _resolve(config)
    try:
        store = settings.open_store()
    except (ConfigError, StoreUnavailableError) as exc:  # a bad URL, the server down, no extra
        raise pytest.UsageError(f"reel: {exc}") from None
    config.stash[_STORE_KEY] = store
    return store


def _global_mode(config: pytest.Config) -> tuple[str, str]:
    """The mode set for the whole run (a test's marker wins over it), and
    where it came from."""
    from ._settings import Source, variable_of

    settings = _resolve(config)
    source = settings.source("mode")
    if source is Source.FLAG:
        return settings.mode.value, _flag("mode")
    if source is Source.ENV:
        return settings.mode.value, str(variable_of("mode"))
    return "replay", "default"


def _global_timing(config: pytest.Config) -> str | None:
    """The timing set for the run (--reel-timing, else $REEL_TIMING), checked."""
    timing = _resolve(config).timing
    return None if timing is None else str(timing)


def _match(match: object, ignore_fields: object) -> MatchConfig | None:
    from reel_core import ConfigError, MatchConfig, MatchMode

    if isinstance(match, MatchConfig):
        if ignore_fields:
            _marker_error("give ignore_fields= inside the MatchConfig, not beside it")
        return match
    if isinstance(ignore_fields, str):
        ignore_fields = [ignore_fields]
    if ignore_fields is None:
        ignore_fields = ()
    if not isinstance(ignore_fields, (list, tuple, set, frozenset)):
        _marker_error(f"ignore_fields= takes a list of JSON paths, not {ignore_fields!r}")
    fields = tuple(str(f) for f in ignore_fields)
    if match is None and not fields:
        return None  # the cassette's own setting (normalized by default)
    try:
        mode = MatchMode(match) if match is not None else MatchMode.IGNORE_FIELDS
        return MatchConfig(mode, fields)
    except ConfigError as exc:  # a ValueError too: caught first
        _marker_error(str(exc))
    except ValueError:
        choices = ", ".join(m.value for m in MatchMode)
        _marker_error(f"match={match!r}: use one of {choices}")


def _display(config: pytest.Config, path: Path) -> str:
    try:
        return str(path.relative_to(config.rootpath))
    except ValueError:
        return str(path)


def _hint(item: pytest.Item, path: str, *, exists: bool, name: str, marked: bool) -> str:
    """How to record a test's misses: the command keeps the run's store (a
    ``--reel-store`` given is given again; ``$REEL_STORE`` and the ini
    option are read again), and a missing cassette is named where it is.
    A test whose marker names its mode (``marked``) is told to change it
    there: the marker wins over ``--reel-mode``."""
    where, flag = _store_advice(item.config)
    if marked:
        missing = "does not exist yet" if not exists else "misses"
        return (
            f"the cassette {path} {missing}; its marker's mode= wins over --reel-mode: "
            "set @pytest.mark.reel(mode='auto') to record what is missing "
            "(or mode='record' to re-record the whole cassette)"
        )
    command = f"pytest {shlex.quote(item.nodeid)}{flag} --reel-mode"
    if not exists:
        missing = path if not where else f"{name} in the store {where}"
        return f"the cassette {missing} does not exist yet; record it with `{command} record`"
    return (
        f"run `{command} auto` to record what is missing "
        f"(or `{command} record` to re-record the whole cassette)"
    )


def _store_advice(config: pytest.Config) -> tuple[str, str]:
    """The run's store as a hint names it (``""``: files by path), and the
    ``--reel-store`` its command needs (``""`` unless the flag named it).
    A URL's user and password are left out: a hint is printed and logged.
    Worked out once per run, as the store is opened once."""
    advice = config.stash.get(_ADVICE_KEY, None)
    if advice is not None:
        return advice
    from ._settings import Source

    settings = _resolve(config)
    text = settings.store or ""
    flag = settings.source("store") is Source.FLAG
    if _run_store(config) is None or not text:
        advice = "", ""
    else:
        scheme, sep, rest = text.partition("://")
        netloc, slash, tail = rest.partition("/")
        shown = f"{scheme}{sep}{netloc.rpartition('@')[2]}{slash}{tail}" if sep else text
        advice = shown, f" --reel-store {shlex.quote(shown)}" if flag else ""
    config.stash[_ADVICE_KEY] = advice
    return advice


_ADVICE_KEY = pytest.StashKey[tuple[str, str]]()


# -- one refresh per cassette per run, across xdist workers -----------------------


def _run_dir(config: pytest.Config) -> Path:
    """A directory for this pytest run, shared with its xdist workers."""
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput is not None and _WORKER_RUN_DIR in workerinput:
        return Path(workerinput[_WORKER_RUN_DIR])
    run_dir = config.stash.get(_RUN_DIR_KEY, None)
    if run_dir is None:
        run_dir = Path(tempfile.mkdtemp(prefix="reel-pytest-"))
        config.stash[_RUN_DIR_KEY] = run_dir
    return run_dir


def _first_token(config: pytest.Config, path: Path) -> Path:
    """The run's token saying ``path`` was started afresh."""
    token = hashlib.sha256(str(path.resolve()).encode("utf-8", "surrogatepass")).hexdigest()
    return _run_dir(config) / token


def _first_in_run(token: Path) -> bool:
    """True for the first test of the run to record the cassette of
    ``token`` (it starts the cassette afresh); later ones add to it.
    Called holding the cassette lock."""
    try:
        fd = os.open(token, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    os.close(fd)
    return True
