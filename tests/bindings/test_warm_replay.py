"""A recording played again through the httpx/httpx2 transports is answered
as its first play was: the warm path (a later play's response a copy of
the first play's attributes, kept per recording) changes nothing a client
sees -- status, headers (``Content-Length`` too), body (a gzip body
decoded), extensions, whether the body is read already, and every other
attribute httpx and httpx2 set (pinned here, both families)."""

from __future__ import annotations

import contextlib
import gzip
import json
import types
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import httpx
import httpx2
import pytest

from reel_bindings import _transport
from reel_bindings._inprocess import Decision
from reel_bindings._transport import _FRESH, _RESPONSE_STATE, core_request
from reel_bindings.httpcore import AsyncTransport, Transport
from reel_core import (
    Cassette,
    CassetteMeta,
    Interaction,
    MatchConfig,
    RecordedRequest,
    RecordedResponse,
    StreamCut,
)
from reel_core.tools import match_key

CHAT = "/v1/chat/completions"
URL = "https://api.openai.com" + CHAT
JSON = ("content-type", "application/json")


def _interaction(n: int, response: RecordedResponse, method: str) -> Interaction:
    sent = _body(n)
    return Interaction(
        key=match_key(method, CHAT, (), sent, MatchConfig()),
        id=f"{method}-{n}",
        request=RecordedRequest(method, CHAT, (), sent),
        response=response,
    )


#: What a recording may be: a JSON body, an empty one, a body recorded with
#: its own headers in odd case, an error, a stream due at once in fast
#: timing (one frame: httpx adds a ``Content-Length``), a cut stream.
RESPONSES = [
    RecordedResponse(200, (JSON,), body=b'{\n  "ok": true\n}'),
    RecordedResponse(204, ()),
    RecordedResponse(429, (("Retry-After", "1"), JSON), body=b'{"error":"slow down"}'),
    RecordedResponse(200, (("content-type", "text/event-stream"),), stream="sse",
                     frames=((0.0, b"data: [DONE]\n\n"),), end_ms=0.0),
    RecordedResponse(200, (("content-type", "text/event-stream"),), stream="sse",
                     frames=((0.0, b"data: 1\n\n"), (5.0, b"data: 2\n\n")), end_ms=6.0),
    RecordedResponse(200, (JSON,), stream="chunks", frames=((0.0, b"{"),),
                     cut=StreamCut(1.0, "reset")),
]  # fmt: skip


def _body(n: int) -> bytes:
    return json.dumps({"model": "m", "n": n}).encode()


def _written(path: Path, responses: list[RecordedResponse]) -> Path:
    """A cassette at ``path`` recording each of ``responses`` for a
    ``POST`` and a ``HEAD``."""
    store = Cassette(meta=CassetteMeta())
    for method in ("POST", "HEAD"):
        for n, response in enumerate(responses):
            store.add(_interaction(n, response, method))
    path.write_bytes(store.dumps())
    return path


@pytest.fixture
def cassette(tmp_path: Path) -> Path:
    return _written(tmp_path / "warm.jsonl", RESPONSES)


def _seen(response: Any) -> tuple[Any, ...]:
    """All a client can tell of a response, its body read (or cut)."""
    try:
        body: object = response.read()
    except (httpx.RemoteProtocolError, httpx2.RemoteProtocolError) as exc:
        body = type(exc).__name__
    return (
        response.status_code,
        response.headers.raw,
        body,
        response.extensions.get("reel"),
        response.http_version,
    )


@pytest.mark.parametrize("family", [httpx, httpx2])
@pytest.mark.parametrize("method", ["POST", "HEAD"])
def test_a_warm_play_answers_as_the_first(cassette: Path, family: ModuleType, method: str) -> None:
    with family.Client(transport=Transport(cassette, mode="replay", timing="fast")) as client:
        plays = [
            [
                _seen(client.send(client.build_request(method, URL, content=_body(n)), stream=True))
                for n in range(len(RESPONSES))
            ]
            for _ in range(3)
        ]
    assert plays[0] == plays[1] == plays[2]
    assert [p[0] for p in plays[0]] == [r.status for r in RESPONSES]
    if method == "POST":
        assert plays[0][0][2] == b'{\n  "ok": true\n}'
        # a stream due at once, answered whole: httpx's Content-Length, each time
        assert (b"Content-Length", b"14") in plays[2][3][1]


@pytest.mark.parametrize("family", [httpx, httpx2])
def test_a_warm_response_is_read_already_like_the_first(cassette: Path, family: ModuleType) -> None:
    transport = Transport(cassette, mode="replay", timing="fast")
    for _ in range(2):
        request = family.Request("POST", URL, content=_body(0))
        response = transport.handle_request(request)
        assert response.is_stream_consumed
        assert response.is_closed
        assert response.content == b'{\n  "ok": true\n}'
        assert response.headers["content-length"] == "16"


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_warm_async_play_answers_as_the_first(cassette: Path, backend: str) -> None:
    async def main() -> list[list[tuple[Any, ...]]]:
        transport = AsyncTransport(cassette, mode="replay", timing="fast")
        async with httpx.AsyncClient(transport=transport) as client:
            plays = []
            for _ in range(2):
                play = []
                for n in range(len(RESPONSES)):
                    request = client.build_request("POST", URL, content=_body(n))
                    response = await client.send(request, stream=True)
                    try:
                        content: object = await response.aread()
                    except httpx.RemoteProtocolError as exc:
                        content = str(exc)
                    play.append((response.status_code, response.headers.raw, content))
                plays.append(play)
            return plays

    first, warm = anyio.run(main, backend=backend)
    assert first == warm


def test_a_miss_is_not_kept_as_a_recordings_answer(cassette: Path) -> None:
    transport = Transport(cassette, mode="replay")
    with httpx.Client(transport=transport) as client:
        for n in range(3):
            assert client.post(URL, content=_body(100 + n)).status_code == 404
        client.post(URL, content=_body(0))
        client.post(URL, content=_body(0))
    assert len(transport._heads) == 1  # the one recording, not the misses


GZIPPED = gzip.compress(b'{"ok": true, "zipped": "yes"}', mtime=0)
#: Recordings whose body httpx reads otherwise than as it is: gzip-encoded
#: (decoded by httpx), and a stream recorded without a ``Content-Length``
#: answered whole (httpx adds one).
ODD = [
    RecordedResponse(200, (("Content-Encoding", "gzip"), JSON), body=GZIPPED),
    RecordedResponse(200, (("content-type", "text/event-stream"),), stream="sse",
                     frames=((0.0, b"data: 1\n\n"),), end_ms=0.0),
]  # fmt: skip


@pytest.fixture
def odd(tmp_path: Path) -> Path:
    return _written(tmp_path / "odd.jsonl", ODD)


def _state(response: Any) -> dict[str, Any]:
    """Every attribute of ``response``, as a value: the objects httpx makes
    for each response (headers, streams, decoders) by what they hold."""
    seen: dict[str, Any] = {}
    for name, value in vars(response).items():
        if name == "headers":
            value = value.raw
        elif name in ("extensions", "history"):
            value = type(value)(value)  # as it is now
        elif name == "_request" and value is not None:
            value = (value.method, str(value.url), value.content)
        elif name in ("stream", "_decoder", "_elapsed"):  # _elapsed: a stream read
            value = type(value).__name__
        seen[name] = value
    return seen


@pytest.mark.parametrize("family", [httpx, httpx2])
@pytest.mark.parametrize("method", ["POST", "HEAD"])
def test_a_warm_response_holds_what_the_first_holds(
    odd: Path, cassette: Path, family: ModuleType, method: str
) -> None:
    """Attribute by attribute, through a client: a later play copies the
    first play's attributes (``_replay_response``), so any attribute httpx
    or httpx2 set otherwise would show here."""
    for path, count in ((odd, len(ODD)), (cassette, len(RESPONSES))):
        with family.Client(transport=Transport(path, mode="replay", timing="fast")) as client:
            plays = []
            for _ in range(3):
                play = []
                for n in range(count):
                    request = client.build_request(method, URL, content=_body(n))
                    response = client.send(request, stream=True)
                    with contextlib.suppress(family.RemoteProtocolError):
                        response.read()
                    play.append(_state(response))
                plays.append(play)
        assert plays[0] == plays[1] == plays[2]


@pytest.mark.parametrize("family", [httpx, httpx2])
def test_a_gzip_body_is_decoded_on_every_play(odd: Path, family: ModuleType) -> None:
    transport = Transport(odd, mode="replay")
    for _ in range(3):
        response = transport.handle_request(family.Request("POST", URL, content=_body(0)))
        assert response.content == b'{"ok": true, "zipped": "yes"}'
        assert response.json() == {"ok": True, "zipped": "yes"}
        assert response.headers["content-encoding"] == "gzip"
        assert response.headers["content-length"] == str(len(GZIPPED))
        # as httpx itself builds it from the recorded bytes
        built = family.Response(200, headers=response.headers, content=GZIPPED)
        assert response.num_bytes_downloaded == built.num_bytes_downloaded
        assert list(response.iter_bytes()) == [response.content]
    with (
        family.Client(transport=transport) as client,
        client.stream("POST", URL, content=_body(0)) as streamed,  # read already
    ):
        assert streamed.read() == b'{"ok": true, "zipped": "yes"}'
        with pytest.raises(family.StreamConsumed):
            list(streamed.iter_raw())


@pytest.mark.parametrize("family", [httpx, httpx2])
def test_a_stream_without_content_length_gets_httpxs_each_time(
    odd: Path, family: ModuleType
) -> None:
    transport = Transport(odd, mode="replay")
    for method, body in (("POST", b"data: 1\n\n"), ("HEAD", b"")):
        # what httpx answers for the body itself (none for an empty one)
        length = family.Response(200, content=body).headers.get_list("content-length")
        assert length == (["9"] if body else [])
        for _ in range(3):
            response = transport.handle_request(family.Request(method, URL, content=_body(1)))
            assert response.headers.get_list("content-length") == length
            assert response.content == body


@pytest.mark.parametrize("family", [httpx, httpx2])
def test_what_a_user_changes_in_a_response_stays_in_it(cassette: Path, family: ModuleType) -> None:
    """Headers, extensions and history are each play's own: a later play of
    the same recording is answered as the first was, whatever was done to
    the responses before it."""
    transport = Transport(cassette, mode="replay")
    with family.Client(transport=transport) as client:
        first = client.post(URL, content=_body(0))
        expected = _state(first)
        for response in (first, client.post(URL, content=_body(0))):
            response.headers["x-added"] = "by the user"
            del response.headers["content-type"]
            response.extensions["mine"] = True
            response.history.append(response)
            response.status_code = 599
        again = client.post(URL, content=_body(0))
    assert _state(again) == expected
    assert again.extensions == {"reel": "replay"}


@pytest.mark.parametrize("family", [httpx, httpx2])
def test_the_response_attributes_kept_are_those_of_this_httpx(
    cassette: Path, family: ModuleType
) -> None:
    """The warm path copies a response's attributes, which are httpx's own:
    pinned here for both families, so that a version of httpx that adds or
    renames one fails this test (a new attribute might have to be made
    afresh for each play, as headers are)."""
    response = family.Response(200, content=b"{}", extensions={"reel": "replay"})
    assert set(vars(response)) == _RESPONSE_STATE
    assert _FRESH <= _RESPONSE_STATE
    # the others are values, or objects that are never changed once read
    for name, value in vars(response).items():
        if name not in _FRESH:
            assert value is None or isinstance(
                value, (bytes, str, int, family.ByteStream, type(response._decoder))
            ), name


def test_a_response_of_other_attributes_is_built_each_time(
    cassette: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A response that holds other attributes than the known ones (another
    httpx version) is not copied: each play builds its own, as the first."""
    monkeypatch.setattr(_transport, "_RESPONSE_STATE", _RESPONSE_STATE - {"history"})
    transport = Transport(cassette, mode="replay")
    with httpx.Client(transport=transport) as client:
        plays = [_state(client.post(URL, content=_body(0))) for _ in range(3)]
    assert plays[0] == plays[1] == plays[2]
    assert plays[0]["_content"] == b'{\n  "ok": true\n}'
    assert transport._heads == {}


def test_a_transport_keeps_a_bounded_number_of_responses(
    cassette: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_transport, "_HEADS_KEPT", 2)
    transport = Transport(cassette, mode="replay", timing="fast")
    expected = [b'{\n  "ok": true\n}', b'{"error":"slow down"}', b"data: [DONE]\n\n"]
    with httpx.Client(transport=transport) as client:
        for _ in range(3):
            assert [client.post(URL, content=_body(n)).content for n in (0, 2, 3)] == expected
            assert len(transport._heads) <= 2


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("family", [httpx, httpx2])
def test_a_gzip_body_is_decoded_on_every_async_play(
    odd: Path, backend: str, family: ModuleType
) -> None:
    async def main() -> list[tuple[Any, ...]]:
        transport = AsyncTransport(odd, mode="replay")
        async with family.AsyncClient(transport=transport) as client:
            plays = []
            for _ in range(3):
                response = await client.post(URL, content=_body(0))
                plays.append((response.headers.raw, await response.aread(), response.json()))
            return plays

    plays = anyio.run(main, backend=backend)
    assert plays[0] == plays[1] == plays[2]
    assert plays[0][1] == b'{"ok": true, "zipped": "yes"}'


@pytest.mark.parametrize("family", [httpx, httpx2])
def test_recordings_alike_answer_their_own_bodies(tmp_path: Path, family: ModuleType) -> None:
    """Two recordings with the same headers and body length share what
    depends on those alone (headers, decoder), never their bodies."""
    store = Cassette(meta=CassetteMeta())
    for n, body in enumerate((b'{"a": 1}', b'{"b": 2}')):
        store.add(_interaction(n, RecordedResponse(200, (JSON,), body=body), "POST"))
    path = tmp_path / "alike.jsonl"
    path.write_bytes(store.dumps())
    transport = Transport(path, mode="replay")
    with family.Client(transport=transport) as client:
        for _ in range(3):
            assert [client.post(URL, content=_body(n)).json() for n in (0, 1)] == [
                {"a": 1},
                {"b": 2},
            ]
    assert len(transport._shared) == 1


def test_a_kept_answer_of_another_head_is_not_used(cassette: Path) -> None:
    """A recording's head gone, another may take its id: what is kept for
    it answers only a head of the same status and headers, with the same
    body (the same response).  Here the kept answers are made another
    recording's, one field at a time."""
    transport = Transport(cassette, mode="replay")

    def other(field: int, value: Any, name: str, kept: Any) -> None:
        for key, entry in list(transport._heads.items()):
            transport._heads[key] = (*entry[:field], value, *entry[field + 1 :])
            transport._values[key][name] = kept

    with httpx.Client(transport=transport) as client:
        first = _state(client.post(URL, content=_body(0)))
        for field, value, name, kept in (
            (1, 599, "status_code", 599),
            (0, b"{}", "_content", b"{}"),
            (2, ((b"content-type", b"text/plain"),), "status_code", 598),
        ):
            other(field, value, name, kept)
            assert _state(client.post(URL, content=_body(0))) == first


def test_a_response_without_a_dict_is_built_each_time(cassette: Path) -> None:
    """A client family whose responses keep their attributes otherwise
    (slots: nothing to copy) gets a response built for every play."""

    class Slotted:
        __slots__ = ("status_code",)

        def __init__(self, status: int, **given: object) -> None:
            self.status_code = status

    family = types.SimpleNamespace(__name__="httpx", Response=Slotted)
    transport = Transport(cassette, mode="replay")
    request = httpx.Request("POST", URL, content=_body(0))
    for _ in range(2):
        decision = transport.player.decide(core_request(request, request.read()))
        assert isinstance(decision, Decision)
        response = transport._replay_response(family, decision, decision.body)  # type: ignore[arg-type]
        assert type(response) is Slotted
        assert response.status_code == 200
    assert transport._heads == {}


#: First plays of bodies needing no decoding, in the shapes a recording
#: takes: the template path (``_from_template``) must give each what
#: httpx's own build does.
SHAPES = [
    *RESPONSES,
    *ODD,
    RecordedResponse(200, (JSON, ("content-length", "11")), body=b'{"n": 1234}'),
    RecordedResponse(200, (("Content-Type", "text/plain; charset=latin-1"),), body=b"caf\xe9"),
    RecordedResponse(200, (JSON,), body=b""),
    RecordedResponse(201, (("X-Many", "a, b"), ("x-many", "c"), JSON), body=b"[]"),
    RecordedResponse(500, (("content-type", "text/html"),), body=b"<h1>oops</h1>"),
]


@pytest.fixture
def fresh_templates(monkeypatch: pytest.MonkeyPatch) -> dict[type, Any]:
    """No template checked yet in this process (each family's first play
    is built by httpx again, and checked)."""
    templates: dict[type, Any] = {}
    monkeypatch.setattr(_transport, "_TEMPLATES", templates)
    return templates


def _first_plays(path: Path, family: ModuleType, method: str) -> list[dict[str, Any]]:
    """Each recording's first play through a new transport, as values."""
    transport = Transport(path, mode="replay", timing="fast")
    states = []
    for n in range(len(SHAPES)):
        response = transport.handle_request(family.Request(method, URL, content=_body(n)))
        with contextlib.suppress(family.RemoteProtocolError):
            response.read()
        states.append(_state(response))
    return states


@pytest.mark.parametrize("family", [httpx, httpx2])
@pytest.mark.parametrize("method", ["POST", "HEAD"])
def test_a_first_play_made_from_values_holds_what_httpx_builds(
    tmp_path: Path,
    family: ModuleType,
    method: str,
    fresh_templates: dict[type, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = _written(tmp_path / "shapes.jsonl", SHAPES)
    built: list[int] = []
    init = family.Response.__init__

    def counting(self: Any, *args: Any, **kwargs: Any) -> None:
        built.append(1)
        init(self, *args, **kwargs)

    monkeypatch.setattr(family.Response, "__init__", counting)
    made = _first_plays(path, family, method)
    assert fresh_templates[family.Response] is not None  # checked, and used
    # built by httpx: the first, the gzip body, and the streams not due at
    # once (a HEAD's stream without its body is due at once, but a cut's)
    httpx_built = 4 if method == "POST" else 3
    assert len(built) == httpx_built
    # the same recordings, every first play built by httpx
    monkeypatch.setattr(_transport, "_checked_template", lambda *args: None)
    fresh_templates.clear()
    reference = _first_plays(path, family, method)
    assert len(built) == httpx_built + len(SHAPES)
    assert made == reference
    if method == "POST":
        latin = made[len(RESPONSES) + len(ODD) + 1]
        assert latin["_content"] == b"caf\xe9"
        lengths = [v for k, v in latin["headers"] if k.lower() == b"content-length"]
        assert lengths == [b"4"]


@pytest.mark.parametrize("family", [httpx, httpx2])
def test_a_family_that_builds_otherwise_gets_httpxs_build_every_time(
    cassette: Path,
    family: ModuleType,
    fresh_templates: dict[type, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A response made from values that differs from httpx's own build
    in anything (a version of httpx that reads a body otherwise) turns
    the template off for that family."""
    made = _transport._from_template

    def otherwise(*args: Any) -> Any:
        response = made(*args)
        response.default_encoding = "latin-1"
        return response

    monkeypatch.setattr(_transport, "_from_template", otherwise)
    transport = Transport(cassette, mode="replay", timing="fast")
    for n in (0, 2):
        response = transport.handle_request(family.Request("POST", URL, content=_body(n)))
        assert response.default_encoding == "utf-8"
    assert fresh_templates == {family.Response: None}


def test_a_transport_with_a_template_answers_text_and_json(
    tmp_path: Path, fresh_templates: dict[type, Any]
) -> None:
    """Through a client, bodies made from values read as httpx's do."""
    path = _written(tmp_path / "shapes.jsonl", SHAPES)
    with httpx2.Client(transport=Transport(path, mode="replay", timing="fast")) as client:
        first = client.post(URL, content=_body(0))
        latin = client.post(URL, content=_body(len(RESPONSES) + len(ODD) + 1))
        error = client.post(URL, content=_body(2))
    assert first.json() == {"ok": True}
    assert latin.text == "café"
    assert latin.encoding == "latin-1"
    assert error.status_code == 429
    assert error.json() == {"error": "slow down"}
    assert error.headers["retry-after"] == "1"
    assert fresh_templates[httpx2.Response] is not None
