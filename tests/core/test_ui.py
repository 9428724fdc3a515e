"""Reel's own viewer on the proxy (``Config.ui``): which requests are for it,
who may read it, and that such a request, routed by the binding through its
HTTP adapter, never reaches the engine: it is never matched nor recorded."""

from __future__ import annotations

import json

import pytest

from reel_core import (
    Config,
    Engine,
    Forward,
    Hints,
    LocalProtocolError,
    Miss,
    Mode,
    Request,
    Routed,
    Session,
    Signal,
    State,
)
from reel_core.tools import UiConfig, UiRefusal, UiResource, ui_request

from ._helpers import cassette_of, finished, interaction, parse_response, state

LOCAL = ((b"host", b"127.0.0.1:7878"),)

#: The proxy's wording of the viewer's hints.
PROXY = Hints(ui_public="start the proxy with --ui-public", ui_off="start the proxy without --ui")


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
    refusal = ui_request(get("/_reel/", host), UiConfig(), PROXY)
    assert isinstance(refusal, UiRefusal)
    assert refusal.status == 403
    assert "--ui-public" in refusal.message  # the binding's words
    plain = ui_request(get("/_reel/", host), UiConfig())
    assert isinstance(plain, UiRefusal)
    assert "UiConfig(public=True)" in plain.message  # the core names no flag
    assert ui_request(get("/_reel/", host), UiConfig(public=True)) is UiResource.PAGE


def test_an_unknown_viewer_path_is_404_and_other_methods_405() -> None:
    missing = ui_request(get("/_reel/nope"), UiConfig(), PROXY)
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


UI = UiConfig()


def viewer(request: Request) -> bool:
    """The proxy's route: whether a request is for its viewer."""
    return ui_request(request, UI) is not None


def _recorded_chat() -> Session:
    return Session(cassette_of(interaction()), Config(mode=Mode.AUTO, ui=UI), route=viewer)


def _answer(data: bytes, method: str = "GET") -> tuple[int, dict[bytes, bytes], bytes]:
    head, body, ended = parse_response(data, method)
    assert ended
    return head.status_code, dict(head.headers), body


def test_the_session_hands_a_viewer_request_to_the_binding_and_records_nothing() -> None:
    session = _recorded_chat()
    before = len(session.engine.cassette)
    session.receive_data(b"GET /_reel/version?x=1 HTTP/1.1\r\nHost: 127.0.0.1:7878\r\n\r\n")
    routed = session.next_event()
    assert isinstance(routed, Routed)
    assert ui_request(routed.request, UI) is UiResource.VERSION
    assert session.next_event() is Signal.PAUSED  # the binding draws the page
    assert not finished(session)
    assert state(session) is State.IDLE  # the engine never saw it
    body = json.dumps({"version": "abc"}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    status, got, sent = _answer(session.respond(200, headers, body))
    assert (status, got[b"content-type"], sent) == (200, b"application/json", body)
    assert session.next_event() is Signal.PAUSED
    assert finished(session)
    assert session.keep_alive
    assert session.engine.record() is None  # nothing to append
    assert len(session.engine.cassette) == before
    session.start_next_cycle()
    # the next request on the connection is a recording's as usual
    chat = b'{"model":"m","messages":[]}'
    session.receive_data(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:7878\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(chat), chat)
    )
    assert session.next_event().__class__.__name__ == "Replay"


def test_a_head_request_gets_the_head_only() -> None:
    session = _recorded_chat()
    session.receive_data(b"HEAD /_reel/ HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert isinstance(session.next_event(), Routed)
    page = b"<!doctype html>"
    data = session.respond(200, [(b"content-length", b"15")], page)
    status, headers, body = _answer(data, "HEAD")
    assert (status, headers[b"content-length"], body) == (200, b"15", b"")


def test_a_refused_viewer_request_is_answered_and_not_forwarded() -> None:
    session = _recorded_chat()
    session.receive_data(b"GET /_reel/ HTTP/1.1\r\nHost: evil.example\r\n\r\n")
    routed = session.next_event()
    assert isinstance(routed, Routed)
    refusal = ui_request(routed.request, UI)
    assert isinstance(refusal, UiRefusal)
    status, headers, body = _answer(session.refuse(refusal.status, "reel_ui", refusal.message))
    assert status == 403
    assert headers[b"content-type"] == b"application/json"
    assert headers[b"content-length"] == str(len(body)).encode()
    assert json.loads(body)["error"]["type"] == "reel_ui"
    assert session.engine.record() is None
    assert finished(session)


def test_the_viewer_is_routed_before_any_cassette_is_chosen() -> None:
    chosen: list[Request] = []

    def select(request: Request) -> object:
        chosen.append(request)
        raise AssertionError("a viewer request chose a cassette")

    session = Session(select, Config(ui=UI), route=viewer)  # type: ignore[arg-type]
    session.receive_data(b"GET /_reel/ HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert isinstance(session.next_event(), Routed)
    assert chosen == []


def test_the_engine_knows_no_viewer() -> None:
    """``Config.ui`` is the proxy's to route by: an engine given it decides
    a ``/_reel/`` request as any other (a miss in replay mode)."""
    engine = Engine(cassette_of(interaction()), Config(mode=Mode.REPLAY, ui=UI))
    engine.receive_request(get("/_reel/"))
    assert isinstance(engine.next_event(), Miss)


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


def test_respond_out_of_turn_is_a_misuse() -> None:
    session = _recorded_chat()
    with pytest.raises(LocalProtocolError, match="Routed"):
        session.respond(200, [], b"")
    assert state(session) is State.ERROR
    early = _recorded_chat()
    early.receive_data(b"GET /_reel/ HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert isinstance(early.next_event(), Routed)
    with pytest.raises(LocalProtocolError, match="respond"):
        early.start_next_cycle()
    assert state(early) is State.ERROR


def test_the_session_serializes_the_page_over_http() -> None:
    session = Session(cassette_of(interaction()), Config(ui=UI), route=viewer)
    session.receive_data(b"GET /_reel/ HTTP/1.1\r\nHost: localhost:7878\r\n\r\n")
    decision = session.next_event()
    assert isinstance(decision, Routed)
    assert ui_request(decision.request, UI) is UiResource.PAGE
    page = b"<p>hi</p>"
    headers = [(b"content-type", b"text/html; charset=utf-8"), (b"content-length", b"9")]
    head, body, ended = parse_response(session.respond(200, headers, page), "GET")
    assert head.status_code == 200
    assert (b"content-type", b"text/html; charset=utf-8") in head.headers
    assert (body, ended) == (b"<p>hi</p>", True)
