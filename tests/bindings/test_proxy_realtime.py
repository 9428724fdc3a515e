"""WebSocket sessions through the proxy, the official OpenAI SDK as client.

``client.realtime.connect()`` dials ``ws://`` + the base URL + ``/realtime``:
pointed at the proxy by base URL, nothing patched.  Each scenario runs
through a recording proxy (the fake realtime upstream behind it), then
through a replaying one with the fake gone.  The async SDK client runs on
asyncio only (``websockets``' asyncio client); on trio the sync client runs
in a worker thread, against the same proxy on trio.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import openai
import pytest
import websockets.exceptions
from websockets.sync.client import connect as ws_connect

from reel_bindings.proxy import Proxy, running
from reel_bindings.proxy import _websocket as ws_binding
from reel_core import Mode, Verdict
from tests.fakes.realtime import reply_pieces, serve_realtime
from tests.secrets import SDK_OPENAI_KEY

from .forward_proxy import LocalCA, serve_forward_proxy
from .proxy_support import interactions, options
from .timing import assert_not_early, spy_sleeps

pytestmark = [
    pytest.mark.anyio,
    # openai's sync realtime client calls websockets' connect() outside a
    # with block, which websockets>=17.1 warns about: the SDK's business
    pytest.mark.filterwarnings("ignore:connect\\(\\) must be used as a context manager"),
]

T = TypeVar("T")
MODEL = "gpt-realtime"
USER = "Say hello to Oslo"
#: An upstream name no resolver knows: reachable through the forward proxy only.
NAME = "realtime.reel.test"

Events = list[dict[str, Any]]


def _client_events(text: str) -> list[dict[str, Any]]:
    return [
        {"type": "session.update", "session": {"type": "realtime", "instructions": "Be brief."}},
        {
            "type": "conversation.item.create",
            "item": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": text}],
            },
        },
        {"type": "response.create"},
    ]


async def _async_turn(
    url: str, text: str = USER, *, stop_after: str = "response.done", model: str = MODEL
) -> Events:
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key=SDK_OPENAI_KEY, max_retries=0)
    events: Events = []
    async with client.realtime.connect(model=model) as connection:
        first = await connection.recv()
        events.append(first.model_dump(mode="json"))
        await connection.session.update(session={"type": "realtime", "instructions": "Be brief."})
        await connection.conversation.item.create(
            item={
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": text}],
            }
        )
        await connection.response.create()
        async for event in connection:
            events.append(event.model_dump(mode="json"))
            if event.type in (stop_after, "error"):
                break
    return events


def _sync_turn(url: str, text: str = USER, model: str = MODEL) -> Events:
    client = openai.OpenAI(base_url=url + "/v1", api_key=SDK_OPENAI_KEY, max_retries=0)
    events: Events = []
    with client.realtime.connect(model=model) as connection:
        events.append(connection.recv().model_dump(mode="json"))
        try:
            for event in _client_events(text):
                connection.send(event)  # type: ignore[arg-type]
        except websockets.exceptions.ConnectionClosed:
            # A replay that does not match closes the session after its error
            # event, maybe before the last message is sent: the events that
            # came before the close are still read below.
            pass
        for received in connection:
            events.append(received.model_dump(mode="json"))
            if received.type in ("response.done", "error"):
                break
    return events


async def turn(url: str, text: str = USER, model: str = MODEL) -> Events:
    """One realtime turn through the SDK: asyncio's client, or on trio the
    sync client in a thread."""
    if _backend() == "trio":
        return await anyio.to_thread.run_sync(_sync_turn, url, text, model)
    return await _async_turn(url, text, model=model)


def _backend() -> str:
    import sniffio

    return sniffio.current_async_library()


async def record_and_replay(
    cassette: Path, scenario: Callable[[str], Awaitable[T]], **fake: Any
) -> tuple[T, T]:
    with serve_realtime(**fake) as upstream:
        async with running(options(Mode.RECORD, cassette, upstream=upstream.url)) as url:
            recorded = await scenario(url)
        assert upstream.upgrades
    async with running(options(Mode.REPLAY, cassette)) as url:
        replayed = await scenario(url)
    return recorded, replayed


def _deltas(events: Events) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")


async def test_openai_realtime_record_then_replay(tmp_path: Path) -> None:
    cassette = tmp_path / "realtime.jsonl"
    recorded, replayed = await record_and_replay(cassette, turn)
    assert _deltas(recorded) == "".join(reply_pieces(USER))
    assert replayed == recorded  # the same events, ids and all
    assert [e["type"] for e in recorded][:2] == ["session.created", "session.updated"]
    assert recorded[-1]["type"] == "response.done"
    (session,) = interactions(cassette)
    assert session.websocket is not None
    senders = [m.sender for m in session.websocket.messages]
    assert senders.count("client") == 3
    assert session.request.path == "/v1/realtime"


async def test_openai_realtime_changed_text_is_a_loud_close(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cassette = tmp_path / "realtime.jsonl"
    with serve_realtime() as upstream:
        async with running(options(Mode.RECORD, cassette, upstream=upstream.url)) as url:
            await turn(url)
    caplog.set_level(logging.WARNING, "reel.proxy")
    async with running(options(Mode.REPLAY, cassette)) as url:
        events = await turn(url, "Say goodbye to Bergen")
    # the provider's own error event, never the recorded (wrong) answer
    assert "response.output_text.delta" not in [e["type"] for e in events]
    assert events[-1]["type"] == "error"
    assert "reel_websocket_mismatch" in json.dumps(events[-1])
    assert "client message 1" in caplog.text
    assert "Bergen" in caplog.text  # the field diff names what was received


async def test_a_session_is_noted_once_with_its_own_verdict(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A WebSocket session is one exchange of the run log, of kind
    ``websocket``, noted as it ends with the core's verdict for it: its
    upgrade's (recorded, hit), or a miss for a replay that stopped on a
    client message it does not have (its report kept)."""
    cassette = tmp_path / "realtime.jsonl"
    caplog.set_level(logging.INFO, "reel.proxy")

    async def serve(mode: Mode, text: str, upstream: str | None = None) -> Proxy:
        opts = options(mode, cassette, upstream=upstream)
        proxy = Proxy(opts.config(), cassette=cassette, report=True)
        async with running(opts, proxy=proxy) as url:
            await turn(url, text)
        return proxy

    with serve_realtime() as upstream:
        recorded = await serve(Mode.RECORD, USER, upstream.url)
    replayed = await serve(Mode.REPLAY, USER)
    missed = await serve(Mode.REPLAY, "Say goodbye to Bergen")
    served = [
        [(s.path, s.verdict, s.kind) for s in p.runlog.last] for p in (recorded, replayed, missed)
    ]
    assert served == [
        [("/v1/realtime", Verdict.RECORDED, "websocket")],
        [("/v1/realtime", Verdict.HIT, "websocket")],
        [("/v1/realtime", Verdict.MISS, "websocket")],
    ]
    assert [len(p.runlog.websocket_misses) for p in (recorded, replayed, missed)] == [0, 0, 1]
    labels = [
        r.getMessage().split(" GET ")[0]
        for r in caplog.records
        if r.name == "reel.proxy" and " key=" in r.getMessage()
    ]
    assert labels[0] == "record recorded"
    assert labels[1].startswith("replay hit (complete: ")
    assert labels[2] == "replay miss    "


async def test_openai_realtime_close_code_on_mismatch(tmp_path: Path) -> None:
    """A plain WebSocket client sees the close code 4004 and its reason."""
    cassette = tmp_path / "realtime.jsonl"
    with serve_realtime() as upstream:
        async with running(options(Mode.RECORD, cassette, upstream=upstream.url)) as url:
            await turn(url)

    def changed(url: str) -> tuple[int | None, str]:
        ws_url = url.replace("http://", "ws://") + f"/v1/realtime?model={MODEL}"
        headers = {"Authorization": f"Bearer {SDK_OPENAI_KEY}"}
        with ws_connect(ws_url, additional_headers=headers) as ws:
            ws.recv()
            ws.send(json.dumps({"type": "session.update", "session": {"type": "other"}}))
            try:
                while True:
                    ws.recv()
            except websockets.exceptions.ConnectionClosed as closed:
                rcvd = closed.rcvd
        return (rcvd.code, rcvd.reason) if rcvd is not None else (None, "")

    async with running(options(Mode.REPLAY, cassette)) as url:
        code, reason = await anyio.to_thread.run_sync(changed, url)
    assert code == 4004
    assert "client message 0" in reason


async def test_openai_realtime_client_leaves_mid_response(tmp_path: Path) -> None:
    cassette = tmp_path / "realtime.jsonl"

    async def leave(url: str) -> Events:
        if _backend() == "trio":
            return await turn(url)  # the sync client reads to the end: see below
        return await _async_turn(url, stop_after="response.output_text.delta")

    recorded, replayed = await record_and_replay(cassette, leave)
    assert replayed == recorded
    (session,) = interactions(cassette)
    assert session.websocket is not None
    if _backend() == "asyncio":
        assert session.websocket.close is not None
        assert session.websocket.close.by in ("client", "client-dropped")


async def test_openai_realtime_upstream_drops_mid_session(tmp_path: Path) -> None:
    cassette = tmp_path / "realtime.jsonl"

    async def dropped(url: str) -> str:
        try:
            await turn(url)
        except (websockets.exceptions.ConnectionClosed, openai.APIError) as exc:
            return type(exc).__name__
        return "no error"

    recorded, replayed = await record_and_replay(cassette, dropped, drop_after=2)
    assert recorded == replayed != "no error"
    (session,) = interactions(cassette)
    assert session.websocket is not None
    assert session.websocket.close is not None
    assert session.websocket.close.by == "upstream-dropped"
    deltas = [m for m in session.websocket.messages if b"output_text.delta" in m.data]
    assert len(deltas) == 2


async def test_openai_realtime_two_sessions_at_once(tmp_path: Path) -> None:
    """Two sessions at once, each replayed to its own client.  Their upgrades
    differ (the model): each is matched by its key."""
    cassette = tmp_path / "realtime.jsonl"

    async def two(url: str) -> list[Events]:
        results: list[Events] = [[], []]

        async def one(i: int, text: str, model: str) -> None:
            results[i] = await turn(url, text, model)

        async with anyio.create_task_group() as tg:
            tg.start_soon(one, 0, "First question here", MODEL)
            tg.start_soon(one, 1, "Second question there", MODEL + "-mini")
        return results

    recorded, replayed = await record_and_replay(cassette, two)
    assert _deltas(recorded[0]) == "".join(reply_pieces("First question here"))
    assert _deltas(recorded[1]) == "".join(reply_pieces("Second question there"))
    assert [_deltas(r) for r in replayed] == [_deltas(r) for r in recorded]
    assert len(interactions(cassette)) == 2


def _turn_in_order(
    url: str,
    text: str,
    after: threading.Event | None,
    connected: threading.Event,
    both: threading.Barrier,
) -> Events:
    """A sync client's turn that upgrades only once ``after`` is set, says
    when it is connected, and sends nothing before the other client is
    connected too (``both``)."""
    client = openai.OpenAI(base_url=url + "/v1", api_key=SDK_OPENAI_KEY, max_retries=0)
    if after is not None:
        assert after.wait(10)
    events: Events = []
    with client.realtime.connect(model=MODEL) as connection:
        events.append(connection.recv().model_dump(mode="json"))
        connected.set()
        both.wait(10)
        for event in _client_events(text):
            connection.send(event)  # type: ignore[arg-type]
        for received in connection:
            events.append(received.model_dump(mode="json"))
            if received.type in ("response.done", "error"):
                break
    return events


async def test_two_identical_upgrades_at_once_get_their_own_recordings(tmp_path: Path) -> None:
    """Two sessions with the same upgrade (same path and model), recorded one
    after the other, replayed at once with their upgrades in the other
    order: each client still gets the answer to its own text (the session
    follows its client's messages, not its order of arrival)."""
    cassette = tmp_path / "realtime.jsonl"
    texts = ["First question here", "Second question there"]
    with serve_realtime() as upstream:
        async with running(options(Mode.RECORD, cassette, upstream=upstream.url)) as url:
            recorded = [await turn(url, text) for text in texts]
    assert [_deltas(r) for r in recorded] == ["".join(reply_pieces(t)) for t in texts]
    assert len({i.key for i in interactions(cassette)}) == 1  # one key, two recordings

    async with running(options(Mode.REPLAY, cassette)) as url:
        second_in, first_in = threading.Event(), threading.Event()
        both = threading.Barrier(2)
        replayed: list[Events] = [[], []]

        async def one(i: int, after: threading.Event | None, connected: threading.Event) -> None:
            replayed[i] = await anyio.to_thread.run_sync(
                _turn_in_order, url, texts[i], after, connected, both
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(one, 1, None, second_in)  # the second recording's client first
            tg.start_soon(one, 0, second_in, first_in)
    for got, want in zip(replayed, recorded, strict=True):
        assert "error" not in [e["type"] for e in got]
        assert _deltas(got) == _deltas(want)
        assert got[-1] == want[-1]  # response.done, ids and usage as recorded


async def test_openai_realtime_secrets_never_on_disk(tmp_path: Path) -> None:
    cassette = tmp_path / "realtime.jsonl"
    with serve_realtime() as upstream:
        async with running(options(Mode.RECORD, cassette, upstream=upstream.url)) as url:
            await turn(url)
        # the upstream got the real credential
        assert upstream.upgrades[0][1]["authorization"] == f"Bearer {SDK_OPENAI_KEY}"
    text = cassette.read_text()
    assert SDK_OPENAI_KEY not in text
    assert SDK_OPENAI_KEY[-12:] not in text


async def test_query_key_never_on_disk(tmp_path: Path) -> None:
    """A key passed as ``?key=`` (Gemini's way) is scrubbed from the
    upgrade's target and from every message."""
    from tests.fakes.realtime import GEMINI_LIVE_PATH
    from tests.secrets import SDK_GEMINI_KEY

    cassette = tmp_path / "live.jsonl"

    def live(url: str) -> list[str]:
        ws_url = url.replace("http://", "ws://") + f"{GEMINI_LIVE_PATH}?key={SDK_GEMINI_KEY}"
        out: list[str] = []
        with ws_connect(ws_url) as ws:
            ws.send(json.dumps({"setup": {"model": "models/gemini-live-2.5-flash"}}))
            out.append(str(ws.recv()))
            turn = {"turns": [{"role": "user", "parts": [{"text": "Hi there"}]}]}
            ws.send(json.dumps({"clientContent": {**turn, "turnComplete": True}}))
            while True:
                message = str(ws.recv())
                out.append(message)
                if "turnComplete" in message:
                    break
        return out

    with serve_realtime() as upstream:
        async with running(options(Mode.RECORD, cassette, upstream=upstream.url)) as url:
            recorded = await anyio.to_thread.run_sync(live, url)
        assert SDK_GEMINI_KEY in upstream.upgrades[0][0]
    async with running(options(Mode.REPLAY, cassette)) as url:
        replayed = await anyio.to_thread.run_sync(live, url)
    assert replayed == recorded
    assert json.loads(recorded[0]) == {"setupComplete": {}}
    assert SDK_GEMINI_KEY not in cassette.read_text()


async def test_refused_upgrade_reaches_the_client(tmp_path: Path) -> None:
    cassette = tmp_path / "realtime.jsonl"

    async def refused(url: str) -> str:
        try:
            await turn(url)
        except websockets.exceptions.InvalidStatus as exc:
            return f"{exc.response.status_code} {exc.response.body!r}"
        return "accepted"

    recorded, replayed = await record_and_replay(cassette, refused, refuse=401)
    assert recorded.startswith("401 ")
    assert "refused by the fake" in recorded
    assert replayed == recorded


async def test_upstream_base_url_with_a_path_prefix(tmp_path: Path) -> None:
    """``--upstream http://host/team/openai``: the upgrade goes to the
    prefix plus the client's path, as HTTP requests do; the recording keeps
    the client's own path (a replay matches without the prefix)."""
    cassette = tmp_path / "realtime.jsonl"
    with serve_realtime(prefix="/team/openai") as upstream:
        base = upstream.url + "/team/openai"
        async with running(options(Mode.RECORD, cassette, upstream=base)) as url:
            recorded = await turn(url)
        assert upstream.upgrades[0][0] == f"/team/openai/v1/realtime?model={MODEL}"
    assert _deltas(recorded) == "".join(reply_pieces(USER))
    (session,) = interactions(cassette)
    assert session.request.path == "/v1/realtime"
    async with running(options(Mode.REPLAY, cassette)) as url:
        assert await turn(url) == recorded


async def test_upstream_prefix_missing_is_the_upstreams_404(tmp_path: Path) -> None:
    """The fake mounted under a prefix the proxy is not told about: the
    upgrade reaches the root and the client gets the upstream's 404."""
    cassette = tmp_path / "realtime.jsonl"

    async def refused(url: str) -> int:
        try:
            await turn(url)
        except websockets.exceptions.InvalidStatus as exc:
            return exc.response.status_code
        return 101

    with serve_realtime(prefix="/team/openai") as upstream:
        async with running(options(Mode.LIVE, cassette, upstream=upstream.url)) as url:
            assert await refused(url) == 404
        assert upstream.upgrades[0][0] == f"/v1/realtime?model={MODEL}"


@pytest.mark.parametrize("route", ["direct", "tunnel"])
async def test_wss_upstream_direct_and_through_a_connect_tunnel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, route: str
) -> None:
    """A wss:// upstream: TLS with the CA given by --ca, and through the
    HTTPS_PROXY of the environment (a CONNECT tunnel), as for HTTP."""
    ca = LocalCA.make(tmp_path)
    cassette = tmp_path / "realtime.jsonl"
    with serve_realtime(ssl_context=ca.server_context(NAME, "localhost")) as upstream:
        if route == "tunnel":
            async with serve_forward_proxy({f"{NAME}:443": ("127.0.0.1", upstream.port)}) as fwd:
                monkeypatch.setenv("HTTPS_PROXY", fwd.url)
                monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # the SDK's websockets reads it too
                opts = options(Mode.RECORD, cassette, upstream=f"https://{NAME}", ca=ca.pem)
                async with running(opts) as url:
                    recorded = await turn(url)
            assert [(s.method, s.target) for s in fwd.seen] == [("CONNECT", f"{NAME}:443")]
        else:
            opts = options(
                Mode.RECORD, cassette, upstream=f"https://localhost:{upstream.port}", ca=ca.pem
            )
            async with running(opts) as url:
                recorded = await turn(url)
        assert upstream.upgrades[0][1]["host"] in (NAME, f"localhost:{upstream.port}")
    assert _deltas(recorded) == "".join(reply_pieces(USER))
    async with running(options(Mode.REPLAY, cassette)) as url:
        assert await turn(url) == recorded


async def test_unreachable_upstream_is_a_502(tmp_path: Path) -> None:
    """The upstream cannot be reached: the client's upgrade is answered 502."""
    with serve_realtime() as upstream:
        gone = upstream.url
    opts = options(Mode.LIVE, tmp_path / "realtime.jsonl", upstream=gone)

    def dial(url: str) -> int:
        ws_url = url.replace("http://", "ws://") + f"/v1/realtime?model={MODEL}"
        try:
            with ws_connect(ws_url):
                return 101
        except websockets.exceptions.InvalidStatus as exc:
            return exc.response.status_code

    async with running(opts) as url:
        assert await anyio.to_thread.run_sync(dial, url) == 502


@pytest.mark.parametrize(("timing", "factor"), [("realtime", 1.0), ("slow=2", 2.0), ("fast", 0.0)])
async def test_replay_keeps_the_recorded_schedule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, timing: str, factor: float
) -> None:
    """The proxy sleeps until each server message's deadline: after the
    client's last message, the recorded gaps (times N for slow=N; none for
    fast); and on the wall clock no message comes early."""
    cassette = tmp_path / "realtime.jsonl"
    with serve_realtime() as upstream:
        async with running(options(Mode.RECORD, cassette, upstream=upstream.url)) as url:
            await turn(url)
    (session,) = interactions(cassette)
    assert session.websocket is not None
    messages = session.websocket.messages
    last = max(i for i, m in enumerate(messages) if m.sender == "client")
    anchor = messages[last].at_ms
    # From the first delta on (each came GAP after the one before, so each
    # has a deadline of its own): a message sent in the same microsecond as
    # the one before goes with it, unslept.
    first = next(i for i, m in enumerate(messages) if b"output_text.delta" in m.data)
    assert first > last
    tail: list[float] = []
    for m in messages[first:]:
        if not tail or m.at_ms / 1000 > tail[-1]:
            tail.append(m.at_ms / 1000)
    # Each delta came GAP after the one before; on a loaded machine two can
    # still arrive in one read and share a time: gaps enough to check remain.
    assert len(tail) >= len(reply_pieces(USER)) // 2
    spy = spy_sleeps(monkeypatch, ws_binding, "sleep_until")
    async with running(options(Mode.REPLAY, cassette, timing=timing)) as url:
        replayed = await _timed_turn(url) if _backend() == "asyncio" else None
        if replayed is None:
            await turn(url)
    if factor == 0.0:
        assert spy.deadlines == []
        return
    got = spy.deadlines[-len(tail) :]
    assert [d - got[0] for d in got] == pytest.approx(
        [(t - tail[0]) * factor for t in tail], abs=1e-6
    )
    if replayed is not None:  # the wall clock: never early
        arrivals, sent = replayed
        offsets = [(t - anchor / 1000) * factor for t in tail]
        assert_not_early([a - sent for a in arrivals[-len(tail) :]], offsets)


async def _timed_turn(url: str) -> tuple[list[float], float]:
    """A turn on the asyncio client: when each event after response.create
    arrived, and when response.create was sent (the loop's clock)."""
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key=SDK_OPENAI_KEY, max_retries=0)
    arrivals: list[float] = []
    async with client.realtime.connect(model=MODEL) as connection:
        await connection.recv()
        for event in _client_events(USER)[:-1]:
            await connection.send(event)  # type: ignore[arg-type]
        sent = anyio.current_time()
        await connection.response.create()
        async for received in connection:
            if sent:
                arrivals.append(anyio.current_time())
            if received.type == "response.done":
                break
    return arrivals, sent
