"""gRPC sessions: client-streaming and bidirectional calls recorded and
replayed message by message, gated by the client's messages."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reel_core import (
    Cassette,
    Config,
    Cut,
    EndOfResponse,
    Engine,
    Event,
    Forward,
    Frame,
    Interaction,
    LocalProtocolError,
    MatchConfig,
    MatchMode,
    Miss,
    MissError,
    Mode,
    Recorded,
    RecordedResponse,
    Redactor,
    Replay,
    Request,
    ResponseHead,
    Signal,
    StreamCut,
    Timing,
    Trailers,
)
from reel_core._grpc_log import GRPC_SESSION, GrpcLog, GrpcMessage, grpc_in, scrub_message
from reel_core._grpc_rule import as_session, is_grpc_session, plays_as_session
from reel_core._grpc_session import GrpcCallRecorder, GrpcCallReplay, session_miss
from reel_core._interaction import interaction_from_json
from reel_core.tools import GrpcStatus, grpc_frame

from ._helpers import pull

PATH = "/pkg.Chat/Talk"
TOKEN = "sk-proj-" + "Zx8Cv6Bn4Mq2Wr0Ty7Ui" * 3
HEADERS = (
    (b"content-type", b"application/grpc"),
    (b"te", b"trailers"),
    (b"authorization", b"Bearer " + TOKEN.encode()),
)
GRPC_HEAD = ((b"content-type", b"application/grpc"),)
OK = ((b"grpc-status", b"0"), (b"grpc-message", b""))


@dataclass(frozen=True)
class Entry:
    """One thing that crossed a call: a message (framed) or a side's end."""

    sender: str
    at: float  # seconds after the call started
    data: bytes = b""
    end: bool = False


def c(data: bytes, at: float) -> Entry:
    return Entry("client", at, grpc_frame(data))


def s(data: bytes, at: float) -> Entry:
    return Entry("server", at, grpc_frame(data))


def c_end(at: float) -> Entry:
    return Entry("client", at, end=True)


def s_end(at: float) -> Entry:
    return Entry("server", at, end=True)


def client_messages(conversation: Sequence[Entry]) -> list[bytes]:
    return [e.data for e in conversation if e.sender == "client" and not e.end]


def record(
    conversation: Sequence[Entry],
    cassette: Cassette | None = None,
    *,
    whole: bool = False,
    mode: Mode = Mode.RECORD,
    trailers: tuple[tuple[bytes, bytes], ...] = OK,
    cut: bool = False,
) -> tuple[Cassette, Recorded | None]:
    """``conversation`` recorded through an engine and a recorder, as a
    binding would: the request holds the first client message (all of
    them, ``whole``: a call forwarded at its end)."""
    cassette = cassette if cassette is not None else Cassette("c.jsonl")
    engine = Engine(cassette, Config(mode=mode))
    sent = client_messages(conversation)
    body = b"".join(sent) if whole else (sent[0] if sent else b"")
    engine.receive_request(Request("POST", PATH, HEADERS, body))
    assert isinstance(engine.next_event(), Forward)
    recorder = GrpcCallRecorder(engine.redactor, opened=0.0)
    headed = False
    for e in conversation:
        if e.sender == "client":
            if e.end:
                recorder.client_end(e.at)
            else:
                recorder.client_message(e.data, e.at)
            continue
        if not headed:
            engine.upstream_head(200, GRPC_HEAD, mono=e.at, sent_at=0.0)
            headed = True
        if not e.end:
            engine.upstream_data(e.data, mono=e.at)
            recorder.server_message(e.data, e.at)
        elif cut:
            from reel_core import UpstreamError

            engine.upstream_error(UpstreamError.RESET, mono=e.at)
            recorder.ended(e.at)
        else:
            engine.upstream_trailers(trailers, mono=e.at)
            engine.upstream_end(mono=e.at)
            recorder.ended(e.at)
    pull(engine)
    return cassette, recorder.record(engine)


def reloaded(cassette: Cassette) -> Cassette:
    """The cassette read back from its bytes, as a later run reads it."""
    return Cassette.loads(cassette.dumps(), name="c.jsonl")


def replay_of(
    cassette: Cassette,
    first: bytes,
    *,
    timing: str = "fast",
    match: MatchConfig | None = None,
    opened: float = 0.0,
) -> GrpcCallReplay:
    """A call decided on its first message, played as a session."""
    engine = Engine(cassette, Config(mode=Mode.REPLAY, timing=Timing.parse(timing), match=match))
    assert engine.streams_call(Request("POST", PATH, HEADERS, b""))
    engine.receive_request(Request("POST", PATH, HEADERS, first))
    events, _ = pull(engine)
    decision = events[0]
    assert isinstance(decision, Replay), decision
    assert decision.grpc is not None
    assert isinstance(events[1], ResponseHead)
    assert isinstance(events[-1], EndOfResponse)  # the engine's part is over: the head
    replay = GrpcCallReplay.for_engine(engine, decision)
    replay.open(opened, first=bool(first))
    return replay


def drain(replay: GrpcCallReplay) -> tuple[list[Event], Signal]:
    events: list[Event] = []
    while True:
        event = replay.next_event()
        if isinstance(event, Signal):
            return events, event
        events.append(event)


def frames(events: Sequence[Event]) -> list[bytes]:
    return [e.data for e in events if isinstance(e, Frame)]


def deadlines(
    events: Sequence[Event], kinds: tuple[type, ...] = (Frame, Trailers, EndOfResponse)
) -> list[float]:
    """The deadlines of ``events`` of ``kinds`` (a replay's are never ``None``)."""
    out = []
    for e in events:
        if isinstance(e, kinds):
            assert isinstance(e, (Frame, Trailers, EndOfResponse, Cut))
            assert e.at is not None
            out.append(e.at)
    return out


def trailer(events: Sequence[Event], name: bytes) -> bytes:
    found = [dict(e.headers)[name] for e in events if isinstance(e, Trailers)]
    assert len(found) == 1
    return found[0]


def status_of(events: Sequence[Event]) -> int | None:
    for e in events:
        if isinstance(e, Trailers):
            return int(dict(e.headers)[b"grpc-status"])
    return None


# -- generated conversations -----------------------------------------------------------


@st.composite
def conversations(draw: st.DrawFn, *, first: bool = True) -> list[Entry]:
    """Any call: up to five client messages (the first one first, with
    ``first``), up to four server messages, the client's end or not, in any
    interleaving and timing; the call's end last."""
    n_client = draw(st.integers(1 if first else 0, 5))
    n_server = draw(st.integers(0, 4))
    payloads = st.binary(max_size=12)
    client: list[tuple[str, bytes]] = [("c", draw(payloads) + bytes([i])) for i in range(n_client)]
    if draw(st.booleans()):
        client.append(("e", b""))
    server = [("s", draw(payloads)) for _ in range(n_server)]
    order: list[tuple[str, bytes]] = []
    if first and client:
        order.append(client.pop(0))
    while client or server:
        if client and (not server or draw(st.booleans())):
            order.append(client.pop(0))
        else:
            order.append(server.pop(0))
    at = 0
    out = []
    for kind, data in order:
        at += draw(st.integers(0, 40))
        t = at / 1000.0
        out.append(c_end(t) if kind == "e" else (c if kind == "c" else s)(data, t))
    at += draw(st.integers(0, 40))
    out.append(s_end(at / 1000.0))
    return out


#: A session whose first message no generated conversation has.
ANOTHER_SESSION = [c(b"another session" * 2, 0.0), c(b"2", 0.0), s_end(0.01)]


def oracle(conversation: Sequence[Entry]) -> bool:
    """Whether a call is a session, said otherwise than ``is_grpc_session``:
    more than one client message, or a server entry before the client's end."""
    sent = len(client_messages(conversation))
    ends = [i for i, e in enumerate(conversation) if e.sender == "client" and e.end]
    servers = [i for i, e in enumerate(conversation) if e.sender == "server"]
    end = ends[0] if ends else len(conversation)
    return sent > 1 or (bool(servers) and servers[0] < end)


def log_of(conversation: Sequence[Entry]) -> list[GrpcMessage]:
    return [GrpcMessage(e.sender, e.at * 1000, e.data, e.end) for e in conversation]


@given(conversations(first=False))
def test_a_call_is_a_session_by_the_one_rule(conversation: list[Entry]) -> None:
    assert is_grpc_session(log_of(conversation)) is oracle(conversation)
    # and any prefix of it (the call as it stood at any moment) too
    for n in range(len(conversation)):
        assert is_grpc_session(log_of(conversation[:n])) is oracle(conversation[:n])


def test_the_rules_examples() -> None:
    unary = [c(b"q", 0.0), c_end(0.0), s(b"a", 0.01), s_end(0.02)]
    server_streaming = [c(b"q", 0.0), c_end(0.0), s(b"a", 0.01), s(b"b", 0.02), s_end(0.03)]
    client_streaming = [c(b"1", 0.0), c(b"2", 0.01), c_end(0.02), s(b"sum", 0.03), s_end(0.03)]
    bidi = [c(b"1", 0.0), s(b"a", 0.01), s_end(0.03)]
    aborted = [c(b"1", 0.0), s_end(0.01)]  # the server ended it with the client's stream open
    assert not is_grpc_session(log_of(unary))
    assert not is_grpc_session(log_of(server_streaming))
    assert is_grpc_session(log_of(client_streaming))
    assert is_grpc_session(log_of(bidi))
    assert is_grpc_session(log_of(aborted))
    assert not is_grpc_session([])


@settings(max_examples=60, deadline=None)
@given(conversations())
def test_a_replay_with_the_same_client_messages_gives_the_recorded_answers_gated(
    conversation: list[Entry],
) -> None:
    cassette = Cassette("c.jsonl")
    record(ANOTHER_SESSION, cassette)  # the path plays as sessions, a unary call's too
    cassette, recorded = record(conversation, cassette)
    assert recorded is not None
    line = json.loads(recorded.line)
    assert (line["response"].get("stream") == GRPC_SESSION) is oracle(conversation)
    replay = replay_of(reloaded(cassette), client_messages(conversation)[0])
    got: list[bytes] = []
    server_so_far: list[bytes] = []
    for e in conversation[1:]:
        if e.sender == "server":
            if not e.end:
                server_so_far.append(e.data)
            continue
        # before the client's next entry: exactly what was recorded before it
        events, signal = drain(replay)
        assert signal is Signal.NEED_DATA
        assert not any(isinstance(x, (Trailers, EndOfResponse)) for x in events)
        got += frames(events)
        assert got == server_so_far
        if e.end:
            replay.client_end(1.0)
        else:
            replay.client_message(e.data, 1.0)
    events, signal = drain(replay)
    got += frames(events)
    assert got == server_so_far
    assert signal is Signal.CLOSED
    assert status_of(events) == 0
    assert isinstance(events[-1], EndOfResponse)
    assert replay.miss is None
    # a client that sends everything before pulling anything gets the same
    eager = replay_of(reloaded(cassette), client_messages(conversation)[0])
    for e in conversation[1:]:
        if e.sender == "client":
            if e.end:
                eager.client_end(1.0)
            else:
                eager.client_message(e.data, 1.0)
    events, signal = drain(eager)
    assert frames(events) == server_so_far
    assert status_of(events) == 0


@settings(max_examples=60, deadline=None)
@given(conversations(), st.data())
def test_a_changed_client_message_gets_not_found_there_and_nothing_after(
    conversation: list[Entry], data: st.DataObject
) -> None:
    sent = client_messages(conversation)
    if len(sent) < 2:
        return
    k = data.draw(st.integers(1, len(sent) - 1))
    eager = data.draw(st.booleans())  # the client sends before pulling what is due
    cassette = Cassette("c.jsonl")
    record(ANOTHER_SESSION, cassette)
    cassette, _ = record(conversation, cassette)
    replay = replay_of(reloaded(cassette), sent[0])
    got: list[bytes] = []
    before: list[bytes] = []  # the server messages recorded before client message k
    seen = 0
    for e in conversation[1:]:
        if e.sender == "server":
            if not e.end and seen < k:
                before.append(e.data)
            continue
        if not eager:
            events, _ = drain(replay)
            got += frames(events)
        if e.end:
            replay.client_end(1.0)
            continue
        seen += 1
        if seen == k:
            replay.client_message(e.data + b"!", 1.0)  # changed
            break
        replay.client_message(e.data, 1.0)
    events, signal = drain(replay)
    got += frames(events)
    # what answered the messages that matched, and nothing recorded after
    assert got == before
    assert signal is Signal.CLOSED
    assert status_of(events) == GrpcStatus.NOT_FOUND
    assert replay.miss is not None
    assert f"client message {k} " in replay.miss.reason
    # what comes after the miss is let go
    replay.client_message(sent[-1], 2.0)
    replay.client_end(2.0)
    assert replay.next_event() is Signal.CLOSED


def test_what_answered_the_matching_messages_goes_out_before_not_found() -> None:
    """The client sends a changed message before the binding pulled what
    the matching ones released: those answers go out, then NOT_FOUND."""
    conversation = [c(b"1", 0.0), s(b"a", 0.01), c(b"2", 0.02), s(b"b", 0.03), s_end(0.04)]
    cassette, _ = record(conversation)
    replay = replay_of(reloaded(cassette), grpc_frame(b"1"), timing="realtime")
    replay.client_message(grpc_frame(b"two"), 0.001)
    events, signal = drain(replay)
    assert frames(events) == [grpc_frame(b"a")]
    assert status_of(events) == GrpcStatus.NOT_FOUND
    assert deadlines(events) == pytest.approx([0.01, 0.01, 0.01])
    assert signal is Signal.CLOSED


def test_a_client_message_after_the_clients_end_is_a_binding_error() -> None:
    cassette, _ = record([c(b"1", 0.0), c_end(0.0), s_end(0.01)])
    replay = GrpcCallReplay(as_session(cassette.interactions()[0]))
    replay.open(0.0)
    replay.client_end(0.0)
    with pytest.raises(LocalProtocolError, match="after the client ended"):
        replay.client_message(grpc_frame(b"2"), 0.0)


def test_one_message_more_than_recorded_is_not_found() -> None:
    conversation = [c(b"1", 0.0), c(b"2", 0.01), c_end(0.02), s(b"sum", 0.03), s_end(0.04)]
    cassette, _ = record(conversation)
    replay = replay_of(reloaded(cassette), grpc_frame(b"1"))
    replay.client_message(grpc_frame(b"2"), 0.01)
    replay.client_message(grpc_frame(b"3"), 0.02)
    events, _signal = drain(replay)
    assert frames(events) == []
    assert status_of(events) == GrpcStatus.NOT_FOUND
    assert replay.miss is not None
    summary = replay.miss.summary()
    assert "one more than the recording holds (2 from the client)" in summary
    assert "(similarity 1.00) differs at message" in summary
    assert replay.miss.closest is not None
    assert replay.miss.closest.diffs[0].kind == "added"
    grpc_message = trailer(events, b"grpc-message")
    assert grpc_message.startswith(b"Reel miss: gRPC session ")
    assert grpc_message.isascii()


def test_an_end_before_the_recorded_messages_is_not_found() -> None:
    conversation = [c(b"1", 0.0), c(b"2", 0.01), c_end(0.02), s(b"sum", 0.03), s_end(0.04)]
    cassette, _ = record(conversation)
    replay = replay_of(reloaded(cassette), grpc_frame(b"1"))
    replay.client_end(0.01)
    events, _ = drain(replay)
    assert frames(events) == []
    assert status_of(events) == GrpcStatus.NOT_FOUND
    assert replay.miss is not None
    assert "ended its stream after 1 of the 2 messages" in replay.miss.reason
    assert replay.miss.closest is not None
    assert replay.miss.closest.score == 0.5
    assert replay.miss.closest.diffs[0].kind == "removed"


def test_a_message_the_recorded_server_never_heard_changes_nothing() -> None:
    """The recorded server ended the call with the client's stream open:
    a client message past the recorded ones came after that end."""
    conversation = [c(b"1", 0.0), s(b"bye", 0.01), s_end(0.02)]
    cassette, _ = record(conversation)
    replay = replay_of(reloaded(cassette), grpc_frame(b"1"))
    replay.client_message(grpc_frame(b"late"), 0.001)
    events, signal = drain(replay)
    assert frames(events) == [grpc_frame(b"bye")]
    assert status_of(events) == 0
    assert signal is Signal.CLOSED
    assert replay.miss is None


def test_the_miss_report_is_a_miss_report_like_every_miss() -> None:
    conversation = [c(b"1", 0.0), c(b"2", 0.01), c_end(0.02), s(b"sum", 0.03), s_end(0.04)]
    cassette, _ = record(conversation)
    replay = replay_of(reloaded(cassette), grpc_frame(b"1"))
    replay.client_message(grpc_frame(b"two"), 0.01)
    report = replay.miss
    assert report is not None
    assert report.cassette == "c.jsonl"
    assert report.mode == "replay"
    assert report.method == "POST"
    assert report.path == PATH
    assert report.closest is not None
    assert report.closest.diffs[0].path == "message"
    assert "grpc.messages[1]" in report.reason
    with pytest.raises(MissError, match="left its recording"):
        raise MissError(report)
    assert TOKEN not in report.render()


# -- timing ----------------------------------------------------------------------------

TIMED = [
    c(b"1", 0.0),
    s(b"a", 0.010),
    c(b"2", 0.100),
    s(b"b", 0.130),
    c_end(0.200),
    s(b"c", 0.210),
    s_end(0.250),
]


@pytest.mark.parametrize(
    ("timing", "expected"),
    [
        # each deadline counts from its gate's arrival on the replay's clock
        ("realtime", [0.010, 0.5 + 0.030, 0.6 + 0.010, 0.6 + 0.050]),
        ("slow=2", [0.020, 0.5 + 0.060, 0.6 + 0.020, 0.6 + 0.100]),
        ("fast", [0.0, 0.5, 0.6, 0.6]),
    ],
)
def test_deadlines_count_from_the_gating_client_message(timing: str, expected: list[float]) -> None:
    cassette, _ = record(TIMED)
    clock = 100.0  # the binding's clock when the call was decided
    replay = replay_of(reloaded(cassette), grpc_frame(b"1"), timing=timing, opened=clock)
    first, signal = drain(replay)
    assert signal is Signal.NEED_DATA
    replay.client_message(grpc_frame(b"2"), clock + 0.5)
    second, _ = drain(replay)
    replay.client_end(clock + 0.6)
    rest, _ = drain(replay)
    ats = deadlines([*first, *second, *rest], (Frame, Trailers))
    assert ats == pytest.approx(expected)
    assert isinstance(rest[-1], EndOfResponse)
    assert rest[-1].at == pytest.approx(expected[-1])


def test_a_client_slower_than_recorded_never_makes_a_deadline_go_back() -> None:
    cassette, _ = record(TIMED)
    replay = replay_of(reloaded(cassette), grpc_frame(b"1"), timing="realtime")
    replay.client_message(grpc_frame(b"2"), 0.0)  # faster than recorded: the 10 ms one first
    replay.client_end(0.0)
    events, _ = drain(replay)
    ats = deadlines(events)
    assert ats == sorted(ats)
    assert frames(events) == [grpc_frame(b"a"), grpc_frame(b"b"), grpc_frame(b"c")]


# -- redaction -------------------------------------------------------------------------


def test_a_secret_inside_a_client_message_is_not_on_disk_and_still_matches() -> None:
    second = b"note: use " + TOKEN.encode() + b" now"
    conversation = [c(b"hello", 0.0), c(second, 0.01), c_end(0.02), s(b"ok", 0.03), s_end(0.04)]
    cassette, recorded = record(conversation)
    assert recorded is not None
    disk = cassette.dumps()
    assert TOKEN.encode() not in disk
    log = reloaded(cassette).interactions()[0].grpc
    assert log is not None
    stored = log.messages[1].data
    assert int.from_bytes(stored[1:5], "big") == len(stored) - 5  # a true prefix
    # the replayed client sends the same message, secret and all: it matches
    replay = replay_of(reloaded(cassette), grpc_frame(b"hello"))
    replay.client_message(grpc_frame(second), 0.01)
    replay.client_end(0.02)
    events, _ = drain(replay)
    assert frames(events) == [grpc_frame(b"ok")]
    assert replay.miss is None


def test_the_logs_redaction_is_the_one_rule() -> None:
    redactor = Redactor()
    frame = grpc_frame(b"k=" + TOKEN.encode())
    log = GrpcLog((GrpcMessage("client", 0.0, frame), GrpcMessage("server", 1.0, end=True)))
    found: list[tuple[str, list[str]]] = []
    redacted = log.redacted(redactor, lambda where, kinds: found.append((where, kinds)))
    assert redacted.messages[0].data == scrub_message(frame, redactor)
    assert TOKEN.encode() not in redacted.messages[0].data
    assert found[0][0] == "grpc.messages[0]"
    assert found[0][1]
    assert redacted.messages[1] is log.messages[1]
    assert log.redacted(redactor) != log


def test_reel_redact_rewrites_a_sessions_messages() -> None:
    conversation = [c(b"hi", 0.0), c(b"x", 0.01), s(b"y", 0.02), s_end(0.03)]
    cassette, _ = record(conversation)
    stored = reloaded(cassette).interactions()[0]
    assert stored.grpc is not None
    secret = replace(
        stored,
        grpc=GrpcLog(
            (GrpcMessage("client", 0.0, grpc_frame(TOKEN.encode())), *stored.grpc.messages[1:])
        ),
    )
    again = secret.redacted(Redactor(), MatchConfig())
    assert again.grpc is not None
    assert TOKEN.encode() not in again.to_line()


# -- the line --------------------------------------------------------------------------


def test_a_session_line_reads_back_as_it_was_written() -> None:
    conversation = [c(b"1", 0.0), s(b"a", 0.005), c(b"2", 0.01), c_end(0.02), s_end(0.03)]
    cassette, recorded = record(conversation)
    assert recorded is not None
    line = json.loads(recorded.line)
    assert line["response"]["stream"] == GRPC_SESSION
    assert "frames" not in line["response"]
    assert line["response"]["end"] == {"at": 30.0}
    assert line["response"]["trailers"] == [["grpc-status", "0"], ["grpc-message", ""]]
    assert [m["from"] for m in line["grpc"]["messages"]] == [
        "client",
        "server",
        "client",
        "client",
        "server",
    ]
    assert line["grpc"]["messages"][3] == {"from": "client", "at": 20.0, "end": True}
    assert line["meta"]["shape"] == GRPC_SESSION
    assert line["meta"]["client_messages"] == 2
    back = interaction_from_json(line)
    assert back.request.body == grpc_frame(b"1")  # the first message
    assert back == cassette.interactions()[0]
    assert back.to_line() == recorded.line


def test_a_cut_session_keeps_its_cut() -> None:
    conversation = [c(b"1", 0.0), c(b"2", 0.01), s(b"a", 0.02), s_end(0.05)]
    cassette, recorded = record(conversation, cut=True)
    assert recorded is not None
    line = json.loads(recorded.line)
    assert line["response"]["cut"]["at"] == 50.0
    replay = replay_of(reloaded(cassette), grpc_frame(b"1"))
    replay.client_message(grpc_frame(b"2"), 0.01)
    events, signal = drain(replay)
    assert frames(events) == [grpc_frame(b"a")]
    assert isinstance(events[-1], Cut)
    assert signal is Signal.CLOSED


BAD_LOGS = [
    ({"messages": "no"}, '"grpc" must be an object'),
    ([], '"grpc" must be an object'),
    ({"messages": [1]}, r'"grpc.messages\[0\]" must be an object'),
    ({"messages": [{"from": "proxy", "at": 0}]}, 'must be "client" or "server"'),
    ({"messages": [{"from": "client", "at": -1}]}, "milliseconds"),
    (
        {"messages": [{"from": "client", "at": 5, "base64": ""}, {"from": "client", "at": 1}]},
        "goes back in time",
    ),
    ({"messages": [{"from": "client", "at": 0, "base64": "!!"}]}, '"base64" or be an "end"'),
    ({"messages": [{"from": "client", "at": 0}]}, '"base64" or be an "end"'),
    ({"messages": [{"from": "client", "at": 0, "end": 1}]}, "must be true"),
    ({"messages": [{"from": "client", "at": 0, "end": True, "base64": ""}]}, "holds no"),
    (
        {"messages": [{"from": "client", "at": 0, "end": True}] * 2},
        "ends its stream once",
    ),
    (
        {
            "messages": [
                {"from": "client", "at": 0, "end": True},
                {"from": "client", "at": 0, "base64": ""},
            ]
        },
        "after the client's end",
    ),
    (
        {
            "messages": [
                {"from": "server", "at": 0, "end": True},
                {"from": "server", "at": 0, "base64": ""},
            ]
        },
        "after the call's end",
    ),
]


@pytest.mark.parametrize(("value", "error"), BAD_LOGS)
def test_a_bad_session_log_says_what_is_wrong(value: object, error: str) -> None:
    def ms(v: object, where: str) -> float:
        if not isinstance(v, (int, float)) or v < 0:
            raise ValueError(f'"{where}" must be a number of milliseconds >= 0')
        return float(v)

    with pytest.raises(ValueError, match=error):
        grpc_in(value, ms)


def test_a_grpc_field_on_a_line_that_is_no_session_is_refused() -> None:
    conversation = [c(b"1", 0.0), c(b"2", 0.01), s_end(0.02)]
    _, recorded = record(conversation)
    assert recorded is not None
    line = json.loads(recorded.line)
    line["response"]["stream"] = "grpc"
    with pytest.raises(ValueError, match=r'needs "response.stream": "grpc-session"'):
        interaction_from_json(line)


def test_a_reader_that_knows_no_sessions_refuses_the_line_clearly() -> None:
    """A Reel that predates sessions reads the line's stream kind and
    refuses it (its message lists the kinds it knows), never replaying
    the head and trailers without the messages."""
    conversation = [c(b"1", 0.0), c(b"2", 0.01), s_end(0.02)]
    _, recorded = record(conversation)
    assert recorded is not None
    line = json.loads(recorded.line)
    line["response"]["stream"] = "grpc-session-v2"  # a kind this reader does not know
    del line["grpc"]
    with pytest.raises(ValueError, match='"grpc-session" or "websocket", not'):
        interaction_from_json(line)


# -- what is recorded ------------------------------------------------------------------


def test_a_unary_call_is_recorded_as_the_engine_records_it() -> None:
    conversation = [c(b"q", 0.0), c_end(0.0), s(b"a", 0.01), s_end(0.02)]
    cassette, recorded = record(conversation)
    assert recorded is not None
    stored = cassette.interactions()[0]
    assert stored.grpc is None
    assert stored.response.stream == "grpc"
    assert json.loads(recorded.line)["response"]["frames"]


def test_a_call_forwarded_whole_is_keyed_on_its_first_message() -> None:
    """Auto mode forwards a call the cassette knows no session for at its
    end, whole: the session's request is its first message, keyed so."""
    conversation = [c(b"1", 0.0), c(b"2", 0.0), c_end(0.0), s(b"sum", 0.01), s_end(0.02)]
    cassette, recorded = record(conversation, whole=True, mode=Mode.AUTO)
    assert recorded is not None
    stored = cassette.interactions()[0]
    assert stored.request.body == grpc_frame(b"1")
    assert stored.sent is None
    assert stored.key == stored.request.key(cassette.keying)
    assert stored.id == stored.key[7:19]
    replay = replay_of(reloaded(cassette), grpc_frame(b"1"))
    replay.client_message(grpc_frame(b"2"), 0.0)
    replay.client_end(0.0)
    events, _ = drain(replay)
    assert frames(events) == [grpc_frame(b"sum")]


def test_a_call_not_ended_is_stored_as_ended_when_recorded() -> None:
    recorder = GrpcCallRecorder(Redactor(), opened=10.0)
    recorder.client_message(grpc_frame(b"1"), 10.0)
    recorder.server_message(grpc_frame(b"a"), 10.01)
    assert recorder.session
    cassette = Cassette()
    engine = Engine(cassette, Config(mode=Mode.RECORD))
    engine.receive_request(Request("POST", PATH, GRPC_HEAD, grpc_frame(b"1")))
    pull(engine)
    engine.upstream_head(200, GRPC_HEAD, mono=10.01)
    engine.upstream_data(grpc_frame(b"a"), mono=10.01)
    engine.upstream_end(mono=10.02)
    pull(engine)
    recorded = recorder.record(engine, mono=10.5)
    assert recorded is not None
    stored = cassette.interactions()[0]
    assert stored.grpc is not None
    assert stored.grpc.messages[-1] == GrpcMessage("server", 500.0, end=True)
    # what comes after the end is not kept; a second end changes nothing
    recorder.server_message(grpc_frame(b"late"), 11.0)
    recorder.client_message(grpc_frame(b"late"), 11.0)
    recorder.ended(11.0)
    recorder.client_end(11.0)
    assert recorder.finish(stored, cassette).grpc == stored.grpc
    with pytest.raises(LocalProtocolError, match="after the client ended"):
        recorder.client_message(grpc_frame(b"x"), 12.0)


def test_nothing_to_record_is_none() -> None:
    engine = Engine(Cassette(), Config(mode=Mode.LIVE))
    engine.receive_request(Request("POST", PATH, GRPC_HEAD, grpc_frame(b"1")))
    pull(engine)
    engine.upstream_head(200, GRPC_HEAD, mono=0.0)
    engine.upstream_end(mono=0.0)
    pull(engine)
    recorder = GrpcCallRecorder(engine.redactor, opened=0.0)
    recorder.client_message(grpc_frame(b"1"), 0.0)
    recorder.client_message(grpc_frame(b"2"), 0.0)
    assert recorder.record(engine) is None


# -- several recordings, one first message ----------------------------------------------


def test_two_sessions_with_the_same_first_message_are_told_apart_by_the_next() -> None:
    cassette = Cassette("c.jsonl")
    record([c(b"hi", 0.0), c(b"red", 0.01), c_end(0.01), s(b"RED", 0.02), s_end(0.03)], cassette)
    record([c(b"hi", 0.0), c(b"blue", 0.01), c_end(0.01), s(b"BLUE", 0.02), s_end(0.03)], cassette)
    cassette = reloaded(cassette)
    # two calls at once, in the other order than recorded
    first = replay_of(cassette, grpc_frame(b"hi"))
    second = replay_of(cassette, grpc_frame(b"hi"))
    first.client_message(grpc_frame(b"blue"), 0.01)
    second.client_message(grpc_frame(b"red"), 0.01)
    for replay in (first, second):
        replay.client_end(0.01)
    assert frames(drain(first)[0]) == [grpc_frame(b"BLUE")]
    assert frames(drain(second)[0]) == [grpc_frame(b"RED")]


def test_plays_as_session_follows_the_cassette_as_it_grows() -> None:
    cassette = Cassette("c.jsonl")
    record([c(b"q", 0.0), c_end(0.0), s(b"a", 0.01), s_end(0.02)], cassette)
    assert not plays_as_session(cassette, "POST", PATH)
    assert not plays_as_session(cassette, "POST", PATH)  # the cached answer
    record([c(b"1", 0.0), c(b"2", 0.0), s_end(0.02)], cassette)
    assert plays_as_session(cassette, "POST", PATH)
    assert not plays_as_session(cassette, "POST", "/pkg.Chat/Other")


def test_a_recording_that_is_no_session_plays_as_the_session_it_was() -> None:
    cassette = Cassette("c.jsonl")
    record([c(b"q", 0.0), c_end(0.0), s(b"a", 0.01), s(b"b", 0.03), s_end(0.04)], cassette)
    record([c(b"1", 0.0), c(b"2", 0.0), s_end(0.02)], cassette)  # the path has sessions
    cassette = reloaded(cassette)
    replay = replay_of(cassette, grpc_frame(b"q"), timing="realtime")
    assert drain(replay) == ([], Signal.NEED_DATA)  # gated on the client's end
    replay.client_end(1.0)
    events, signal = drain(replay)
    assert frames(events) == [grpc_frame(b"a"), grpc_frame(b"b")]
    # the response's offsets count from its first byte, which came 10 ms in
    assert deadlines(events) == pytest.approx([1.0, 1.02, 1.03, 1.03])
    assert signal is Signal.CLOSED
    # a client that sends one message more gets NOT_FOUND, not the answer
    again = replay_of(cassette, grpc_frame(b"q"))
    again.client_message(grpc_frame(b"more"), 0.0)
    assert status_of(drain(again)[0]) == GrpcStatus.NOT_FOUND


def test_as_session_of_a_whole_body_and_of_a_cut() -> None:
    from reel_core import RecordedRequest

    body = grpc_frame(b"a") + grpc_frame(b"b")
    whole = Interaction(
        "sha256:" + "0" * 64,
        "x",
        RecordedRequest("POST", PATH, (), body),
        RecordedResponse(200, (), body=grpc_frame(b"r")),
    )
    log = as_session(whole).grpc
    assert log is not None
    assert [m.data for m in log.messages] == [
        grpc_frame(b"a"),
        grpc_frame(b"b"),
        b"",
        grpc_frame(b"r"),
        b"",
    ]
    torn = replace(whole, request=replace(whole.request, body=b"\x00\x00\x00\x00\x09ab"))
    torn_log = as_session(torn).grpc
    assert torn_log is not None
    assert torn_log.messages[0].data == b"\x00\x00\x00\x00\x09ab"
    huge = replace(whole, request=replace(whole.request, body=b"\x00\xff\xff\xff\xffab"))
    huge_log = as_session(huge).grpc
    assert huge_log is not None
    assert huge_log.messages[0].data == b"\x00\xff\xff\xff\xffab"
    empty = replace(whole, request=replace(whole.request, body=b""))
    empty_log = as_session(empty).grpc
    assert empty_log is not None
    assert empty_log.messages[0] == GrpcMessage("client", 0.0, end=True)
    cut = replace(
        whole,
        response=RecordedResponse(
            200, (), stream="grpc", frames=((5.0, grpc_frame(b"r")),), cut=StreamCut(9.0, "reset")
        ),
    )
    cut_log = as_session(cut).grpc
    assert cut_log is not None
    assert cut_log.messages[-1] == GrpcMessage("server", 9.0, end=True)


def test_a_call_decided_with_no_message() -> None:
    """A call whose client ended its stream with no message is decided on
    its end, and plays on."""
    cassette = Cassette("c.jsonl")
    record([c(b"1", 0.0), c(b"2", 0.0), s_end(0.02)], cassette)  # the path has sessions
    record([c_end(0.0), s(b"hello", 0.01), s_end(0.02)], cassette)
    replay = replay_of(reloaded(cassette), b"")
    assert drain(replay) == ([], Signal.NEED_DATA)
    replay.client_end(0.0)
    events, _ = drain(replay)
    assert frames(events) == [grpc_frame(b"hello")]
    assert status_of(events) == 0


# -- matching --------------------------------------------------------------------------


def decoded(frame: bytes) -> object:
    """A stand-in for a descriptor set's reader: the message is JSON text."""
    try:
        return json.loads(frame[5:])
    except ValueError as exc:
        raise ValueError(f"not a message: {exc}") from None


JSON_CALL = [
    c(b'{"n": 1}', 0.0),
    c(b'{"n": 2, "id": "a"}', 0.01),
    c_end(0.02),
    s(b"ok", 0.03),
    s_end(0.04),
]


def decoded_replay(match: MatchConfig, decode: object = decoded) -> GrpcCallReplay:
    cassette, _ = record(JSON_CALL)
    cassette = reloaded(cassette)
    engine = Engine(cassette, Config(mode=Mode.REPLAY, match=match))
    engine.streams_call(Request("POST", PATH, HEADERS, b""))
    engine.receive_request(Request("POST", PATH, HEADERS, grpc_frame(b'{"n": 1}')))
    events, _ = pull(engine)
    assert isinstance(events[0], Replay)
    replay = GrpcCallReplay.for_engine(engine, events[0], decode=decode)  # type: ignore[arg-type]
    replay.open(0.0)
    return replay


def test_a_decoder_compares_messages_as_json_values() -> None:
    replay = decoded_replay(MatchConfig())
    replay.client_message(grpc_frame(b'{"id":"a","n":2}'), 0.01)  # the same value
    replay.client_end(0.02)
    assert frames(drain(replay)[0]) == [grpc_frame(b"ok")]


def test_a_decoder_ignores_the_ignored_fields() -> None:
    replay = decoded_replay(MatchConfig(MatchMode.IGNORE_FIELDS, ("id",)))
    replay.client_message(grpc_frame(b'{"n": 2, "id": "b"}'), 0.01)
    replay.client_end(0.02)
    assert frames(drain(replay)[0]) == [grpc_frame(b"ok")]


def test_a_decoded_difference_names_its_field() -> None:
    replay = decoded_replay(MatchConfig())
    replay.client_message(grpc_frame(b'{"n": 3, "id": "a"}'), 0.01)
    assert replay.miss is not None
    assert replay.miss.closest is not None
    assert replay.miss.closest.diffs[0].path == "message.n"


def test_an_undecodable_message_is_a_mismatch() -> None:
    replay = decoded_replay(MatchConfig())
    replay.client_message(grpc_frame(b"not json"), 0.01)
    assert replay.miss is not None
    assert replay.miss.closest is not None
    assert "undecodable" in str(replay.miss.closest.diffs[0].received)


def test_exact_mode_compares_bytes_even_with_a_decoder() -> None:
    replay = decoded_replay(MatchConfig(MatchMode.EXACT))
    replay.client_message(grpc_frame(b'{"id":"a","n":2}'), 0.01)
    assert replay.miss is not None


# -- misuse ----------------------------------------------------------------------------


def test_a_replay_needs_a_session() -> None:
    plain = record([c(b"q", 0.0), c_end(0.0), s_end(0.01)])[0].interactions()[0]
    with pytest.raises(LocalProtocolError, match="no gRPC session"):
        GrpcCallReplay(plain)
    engine = Engine(Cassette())
    with pytest.raises(LocalProtocolError, match="not a gRPC session's"):
        GrpcCallReplay.for_engine(engine, Replay(Request("POST", PATH, (), b""), "x", "k"))


def test_a_bare_replay_reports_its_miss_without_a_cassette() -> None:
    cassette, _ = record([c(b"1", 0.0), c(b"2", 0.0), s_end(0.01)])
    replay = GrpcCallReplay(cassette.interactions()[0])
    replay.open(0.0)
    replay.client_message(grpc_frame(b"3"), 0.0)
    assert replay.miss is not None
    assert replay.miss.cassette == "<memory>"
    assert replay.miss == session_miss(
        replay.miss.reason.split(": ", 1)[1],
        replay.miss.closest.diffs if replay.miss.closest else (),
        cassette.interactions()[0],
        score=0.5,
        match="normalized",
    )


def test_the_engine_answers_a_streamed_calls_miss_as_any_grpc_miss() -> None:
    cassette, _ = record([c(b"1", 0.0), c(b"2", 0.0), s_end(0.01)])
    engine = Engine(reloaded(cassette), Config(mode=Mode.REPLAY))
    engine.reads_trailers = True  # as the HTTP/2 adapter and the gRPC channels set it
    assert engine.streams_call(Request("POST", PATH, HEADERS, b""))
    engine.receive_request(Request("POST", PATH, HEADERS, grpc_frame(b"other")))
    events, _ = pull(engine)
    assert isinstance(events[0], Miss)
    assert status_of(events) == GrpcStatus.NOT_FOUND


def test_streams_call_asks_the_mode_and_the_cassette() -> None:
    head = Request("POST", PATH, HEADERS, b"")
    assert not Engine(Cassette(), Config(mode=Mode.REPLAY)).streams_call(head)
    assert Engine(Cassette(), Config(mode=Mode.RECORD)).streams_call(head)
    assert Engine(Cassette(), Config(mode=Mode.LIVE)).streams_call(head)
    json_head = Request("POST", PATH, ((b"content-type", b"application/json"),), b"")
    assert not Engine(Cassette(), Config(mode=Mode.RECORD)).streams_call(json_head)
    sessions = record([c(b"1", 0.0), c(b"2", 0.0), s_end(0.01)])[0]
    assert Engine(lambda request: sessions, Config(mode=Mode.AUTO)).streams_call(head)

    def unchosen(request: Request) -> Cassette:
        from reel_core import RemoteProtocolError

        raise RemoteProtocolError("no such cassette", 400)

    assert not Engine(unchosen, Config(mode=Mode.REPLAY)).streams_call(head)


def test_a_log_without_its_end_ends_after_its_last_entry() -> None:
    """A hand-written line (an import) may hold no end and no trailers:
    the call ends after its last entry, with no trailers."""
    from reel_core import RecordedRequest

    log = GrpcLog((GrpcMessage("client", 0.0, grpc_frame(b"1")), GrpcMessage("server", 5.0, b"x")))
    bare = Interaction(
        "sha256:" + "0" * 64,
        "bare",
        RecordedRequest("POST", PATH, (), grpc_frame(b"1")),
        RecordedResponse(200, (), stream=GRPC_SESSION),
        grpc=log,
    )
    replay = GrpcCallReplay(bare, timing=Timing.parse("realtime"))
    replay.open(0.0)
    events, signal = drain(replay)
    assert events == [Frame(b"x", 0.005), EndOfResponse(0.005)]
    assert signal is Signal.CLOSED


def test_auto_mode_streams_a_path_it_has_never_recorded() -> None:
    """A miss in auto mode is forwarded: a call on a path with no recording
    streams, as in record mode (held whole, a bidirectional client waiting
    for an answer would never be forwarded); a path recorded only whole
    stays whole."""
    head = Request("POST", PATH, HEADERS, b"")
    empty = Cassette("c.jsonl")
    assert Engine(empty, Config(mode=Mode.AUTO)).streams_call(head)
    assert not Engine(empty, Config(mode=Mode.REPLAY)).streams_call(head)
    unary = record([c(b"q", 0.0), c_end(0.0), s(b"a", 0.01), s_end(0.02)])[0]
    assert not Engine(unary, Config(mode=Mode.AUTO)).streams_call(head)
    assert not plays_as_session(unary, "POST", PATH, forwards=True)
    assert plays_as_session(unary, "POST", "/pkg.Chat/Other", forwards=True)


def test_a_session_answered_with_no_grpc_is_kept_as_it_came() -> None:
    cassette = Cassette("c.jsonl")
    engine = Engine(cassette, Config(mode=Mode.RECORD))
    engine.receive_request(Request("POST", PATH, HEADERS, grpc_frame(b"1")))
    pull(engine)
    recorder = GrpcCallRecorder(engine.redactor, opened=0.0)
    recorder.client_message(grpc_frame(b"1"), 0.0)
    recorder.client_message(grpc_frame(b"2"), 0.0)
    engine.upstream_head(404, ((b"content-type", b"text/html"),), mono=0.01)
    engine.upstream_data(b"<h1>no</h1>", mono=0.01)
    engine.upstream_end(mono=0.02)
    recorder.ended(0.02)
    pull(engine)
    assert recorder.session
    assert recorder.record(engine) is not None
    stored = cassette.interactions()[0]
    assert stored.grpc is None
    assert stored.response.body == b"<h1>no</h1>"
