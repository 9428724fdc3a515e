"""Redaction: secrets and PII never reach a cassette."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from reel_core import (
    Cassette,
    CassetteError,
    Config,
    ConfigError,
    Engine,
    Event,
    Forward,
    Frame,
    Mode,
    RecordedRequest,
    Redactor,
    Replay,
    Request,
    Signal,
)
from reel_core._redact import (
    PII_PATTERNS,
    SECRET_PATTERNS,
    digest,
)
from reel_core.tools import is_credential_name, keep_response_header
from tests.secrets import OPENAI_KEY

from ._helpers import pull

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
        "CF-RAY",
        "location",
        "link",
        "etag",
        "date",
        "server",
        "vary",
        "x-api-key",  # stored, its value blanked (see tests/core/test_headers.py)
    ],
)
def test_end_to_end_response_headers_are_kept(name: str) -> None:
    assert keep_response_header(name)


@pytest.mark.parametrize(
    "name",
    [
        "set-cookie",
        "Set-Cookie",
        "set-cookie2",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-anything",
        "upgrade",
        "trailer",
        "te",
    ],
)
def test_hop_framing_and_cookie_headers_are_dropped(name: str) -> None:
    assert not keep_response_header(name)


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
    with pytest.raises(ConfigError, match="bad redaction pattern for 'x'"):
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
    with pytest.raises(ConfigError, match=message):
        Redactor.from_settings(settings)


def test_data() -> None:
    assert R.data(b"") == b""
    # not UTF-8 as a whole: the text between its bytes is scrubbed, every
    # other byte kept (a character cut short right before the key too)
    binary = b"\xff\xfe sk-proj-abcdefghijklmnopqrstuvwxyz0123\x80"
    assert R.data(binary) == b"\xff\xfe [REDACTED:openai-key]\x80"
    cut = b"\x00\xe2\x82sk-proj-abcdefghijklmnopqrstuvwxyz0123\xc3"
    assert R.data(cut) == b"\x00\xe2\x82[REDACTED:openai-key]\xc3"
    plain_binary = b"\xff\xfe\x00 nothing"
    assert R.data(plain_binary) is plain_binary
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
    record = Engine(cassette, Config(mode=Mode.RECORD))
    record.receive_request(Request("POST", "/v1/x", (), b'{"metadata":{"trace":"t-1"},"q":1}'))
    record.next_event()
    record.upstream_head(200, [], mono=0.0)
    record.upstream_end(mono=0.1)
    while not isinstance(record.next_event(), Signal):
        pass
    recorded = record.record()
    assert recorded is not None
    assert b"t-1" not in recorded.line
    replay = Engine(cassette, Config(mode=Mode.REPLAY))
    replay.receive_request(Request("POST", "/v1/x", (), b'{"metadata":{"trace":"t-2"},"q":1}'))
    assert isinstance(replay.next_event(), Replay)


@pytest.mark.parametrize("paths", ["metadata.trace", ["a[", "b"], [1]])
def test_bad_redact_paths_are_refused(paths: object) -> None:
    with pytest.raises(ConfigError):
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


# -- credential names -------------------------------------------------------------

CREDENTIAL_NAMES = [
    "api_key",
    "apiKey",
    "APIKey",
    "api-key",
    "apikey",
    "x-api-key",
    "X-Goog-Api-Key",
    "OPENAI_API_KEY",
    "secret_access_key",
    "aws_secret_access_key",
    "SecretAccessKey",
    "client_secret",
    "clientSecret",
    "secret",
    "password",
    "db_password",
    "passwd",
    "passphrase",
    "access_token",
    "accessToken",
    "refresh_token",
    "id_token",
    "auth_token",
    "x-auth-token",
    "authorization",
    "Proxy-Authorization",
    "private_key",
    "privateKey",
    "credentials",
    "aws.session.token",
]
CONTENT_NAMES = [
    "token",
    "key",
    "Key",
    "page_token",
    "pageToken",
    "next_page_token",
    "sort_key",
    "cache_key",
    "prompt_cache_key",
    "idempotency_key",
    "eos_token",
    "max_tokens",
    "tokens",
    "top_logprobs",
    "signature",
    "secret_name",
    "password_policy",
    "keys",
    "",
]


@pytest.mark.parametrize("name", CREDENTIAL_NAMES)
def test_credential_names(name: str) -> None:
    assert is_credential_name(name)
    assert is_credential_name(name, query=True)
    assert R.text(json.dumps({name: "v-1"})) == json.dumps({name: "[REDACTED:secret-field]"})
    escaped = json.dumps({"arguments": json.dumps({name: "v-1"})})
    assert "v-1" not in R.text(escaped)  # also JSON escaped inside a JSON string
    assert R.query([(name, "v-1")]) == ((name, "[REDACTED:query-secret]"),)


@pytest.mark.parametrize("name", CONTENT_NAMES)
def test_content_names(name: str) -> None:
    assert not is_credential_name(name)
    text = json.dumps({name: "v-1"})
    assert R.text(text) == text
    escaped = json.dumps({"arguments": text})
    assert R.text(escaped) == escaped


@pytest.mark.parametrize("name", ["key", "KEY", "token", "sig", "signature"])
def test_bare_credential_names_in_a_query(name: str) -> None:
    """Gemini's ``?key=``, ``?token=``, an Azure SAS ``sig``: whole query
    parameter names that are credentials (and only there)."""
    assert is_credential_name(name, query=True)
    assert R.query([(name, "v-1")]) == ((name, "[REDACTED:query-secret]"),)
    assert R.query([("page_token", "p-1")]) == (("page_token", "p-1"),)


def test_logprobs_and_tool_arguments_are_content() -> None:
    logprobs = json.dumps(
        {
            "logprobs": {
                "content": [
                    {"token": "Hello", "logprob": -0.1, "top_logprobs": [{"token": "Hi"}]},
                    {"token": "!", "logprob": -0.5, "bytes": [33]},
                ]
            }
        }
    )
    assert R.text(logprobs) == logprobs
    tool = '{"arguments": "{\\"key\\": \\"user-1\\", \\"sort_key\\": \\"name\\"}"}'
    assert R.text(tool) == tool


# -- shapes: kept and redacted ------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "risk-assessment-framework-for-large-language-models-2024",
        "a desk-top and a task-based plan",
        "sk-learn-is-a-library-name-not-a-key",
        "sk-" + "a" * 30,  # no digit: no key
        "xsk-proj-abcdefghijklmnopqrstuvwxyz0123456789",  # inside a word
        "my_sk-proj-abcdefghijklmnopqrstuvwxyz0123456789",
        "xAIza" + "B" * 35,
        "AIza" + "B" * 36,  # too long for a Google key
        "myghp_" + "a1" * 18,
        "XAKIAIOSFODNN7EXAMPLE",
        "the bearer responsibilities-of-office",
        "Bearer of-the-ring-and-the-sword",
        "maxoxb-1234567890-abcdef",
    ],
)
def test_key_lookalikes_are_text(text: str) -> None:
    assert R.text(text) == text


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("key: sk-proj-abcdefghijklmnopqrstuvwxyz0123456789", "openai-key"),
        ("(sk-" + "Ab1" * 16 + ")", "openai-key"),
        ('"sk-ant-api03-' + "x" * 20 + '"', "anthropic-key"),
        ("?key=AIza" + "B" * 35, "google-key"),
        ("token=ghp_" + "a1" * 18, "github-token"),
        ("id AKIAIOSFODNN7EXAMPLE.", "aws-access-key"),
        ("Bearer abcdefghijklmnop1234", "bearer-token"),
        ("slack xoxb-1234567890-abcdef", "slack-token"),
    ],
)
def test_keys_at_a_word_boundary_are_redacted(text: str, kind: str) -> None:
    found: list[str] = []
    assert f"[REDACTED:{kind}]" in R.text(text, found)
    assert found == [kind]


PHONES = [
    "(555) 123-4567",
    "(555)123-4567",
    "555-123-4567",
    "555.123.4567",
    "+1 555 123 4567",
    "+1-555-123-4567",
    "+1 (555) 123-4567",
    "+44 20 7946 0958",
    "+49 30 1234567",
    "+33 1 23 45 67 89",
    "(020) 7946 0958",
]
NOT_PHONES = [
    "123 456 7890",  # spaces only, no "+" and no parentheses
    "555 123 4567",
    "123-456-7890",  # an area code cannot start with 1 (an order number)
    "ISBN 978-3-16-148410-0",
    "ISBN 0-306-40615-2",
    "on 2024-01-15 at 12:30",
    "15.01.2024",
    "order 1234-5678-9012",
    "order #555-123-4567-89",
    "SKU-555-123-4567",
    "version 1.2.3.4567",
    "v2024.11.22.1234",
    "550e8400-e29b-41d4-a716-446655440000",
    "$1,234,567.89",
    "EUR 1.234.567,89",
    "+1 2",  # too few digits
    "+1 23 45",
    "+123 4567 8901 2345 6789",  # too many digits
    "1+555 123 4567",  # a sum, not a number
    "+12345678901234567 890",  # too many digits
    "192.168.100.1000",
    "12 34 56 78",
]


@pytest.mark.parametrize("phone", PHONES)
def test_phone_numbers_with_structure_are_redacted(phone: str) -> None:
    assert R.text(f"call {phone} now") == "call [REDACTED:phone] now"


@pytest.mark.parametrize("text", NOT_PHONES)
def test_digit_runs_that_are_not_phone_numbers(text: str) -> None:
    assert R.text(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "carried via@agent.tool",  # no such top-level domain
        "the@agent.instructions",
        "icon@2x.png",
        "pkg@1.2.3",
        "user@localhost",
    ],
)
def test_email_lookalikes_are_text(text: str) -> None:
    assert R.text(text) == text


@pytest.mark.parametrize("mail", ["ann@example.com", "a.b+c@mail.co.uk", "x@corp.io", "q@site.DE"])
def test_emails_are_redacted(mail: str) -> None:
    assert R.text(f"<{mail}>") == "<[REDACTED:email]>"


# -- digests ----------------------------------------------------------------------

SALT = "0123456789abcdef" * 2
SALTED = Redactor(salt=SALT)


def test_content_placeholders_carry_a_digest_with_a_salt() -> None:
    text = "ann@example.com, bob@example.com, ann@example.com, +44 20 7946 0958"
    out = SALTED.text(text)
    digests = re.findall(r"\[REDACTED:(email|phone):([0-9a-f]{12})\]", out)
    assert [kind for kind, _ in digests] == ["email", "email", "email", "phone"]
    ann, bob, ann_again, _ = (d for _, d in digests)
    assert ann == ann_again != bob
    assert SALTED.text(out) == out  # idempotent
    other = Redactor(salt="f" * 32).text(text)
    assert other != out  # another cassette, other digests
    assert R.text(text).count("[REDACTED:email]") == 3  # no salt: plain


def test_the_digest_is_scrypt_of_the_value() -> None:
    expected = hashlib.scrypt(
        b"ann@example.com", salt=bytes.fromhex(SALT), n=2**12, r=8, p=1, dklen=6
    ).hex()
    assert SALTED.text("ann@example.com") == f"[REDACTED:email:{expected}]"
    assert digest(SALT, "email", "ann@example.com") == expected


def test_shapes_that_keep_a_prefix_digest_the_secret_only() -> None:
    bearer = SALTED.text("Authorization: Bearer abcdefghijklmnop1234")
    assert re.fullmatch(r"Authorization: Bearer \[REDACTED:bearer-token:[0-9a-f]{12}\]", bearer)
    aws = SALTED.text("aws_secret_access_key=" + "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    assert re.fullmatch(r"aws_secret_access_key=\[REDACTED:aws-secret-key:[0-9a-f]{12}\]", aws)


def test_credential_positions_never_carry_a_digest() -> None:
    key = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
    for text in [
        json.dumps({"api_key": key}),
        json.dumps({"api_key": "dummy"}),
        json.dumps({"authorization": "Bearer " + key}),
        json.dumps({"api_key": "[REDACTED:openai-key:0123456789ab]"}),
    ]:
        assert SALTED.text(text) == '{"api_key": "[REDACTED:secret-field]"}'.replace(
            "api_key", next(iter(json.loads(text)))
        )
    assert SALTED.query([("key", "AIza" + "B" * 35)]) == (("key", "[REDACTED:query-secret]"),)
    assert SALTED.query([("key", "[REDACTED:google-key:0123456789ab]")]) == (
        ("key", "[REDACTED:query-secret]"),
    )
    assert SALTED.query([("q", key)])[0][1].startswith("[REDACTED:openai-key:")
    paths = Redactor(salt=SALT, paths=("user",), fields=("session",))
    assert paths.data(b'{"user": "ann", "session": "s"}') == (
        b'{"user": "[REDACTED:json-path]", "session": "[REDACTED:secret-field]"}'
    )


def test_extra_patterns_get_digests() -> None:
    r = Redactor(salt=SALT, extra_patterns={"ticket": r"TCK-\d+"})
    one, two = r.text("TCK-1"), r.text("TCK-2")
    assert one.startswith("[REDACTED:ticket:")
    assert one != two


@pytest.mark.parametrize(
    "salt", ["", "0" * 31, "0" * 33, "G" * 32, "ABCDEF0123456789" * 2, 5, ["x"]]
)
def test_a_bad_salt_is_refused(salt: object) -> None:
    with pytest.raises(ConfigError, match="32 lower-case hex digits"):
        Redactor.from_settings({"salt": salt})
    with pytest.raises(ConfigError, match="32 lower-case hex digits"):
        Redactor(salt=salt)  # type: ignore[arg-type]
    meta = json.dumps({"_meta": {"schema": 1, "redact": {"salt": salt}}}).encode()
    with pytest.raises(CassetteError, match="salt"):
        Cassette.loads(meta + b"\n")


def test_from_settings_reads_the_salt() -> None:
    assert Redactor.from_settings({"salt": SALT}) == SALTED
    assert Redactor.from_settings({"salt": SALT}) is Redactor.from_settings({"salt": SALT})
    assert Redactor.from_settings({}).salt is None
    assert Redactor(pii=False).with_salt(SALT) == Redactor(pii=False, salt=SALT)
    assert SALTED.with_salt("f" * 32) is SALTED  # its own salt wins
    assert R.with_salt(None) is R


def test_a_salted_copy_is_the_redactor_built_with_the_salt() -> None:
    # each cassette's salt goes on a copy of the redactor of its settings,
    # sharing what it compiled: it scrubs and digests as one built afresh
    settings = {"pii": False, "fields": ["user"], "paths": ["metadata.who"], "salt": SALT}
    copied = Redactor.from_settings(settings)
    built = Redactor(pii=False, fields=("user",), paths=("metadata.who",), salt=SALT)
    assert copied == built
    assert hash(copied) == hash(built)
    text = json.dumps({"user": "ann", "metadata": {"who": "bo"}, "key": OPENAI_KEY})
    assert copied.text(text) == built.text(text)
    assert "[REDACTED:" in copied.text(text)
    assert Redactor.from_settings({**settings, "salt": "f" * 32}).salt == "f" * 32
    unsalted = Redactor.from_settings({k: v for k, v in settings.items() if k != "salt"})
    assert unsalted.salt is None
    assert unsalted.text(text) != copied.text(text)  # digests need the salt


def test_an_exchange_redactor_salts_its_base() -> None:
    from reel_core._literals import ExchangeRedactor, exchange_redactor

    exchange = exchange_redactor(Redactor(pii=False), ((b"api-key", b"k-0123456789abcdef"),))
    assert isinstance(exchange, ExchangeRedactor)
    salted = exchange.with_salt(SALT)
    assert isinstance(salted, ExchangeRedactor)
    assert salted.salt == SALT
    assert salted.base == Redactor(pii=False, salt=SALT)
    assert salted.literals is exchange.literals
    assert salted.with_salt("f" * 32) is salted
    assert "k-0123456789abcdef" not in salted.text("key k-0123456789abcdef")


# -- sessions: redaction never decides a match ------------------------------------------


def _exchange(
    cassette: Cassette, body: bytes, answer: bytes, mode: Mode = Mode.AUTO
) -> tuple[Event | Signal, bytes]:
    """One request through a session on ``cassette``: the decision and the
    body the client got (``answer`` is what the upstream says)."""
    session = Engine(cassette, Config(mode=mode))
    session.receive_request(Request("POST", "/v1/chat/completions", (), body))
    decision = session.next_event()
    if isinstance(decision, Forward):
        session.upstream_head(200, [(b"content-type", b"application/json")], mono=0.0)
        session.upstream_data(answer, mono=0.01)
        session.upstream_end(mono=0.02)
    got = b""
    while not isinstance(event := session.next_event(), Signal):
        if isinstance(event, Frame):
            got += event.data
    session.record()
    return decision, got


def _salted_cassette() -> Cassette:
    return Cassette.loads(
        json.dumps({"_meta": {"schema": 1, "redact": {"salt": SALT}}}).encode() + b"\n"
    )


def _tool_result(value: str) -> bytes:
    return json.dumps(
        {
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "user", "content": "look them up"},
                {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"key": value})},
            ],
        }
    ).encode()


@pytest.mark.parametrize("salted", [True, False])
def test_tool_results_differing_in_a_key_field_each_replay_their_own_answer(
    salted: bool,
) -> None:
    cassette = _salted_cassette() if salted else Cassette()
    first = (_tool_result("user-1"), b'{"answer": "one"}')
    second = (_tool_result("user-2"), b'{"answer": "two"}')
    for body, answer in (first, second):
        decision, got = _exchange(cassette, body, answer)
        assert isinstance(decision, Forward)  # two recordings, not one
        assert got == answer
    assert len(cassette) == 2
    replayed = Cassette.loads(cassette.dumps())
    for body, answer in (first, second, first):
        decision, got = _exchange(replayed, body, b"", Mode.REPLAY)
        assert isinstance(decision, Replay)
        assert got == answer


def test_a_logprobs_response_replays_byte_identical() -> None:
    answer = json.dumps(
        {
            "choices": [
                {
                    "message": {"content": "Hello"},
                    "logprobs": {"content": [{"token": "Hello", "logprob": -0.01, "bytes": [72]}]},
                }
            ],
            "key": "k-1",
        }
    ).encode()
    body = json.dumps({"model": "gpt-4o-mini", "logprobs": True, "messages": []}).encode()
    cassette = _salted_cassette()
    _exchange(cassette, body, answer)
    assert b"REDACTED" not in cassette.dumps()
    decision, got = _exchange(Cassette.loads(cassette.dumps()), body, b"", Mode.REPLAY)
    assert isinstance(decision, Replay)
    assert got == answer


def test_a_hyphenated_word_holding_sk_is_kept() -> None:
    text = "apply the risk-assessment-framework-v2-for-large-language-models"
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": text}]}).encode()
    cassette = _salted_cassette()
    _exchange(cassette, body, b'{"ok": 1}')
    assert text.encode() in cassette.dumps()


@pytest.mark.parametrize("content", ["write to {}@example.com", "my key is sk-proj-{}0123456789"])
def test_prompts_differing_only_in_a_redacted_value_each_replay_their_own_answer(
    content: str,
) -> None:
    def ask(who: str) -> bytes:
        message = {"role": "user", "content": content.format(who * 4)}
        return json.dumps({"model": "gpt-4o-mini", "messages": [message]}).encode()

    cassette = _salted_cassette()
    for who, answer in (("ann", b'{"a": "ann"}'), ("bob", b'{"a": "bob"}')):
        decision, _ = _exchange(cassette, ask(who), answer)
        assert isinstance(decision, Forward)
    dumped = cassette.dumps()
    assert b"annann" not in dumped
    assert b"bobbob" not in dumped
    replayed = Cassette.loads(dumped)
    for who, answer in (("bob", b'{"a": "bob"}'), ("ann", b'{"a": "ann"}')):
        decision, got = _exchange(replayed, ask(who), b"", Mode.REPLAY)
        assert isinstance(decision, Replay)
        assert got == answer


def test_a_credential_in_a_query_or_field_never_stops_a_match() -> None:
    """CI replays with a dummy key what was recorded with the real one."""
    cassette = _salted_cassette()
    real = "AIza" + "R" * 35
    session = Engine(cassette, Config(mode=Mode.RECORD))
    session.receive_request(
        Request("POST", f"/v1beta/models/g:generateContent?key={real}", (), b"{}")
    )
    assert isinstance(session.next_event(), Forward)
    session.upstream_head(200, [], mono=0.0)
    session.upstream_end(mono=0.1)
    pull(session)
    session.record()
    replay = Engine(Cassette.loads(cassette.dumps()), Config(mode=Mode.REPLAY))
    replay.receive_request(Request("POST", "/v1beta/models/g:generateContent?key=dummy", (), b"{}"))
    assert isinstance(replay.next_event(), Replay)
    body = {"api_key": "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789", "q": 1}
    _exchange(cassette, json.dumps(body).encode(), b"{}")
    decision, _ = _exchange(
        Cassette.loads(cassette.dumps()),
        json.dumps({**body, "api_key": "dummy"}).encode(),
        b"",
        Mode.REPLAY,
    )
    assert isinstance(decision, Replay)


def test_a_legacy_cassette_keeps_plain_placeholders() -> None:
    """A ``_meta`` without a salt: recordings and keys as before digests."""
    legacy = Cassette.loads(b'{"_meta":{"schema":1}}\n')
    body = json.dumps({"model": "m", "messages": [{"content": "mail ann@example.com"}]}).encode()
    _exchange(legacy, body, b"{}")
    assert b"[REDACTED:email]" in legacy.dumps()
    assert re.search(rb"REDACTED:email:", legacy.dumps()) is None


def test_a_redactor_given_in_code_takes_the_cassettes_salt() -> None:
    cassette = _salted_cassette()
    session = Engine(cassette, Config(redactor=Redactor(pii=True)))
    assert session.redactor.salt == SALT
    own = Redactor(salt="f" * 32)
    assert Engine(cassette, Config(redactor=own)).redactor is own
    assert Engine(Cassette(), Config(redactor=R)).redactor is R
