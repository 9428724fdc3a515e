"""Client-streaming and bidirectional gRPC calls recorded through the proxy
(HTTP/2), against the scripted grpcio server's ``Chat`` and ``Upload``, and
replayed through it with the server gone, on asyncio and trio.

The invariant (docs/reliability.md, "A gRPC session recorded through the
proxy replays as it was recorded"): whatever a streaming call gave its
grpcio client through the proxy in record mode (its messages, status code
and details), the same call replayed through the proxy with the server
gone gives it exactly, whoever spoke when, however many messages each side
sent, whether the client ended early or the server ended first with an
error; and the line is the one the in-process channel writes (one format,
both ways).  A client that resets mid-call leaves a cut recording and
nothing else lost; a secret in a client message never reaches the disk; a
descriptor set makes a replayed session's comparison JSON."""

from __future__ import annotations

import base64
import contextlib
import json
import random
import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.bindings.grpc_server import CHAT, STREAM, UPLOAD, Script, ScriptedServer, Turn
from tests.secrets import GRPC_KEY, recoverable

grpc = pytest.importorskip(
    "grpc", reason="the gRPC tests need grpcio: pip install 'reel-llm[grpc]'"
)
pytest.importorskip("h2", reason="the proxy's HTTP/2 needs h2: pip install 'reel-llm[h2]'")

from reel_bindings.proxy import Proxy, ProxyOptions, running  # noqa: E402
from reel_bindings.proxy import _proxy as make_proxy  # noqa: E402
from reel_core import Mode, Verdict  # noqa: E402
from reel_core.tools import grpc_frame  # noqa: E402
from tests.bindings.h2_client import H2Client  # noqa: E402
from tests.bindings.proxy_support import interactions, options  # noqa: E402
from tests.bindings.test_grpc_sessions import (  # noqa: E402
    CHATTY,
    GONE,
    Observed,
    conversations,
    converse,
    session_log,
    sync_run,
)

BACKENDS = ["asyncio", "trio"]
#: Where nothing listens: a replay that reached out would fail.
NOWHERE = f"http://{GONE}"
#: grpcio, not through any proxy of the environment.
NO_PROXY = [("grpc.enable_http_proxy", 0)]


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as scripted:
        yield scripted


def through(backend: str, opts: ProxyOptions, work: Any, *, proxy: Proxy | None = None) -> Any:
    """``work(channel)`` in a thread, a grpcio channel to a proxy running
    ``opts`` on ``backend``."""

    async def main() -> Any:
        async with running(opts, proxy=proxy) as url:

            def call() -> Any:
                address = url.removeprefix("http://")
                with grpc.insecure_channel(address, options=NO_PROXY) as chan:
                    return work(chan)

            return await anyio.to_thread.run_sync(call)

    return anyio.run(main, backend=backend)


def record(backend: str, server: ScriptedServer, cassette: Path, work: Any) -> Any:
    return through(
        backend, options(Mode.RECORD, cassette, upstream=f"http://{server.address}"), work
    )


def replay(backend: str, cassette: Path, work: Any, **more: Any) -> Any:
    opts = options(Mode.REPLAY, cassette, upstream=NOWHERE, timing="fast", **more)
    return through(backend, opts, work)


def chat(turns: list[Turn], *, lockstep: bool = False, **more: Any) -> Any:
    return lambda chan: converse(chan, turns, lockstep=lockstep, timeout=20, **more)


# -- the invariant, over generated conversations -----------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_session_recorded_through_the_proxy_replays_as_it_was_recorded(
    backend: str, server: ScriptedServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp("proxy-sessions")

    @settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(turns=conversations(), lockstep=st.booleans())
    @example(turns=[], lockstep=False)  # the client ends at once
    @example(turns=[Turn((b"a",), (9, "no more"))], lockstep=True)  # the server ends first
    @example(turns=[Turn((b"a",), final=(b"z",)), Turn((b"b", b"c"))], lockstep=True)
    # details with a space around them: grpcio sends them unencoded (docs/reliability.md)
    @example(turns=[Turn((b"a",), (9, " "))], lockstep=True)
    @example(turns=[Turn((b"a",), (9, " lead"))], lockstep=False)
    @example(turns=[Turn((), code=9, details="trail ")], lockstep=False)
    def check(turns: list[Turn], lockstep: bool) -> None:
        cassette = root / f"{uuid.uuid4().hex}.jsonl"
        recorded = record(backend, server, cassette, chat(turns, lockstep=lockstep))
        replayed = replay(backend, cassette, chat(turns, lockstep=lockstep))
        assert replayed == recorded
        if not any(turn.stop for turn in turns):  # (see the in-process property)
            bare = sync_run(server.address, None, chat(turns, lockstep=lockstep))
            assert recorded == bare

    check()


@pytest.mark.parametrize("backend", BACKENDS)
def test_status_details_with_spaces_around_them_are_recorded_and_replayed_as_sent(
    backend: str, server: ScriptedServer, tmp_path: Path
) -> None:
    """grpcio sends ``grpc-message: " lead"`` (gRPC's Percent-Encoded
    grammar leaves the space): h2 refused it (RFC 9113 8.2.1) and the call
    was recorded INTERNAL where the server said FAILED_PRECONDITION; h2
    stripped it on a replay.  The client sees what the server said, both
    times, as it does without the proxy."""
    for i, details in enumerate([" ", " lead", "trail ", "\tboth ", " in side "]):
        talk = chat([Turn((b"a",), (9, details))], lockstep=True)
        cassette = tmp_path / f"{i}.jsonl"
        bare = sync_run(server.address, None, talk)
        assert bare == ((b"a",), grpc.StatusCode.FAILED_PRECONDITION, details)
        assert record(backend, server, cassette, talk) == bare
        assert replay(backend, cassette, talk) == bare


@pytest.mark.parametrize("backend", BACKENDS)
def test_client_metadata_with_spaces_around_it_is_taken(
    backend: str, server: ScriptedServer, tmp_path: Path
) -> None:
    """grpcio sends metadata ``" hi "`` as it is: h2 refused the whole
    connection (GOAWAY), and the call failed UNAVAILABLE."""

    def work(chan: Any) -> Observed:
        message = Turn((b"a",), final=(b"z",)).message()
        call = chan.stream_stream(CHAT)(iter([message]), timeout=20, metadata=(("x-note", " hi "),))
        got = []
        with contextlib.suppress(grpc.RpcError):
            got = list(call)
        return tuple(got), call.code(), call.details() or ""

    cassette = tmp_path / "c.jsonl"
    bare = sync_run(server.address, None, work)
    assert bare == ((b"a", b"z"), grpc.StatusCode.OK, "")
    assert record(backend, server, cassette, work) == bare
    assert replay(backend, cassette, work) == bare


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_lockstep_bidi_call_and_a_client_stream_record_and_replay(
    backend: str, server: ScriptedServer, tmp_path: Path
) -> None:
    """A client that waits for each answer before it sends the next (no
    deadlock either way), and a client-streaming call answered after the
    client's end: recorded as sessions, replayed with the server gone."""
    cassette = tmp_path / "c.jsonl"

    def work(chan: Any) -> tuple[Observed, tuple[bytes, Any]]:
        talked = converse(chan, CHATTY, lockstep=True, timeout=20)
        total, call = chan.stream_unary(UPLOAD).with_call(iter([b"a", b"b", b"c"]), timeout=20)
        return talked, (total, call.code())

    calls = server.calls["Chat"], server.calls["Upload"]
    recorded = record(backend, server, cassette, work)
    assert (server.calls["Chat"], server.calls["Upload"]) == (calls[0] + 1, calls[1] + 1)
    assert recorded[0][0] == (b"one", b"two", b"three", b"four", b"bye")
    assert recorded[1] == (b"a+b+c", grpc.StatusCode.OK)
    talk, upload = interactions(cassette)
    assert talk.grpc is not None  # sessions, not whole bodies
    assert upload.grpc is not None
    entries = session_log(cassette, 0)
    assert [e["from"] for e in entries][:2] == ["client", "server"]  # answered before the end
    assert replay(backend, cassette, work) == recorded


# -- one format ---------------------------------------------------------------------------


def test_a_session_recorded_through_the_proxy_replays_in_process(
    server: ScriptedServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "proxy.jsonl"
    recorded = record("asyncio", server, cassette, chat(CHATTY, lockstep=True))
    replayed = sync_run(GONE, cassette, chat(CHATTY, lockstep=True), mode="replay", timing="fast")
    assert replayed == recorded


def test_a_session_recorded_in_process_replays_through_the_proxy(
    server: ScriptedServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "inprocess.jsonl"
    recorded = sync_run(server.address, cassette, chat(CHATTY, lockstep=True), mode="record")
    assert replay("trio", cassette, chat(CHATTY, lockstep=True)) == recorded


def test_the_proxy_and_the_channel_write_the_same_conversation(
    server: ScriptedServer, tmp_path: Path
) -> None:
    """The lines hold the same conversation, key and request."""
    proxied, inprocess = tmp_path / "proxy.jsonl", tmp_path / "inprocess.jsonl"
    record("asyncio", server, proxied, chat(CHATTY, lockstep=True))
    sync_run(server.address, inprocess, chat(CHATTY, lockstep=True), mode="record")

    def shape(path: Path) -> list[tuple[str, str | None, bool]]:
        return [(e["from"], e.get("base64"), bool(e.get("end"))) for e in session_log(path)]

    assert shape(proxied) == shape(inprocess)
    [a], [b] = interactions(proxied), interactions(inprocess)
    assert (a.key, a.request.body, a.response.status) == (b.key, b.request.body, b.response.status)
    # (the proxy keeps the trailers as they crossed, grpcio's empty
    # grpc-message among them; the channel writes the status it was given)
    assert dict(a.response.trailers)["grpc-status"] == dict(b.response.trailers)["grpc-status"]


# -- misses ---------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_session_that_leaves_its_recording_is_a_miss_not_a_hit(
    backend: str, server: ScriptedServer, tmp_path: Path
) -> None:
    """As a WebSocket session's: the run log counts a miss (its report
    kept), and no hit, for a replay that stopped part-way."""
    cassette = tmp_path / "c.jsonl"
    recorded = record(backend, server, cassette, chat(CHATTY, lockstep=True))
    opts = options(Mode.REPLAY, cassette, upstream=NOWHERE, timing="fast")
    proxy = make_proxy(opts)
    spoiled = {2: Turn((b"other",), tag="spoiled").message()}
    got = through(backend, opts, chat(CHATTY, lockstep=True, spoil=spoiled), proxy=proxy)
    assert got[0] == recorded[0][:3]  # what the matching messages released
    assert got[1] is grpc.StatusCode.NOT_FOUND
    assert got[2].startswith("Reel miss: gRPC session")
    assert proxy.runlog.counts[Verdict.MISS] == 1
    assert proxy.runlog.counts[Verdict.HIT] == 0
    assert proxy.runlog.misses.total == 1
    again = make_proxy(opts)
    assert through(backend, opts, chat(CHATTY, lockstep=True), proxy=again) == recorded
    assert (again.runlog.counts[Verdict.HIT], again.runlog.counts[Verdict.MISS]) == (1, 0)


# -- a client that resets mid-call ------------------------------------------------------------

GRPC_HEAD = ((b"content-type", b"application/grpc"), (b"te", b"trailers"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_client_reset_mid_call_cuts_the_recording_and_loses_nothing_else(
    backend: str, server: ScriptedServer, tmp_path: Path
) -> None:
    """The client resets a bidirectional call after its first answer: the
    upstream stream is reset at once (not read on for the grace), the
    recording holds what crossed and says it was cut by the client, and a
    call on the same connection after it is recorded whole."""
    cassette = tmp_path / "c.jsonl"
    opts = options(Mode.RECORD, cassette, upstream=f"http://{server.address}", record_grace=30.0)
    first = Turn((b"one",), tag="cut").message()

    async def main() -> None:
        with anyio.fail_after(15):  # not the grace
            async with running(opts) as url, H2Client(url) as client:
                sid = client.request(grpc_frame(first), path=CHAT, headers=GRPC_HEAD, end=False)
                await client.flush()
                while not client.answers[sid].data:
                    await client.receive()
                client.reset(sid)
                await client.flush()
                done = Turn((b"two",), tag="whole").message()
                other = client.request(grpc_frame(done), path=CHAT, headers=GRPC_HEAD)
                await client.flush()
                await client.until_done(other)
                assert client.answers[other].data == grpc_frame(b"two")
                assert dict(client.answers[other].trailers or ())[b"grpc-status"] == b"0"

    anyio.run(main, backend=backend)
    cut, whole = interactions(cassette)
    assert cut.response.cut is not None
    assert "client" in cut.response.cut.detail
    assert cut.grpc is not None
    sent = [(m.sender, m.data) for m in cut.grpc.messages if not m.end]
    assert sent == [("client", grpc_frame(first)), ("server", grpc_frame(b"one"))]
    assert whole.response.cut is None
    assert dict(whole.response.trailers)["grpc-status"] == "0"


class DyingLink:
    """A TCP link to ``port`` that dies, both ways, right after it has
    passed on the server's bytes holding ``last``: what the proxy sees of
    a server whose process died mid-call (its connection closed; no
    GOAWAY, no trailers)."""

    def __init__(self, port: int, last: bytes) -> None:
        self._port, self._last = port, last
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):  # closed at the end
            while True:
                client, _ = self._listener.accept()
                server = socket.create_connection(("127.0.0.1", self._port))
                for args in ((client, server, False), (server, client, True)):
                    threading.Thread(target=self._pump, args=args, daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, from_server: bool) -> None:
        seen = b""
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
                seen = (seen + data)[-len(self._last) - 65536 :]
                if from_server and self._last in seen:
                    break
        for end in (source, sink):  # shut down first: it wakes the other pump's recv
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()

    def close(self) -> None:
        self._listener.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_server_that_dies_mid_stream_ends_the_call_unavailable_and_replays_so(
    backend: str, server: ScriptedServer, tmp_path: Path
) -> None:
    """The upstream's connection dies after three of six streamed messages:
    the grpcio client gets those three and UNAVAILABLE saying why, at once
    (not DEADLINE_EXCEEDED after waiting out its deadline); the recording
    holds them and the cut; its replay, the server gone, gives the client
    the same messages and the same status."""
    script = Script(messages=(b"m0", b"m1", b"m2-last", b"m3", b"m4", b"m5"), gap=0.1)
    cassette = tmp_path / "c.jsonl"

    def work(chan: Any) -> tuple[list[bytes], Any, str]:
        got: list[bytes] = []
        try:
            for message in chan.unary_stream(STREAM)(script.request(), timeout=120):
                got.append(message)
        except grpc.RpcError as exc:
            return got, exc.code(), exc.details()
        return got, grpc.StatusCode.OK, ""

    link = DyingLink(server.port, b"m2-last")
    try:
        opts = options(Mode.RECORD, cassette, upstream=f"http://{link.address}")
        recorded = through(backend, opts, work)
    finally:
        link.close()
    assert recorded[0] == [b"m0", b"m1", b"m2-last"]
    assert recorded[1] == grpc.StatusCode.UNAVAILABLE
    assert "upstream closed" in recorded[2]
    (line,) = interactions(cassette)
    assert line.response.cut is not None
    assert line.response.cut.error == "closed"
    assert [data for _, data in line.response.frames] == [
        grpc_frame(m) for m in (b"m0", b"m1", b"m2-last")
    ]
    assert replay(backend, cassette, work) == recorded


# -- secrets ----------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_key_inside_a_client_message_never_reaches_the_disk(
    backend: str, server: ScriptedServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "secret.jsonl"
    metadata = (("authorization", f"Bearer {GRPC_KEY}"),)
    turns = [
        Turn((f"hello {GRPC_KEY}".encode(),), tag=f"key={GRPC_KEY}"),
        Turn((b"ok",), tag=f"again {GRPC_KEY}"),
    ]

    def work(chan: Any) -> Observed:
        call = chan.stream_stream(CHAT)(iter([t.message() for t in turns]), metadata=metadata)
        return tuple(call), call.code(), call.details() or ""

    recorded = record(backend, server, cassette, work)
    assert recorded[0] == (f"hello {GRPC_KEY}".encode(), b"ok")
    assert recoverable(GRPC_KEY, cassette.read_bytes()) == []
    assert len(session_log(cassette)) >= 4  # a session, each message scrubbed
    replayed = replay(backend, cassette, work)
    assert replayed[1] is grpc.StatusCode.OK  # the key is matched scrubbed: no miss
    assert len(replayed[0]) == 2


# -- a descriptor set: the comparison as JSON ------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_descriptor_set_makes_a_replayed_sessions_comparison_json(
    backend: str, tmp_path: Path
) -> None:
    """A message whose fields come in another order is another message in
    bytes (a miss without the set) and the same one through the set."""
    pytest.importorskip("google.protobuf", reason="descriptor sets need protobuf: the grpc extra")
    from reel_core.tools import ProtoSchema
    from tests.protos import TINY_METHOD, tiny_messages, tiny_set

    ask, answer = tiny_messages()
    one = ask(model="m", words=["a", "b"]).SerializeToString()
    two = ask(model="m", big_number=7).SerializeToString()
    # the same fields, in another order on the wire
    two_reordered = ask(big_number=7).SerializeToString() + ask(model="m").SerializeToString()
    assert two_reordered != two
    cassette = tmp_path / "tiny.jsonl"
    _record_tiny(backend, cassette, [one, two])
    [stored] = interactions(cassette)
    assert stored.grpc is not None

    def work(chan: Any) -> tuple[list[bytes], Any]:
        talk = chan.stream_stream(TINY_METHOD)
        call = talk(iter([one, two_reordered]), timeout=20)
        got: list[bytes] = []
        with contextlib.suppress(grpc.RpcError):
            got.extend(call)
        return got, call.code()

    bytes_only = replay(backend, cassette, work)
    assert bytes_only[1] is grpc.StatusCode.NOT_FOUND
    schema = ProtoSchema(tiny_set(), "tiny set")
    as_json = replay(backend, cassette, work, proto=schema)
    said = [answer(text="1").SerializeToString(), answer(text="2").SerializeToString()]
    assert as_json == (said, grpc.StatusCode.OK)


def _record_tiny(backend: str, cassette: Path, messages: list[bytes]) -> None:
    """``/tiny.Talk/Say`` called bidirectionally through the proxy against
    a server answering each message with its number."""
    from tests.protos import TINY_METHOD, tiny_messages

    _, answer = tiny_messages()

    def say(requests: Iterator[bytes], context: Any) -> Iterator[bytes]:
        for i, _ in enumerate(requests, start=1):
            yield answer(text=str(i)).SerializeToString()

    from concurrent import futures

    handler = grpc.method_handlers_generic_handler(
        "tiny.Talk", {"Say": grpc.stream_stream_rpc_method_handler(say)}
    )
    tiny = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    tiny.add_generic_rpc_handlers((handler,))
    port = tiny.add_insecure_port("127.0.0.1:0")
    tiny.start()
    try:
        opts = options(Mode.RECORD, cassette, upstream=f"http://127.0.0.1:{port}")
        got = through(
            backend,
            opts,
            lambda chan: list(chan.stream_stream(TINY_METHOD)(iter(messages), timeout=20)),
        )
    finally:
        tiny.stop(grace=None).wait()
    assert len(got) == len(messages)


def _decoded(entries: list[dict[str, Any]]) -> list[bytes]:
    return [base64.b64decode(e["base64"]) for e in entries if "base64" in e]


def test_the_recorded_conversation_holds_each_message_whole(
    server: ScriptedServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "c.jsonl"
    record("trio", server, cassette, chat(CHATTY, lockstep=True))
    line = json.loads(cassette.read_text().splitlines()[1])
    assert line["response"]["stream"] == "grpc-session"
    for data in _decoded(session_log(cassette)):
        assert len(data) == 5 + int.from_bytes(data[1:5], "big")  # one whole message each


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", [1, 2])
def test_resets_among_concurrent_sessions_lose_no_recording(
    backend: str, seed: int, server: ScriptedServer, tmp_path: Path
) -> None:
    """Two connections, each with a seeded mix of concurrent ``Chat`` calls:
    some the client resets after their first answer, the others it ends
    after a second message and reads whole.  The cassette then holds every
    call once: each reset one cut by the client after its first answer,
    each other whole, with both answers and its status."""
    rng = random.Random(seed)
    plan = {f"c{i}": rng.random() < 0.5 for i in range(12)}  # tag -> reset
    cassette = tmp_path / "c.jsonl"
    opts = options(Mode.RECORD, cassette, upstream=f"http://{server.address}")

    async def connection(url: str, tags: list[str]) -> None:
        async with H2Client(url) as client:
            sids = {}
            for tag in tags:
                first = grpc_frame(Turn((b"first " + tag.encode(),), tag=tag).message())
                sids[client.request(first, path=CHAT, headers=GRPC_HEAD, end=False)] = tag
            await client.flush()
            moved: set[int] = set()
            while not all(client.answers[sid].done for sid in sids):
                await client.receive()
                for sid, tag in sids.items():
                    if sid in moved or not client.answers[sid].data:
                        continue
                    moved.add(sid)
                    if plan[tag]:
                        client.reset(sid)
                    else:
                        second = Turn((b"second " + tag.encode(),), tag=tag).message()
                        client.conn.send_data(sid, grpc_frame(second), end_stream=True)
                await client.flush()
            for sid, tag in sids.items():
                if not plan[tag]:
                    assert client.answers[sid].data == grpc_frame(
                        b"first " + tag.encode()
                    ) + grpc_frame(b"second " + tag.encode())

    async def main() -> None:
        tags = list(plan)
        with anyio.fail_after(30):
            async with running(opts) as url, anyio.create_task_group() as tg:
                tg.start_soon(connection, url, tags[::2])
                tg.start_soon(connection, url, tags[1::2])

    anyio.run(main, backend=backend)
    stored: dict[str, Any] = {}
    for ix in interactions(cassette):
        tag = json.loads(ix.request.body[5:])["tag"]
        assert tag not in stored  # once
        stored[tag] = ix
    assert set(stored) == set(plan)  # every call, none lost
    for tag, reset in plan.items():
        ix = stored[tag]
        assert ix.grpc is not None
        answers = [m.data for m in ix.grpc.messages if m.sender == "server" and not m.end]
        if reset:
            assert ix.response.cut is not None
            assert "client" in ix.response.cut.detail
            assert answers == [grpc_frame(b"first " + tag.encode())]
        else:
            assert ix.response.cut is None
            assert answers == [
                grpc_frame(b"first " + tag.encode()),
                grpc_frame(b"second " + tag.encode()),
            ]
            assert dict(ix.response.trailers)["grpc-status"] == "0"


@pytest.mark.parametrize("backend", BACKENDS)
def test_auto_records_a_session_once_then_replays_it(
    backend: str, server: ScriptedServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "auto.jsonl"
    opts = options(Mode.AUTO, cassette, upstream=f"http://{server.address}")
    before = server.calls["Chat"]
    first = through(backend, opts, chat(CHATTY, lockstep=True))
    again = through(backend, opts, chat(CHATTY, lockstep=True))
    assert again == first
    assert first[0] == (b"one", b"two", b"three", b"four", b"bye")
    assert server.calls["Chat"] == before + 1  # the second call was replayed
    assert len(interactions(cassette)) == 1


def test_live_passes_a_session_through_and_keeps_nothing(
    server: ScriptedServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "live.jsonl"
    opts = options(Mode.LIVE, cassette, upstream=f"http://{server.address}")
    bare = sync_run(server.address, None, chat(CHATTY, lockstep=True))
    assert through("trio", opts, chat(CHATTY, lockstep=True)) == bare
    assert not cassette.exists() or interactions(cassette) == []
