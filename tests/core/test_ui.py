"""Reel's own viewer on the proxy (``Config.ui``): which requests are for it,
who may read it, and that such a request is never matched nor recorded."""

from __future__ import annotations

import json

import pytest

from reel_core import (
    Config,
    EndOfResponse,
    Engine,
    Forward,
    Frame,
    LocalProtocolError,
    Miss,
    Mode,
    Refused,
    Request,
    ResponseHead,
    Session,
    Signal,
    State,
)
from reel_core._ui import UiRefusal, ui_request
from reel_core.tools import UiConfig, UiRequest, UiResource

from ._helpers import cassette_of, interaction, parse_response, pull, state

LOCAL = ((b"host", b"127.0.0.1:7878"),)


def get(target: str, host: bytes | None = b"127.0.0.1:7878", method: str = "GET") -> Request:
    return Request(method, target, ((b"host", host),) if host is not None else ())


@pytest.mark.parametrize(
    ("target", "resource"),
    [
        ("/_reel/", UiResource.PAGE),
        ("/_reel", UiResource.PAGE),
        ("/_reel/?cassette=x", UiResource.PAGE),
        ("/_reel/version", UiResource.VERSION),
        ("/_reel/version?t=1", UiResource.VERSION),
    ],
)
def test_the_viewer_resources(target: str, resource: UiResource) -> None:
    assert ui_request(get(target), UiConfig()) is resource
    assert ui_request(get(target, method="HEAD"), UiConfig()) is resource


@pytest.mark.parametrize(
    "target", ["/", "/v1/chat/completions", "/_reelx", "/_reel_/", "/x/_reel/", "/_REEL/"]
)
def test_other_paths_are_not_for_the_viewer(target: str) -> None:
    assert ui_request(get(target), UiConfig()) is None
    assert ui_request(get(target, host=b"evil.example"), UiConfig()) is None


@pytest.mark.parametrize(
    "host",
    [
        b"127.0.0.1:7878",
        b"127.0.0.1",
        b"127.3.4.5:80",
        b"localhost:7878",
        b"LOCALHOST",
        b"[::1]:7878",
        b"[::1]",
        b" localhost:1 ",
        b"::1",  # no brackets, no port: no browser sends it, still this machine
    ],
)
def test_loopback_hosts_are_answered(host: bytes) -> None:
    assert ui_request(get("/_reel/", host), UiConfig()) is UiResource.PAGE


@pytest.mark.parametrize(
    "host",
    [
        None,  # no Host at all (HTTP/1.0)
        b"",
        b"evil.example:7878",  # DNS rebinding: another site's name for 127.0.0.1
        b"127.0.0.1.evil.example",
        b"localhost.evil.example:7878",
        b"10.0.0.5:7878",
        b"[::1",  # a bracket never closed
        b"[2001:db8::1]:7878",
    ],
)
def test_other_hosts_are_refused_unless_public(host: bytes | None) -> None:
    refusal = ui_request(get("/_reel/", host), UiConfig())
    assert isinstance(refusal, UiRefusal)
    assert refusal.status == 403
    assert "--ui-public" in refusal.message
    assert ui_request(get("/_reel/", host), UiConfig(public=True)) is UiResource.PAGE


def test_an_unknown_viewer_path_is_404_and_other_methods_405() -> None:
    missing = ui_request(get("/_reel/nope"), UiConfig())
    assert isinstance(missing, UiRefusal)
    assert missing.status == 404
    assert "/_reel/nope" in missing.message
    assert "without --ui" in missing.message
    posted = ui_request(get("/_reel/", method="POST"), UiConfig())
    assert isinstance(posted, UiRefusal)
    assert posted.status == 405
    assert "GET and HEAD" in posted.message
    # the host is checked first: another site learns nothing of the paths
    other = ui_request(get("/_reel/nope", host=b"evil.example"), UiConfig())
    assert isinstance(other, UiRefusal)
    assert other.status == 403


def _recorded_chat() -> Engine:
    return Engine(cassette_of(interaction()), Config(mode=Mode.AUTO, ui=UiConfig()))


def test_the_engine_hands_a_viewer_request_to_the_binding_and_records_nothing() -> None:
    engine = _recorded_chat()
    before = len(engine.cassette)
    engine.receive_request(get("/_reel/version?x=1"))
    events, signal = pull(engine)
    assert events == [UiRequest(get("/_reel/version?x=1"), UiResource.VERSION)]
    assert signal is Signal.PAUSED
    assert state(engine) is State.AWAIT_PAGE
    body = json.dumps({"version": "abc"}).encode()
    engine.ui_answer(body, "application/json")
    events, signal = pull(engine)
    head, frame, end = events
    assert isinstance(head, ResponseHead)
    assert head.status == 200
    assert dict(head.headers)[b"content-type"] == b"application/json"
    assert dict(head.headers)[b"content-length"] == str(len(body)).encode()
    assert dict(head.headers)[b"cache-control"] == b"no-store"
    assert frame == Frame(body, 0.0)
    assert isinstance(end, EndOfResponse)
    assert state(engine) is State.DONE
    assert engine.record() is None  # nothing to append
    assert len(engine.cassette) == before
    engine.start_next_cycle()
    # the next request on the connection is a recording's as usual
    engine.receive_request(
        Request("POST", "/v1/chat/completions", LOCAL, b'{"model":"m","messages":[]}')
    )
    assert pull(engine)[0][0].__class__.__name__ == "Replay"


def test_a_head_request_gets_the_head_only() -> None:
    engine = _recorded_chat()
    engine.receive_request(get("/_reel/", method="HEAD"))
    pull(engine)
    engine.ui_answer(b"<!doctype html>", "text/html; charset=utf-8")
    events, _ = pull(engine)
    assert [type(e) for e in events] == [ResponseHead, EndOfResponse]
    assert dict(events[0].headers)[b"content-length"] == b"15"  # type: ignore[union-attr]


def test_a_refused_viewer_request_is_answered_and_not_forwarded() -> None:
    engine = _recorded_chat()
    engine.receive_request(get("/_reel/", host=b"evil.example"))
    events, _ = pull(engine)
    refused, head, _body, _end = events
    assert isinstance(refused, Refused)
    assert refused.status == 403
    assert isinstance(head, ResponseHead)
    assert head.status == 403
    assert b"reel_ui" in _body.data  # type: ignore[union-attr]
    assert engine.record() is None


def test_the_viewer_is_decided_before_any_cassette_is_chosen() -> None:
    chosen: list[Request] = []

    def select(request: Request) -> object:
        chosen.append(request)
        raise AssertionError("a viewer request chose a cassette")

    engine = Engine(select, Config(ui=UiConfig()))  # type: ignore[arg-type]
    engine.receive_request(get("/_reel/"))
    assert isinstance(engine.next_event(), UiRequest)
    assert chosen == []


def test_without_ui_a_reel_path_is_a_request_like_any_other() -> None:
    replay = Engine(cassette_of(interaction()), Config(mode=Mode.REPLAY))
    replay.receive_request(get("/_reel/"))
    assert isinstance(replay.next_event(), Miss)
    forward = Engine(
        cassette_of(interaction()),
        Config(mode=Mode.RECORD, routing=True, upstream="http://127.0.0.1:9"),
    )
    forward.receive_request(get("/_reel/version"))
    decision = forward.next_event()
    assert isinstance(decision, Forward)
    assert decision.record
    assert decision.url == "http://127.0.0.1:9/_reel/version"


def test_ui_answer_out_of_turn_is_a_misuse() -> None:
    engine = _recorded_chat()
    with pytest.raises(LocalProtocolError, match="PAGE is not allowed in state IDLE"):
        engine.ui_answer(b"", "text/html")
    assert state(engine) is State.ERROR


def test_the_session_serializes_the_page_over_http() -> None:
    session = Session(cassette_of(interaction()), Config(ui=UiConfig()))
    session.receive_data(b"GET /_reel/ HTTP/1.1\r\nHost: localhost:7878\r\n\r\n")
    decision = session.next_event()
    assert isinstance(decision, UiRequest)
    assert decision.resource is UiResource.PAGE
    session.ui_answer(b"<p>hi</p>", "text/html; charset=utf-8")
    wire = b""
    while not isinstance(event := session.next_event(), Signal):
        wire += session.send(event)
    head, body, ended = parse_response(wire, "GET")
    assert head.status_code == 200
    assert (b"content-type", b"text/html; charset=utf-8") in head.headers
    assert (body, ended) == (b"<p>hi</p>", True)
