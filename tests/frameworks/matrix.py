"""The matrix's one procedure: the truth, a recording, a replay with the upstream gone.

A case is a function ``drive(target) -> output`` that uses a framework as its
users do and returns what they would look at (texts, tool calls, parsed
objects, vectors).  :func:`check` runs it three times:

1. straight at the fake provider: the truth;
2. through Reel recording (the proxy on asyncio or trio, or Reel's in-process
   transports under the client the framework accepts): the output must be
   the truth, and the cassette must hold every answer the fake sent, whole,
   once, and no trace of the key;
3. through Reel replaying with nothing behind it (the proxy's upstream is a
   closed port; in-process, the fake itself is the tripwire): the output
   must be the truth and the fake must see no request.

A framework's own code runs in the test's thread (sync, or ``asyncio.run``:
most frameworks are asyncio-only); the proxy runs on its backend in a thread
of its own, so the trio proxy serves the same framework code.
"""

from __future__ import annotations

import asyncio
import enum
import importlib
import importlib.util
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
import httpx2
import pytest

from reel_bindings._files import CassetteFile
from reel_bindings.httpcore import AsyncTransport, Transport
from reel_bindings.proxy import ProxyOptions, running
from reel_core import Cassette, Mode, Timing
from tests.fakes.anthropic_wire import error as anthropic_error
from tests.fakes.openai_wire import error as openai_error
from tests.fakes.upstream import FakeUpstreamThread, Reply, Scenario, closed_port_url
from tests.secrets import FRAMEWORK_KEY

__all__ = [
    "FRAMEWORKS",
    "KEY",
    "PROXIES",
    "WAYS",
    "Target",
    "Way",
    "check",
    "framework",
    "lazy",
    "miss",
    "server_error",
]

#: The key every framework is given: it must never reach a cassette.
KEY = FRAMEWORK_KEY

T = TypeVar("T")


class Way(enum.Enum):
    """How a framework reaches Reel."""

    PROXY_ASYNCIO = "proxy-asyncio"
    PROXY_TRIO = "proxy-trio"
    #: Reel's transports under the httpx2 client the framework accepts.
    INPROCESS = "inprocess"

    @property
    def backend(self) -> str:
        return self.value.removeprefix("proxy-")


def _param(way: Way) -> Any:
    # the trio proxy runs in CI (``slow``): the README's run keeps to asyncio
    marks = [pytest.mark.slow] if way is Way.PROXY_TRIO else []
    return pytest.param(way, id=way.value, marks=marks)


#: Every way, for a framework that accepts a client; the proxies alone for one that does not.
WAYS = [_param(way) for way in Way]
PROXIES = [_param(way) for way in (Way.PROXY_ASYNCIO, Way.PROXY_TRIO)]


class Target:
    """Where a framework is pointed: ``url`` (no path; :attr:`v1` for
    OpenAI-style base URLs) and, in-process, the httpx2 clients to give it
    (on Reel's transports, or plain ones for the straight run).

    Async code runs under :meth:`run`, which closes the async clients it
    made in their own event loop."""

    def __init__(
        self, url: str, *, file: CassetteFile | None = None, inprocess: bool = False
    ) -> None:
        self.url = url
        self.inprocess = inprocess or file is not None
        self._file = file
        self._sync: list[httpx2.Client] = []
        self._async: list[httpx2.AsyncClient] = []

    @property
    def v1(self) -> str:
        return self.url + "/v1"

    def client(self) -> httpx2.Client | None:
        """A sync httpx2 client to give the framework in-process, else None."""
        if not self.inprocess:
            return None
        if self._file is None:
            client = httpx2.Client(timeout=30)
        else:
            transport = Transport(self._file, mode=self._file.mode, timing="fast")
            client = httpx2.Client(transport=transport, timeout=30)
        self._sync.append(client)
        return client

    def aclient(self, *, own: bool = False) -> httpx2.AsyncClient | None:
        """An async httpx2 client to give the framework in-process, else
        None (``own``: a plain one); made in the event loop of :meth:`run`."""
        if not self.inprocess and not own:
            return None
        if self._file is None:
            client = httpx2.AsyncClient(timeout=30)
        else:
            transport = AsyncTransport(self._file, mode=self._file.mode, timing="fast")
            client = httpx2.AsyncClient(transport=transport, timeout=30)
        self._async.append(client)
        return client

    def run(self, main: Callable[[], Awaitable[T]]) -> T:
        """``asyncio.run(main())``, closing the async clients it made."""

        async def wrapped() -> T:
            try:
                return await main()
            finally:
                while self._async:
                    await self._async.pop().aclose()

        return asyncio.run(wrapped())

    def close(self) -> None:
        while self._sync:
            self._sync.pop().close()


class _ProxyThread:
    """A Reel proxy on ``backend`` in a daemon thread (its own event loop)."""

    def __init__(self, options: ProxyOptions, backend: str) -> None:
        self._options = options
        self._backend = backend
        self._ready = threading.Event()
        self._url = ""
        self._stop: anyio.Event | None = None
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="reel-proxy", daemon=True)

    def __enter__(self) -> str:
        self._thread.start()
        if not self._ready.wait(timeout=30):
            raise RuntimeError("the proxy did not start within 30 s")
        if self._error is not None:
            raise self._error
        return self._url

    def __exit__(self, *exc_info: object) -> None:
        if self._stop is not None and self._token is not None:
            with suppress(anyio.RunFinishedError):
                anyio.from_thread.run_sync(self._stop.set, token=self._token)
        self._thread.join(timeout=30)
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        try:
            anyio.run(self._main, backend=self._backend)
        except BaseException as exc:  # handed to the test's thread
            self._error = exc
        finally:
            self._ready.set()

    async def _main(self) -> None:
        self._stop = anyio.Event()
        self._token = anyio.lowlevel.current_token()
        async with running(self._options) as url:
            self._url = url
            self._ready.set()
            await self._stop.wait()


def _options(mode: Mode, cassette: Path, upstream: str, backend: str) -> ProxyOptions:
    return ProxyOptions(
        mode=mode,
        cassette=cassette,
        upstream=upstream,
        timing=Timing.parse("fast"),
        port=0,
        backend=backend,
    )


@contextmanager
def _through_reel(way: Way, mode: Mode, cassette: Path, fake_url: str) -> Iterator[Target]:
    """A target that reaches Reel in ``mode``; Reel's work is on disk when it ends."""
    if way is not Way.INPROCESS:
        upstream = fake_url if mode is Mode.RECORD else closed_port_url()
        with _ProxyThread(_options(mode, cassette, upstream, way.backend), way.backend) as url:
            yield Target(url)
        return
    target = Target(fake_url, file=CassetteFile(cassette, mode=mode))
    try:
        # in replay the requests still name the fake: it is the tripwire
        yield target
    finally:
        target.close()


def check(
    fake: FakeUpstreamThread,
    tmp_path: Path,
    way: Way,
    drive: Callable[[Target], T],
    *,
    script: Callable[[], list[Reply]] | None = None,
    client_cuts: bool = False,
) -> T:
    """Drive a case straight, recording and replaying (see the module); the truth.

    ``script`` makes the replies the fake answers first (a 500 before the
    real answer), pushed before the straight run and before the recording.
    ``client_cuts``: the framework cancels a read mid-stream, and the
    recording may hold that stream as the client's cut (see
    :func:`_assert_whole`).
    """
    replies = script or (list)
    fake.server.clear()
    for reply in replies():
        fake.push_reply(reply)
    straight = _direct(way, fake.url)
    try:
        truth = drive(straight)
    finally:
        straight.close()
    fake.server.clear()
    for reply in replies():
        fake.push_reply(reply)
    cassette = tmp_path / f"{way.value}.jsonl"
    with _through_reel(way, Mode.RECORD, cassette, fake.url) as target:
        recorded = drive(target)
    answered = [reply.body for reply in fake.answered]
    assert recorded == truth, "the output through Reel (record) differs from the truth"
    _assert_whole(cassette, answered, client_cuts)
    data = cassette.read_bytes()
    assert KEY.encode() not in data, "the framework's key reached the cassette"
    seen = len(fake.requests)
    with _through_reel(way, Mode.REPLAY, cassette, fake.url) as target:
        replayed = drive(target)
    assert len(fake.requests) == seen, "the replay reached the upstream"
    assert replayed == truth, "the replayed output differs from the truth"
    return truth


def _direct(way: Way, fake_url: str) -> Target:
    return Target(fake_url, inprocess=way is Way.INPROCESS)


def _assert_whole(cassette: Path, answered: list[bytes], client_cuts: bool) -> None:
    """Every answer the fake sent is in the cassette once, whole; with
    ``client_cuts``, an answer may instead be cut where the client left
    (what it had read, and more), marked as the client's."""
    recorded = list(Cassette.loads(cassette.read_bytes(), strict=True))
    want = Counter(answered)
    cut: list[bytes] = []
    for line in recorded:
        if line.response.cut is None:
            continue
        assert client_cuts, f"recorded as cut: {line.request.path} {line.response.cut}"
        assert line.response.cut.error == "client-closed", line.response.cut
        cut.append(line.response.content)
    got = Counter(line.response.content for line in recorded if line.response.cut is None)
    lost = want - got
    for part in cut:
        whole = next((body for body in lost if body.startswith(part)), None)
        assert whole is not None, f"a cut recording that is no answer's beginning: {part!r}"
        lost[whole] -= 1
    lost = +lost
    tally = f"the cassette holds {len(recorded)} answers, the fake sent {len(answered)}"
    assert not lost, f"{tally}; lost: {sum(lost.values())}"
    assert not got - want, f"{tally}; extra or changed: {sum((got - want).values())}"


def server_error(provider: str = "openai") -> Callable[[], list[Reply]]:
    """A script: one 500 in the provider's shape before the real answer."""

    def make() -> list[Reply]:
        fail = openai_error if provider == "openai" else anthropic_error
        return [fail(Scenario.SERVER_ERROR, "0" * 32, None)]

    return make


@contextmanager
def miss(way: Way, tmp_path: Path) -> Iterator[Target]:
    """A replaying Reel whose cassette holds nothing: every request is a miss."""
    cassette = tmp_path / "empty.jsonl"
    cassette.write_bytes(b"")
    with _through_reel(way, Mode.REPLAY, cassette, closed_port_url()) as target:
        yield target


class _Lazy:
    """A module imported at its first attribute (see :func:`framework`)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        if attribute == "_mock_name" or (attribute.startswith("__") and attribute.endswith("__")):
            # what collecting probes every name of a module for (``__test__``,
            # a mock's ``_mock_name``): not a reason to import
            raise AttributeError(attribute)
        return getattr(importlib.import_module(self._name), attribute)

    def __setattr__(self, attribute: str, value: Any) -> None:
        if attribute == "_name":
            super().__setattr__(attribute, value)
        else:
            setattr(importlib.import_module(self._name), attribute, value)

    def __delattr__(self, attribute: str) -> None:
        delattr(importlib.import_module(self._name), attribute)


def lazy(module: str) -> Any:
    """*module*, imported at the first use of one of its attributes."""
    return _Lazy(module)


#: The frameworks the collected test modules asked for (:func:`framework`).
FRAMEWORKS: set[str] = set()


def framework(name: str, reason: str) -> Any:
    """The framework *name*, imported at its first use (:func:`lazy`), not
    when the test module is collected; the test module is skipped with
    *reason* when *name* is not installed.

    Every xdist worker collects every test module, and importing the
    frameworks costs about 8 s of CPU a process (litellm alone 3.5 s): the
    workers that run none of their tests no longer pay for them.  A test
    module of a framework keeps it so: no framework name is used at its top
    level (decorators included: a tool is made in a cached function)."""
    if importlib.util.find_spec(name) is None:
        pytest.skip(reason, allow_module_level=True)
    FRAMEWORKS.add(name)
    return lazy(name)
