"""Two identical upgrades at once: each session gets the recording its
client's messages match, whatever order the upgrades came in; order of
arrival decides only between sessions identical to the end."""

from __future__ import annotations

import json

import pytest

from reel_core import (
    Cassette,
    Config,
    Engine,
    Interaction,
    LocalProtocolError,
    Mode,
    RecordedRequest,
    RecordedResponse,
    Replay,
    Request,
    Timing,
)
from reel_core._ws_pool import SessionPool
from reel_core.tools import (
    WebSocketClose,
    WebSocketLog,
    WebSocketMessage,
    WebSocketReplay,
    WebSocketSignal,
    WebSocketStep,
)

TARGET = "/v1/realtime?model=gpt-realtime"
UPDATE = b'{"type":"session.update","session":{"instructions":"Be brief."}}'


def item(text: str) -> bytes:
    return json.dumps({"type": "conversation.item.create", "text": text}).encode()


def session_log(text: str, session_id: str) -> WebSocketLog:
    """An OpenAI-like session: ``session.created`` first, then the client's
    update (the same in every session) and its text, each answered."""
    m = WebSocketMessage
    return WebSocketLog(
        (
            m("server", 1.0, json.dumps({"type": "session.created", "id": session_id}).encode()),
            m("client", 10.0, UPDATE),
            m("server", 12.0, json.dumps({"type": "session.updated", "id": session_id}).encode()),
            m("client", 20.0, item(text)),
            m("server", 25.0, f"reply to {text}".encode()),
            m("server", 30.0, f"done {text}".encode()),
        ),
        WebSocketClose(1000, "", "client", 40.0),
    )


def upgrade_request() -> Request:
    return Request("GET", TARGET, ((b"host", b"x"), (b"upgrade", b"websocket")))


def cassette_of(*texts: str, extra: tuple[Interaction, ...] = ()) -> Cassette:
    cassette = Cassette("rt.jsonl")
    recorded = RecordedRequest("GET", "/v1/realtime", (("model", "gpt-realtime"),))
    key = recorded.key(cassette.keying)
    for n, text in enumerate(texts):
        cassette.add(
            Interaction(
                key,
                f"rec{n}",
                recorded,
                RecordedResponse(101, ()),
                provider="openai",
                websocket=session_log(text, f"sess_{n}"),
            ),
            played=False,
        )
    for interaction in extra:
        cassette.add(interaction, played=False)
    return cassette


def open_session(cassette: Cassette, mode: Mode = Mode.REPLAY) -> WebSocketReplay:
    """An upgrade through an engine of its own, as each proxy connection has."""
    engine = Engine(cassette, Config(mode=mode, timing=Timing.parse("fast")))
    engine.receive_request(upgrade_request())
    decision = engine.next_event()
    assert isinstance(decision, Replay)
    assert decision.websocket is not None
    assert decision.lease is not None
    return WebSocketReplay(
        decision.websocket,
        timing=engine.config.timing,
        match=engine.match,
        provider=decision.provider,
        interaction_id=decision.interaction_id,
        lease=decision.lease,
    )


def sent(replay: WebSocketReplay) -> list[bytes]:
    """Every server message the replay has for now (until it waits)."""
    out: list[bytes] = []
    while isinstance(step := replay.next_step(), WebSocketStep):
        out.append(step.data)
    return out


def test_sessions_get_their_own_recording_whatever_the_order_of_arrival() -> None:
    cassette = cassette_of("first", "second")
    x = open_session(cassette)  # arrives first, but says what "second" said
    y = open_session(cassette)
    assert sent(x) == [b'{"type": "session.created", "id": "sess_0"}']  # order of arrival
    assert sent(y) == [b'{"type": "session.created", "id": "sess_1"}']
    x.client_message(UPDATE, False, 0.1)
    y.client_message(UPDATE, False, 0.1)
    assert b"sess_0" in sent(x)[0]  # still ambiguous: each plays its own
    assert b"sess_1" in sent(y)[0]
    x.client_message(item("second"), False, 0.2)  # x and y trade places
    assert x.interaction_id == "rec1"
    assert sent(x) == [b"reply to second", b"done second"]
    y.client_message(item("first"), False, 0.3)
    assert y.interaction_id == "rec0"
    assert sent(y) == [b"reply to first", b"done first"]
    for replay in (x, y):
        replay.client_closed(1000, "", now=1.0)
        assert replay.miss is None
        assert replay.outcome == "complete: the client closed"


def test_a_session_moves_to_a_recording_no_one_holds() -> None:
    cassette = cassette_of("first", "second", "third")
    x = open_session(cassette)
    sent(x)
    x.client_message(UPDATE, False, 0.1)
    x.client_message(item("third"), False, 0.2)
    assert x.interaction_id == "rec2"
    # what was not sent yet comes from the recording played now
    assert sent(x) == [
        b'{"type": "session.updated", "id": "sess_2"}',
        b"reply to third",
        b"done third",
    ]
    # the recording x left is free for the next upgrade
    y = open_session(cassette)
    assert y.interaction_id == "rec0"


def test_the_first_message_decides_and_the_server_preamble_is_not_sent_twice() -> None:
    """A Gemini-like session whose first client message differs: the move
    comes at message 0, after the preamble of the first recording went."""
    cassette = cassette_of("a", "b")
    x = open_session(cassette)
    y = open_session(cassette)
    sent(x)
    x.client_message(b"other first message", False, 0.1)
    assert x.miss is not None  # neither recording says that: nothing moved
    assert x.interaction_id == "rec0"
    assert y.interaction_id == "rec1"


def test_two_sessions_that_want_the_same_recording_one_misses() -> None:
    cassette = cassette_of("first", "second")
    x, y = open_session(cassette), open_session(cassette)
    for replay in (x, y):
        sent(replay)
        replay.client_message(UPDATE, False, 0.1)
        sent(replay)
    y.client_message(item("first"), False, 0.2)  # y swaps with x (x could play rec1)
    assert sent(x) == []  # x looks, and follows
    assert (x.interaction_id, y.interaction_id) == ("rec1", "rec0")
    x.client_message(item("first"), False, 0.3)  # rec0 is y's, and y cannot play rec1
    assert y.miss is None
    assert x.miss is not None
    assert x.miss.interaction_id == "rec1"
    assert x.miss.client_message == 1
    assert "second" in x.miss.render()


def test_identical_sessions_keep_their_order_of_arrival() -> None:
    cassette = cassette_of("same", "same")
    x, y = open_session(cassette), open_session(cassette)
    for replay in (y, x):
        sent(replay)
        replay.client_message(UPDATE, False, 0.1)
        replay.client_message(item("same"), False, 0.2)
    assert [b"sess_0" in sent(x)[0], b"sess_1" in sent(y)[0]] == [True, True]
    assert (x.interaction_id, y.interaction_id) == ("rec0", "rec1")


def test_an_ended_session_is_not_swapped_and_a_repeat_plays_any_match() -> None:
    cassette = cassette_of("first", "second")
    x, y = open_session(cassette), open_session(cassette)
    sent(x)
    x.client_closed(now=0.5)  # x left before saying anything: rec0 stays served
    sent(y)
    y.client_message(UPDATE, False, 0.1)
    y.client_message(item("first"), False, 0.2)
    assert y.miss is not None  # rec0 went to x, which ended: no swap
    # past the recorded count, replay mode repeats: a repeat holds nothing
    # and plays whichever recording matches
    z = open_session(cassette)
    assert z.interaction_id == "rec1"
    sent(z)
    z.client_message(UPDATE, False, 0.1)
    z.client_message(item("first"), False, 0.2)
    assert z.interaction_id == "rec0"
    assert sent(z)[-2:] == [b"reply to first", b"done first"]
    z.client_message(b"more", False, 0.3)
    assert z.miss is not None
    assert "one message more" in z.miss.reason


def test_a_swapped_session_goes_on_from_the_same_place_on_its_schedule() -> None:
    """The session swapped by another's message moves too, when it next
    looks: after the same client message, as many server messages on, and
    its deadlines count from the new recording's offsets."""
    cassette = cassette_of("first", "second")
    x = open_session(cassette)
    y = open_session(cassette)
    x.timing = y.timing = Timing.parse("realtime")
    x.open(0.0)
    y.open(0.0)
    sent(x)
    x.client_message(UPDATE, False, 1.0)
    step = x.next_step()
    assert isinstance(step, WebSocketStep)
    assert b"sess_0" in step.data
    sent(y)
    y.client_message(UPDATE, False, 1.0)
    y.client_message(item("first"), False, 2.0)  # takes rec0 from x
    assert x.next_step() is WebSocketSignal.NEED_CLIENT  # x sent its update's answer
    x.client_message(item("second"), False, 3.0)
    assert x.interaction_id == "rec1"
    step = x.next_step()
    assert isinstance(step, WebSocketStep)
    assert step.data == b"reply to second"
    assert step.until == pytest.approx(3.005)


def test_a_refused_upgrade_under_the_same_key_is_no_candidate() -> None:
    """A recorded refusal (401) of the same upgrade replays as HTTP; the
    WebSocket sessions under the key are leased apart from it."""
    cassette = cassette_of()
    recorded = RecordedRequest("GET", "/v1/realtime", (("model", "gpt-realtime"),))
    key = recorded.key(cassette.keying)
    refused = Interaction(key, "refused", recorded, RecordedResponse(401, ()))
    cassette.add(refused, played=False)
    with pytest.raises(LocalProtocolError, match="no WebSocket session"):
        cassette.websocket_lease(key, cassette.keying)
    with pytest.raises(LocalProtocolError, match="no WebSocket session"):
        SessionPool(cassette._get).lease()
    session = Interaction(
        key, "ws", recorded, RecordedResponse(101, ()), websocket=session_log("a", "s")
    )
    cassette.add(session, played=False)
    first = cassette.websocket_lease(key, cassette.keying)
    again = cassette.websocket_lease(key, cassette.keying)  # a repeat: nothing new filed
    assert (first.interaction.id, first.held, again.held) == ("ws", True, False)
    cassette.clear()  # record mode starts afresh: no lease survives
    cassette.add(session, played=False)
    assert cassette.websocket_lease(key, cassette.keying).held


def test_a_pool_reads_its_recordings_through_the_lines_kept_parsed() -> None:
    """The pool keeps positions, not parsed sessions (issue 36: memory
    bounded by ``parsed_lines``): with one line kept parsed, sessions that
    arrived out of order trade places as above, each line read again."""
    cassette = cassette_of("first", "second", "third")
    cassette.parsed_lines = 1
    x = open_session(cassette)
    y = open_session(cassette)
    sent(x)
    sent(y)
    for replay in (x, y):
        replay.client_message(UPDATE, False, 0.1)
    x.client_message(item("second"), False, 0.2)
    assert x.interaction_id == "rec1"
    assert sent(x)[-2:] == [b"reply to second", b"done second"]
    y.client_message(item("first"), False, 0.3)
    assert y.interaction_id == "rec0"
    assert sent(y)[-2:] == [b"reply to first", b"done first"]
    assert len(cassette._lines.parsed) == 1
    (pool,) = cassette._pools.values()
    # positions, nothing parsed: a recording's client messages are read through the cassette
    assert all(isinstance(p, int) for p in pool._filed)
    assert not any(
        isinstance(v, (dict, list)) and v and not isinstance(next(iter(v)), int)
        for v in vars(pool).values()
    )
