"""Literal credentials: the values of the credential headers a client sent
are scrubbed from everything written for the exchange, whatever their shape."""

from __future__ import annotations

import base64
import dataclasses
import gzip
import itertools
import json
from urllib.parse import quote

import pytest

from reel_core import (
    Abort,
    Cassette,
    CassetteError,
    CassetteMeta,
    Config,
    ConfigError,
    Cut,
    Engine,
    Forward,
    Frame,
    Miss,
    Mode,
    Recorded,
    RecordedRequest,
    Redactor,
    Refused,
    Replay,
    Request,
    ResponseHead,
    UpstreamError,
)
from reel_core._literals import (
    CREDENTIAL_HEADERS,
    MIN_LENGTH,
    PLACEHOLDER,
    ExchangeRedactor,
    Literals,
    credential_values,
    exchange_redactor,
    header_names,
)
from reel_core._record import Recorder
from tests.secrets import AZURE_KEY, BASIC_PASSWORD, COOKIE_VALUE, GATEWAY_TOKEN

from ._helpers import pull, request

P = PLACEHOLDER.encode()
KEY = AZURE_KEY.encode()
SSE = [(b"content-type", b"text/event-stream")]
NDJSON = [(b"content-type", b"application/x-ndjson")]
JSON = [(b"content-type", b"application/json")]


def azure(
    body: bytes = b'{"model":"m","messages":[]}', target: str = "/v1/chat/completions"
) -> Request:
    """A request carrying the Azure key in ``api-key``."""
    return request(body, target, headers=[(b"host", b"x.openai.azure.com"), (b"api-key", KEY)])


def record(
    req: Request,
    chunks: list[bytes],
    headers: list[tuple[bytes, bytes]] | None = None,
    status: int = 200,
    *,
    session: Engine | None = None,
    fail: tuple[UpstreamError, str] | None = None,
) -> tuple[list[bytes], Recorded | None, list[object]]:
    """Record one exchange: what the client got, the line, every event."""
    session = session or Engine(Cassette("c"), Config(mode=Mode.RECORD))
    session.receive_request(req)
    events: list[object] = list(pull(session)[0])
    session.upstream_head(status, headers or JSON, mono=1.0, sent_at=0.9)
    for i, chunk in enumerate(chunks):
        session.upstream_data(chunk, mono=1.0 + 0.01 * (i + 1))
    if fail is not None:
        session.upstream_error(fail[0], fail[1], mono=2.0)
    else:
        session.upstream_end(mono=2.0)
    events += pull(session)[0]
    sent = [e.data for e in events if isinstance(e, Frame)]
    recorded = session.record()
    return sent, recorded, events


# -- which values ----------------------------------------------------------------------


def test_every_credential_header_kind() -> None:
    basic = base64.b64encode(f"alice:{BASIC_PASSWORD}".encode())
    headers = (
        (b"authorization", b"Bearer " + GATEWAY_TOKEN.encode()),
        (b"proxy-authorization", b"Basic " + basic),
        (b"api-key", KEY),
        (b"x-api-key", b"xak-0123456789"),
        (b"x-goog-api-key", b"goog-0123456789"),
        (b"cookie", b'a=1; session="' + COOKIE_VALUE.encode() + b'"; junk; b=longenough'),
        (b"content-type", b"application/json-with-a-long-value"),
    )
    assert set(credential_values(headers)) == {
        b"Bearer " + GATEWAY_TOKEN.encode(),
        GATEWAY_TOKEN.encode(),
        b"Basic " + basic,
        basic,
        f"alice:{BASIC_PASSWORD}".encode(),
        BASIC_PASSWORD.encode(),
        KEY,
        b"xak-0123456789",
        b"goog-0123456789",
        COOKIE_VALUE.encode(),
        b"longenough",
    }
    values = credential_values(headers)
    assert [len(v) for v in values] == sorted((len(v) for v in values), reverse=True)


def test_values_shorter_than_eight_characters_are_kept() -> None:
    assert MIN_LENGTH == 8
    assert credential_values(((b"api-key", b"1234567"), (b"cookie", b"a=short"))) == ()
    assert credential_values(((b"api-key", b"12345678"),)) == (b"12345678",)
    # "Bearer test": the token is too short, the whole value is not
    assert credential_values(((b"authorization", b"Bearer test"),)) == (b"Bearer test",)
    redactor = exchange_redactor(Redactor(), ((b"api-key", b"test"),))
    assert redactor.text("a test of test") == "a test of test"


def test_odd_authorization_values() -> None:
    # no scheme: the whole value only; a Basic that is not base64; empty decode
    assert credential_values(((b"authorization", b"opaque-token-123"),)) == (b"opaque-token-123",)
    assert set(credential_values(((b"authorization", b"Basic not*base64!"),))) == {
        b"Basic not*base64!",
        b"not*base64!",
    }
    assert credential_values(((b"authorization", b"Basic ="),)) == ()
    assert credential_values(((b"authorization", b"Basic ===="),)) == (b"Basic ====",)


def test_a_request_without_credentials_keeps_the_plain_redactor() -> None:
    base = Redactor()
    assert exchange_redactor(base, ((b"host", b"api.openai.com"),)) is base
    session = Engine(Cassette("c"), Config(mode=Mode.RECORD))
    session.receive_request(request())
    pull(session)
    assert session.redactor is base or type(session.redactor) is Redactor


def test_exchange_redactors_are_shared_and_never_nested() -> None:
    base = Redactor()
    headers = ((b"api-key", KEY),)
    one = exchange_redactor(base, headers)
    assert isinstance(one, ExchangeRedactor)
    assert one is exchange_redactor(base, headers)  # compiled once per key
    assert one == ExchangeRedactor(base, Literals((KEY,)))
    assert hash(one) == hash(ExchangeRedactor(base, Literals((KEY,))))
    assert one != exchange_redactor(base, ((b"api-key", b"another-key-123"),))
    assert one != base
    assert base != one
    both = exchange_redactor(one, ((b"x-api-key", b"another-key-123"),))
    assert isinstance(both, ExchangeRedactor)
    # (equal redactors share a cache entry: another test's Redactor() may be the base)
    assert both.base == base
    assert not isinstance(both.base, ExchangeRedactor)
    assert both.text(f"{AZURE_KEY} another-key-123") == f"{PLACEHOLDER} {PLACEHOLDER}"
    # the values never show in a repr
    assert AZURE_KEY not in repr(one)
    assert AZURE_KEY not in repr(one.literals)
    assert not Literals(())
    assert Literals(()).text("x") == "x"
    # each cassette's redactor has a salt of its own, and a suite sends one
    # key to all of them: its needles are compiled once, not per cassette
    salted = [Redactor(salt=f"{n:032x}") for n in (1, 2)]
    first, second = (exchange_redactor(r, headers) for r in salted)
    assert isinstance(first, ExchangeRedactor)
    assert isinstance(second, ExchangeRedactor)
    assert first != second
    assert first.literals is second.literals
    assert Literals(()).data(b"x") == b"x"


@pytest.mark.parametrize(
    "base",
    [
        Redactor(),
        Redactor(pii=False, salt="0" * 32),
        Redactor(extra_patterns={"order": r"ORD-\d{6}"}, fields=("token",), paths=("user.id",)),
    ],
    ids=["default", "no-pii-salted", "patterns-fields-paths"],
)
def test_an_exchange_redactor_has_its_base_settings_and_rules(base: Redactor) -> None:
    """It is made per cassette (a copy of the base's state, not compiled
    again): every field, the compiled ones too, is the base's."""
    one = ExchangeRedactor(base, Literals((KEY,)))
    for f in dataclasses.fields(Redactor):
        assert getattr(one, f.name) == getattr(base, f.name), f.name
    text = 'ORD-123456 {"token": "abc"} a@b.example ' + KEY.decode()
    assert one.text(text) == base.text(text.replace(KEY.decode(), PLACEHOLDER))
    assert one.base is base


def test_settings_are_kept_and_patterns_still_apply() -> None:
    base = Redactor(pii=False, fields=("session_id",))
    redactor = exchange_redactor(base, ((b"api-key", KEY),))
    assert redactor.pii is False
    assert redactor.fields == ("session_id",)
    text = f'{{"session_id": "s", "k": "{AZURE_KEY}", "m": "a@b.cd sk-proj-{"x1Y2" * 6}"}}'
    found: list[str] = []
    assert redactor.text(text, found) == (
        '{"session_id": "[REDACTED:secret-field]", "k": "[REDACTED:credential]", '
        '"m": "a@b.cd [REDACTED:openai-key]"}'
    )
    assert sorted(found) == ["credential", "openai-key", "secret-field"]


# -- the forms of a value ----------------------------------------------------------------


@pytest.mark.parametrize("skip", [0, 1, 2])
@pytest.mark.parametrize("urlsafe", [False, True])
def test_base64_inside_a_data_url_at_each_alignment(skip: int, urlsafe: bool) -> None:
    secret = b"k+/?" + KEY  # "+/" and "?" make the two alphabets differ
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    data_url = b"data:image/png;base64," + encode(b"\x89PNG"[:skip] + secret + b"\x00\x01")
    assert secret not in data_url
    literals = Literals((secret,))
    scrubbed = literals.data(b'{"image_url": "' + data_url + b'"}')
    assert P in scrubbed
    assert literals.data(scrubbed) == scrubbed  # nothing left to find
    # what is left of the encoding around the placeholder is at most a group each side
    left, _, right = scrubbed.partition(P)
    assert len(left) - len(b'{"image_url": "data:image/png;base64,') <= 4
    assert len(right) <= 4 + 4 + len(b'"}')


def test_base64_in_a_json_string_is_found_as_text_too() -> None:
    redactor = exchange_redactor(Redactor(), ((b"api-key", KEY),))
    encoded = base64.b64encode(b"key=" + KEY).decode()
    assert PLACEHOLDER in redactor.text(json.dumps({"blob": encoded}))


@pytest.mark.parametrize(
    "encode",
    [
        lambda v: quote(v, safe=""),
        lambda v: quote(v, safe="/"),
        lambda v: quote(v, safe="").replace("%2B", "%2b").replace("%2F", "%2f"),
        lambda v: v.replace("/", "\\/"),
    ],
)
def test_url_encoded_and_json_escaped_forms(encode: object) -> None:
    secret = "tok/+" + AZURE_KEY
    form = encode(secret)  # type: ignore[operator]
    assert form != secret
    redactor = exchange_redactor(Redactor(), ((b"x-api-key", secret.encode()),))
    assert redactor.text(f"?next={form}&x=1") == f"?next={PLACEHOLDER}&x=1"


def test_a_latin_1_header_value() -> None:
    value = "caf\xe9-secret-1".encode("latin-1")
    redactor = exchange_redactor(Redactor(), ((b"api-key", value),))
    assert redactor.text("caf\xe9-secret-1!") == PLACEHOLDER + "!"
    assert redactor.data("caf\xe9-secret-1!".encode()) == P + b"!"
    assert redactor.data(value + b"!") == P + b"!"


# -- split across frames ---------------------------------------------------------------


def _cut(data: bytes, *at: int) -> list[tuple[float, bytes]]:
    bounds = [0, *at, len(data)]
    return [(float(i), data[a:b]) for i, (a, b) in enumerate(itertools.pairwise(bounds))]


def test_frames_keep_their_offsets_at_every_split_point() -> None:
    literals = Literals((KEY,))
    data = b"data: one\n\ndata: your key is " + KEY + b" ok\n\ndata: " + KEY + b"\n\n"
    whole = literals.data(data)
    first = data.index(KEY)
    for cut in range(first - 1, first + len(KEY) + 2):
        frames = _cut(data, cut)
        out = literals.frames(frames)
        assert [at for at, _ in out] == [at for at, _ in frames]
        assert b"".join(d for _, d in out) == whole
        assert all(KEY not in d for _, d in out)
        if first < cut < first + len(KEY):  # inside: the placeholder stays in the first frame
            assert out[0][1].endswith(P)
            assert out[1][1] == data[first + len(KEY) : len(data)].replace(KEY, P)
    # three frames, the middle one wholly inside the value: it is left empty
    frames = _cut(data, first + 3, first + 9)
    found: list[str] = []
    out = literals.frames(frames, found)
    assert found == ["credential", "credential"]
    assert out[1] == (1.0, b"")
    assert b"".join(d for _, d in out) == whole
    # a frame boundary exactly at the value's end, and empty frames around it
    frames = [(0.0, data[: first + len(KEY)]), (1.0, b""), (2.0, data[first + len(KEY) :])]
    assert b"".join(d for _, d in literals.frames(frames)) == whole
    assert literals.frames([(0.0, b"nothing")]) == [(0.0, b"nothing")]


def test_frames_at_every_pair_of_split_points() -> None:
    literals = Literals((KEY, b"0123456789"))
    data = b"x" + KEY + b"0123456789" + KEY[:5]
    whole = literals.data(data)
    for a in range(1, len(data)):
        for b in range(a, len(data)):
            out = literals.frames(_cut(data, a, b))
            assert b"".join(d for _, d in out) == whole, (a, b)


@pytest.mark.parametrize("cut", range(len(KEY) + 1))
def test_sse_split_across_two_chunks_at_every_point(cut: int) -> None:
    event = b'data: {"delta": "your key is ' + KEY + b'"}\n\n'
    at = event.index(KEY) + cut
    sent, recorded, _ = record(azure(), [event[:at], event[at:], b"data: [DONE]\n\n"], SSE)
    assert b"".join(sent) == event + b"data: [DONE]\n\n"  # the client gets it all
    assert recorded is not None
    assert KEY not in recorded.line
    (stored,) = Cassette.loads(recorded.line).interactions()
    assert stored.response.frames[0][1] == event.replace(KEY, P)
    assert len(stored.response.frames) == 2


@pytest.mark.parametrize("cut", range(len(KEY) + 1))
def test_a_chunk_stream_split_at_every_point(cut: int) -> None:
    line = b'{"text": "your key is ' + KEY + b'"}\n'
    at = line.index(KEY) + cut
    chunks = [line[:at], line[at:], b'{"text": "end"}\n']
    _, recorded, _ = record(azure(b'{"model":"m","stream":true}'), chunks, NDJSON)
    assert recorded is not None
    assert KEY not in recorded.line
    (stored,) = Cassette.loads(recorded.line).interactions()
    frames = stored.response.frames
    assert len(frames) == 3  # every chunk keeps its offset
    assert b"".join(d for _, d in frames) == b"".join(chunks).replace(KEY, P)


# -- everything written for the exchange ----------------------------------------------


def test_an_azure_key_echoed_in_a_401_body() -> None:
    body = json.dumps(
        {"error": {"message": f"Incorrect API key provided: {AZURE_KEY}.", "code": "401"}}
    ).encode()
    assert Redactor().data(body) == body  # no pattern knows its shape
    sent, recorded, events = record(azure(), [body[:20], body[20:]], status=401)
    assert b"".join(sent) == body
    assert recorded is not None
    assert KEY not in recorded.line
    (stored,) = Cassette.loads(recorded.line).interactions()
    assert stored.response.status == 401
    assert stored.response.body == body.replace(KEY, P)
    forward = events[0]
    assert isinstance(forward, Forward)
    assert forward.request.header("api-key") == KEY  # what goes upstream is never altered


def test_an_sse_frame_gzip_and_a_binary_body() -> None:
    event = b"data: " + KEY + b"\n\n"
    packed = gzip.compress(event)
    _, recorded, _ = record(azure(), [packed], [*SSE, (b"content-encoding", b"gzip")])
    assert recorded is not None
    assert KEY not in recorded.line
    assert P in recorded.line
    binary = b"\xff\xfe" + KEY + b"\x00"
    _, recorded, _ = record(azure(), [binary], [(b"content-type", b"application/octet-stream")])
    assert recorded is not None
    (stored,) = Cassette.loads(recorded.line).interactions()
    assert stored.response.body == b"\xff\xfe" + P + b"\x00"


def test_response_headers_and_the_cut_detail() -> None:
    headers = [*SSE, (b"x-request-id", b"req-" + KEY)]
    detail = f"reset by peer after {AZURE_KEY}"
    _, recorded, events = record(
        azure(), [b"data: 1\n\n"], headers, fail=(UpstreamError.RESET, detail)
    )
    assert recorded is not None
    assert KEY not in recorded.line
    (stored,) = Cassette.loads(recorded.line).interactions()
    assert dict(stored.response.headers)["x-request-id"] == "req-" + PLACEHOLDER
    assert stored.response.cut is not None
    assert stored.response.cut.detail == f"reset by peer after {PLACEHOLDER}"
    (cut,) = [e for e in events if isinstance(e, Cut)]
    assert cut.detail == stored.response.cut.detail


def test_a_cut_detail_from_the_recorder_itself() -> None:
    redactor = exchange_redactor(Redactor(), ((b"api-key", KEY),))
    recorder = Recorder(
        RecordedRequest("POST", "/v1/x", (), b"{}"), key="k", id="i", redactor=redactor
    )
    recorder.head(200, tuple(SSE), 1.0, None)
    recorder.data(b"data: 1\n\n", 1.1)
    interaction = recorder.fail(UpstreamError.CLOSED, f"closed {AZURE_KEY}", 1.2)
    assert interaction.response.cut is not None
    assert interaction.response.cut.detail == f"closed {PLACEHOLDER}"


def test_the_stored_request_and_its_key() -> None:
    encoded = quote(AZURE_KEY + "/x", safe="")
    body = json.dumps({"model": "m", "note": f"mine is {AZURE_KEY}"}).encode()
    req = request(
        body,
        f"/v1/{AZURE_KEY}/chat?next={encoded}&{AZURE_KEY}=1",
        headers=[(b"api-key", KEY), (b"cookie", b"s=" + (AZURE_KEY + "/x").encode())],
    )
    _, recorded, _events = record(req, [b"{}"])
    assert recorded is not None
    assert KEY not in recorded.line
    assert encoded.encode() not in recorded.line
    (stored,) = Cassette.loads(recorded.line).interactions()
    assert stored.request.path == f"/v1/{PLACEHOLDER}/chat"
    assert dict(stored.request.query) == {"next": PLACEHOLDER, PLACEHOLDER: "1"}
    # the live request matches its recording: the key is computed scrubbed
    replay = Engine(Cassette.loads(recorded.line))
    replay.receive_request(req)
    assert isinstance(pull(replay)[0][0], Replay)
    # so does the same request sent with another key in header and body
    other = "0" * 32
    req2 = request(
        body.replace(KEY, other.encode()),
        f"/v1/{other}/chat?next={quote(other + '/x', safe='')}&{other}=1",
        headers=[(b"api-key", other.encode()), (b"cookie", b"s=" + (other + "/x").encode())],
    )
    replay = Engine(Cassette.loads(recorded.line))
    replay.receive_request(req2)
    assert isinstance(pull(replay)[0][0], Replay)
    # recorded_request() scrubs the request it is given, whatever the session serves
    session = Engine(Cassette("c"))
    assert session.recorded_request(req) == stored.request


def test_the_miss_report_and_the_session_redactor() -> None:
    session = Engine(Cassette("c"))
    req = azure(json.dumps({"model": "m", "k": f"v {AZURE_KEY}"}).encode(), f"/v1/x?t={AZURE_KEY}")
    session.receive_request(req)
    events, _ = pull(session)
    miss = events[0]
    assert isinstance(miss, Miss)
    assert KEY not in miss.report.to_bytes()
    assert AZURE_KEY not in miss.report.render()
    assert all(KEY not in e.data for e in events if isinstance(e, Frame))
    # what a binding logs during the exchange is scrubbed too ...
    assert session.redactor.target(req.target) == f"/v1/x?t={quote(PLACEHOLDER, safe='[]:')}"
    assert session.redactor.text(f"failed: {AZURE_KEY}") == f"failed: {PLACEHOLDER}"
    # ... and the next exchange starts with the plain redactor again
    session.start_next_cycle()
    assert type(session.redactor) is Redactor


def test_a_refusal_names_the_target_scrubbed() -> None:
    session = Engine(Cassette("c"), Config(mode=Mode.RECORD, routing=True))
    session.receive_request(azure(target=f"/unknown/{AZURE_KEY}"))
    events, _ = pull(session)
    refused = events[0]
    assert isinstance(refused, Refused)
    assert AZURE_KEY not in refused.message
    assert PLACEHOLDER in refused.message
    assert all(KEY not in e.data for e in events if isinstance(e, Frame))


def test_an_upstream_error_before_the_head_is_scrubbed() -> None:
    session = Engine(Cassette("c"), Config(mode=Mode.RECORD))
    session.receive_request(azure(target=f"/v1/chat/completions?q={AZURE_KEY}"))
    pull(session)
    session.upstream_error(UpstreamError.TLS, f"bad cert for {AZURE_KEY}", mono=0.0)
    events, _ = pull(session)
    body = b"".join(e.data for e in events if isinstance(e, Frame))
    assert KEY not in body
    assert P in body


def test_a_store_that_cannot_keep_the_recording_is_said_not_the_upstream() -> None:
    session = Engine(Cassette("c"), Config(mode=Mode.RECORD, routing=True))
    session.receive_request(azure(target=f"/v1/chat/completions?q={AZURE_KEY}"))
    pull(session)
    detail = f"the cassette store redis://h:1/0 cannot be reached ({AZURE_KEY})"
    session.upstream_error(Abort.STORE, detail, mono=0.0)
    events, _ = pull(session)
    head = events[0]
    assert isinstance(head, ResponseHead)
    assert head.status == 502
    body = b"".join(e.data for e in events if isinstance(e, Frame))
    assert b"Reel did not forward" in body
    assert b"redis://h:1/0 cannot be reached" in body
    assert b"Nothing was sent upstream" in body
    assert b"could not reach the upstream" not in body
    assert b"REEL_UPSTREAM" not in body  # routed, but the upstream is not at fault
    assert KEY not in body
    assert session.record() is None


# -- settings --------------------------------------------------------------------------


def test_further_headers_from_the_config() -> None:
    config = Config(mode=Mode.RECORD, credential_headers=("X-Gateway-Token",))
    req = request(headers=[(b"x-gateway-token", KEY)])
    _, recorded, _ = record(
        req, [b'{"echo": "' + KEY + b'"}'], session=Engine(Cassette("c"), config)
    )
    assert recorded is not None
    assert KEY not in recorded.line
    # without it, that header is nobody's credential
    _, recorded, _ = record(req, [b'{"echo": "' + KEY + b'"}'])
    assert recorded is not None
    assert KEY in recorded.line


def test_further_headers_from_the_cassette() -> None:
    meta = CassetteMeta(extra={"redact": {"headers": ["X-Gateway-Token"]}})
    cassette = Cassette.loads(meta.to_line(), name="c.jsonl")
    req = request(headers=[(b"x-gateway-token", KEY)])
    session = Engine(cassette, Config(mode=Mode.RECORD))
    _, recorded, _ = record(req, [b'{"echo": "' + KEY + b'"}'], session=session)
    assert recorded is not None
    assert KEY not in recorded.line
    assert header_names({"headers": ["X-A", "b"]}) == ("x-a", "b")
    assert header_names({}) == ()
    assert b"cookie" in CREDENTIAL_HEADERS


def test_a_bad_header_name_in_the_config() -> None:
    with pytest.raises(ConfigError, match="must be a list of header names"):
        Engine(Cassette("c"), Config(credential_headers=("x-caf\xe9",)))


@pytest.mark.parametrize("bad", ["x-a", ["bad name"], [1], {"x": 1}])
def test_a_bad_headers_list_fails_loading(bad: object) -> None:
    meta = json.dumps({"_meta": {"schema": 1, "redact": {"headers": bad}}}).encode() + b"\n"
    with pytest.raises(CassetteError, match='redact "headers" must be a list of header names'):
        Cassette.loads(meta, name="c.jsonl")


def test_a_recorders_placeholder_is_no_credential_value() -> None:
    """Ruby VCR and vcrpy filters leave ``<OPENAI_API_KEY>`` where the key
    was: an imported cassette keeps it, in the answer that echoes it too."""
    headers = (
        (b"authorization", b"Bearer <OPENAI_ACCESS_TOKEN>"),
        (b"x-api-key", b"<ANTHROPIC_API_KEY>"),
        (b"api-key", b"<sk-proj-" + b"k" * 20 + b">"),
    )
    assert credential_values(headers) == (b"<sk-proj-" + b"k" * 20 + b">",)


def test_a_placeholder_is_never_taken_for_a_credential_value() -> None:
    """A line imported again (a HAR or vcr export of a Reel cassette) holds
    placeholders where its credentials were: none is a value to scrub (it
    would turn every other kind of placeholder into a credential one)."""
    from reel_core._literals import _kept

    found = [b"[REDACTED:query-secret]", b"[REDACTED:credential:0123456789ab]", b"real-secret-1"]
    assert _kept(found) == (b"real-secret-1",)
