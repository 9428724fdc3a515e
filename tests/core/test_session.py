"""The session: requests in, decisions and response events out."""

from __future__ import annotations

import gzip
import json

import h11
import pytest

from reel_core import (
    Abort,
    Cassette,
    CassetteError,
    CassetteMeta,
    Config,
    Continue,
    Cut,
    EndOfResponse,
    Engine,
    Event,
    Forward,
    Frame,
    Hints,
    Interaction,
    Limits,
    LocalProtocolError,
    MatchConfig,
    MatchMode,
    Miss,
    MissError,
    Mode,
    Recorded,
    RecordedRequest,
    Redactor,
    Refused,
    RemoteProtocolError,
    Replay,
    Request,
    ResponseHead,
    Session,
    Signal,
    State,
    StreamCut,
    Timing,
    UpstreamError,
)

from ._helpers import (
    BINDING_HINTS,
    cassette_of,
    client_bytes,
    finished,
    interaction,
    parse_response,
    pull,
    request,
    splittings,
    state,
)

NORMALIZED = MatchConfig()
SSE_FRAMES = ((0.0, b"data: 1\n\n"), (250.0, b"data: 2\n\n"), (1000.0, b"data: [DONE]\n\n"))


def stream_interaction(**kw: object) -> Interaction:
    return interaction(
        stream="sse",
        frames=SSE_FRAMES,
        end_ms=1200.0,
        headers=(("content-type", "text/event-stream"),),
        **kw,  # type: ignore[arg-type]
    )


def one_exchange(session: Engine, req: Request) -> list[Event]:
    session.receive_request(req)
    events, signal = pull(session)
    assert signal is Signal.PAUSED
    return list(events)


# -- replay --------------------------------------------------------------------


def test_replay_of_a_whole_body() -> None:
    rec = interaction(id="rec1", response_body=b'{"ok":true}')
    session = Engine(cassette_of(rec))
    req = request()
    assert state(session) is State.IDLE
    session.receive_request(req)
    events, signal = pull(session)
    assert events == [
        Replay(req, "rec1", rec.key),
        ResponseHead(200, ((b"content-type", b"application/json"), (b"content-length", b"11"))),
        Frame(b'{"ok":true}', 0.0),
        EndOfResponse(0.0),
    ]
    assert signal is Signal.PAUSED
    assert state(session) is State.DONE
    session.start_next_cycle()
    assert state(session) is State.IDLE
    assert session.next_event() is Signal.NEED_DATA


def test_replay_of_an_empty_body_has_no_frame() -> None:
    session = Engine(cassette_of(interaction(status=204, headers=(), response_body=b"")))
    events = one_exchange(session, request())
    assert [type(e) for e in events] == [Replay, ResponseHead, EndOfResponse]
    head = events[1]
    assert isinstance(head, ResponseHead)
    assert head.status == 204
    assert head.headers == ((b"content-length", b"0"),)


@pytest.mark.parametrize(
    ("timing", "deadlines", "end"),
    [
        ("realtime", [0.0, 0.25, 1.0], 1.2),
        ("fast", [0.0, 0.0, 0.0], 0.0),
        ("slow=2", [0.0, 0.5, 2.0], 2.4),
    ],
)
def test_replay_of_a_stream(timing: str, deadlines: list[float], end: float) -> None:
    session = Engine(
        cassette_of(stream_interaction()),
        Config(timing=Timing.parse(timing)),
    )
    events = one_exchange(session, request())
    head = events[1]
    assert isinstance(head, ResponseHead)
    assert head.headers == ((b"content-type", b"text/event-stream"),)  # no length: streamed
    frames = [e for e in events if isinstance(e, Frame)]
    assert [f.data for f in frames] == [d for _, d in SSE_FRAMES]
    assert [f.at for f in frames] == pytest.approx(deadlines)
    assert events[-1] == EndOfResponse(pytest.approx(end))  # type: ignore[arg-type]


def test_replay_of_a_cut_stream() -> None:
    rec = interaction(
        stream="chunks",
        frames=((0.0, b"[{"), (40.0, b'"a":1}')),
        cut=StreamCut(50.0, "reset", "peer reset"),
    )
    session = Engine(cassette_of(rec), Config(timing=Timing.parse("slow=10")))
    events = one_exchange(session, request())
    assert events[-1] == Cut("reset", "peer reset", 0.5)
    assert [e.at for e in events if isinstance(e, Frame)] == [0.0, 0.4]
    assert state(session) is State.DONE


def test_head_requests_replay_only_the_head() -> None:
    whole = interaction("HEAD", "/v1/models", b"", response_body=b"abc")
    session = Engine(cassette_of(whole))
    events = one_exchange(session, request(b"", "/v1/models", "HEAD"))
    assert [type(e) for e in events] == [Replay, ResponseHead, EndOfResponse]
    head = events[1]
    assert isinstance(head, ResponseHead)
    assert (b"content-length", b"3") in head.headers
    streamed = stream_interaction(method="HEAD", body=b"")
    session = Engine(cassette_of(streamed))
    events = one_exchange(session, request(b"", method="HEAD"))
    assert [type(e) for e in events] == [Replay, ResponseHead, EndOfResponse]


def test_identical_requests_replay_in_recorded_order() -> None:
    c = cassette_of(
        interaction(id="a", response_body=b"1"),
        interaction(id="b", response_body=b"2"),
    )
    session = Engine(c)
    bodies = []
    for _ in range(3):
        events = one_exchange(session, request())
        bodies.append(b"".join(e.data for e in events if isinstance(e, Frame)))
        session.start_next_cycle()
    assert bodies == [b"1", b"2", b"2"]


def test_replay_matches_reformatted_json_and_reordered_query() -> None:
    rec = interaction(body=b'{"a":1,"b":2}', query=[("x", "1"), ("y", "2")])
    session = Engine(cassette_of(rec))
    events = one_exchange(session, request(b'{ "b": 2, "a": 1 }', "/v1/chat/completions?y=2&x=1"))
    assert isinstance(events[0], Replay)


# -- misses --------------------------------------------------------------------


def test_a_miss_is_a_404_with_a_report() -> None:
    rec = interaction(id="near", body=b'{"model":"m","messages":[{"content":"hi"}]}')
    session = Engine(cassette_of(rec), Config(hints=Hints(miss="run `make record`")))
    req = request(b'{"model":"m","messages":[{"content":"ho"}]}')
    events = one_exchange(session, req)
    miss, head, frame, end = events
    assert isinstance(miss, Miss)
    assert miss.request == req
    report = miss.report
    assert report.reason == "no recording matches"
    assert report.cassette == "test.jsonl"
    assert report.closest is not None
    assert report.closest.id == "near"
    assert [d.path for d in report.closest.diffs] == ["messages[0].content"]
    assert report.hint == "run `make record`"
    assert isinstance(head, ResponseHead)
    assert head.status == 404
    assert isinstance(frame, Frame)
    assert (b"content-length", str(len(frame.data)).encode()) in head.headers
    assert json.loads(frame.data) == report.to_json()
    assert end == EndOfResponse(0.0)
    with pytest.raises(MissError) as info:
        session.raise_for_miss(miss)
    assert info.value.report is report
    session.raise_for_miss(head)  # anything else: nothing
    session.raise_for_miss(Signal.PAUSED)


def test_a_miss_when_every_recording_was_served() -> None:
    c = cassette_of(interaction(id="a"), interaction(id="b"))
    session = Engine(c, Config(repeat=False))
    for _ in range(2):
        assert isinstance(one_exchange(session, request())[0], Replay)
        session.start_next_cycle()
    miss = one_exchange(session, request())[0]
    assert isinstance(miss, Miss)
    assert miss.report.reason.startswith(
        "this request was recorded 2 times and each recording was already served: "
        "this is repeat 3, past the recorded count"
    )
    assert miss.report.served == 2
    error = miss.report.to_json()["error"]
    assert error["repeat_past_count"] == {"recorded": 2, "this_request": 3}
    assert "recording a is this very request, served 2 of 2 times already" in error["message"]


def test_the_cassette_meta_decides_whether_replay_repeats() -> None:
    meta = CassetteMeta(repeat=False)
    assert b'"repeat":false' in meta.to_line()
    assert b'"repeat"' not in CassetteMeta().to_line()  # the default is not written
    c = Cassette.loads(meta.to_line() + interaction(id="a").to_line())
    assert c.meta.repeat is False
    session = Engine(c)
    assert isinstance(one_exchange(session, request())[0], Replay)
    session.start_next_cycle()
    assert isinstance(one_exchange(session, request())[0], Miss)
    # the config, when it says, wins over the cassette
    again = Engine(Cassette.loads(meta.to_line() + interaction(id="a").to_line()))
    again.config = Config(repeat=True)
    again._use(again.cassette)
    for _ in range(3):
        assert isinstance(one_exchange(again, request())[0], Replay)
        again.start_next_cycle()


@pytest.mark.parametrize("value", ['"no"', "0", "null", "[]"])
def test_a_bad_repeat_setting_is_refused(value: str) -> None:
    line = b'{"_meta":{"schema":1,"repeat":' + value.encode() + b"}}\n"
    with pytest.raises(CassetteError, match=r'"_meta.repeat" must be true or false, not '):
        Cassette.loads(line)


def test_replay_repeats_the_last_recording_by_default() -> None:
    c = cassette_of(interaction(id="a", status=429), interaction(id="b"))
    session = Engine(c)
    served = []
    for _ in range(4):
        event = one_exchange(session, request())[0]
        assert isinstance(event, Replay)
        served.append(event.interaction_id)
        session.start_next_cycle()
    assert served == ["a", "b", "b", "b"]


def _record_answer(session: Engine, req: Request, status: int, body: bytes) -> list[Event]:
    session.receive_request(req)
    events, _ = pull(session)
    if not isinstance(events[0], Forward):
        return events
    session.upstream_head(status, [(b"content-type", b"application/json")], mono=1.0)
    session.upstream_data(body, mono=1.1)
    session.upstream_end(mono=1.2)
    more, _ = pull(session)
    session.record()
    return [events[0], *more]


def test_auto_forwards_a_retry_of_a_recorded_429_and_replay_gives_both_in_order() -> None:
    c = Cassette()
    session = Engine(c, Config(mode=Mode.AUTO))
    first = _record_answer(session, request(), 429, b'{"error":"slow down"}')
    session.start_next_cycle()
    # the SDK retries the very same request: it must reach the upstream
    retry = _record_answer(session, request(), 200, b'{"ok":true}')
    session.start_next_cycle()
    assert isinstance(first[0], Forward)
    assert isinstance(retry[0], Forward)
    assert [i.response.status for i in c] == [429, 200]
    replay = Engine(Cassette.loads(c.dumps()))
    statuses = []
    for _ in range(2):
        events = one_exchange(replay, request())
        head = events[1]
        assert isinstance(head, ResponseHead)
        statuses.append(head.status)
        replay.start_next_cycle()
    assert statuses == [429, 200]


def test_auto_serves_each_recording_once_then_records_the_next() -> None:
    # three identical requests, the upstream answers A, B, C
    c = Cassette()
    session = Engine(c, Config(mode=Mode.AUTO))
    for body in (b'"A"', b'"B"', b'"C"'):
        assert isinstance(_record_answer(session, request(), 200, body)[0], Forward)
        session.start_next_cycle()
    # a later auto run replays A, B, C in order, then records a fourth
    later = Cassette.loads(c.dumps())
    session = Engine(later, Config(mode=Mode.AUTO))
    bodies = []
    for _ in range(3):
        events = one_exchange(session, request())
        assert isinstance(events[0], Replay)
        frame = events[2]
        assert isinstance(frame, Frame)
        bodies.append(frame.data)
        session.start_next_cycle()
    assert bodies == [b'"A"', b'"B"', b'"C"']
    assert isinstance(_record_answer(session, request(), 200, b'"D"')[0], Forward)
    assert [i.response.body for i in later] == [b'"A"', b'"B"', b'"C"', b'"D"']
    assert [i.id[-2:] for i in later][1:] == ["-2", "-3", "-4"]


def test_auto_ignores_the_repeat_setting() -> None:
    c = cassette_of(interaction(id="a"))
    for repeat in (True, False, None):
        c = cassette_of(interaction(id="a"))
        session = Engine(c, Config(mode=Mode.AUTO, repeat=repeat))
        assert isinstance(one_exchange(session, request())[0], Replay)
        session.start_next_cycle()
        session.receive_request(request())
        assert isinstance(session.next_event(), Forward)


def test_the_miss_report_is_built_from_the_redacted_request() -> None:
    session = Engine(Cassette("empty"))
    events = one_exchange(session, request(b'{"api_key":"hunter2","q":"x"}', "/v1/x?key=AIzaS"))
    miss = events[0]
    assert isinstance(miss, Miss)
    frame = events[2]
    assert isinstance(frame, Frame)
    assert b"hunter2" not in frame.data
    assert b"AIzaS" not in frame.data
    assert miss.report.closest is None


# -- forwarding and recording --------------------------------------------------


def test_auto_replays_hits_and_forwards_misses() -> None:
    c = cassette_of(interaction(id="hit"))
    session = Engine(c, Config(mode=Mode.AUTO))
    assert isinstance(one_exchange(session, request())[0], Replay)
    session.start_next_cycle()
    session.receive_request(request(b'{"new":1}'))
    events, signal = pull(session)
    assert signal is Signal.PAUSED
    assert state(session) is State.AWAIT_UPSTREAM
    (forward,) = events
    assert isinstance(forward, Forward)
    assert forward.record is True
    assert forward.url is None


def record_one(
    session: Engine,
    req: Request,
    status: int = 200,
    headers: list[tuple[bytes, bytes]] | None = None,
    chunks: tuple[bytes, ...] = (b'{"ok":', b"true}"),
) -> list[Event | Recorded]:
    session.receive_request(req)
    events, _ = pull(session)
    assert isinstance(events[0], Forward)
    session.upstream_head(
        status,
        headers if headers is not None else [(b"Content-Type", b"application/json")],
        mono=10.0,
        sent_at=9.9,
        wall=1_700_000_000.0,
    )
    for i, chunk in enumerate(chunks):
        session.upstream_data(chunk, mono=10.0 + 0.01 * (i + 1))
    session.upstream_end(mono=11.0)
    more, signal = pull(session)
    assert signal is Signal.PAUSED
    assert state(session) is State.DONE
    recorded = session.record()  # the explicit step after the response's end
    out: list[Event | Recorded] = [events[0], *more]
    return out if recorded is None else [*out, recorded]


def test_record_forwards_even_what_is_recorded() -> None:
    c = cassette_of(interaction(id="old"))
    session = Engine(c, Config(mode=Mode.RECORD))
    events = record_one(session, request())
    forward, head, f1, f2, end, recorded = events
    assert isinstance(forward, Forward)
    assert forward.record is True
    assert head == ResponseHead(200, ((b"content-type", b"application/json"),))
    assert (f1, f2) == (Frame(b'{"ok":'), Frame(b"true}"))
    assert end == EndOfResponse()
    assert isinstance(recorded, Recorded)
    assert forward.key is None  # record mode keys the request after forwarding it
    assert recorded.key == session.forward_key()
    assert recorded.interaction_id == recorded.key[7:19] + "-2"  # the second of its key
    line = Cassette.loads(recorded.line)
    (stored,) = line.interactions()
    assert stored.id == recorded.interaction_id
    assert stored.response.body == b'{"ok":true}'
    assert stored.timestamp == "2023-11-14T22:13:20.000Z"
    assert stored.provider == "openai"
    assert stored.endpoint == "POST /v1/chat/completions"
    assert stored.meta["ttfb_ms"] == 100.0
    assert len(c) == 2  # added to the shared cassette
    assert c.plays(recorded.key, NORMALIZED) == 1


def test_a_fresh_recording_has_a_plain_id_and_is_then_replayed() -> None:
    c = Cassette("new")
    session = Engine(c, Config(mode=Mode.AUTO))
    events = record_one(session, request())
    recorded = events[-1]
    assert isinstance(recorded, Recorded)
    assert recorded.interaction_id == recorded.key[7:19]
    session.start_next_cycle()
    replay = Engine(Cassette.loads(c.dumps()))
    replayed = one_exchange(replay, request())
    assert b"".join(e.data for e in replayed if isinstance(e, Frame)) == b'{"ok":true}'


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The path of each request keyed (``RecordedRequest.key`` called) from now on."""
    real_key = RecordedRequest.key
    calls: list[str] = []

    def counting_key(self: RecordedRequest, keying: MatchConfig) -> str:
        calls.append(self.path)
        return real_key(self, keying)

    monkeypatch.setattr(RecordedRequest, "key", counting_key)
    return calls


def test_record_keys_the_request_after_it_is_forwarded(keyed: list[str]) -> None:
    # The secret check and the key are not on the request's way upstream:
    # computed once, when the recording is built (or the key first read).
    session = Engine(Cassette(), Config(mode=Mode.RECORD))
    session.receive_request(request(body=b'{"api_key": "sk-proj-abcdefghijklmnop123456"}'))
    forward = session.next_event()
    assert isinstance(forward, Forward)
    assert keyed == []
    session.upstream_head(200, [(b"content-type", b"application/json")], mono=1.0)
    session.upstream_data(b"{}", mono=1.1)
    session.upstream_end(mono=1.2)
    while not isinstance(session.next_event(), EndOfResponse):
        pass
    assert session.next_event() is Signal.PAUSED
    assert keyed == []  # the client has its whole answer before any of it
    recorded = session.record()
    assert isinstance(recorded, Recorded)
    assert keyed == ["/v1/chat/completions"]
    assert forward.key is None
    assert session.forward_key() == recorded.key
    assert keyed == ["/v1/chat/completions"]  # computed once, shared
    assert b"sk-proj" not in recorded.line


def test_live_keys_only_when_the_key_is_asked_for(keyed: list[str]) -> None:
    session = Engine(Cassette(), Config(mode=Mode.LIVE))
    session.receive_request(request())
    forward = session.next_event()
    assert isinstance(forward, Forward)
    assert not forward.record
    assert forward.key is None
    assert keyed == []
    assert session.forward_key().startswith("sha256:")
    assert session.forward_key().startswith("sha256:")
    assert keyed == ["/v1/chat/completions"]  # once


def test_forward_key_is_only_for_a_forward() -> None:
    session = Engine(cassette_of(interaction()))
    session.receive_request(request())
    assert isinstance(session.next_event(), Replay)
    with pytest.raises(LocalProtocolError, match="forward_key"):
        session.forward_key()
    assert state(session) is State.ERROR


def test_auto_forwards_a_miss_with_its_key() -> None:
    session = Engine(Cassette(), Config(mode=Mode.AUTO))
    session.receive_request(request())
    forward = session.next_event()
    assert isinstance(forward, Forward)
    assert forward.key is not None
    assert forward.key == session.forward_key()


def test_live_forwards_and_records_nothing() -> None:
    c = cassette_of(interaction())
    session = Engine(c, Config(mode=Mode.LIVE))
    events = record_one(session, request())
    forward = events[0]
    assert isinstance(forward, Forward)
    assert forward.record is False
    assert not [e for e in events if isinstance(e, Recorded)]
    assert len(c) == 1


def test_upstream_head_drops_hop_by_hop_headers_for_the_client() -> None:
    session = Engine(Cassette(), Config(mode=Mode.LIVE))
    session.receive_request(request())
    pull(session)
    session.upstream_head(
        200,
        ((b"Transfer-Encoding", b"chunked"), (b"Connection", b"keep-alive"), (b"X-A", b" 1 ")),
        mono=0.0,
        reason=b"Fine",
    )
    session.upstream_data(b"", mono=0.0)  # nothing to forward
    events, _ = pull(session)
    # the value as it came: each adapter says it in its protocol (HTTP/1.1
    # strips the padding, HTTP/2 keeps it: docs/reliability.md)
    assert events == [ResponseHead(200, ((b"x-a", b" 1 "),), b"Fine")]


def test_the_stored_key_follows_the_cassette_settings() -> None:
    c = Cassette("c")
    session = Engine(c, Config(mode=Mode.RECORD, match=MatchConfig(MatchMode.EXACT)))
    events = record_one(session, request(b'{"b": 1, "a": 2}'))
    forward, recorded = events[0], events[-1]
    assert isinstance(forward, Forward)
    assert isinstance(recorded, Recorded)
    normalized_key = request(b'{"a":2,"b":1}')
    assert session.forward_key() != recorded.key  # the forward is keyed exactly ...
    # ... the line by the cassette's own (normalized) settings
    replay = Engine(Cassette.loads(recorded.line))
    assert isinstance(one_exchange(replay, normalized_key)[0], Replay)


def test_secrets_are_forwarded_but_never_recorded() -> None:
    secret = "sk-proj-abcdefghijklmnopqrstuvwxyz0123"
    req = request(
        json.dumps({"model": "m", "note": f"key {secret}"}).encode(),
        f"/v1/chat/completions?api_key={secret}",
        headers=[(b"authorization", f"Bearer {secret}".encode())],
    )
    session = Engine(Cassette(), Config(mode=Mode.RECORD))
    events = record_one(
        session,
        req,
        headers=[(b"content-type", b"text/event-stream"), (b"set-cookie", b"s=1")],
        chunks=(f"data: {secret[:12]}".encode(), f"{secret[12:]}\n\n".encode()),
    )
    forward = events[0]
    assert isinstance(forward, Forward)
    assert forward.request is req  # never altered
    frames = b"".join(e.data for e in events if isinstance(e, Frame))
    assert secret.encode() in frames  # the live client gets the real bytes
    recorded = events[-1]
    assert isinstance(recorded, Recorded)
    assert secret.encode() not in recorded.line
    assert b"set-cookie" not in recorded.line
    assert b"authorization" not in recorded.line.lower()
    # the live request, secret and all, matches its redacted recording
    replay = Engine(Cassette.loads(recorded.line))
    assert isinstance(one_exchange(replay, req)[0], Replay)


def test_gzip_is_forwarded_raw_and_recorded_decoded() -> None:
    body = b'{"text":"' + b"hello " * 200 + b'"}'
    packed = gzip.compress(body)
    session = Engine(Cassette(), Config(mode=Mode.RECORD))
    headers = [(b"content-type", b"application/json"), (b"content-encoding", b"gzip")]
    events = record_one(session, request(), headers=headers, chunks=(packed[:10], packed[10:]))
    head = events[1]
    assert isinstance(head, ResponseHead)
    assert (b"content-encoding", b"gzip") in head.headers
    assert b"".join(e.data for e in events if isinstance(e, Frame)) == packed
    recorded = events[-1]
    assert isinstance(recorded, Recorded)
    replay = Engine(Cassette.loads(recorded.line))
    replayed = one_exchange(replay, request())
    head = replayed[1]
    assert isinstance(head, ResponseHead)
    assert dict(head.headers) == {
        b"content-type": b"application/json",
        b"content-length": str(len(body)).encode(),
    }
    assert b"".join(e.data for e in replayed if isinstance(e, Frame)) == body


@pytest.mark.parametrize(
    ("error", "status"), [(UpstreamError.REFUSED, 502), (UpstreamError.TIMEOUT, 504)]
)
def test_upstream_failure_before_the_head_is_answered(error: UpstreamError, status: int) -> None:
    c = Cassette()
    session = Engine(c, Config(mode=Mode.RECORD))
    session.receive_request(request(target="/v1/chat/completions?key=AIzaSecretValue"))
    pull(session)
    session.upstream_error(error, "to sk-proj-abcdefghijklmnopqrstuvwxyz0123", mono=1.0)
    assert state(session) is State.SERVING
    events, signal = pull(session)
    assert signal is Signal.PAUSED
    assert state(session) is State.DONE
    head, frame, end = events
    assert isinstance(head, ResponseHead)
    assert head.status == status
    assert isinstance(frame, Frame)
    body = json.loads(frame.data)["error"]
    assert body["type"] == "reel_upstream_error"
    assert body["failure"] == error.value
    assert body["message"] == (
        "Reel could not reach the upstream for "
        "/v1/chat/completions?key=[REDACTED:query-secret]: "
        f"{error.value} (to [REDACTED:openai-key])"
    )
    assert end == EndOfResponse(0.0)
    assert len(c) == 0  # nothing recorded


def test_a_routed_upstream_failure_names_where_forwards_go() -> None:
    for upstream, where in (
        (None, "the provider's own host (https://api.openai.com)"),
        ("http://127.0.0.1:9", "http://127.0.0.1:9"),
    ):
        session = Engine(
            Cassette(), Config(mode=Mode.LIVE, routing=True, upstream=upstream, hints=BINDING_HINTS)
        )
        session.receive_request(request())
        pull(session)
        session.upstream_error(UpstreamError.REFUSED, mono=0.0)
        (_, frame, _), _ = pull(session)
        assert isinstance(frame, Frame)
        assert json.loads(frame.data)["error"]["message"] == (
            "Reel could not reach the upstream for /v1/chat/completions: refused. "
            f"Forwards go to {where}: check that it is reachable, or name another base URL "
            "with REEL_UPSTREAM=URL (the proxy's --upstream URL)."
        )


def test_upstream_failure_without_detail() -> None:
    session = Engine(Cassette(), Config(mode=Mode.LIVE))
    session.receive_request(request())
    pull(session)
    session.upstream_error(UpstreamError.DNS, mono=0.0)
    events, _ = pull(session)
    frame = events[1]
    assert isinstance(frame, Frame)
    assert json.loads(frame.data)["error"]["message"].endswith(": dns")


def test_upstream_failure_after_the_head_is_a_recorded_cut() -> None:
    session = Engine(Cassette(), Config(mode=Mode.RECORD))
    session.receive_request(request())
    pull(session)
    session.upstream_head(200, [(b"content-type", b"text/event-stream")], mono=0.0)
    session.upstream_data(b"data: 1\n\ndata: 2", mono=0.1)
    session.upstream_error(
        UpstreamError.RESET, "reset by sk-ant-api03-abcdefghijklmnopqrst", mono=0.2
    )
    events, _ = pull(session)
    assert [type(e) for e in events] == [ResponseHead, Frame, Cut]
    cut = events[2]
    assert cut == Cut("reset", "reset by [REDACTED:anthropic-key]")
    recorded = session.record()
    assert isinstance(recorded, Recorded)
    (stored,) = Cassette.loads(recorded.line).interactions()
    assert stored.response.cut == StreamCut(200.0, "reset", "reset by [REDACTED:anthropic-key]")
    # and the replay breaks off at the same place
    replay = Engine(Cassette.loads(recorded.line))
    events = one_exchange(replay, request())
    assert [type(e) for e in events] == [Replay, ResponseHead, Frame, Frame, Cut]
    assert events[-1] == Cut("reset", "reset by [REDACTED:anthropic-key]", 0.2)


def test_live_failure_after_the_head_is_a_cut_only() -> None:
    session = Engine(Cassette(), Config(mode=Mode.LIVE))
    session.receive_request(request())
    pull(session)
    session.upstream_head(200, [], mono=0.0)
    session.upstream_error(UpstreamError.CLOSED, mono=0.0)
    events, _ = pull(session)
    assert events == [ResponseHead(200, ()), Cut("closed", "")]


def test_upstream_error_must_be_an_upstream_error() -> None:
    session = Engine(Cassette(), Config(mode=Mode.LIVE))
    session.receive_request(request())
    pull(session)
    with pytest.raises(LocalProtocolError, match="error must be an UpstreamError"):
        session.upstream_error("reset", mono=0.0)  # type: ignore[arg-type]
    assert state(session) is State.ERROR  # a caller bug: the connection must go


# -- misuse --------------------------------------------------------------------


def test_upstream_calls_out_of_turn_break_the_session() -> None:
    session = Session(Cassette())
    with pytest.raises(LocalProtocolError, match="UPSTREAM_HEAD is not allowed in state IDLE"):
        session.engine.upstream_head(200, [], mono=0.0)
    assert state(session) is State.ERROR
    with pytest.raises(LocalProtocolError, match="the session failed earlier"):
        session.next_event()


@pytest.mark.parametrize("call", ["data", "end", "error"])
def test_upstream_body_before_the_head_is_refused(call: str) -> None:
    session = Engine(Cassette(), Config(mode=Mode.LIVE))
    session.receive_request(request())
    pull(session)
    if call == "error":
        session.upstream_head(200, [], mono=0.0)
        session.upstream_end(mono=0.0)
    calls = {
        "data": lambda: session.upstream_data(b"x", mono=0.0),
        "end": lambda: session.upstream_end(mono=0.0),
        "error": lambda: session.upstream_error(UpstreamError.RESET, mono=0.0),
    }
    with pytest.raises(LocalProtocolError, match="is not allowed in state"):
        calls[call]()
    assert state(session) is State.ERROR


def test_a_replay_cannot_be_fed_upstream_data() -> None:
    session = Engine(cassette_of(interaction()))
    session.receive_request(request())
    session.next_event()
    with pytest.raises(LocalProtocolError):
        session.upstream_head(200, [], mono=0.0)


def test_bytes_go_to_the_session_and_parsed_requests_to_the_engine() -> None:
    """One input each: the HTTP/1.1 adapter reads bytes, the engine it wraps
    takes the parsed request (no runtime guard tells two modes apart)."""
    assert not hasattr(Engine, "receive_data")
    assert not hasattr(Session, "receive_request")
    session = Session(cassette_of(interaction(method="GET", path="/v1/models", body=b"")))
    session.receive_data(b"GET /v1/models HTTP/1.1\r\nhost: api.openai.com\r\n\r\n")
    assert isinstance(session.next_event(), Replay)
    assert session.engine.state is State.SERVING
    # the engine's own calls are not handed through: a binding calls the engine
    for name in ("state", "cassette", "redactor", "upstream_head", "forward_key", "record"):
        assert not hasattr(session, name), name


def test_bytes_after_eof_break_the_session() -> None:
    session = Session(Cassette())
    session.receive_data(b"")
    with pytest.raises(LocalProtocolError, match="received close, then received more data"):
        session.receive_data(b"GET / HTTP/1.1\r\n")
    assert state(session) is State.ERROR


def test_one_request_at_a_time() -> None:
    session = Engine(cassette_of(interaction()))
    session.receive_request(request())
    with pytest.raises(LocalProtocolError, match=r"already being served \(state IDLE\)"):
        session.receive_request(request())
    assert state(session) is State.ERROR
    session = Engine(cassette_of(interaction()))
    session.receive_request(request())
    pull(session)
    with pytest.raises(LocalProtocolError, match=r"already being served \(state DONE\)"):
        session.receive_request(request())
    assert state(session) is State.ERROR


def test_a_parsed_request_over_the_body_limit_is_413() -> None:
    session = Engine(Cassette(), Config(limits=Limits(max_body=10), hints=BINDING_HINTS))
    with pytest.raises(RemoteProtocolError, match="over the 10-byte limit") as info:
        session.receive_request(request(b"x" * 11))
    assert info.value.status == 413
    assert "of 11 bytes" in str(info.value)
    assert "REEL_MAX_BODY=BYTES" in str(info.value)
    session.receive_request(request(b"x" * 10))  # at the limit is fine


def test_next_cycle_only_after_every_event() -> None:
    session = Engine(cassette_of(interaction()))
    session.receive_request(request())
    session.next_event()
    with pytest.raises(LocalProtocolError, match="pull every event"):
        session.start_next_cycle()
    assert state(session) is State.ERROR
    session = Engine(cassette_of(interaction()))
    one_exchange(session, request())
    session.start_next_cycle()
    with pytest.raises(LocalProtocolError, match="NEXT_CYCLE is not allowed in state IDLE"):
        session.start_next_cycle()
    assert state(session) is State.ERROR


def test_signals() -> None:
    session = Engine(Cassette(), Config(mode=Mode.LIVE))
    assert session.next_event() is Signal.NEED_DATA
    session.receive_request(request())
    assert isinstance(session.next_event(), Forward)
    assert session.next_event() is Signal.PAUSED
    session.upstream_head(200, [], mono=0.0)
    assert session.next_event() == ResponseHead(200, ())
    assert session.next_event() is Signal.PAUSED


# -- settings from the cassette ------------------------------------------------


def test_match_and_redaction_settings_come_from_the_cassette() -> None:
    meta = CassetteMeta(
        match=MatchConfig(MatchMode.IGNORE_FIELDS, ("user",)),
        extra={"redact": {"pii": False, "fields": ["session"]}},
    )
    session = Session(Cassette("c", meta))
    assert session.engine.match == meta.match
    assert session.engine.redactor == Redactor(pii=False, fields=("session",))
    overridden = Session(Cassette("c", meta), Config(match=MatchConfig(), redactor=Redactor()))
    assert overridden.engine.match == MatchConfig()
    assert overridden.engine.redactor == Redactor()
    odd = Session(Cassette("c", CassetteMeta(extra={"redact": "yes"})))
    assert odd.engine.redactor == Redactor()


def test_ignored_fields_from_the_cassette_match() -> None:
    meta = CassetteMeta(match=MatchConfig(MatchMode.IGNORE_FIELDS, ("user",)))
    cfg = meta.match
    rec = interaction(body=b'{"model":"m","user":"u1"}', config=cfg)
    session = Engine(cassette_of(rec, meta=meta))
    assert isinstance(one_exchange(session, request(b'{"user":"u2","model":"m"}'))[0], Replay)


def test_redaction_settings_from_the_cassette_apply() -> None:
    meta = CassetteMeta(extra={"redact": {"pii": False}})
    session = Engine(Cassette("c", meta), Config(mode=Mode.RECORD))
    events = record_one(session, request(b'{"to":"ada@example.org"}'))
    recorded = events[-1]
    assert isinstance(recorded, Recorded)
    assert b"ada@example.org" in recorded.line


# -- choosing the cassette per request -----------------------------------------


def test_a_selector_chooses_the_cassette_per_request() -> None:
    a = cassette_of(interaction(id="from-a", response_body=b"A"))
    b = Cassette("b.jsonl", CassetteMeta(match=MatchConfig(MatchMode.EXACT)))
    seen: list[Request] = []

    def select(req: Request) -> Cassette:
        seen.append(req)
        if req.header("x-reel-cassette") == b"bad":
            raise RemoteProtocolError("bad cassette name 'bad'", 400)
        return a if req.header("x-reel-cassette") == b"a" else b

    session = Engine(select)
    ra = request(headers=[(b"x-reel-cassette", b"a")])
    assert isinstance(one_exchange(session, ra)[0], Replay)
    assert session.cassette is a
    assert session.match == MatchConfig()
    session.start_next_cycle()
    rb = request(headers=[(b"x-reel-cassette", b"b")])
    miss = one_exchange(session, rb)[0]
    assert isinstance(miss, Miss)
    assert miss.report.cassette == "b.jsonl"
    assert miss.report.match == "exact"
    assert session.match == MatchConfig(MatchMode.EXACT)
    session.start_next_cycle()
    events = one_exchange(session, request(headers=[(b"x-reel-cassette", b"bad")]))
    refused, head, frame, end = events
    assert isinstance(refused, Refused)
    assert refused.status == 400
    assert refused.message == "bad cassette name 'bad'"
    assert isinstance(head, ResponseHead)
    assert head.status == 400
    assert isinstance(frame, Frame)
    assert json.loads(frame.data)["error"] == {
        "type": "reel_bad_cassette",
        "code": "reel_bad_cassette",
        "message": "bad cassette name 'bad'",
    }
    assert end == EndOfResponse(0.0)
    assert state(session) is State.DONE
    assert seen == [ra, rb, request(headers=[(b"x-reel-cassette", b"bad")])]


def test_a_selected_file_that_is_no_cassette_is_500_saying_so() -> None:
    def select(req: Request) -> Cassette:
        raise CassetteError("notes.txt", None, "not a Reel cassette: no line is an interaction")

    refused, *_ = one_exchange(Engine(select), request())
    assert isinstance(refused, Refused)
    assert refused.status == 500
    assert refused.message == (
        "notes.txt: not a Reel cassette: no line is an interaction. "
        "Fix the file, or record it again."
    )


# -- routing -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "upstream", "url"),
    [
        (
            "/v1/chat/completions?x=1",
            None,
            "https://api.openai.com/v1/chat/completions?x=1",
        ),
        ("/v1/messages", None, "https://api.anthropic.com/v1/messages"),
        ("/api/generate", "http://127.0.0.1:11434/", "http://127.0.0.1:11434/api/generate"),
        (
            "/v1beta/models/g:streamGenerateContent?alt=sse&key=K",
            None,
            "https://generativelanguage.googleapis.com/v1beta/models/g:streamGenerateContent"
            "?alt=sse&key=K",
        ),
    ],
)
def test_routing_sets_the_forward_url(target: str, upstream: str | None, url: str) -> None:
    session = Engine(Cassette(), Config(mode=Mode.LIVE, routing=True, upstream=upstream))
    session.receive_request(request(target=target))
    forward = session.next_event()
    assert isinstance(forward, Forward)
    assert forward.url == url  # the real query, secrets included, goes upstream


def test_routing_refuses_an_unknown_destination() -> None:
    session = Engine(Cassette(), Config(mode=Mode.AUTO, routing=True, hints=BINDING_HINTS))
    events = one_exchange(session, request(target="/api/generate?token=tok_123"))
    refused, head, frame, end = events
    assert isinstance(refused, Refused)
    assert refused.status == 421
    assert isinstance(head, ResponseHead)
    assert head.status == 421
    assert isinstance(frame, Frame)
    error = json.loads(frame.data)["error"]
    assert error["type"] == "reel_no_upstream"
    assert "POST /api/generate?token=[REDACTED:query-secret]" in error["message"]
    assert "--upstream URL" in error["message"]
    assert end == EndOfResponse(0.0)
    assert state(session) is State.DONE


def test_routing_does_not_apply_to_replays() -> None:
    session = Engine(cassette_of(interaction("POST", "/api/generate")), Config(routing=True))
    assert isinstance(one_exchange(session, request(target="/api/generate"))[0], Replay)


# -- on the wire ---------------------------------------------------------------


def serve_wire(session: Session, chunks: list[bytes]) -> tuple[list[Event], bytes]:
    """Feed client bytes, answer every replay/miss, and return the events and
    the bytes sent back."""
    out = b""
    events: list[Event] = []
    for chunk in chunks:
        session.receive_data(chunk)
        while True:
            got, signal = pull(session)
            for e in got:
                events.append(e)
                if isinstance(e, (ResponseHead, Frame, EndOfResponse, Cut)):
                    out += session.send(e)
            if signal is Signal.PAUSED and state(session) is State.DONE and session.keep_alive:
                session.start_next_cycle()
                continue
            break
    return events, out


def test_wire_replay_for_any_splitting() -> None:
    rec = stream_interaction()
    wire = client_bytes(body=b'{"model":"m","messages":[]}')
    results = []
    for chunks in splittings(wire, seed=11, randoms=8):
        session = Session(cassette_of(rec))
        events, out = serve_wire(session, chunks)
        results.append(([type(e) for e in events], out))
        head, body, complete = parse_response(out)
        assert head.status_code == 200
        assert head.reason == b"OK"
        assert (b"transfer-encoding", b"chunked") in head.headers
        assert body == b"".join(d for _, d in SSE_FRAMES)
        assert complete
        assert state(session) is State.IDLE  # kept alive: ready for the next request
    assert all(r == results[0] for r in results)


def test_two_requests_on_one_connection() -> None:
    c = cassette_of(interaction(id="a", response_body=b"first"))
    session = Session(c)
    wire = client_bytes() + client_bytes(body=b'{"other":true}')
    events, out = serve_wire(session, [wire])
    assert [type(e).__name__ for e in events if isinstance(e, (Replay, Miss))] == [
        "Replay",
        "Miss",
    ]
    first = out.index(b"HTTP/1.1 404")
    head, body, _ = parse_response(out[:first])
    assert body == b"first"
    head, body, _ = parse_response(out[first:])
    assert head.status_code == 404
    assert json.loads(body)["error"]["type"] == "reel_miss"
    assert state(session) is State.IDLE


def test_connection_close_and_client_eof() -> None:
    session = Session(cassette_of(interaction()))
    _, out = serve_wire(session, [client_bytes(headers=[(b"connection", b"close")])])
    assert parse_response(out)[0].status_code == 200
    assert not session.keep_alive
    assert state(session) is State.DONE
    session2 = Session(cassette_of(interaction()))
    serve_wire(session2, [client_bytes()])
    session2.receive_data(b"")
    assert session2.next_event() is Signal.CLOSED
    assert state(session2) is State.CLOSED
    assert session2.next_event() is Signal.CLOSED


def test_wire_head_request() -> None:
    session = Session(cassette_of(interaction("HEAD", "/v1/models", b"", response_body=b"abc")))
    _, out = serve_wire(session, [client_bytes("HEAD", "/v1/models", body=b"")])
    head, body, complete = parse_response(out, method="HEAD")
    assert (b"content-length", b"3") in head.headers
    assert body == b""
    assert complete


def test_wire_forward_passes_the_upstream_through() -> None:
    session = Session(Cassette(), Config(mode=Mode.RECORD))
    session.receive_data(client_bytes())
    forward = session.next_event()
    assert isinstance(forward, Forward)
    session.engine.upstream_head(299, [(b"content-type", b"text/plain")], mono=0.0)
    session.engine.upstream_data(b"hello", mono=0.1)
    session.engine.upstream_end(mono=0.2)
    events, _ = pull(session)
    out = b"".join(
        session.send(e) for e in events if isinstance(e, (ResponseHead, Frame, EndOfResponse))
    )
    recorded = session.engine.record()
    assert isinstance(recorded, Recorded)
    with pytest.raises(LocalProtocolError, match="Recorded is not sent to the client"):
        session.send(recorded)  # type: ignore[arg-type]
    head, body, complete = parse_response(out)
    assert head.status_code == 299
    assert head.reason == b""  # no standard phrase for 299
    assert body == b"hello"
    assert complete


def test_wire_cut_aborts_the_response() -> None:
    rec = interaction(stream="chunks", frames=((0.0, b"part"),), cut=StreamCut(1.0, "reset"))
    session = Session(cassette_of(rec))
    events, out = serve_wire(session, [client_bytes()])
    assert isinstance(events[-1], Cut)
    _, body, complete = parse_response(out)
    assert body == b"part"
    assert not complete  # the client sees the response break off
    assert not session.keep_alive
    assert session.send(Frame(b"")) == b""


def test_wire_client_waiting_for_100_continue_gets_it_then_its_answer() -> None:
    body = b'{"model":"m","messages":[]}'
    wire = client_bytes(headers=[(b"expect", b"100-continue")], body=body)
    head, rest = wire[: wire.index(b"\r\n\r\n") + 4], wire[wire.index(b"\r\n\r\n") + 4 :]
    assert rest == body
    session = Session(cassette_of(interaction()))
    session.receive_data(head)
    events, signal = pull(session)
    assert events == [Continue()]
    assert signal is Signal.NEED_DATA
    assert session.send(events[0]) == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert state(session) is State.IDLE  # an interim answer changes no state
    events, out = serve_wire(session, [rest])
    assert isinstance(events[0], Replay)
    _, answer, complete = parse_response(out)
    assert complete
    assert answer == interaction().response.body


def test_send_before_a_request_is_a_local_error() -> None:
    session = Session(cassette_of(interaction()))
    with pytest.raises(LocalProtocolError, match="can't handle event type Data"):
        session.send(Frame(b"x"))
    assert not session.keep_alive


def test_send_out_of_order_is_a_local_error() -> None:
    session = Session(cassette_of(interaction()))
    session.receive_data(client_bytes())
    with pytest.raises(LocalProtocolError):
        session.send(EndOfResponse())  # before any head


def _refused(chunks: list[bytes], limits: Limits) -> tuple[Session, RemoteProtocolError]:
    session = Session(Cassette(), Config(limits=limits))

    def feed() -> None:
        for c in chunks:
            session.receive_data(c)
            pull(session)

    with pytest.raises(RemoteProtocolError) as info:
        feed()
    return session, info.value


@pytest.mark.parametrize(
    ("wire", "limits", "status"),
    [
        (b"this is not http\r\n\r\n", Limits(), 400),
        (client_bytes(headers=[(b"x-big", b"a" * 3000)]), Limits(max_head=2048), 431),
        (client_bytes(body=b"x" * 200), Limits(max_body=100), 413),
        (client_bytes(body=b"x" * 200, chunked=True), Limits(max_body=100), 413),
        (b"CONNECT api.openai.com:443 HTTP/1.1\r\nHost: api.openai.com\r\n\r\n", Limits(), 405),
    ],
    ids=["garbage", "head", "content-length", "chunked", "connect"],
)
def test_client_protocol_errors(wire: bytes, limits: Limits, status: int) -> None:
    for chunks in splittings(wire, seed=status, randoms=4):
        session, error = _refused(chunks, limits)
        assert error.status == status
        assert state(session) is State.ERROR
        with pytest.raises(LocalProtocolError):
            session.next_event()
        answer = session.error_response(error)
        head, body, complete = parse_response(answer)
        assert head.status_code == status
        assert (b"connection", b"close") in head.headers
        assert json.loads(body)["error"]["type"] == "reel_bad_request"
        assert json.loads(body)["error"]["message"] == str(error)
        assert complete
        assert not session.keep_alive


def test_no_error_answer_once_a_response_started() -> None:
    session = Session(cassette_of(interaction()))
    session.receive_data(client_bytes())
    events, _ = pull(session)
    session.send(events[1])
    assert session.error_response(RemoteProtocolError("late")) == b""


def test_unknown_status_has_no_phrase() -> None:
    session = Session(Cassette(), Config(mode=Mode.LIVE))
    session.receive_data(b"this is not http\r\n\r\n")
    with pytest.raises(RemoteProtocolError) as info:
        session.next_event()
    answer = session.error_response(RemoteProtocolError(str(info.value), 599))
    assert answer.startswith(b"HTTP/1.1 599 \r\n")


# -- fuzzy matching --------------------------------------------------------------


def _chat(content: str) -> bytes:
    return json.dumps({"model": "m", "messages": [{"role": "user", "content": content}]}).encode()


def test_fuzzy_replays_the_nearest_prompt() -> None:
    c = cassette_of(
        interaction(id="france", body=_chat("What is the capital of France?"), response_body=b"P"),
        interaction(id="spain", body=_chat("What is the capital of Spain?"), response_body=b"M"),
    )
    session = Engine(c, Config(match=MatchConfig(MatchMode.FUZZY)))
    exact = one_exchange(session, request(_chat("What is the capital of Spain?")))[0]
    assert isinstance(exact, Replay)
    assert (exact.interaction_id, exact.similarity) == ("spain", None)  # by key
    session.start_next_cycle()
    near = one_exchange(session, request(_chat("What's the capital of France?")))
    replay = near[0]
    assert isinstance(replay, Replay)
    assert replay.interaction_id == "france"
    assert replay.similarity is not None
    assert 0.85 <= replay.similarity < 1.0
    assert b"".join(e.data for e in near if isinstance(e, Frame)) == b"P"


def test_fuzzy_miss_reports_the_nearest_below_the_threshold() -> None:
    c = cassette_of(interaction(id="france", body=_chat("What is the capital of France?")))
    session = Engine(c, Config(match=MatchConfig(MatchMode.FUZZY, threshold=0.95)))
    miss = one_exchange(session, request(_chat("What is the capital of Spain?")))[0]
    assert isinstance(miss, Miss)
    assert miss.report.reason == "no recording reaches the fuzzy threshold 0.95"
    assert miss.report.match == "fuzzy"
    assert miss.report.closest is not None
    assert miss.report.closest.id == "france"
    assert 0.5 < miss.report.closest.score < 0.95  # the prompt similarity
    assert [d.path for d in miss.report.closest.diffs] == ["messages[0].content"]


def test_fuzzy_miss_when_every_recording_was_served() -> None:
    c = cassette_of(interaction(id="a", body=_chat("hello there")))
    session = Engine(c, Config(match=MatchConfig(MatchMode.FUZZY), repeat=False))
    assert isinstance(one_exchange(session, request(_chat("hello there")))[0], Replay)
    session.start_next_cycle()
    miss = one_exchange(session, request(_chat("hello there")))[0]
    assert isinstance(miss, Miss)
    assert miss.report.reason.startswith("this request was recorded once and each recording")


# -- HEAD answers carry no body --------------------------------------------------


def test_a_head_miss_has_no_body() -> None:
    session = Engine(Cassette())
    events = one_exchange(session, request(b"", "/v1/models", "HEAD"))
    assert [type(e) for e in events] == [Miss, ResponseHead, EndOfResponse]
    head = events[1]
    assert isinstance(head, ResponseHead)
    assert head.status == 404
    length = dict(head.headers)[b"content-length"]
    assert int(length) > 0  # the length the body would have had


def test_a_head_refusal_and_upstream_failure_have_no_body() -> None:
    session = Engine(Cassette(), Config(mode=Mode.LIVE, routing=True))
    events = one_exchange(session, request(b"", "/api/tags", "HEAD"))
    assert [type(e) for e in events] == [Refused, ResponseHead, EndOfResponse]
    session = Engine(Cassette(), Config(mode=Mode.LIVE))
    session.receive_request(request(b"", "/v1/models", "HEAD"))
    pull(session)
    session.upstream_error(UpstreamError.TIMEOUT, mono=0.0)
    events, _ = pull(session)
    assert [type(e) for e in events] == [ResponseHead, EndOfResponse]
    head = events[0]
    assert isinstance(head, ResponseHead)
    assert head.status == 504


def test_wire_head_miss_is_a_valid_response() -> None:
    session = Session(Cassette())
    _, out = serve_wire(session, [client_bytes("HEAD", "/v1/models", body=b"")])
    head, body, complete = parse_response(out, method="HEAD")
    assert head.status_code == 404
    assert body == b""
    assert complete


def test_wire_stream_to_an_http_1_0_client_is_close_delimited() -> None:
    session = Session(cassette_of(stream_interaction()))
    body = b'{"model":"m","messages":[]}'
    wire = b"POST /v1/chat/completions HTTP/1.0\r\nContent-Length: 27\r\n\r\n" + body
    events, out = serve_wire(session, [wire])
    assert [type(e) for e in events] == [Replay, ResponseHead, Frame, Frame, Frame, EndOfResponse]
    head, _, rest = out.partition(b"\r\n\r\n")
    assert b"Connection: close" in head
    assert b"transfer-encoding" not in head.lower()
    assert rest == b"".join(d for _, d in SSE_FRAMES)
    assert not session.keep_alive


def test_a_corrupt_line_is_answered_500_and_the_session_goes_on() -> None:
    target = request()
    key = Engine(Cassette()).recorded_request(target).key(MatchConfig())
    # Indexed (key first, ends in "}") but not JSON: found only when used.
    broken = b'{"key":"' + key.encode() + b'","id":BROKEN}'
    cassette = Cassette.loads(Cassette().meta.to_line() + broken + b"\n", name="c.jsonl")
    plain = one_exchange(Engine(cassette), target)[0]  # no hint: nothing named
    assert isinstance(plain, Refused)
    assert "Fix or delete that line, or re-record" in plain.message
    session = Engine(cassette, Config(hints=BINDING_HINTS))
    events = one_exchange(session, target)
    refused = events[0]
    assert isinstance(refused, Refused)
    assert refused.status == 500
    assert "c.jsonl:2: not a JSON line" in refused.message
    assert "(`reel validate c.jsonl` lists every bad line)" in refused.message
    assert state(session) is State.DONE
    session.start_next_cycle()
    # another request is a plain miss: the bad line is nobody's closest recording
    assert isinstance(one_exchange(session, request(b'{"other": 1}'))[0], Miss)


def test_a_client_that_left_is_a_recorded_cut_of_its_own_kind() -> None:
    session = Engine(Cassette(), Config(mode=Mode.RECORD))
    session.receive_request(request(body=b'{"model":"m","stream":true}'))
    assert isinstance(session.next_event(), Forward)
    session.upstream_head(200, [(b"content-type", b"text/event-stream")], mono=0.0)
    session.upstream_data(b"data: 1\n\n", mono=0.1)
    session.upstream_error(Abort.CLIENT_CLOSED, "the client closed", mono=0.2)
    events, _ = pull(session)
    assert events[-1] == Cut("client-closed", "the client closed")
    assert isinstance(session.record(), Recorded)
    [line] = session.cassette
    assert line.response.cut == StreamCut(200.0, "client-closed", "the client closed")
    assert line.response.frames == ((100.0, b"data: 1\n\n"),)
    # replayed: the frames, then the cut where the client left
    replayed = one_exchange(Engine(session.cassette), request(body=b'{"model":"m","stream":true}'))
    assert replayed[-1] == Cut("client-closed", "the client closed", 0.2)


def test_the_http_session_hands_the_engines_forward_through() -> None:
    """A wire binding drives a forward through the Session's bytes and its
    engine: the key, the cut, the recording and the shared cassette are the
    engine's, and the session says when the exchange is over."""
    cassette = Cassette()
    session = Session(cassette, Config(mode=Mode.RECORD))
    session.receive_data(client_bytes())
    forward = session.next_event()
    assert isinstance(forward, Forward)
    assert forward.key is None
    assert session.engine.forward_key().startswith("sha256:")
    assert not finished(session)  # the upstream has yet to answer
    session.engine.upstream_head(200, [(b"content-type", b"text/event-stream")], mono=0.0)
    session.engine.upstream_data(b"data: 1\n\n", mono=0.1)
    session.engine.upstream_error(UpstreamError.RESET, "gone", mono=0.2)
    events, signal = pull(session)
    assert isinstance(events[-1], Cut)
    assert signal is Signal.PAUSED
    assert finished(session)
    recorded = session.engine.record()
    assert isinstance(recorded, Recorded)
    assert recorded.key == session.engine.forward_key()
    assert session.engine.cassette is cassette
    assert len(cassette) == 1


# -- header values over HTTP/1.1 (docs/reliability.md, "A header value the
# peer may send reaches the client as it was sent") ---------------------------


def _h11_read(data: bytes) -> list[tuple[bytes, bytes]]:
    """The response head an HTTP/1.1 client reads from ``data``."""
    client = h11.Connection(h11.CLIENT)
    client.send(h11.Request(method="GET", target="/v1/models", headers=[("host", "h")]))
    client.send(h11.EndOfMessage())
    client.receive_data(data)
    head = client.next_event()
    assert isinstance(head, h11.Response)
    return list(head.headers)


@pytest.mark.parametrize("whole", [True, False])
def test_a_recorded_value_with_spaces_around_it_goes_out_over_http11(whole: bool) -> None:
    """An HTTP/2 recording's value (gRPC's grpc-message: " no more") goes to
    an HTTP/1.1 client as an HTTP/1.1 reader reads it: h11 refuses to write
    the spaces, which are the field's padding there."""
    headers = (("content-type", "application/json"), ("x-pad", " no more "), ("x-b", "\t"))
    recorded = interaction(method="GET", path="/v1/models", body=b"", headers=headers)
    session = Session(cassette_of(recorded))
    session.receive_data(b"GET /v1/models HTTP/1.1\r\nhost: h\r\n\r\n")
    assert isinstance(session.next_event(), Replay)
    sent = session.send_replay() if whole else None
    if sent is not None:
        out = sent[1]
    else:
        out = b""
        while isinstance(event := session.next_event(), Event):
            out += session.send(event)
    got = _h11_read(out)
    assert (b"x-pad", b"no more") in got
    assert (b"x-b", b"") in got


def test_a_forwarded_value_with_spaces_around_it_goes_out_over_http11() -> None:
    session = Session(Cassette(), Config(mode=Mode.LIVE))
    session.receive_data(b"GET /v1/models HTTP/1.1\r\nhost: h\r\n\r\n")
    assert isinstance(session.next_event(), Forward)
    session.engine.upstream_head(200, [(b"x-pad", b" 1 "), (b"content-length", b"0")], mono=0.0)
    head = session.next_event()
    assert isinstance(head, ResponseHead)
    assert (b"x-pad", b" 1 ") in head.headers  # the engine's: as it came
    assert (b"x-pad", b"1") in _h11_read(session.send(head))
