"""pydantic-ai's WebSocket cassettes as Reel sessions: the upgrade told
from the messages (and said so), the messages as pydantic-ai's replay sends
them, offsets when the file has them, secrets scrubbed, and the session
replayed by the core's script, gated by the client's messages."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
import yaml

from reel_core import (
    Cassette,
    CassetteError,
    Config,
    Engine,
    Mode,
    Redactor,
    Replay,
    Request,
    Signal,
    Timing,
)
from reel_core._formats import Exchange, ImportReport, Skipped, import_exchanges, pydantic_ws
from reel_core.tools import (
    WebSocketClose,
    WebSocketReplay,
    WebSocketSignal,
    import_refusal,
    import_source,
    read_line,
    sniff_format,
)
from tests.secrets import OPENAI_KEY

GEMINI_PATH = "/ws/google.ai.generativelanguage.v1.GenerativeService.BidiGenerateContent"
SETUP = {"setup": {"model": "models/gemini-live-2.5-flash", "generationConfig": {}}}
TURN = {"client_content": {"turns": [{"parts": [{"text": "Hi"}], "role": "user"}]}}
DONE = {"serverContent": {"turnComplete": True}, "usageMetadata": {"promptTokenCount": 9}}


def cassette(*entries: dict[str, Any], version: Any = 1, kind: bool = True) -> bytes:
    """A file as pydantic-ai writes it (``yaml.safe_dump``, keys in order)."""
    items = [({"kind": "message"} if kind else {}) | e for e in entries]
    return yaml.safe_dump(
        {"version": version, "interactions": items}, sort_keys=False, allow_unicode=True
    ).encode()


def sent(data: Any, **more: Any) -> dict[str, Any]:
    return {"direction": "sent", **more, "data": data}


def received(data: Any, **more: Any) -> dict[str, Any]:
    return {"direction": "received", **more, "data": data}


GEMINI = cassette(
    sent(SETUP),
    received({"setupComplete": {}}),
    sent(TURN),
    received({"serverContent": {"modelTurn": {"parts": [{"text": "Hello"}]}}}),
    received(DONE),
)
OPENAI_EVENTS = [
    received({"type": "session.created", "event_id": "event_1", "session": {"model": "gpt-rt"}}),
    sent({"type": "session.update", "session": {"instructions": "Be brief."}}),
    received({"type": "session.updated", "event_id": "event_2", "session": {"model": "gpt-rt"}}),
    sent({"type": "response.create"}),
    received({"type": "response.done", "event_id": "event_3", "response": {"usage": {}}}),
]


def imported(data: bytes, redactor: Redactor | None = None) -> ImportReport:
    return import_source("pydantic-ws", data, "f.yaml", redactor or Redactor())


def test_a_gemini_session_is_one_interaction_on_the_live_path() -> None:
    assert sniff_format(GEMINI) == "pydantic-ws"
    assert import_refusal(GEMINI) is None
    report = imported(GEMINI)
    assert report.total == 1
    assert report.failures == []
    (session,) = report.interactions
    assert session.request.method == "GET"
    assert session.request.path == GEMINI_PATH
    assert session.response.status == 101
    assert session.provider == "gemini"
    assert session.websocket is not None
    messages = session.websocket.messages
    assert [m.sender for m in messages] == ["client", "server", "client", "server", "server"]
    # as pydantic-ai's replay sends them: json.dumps of the stored value
    assert messages[0].data == json.dumps(SETUP).encode()
    assert [m.at_ms for m in messages] == [0.0] * 5
    assert session.websocket.close is None  # the file keeps none: the client ends it
    assert session.meta["imported"] == "pydantic-ai-websocket"
    assert session.meta["model"] == "gemini-live-2.5-flash"
    assert session.meta["tokens_in"] == 9
    assert (session.meta["total_ms"], session.meta["ttft_ms"], session.meta["ttfb_ms"]) == (
        None,
        None,
        None,
    )
    notes = [note for _, note in report.notes]
    assert any("assumed Gemini Live" in n and GEMINI_PATH in n for n in notes)
    assert any("no timing in the file" in n for n in notes)
    assert any("no close in the file" in n for n in notes)
    # the line reads back whole
    assert read_line(session.to_line()) == session


def test_an_openai_session_names_the_model_the_server_named() -> None:
    report = imported(cassette(*OPENAI_EVENTS))
    (session,) = report.interactions
    assert session.provider == "openai"
    assert (session.request.path, session.request.query) == ("/v1/realtime", (("model", "gpt-rt"),))
    note = report.notes[0][1]
    assert "assumed OpenAI Realtime" in note
    assert "?model=gpt-rt" in note
    assert "sideband" not in note


def test_a_sideband_session_says_it_dialled_otherwise() -> None:
    report = imported(cassette(*OPENAI_EVENTS[1:]))
    (session,) = report.interactions
    assert session.request.query == (("model", "gpt-rt"),)
    assert "call_id" in report.notes[0][1]


def test_an_openai_session_without_a_model() -> None:
    report = imported(cassette(sent({"type": "session.update"}), received({"type": "error.x"})))
    (session,) = report.interactions
    assert (session.request.path, session.request.query) == ("/v1/realtime", ())
    assert "no model named" in report.notes[0][1]


def test_older_files_without_kind_and_setup_complete_alone() -> None:
    data = cassette(received({"setupComplete": {}}), kind=False)
    assert sniff_format(data) == "pydantic-ws"
    (session,) = imported(data).interactions
    assert session.request.path == GEMINI_PATH


def test_offsets_come_from_at_and_never_go_back() -> None:
    data = cassette(
        sent(SETUP, at=0.0),
        received({"setupComplete": {}}, at=0.012),
        sent(TURN),  # no at: the last offset
        # earlier than the one before: kept in order, at the last offset
        received({"serverContent": {"modelTurn": {"parts": [{"text": "Hi"}]}}}, at=0.010),
        received(DONE, at=1.5),
    )
    report = imported(data)
    (session,) = report.interactions
    assert session.websocket is not None
    assert [m.at_ms for m in session.websocket.messages] == [0.0, 12.0, 12.0, 12.0, 1500.0]
    assert session.meta["total_ms"] == 1500.0
    assert session.meta["ttft_ms"] == 12.0  # the model's first part
    assert not any("no timing" in note for _, note in report.notes)


def test_text_binary_and_other_kinds() -> None:
    data = cassette(
        sent(SETUP),
        received("plain text, no JSON"),
        received(b"\x00\x01audio"),
        {"kind": "http", "request": {"method": "GET"}},
        received(DONE),
    )
    report = imported(data)
    (session,) = report.interactions
    assert session.websocket is not None
    messages = session.websocket.messages
    assert [(m.data, m.binary) for m in messages[1:3]] == [
        (b"plain text, no JSON", False),
        (b"\x00\x01audio", True),
    ]
    assert len(messages) == 4
    assert ("left out, not WebSocket messages: entries 3 (http)") in [n for _, n in report.notes]


def test_secrets_in_messages_never_reach_the_cassette() -> None:
    secret = "ek_opaque_ephemeral_value_0001"
    key = OPENAI_KEY
    data = cassette(
        sent({"type": "session.update", "session": {"client_secret": {"value": secret}}}),
        received({"type": "session.updated", "echo": f"{secret} and {key}"}),
    )
    (session,) = imported(data).interactions
    line = session.to_line()
    assert secret.encode() not in line
    assert key.encode() not in line
    assert b"REDACTED" in line


@pytest.mark.parametrize(
    ("entries", "why"),
    [
        ([sent(SETUP), "a string"], "entry 1 is a str, not a mapping"),
        ([{"direction": "up", "data": {}}], "entry 0 has direction 'up': sent or received"),
        ([{"direction": "sent"}], "entry 0 has no data"),
        ([sent(SETUP, at="soon")], "entry 0 has at 'soon': seconds, a number >= 0"),
        ([sent(SETUP, at=-1)], "entry 0 has at -1"),
        ([sent(SETUP, at=True)], "entry 0 has at True"),
        ([{"kind": "http"}], "no messages: nothing to replay"),
        (
            [sent({"type": "conversation_initiation_client_data"})],
            "cannot tell which service this session talked to",
        ),
        ([sent([1, 2])], "cannot tell which service"),
    ],
)
def test_a_session_that_cannot_be_built_is_skipped_with_why(entries: list[Any], why: str) -> None:
    data = yaml.safe_dump({"version": 1, "interactions": entries}).encode()
    (item,) = pydantic_ws.parse(data, "f.yaml")
    assert isinstance(item, Skipped)
    assert item.reason.startswith(why)


def test_values_yaml_holds_and_json_does_not() -> None:
    date = b"version: 1\ninteractions:\n- direction: sent\n  data: {setup: {}, when: 2026-01-02}\n"
    (item,) = pydantic_ws.parse(date, "f.yaml")
    assert isinstance(item, Skipped)
    assert item.reason.startswith("a message is no JSON value")
    tagged = b"version: 1\ninteractions:\n- direction: sent\n  data: !!python/object:os.system {}\n"
    (item,) = pydantic_ws.parse(tagged, "f.yaml")
    assert isinstance(item, Skipped)
    assert "!!python/object:os.system" in item.reason


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"- just\n- a list\n", 'no "interactions" list at the top (found list)'),
        (b"version: 1\ninteractions: {}\n", 'no "interactions" list'),
        (cassette(sent(SETUP), version=2), "version 2: Reel reads version 1 only"),
    ],
)
def test_not_this_format_at_all(data: bytes, why: str) -> None:
    with pytest.raises(CassetteError) as caught:
        pydantic_ws.parse(data, "f.yaml")
    assert why in caught.value.reason


@pytest.mark.parametrize(
    "data",
    [
        GEMINI.replace(b"kind: message", b"kind: llm"),  # AgentTape-like kinds
        GEMINI + b"- request:\n    uri: https://x/\n",  # an HTTP interaction: vcrpy's
        GEMINI.replace(b"interactions:", b"samples:"),
        b"",
    ],
)
def test_near_misses_are_not_sniffed(data: bytes) -> None:
    assert not pydantic_ws.sniff(data)


def upgrade_request(target: str) -> Request:
    return Request("GET", target, ((b"host", b"127.0.0.1"), (b"upgrade", b"websocket")))


def test_the_import_replays_gated_by_the_client() -> None:
    """The engine matches a client's upgrade on the assumed path; the
    script sends each server message once the client message before it
    came, and a changed client message stops it."""
    report = imported(cassette(*OPENAI_EVENTS))
    store = Cassette("c.jsonl", report.meta)
    for interaction in report.interactions:
        store.add(interaction)
    engine = Engine(store, Config(mode=Mode.REPLAY))
    engine.receive_request(upgrade_request("/v1/realtime?model=gpt-rt"))
    decision = engine.next_event()
    assert isinstance(decision, Replay)
    assert decision.websocket is not None
    while not isinstance(engine.next_event(), Signal):
        pass

    def run(client: list[bytes]) -> tuple[list[bytes], WebSocketReplay]:
        assert decision.websocket is not None
        script = WebSocketReplay(decision.websocket, timing=Timing(), provider="openai")
        script.open(0.0)
        out: list[bytes] = []
        while (step := script.next_step()) is not WebSocketSignal.DONE:
            if step is WebSocketSignal.NEED_CLIENT:
                if not client:
                    script.client_closed(1000, now=1.0)
                    continue
                script.client_message(client.pop(0), False, 0.5)
                continue
            out.append(step.data)
        return out, script

    client = [json.dumps(e["data"]).encode() for e in OPENAI_EVENTS if e["direction"] == "sent"]
    out, script = run(list(client))
    expected = [e["data"] for e in OPENAI_EVENTS if e["direction"] == "received"]
    assert [json.loads(d) for d in out] == expected
    assert script.outcome == "complete: the client closed"
    changed = [client[0].replace(b"Be brief.", b"Be long."), client[1]]
    out, script = run(changed)
    assert script.miss is not None
    assert script.miss.client_message == 0
    assert [json.loads(d)["type"] for d in out if d] == ["session.created", "error"]


def test_a_session_exchange_with_a_close_keeps_it_redacted() -> None:
    """Another importer may know the close: it is kept (its reason
    scrubbed like every message), and the offsets count as timing."""
    (item,) = pydantic_ws.parse(GEMINI, "f.yaml")
    assert isinstance(item, Exchange)
    assert item.websocket is not None
    key = OPENAI_KEY
    close = WebSocketClose(1008, f"bad key {key}", "server", 250.0)
    with_close = replace(item, websocket=replace(item.websocket, close=close))
    assert with_close.timed
    report = import_exchanges([with_close], tool="t", redactor=Redactor())
    (session,) = report.interactions
    assert session.websocket is not None
    assert session.websocket.close is not None
    assert (session.websocket.close.code, session.websocket.close.by) == (1008, "server")
    assert key not in session.websocket.close.reason
    assert session.meta["total_ms"] == 250.0
