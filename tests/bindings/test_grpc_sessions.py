"""Client-streaming and bidirectional gRPC calls in process
(reel_bindings.grpc), sync and grpc.aio, against the scripted server's
``Chat`` (bidirectional, each client message says what the server answers)
and ``Upload`` (client-streaming): recorded as sessions, replayed gated by
the caller's messages.

The invariant (docs/reliability.md, "A gRPC session replays in process as
it was recorded"): whatever a streaming call gave its caller (its messages,
status code and details), the call replayed from the cassette with the
server gone gives it exactly, whoever spoke when, however many messages
each side sent, whether the client ended early or the server ended first
with an error; a client message the recording does not have ends the call
``NOT_FOUND`` after exactly the answers recorded before it.  One format:
what the proxy's HTTP/2 adapter recorded replays in process, and the
other way round."""

from __future__ import annotations

import asyncio
import base64
import json
import queue
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.bindings.grpc_server import CHAT, UPLOAD, ScriptedServer, Turn
from tests.secrets import GRPC_KEY, recoverable

grpc = pytest.importorskip("grpc", reason="the gRPC binding's tests need grpcio")
pytest.importorskip("h2", reason="the proxy's path (the HTTP/2 adapter) needs h2")

from reel_bindings.grpc import aio_channel, channel  # noqa: E402
from reel_core import Cassette, MissError, Verdict  # noqa: E402
from reel_core.tools import grpc_frame  # noqa: E402
from tests.core.test_h2_grpc_session import (  # noqa: E402
    frames_of,
    record_through_h2,
    replaying,
    send,
)

KINDS = ["sync", "aio"]
GONE = "127.0.0.1:9"  # nothing listens: a replay that reached out would fail
#: How long a lock-step client waits for an answer that may never come.
PATIENCE = 5.0

#: What a call gave its caller: its messages, status code and details.
Observed = tuple[tuple[bytes, ...], Any, str]


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


class _Pace:
    """A lock-step client's pace: message ``i`` waits until the answers
    to the turns before it came (or the call ended)."""

    def __init__(self, turns: list[Turn]) -> None:
        self._due = [sum(len(t.reply) for t in turns[:i]) for i in range(len(turns) + 1)]
        self._got = 0
        self._over = False
        self._changed = threading.Condition()

    def wait(self, i: int) -> None:
        with self._changed:
            self._changed.wait_for(lambda: self._over or self._got >= self._due[i], PATIENCE)

    def got(self) -> None:
        with self._changed:
            self._got += 1
            self._changed.notify_all()

    def over(self) -> None:
        with self._changed:
            self._over = True
            self._changed.notify_all()


def _messages(turns: list[Turn], spoil: dict[int, bytes]) -> list[bytes]:
    return [spoil.get(i, t.message()) for i, t in enumerate(turns)]


def converse(
    chan: Any,
    turns: list[Turn],
    *,
    lockstep: bool = False,
    spoil: dict[int, bytes] | None = None,
    timeout: float | None = None,
) -> Observed:
    """A bidirectional call through a sync channel, as its caller sees it
    (``spoil``: client messages sent in place of the turns')."""
    sent = _messages(turns, spoil or {})
    pace = _Pace(turns)

    def requests() -> Iterator[bytes]:
        for i, message in enumerate(sent):
            if lockstep:
                pace.wait(i)
            yield message
        if lockstep:  # the answers to the last message, then the end
            pace.wait(len(sent))

    call = chan.stream_stream(CHAT)(requests(), timeout=timeout)
    got = []
    try:
        for message in call:
            got.append(message)
            pace.got()
    except grpc.RpcError:
        pass
    finally:
        pace.over()
    return tuple(got), call.code(), call.details() or ""


async def aconverse(
    chan: Any, turns: list[Turn], *, style: str = "iterator", spoil: dict[int, bytes] | None = None
) -> Observed:
    """The same through a grpc.aio channel: the messages from an async
    iterator, or written one turn at a time, each turn's answers read
    before the next is written (``style="write"``)."""
    sent = _messages(turns, spoil or {})
    got: list[bytes] = []
    if style == "iterator":

        async def requests() -> AsyncIterator[bytes]:
            for message in sent:
                yield message

        call = chan.stream_stream(CHAT)(requests())
        try:
            async for message in call:
                got.append(message)
        except grpc.aio.AioRpcError:
            pass
        return tuple(got), await call.code(), (await call.details()) or ""
    call = chan.stream_stream(CHAT)()
    try:
        for turn, message in zip(turns, sent, strict=True):
            await call.write(message)
            for _ in turn.reply:
                answer = await call.read()
                if answer is grpc.aio.EOF:
                    break
                got.append(answer)
        await call.done_writing()
        while (answer := await call.read()) is not grpc.aio.EOF:
            got.append(answer)
    except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
        pass  # the call ended (the server first, or a miss)
    return tuple(got), await call.code(), (await call.details()) or ""


def sync_run(address: str, cassette: Path | None, run: Any, **options: Any) -> Any:
    raw = grpc.insecure_channel(address)
    chan = raw if cassette is None else channel(raw, cassette, **options)
    try:
        return run(chan)
    finally:
        chan.close()


def aio_run(address: str, cassette: Path | None, run: Any, **options: Any) -> Any:
    async def main() -> Any:
        raw = grpc.aio.insecure_channel(address)
        chan = raw if cassette is None else aio_channel(raw, cassette, **options)
        try:
            return await run(chan)
        finally:
            await chan.close()

    return asyncio.run(main())


def both(
    kind: str,
    address: str,
    cassette: Path | None,
    turns: list[Turn],
    *,
    lockstep: bool = False,
    spoil: dict[int, bytes] | None = None,
    **options: Any,
) -> Observed:
    if kind == "sync":
        observed: Observed = sync_run(
            address,
            cassette,
            lambda c: converse(c, turns, lockstep=lockstep, spoil=spoil),
            **options,
        )
        return observed
    style = "write" if lockstep else "iterator"
    return aio_run(  # type: ignore[no-any-return]
        address, cassette, lambda c: aconverse(c, turns, style=style, spoil=spoil), **options
    )


def session_log(cassette: Path, index: int = 0) -> list[dict[str, Any]]:
    """The conversation of the cassette's ``index``-th recording."""
    line = json.loads(cassette.read_text().splitlines()[1 + index])
    assert line["response"]["stream"] == "grpc-session"
    entries: list[dict[str, Any]] = line["grpc"]["messages"]
    return entries


# -- the invariant, over generated conversations ---------------------------------

#: Every status a server may end a call with; UNAVAILABLE, DEADLINE_EXCEEDED
#: and CANCELLED before any answer are how grpcio reports a call that never
#: reached a server, and are not recorded (docs/grpc.md).
_codes = st.sampled_from([c.value[0] for c in grpc.StatusCode]).filter(
    lambda c: c not in (1, 4, 14)
)
_status = st.tuples(st.one_of(st.just(0), _codes), st.text(max_size=12))
_replies = st.lists(st.binary(max_size=20), max_size=3).map(tuple)


@st.composite
def conversations(draw: st.DrawFn) -> list[Turn]:
    """A conversation: how many messages the client sends (none: it ends
    at once), what the server answers to each, whether it ends the call
    at one of them (an error status, or OK), what it sends after the
    client's end and how it ends then."""
    count = draw(st.integers(0, 4))
    stop_at = draw(st.one_of(st.none(), st.integers(0, max(count - 1, 0))))
    code, details = draw(_status)
    turns = []
    for i in range(count):
        stop = draw(_status) if i == stop_at else None
        if i == 0:
            turns.append(Turn(draw(_replies), stop, draw(_replies), code, details, tag=f"t{i}"))
        else:
            turns.append(Turn(draw(_replies), stop, tag=f"t{i}"))
    return turns


@pytest.mark.parametrize("kind", KINDS)
def test_a_session_replays_as_it_was_recorded(
    kind: str, server: ScriptedServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp("grpc-sessions")

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(turns=conversations(), lockstep=st.booleans())
    @example(turns=[], lockstep=False)  # the client ends at once
    @example(turns=[Turn((b"a",), (9, "no more"))], lockstep=True)  # the server ends first
    @example(turns=[Turn((b"a",), final=(b"z",)), Turn((b"b", b"c"))], lockstep=True)
    def check(turns: list[Turn], lockstep: bool) -> None:
        cassette = root / f"{uuid.uuid4().hex}.jsonl"
        bare = both(kind, server.address, None, turns, lockstep=lockstep)
        recorded = both(kind, server.address, cassette, turns, lockstep=lockstep, mode="record")
        replayed = both(
            kind, GONE, cassette, turns, lockstep=lockstep, mode="replay", timing="fast"
        )
        assert replayed == recorded
        assert recorded[0] == bare[0]
        # a client still writing when the server ended the call may end it
        # INTERNAL ("Internal error from Core") now and then, bare grpcio
        # too: not Reel's doing, and recorded (so replayed) as it came
        if not any(turn.stop for turn in turns):
            assert recorded == bare

    check()


@pytest.mark.parametrize("kind", KINDS)
def test_a_client_stream_records_and_replays(
    kind: str, server: ScriptedServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "upload.jsonl"

    def run(chan: Any) -> Any:
        answer, call = chan.stream_unary(UPLOAD).with_call(iter([b"a", b"b", b"c"]))
        return answer, call.code()

    async def arun(chan: Any) -> Any:
        call = chan.stream_unary(UPLOAD)(iter([b"a", b"b", b"c"]))
        return await call, await call.code()

    go = sync_run if kind == "sync" else aio_run
    work = run if kind == "sync" else arun
    before = server.calls["Upload"]
    assert go(server.address, cassette, work, mode="record") == (b"a+b+c", grpc.StatusCode.OK)
    assert [e["from"] for e in session_log(cassette)][-2:] == ["server", "server"]
    assert go(GONE, cassette, work, mode="replay") == (b"a+b+c", grpc.StatusCode.OK)
    assert go(server.address, cassette, work, mode="auto") == (b"a+b+c", grpc.StatusCode.OK)
    assert server.calls["Upload"] == before + 1  # auto: replayed


# -- a changed client message ------------------------------------------------------

CHATTY = [
    Turn((b"one",), final=(b"bye",), tag="a"),
    Turn((b"two", b"three"), tag="b"),
    Turn((), tag="c"),
    Turn((b"four",), tag="d"),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_changed_message_is_not_found_after_the_answers_recorded_before_it(
    kind: str, k: int, server: ScriptedServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "chat.jsonl"
    both(kind, server.address, cassette, CHATTY, lockstep=True, mode="record")
    log = session_log(cassette)
    client = [i for i, e in enumerate(log) if e["from"] == "client" and not e.get("end")]
    before = [e for e in log[: client[k]] if e["from"] == "server" and not e.get("end")]
    spoil = {k: Turn((b"other",), tag="spoiled").message()}
    if kind == "sync":
        chan = channel(grpc.insecure_channel(GONE), cassette, mode="replay", timing="fast")
        got = converse(chan, CHATTY, lockstep=True, spoil=spoil)
        misses, counts = chan.misses, dict(chan.player.runlog.counts)
        chan.close()
    else:

        async def run(chan: Any) -> Any:
            got = await aconverse(chan, CHATTY, style="write", spoil=spoil)
            return got, chan.misses, dict(chan.player.runlog.counts)

        got, misses, counts = aio_run(GONE, cassette, run, mode="replay", timing="fast")
    assert got[0] == tuple(_message(e) for e in before)
    assert got[1] is grpc.StatusCode.NOT_FOUND
    assert got[2].startswith("Reel miss: ")
    assert f"client message {k} (grpc.messages[{client[k]}]) does not match" in got[2]
    (report,) = misses  # in the run log, as every miss (the pytest plugin reads it)
    assert report.path == CHAT
    # the session counts as a miss, not a hit (as the proxy and WebSocket sessions count it)
    assert (counts[Verdict.HIT], counts[Verdict.MISS]) == (0, 1)


def _message(entry: dict[str, Any]) -> bytes:
    """A logged message, without its prefix."""
    return base64.b64decode(entry["base64"])[5:]


@pytest.mark.parametrize("kind", KINDS)
def test_more_or_fewer_messages_than_recorded_are_not_found(
    kind: str, server: ScriptedServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "count.jsonl"
    both(kind, server.address, cassette, CHATTY[:2], lockstep=True, mode="record")
    fewer = both(kind, GONE, cassette, CHATTY[:1], lockstep=True, mode="replay")
    assert fewer[1] is grpc.StatusCode.NOT_FOUND
    assert "the client ended its stream after 1 of the 2 messages" in fewer[2]
    more = both(kind, GONE, cassette, CHATTY[:3], lockstep=True, mode="replay")
    assert more[0] == (b"one", b"two", b"three")
    assert more[1] is grpc.StatusCode.NOT_FOUND
    assert "client message 2 is one more than the recording holds" in more[2]


def test_a_strict_channel_raises_a_session_miss(server: ScriptedServer, tmp_path: Path) -> None:
    cassette = tmp_path / "strict.jsonl"
    both("sync", server.address, cassette, CHATTY, lockstep=True, mode="record")
    chan = channel(grpc.insecure_channel(GONE), cassette, mode="replay", strict=True)
    with pytest.raises(MissError, match="does not match the recording"):
        list(chan.stream_stream(CHAT)(iter(_messages(CHATTY, {1: b"x"}))))
    chan.close()


# -- bidirectional callers that wait on answers ------------------------------------


def test_a_replayed_bidi_call_answers_before_the_client_ends(
    server: ScriptedServer, tmp_path: Path
) -> None:
    """The caller's iterator is read in a thread of the call's own: one
    that waits for each answer before it sends on is answered (never
    asked to finish first)."""
    cassette = tmp_path / "lockstep.jsonl"
    recorded = both("sync", server.address, cassette, CHATTY, lockstep=True, mode="record")
    answers: list[bytes] = []
    asked = threading.Event()

    def requests() -> Iterator[bytes]:
        yield CHATTY[0].message()
        asked.set()
        # the first answer comes while this iterator is still running
        deadline = time.monotonic() + PATIENCE
        while not answers and time.monotonic() < deadline:
            time.sleep(0.005)
        assert answers == [b"one"]
        for turn in CHATTY[1:]:
            yield turn.message()

    chan = channel(grpc.insecure_channel(GONE), cassette, mode="replay", timing="fast")
    call = chan.stream_stream(CHAT)(requests())
    for message in call:
        answers.append(message)
    assert asked.is_set()
    assert tuple(answers) == recorded[0]
    assert call.code() is grpc.StatusCode.OK
    chan.close()


def test_a_failing_request_iterator_ends_the_call(tmp_path: Path, server: ScriptedServer) -> None:
    cassette = tmp_path / "failing.jsonl"
    both("sync", server.address, cassette, CHATTY, lockstep=True, mode="record")

    def requests() -> Iterator[bytes]:
        yield CHATTY[0].message()
        raise RuntimeError("the caller's own bug")

    chan = channel(grpc.insecure_channel(GONE), cassette, mode="replay", timing="fast")
    call = chan.stream_stream(CHAT)(requests())
    with pytest.raises(grpc.RpcError):
        list(call)
    assert call.code() is grpc.StatusCode.UNKNOWN
    assert call.details() == "Exception iterating requests!"
    chan.close()


# -- timing --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_realtime_keeps_the_servers_gaps_and_fast_drops_them(
    kind: str, server: ScriptedServer, tmp_path: Path
) -> None:
    """No wall-clock bound: the realtime replay takes about what the
    recording did (the server's thinking gaps kept), the fast one a small
    share of it."""
    cassette = tmp_path / "timed.jsonl"
    turns = [Turn((b"a",), gap=0.2, tag="t"), Turn((b"b",), gap=0.2), Turn((b"c",), gap=0.2)]
    both(kind, server.address, cassette, turns, lockstep=True, mode="record")
    log = session_log(cassette)
    recorded = (log[-1]["at"] - log[0]["at"]) / 1000
    assert recorded >= 0.6  # three gaps of the server's

    def timed(timing: str) -> float:
        best = float("inf")
        for _ in range(2):  # best of two: the machine is loaded
            start = time.monotonic()
            got = both(kind, GONE, cassette, turns, lockstep=True, mode="replay", timing=timing)
            best = min(best, time.monotonic() - start)
            assert got[:2] == ((b"a", b"b", b"c"), grpc.StatusCode.OK)
        return best

    realtime, fast = timed("realtime"), timed("fast")
    assert realtime >= 0.9 * recorded  # a deadline is never early (each gap is kept)
    assert realtime < 4 * recorded  # nor the gaps stretched (a loose ratio: a loaded machine)
    assert fast < 0.5 * realtime


@pytest.mark.parametrize("kind", KINDS)
def test_a_deadline_ends_a_replayed_session(
    kind: str, server: ScriptedServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "deadline.jsonl"
    turns = [Turn((b"a",), tag="t"), Turn((b"b",), gap=0.6)]
    both(kind, server.address, cassette, turns, lockstep=True, mode="record")
    if kind == "sync":
        chan = channel(grpc.insecure_channel(GONE), cassette, mode="replay")
        got = converse(chan, turns, lockstep=True, timeout=0.3)
        chan.close()
    else:

        async def run(chan: Any) -> Observed:
            call = chan.stream_stream(CHAT)(iter([t.message() for t in turns]), timeout=0.3)
            got: list[bytes] = []
            try:
                async for message in call:
                    got.append(message)
            except grpc.aio.AioRpcError:
                pass
            return tuple(got), await call.code(), await call.details()

        got = aio_run(GONE, cassette, run, mode="replay")
    assert got == ((b"a",), grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")


# -- secrets ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_key_inside_a_client_message_is_scrubbed_and_still_matches(
    kind: str, server: ScriptedServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "secret.jsonl"
    metadata = (("authorization", f"Bearer {GRPC_KEY}"),)
    turns = [
        Turn((f"hello {GRPC_KEY}".encode(),), tag=f"key={GRPC_KEY}"),
        Turn((b"ok",), tag=f"again {GRPC_KEY}"),
    ]

    def run(chan: Any) -> Observed:
        call = chan.stream_stream(CHAT)(iter([t.message() for t in turns]), metadata=metadata)
        return tuple(call), call.code(), call.details() or ""

    async def arun(chan: Any) -> Observed:
        call = chan.stream_stream(CHAT)(iter([t.message() for t in turns]), metadata=metadata)
        return tuple([m async for m in call]), await call.code(), await call.details()

    go = sync_run if kind == "sync" else aio_run
    work = run if kind == "sync" else arun
    recorded = go(server.address, cassette, work, mode="record")
    assert recorded[0] == (f"hello {GRPC_KEY}".encode(), b"ok")
    written = cassette.read_bytes()
    assert recoverable(GRPC_KEY, written) == []
    assert len(session_log(cassette)) >= 4  # a session: its messages, scrubbed
    replayed = go(GONE, cassette, work, mode="replay", timing="fast")
    assert replayed[1] is grpc.StatusCode.OK  # the key is matched scrubbed: no miss
    assert len(replayed[0]) == 2


# -- unary calls the core's rule plays as sessions --------------------------------------


def test_a_unary_call_to_a_session_path_plays_as_a_session(
    server: ScriptedServer, tmp_path: Path
) -> None:
    """The decision is the core's (``Engine.streams_call``): a unary call to
    a path recorded as sessions plays as one; one message and its end
    where the recording has more is NOT_FOUND, not an answer."""
    cassette = tmp_path / "unary.jsonl"
    two = [Turn((b"x",), tag="b0"), Turn((b"y",), tag="b1")]
    both("sync", server.address, cassette, CHATTY[:1], lockstep=True, mode="record")
    both("sync", server.address, cassette, two, lockstep=True, mode="auto")
    assert len(session_log(cassette, 0)) == 5  # one message, its answer, the end, bye, the end
    assert len(session_log(cassette, 1)) == 6  # two messages, two answers, the ends
    chan = channel(grpc.insecure_channel(GONE), cassette, mode="replay", timing="fast")
    call = chan.unary_stream(CHAT)(CHATTY[0].message())
    got = list(call)
    assert call.code() is grpc.StatusCode.OK
    assert got == [b"one", b"bye"]
    with pytest.raises(grpc.RpcError) as raised:
        list(chan.unary_stream(CHAT)(two[0].message()))
    assert raised.value.code() is grpc.StatusCode.NOT_FOUND
    assert "ended its stream after 1 of the 2 messages" in raised.value.details()
    assert len(chan.misses) == 1
    chan.close()


# -- one format: the proxy's HTTP/2 adapter and the in-process channel ------------------

TALK = "/pkg.Chat/Talk"


@pytest.mark.parametrize("kind", KINDS)
def test_what_the_h2_session_recorded_replays_in_process(kind: str, tmp_path: Path) -> None:
    memory = Cassette("c.jsonl")
    record_through_h2(memory, [b"1", b"2", b"3"], [b"a", b"b", b"c"], bidi=True)
    cassette = tmp_path / "h2.jsonl"
    cassette.write_bytes(memory.dumps())

    def run(chan: Any) -> Observed:
        call = chan.stream_stream(TALK)(iter([b"1", b"2", b"3"]))
        return tuple(call), call.code(), call.details() or ""

    async def arun(chan: Any) -> Observed:
        call = chan.stream_stream(TALK)(iter([b"1", b"2", b"3"]))
        return tuple([m async for m in call]), await call.code(), await call.details()

    go = sync_run if kind == "sync" else aio_run
    assert go(GONE, cassette, run if kind == "sync" else arun, mode="replay") == (
        (b"a", b"b", b"c"),
        grpc.StatusCode.OK,
        "",
    )


def test_what_the_channel_recorded_replays_through_the_h2_session(
    server: ScriptedServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "inprocess.jsonl"
    recorded = both("sync", server.address, cassette, CHATTY, lockstep=True, mode="record")
    pump = replaying(Cassette.loads(cassette.read_bytes(), name="inprocess.jsonl"), "fast")
    # the proxy's path: an h2 client speaking to the core's H2Session
    sid = open_chat(pump.client, grpc_frame(CHATTY[0].message()))
    released = frames_of(pump.step())
    for i, turn in enumerate(CHATTY[1:], start=1):
        send(pump.client, sid, grpc_frame(turn.message()), end=i == len(CHATTY) - 1)
        released += frames_of(pump.step())
    answer = pump.client.answers[sid]
    assert [f.data for f in released] == [grpc_frame(m) for m in recorded[0]]
    assert answer.data == b"".join(grpc_frame(m) for m in recorded[0])
    assert answer.trailers == [(b"grpc-status", b"0")]
    assert answer.ended


def open_chat(client: Any, first: bytes) -> int:
    """A call of ``Chat`` from the h2 client, its first message sent."""
    sid: int = client.conn.get_next_available_stream_id()
    head = [
        (b":method", b"POST"),
        (b":path", CHAT.encode()),
        (b":scheme", b"http"),
        (b":authority", b"localhost"),
        (b"content-type", b"application/grpc"),
        (b"te", b"trailers"),
    ]
    client.conn.send_headers(sid, head)
    client.conn.send_data(sid, first)
    return sid


def test_a_call_cancelled_before_its_first_message_never_starts(
    server: ScriptedServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "cancelled.jsonl"
    hold = threading.Event()

    def requests() -> Iterator[bytes]:
        hold.wait(PATIENCE)
        yield CHATTY[0].message()

    before = server.calls["Chat"]
    chan = channel(grpc.insecure_channel(server.address), cassette, mode="record")
    call = chan.stream_stream(CHAT)(requests())
    assert call.is_active()
    assert call.cancel()  # at once: the call waits on no message
    assert not call.cancel()
    hold.set()
    with pytest.raises(grpc.RpcError):
        list(call)
    assert call.code() is grpc.StatusCode.CANCELLED
    assert not call.is_active()
    chan.close()
    assert server.calls["Chat"] == before  # never sent
    assert len(cassette.read_text().splitlines()) == 1  # nothing recorded


# -- the calls, as grpcio's own ----------------------------------------------------------


def test_a_replayed_session_is_a_call(server: ScriptedServer, tmp_path: Path) -> None:
    cassette = tmp_path / "call.jsonl"
    both("sync", server.address, cassette, CHATTY, lockstep=True, mode="record")
    chan = channel(grpc.insecure_channel(GONE), cassette, mode="replay", timing="fast")
    call = chan.stream_stream(CHAT)(iter(_messages(CHATTY, {})), timeout=30)
    ended: list[str] = []
    assert call.add_callback(lambda: ended.append("done"))
    assert call.is_active()
    assert 0 < call.time_remaining() <= 30
    assert call.initial_metadata() == ()
    assert next(call) == b"one"
    assert call.code() is grpc.StatusCode.OK  # waits for the end, as grpcio's
    assert ended == ["done"]
    assert not call.is_active()
    assert not call.cancel()  # over already
    assert not call.add_callback(print)
    assert call.trailing_metadata() == ()
    assert call.debug_error_string() == "replayed by Reel: OK"
    assert "OK" in repr(call)
    cancelled = chan.stream_stream(CHAT)(iter(_messages(CHATTY, {})))
    assert next(cancelled) == b"one"
    assert "active" in repr(cancelled)
    assert cancelled.cancel()
    with pytest.raises(grpc.RpcError):
        next(cancelled)
    assert cancelled.code() is grpc.StatusCode.CANCELLED
    assert cancelled.time_remaining() is None
    chan.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_session_replayed_to_a_client_stream_needs_one_answer(
    kind: str, server: ScriptedServer, tmp_path: Path
) -> None:
    """A client-streaming caller waits for one answer: a recording with
    more (made by a bidirectional call of the same path) is an error
    saying so, never the first of them."""
    cassette = tmp_path / "one.jsonl"
    both(kind, server.address, cassette, CHATTY[:2], lockstep=True, mode="record")
    sent = _messages(CHATTY[:2], {})

    def run(chan: Any) -> Any:
        future = chan.stream_unary(CHAT).future(iter(sent))
        return future.exception()

    async def arun(chan: Any) -> Any:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await chan.stream_unary(CHAT)(iter(sent))
        return raised.value

    error = (sync_run if kind == "sync" else aio_run)(
        GONE, cassette, run if kind == "sync" else arun, mode="replay", timing="fast"
    )
    assert error.code() is grpc.StatusCode.INTERNAL
    assert f"the recorded call {CHAT} has 4 messages, not 1" in error.details()


def test_the_aio_writer_api(server: ScriptedServer, tmp_path: Path) -> None:
    cassette = tmp_path / "writer.jsonl"
    both("aio", server.address, cassette, CHATTY[:2], lockstep=True, mode="record")

    async def run(chan: Any) -> None:
        call = chan.stream_stream(CHAT)()
        await call.write(CHATTY[0].message())
        assert await call.initial_metadata() == grpc.aio.Metadata()
        assert await call.read() == b"one"
        await call.write(CHATTY[1].message())
        await call.done_writing()
        await call.done_writing()  # once is enough: again is nothing
        with pytest.raises(asyncio.InvalidStateError):
            await call.write(b"late")
        assert [await call.read() for _ in range(3)] == [b"two", b"three", b"bye"]
        assert await call.read() is grpc.aio.EOF
        assert await call.code() is grpc.StatusCode.OK
        mixed = chan.stream_stream(CHAT)(iter(_messages(CHATTY[:2], {})))
        with pytest.raises(grpc.aio.UsageError):
            await mixed.write(b"more")
        assert await mixed.read() == b"one"
        assert mixed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await mixed.read()

    aio_run(GONE, cassette, run, mode="replay", timing="fast")


def test_a_failing_aio_request_iterator_cancels_the_call(
    server: ScriptedServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "afailing.jsonl"
    both("aio", server.address, cassette, CHATTY, lockstep=True, mode="record")

    async def requests() -> AsyncIterator[bytes]:
        yield CHATTY[0].message()
        raise RuntimeError("the caller's own bug")

    async def run(chan: Any) -> Any:
        call = chan.stream_stream(CHAT)(requests())
        with pytest.raises(grpc.aio.AioRpcError):
            async for _ in call:
                pass
        return await call.code()

    # as grpc.aio: a request iterator that raises cancels the call
    assert aio_run(GONE, cassette, run, mode="replay", timing="fast") is grpc.StatusCode.CANCELLED


# -- a recording grpcio could not have made ---------------------------------------------


def _compressed(line: dict[str, Any]) -> None:
    entries = line["grpc"]["messages"]
    first = next(e for e in entries if e["from"] == "server" and "base64" in e)
    data = base64.b64decode(first["base64"])
    first["base64"] = base64.b64encode(b"\x01" + data[1:]).decode("ascii")


def _cut(line: dict[str, Any]) -> None:
    response = line["response"]
    at = response.pop("end")["at"]
    del response["trailers"]
    response["cut"] = {"at": at, "error": "reset", "detail": "boom"}


def _no_status(line: dict[str, Any]) -> None:
    del line["response"]["trailers"]


BROKEN = {
    "compressed": (
        _compressed,
        grpc.StatusCode.INTERNAL,
        "message 1 of the recorded call is compressed",
    ),
    "cut": (_cut, grpc.StatusCode.UNAVAILABLE, "the recorded call broke off (reset: boom)"),
    "no status": (_no_status, grpc.StatusCode.UNKNOWN, "the recorded call has no grpc-status"),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_a_session_grpcio_could_not_read_replays_as_a_clear_error(
    kind: str, broken: str, server: ScriptedServer, tmp_path: Path
) -> None:
    """Never a wrong answer: a recorded session with a compressed message,
    that broke off, or with no status replays as the gRPC error saying so."""
    change, code, details = BROKEN[broken]
    cassette = tmp_path / "broken.jsonl"
    both(kind, server.address, cassette, CHATTY[:2], lockstep=True, mode="record")
    meta, line = cassette.read_text().splitlines()
    recorded = json.loads(line)
    change(recorded)
    cassette.write_text(meta + "\n" + json.dumps(recorded) + "\n")
    got = both(kind, GONE, cassette, CHATTY[:2], lockstep=True, mode="replay", timing="fast")
    assert got[1] is code
    assert details in got[2]


def test_a_client_stream_future_runs_while_the_caller_feeds_it(
    server: ScriptedServer, tmp_path: Path
) -> None:
    """``future()`` returns at once, as grpcio's: the caller feeds the
    request iterator after it has the future, and nothing hangs."""
    cassette = tmp_path / "future.jsonl"

    def run(chan: Any) -> Any:
        fed: queue.Queue[bytes | None] = queue.Queue()
        future = chan.stream_unary(UPLOAD).future(iter(fed.get, None))
        assert future.running()
        assert not future.done()
        with pytest.raises(grpc.FutureTimeoutError):
            future.result(timeout=0.05)
        seen: list[Any] = []
        future.add_done_callback(seen.append)
        for message in (b"a", b"b", None):
            fed.put(message)
        answer = future.result(timeout=PATIENCE)
        assert future.done()
        assert seen == [future]
        future.add_done_callback(seen.append)  # done already: called at once
        assert seen == [future, future]
        assert future.exception() is None
        assert future.traceback() is None
        assert not future.cancel()
        assert not future.cancelled()
        assert not future.is_active()
        return answer, future.code(), future.details() or ""

    assert sync_run(server.address, cassette, run, mode="record") == (
        b"a+b",
        grpc.StatusCode.OK,
        "",
    )
    assert sync_run(GONE, cassette, run, mode="replay") == (b"a+b", grpc.StatusCode.OK, "")


def test_a_client_stream_future_cancelled_and_failed(
    server: ScriptedServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "future-cancel.jsonl"
    cassette.write_text('{"_meta":{"schema":3}}\n')
    chan = channel(grpc.insecure_channel(GONE), cassette, mode="replay")
    fed: queue.Queue[bytes | None] = queue.Queue()
    future = chan.stream_unary(UPLOAD).future(iter(fed.get, None))
    assert future.cancel()  # before its first message: never started
    with pytest.raises(grpc.RpcError):
        future.result(timeout=PATIENCE)
    assert future.cancelled()
    assert future.code() is grpc.StatusCode.CANCELLED
    fed.put(None)
    missed = chan.stream_unary(UPLOAD).future(iter([b"never recorded"]))
    error = missed.exception(timeout=PATIENCE)
    assert error is not None
    assert missed.traceback() is not None
    assert missed.code() is grpc.StatusCode.NOT_FOUND
    chan.close()


@pytest.mark.parametrize("kind", KINDS)
def test_live_mode_passes_a_session_through_and_keeps_nothing(
    kind: str, server: ScriptedServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "live.jsonl"
    before = server.calls["Chat"]
    got = both(kind, server.address, cassette, CHATTY, lockstep=True, mode="live")
    assert got == ((b"one", b"two", b"three", b"four", b"bye"), grpc.StatusCode.OK, "")
    assert server.calls["Chat"] == before + 1
    assert not cassette.exists() or len(cassette.read_text().splitlines()) <= 1
