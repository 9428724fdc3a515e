"""A response's trailers (HTTP/2; gRPC's ``grpc-status``): fed to the engine
after the last data (``upstream_trailers``), recorded on the line, redacted
as the headers are, and replayed as a :class:`Trailers` event between the
last frame and the end."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reel_core import (
    Cassette,
    Config,
    EndOfResponse,
    Engine,
    Event,
    Forward,
    Frame,
    Interaction,
    LocalProtocolError,
    Mode,
    RecordedResponse,
    Redactor,
    Replay,
    Request,
    ResponseHead,
    Session,
    Signal,
    State,
    Timing,
    Trailers,
    replay_schedule,
)
from reel_core.tools import record_exchange

from ._helpers import cassette_of, client_bytes, interaction, parse_response, pull, request

GRPC = [(b"content-type", b"application/grpc")]
SECRET = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 3


def forwarded(*, headers: tuple[tuple[bytes, bytes], ...] = ()) -> tuple[Engine, Cassette]:
    cassette = Cassette("c")
    engine = Engine(cassette, Config(mode=Mode.RECORD))
    engine.receive_request(request(headers=((b"host", b"api.x.ai"), *headers)))
    events, _ = pull(engine)
    assert isinstance(events[0], Forward)
    return engine, cassette


def record(
    trailers: list[tuple[bytes, bytes]], **kw: tuple[tuple[bytes, bytes], ...]
) -> Interaction:
    engine, _ = forwarded(**kw)
    engine.upstream_head(200, GRPC, mono=1.0)
    engine.upstream_data(b"\x00\x00\x00\x00\x02hi", mono=1.1)
    engine.upstream_trailers(trailers, mono=1.2)
    engine.upstream_end(mono=1.3)
    events, _ = pull(engine)
    assert [type(e) for e in events] == [ResponseHead, Frame, Trailers, EndOfResponse]
    assert events[2] == Trailers(tuple(trailers))
    recorded = engine.record()
    assert recorded is not None
    return Interaction.from_json(json.loads(recorded.line))


def test_trailers_are_handed_on_recorded_and_read_back() -> None:
    got = record([(b"grpc-status", b"0"), (b"grpc-message", b"")])
    assert got.response.trailers == (("grpc-status", "0"), ("grpc-message", ""))
    line = json.loads(got.to_line())
    response = line["response"]
    # after the frames and their end, in order, as the headers are written
    assert list(response)[-1] == "trailers"
    assert response["trailers"] == [["grpc-status", "0"], ["grpc-message", ""]]
    assert Interaction.from_json(json.loads(got.to_line())) == got


def test_a_response_without_trailers_writes_none() -> None:
    line = json.loads(interaction().to_line())
    assert "trailers" not in line["response"]


def test_a_secret_echoed_in_a_trailer_is_not_stored() -> None:
    # the request's credential, echoed by the upstream in a trailer
    got = record(
        [(b"grpc-status", b"16"), (b"grpc-message", f"bad key {SECRET}".encode())],
        headers=((b"authorization", f"Bearer {SECRET}".encode()),),
    )
    assert SECRET not in got.to_line().decode()
    assert got.response.trailers[0] == ("grpc-status", "16")
    # a credential-named trailer, and the redactor's patterns
    response = RecordedResponse(
        200, trailers=(("x-api-key", "plain-value"), ("grpc-message", f"echo {SECRET}"))
    )
    redacted = response.redacted(Redactor())
    assert "plain-value" not in str(redacted.trailers)
    assert SECRET not in str(redacted.trailers)
    found: list[tuple[str, list[str]]] = []
    response.redacted(Redactor(), lambda where, kinds: found.append((where, kinds)))
    assert [where for where, kinds in found if kinds] == [
        "response.trailers.x-api-key",
        "response.trailers.grpc-message",
    ]


def replay_events(response: RecordedResponse, timing: Timing | None = None) -> list[Event]:
    stored = interaction(
        stream=response.stream,
        frames=response.frames,
        end_ms=response.end_ms,
        headers=(("content-type", "application/grpc"),),
    )
    stored = Interaction(
        key=stored.key,
        id=stored.id,
        request=stored.request,
        response=RecordedResponse(
            stored.response.status,
            stored.response.headers,
            stream=response.stream,
            frames=response.frames,
            end_ms=response.end_ms,
            trailers=response.trailers,
        ),
    )
    config = Config(mode=Mode.REPLAY, timing=timing or Timing())
    engine = Engine(cassette_of(stored), config)
    engine.receive_request(request())
    events, _ = pull(engine)
    assert isinstance(events[0], Replay)
    assert engine.state is State.DONE
    return events[1:]


def test_replay_order_frames_then_trailers_then_end() -> None:
    response = RecordedResponse(
        200,
        stream="grpc",
        frames=((5.0, b"\x00\x00\x00\x00\x01a"), (9.0, b"\x00\x00\x00\x00\x01b")),
        end_ms=12.0,
        trailers=(("grpc-status", "0"),),
    )
    events = replay_events(response, Timing.parse("realtime"))
    assert [type(e) for e in events] == [ResponseHead, Frame, Frame, Trailers, EndOfResponse]
    trailers, end = events[3], events[4]
    assert isinstance(trailers, Trailers)
    assert isinstance(end, EndOfResponse)
    assert trailers == Trailers(((b"grpc-status", b"0"),), end.at)
    assert end.at == pytest.approx(0.012)


def test_http1_session_sends_nothing_for_trailers() -> None:
    session = Session(Cassette("c"))
    assert session.send(Trailers(((b"grpc-status", b"0"),))) == b""


def trailed() -> Engine:
    engine, _ = forwarded()
    engine.upstream_head(200, GRPC, mono=1.0)
    engine.upstream_trailers([(b"grpc-status", b"0")], mono=1.1)
    return engine


def test_data_after_trailers_is_misuse() -> None:
    engine = trailed()
    with pytest.raises(LocalProtocolError, match="after upstream_trailers"):
        engine.upstream_data(b"x", mono=1.2)
    assert engine.state is State.ERROR


def test_trailers_twice_is_misuse() -> None:
    engine = trailed()
    with pytest.raises(LocalProtocolError, match="one set of trailers"):
        engine.upstream_trailers([(b"grpc-status", b"0")], mono=1.2)
    assert engine.state is State.ERROR


def test_trailers_before_the_head_are_refused_by_the_table() -> None:
    engine, _ = forwarded()
    with pytest.raises(LocalProtocolError, match="UPSTREAM_TRAILERS is not allowed"):
        engine.upstream_trailers([(b"grpc-status", b"0")], mono=1.0)


def test_the_next_exchange_may_have_trailers_again() -> None:
    engine, _ = forwarded()
    engine.upstream_head(200, GRPC, mono=1.0)
    engine.upstream_trailers([(b"grpc-status", b"0")], mono=1.1)
    engine.upstream_end(mono=1.2)
    pull(engine)
    engine.record()
    engine.start_next_cycle()
    engine.receive_request(request(b'{"other":1}'))
    pull(engine)
    engine.upstream_head(200, GRPC, mono=2.0)
    engine.upstream_data(b"\x00\x00\x00\x00\x00", mono=2.1)
    engine.upstream_trailers([(b"grpc-status", b"0")], mono=2.1)
    engine.upstream_end(mono=2.2)
    assert engine.state is State.DONE


_TOKEN = st.from_regex(re.compile(r"[a-z][a-z0-9-]{0,15}"), fullmatch=True)
_VALUE = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40)


@given(st.lists(st.tuples(_TOKEN, _VALUE), max_size=6))
def test_any_trailers_round_trip_through_the_line(pairs: list[tuple[str, str]]) -> None:
    response = RecordedResponse(
        200, stream="grpc", frames=((1.0, b"\x00\x00\x00\x00\x00"),), trailers=tuple(pairs)
    )
    base = interaction()
    stored = Interaction(key=base.key, id="t", request=base.request, response=response)
    back = Interaction.from_json(json.loads(stored.to_line()))
    assert back.response.trailers == tuple(pairs)
    assert back == stored


@pytest.mark.parametrize(
    "value",
    [{"a": "b"}, [["a"]], [["a", 1]], "grpc-status: 0"],
)
def test_bad_trailers_on_a_line_are_refused(value: object) -> None:
    line = json.loads(interaction().to_line())
    line["response"]["trailers"] = value
    with pytest.raises(ValueError, match=r'"response.trailers" must be a list'):
        Interaction.from_json(line)


def test_live_mode_hands_trailers_on_and_records_nothing() -> None:
    engine = Engine(Cassette("c"), Config(mode=Mode.LIVE))
    engine.receive_request(request())
    pull(engine)
    engine.upstream_head(200, GRPC, mono=1.0)
    engine.upstream_trailers([(b"Grpc-Status", b"0")], mono=1.1)
    engine.upstream_end(mono=1.2)
    events, _ = pull(engine)
    assert events[1:] == [Trailers(((b"grpc-status", b"0"),)), EndOfResponse()]
    assert engine.record() is None


def grpc_cassette() -> Cassette:
    base = interaction()
    response = RecordedResponse(
        200,
        (("content-type", "application/grpc"),),
        stream="grpc",
        frames=((1.0, b"\x00\x00\x00\x00\x01a"), (2.0, b"\x00\x00\x00\x00\x01b")),
        end_ms=3.0,
        trailers=(("grpc-status", "0"),),
    )
    return cassette_of(Interaction(key=base.key, id="g", request=base.request, response=response))


def test_an_http1_replay_with_trailers_is_the_body_whole() -> None:
    # no whole serialization for it (a Trailers event), then event by event
    session = Session(grpc_cassette(), Config(mode=Mode.REPLAY))
    session.receive_data(client_bytes())
    decision = session.next_event()
    assert isinstance(decision, Replay)
    assert session.send_replay() is None
    out = b""
    while not isinstance(event := session.next_event(), Signal):
        out += session.send(event)
    head, body, ended = parse_response(out)
    assert head.status_code == 200
    assert body == b"\x00\x00\x00\x00\x01a\x00\x00\x00\x00\x01b"
    assert ended


def test_the_replay_schedule_steps_over_trailers() -> None:
    # The schedule's steps are the body's (frames, then the end): an HTTP/1.1
    # binding sends no trailers; an HTTP/2 one takes them from the events.
    events = replay_events(
        RecordedResponse(
            200,
            stream="grpc",
            frames=((1.0, b"\x00\x00\x00\x00\x00"),),
            end_ms=2.0,
            trailers=(("grpc-status", "0"),),
        )
    )
    steps = list(replay_schedule(events[1:]))
    assert [type(step.event) for step in steps] == [Frame, EndOfResponse]


@given(
    st.lists(st.tuples(_TOKEN, _VALUE), min_size=1, max_size=4),
    st.integers(0, 3),
    st.integers(0, 40),
    st.from_regex(re.compile(r"[A-Za-z0-9]{24,40}"), fullmatch=True),
)
def test_a_credential_echoed_in_any_trailer_is_never_stored(
    pairs: list[tuple[str, str]], which: int, at: int, token: str
) -> None:
    name, value = pairs[which % len(pairs)]
    at = min(at, len(value))
    pairs[which % len(pairs)] = (name, value[:at] + token + value[at:])
    got = record_exchange(
        Request(
            "POST", "/xai_api.Chat/GetCompletion", ((b"authorization", f"Bearer {token}".encode()),)
        ),
        200,
        GRPC,
        b"\x00\x00\x00\x00\x00",
        redactor=Redactor(),
        trailers=pairs,
    )
    assert token not in got.to_line().decode()
    assert len(got.response.trailers) == len(pairs)
