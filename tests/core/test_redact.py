"""Redaction: secrets and PII never reach a cassette."""

from __future__ import annotations

import json

import pytest

from reel_core import (
    Cassette,
    Config,
    LocalProtocolError,
    Mode,
    Recorded,
    RecordedRequest,
    Redactor,
    Replay,
    Request,
    Session,
    Signal,
    keep_response_header,
)
from reel_core._redact import PII_PATTERNS, RESPONSE_HEADER_ALLOWLIST, SECRET_PATTERNS

R = Redactor()
NO_PII = Redactor(pii=False)


@pytest.mark.parametrize(
    "name",
    [
        "content-type",
        "Content-Type",
        "retry-after",
        "x-request-id",
        "openai-processing-ms",
        "x-ratelimit-remaining-tokens",
        "anthropic-ratelimit-requests-limit",
        "ratelimit-reset",
        "CF-RAY",
    ],
)
def test_safe_response_headers_are_kept(name: str) -> None:
    assert keep_response_header(name)


@pytest.mark.parametrize(
    "name", ["set-cookie", "authorization", "x-api-key", "date", "server", "content-length"]
)
def test_other_response_headers_are_dropped(name: str) -> None:
    assert not keep_response_header(name)


def test_allowlist_is_lowercase() -> None:
    assert all(h == h.lower() for h in RESPONSE_HEADER_ALLOWLIST)


SECRETS = {
    "openai-key": "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789",
    "anthropic-key": "sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
    "google-key": "AIza" + "B" * 35,
    "github-token": "ghp_" + "a1" * 18,
    "aws-access-key": "AKIAIOSFODNN7EXAMPLE",
    "slack-token": "xoxb-1234567890-abcdef",
    "jwt": "eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4f",
}


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_secret_shapes(kind: str) -> None:
    secret = SECRETS[kind]
    text = f"before {secret} after"
    found: list[str] = []
    assert R.text(text, found) == f"before [REDACTED:{kind}] after"
    assert found == [kind]
    assert R.text(R.text(text)) == R.text(text)  # idempotent


def test_every_secret_kind_has_an_example() -> None:
    assert set(SECRETS) | {"aws-secret-key", "bearer-token"} == set(SECRET_PATTERNS)


def test_bearer_keeps_the_scheme() -> None:
    assert R.text("Authorization: Bearer abcdefghijklmnop1234") == (
        "Authorization: Bearer [REDACTED:bearer-token]"
    )
    assert R.text("bearer short") == "bearer short"


def test_aws_secret_keeps_the_name() -> None:
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    assert R.text(f"aws_secret_access_key = {secret}") == (
        "aws_secret_access_key = [REDACTED:aws-secret-key]"
    )
    # not 40 characters long: not that shape
    assert R.text("aws_secret = short") == "aws_secret = short"


def test_pii_on_by_default() -> None:
    text = "mail ada@example.org or call +1 415-555-0100"
    found: list[str] = []
    assert R.text(text, found) == "mail [REDACTED:email] or call [REDACTED:phone]"
    assert found == ["email", "phone"]
    assert NO_PII.text(text) == text
    assert set(PII_PATTERNS) == {"email", "phone"}


def test_not_everything_is_a_secret() -> None:
    for text in ["sk-short", "gpt-4o-mini", "2025-07-23", "1753242299", "a@b", "eyJ only"]:
        assert R.text(text) == text


def test_secret_json_fields_are_blanked() -> None:
    found: list[str] = []
    text = '{"api_key": "abc", "access_token":"x\\"y", "password" : "p", "model": "m"}'
    assert R.text(text, found) == (
        '{"api_key": "[REDACTED:secret-field]", "access_token":"[REDACTED:secret-field]", '
        '"password" : "[REDACTED:secret-field]", "model": "m"}'
    )
    assert found == ["secret-field"] * 3


def test_secret_fields_inside_escaped_json() -> None:
    text = '{"arguments": "{\\"api_key\\": \\"abc\\"}"}'
    assert R.text(text) == '{"arguments": "{\\"api_key\\": \\"[REDACTED:secret-field]\\"}"}'


def test_empty_or_redacted_fields_are_left_alone() -> None:
    found: list[str] = []
    for text in [
        '{"access_token": ""}',
        '{"secret": "[REDACTED:openai-key]"}',
        '{"max_tokens": 5}',
        '{"token": "Hello"}',
    ]:
        assert R.text(text, found) == text
    assert found == []


def test_extra_patterns_and_fields() -> None:
    r = Redactor(extra_patterns={"ticket": r"TCK-\d+"}, fields=["session", "x.y"])  # type: ignore[arg-type]
    assert r.fields == ("session", "x.y")
    assert r.text("see TCK-1234") == "see [REDACTED:ticket]"
    assert r.text('{"session": "s1", "x.y": "z", "user": "u"}') == (
        '{"session": "[REDACTED:secret-field]", "x.y": "[REDACTED:secret-field]", "user": "u"}'
    )
    # without extra fields those stay
    assert R.text('{"session": "s1"}') == '{"session": "s1"}'


def test_bad_extra_pattern() -> None:
    with pytest.raises(LocalProtocolError, match="bad redaction pattern for 'x'"):
        Redactor(extra_patterns={"x": "("})


def test_from_settings() -> None:
    r = Redactor.from_settings({"pii": False, "patterns": {"t": "T-\\d+"}, "fields": ["s"]})
    assert r == Redactor(pii=False, extra_patterns={"t": "T-\\d+"}, fields=("s",))
    assert r.text("T-1 a@b.io") == "[REDACTED:t] a@b.io"
    assert Redactor.from_settings({}).pii is True
    assert Redactor.from_settings({}, pii=False).pii is False
    assert Redactor.from_settings({"pii": 0}).pii is False
    assert Redactor.from_settings({"pii": 0}, pii=True).pii is True  # the switch wins


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"patterns": ["x"]}, "must map kinds to regular expressions"),
        ({"patterns": {"k": 1}}, "must map kinds to regular expressions"),
        ({"fields": "s"}, "must be a list of field names"),
        ({"fields": [1]}, "must be a list of field names"),
    ],
)
def test_from_settings_errors(settings: dict[str, object], message: str) -> None:
    with pytest.raises(LocalProtocolError, match=message):
        Redactor.from_settings(settings)


def test_data() -> None:
    assert R.data(b"") == b""
    binary = b"\xff\xfe sk-proj-abcdefghijklmnopqrstuvwxyz0123"
    assert R.data(binary) is binary  # not UTF-8: kept as it is
    clean = b"nothing to see"
    assert R.data(clean) is clean
    found: list[str] = []
    assert R.data("é sk-proj-abcdefghijklmnopqrstuvwxyz0123".encode(), found) == (
        "é [REDACTED:openai-key]".encode()
    )
    assert found == ["openai-key"]


def test_query() -> None:
    found: list[str] = []
    pairs = [
        ("key", "AIzaSECRET"),
        ("api_key", "x"),
        ("alt", "sse"),
        ("token", ""),
        ("x-api-key", "[REDACTED:query-secret]"),
        ("q", "mail ada@example.org"),
    ]
    assert R.query(pairs, found) == (
        ("key", "[REDACTED:query-secret]"),
        ("api_key", "[REDACTED:query-secret]"),
        ("alt", "sse"),
        ("token", ""),
        ("x-api-key", "[REDACTED:query-secret]"),
        ("q", "mail [REDACTED:email]"),
    )
    assert found == ["query-secret", "query-secret", "email"]
    assert Redactor(fields=("session",)).query([("session", "s")]) == (
        ("session", "[REDACTED:query-secret]"),
    )
    assert R.query([]) == ()


def test_target() -> None:
    assert R.target("/v1/chat/completions") == "/v1/chat/completions"
    assert R.target("/v1beta/models/g:gen?alt=sse&key=AIzaXYZ") == (
        "/v1beta/models/g:gen?alt=sse&key=[REDACTED:query-secret]"
    )
    assert R.target("/p?q=a b&flag") == "/p?q=a%20b&flag="
    assert R.target("/u/ada@example.org") == "/u/[REDACTED:email]"


def test_redactor_is_a_hashable_value() -> None:
    assert Redactor() == Redactor()
    assert Redactor(pii=False) != Redactor()
    assert len({Redactor(), Redactor()}) == 1


def test_a_placeholder_completing_a_shape_is_redacted_too() -> None:
    # the key hides the email from the first pass; the second pass sees it
    text = "sk-ant-aaaaaaaaaaaaaaaaaaaa.b@example.org"
    once = R.text(text)
    assert "example.org" not in once
    assert "[REDACTED:anthropic-key]" in once
    assert R.text(once) == once


def test_a_pattern_matching_its_own_placeholder_cannot_loop_forever() -> None:
    r = Redactor(extra_patterns={"x": "REDACTED"})
    out = r.text("a REDACTED b")
    assert out.startswith("a [")
    assert out.endswith(":x] b")
    assert out.count(":x]") == 8  # bounded passes


@pytest.mark.parametrize(
    "text",
    [
        "00000000-0000-0000-0000-000000000000",
        "anthropic-organization-id: 550e8400-e29b-41d4-a716-446655440000",
        "version 2024.11.22.1234",
        "build 12-3456-7890-12",
    ],
)
def test_digit_groups_inside_ids_are_not_phone_numbers(text: str) -> None:
    assert Redactor().text(text) == text


@pytest.mark.parametrize(
    "text", ["call +1 415-555-0100 now", "(415) 555-0100.", "Call me at 415.555.0100."]
)
def test_phone_numbers_in_prose_are_redacted(text: str) -> None:
    assert "[REDACTED:phone]" in Redactor().text(text)


def test_json_paths_are_blanked_in_the_bodys_own_formatting() -> None:
    r = Redactor(paths=("metadata.customer", "messages[*].name"))
    body = json.dumps(
        {
            "metadata": {"customer": "ACME-42", "keep": 1},
            "messages": [{"name": "ann", "content": "hi"}, {"name": "bob", "content": "yo"}],
        },
        indent=2,
    ).encode()
    found: list[str] = []
    out = r.data(body, found)
    value = json.loads(out)
    assert value["metadata"] == {"customer": "[REDACTED:json-path]", "keep": 1}
    assert [m["name"] for m in value["messages"]] == ["[REDACTED:json-path]"] * 2
    assert out == json.dumps(value, indent=2).encode()  # indent kept
    assert found == ["json-path"]
    again: list[str] = []
    assert r.data(out, again) == out  # idempotent
    assert again == []
    assert r.data(b"not json at all") == b"not json at all"
    assert r.data(b'{"other": 1}') == b'{"other": 1}'


def test_json_paths_from_the_cassettes_meta_make_a_live_request_match() -> None:
    meta = b'{"_meta":{"schema":1,"redact":{"paths":["metadata.trace"]}}}\n'
    cassette = Cassette.loads(meta)
    record = Session(cassette, Config(mode=Mode.RECORD))
    record.receive_request(Request("POST", "/v1/x", (), b'{"metadata":{"trace":"t-1"},"q":1}'))
    record.next_event()
    record.upstream_head(200, [], now=0.0)
    record.upstream_end(now=0.1)
    while not isinstance(event := record.next_event(), Signal):
        if isinstance(event, Recorded):
            assert b"t-1" not in event.line
    replay = Session(cassette, Config(mode=Mode.REPLAY))
    replay.receive_request(Request("POST", "/v1/x", (), b'{"metadata":{"trace":"t-2"},"q":1}'))
    assert isinstance(replay.next_event(), Replay)


@pytest.mark.parametrize("paths", ["metadata.trace", ["a[", "b"], [1]])
def test_bad_redact_paths_are_refused(paths: object) -> None:
    with pytest.raises(LocalProtocolError):
        Redactor.from_settings({"paths": paths})


def test_json_paths_with_a_dict_wildcard_and_an_index() -> None:
    r = Redactor(paths=("headers[*]", "messages[1].content", "messages[5].content"))
    body = b'{"headers": {"a": "1", "b": "2"}, "messages": [{"content": "x"}, {"content": "y"}]}'
    value = json.loads(r.data(body))
    assert value["headers"] == {"a": "[REDACTED:json-path]", "b": "[REDACTED:json-path]"}
    assert value["messages"] == [{"content": "x"}, {"content": "[REDACTED:json-path]"}]


def test_a_request_with_nothing_to_scrub_is_kept_as_it_is() -> None:
    redactor = Redactor()
    clean = RecordedRequest("POST", "/v1/chat/completions", (), b'{"model":"gpt-4o-mini"}')
    assert clean.redacted(redactor) is clean
    secret = RecordedRequest("POST", "/v1/chat/completions", (), b'{"api_key":"sk-abc"}')
    assert secret.redacted(redactor).body == b'{"api_key":"[REDACTED:secret-field]"}'
    # phone numbers: 555-123-4567 and 555.123.4567; with spaces only it is text
    for sep in ".-":
        call = RecordedRequest("POST", "/v1/x", (), f"call 555{sep}123{sep}4567".encode())
        assert call.redacted(redactor).body == b"call [REDACTED:phone]"
    spaced = RecordedRequest("POST", "/v1/x", (), b"call 555 123 4567")
    assert spaced.redacted(redactor).body == b"call 555 123 4567"


def test_a_redacted_request_says_what_was_replaced_where() -> None:
    heard: dict[str, list[str]] = {}
    request = RecordedRequest("GET", "/v1/x", (("key", "AIza" + "x" * 35),), b"mail a@b.co")
    request.redacted(Redactor(), heard.__setitem__)
    assert heard == {
        "request.path": [],
        "request.query": ["query-secret"],
        "request.body": ["email"],
    }
