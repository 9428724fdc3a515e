"""Credential values echoed in any spelling: where the exchange's redactor
collects them (headers, query, body fields, a WebSocket's first message),
and the escapes it reads a text back through.  The family as a whole is
the property in tests/property/test_credential_echoes.py; these are its
corners, by example."""

from __future__ import annotations

import base64
import json

import pytest
from bench._common import best_of

from reel_core import Cassette, Config, Engine, Forward, Mode, RecordedRequest, Redactor, Request
from reel_core._escapes import Escapes
from reel_core._literals import (
    PLACEHOLDER,
    ExchangeRedactor,
    Literals,
    _may_name,
    body_values,
    exchange_redactor,
    sent_values,
)
from reel_core.tools import WebSocketRecorder, record_exchange

from ._helpers import pull

P = PLACEHOLDER.encode()
KEY = "xak1+Hq7/Vn3+Tz8Wm"


def literals(*values: str | bytes) -> Literals:
    return Literals(tuple(v.encode() if isinstance(v, str) else v for v in values))


# -- the escapes a text is read back through --------------------------------------


@pytest.mark.parametrize(
    "echo",
    [
        "xak1\\u002BHq7\\u002FVn3\\u002BTz8Wm",  # .NET's encoder
        "xak1\\u002bHq7\\/Vn3+Tz8Wm",  # either case, "\/"
        "\\u0078\\u0061\\u006B\\u0031\\u002B\\u0048\\u0071\\u0037\\u002F\\u0056\\u006e3+Tz8Wm",
        "xak1%2BHq7%2fVn3%2BTz8Wm",
        "xak1&plus;Hq7&sol;Vn3&#43;Tz8&#x57;&#X006d;",
        "xak1&#0043Hq7/Vn3+Tz8Wm",  # a numeric entity without its ";"
        "xak1\\\\u002BHq7/Vn3\\\\u002bTz8Wm",  # JSON in a JSON string
    ],
)
def test_an_escaped_echo_is_found(echo: str) -> None:
    found: list[str] = []
    scrubbed = literals(KEY).text(f'{{"echo": "{echo}", "n": 1}}', found)
    assert scrubbed == f'{{"echo": "{PLACEHOLDER}", "n": 1}}'
    assert found == ["credential"]
    assert literals(KEY).data(echo.encode()) == P


def test_a_surrogate_pair_in_either_case() -> None:
    value = "key-\U0001f600-0123456"
    for echo in ("key-\\ud83d\\ude00-0123456", "key-\\uD83D\\uDE00-0123456"):
        assert literals(value).text(f"[{echo}]") == f"[{PLACEHOLDER}]"
    # a lone half is no character of the value
    assert literals(value).occurs("key-\\ud83d-0123456") is False


def test_an_escape_of_another_character_is_left() -> None:
    lit = literals(KEY)
    text = "caf\\u00e9 100%25 &amp; \\n \\u002B"  # "+" is the key's, the rest are not
    assert lit.occurs(text) is False
    assert lit.text(text) == text
    assert Escapes([b"ab"]).view(b"a\\u00e9 %2b") is None  # no escape of "a" or "b"
    assert Escapes([]).occur("\\u0041") is False


def test_a_value_that_holds_an_escape_is_found_read_back() -> None:
    """A value holding "\\/" whose other characters are escaped: the text
    is read back, and so is the value."""
    value = "Q70000\\/0000z"
    echo = "Q70000\\/0000&#122;"
    assert literals(value).text(f'"{echo}"') == f'"{PLACEHOLDER}"'


def test_a_match_never_keeps_part_of_an_escape() -> None:
    """A Latin-1 value's bytes may begin or end inside what one escape
    decodes to (here the three bytes of U+2203, which another value holds):
    the whole escape goes."""
    other = "\u2203xyzxyzxyz".encode()
    starts_inside = literals(b"\x83abcdefgh", other)
    assert starts_inside.data(b"<\\u2203abcdefgh>") == b"<" + P + b">"
    ends_inside = literals(b"abcdefgh\xe2", other)
    assert ends_inside.data(b"<abcdefgh\\u2203>") == b"<" + P + b">"


def test_overlapping_escapes_read_as_the_longer() -> None:
    """Two backslashes then "u0041": an escape inside a JSON string, not an
    escaped backslash and "u0041"; three: an escaped backslash, then one."""
    escapes = Escapes([b"a\\A"])
    nested = escapes.view(b"x\\\\u0041")
    assert nested is not None
    assert nested.data == b"xA"
    assert nested.span(1, 2) == (1, 8)
    escaped = escapes.view(b"x\\\\\\u0041")
    assert escaped is not None
    assert escaped.data == b"x\\A"
    assert escaped.span(1, 3) == (1, 9)


def test_text_never_takes_part_of_a_character() -> None:
    """A Latin-1 value's bytes inside the UTF-8 of other characters are not
    the value: text keeps them (an escape of one of its characters makes
    the text read back, so it is searched)."""
    for value, text in (
        (b"\xa9abcdefgh", "\u02a9abcdefgh %61"),
        (b"abcdefgh\xca", "abcdefgh\u02a9 %61"),
    ):
        assert literals(value).occurs(text)  # the bytes are there
        assert literals(value).text(text) == text
    assert literals(b"\xa9abcdefgh").text("\u00a9abcdefgh %61") == PLACEHOLDER + " %61"


def test_occurs_reads_every_text() -> None:
    lit = literals(KEY)
    assert lit.occurs("100%2B", b"nothing", "xak1%2BHq7%2FVn3%2BTz8Wm") is True
    assert lit.occurs("100%2B", b"%2B") is False


# -- the header value entry point --------------------------------------------------


def test_a_header_value_is_scrubbed_as_its_bytes() -> None:
    """A header value is its bytes read as Latin-1: a UTF-8 value echoed
    there is found in those bytes."""
    value = "Q7-caf\u00e9-0123"
    scrub = exchange_redactor(Redactor(), ((b"x-api-key", value.encode()),))
    as_read = value.encode().decode("latin-1")
    assert scrub.header_value(f"id {as_read}") == f"id {PLACEHOLDER}"
    assert scrub.header_value(f"id {value}") == f"id {PLACEHOLDER}"  # (a line edited by hand)
    assert Redactor().header_value("Bearer sk-proj-" + "A1b2C3d4" * 5).startswith("Bearer [RED")


# -- where the values are collected ------------------------------------------------


def sent(
    body: bytes = b"",
    content_type: str | None = None,
    query: tuple[tuple[str, str], ...] = (),
) -> RecordedRequest:
    return RecordedRequest("POST", "/v1/x", query, body, content_type=content_type)


def test_query_and_body_credentials_are_collected() -> None:
    query = (("key", "opaque-query-1"), ("api-key", "opaque-query-2"), ("page", "opaque-page-3"))
    form = b"grant_type=client_credentials&client_secret=form%2Bsecret+1&scope=s0000000"
    multipart = (
        b'--b\r\nContent-Disposition: form-data; name="api_key"\r\n\r\nmultipart-secret\r\n'
        b'--b\r\nContent-Disposition: form-data; name="password"; filename="p.txt"\r\n\r\n'
        b"file-content-1\r\n--b--\r\n"
    )
    nested = json.dumps(
        {
            "auth": {"credentials": ["json-nested-1", {"v": "json-nested-2"}]},
            "api_key": "json-field-1",
            "max_tokens": 100,
            "arguments": json.dumps({"access_token": "json-in-a-string"}),
            "note": '{"not json, but api_key": ',
        }
    ).encode()
    assert sent_values(sent(query=query)) == (b"opaque-query-1", b"opaque-query-2")
    assert body_values(form, "application/x-www-form-urlencoded") == ["form+secret 1"]
    assert body_values(multipart, "multipart/form-data") == ["multipart-secret"]
    assert sorted(body_values(nested, None)) == [
        "json-field-1",
        "json-in-a-string",
        "json-nested-1",
        "json-nested-2",
    ]
    # no name a credential's ends in: nothing is parsed
    assert body_values(b'{"model": "m", "prompt": "long enough"}', None) == []
    assert body_values(b"api_key: not json", None) == []
    assert body_values(b"", None) == []
    # a name a credential's ends in, but no credential's: not parsed
    assert _may_name(b'{"prompt_cache_key": "k", "max_tokens": 5, "page_token": "t"}') is False
    assert _may_name(b"a=1&client_secret=x", form=True) is True
    assert _may_name(b'{"client_secret": "x"}', form=True) is False  # a form's names end in "="
    # past 64 of one name end, the body is parsed whatever their names
    many = ("{" + ", ".join(f'"n{i}_token": {i}' for i in range(70)) + "}").encode()
    assert _may_name(many) is True
    assert body_values(many, None) == []
    # the settings' own fields
    assert body_values(b'{"session": "session-value"}', None, ("session",)) == ["session-value"]


def test_an_exchange_collects_every_source_once() -> None:
    base = Redactor()
    headers = ((b"x-api-key", b"header-secret-1"),)
    query = (("key", "query-secret-1"),)
    body = b'{"api_key": "body-secret-1", "n": "header-secret-1"}'
    scrub = exchange_redactor(base, headers, sent=sent(body, None, query))
    assert isinstance(scrub, ExchangeRedactor)
    assert set(scrub.literals.values) == {b"header-secret-1", b"query-secret-1", b"body-secret-1"}
    assert exchange_redactor(base, (), sent=sent(b'{"a": 1}')) is base
    more = exchange_redactor(scrub, (), more=[b"more-secret-1"])
    assert isinstance(more, ExchangeRedactor)
    assert more.base is scrub.base
    assert b"more-secret-1" in more.literals.values


def test_a_credential_field_keys_alike_whatever_its_value() -> None:
    """A body field the exchange's redactor finds its own value in becomes
    what any value of a credential field becomes: a replay with a short
    dummy key matches."""
    cassette = Cassette("c.jsonl")
    record = Engine(cassette, Config(mode=Mode.RECORD))
    record.receive_request(Request("POST", "/v1/x", (), b'{"api_key": "real-secret-0001"}'))
    assert isinstance(record.next_event(), Forward)
    record.upstream_head(200, [(b"content-type", b"text/plain")], mono=0.0)
    record.upstream_data(b"echo real\\u002Dsecret\\u002D0001", mono=0.1)
    record.upstream_end(mono=0.2)
    pull(record)
    recorded = record.record()
    assert recorded is not None
    assert b"real-secret" not in recorded.line
    stored = json.loads(recorded.line)["request"]["body"]["json"]
    assert stored == {"api_key": "[REDACTED:secret-field]"}
    replay = Engine(Cassette.loads(cassette.dumps()), Config(mode=Mode.REPLAY))
    replay.receive_request(Request("POST", "/v1/x", (), b'{"api_key": "dummy"}'))
    assert replay.next_event().__class__.__name__ == "Replay"


def test_an_importer_scrubs_query_and_body_credentials() -> None:
    request = Request("POST", "/v1/x?key=opaque-query-key", (), b'{"password": "opaque-pw-0"}')
    echo = b'{"you": "opaque\\u002Dquery\\u002Dkey", "pw": "opaque-pw-0"}'
    line = record_exchange(request, 200, [], echo, redactor=Redactor()).to_line()
    assert b"opaque" not in line


def test_the_websocket_101_is_scrubbed_of_the_first_message_values() -> None:
    request = Request("GET", "/v1/realtime?api-key=opaque-query-key", ((b"host", b"x"),))
    recorder = WebSocketRecorder(request, Redactor(), opened=0.0)
    first = {"session": {"client_secret": {"value": "ek_opaque_ephemeral_1"}}}
    recorder.client_message(json.dumps(first).encode(), False, 0.1)
    b64 = base64.b64encode(b"::opaque-query-key").decode()
    recorder.server_message(f'{{"k": "{b64}"}}'.encode(), False, 0.2)
    recorder.closed(1000, "", "client", 0.3)
    upgrade = record_exchange(
        request, 101, [(b"x-request-id", b"ek_opaque_ephemeral_1")], b"", redactor=Redactor()
    )
    line = recorder.finish(upgrade).to_line()
    assert b"opaque" not in line
    assert ["x-request-id", PLACEHOLDER] in json.loads(line)["response"]["headers"]


# -- linear in the text ------------------------------------------------------------


@pytest.mark.parametrize(
    "unit",
    [
        # near misses, every character an escape the scan decodes
        "xak1\\u002BHq7\\u002FVn3\\u002B%54&#122;8W",
        # a matching echo, its base64, and escapes of no character of the key
        "xak1%2BHq7%2FVn3%2BTz8Wm eGFrMStIcTcvVm4zK1R6OFdt \\u00e9 %25 &amp; ",
        # one long run with no escape at all
        "x" * 48,
    ],
    ids=["near-misses", "matches", "plain"],
)
def test_scrubbing_is_linear_in_the_text(unit: str) -> None:
    """time(10 x text) / time(text) stays near 10, whatever the text holds:
    a generous bound (the machine is shared, and 100 KB fits caches 1 MB
    does not), far below the 100 of a scan quadratic in the text."""
    lit = literals(KEY)
    small = (unit * (100_000 // len(unit))).encode()
    large = small * 10
    lit.data(small)  # compiled, cached
    ratio = best_of(lambda: lit.data(large), 5) / best_of(lambda: lit.data(small), 5)
    assert ratio < 40, ratio
    texts = large.decode(), small.decode()
    text_ratio = best_of(lambda: lit.text(texts[0]), 5) / best_of(lambda: lit.text(texts[1]), 5)
    assert text_ratio < 40, text_ratio
