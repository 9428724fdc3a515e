"""The in-process gRPC channels (reel_bindings.grpc), sync and grpc.aio,
against a scripted grpcio server with raw-bytes handlers.

The invariant (docs/reliability.md, "A gRPC call replays as it was
recorded"): whatever a unary or server-streaming call ended with (its
messages, status code, details, initial and trailing metadata, ``-bin``
values included), the call recorded through the channel and the call
replayed from the cassette are what grpcio reported without Reel: a
hypothesis property over scripted calls, through both channels."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.bindings.grpc_server import STREAM, UNARY, UPLOAD, Script, ScriptedServer
from tests.secrets import GRPC_KEY, recoverable

grpc = pytest.importorskip("grpc", reason="the gRPC binding's tests need grpcio")

from reel_bindings.grpc import AioChannel, Channel, aio_channel, channel  # noqa: E402
from reel_core import MissError  # noqa: E402
from reel_core.tools import grpc_frame  # noqa: E402

T = TypeVar("T")

#: What a call reported: its messages, code, details, initial and trailing metadata.
Observed = tuple[
    tuple[bytes, ...], Any, str, tuple[tuple[str, Any], ...], tuple[tuple[str, Any], ...]
]


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


def _md(metadata: Any) -> tuple[tuple[str, Any], ...]:
    return tuple((m[0], m[1]) for m in metadata or ())


def observe(
    chan: Any, method: str, script: Script, metadata: Any = None, timeout: float | None = None
) -> Observed:
    """A call through a sync channel, as its caller sees it."""
    request = script.request()
    if method == UNARY:
        try:
            response, call = chan.unary_unary(UNARY).with_call(
                request, metadata=metadata, timeout=timeout
            )
        except grpc.RpcError as error:
            return (
                (),
                error.code(),
                error.details() or "",
                _md(error.trailing_metadata()),
                _md(error.initial_metadata()),
            )
        return (
            (response,),
            call.code(),
            call.details() or "",
            _md(call.trailing_metadata()),
            _md(call.initial_metadata()),
        )
    stream = chan.unary_stream(STREAM)(request, metadata=metadata, timeout=timeout)
    got = []
    try:
        for message in stream:
            got.append(message)
    except grpc.RpcError:
        pass
    return (
        tuple(got),
        stream.code(),
        stream.details() or "",
        _md(stream.trailing_metadata()),
        _md(stream.initial_metadata()),
    )


async def aobserve(
    chan: Any, method: str, script: Script, metadata: Any = None, timeout: float | None = None
) -> Observed:
    """A call through a grpc.aio channel, as its caller sees it."""
    request = script.request()
    got: list[bytes] = []
    if method == UNARY:
        call = chan.unary_unary(UNARY)(request, metadata=metadata, timeout=timeout)
        with contextlib.suppress(grpc.aio.AioRpcError):
            got.append(await call)
    else:
        call = chan.unary_stream(STREAM)(request, metadata=metadata, timeout=timeout)
        try:
            async for message in call:
                got.append(message)
        except grpc.aio.AioRpcError:
            pass
    return (
        tuple(got),
        await call.code(),
        (await call.details()) or "",
        _md(await call.trailing_metadata()),
        _md(await call.initial_metadata()),
    )


def sync_run(address: str, cassette: Path | None, run: Callable[[Any], T], **options: Any) -> T:
    """``run(channel)`` on a sync channel to ``address``, through Reel unless
    ``cassette`` is ``None``."""
    raw = grpc.insecure_channel(address)
    chan = raw if cassette is None else channel(raw, cassette, **options)
    try:
        return run(chan)
    finally:
        chan.close()


def aio_run(
    address: str, cassette: Path | None, run: Callable[[Any], Awaitable[T]], **options: Any
) -> T:
    """The same on a grpc.aio channel, in an asyncio loop of its own."""

    async def main() -> T:
        raw = grpc.aio.insecure_channel(address)
        chan = raw if cassette is None else aio_channel(raw, cassette, **options)
        try:
            return await run(chan)
        finally:
            await chan.close()

    return asyncio.run(main())


def both(
    kind: str, address: str, cassette: Path | None, method: str, script: Script, **options: Any
) -> Observed:
    if kind == "sync":
        return sync_run(address, cassette, lambda c: observe(c, method, script), **options)
    return aio_run(address, cassette, lambda c: aobserve(c, method, script), **options)


KINDS = ["sync", "aio"]
METHODS = [UNARY, STREAM]
GONE = "127.0.0.1:9"  # nothing listens: a replay that reached out would fail

# -- the invariant, over generated calls ---------------------------------------

_name = st.from_regex(r"[a-z0-9]{1,6}", fullmatch=True)
_text_value = st.from_regex(r"[!-~]([ -~]{0,10}[!-~])?", fullmatch=True)
_pair = st.one_of(
    st.tuples(_name.map(lambda n: f"x-{n}"), _text_value),
    st.tuples(_name.map(lambda n: f"x-{n}-bin"), st.binary(max_size=12)),
)
#: Every status a server may end a call with; UNAVAILABLE, DEADLINE_EXCEEDED
#: and CANCELLED before any answer are how grpcio reports a call that never
#: reached a server, and are not recorded (docs/grpc.md).
_codes = st.sampled_from([c.value[0] for c in grpc.StatusCode]).filter(
    lambda c: c not in (1, 4, 14)
)


@st.composite
def scripts(draw: st.DrawFn, method: str) -> Script:
    code = draw(st.one_of(st.just(0), _codes))
    most = 1 if method == UNARY else 4  # a unary call answers one message
    least = 1 if method == UNARY else 0
    messages = tuple(draw(st.lists(st.binary(max_size=40), min_size=least, max_size=most)))
    return Script(
        messages=messages,
        code=code,
        details=draw(st.text(max_size=20)) if code else "",
        initial=tuple(draw(st.lists(_pair, max_size=3))),
        trailing=tuple(draw(st.lists(_pair, max_size=3))),
    )


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("method", METHODS)
def test_a_call_replays_as_it_was_recorded(
    kind: str, method: str, server: ScriptedServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp("grpc-property")

    @settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(script=scripts(method))
    @example(script=Script(messages=(b"",), code=2, details="  padded  "))  # a header strips spaces
    @example(script=Script(messages=(b"",), code=13, details="caf\u00e9 100% \x00\n"))
    def check(script: Script) -> None:
        cassette = root / f"{uuid.uuid4().hex}.jsonl"
        bare = both(kind, server.address, None, method, script)
        recorded = both(kind, server.address, cassette, method, script, mode="record")
        replayed = both(kind, GONE, cassette, method, script, mode="replay", timing="fast")
        assert replayed == recorded
        # grpcio itself reports initial metadata sent with no message now and
        # then, not always (bare calls differ run to run): not Reel's doing
        compared = 5 if recorded[0] else 4
        assert recorded[:compared] == bare[:compared]

    check()


# -- the cassette's shape: the proxy's ------------------------------------------


def test_a_call_is_written_as_the_proxy_writes_it(server: ScriptedServer, tmp_path: Path) -> None:
    cassette = tmp_path / "shape.jsonl"
    script = Script(
        messages=(b"one", b"two"), trailing=(("x-t", "v"), ("x-b-bin", b"\x00\xff")), code=0
    )
    sync_run(server.address, cassette, lambda c: observe(c, STREAM, script), mode="record")
    (line,) = [json.loads(x) for x in cassette.read_text().splitlines()[1:]]
    assert line["request"]["method"] == "POST"
    assert line["request"]["path"] == STREAM
    response = line["response"]
    assert response["status"] == 200
    assert response["stream"] == "grpc"
    assert ["content-type", "application/grpc"] in response["headers"]
    frames = [base64.b64decode(frame[1]["base64"]) for frame in response["frames"]]
    assert frames == [grpc_frame(b"one"), grpc_frame(b"two")]
    assert response["trailers"] == [["grpc-status", "0"], ["x-t", "v"], ["x-b-bin", "AP8"]]


# -- a recording grpcio could not have made -------------------------------------


def _frame_b64(data: bytes) -> dict[str, str]:
    return {"base64": base64.b64encode(data).decode("ascii")}


def _no_status(response: dict[str, Any]) -> None:
    del response["trailers"]


def _bad_status(response: dict[str, Any]) -> None:
    response["trailers"] = [["grpc-status", "x"]]


def _compressed(response: dict[str, Any]) -> None:
    response["frames"][0][1] = _frame_b64(b"\x01" + grpc_frame(b"one")[1:])


def _truncated(response: dict[str, Any]) -> None:
    response["frames"][-1][1] = _frame_b64(grpc_frame(b"two")[:-1])


def _cut(response: dict[str, Any]) -> None:
    response["cut"] = {"at": response.pop("end")["at"], "error": "reset", "detail": "boom"}
    del response["trailers"]


def _gateway_error(response: dict[str, Any]) -> None:
    response.clear()
    response.update(
        status=503,
        headers=[["content-type", "application/json"]],
        body={"text": json.dumps({"error": {"message": "overloaded"}})},
    )


#: A recorded stream, changed; the status and details it replays as.
BROKEN = {
    "no status": (_no_status, grpc.StatusCode.UNKNOWN, "the recorded call has no grpc-status"),
    "bad status": (_bad_status, grpc.StatusCode.UNKNOWN, "the recorded call has grpc-status"),
    "compressed": (
        _compressed,
        grpc.StatusCode.INTERNAL,
        "message 1 of the recorded call is compressed",
    ),
    "truncated": (_truncated, grpc.StatusCode.INTERNAL, "ends inside a message"),
    "cut": (_cut, grpc.StatusCode.UNAVAILABLE, "the recorded call broke off (reset: boom)"),
    "gateway": (_gateway_error, grpc.StatusCode.UNAVAILABLE, "HTTP 503: overloaded"),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_a_recording_grpcio_could_not_read_replays_as_a_clear_error(
    kind: str, broken: str, server: ScriptedServer, tmp_path: Path
) -> None:
    """Never a wrong answer: a recorded stream with no status, a bad one, a
    compressed or unfinished message, a cut, a gateway's HTTP error replays
    as the gRPC error saying so."""
    change, code, details = BROKEN[broken]
    cassette = tmp_path / "broken.jsonl"
    script = Script(messages=(b"one", b"two"))
    both(kind, server.address, cassette, STREAM, script, mode="record")
    meta, line = cassette.read_text().splitlines()
    recorded = json.loads(line)
    change(recorded["response"])
    cassette.write_text(meta + "\n" + json.dumps(recorded) + "\n")
    got = both(kind, GONE, cassette, STREAM, script, mode="replay", timing="fast")
    assert got[1] is code
    assert details in got[2]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("count", [0, 2])
def test_a_unary_recording_without_one_message_is_an_error(
    kind: str, count: int, server: ScriptedServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "count.jsonl"
    script = Script(messages=(b"only",))
    both(kind, server.address, cassette, UNARY, script, mode="record")
    meta, line = cassette.read_text().splitlines()
    recorded = json.loads(line)
    recorded["response"]["frames"] = recorded["response"]["frames"] * count
    cassette.write_text(meta + "\n" + json.dumps(recorded) + "\n")
    got = both(kind, GONE, cassette, UNARY, script, mode="replay")
    assert got[:2] == ((), grpc.StatusCode.INTERNAL)
    assert f"has {count} messages, not 1" in got[2]


# -- server streams on their schedule ------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_server_stream_replays_at_its_recorded_offsets(
    kind: str, server: ScriptedServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "timed.jsonl"
    script = Script(messages=(b"a", b"b", b"c"), gap=0.08)
    both(kind, server.address, cassette, STREAM, script, mode="record")

    def timed_sync(chan: Any) -> list[float]:
        start = time.monotonic()
        return [time.monotonic() - start for _ in chan.unary_stream(STREAM)(script.request())]

    async def timed_aio(chan: Any) -> list[float]:
        start = time.monotonic()
        return [time.monotonic() - start async for _ in chan.unary_stream(STREAM)(script.request())]

    if kind == "sync":
        offsets = sync_run(GONE, cassette, timed_sync, mode="replay")
    else:
        offsets = aio_run(GONE, cassette, timed_aio, mode="replay")
    (line,) = [json.loads(x) for x in cassette.read_text().splitlines()[1:]]
    recorded = [at / 1000 for at, _ in line["response"]["frames"]]
    assert recorded[2] - recorded[0] >= script.gap  # recorded gaps (arrivals may bunch)
    # a sleep never ends early: each message no sooner than its recorded offset
    # (measured from before the call; a loaded machine only makes them later)
    assert len(offsets) == 3
    assert all(got >= due for got, due in zip(offsets, recorded, strict=True))


@pytest.mark.parametrize("kind", KINDS)
def test_a_deadline_ends_a_replay_where_it_would_end_the_call(
    kind: str, server: ScriptedServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "deadline.jsonl"
    script = Script(messages=(b"a", b"b", b"c"), gap=0.5, tag="deadline")
    both(kind, server.address, cassette, STREAM, script, mode="record")

    def run_sync(chan: Any) -> Observed:
        return observe(chan, STREAM, script, timeout=0.75)

    async def run_aio(chan: Any) -> Observed:
        return await aobserve(chan, STREAM, script, timeout=0.75)

    if kind == "sync":
        bare = sync_run(server.address, None, run_sync)
        got = sync_run(GONE, cassette, run_sync, mode="replay")
        fast = sync_run(GONE, cassette, run_sync, mode="replay", timing="fast")
    else:
        bare = aio_run(server.address, None, run_aio)
        got = aio_run(GONE, cassette, run_aio, mode="replay")
        fast = aio_run(GONE, cassette, run_aio, mode="replay", timing="fast")
    assert got[:3] == ((b"a", b"b"), grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
    assert bare[:2] == got[:2]  # as the call itself ends (grpcio words its details its own way)
    assert fast[:2] == ((b"a", b"b", b"c"), grpc.StatusCode.OK)  # nothing waits: all in time


# -- misses --------------------------------------------------------------------


def line_id(cassette: Path) -> str:
    """The id of the cassette's one recording."""
    (line,) = cassette.read_text().splitlines()[1:]
    ident: str = json.loads(line)["id"]
    return ident


def test_a_miss_is_not_found_with_the_report_in_details(
    server: ScriptedServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "miss.jsonl"
    both(
        "sync",
        server.address,
        cassette,
        UNARY,
        Script(messages=(b"r",), tag="recorded"),
        mode="record",
    )
    chan = channel(grpc.insecure_channel(GONE), cassette, mode="replay")
    with pytest.raises(grpc.RpcError) as raised:
        chan.unary_unary(UNARY)(Script(messages=(b"r",), tag="other").request())
    error = raised.value
    assert error.code() is grpc.StatusCode.NOT_FOUND
    details = error.details()
    assert details.startswith("Reel miss: ")
    assert "closest recording" in details
    assert f"closest: {line_id(cassette)} POST {UNARY}" in details
    assert "to record it: run again with REEL_MODE=auto" in details
    (report,) = chan.misses
    assert report.path == UNARY
    assert chan.player.runlog.misses.total == 1
    chan.close()


def test_a_strict_channel_raises_the_miss(tmp_path: Path) -> None:
    cassette = tmp_path / "strict.jsonl"
    cassette.write_text('{"_meta":{"schema":3}}\n')
    chan = channel(grpc.insecure_channel(GONE), cassette, mode="replay", strict=True)
    with pytest.raises(MissError, match="no recording matches"):
        chan.unary_unary(UNARY)(b"anything")
    chan.close()


def test_an_aio_miss_is_an_aio_rpc_error(tmp_path: Path) -> None:
    cassette = tmp_path / "amiss.jsonl"
    cassette.write_text('{"_meta":{"schema":3}}\n')

    async def run(chan: Any) -> Any:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await chan.unary_unary(UNARY)(b"anything")
        with pytest.raises(grpc.aio.AioRpcError) as streamed:
            async for _ in chan.unary_stream(STREAM)(b"anything"):
                pass
        assert streamed.value.code() is grpc.StatusCode.NOT_FOUND
        return raised.value, len(chan.misses)

    error, misses = aio_run(GONE, cassette, run, mode="replay")
    assert error.code() is grpc.StatusCode.NOT_FOUND
    assert "cassette has no recordings" in error.details()
    assert misses == 2


# -- modes ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_the_modes(kind: str, tmp_path: Path) -> None:
    with ScriptedServer() as own:
        cassette = tmp_path / "modes.jsonl"
        script = Script(messages=(b"m",), tag=kind)
        first = both(kind, own.address, cassette, UNARY, script, mode="auto")
        assert own.calls["Unary"] == 1  # auto: missing, so recorded
        again = both(kind, own.address, cassette, UNARY, script, mode="auto")
        assert own.calls["Unary"] == 1  # auto: recorded, so replayed
        assert again == first
        lines = cassette.read_text().splitlines()
        live = both(kind, own.address, cassette, UNARY, script, mode="live")
        assert own.calls["Unary"] == 2
        assert live == first
        assert cassette.read_text().splitlines() == lines  # live writes nothing
        both(kind, own.address, cassette, UNARY, script, mode="record")
        assert own.calls["Unary"] == 3
        assert len(cassette.read_text().splitlines()) == 2  # record: afresh
    assert both(kind, GONE, cassette, UNARY, script, mode="replay") == first


def test_the_mode_comes_from_reel_mode(
    server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cassette = tmp_path / "env.jsonl"
    monkeypatch.setenv("REEL_MODE", "record")
    before = server.calls["Unary"]
    both("sync", server.address, cassette, UNARY, Script(tag="env"))
    assert server.calls["Unary"] == before + 1
    assert len(cassette.read_text().splitlines()) == 2


def test_a_call_that_never_reached_a_server_is_not_recorded(tmp_path: Path) -> None:
    cassette = tmp_path / "down.jsonl"
    got = both("sync", GONE, cassette, UNARY, Script(tag="down"), mode="record")
    assert got[1] is grpc.StatusCode.UNAVAILABLE
    assert len(cassette.read_text().splitlines()) == 1  # the _meta line alone


def test_client_streaming_passes_through_in_live_mode(
    server: ScriptedServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "live-upload.jsonl"

    def run(chan: Any) -> Any:
        return chan.stream_unary(UPLOAD)(iter([b"a", b"b"]))

    async def arun(chan: Any) -> Any:
        return await chan.stream_unary(UPLOAD)(iter([b"a", b"b"]))

    assert sync_run(server.address, cassette, run, mode="live") == b"a+b"
    assert aio_run(server.address, cassette, arun, mode="live") == b"a+b"


def test_upstream_is_refused() -> None:
    with pytest.raises(TypeError, match="forwards through the channel it wraps"):
        Channel(object(), "never.jsonl", upstream="https://api.x.ai")
    with pytest.raises(TypeError, match="forwards through the channel it wraps"):
        AioChannel(object(), "never.jsonl", upstream="https://api.x.ai")


# -- no secret on disk ---------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("method", METHODS)
def test_no_credential_reaches_the_cassette(
    kind: str, method: str, server: ScriptedServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "secret.jsonl"
    metadata = (
        ("authorization", f"Bearer {GRPC_KEY}"),
        ("x-api-key", GRPC_KEY),
    )
    # the key in the request message, echoed in the answer's messages,
    # initial and trailing metadata (as it is and as -bin bytes) and details
    echoed = Script(
        messages=(f"you sent {GRPC_KEY}".encode(), GRPC_KEY.encode()[::-1] + GRPC_KEY.encode()),
        initial=(("x-echo", GRPC_KEY),),
        trailing=(("x-echo-bin", GRPC_KEY.encode()), ("x-seen", f"key={GRPC_KEY}")),
        code=3 if method == UNARY else 0,
        details=f"bad key {GRPC_KEY}" if method == UNARY else "",
        tag=GRPC_KEY,
    )

    def run_sync(chan: Any) -> Observed:
        return observe(chan, method, echoed, metadata)

    async def run_aio(chan: Any) -> Observed:
        return await aobserve(chan, method, echoed, metadata)

    def run(address: str, **options: Any) -> Observed:
        if kind == "sync":
            return sync_run(address, cassette, run_sync, **options)
        return aio_run(address, cassette, run_aio, **options)

    live = run(server.address, mode="record")
    assert ("authorization", f"Bearer {GRPC_KEY}") in server.metadata[-1]  # sent upstream
    written = cassette.read_bytes()
    assert recoverable(GRPC_KEY, written) == []
    # and the call still replays (its key is matched redacted)
    replayed = run(GONE, mode="replay", timing="fast")
    assert replayed[1] == live[1]


# -- sharing a channel ---------------------------------------------------------


def test_threads_share_a_channel(server: ScriptedServer, tmp_path: Path) -> None:
    cassette = tmp_path / "threads.jsonl"
    scripts_ = [Script(messages=(f"m{i}".encode(), b"x"), tag=str(i)) for i in range(12)]

    def hammer(chan: Any) -> dict[int, Observed]:
        results: dict[int, Observed] = {}

        def work(start: int) -> None:
            for i in range(start, len(scripts_), 4):
                results[i] = observe(chan, STREAM, scripts_[i])

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return results

    recorded = sync_run(server.address, cassette, hammer, mode="record")
    assert len(cassette.read_text().splitlines()) == 1 + len(scripts_)
    replayed = sync_run(GONE, cassette, hammer, mode="replay", timing="fast")
    assert replayed == recorded
    assert [recorded[i][0] for i in range(len(scripts_))] == [s.messages for s in scripts_]


def test_tasks_share_an_aio_channel(server: ScriptedServer, tmp_path: Path) -> None:
    cassette = tmp_path / "tasks.jsonl"
    scripts_ = [Script(messages=(f"m{i}".encode(), b"y"), gap=0.01, tag=str(i)) for i in range(12)]

    async def gather(chan: Any) -> list[Observed]:
        return list(await asyncio.gather(*(aobserve(chan, STREAM, s) for s in scripts_)))

    recorded = aio_run(server.address, cassette, gather, mode="record")
    replayed = aio_run(GONE, cassette, gather, mode="replay")
    assert replayed == recorded
    assert [r[0] for r in recorded] == [s.messages for s in scripts_]


# -- without grpcio ------------------------------------------------------------


def test_without_grpcio_the_error_says_what_to_install() -> None:
    code = (
        "import sys; sys.modules['grpc'] = None\n"
        "try:\n"
        "    import reel_bindings.grpc\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    src = Path(__file__).resolve().parents[2] / "src"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(src)},
    ).stdout
    assert "pip install 'reel-llm[grpc]'" in out
