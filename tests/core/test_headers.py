"""Which response headers a recording stores (``reel_core._headers``), and
that every way a recording is made or redacted again applies the rule."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from reel_core import (
    Cassette,
    CassetteError,
    CassetteMeta,
    Config,
    ConfigError,
    Engine,
    Forward,
    Interaction,
    MatchConfig,
    Mode,
    RecordedRequest,
    RecordedResponse,
    Redactor,
    Replay,
    Request,
    ResponseHead,
)
from reel_core._headers import (
    SECRET_HEADER,
    dropped_setting,
    keep_response_header,
    scrub_value,
    stored_headers,
)
from reel_core.tools import record_exchange

from ._helpers import pull

R = Redactor()
KEY = "sk-proj-" + "Zx9Yw8Vu7T" * 4


def test_every_end_to_end_header_is_kept_in_order_with_repeats() -> None:
    headers = [
        ("Content-Type", "application/json"),
        ("Link", '<https://api.example.com/items?page=2>; rel="next"'),
        ("Set-Cookie", "session=abc"),
        ("link", '<https://api.example.com/items?page=1>; rel="first"'),
        ("Transfer-Encoding", "chunked"),
        ("vary", "accept"),
        ("Content-Length", "12"),
        ("Proxy-Status", "edge; error=none"),
        ("vary", "accept-encoding"),
        ("Keep-Alive", "timeout=5"),
        ("Location", "/next"),
    ]
    kept, dropped = stored_headers(headers)
    assert kept == [
        ("Content-Type", "application/json"),
        ("Link", '<https://api.example.com/items?page=2>; rel="next"'),
        ("link", '<https://api.example.com/items?page=1>; rel="first"'),
        ("vary", "accept"),
        ("vary", "accept-encoding"),
        ("Location", "/next"),
    ]
    assert dropped == [
        "set-cookie",
        "transfer-encoding",
        "content-length",
        "proxy-status",
        "keep-alive",
    ]


def test_headers_a_connection_header_names_are_of_the_hop() -> None:
    headers = [
        ("Connection", "keep-alive, X-Hop"),
        ("x-hop", "1"),
        ("connection", " X-Other "),
        ("X-Other", "2"),
        ("x-end", "3"),
    ]
    assert stored_headers(headers) == (
        [("x-end", "3")],
        ["connection", "x-hop", "connection", "x-other"],
    )


def test_named_headers_are_dropped_too() -> None:
    drop = frozenset({"x-trace-id"})
    assert not keep_response_header("X-Trace-Id", drop)
    assert keep_response_header("X-Trace-Id")
    assert stored_headers([("X-Trace-Id", "t"), ("etag", '"e"')], drop) == (
        [("etag", '"e"')],
        ["x-trace-id"],
    )


@pytest.mark.parametrize("name", ["x-api-key", "X-Auth-Token", "x-session-token", "api-key"])
def test_a_credential_named_header_is_blanked(name: str) -> None:
    found: list[str] = []
    assert scrub_value(R, name, "opaque-value-1234", found) == f"[REDACTED:{SECRET_HEADER}]"
    assert found == [SECRET_HEADER]
    # idempotent: a placeholder (or nothing) is left as it is
    found = []
    assert (
        scrub_value(R, name, f"[REDACTED:{SECRET_HEADER}]", found) == f"[REDACTED:{SECRET_HEADER}]"
    )
    assert scrub_value(R, name, "", found) == ""
    assert found == []


def test_a_field_the_redactor_names_is_blanked_as_a_header() -> None:
    redactor = Redactor(fields=("x-tenant",))
    assert scrub_value(redactor, "X-Tenant", "acme") == f"[REDACTED:{SECRET_HEADER}]"
    assert scrub_value(redactor, "x-request-id", "/a?x-tenant=acme&b=1") == (
        "/a?x-tenant=[REDACTED:query-secret]&b=1"
    )


def test_credential_query_parameters_in_urls_are_blanked() -> None:
    found: list[str] = []
    link = (
        '<https://api.example.com/items?page=2&access_token=opaque123456>; rel="next", '
        '<https://api.example.com/items?page=1&api%5Fkey=zzz>; rel="first"'
    )
    assert scrub_value(R, "link", link, found) == (
        '<https://api.example.com/items?page=2&access_token=[REDACTED:query-secret]>; rel="next", '
        '<https://api.example.com/items?page=1&api%5Fkey=[REDACTED:query-secret]>; rel="first"'
    )
    assert found == ["query-secret", "query-secret"]
    assert scrub_value(R, "location", "/files/1?sig=abc&size=2") == (
        "/files/1?sig=[REDACTED:query-secret]&size=2"
    )
    # other parameters, and "=" outside a query, are kept byte for byte
    for value in ("/next?page=2&per_page=50", 'W/"abc=="', "max-age=60", "a=b"):
        assert scrub_value(R, "location", value) == value


def test_values_are_scrubbed_as_text() -> None:
    found: list[str] = []
    assert scrub_value(R, "x-debug", f"org {KEY}", found) == "org [REDACTED:openai-key]"
    assert found == ["openai-key"]


@pytest.mark.parametrize(
    "names",
    [["x-ok", "bad header"], ["x-ok", ""], [3]],
)
def test_bad_names_are_config_errors(names: list[object]) -> None:
    with pytest.raises(ConfigError, match="drop_response_headers must name response headers"):
        Config(drop_response_headers=tuple(names))  # type: ignore[arg-type]


def test_config_keeps_the_names_lower_case() -> None:
    config = Config(drop_response_headers=("X-Trace-Id", "Server", "server"))
    assert config.drop_response_headers == ("server", "x-trace-id")


def test_the_cassette_setting() -> None:
    assert dropped_setting({}) == frozenset()
    assert dropped_setting({"redact": "no object"}) == frozenset()
    assert dropped_setting({"redact": {"drop_response_headers": ["X-A"]}}) == {"x-a"}
    with pytest.raises(ConfigError, match="must be a list of header names"):
        dropped_setting({"redact": {"drop_response_headers": "x-a"}})
    meta = CassetteMeta(extra={"redact": {"drop_response_headers": ["Server"]}})
    assert meta.drop_response_headers == {"server"}
    line = json.loads(meta.to_line())
    assert CassetteMeta.from_json(line, "c").drop_response_headers == {"server"}
    line["_meta"]["redact"]["drop_response_headers"] = ["not a name"]
    with pytest.raises(CassetteError, match='bad "_meta" redact settings'):
        CassetteMeta.from_json(line, "c")


UPSTREAM = (
    (b"content-type", b"application/json"),
    (b"server", b"fake/1.0"),
    (b"x-trace-id", b"t-1"),
    (b"set-cookie", b"a=b"),
    (b"etag", b'"v1"'),
    (b"content-length", b"2"),
)


def _recorded(config: Config, cassette: Cassette) -> RecordedResponse:
    engine = Engine(cassette, config)
    engine.receive_request(Request("GET", "/doc", ((b"host", b"api.example.com"),)))
    assert isinstance(engine.next_event(), Forward)
    engine.upstream_head(200, UPSTREAM, mono=1.0)
    engine.upstream_data(b"{}", mono=1.1)
    engine.upstream_end(mono=1.2)
    pull(engine)
    recorded = engine.record()
    assert recorded is not None
    return Interaction.from_json(json.loads(recorded.line)).response


def test_a_recording_drops_what_the_config_and_the_cassette_name() -> None:
    meta = CassetteMeta(extra={"redact": {"drop_response_headers": ["Server"]}})
    config = Config(mode=Mode.RECORD, drop_response_headers=("X-Trace-Id",))
    response = _recorded(config, Cassette("c", meta))
    assert response.headers == (("content-type", "application/json"), ("etag", '"v1"'))
    plain = _recorded(Config(mode=Mode.RECORD), Cassette("c"))
    assert [name for name, _ in plain.headers] == ["content-type", "server", "x-trace-id", "etag"]


def test_record_exchange_drops_what_it_is_told_and_the_cassette_names() -> None:
    request = Request("GET", "/doc", ((b"host", b"api.example.com"),))
    meta = CassetteMeta(extra={"redact": {"drop_response_headers": ["server"]}})
    ix = record_exchange(
        request,
        200,
        UPSTREAM,
        b"{}",
        redactor=R,
        cassette=Cassette("c", meta),
        drop_response_headers=["x-trace-id"],
    )
    assert ix.response.headers == (("content-type", "application/json"), ("etag", '"v1"'))
    with pytest.raises(ConfigError):
        record_exchange(request, 200, UPSTREAM, b"{}", redactor=R, drop_response_headers=["a b"])


def test_redacting_again_drops_what_is_named_and_reports_it() -> None:
    response = RecordedResponse(
        200, (("content-type", "text/plain"), ("server", "s"), ("x-api-key", "opaque-1234"))
    )
    ix = replace(
        record_exchange(Request("GET", "/", ()), 200, (), b"", redactor=R), response=response
    )
    heard: list[tuple[str, str]] = []
    again = ix.redacted(
        R,
        MatchConfig(),
        lambda where, kinds: heard.extend((where, k) for k in kinds),
        drop=frozenset({"server"}),
    )
    assert again.response.headers == (
        ("content-type", "text/plain"),
        ("x-api-key", f"[REDACTED:{SECRET_HEADER}]"),
    )
    assert heard == [
        ("response.headers.server", "unsafe-header"),
        ("response.headers.x-api-key", SECRET_HEADER),
    ]


OLD_LINE = (
    '{"key":"sha256:%s","id":"old","request":{"method":"GET","path":"/doc"},'
    '"response":{"status":200,"headers":[["content-type","application/json"],'
    '["x-request-id","req_1"],["x-ratelimit-remaining-requests","99"]],'
    '"body":{"json":{"a":1},"style":"compact"}}}\n'
)


def test_a_cassette_recorded_with_the_allowlist_replays_as_before() -> None:
    key = RecordedRequest("GET", "/doc").key(MatchConfig())
    data = b'{"_meta":{"schema":2}}\n' + (OLD_LINE % key[7:]).encode()
    engine = Engine(Cassette.loads(data, name="old.jsonl"))
    engine.receive_request(Request("GET", "/doc", ()))
    assert isinstance(engine.next_event(), Replay)
    head = engine.next_event()
    assert isinstance(head, ResponseHead)
    assert head.headers == (
        (b"content-type", b"application/json"),
        (b"x-request-id", b"req_1"),
        (b"x-ratelimit-remaining-requests", b"99"),
        (b"content-length", b"7"),
    )
