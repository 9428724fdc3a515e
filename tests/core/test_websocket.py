"""WebSocket sessions in the core: the line form (schema 2), the recorder's
redaction and usage, and the replay script's gating, timing and matching."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reel_core import (
    Cassette,
    Interaction,
    MatchConfig,
    MatchMode,
    RecordedRequest,
    RecordedResponse,
    Redactor,
    Request,
    Timing,
)
from reel_core.tools import (
    CLOSE_MISMATCH,
    WebSocketClose,
    WebSocketLog,
    WebSocketMessage,
    WebSocketRecorder,
    WebSocketReplay,
    WebSocketSignal,
    WebSocketStep,
    exchange_redactor,
    read_line,
    websocket_usage,
)

KEY = "sha256:" + "ab" * 32


def msg(sender: str, at: float, data: bytes, binary: bool = False) -> WebSocketMessage:
    return WebSocketMessage(sender, at, data, binary)


LOG = WebSocketLog(
    (
        msg("server", 10.0, b'{"type":"session.created"}'),
        msg("client", 100.0, b'{"type": "session.update", "event_id": "a"}'),
        msg("server", 150.0, b"plain text"),
        msg("server", 300.0, b"\x00\x01\xff", binary=True),
        msg("client", 400.0, b"\x10\x20", binary=True),
        msg("server", 500.0, b"{}"),
    ),
    WebSocketClose(1000, "done", "server", 600.0),
)


def interaction(log: WebSocketLog | None = LOG) -> Interaction:
    return Interaction(
        KEY,
        "abababababab",
        RecordedRequest("GET", "/v1/realtime", (("model", "gpt-realtime"),)),
        RecordedResponse(101, (("x-request-id", "r1"),)),
        provider="openai",
        endpoint="GET /v1/realtime",
        websocket=log,
    )


# -- the line ------------------------------------------------------------------------


def test_line_round_trip_keeps_every_payload_byte_exact() -> None:
    line = interaction().to_line()
    obj = json.loads(line)
    assert list(obj) == [
        "key", "id", "ts", "provider", "endpoint", "request", "response", "websocket", "meta"
    ]  # fmt: skip
    assert obj["response"] == {
        "status": 101,
        "headers": [["x-request-id", "r1"]],
        "stream": "websocket",
    }
    assert obj["websocket"]["messages"][1] == {
        "from": "client", "at": 100.0, "json": {"type": "session.update", "event_id": "a"},
        "style": "spaced",
    }  # fmt: skip
    assert obj["websocket"]["messages"][2]["text"] == "plain text"
    assert obj["websocket"]["messages"][3]["base64"] == "AAH/"
    assert read_line(line.rstrip(b"\n")) == interaction()
    empty = WebSocketLog((msg("client", 0.0, b""), msg("server", 0.0, b"", binary=True)), None)
    back = read_line(interaction(empty).to_line())
    assert back.websocket == empty
    assert "close" not in json.loads(interaction(empty).to_line())["websocket"]


def test_a_binary_message_that_is_json_stays_binary() -> None:
    log = WebSocketLog((msg("server", 0.0, b'{"a":1}', binary=True),))
    assert read_line(interaction(log).to_line()).websocket == log


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (lambda o: o.pop("websocket"), '"websocket" must be an object'),
        (lambda o: o["websocket"].update(messages={}), '"websocket.messages" must be a list'),
        (lambda o: o["websocket"]["messages"][0].update({"from": "x"}), '.from" must be'),
        (lambda o: o["websocket"]["messages"][1].update(at=1.0), "goes back in time"),
        (lambda o: o["websocket"]["messages"][0].update(at=-1), "milliseconds >= 0"),
        (lambda o: o["websocket"]["messages"][0].pop("json"), 'needs one of "json"'),
        (lambda o: o["websocket"]["close"].update(code=99), "close.code"),
        (lambda o: o["websocket"]["close"].update(code=True), "close.code"),
        (lambda o: o["websocket"]["close"].update(by="me"), "close.by"),
        (lambda o: o["websocket"]["close"].update(reason=1), "close.reason"),
        (lambda o: o["websocket"].update(close=[]), '"websocket.close" must be an object'),
        (lambda o: o["response"].pop("stream"), 'needs "response.stream": "websocket"'),
    ],
)
def test_bad_websocket_lines_say_what_is_wrong(change: object, error: str) -> None:
    obj = json.loads(interaction().to_line())
    change(obj)  # type: ignore[operator]
    with pytest.raises(ValueError, match=re.escape(error)):
        read_line(json.dumps(obj).encode())


def test_schema_1_cassettes_are_still_read_and_new_ones_say_2() -> None:
    old = b'{"_meta":{"schema":1}}\n' + interaction().to_line()
    cassette = Cassette.loads(old, name="old.jsonl")
    assert cassette.meta.schema == 1
    assert Cassette().meta.to_line().startswith(b'{"_meta":{"schema":3,')


def test_a_schema_1_reader_reports_a_websocket_line_as_bad() -> None:
    # what a Reel of schema 1 checks of "response.stream": sse or chunks only
    obj = json.loads(interaction().to_line())
    assert obj["response"]["stream"] not in ("sse", "chunks")


def test_reel_redact_scrubs_messages_again() -> None:
    secret = "sk-proj-abcdefghijklmnopqrstuvwxyz0123"
    log = WebSocketLog(
        (
            msg("client", 0.0, f'{{"k":"{secret}"}}'.encode()),
            msg("server", 1, b"\x00" + secret.encode(), True),
        ),
        WebSocketClose(1000, f"bye {secret}", "client", 2.0),
    )
    found: list[tuple[str, list[str]]] = []
    redacted = interaction(log).redacted(
        Redactor(), MatchConfig(), lambda w, k: found.append((w, k))
    )
    assert redacted.websocket is not None
    assert secret.encode() not in redacted.websocket.messages[0].data
    # binary: the same rules (issue: the text rules skipped it, the key reached disk)
    assert redacted.websocket.messages[1].data == b"\x00[REDACTED:openai-key]"
    assert ("websocket.messages[1]", ["openai-key"]) in found
    assert redacted.websocket.close is not None
    assert secret not in redacted.websocket.close.reason
    assert ("websocket.close", ["openai-key"]) in found
    scrub = exchange_redactor(Redactor(), ((b"authorization", secret.encode()),))
    again = interaction(log).redacted(scrub, MatchConfig())
    assert again.websocket is not None
    assert secret.encode() not in again.websocket.messages[1].data


# -- the recorder ------------------------------------------------------------------------


def upgrade(target: str = "/v1/realtime?model=gpt-realtime") -> Request:
    return Request("GET", target, ((b"host", b"api.openai.com"), (b"upgrade", b"websocket")))


def test_recorder_scrubs_secrets_split_across_frames_of_one_message() -> None:
    recorder = WebSocketRecorder(
        upgrade("/ws?key=opaque-query-credential-1"), Redactor(), opened=5.0
    )
    first = b'{"session": {"client_secret": {"value": "ek_opaque_ephemeral_0001"}}}'
    # the adapter joins the frames: the message is whole here
    recorder.client_message(first, False, 5.1)
    recorder.server_message(
        b'{"echo": "ek_opaque_ephemeral_0001 opaque-query-credential-1"}', False, 5.2
    )
    recorder.server_message(b"\x01ek_opaque_ephemeral_0001", True, 5.3)
    recorder.closed(1000, "", "client", 5.4)
    recorder.closed(1001, "", "server", 6.0)  # the first end counts
    assert recorder.messages == 3
    line = recorder.finish(interaction(None)).to_line()
    assert b"ek_opaque" not in line
    assert b"opaque-query" not in line
    assert json.loads(line)["websocket"]["close"]["by"] == "client"


def test_recorder_without_an_end_records_a_client_drop() -> None:
    recorder = WebSocketRecorder(upgrade(), Redactor(), opened=1.0)
    recorder.server_message(b"\xff", True, 1.5)
    done = recorder.finish(interaction(None), mono=2.0)
    assert done.websocket is not None
    assert done.websocket.close == WebSocketClose(None, "", "client-dropped", 1000.0)
    assert done.meta["bytes"] == 1
    assert done.meta["model"] == "gpt-realtime"
    assert WebSocketRecorder(upgrade(), Redactor(), opened=1.0).finish(interaction(None)).websocket


def test_usage_of_gemini_live_and_unknown_providers() -> None:
    log = WebSocketLog(
        (
            msg("client", 0, b'{"setup": {"model": "models/gemini-2.5-flash"}}'),
            msg("server", 1, b"not json"),
            msg("server", 1, b'{"usageMetadata": {}}'),
            msg("server", 2, b"[1]"),
            msg("server", 3, b'{"serverContent": {"modelTurn": {"parts": [{"inlineData": {}}]}}}'),
            msg(
                "server",
                4,
                b'{"usageMetadata": {"promptTokenCount": 3, "thoughtsTokenCount": 2, '
                b'"cachedContentTokenCount": 1}}',
            ),
            msg(
                "server", 5, b'{"usageMetadata": {"promptTokenCount": 4, "responseTokenCount": 6}}'
            ),
        )
    )
    usage = websocket_usage("gemini", (), log)
    assert (usage.model, usage.input_tokens, usage.output_tokens) == ("gemini-2.5-flash", 7, 8)
    assert (usage.reasoning_tokens, usage.cached_tokens, usage.first_token_ms) == (2, 1, 3)
    assert websocket_usage("nobody", (), WebSocketLog()).model is None
    binary_first = WebSocketLog((msg("client", 0, b"\x00", True),))
    assert websocket_usage("generic", (), binary_first).model is None


# -- the replay script -------------------------------------------------------------------


def run(replay: WebSocketReplay, client: list[tuple[bytes, bool, float]]) -> list[WebSocketStep]:
    """Drive a replay: the client sends its next message whenever asked."""
    steps: list[WebSocketStep] = []
    pending = list(client)
    while True:
        step = replay.next_step()
        if step is WebSocketSignal.DONE:
            return steps
        if step is WebSocketSignal.NEED_CLIENT:
            if not pending:
                replay.client_closed(1000, "", now=99.0)
                continue
            replay.client_message(*pending.pop(0))
            continue
        assert isinstance(step, WebSocketStep)
        steps.append(step)


CLIENT = [
    (b'{"type":"session.update","event_id":"zzz"}', False, 0.2),
    (b"\x10\x20", True, 1.0),
]


@pytest.mark.parametrize(
    ("timing", "untils"),
    [
        ("realtime", [0.01, 0.25, 0.4, 1.1, 1.2]),
        ("fast", [None, None, None, None, None]),
        ("slow=2", [0.02, 0.3, 0.6, 1.2, 1.4]),
    ],
)
def test_schedule_is_gated_by_the_client(timing: str, untils: list[float | None]) -> None:
    replay = WebSocketReplay(LOG, timing=Timing.parse(timing), provider="openai")
    replay.open(10.0)
    client = [(d, b, 10.0 + at) for d, b, at in CLIENT]
    steps = run(replay, client)
    assert [s.until if s.until is None else round(s.until, 6) for s in steps] == untils
    assert [s.data for s in steps[:4]] == [LOG.messages[i].data for i in (0, 2, 3, 5)]
    assert steps[-1].close == (1000, "done")
    assert steps[-1].last
    assert replay.outcome == "complete: the server closed"
    assert replay.miss is None


def test_a_client_message_that_carried_a_secret_replays_its_recording() -> None:
    # a binary message is now stored scrubbed: the live one, key and all,
    # is compared as it was stored (as a gRPC session's messages are)
    secret = "sk-proj-abcdefghijklmnopqrstuvwxyz0123"
    sent = b"\xff\x00" + secret.encode() + b"\xfe"
    recorded = WebSocketLog((msg("client", 0.0, sent, binary=True),)).redacted(Redactor())
    assert secret.encode() not in recorded.messages[0].data
    replay = WebSocketReplay(recorded, redactor=Redactor())
    replay.client_message(sent, True, 0.1)
    assert replay.miss is None
    assert replay.received == 1
    # another message still misses, its diff scrubbed; without the redactor
    # the stored message is what it was compared with
    text = WebSocketLog((msg("client", 0.0, f'{{"k":"{secret}","n":1}}'.encode()),))
    other = WebSocketReplay(text.redacted(Redactor()), redactor=Redactor())
    other.client_message(f'{{"k":"{secret}","n":2}}'.encode(), False, 0.1)
    assert other.miss is not None
    assert [d.path for d in other.miss.diffs] == ["message.n"]
    assert secret not in other.miss.render()
    bare = WebSocketReplay(recorded)
    bare.client_message(sent, True, 0.1)
    assert bare.miss is not None


def test_no_server_message_before_its_client_message() -> None:
    replay = WebSocketReplay(LOG, timing=Timing.parse("fast"))
    first = replay.next_step()
    assert isinstance(first, WebSocketStep)
    assert first.data == LOG.messages[0].data
    assert replay.next_step() is WebSocketSignal.NEED_CLIENT
    assert replay.next_step() is WebSocketSignal.NEED_CLIENT  # still nothing


def test_exact_mode_compares_bytes_and_binary_compares_digests() -> None:
    replay = WebSocketReplay(LOG, match=MatchConfig(MatchMode.EXACT), provider="openai")
    replay.next_step()
    replay.client_message(b'{"type":"session.update","event_id":"a"}', False, 0.1)
    assert replay.miss is not None
    assert replay.miss.diffs[0].path == "message"
    replay = WebSocketReplay(LOG, provider="openai")
    replay.client_message(CLIENT[0][0], False, 0.1)
    replay.client_message(b"\x10\x21", True, 0.2)
    assert replay.miss is not None
    assert replay.miss.message == 4
    assert str(replay.miss.diffs[0].recorded).startswith("sha256:")
    replay = WebSocketReplay(LOG)
    replay.client_message(b"\x00", True, 0.1)
    assert replay.miss is not None
    assert (replay.miss.diffs[0].recorded, replay.miss.diffs[0].received) == ("text", "binary")


def test_ignore_fields_from_the_cassette() -> None:
    replay = WebSocketReplay(
        LOG, match=MatchConfig(MatchMode.IGNORE_FIELDS, ("extra",)), provider="generic"
    )
    replay.client_message(b'{"type":"session.update","event_id":"a","extra":1}', False, 0.1)
    assert replay.miss is None
    assert replay.received == 1


def test_gemini_mismatch_has_no_error_event_only_the_close() -> None:
    replay = WebSocketReplay(LOG, provider="gemini", interaction_id="x1")
    replay.next_step()
    replay.client_message(b"nope" * 60, False, 0.1)
    step = replay.next_step()
    assert isinstance(step, WebSocketStep)
    assert step.close is not None
    code, reason = step.close
    assert code == CLOSE_MISMATCH
    assert len(reason.encode()) <= 123
    assert replay.next_step() is WebSocketSignal.DONE
    replay.client_message(b"more", False, 0.2)  # ignored once over
    assert replay.miss is not None
    assert replay.miss.to_json()["interaction"] == "x1"
    assert "changed" in replay.miss.render()


def test_extra_client_message_and_early_close() -> None:
    log = WebSocketLog(
        (msg("client", 0, b"a"), msg("server", 1, b"b")), WebSocketClose(1000, "", "client", 2)
    )
    replay = WebSocketReplay(log, provider="openai")
    replay.client_message(b"a", False, 0.0)
    replay.client_message(b"again", False, 0.1)
    assert replay.miss is not None
    assert replay.miss.message == 2
    assert "one message more than the recording holds" in replay.miss.reason
    error = replay.next_step()
    assert isinstance(error, WebSocketStep)
    assert b'"type":"error"' in error.data
    early = WebSocketReplay(log)
    early.client_closed(now=0.0)
    early.client_closed(now=1.0)
    assert early.outcome == "the client closed early, after 0 of 1 recorded client messages"
    assert early.next_step() is WebSocketSignal.DONE
    early.client_message(b"a", False, 2.0)
    assert early.received == 0


def test_an_upstream_drop_replays_as_a_drop() -> None:
    log = WebSocketLog((msg("server", 5, b"x"),), WebSocketClose(None, "", "upstream-dropped", 7))
    replay = WebSocketReplay(log)
    steps = run(replay, [])
    assert steps[-1].drop
    assert steps[-1].close is None
    assert steps[-1].until == 0.007
    assert replay.outcome == "complete: the server dropped the connection"


client_messages = st.lists(st.binary(max_size=8), max_size=4)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["client", "server"]), st.binary(max_size=6), st.booleans()),
        max_size=12,
    ),
    st.sampled_from(["realtime", "fast", "slow=3"]),
)
def test_any_session_replays_its_server_messages_in_order(
    items: list[tuple[str, bytes, bool]], timing: str
) -> None:
    messages = tuple(
        msg(sender, float(i), data if binary else data.hex().encode(), binary)
        for i, (sender, data, binary) in enumerate(items)
    )
    log = WebSocketLog(messages, WebSocketClose(1000, "", "client", float(len(items))))
    replay = WebSocketReplay(log, timing=Timing.parse(timing), match=MatchConfig(MatchMode.EXACT))
    client = [(m.data, m.binary, i / 100) for i, m in enumerate(messages) if m.sender == "client"]
    steps = run(replay, client)
    assert [(s.data, s.binary) for s in steps] == [
        (m.data, m.binary) for m in messages if m.sender == "server"
    ]
    untils = [s.until for s in steps if s.until is not None]
    assert untils == sorted(untils)
    assert replay.miss is None
    assert replay.outcome == "complete: the client closed"


def test_recorder_literals_from_a_list_and_beside_header_literals() -> None:
    header = b"opaque-header-credential-1"
    scrub = exchange_redactor(Redactor(), ((b"x-api-key", header),))
    recorder = WebSocketRecorder(upgrade(), scrub, opened=0.0)
    recorder.client_message(b'{"keys": [{"api_key": "opaque-list-credential"}]}', False, 0.1)
    recorder.server_message(b"opaque-list-credential opaque-header-credential-1", False, 0.2)
    line = recorder.finish(interaction(None)).to_line()
    assert b"opaque-list" not in line
    assert header not in line
    plain = WebSocketRecorder(upgrade(), Redactor(), opened=0.0)
    plain.client_message(b"not json", False, 0.1)
    assert plain.finish(interaction(None)).websocket is not None


def test_a_log_without_a_close_redacts_to_one() -> None:
    log = WebSocketLog((msg("client", 0.0, b"x"),))
    assert log.redacted(Redactor()) == log


def test_a_client_close_after_a_mismatch_keeps_the_miss_outcome() -> None:
    replay = WebSocketReplay(LOG)
    replay.client_message(b"wrong", False, 0.0)
    outcome = replay.outcome
    replay.client_closed(now=0.1)
    assert replay.outcome == outcome
    assert outcome is not None
    assert "does not match" in outcome


# -- realtime usage and cost -------------------------------------------------------------


def _openai_done(
    text_in: int, audio_in: int, cached: int, audio_cached: int, out: int, audio_out: int
) -> bytes:
    usage = {
        "input_tokens": text_in + audio_in,
        "output_tokens": out + audio_out,
        "input_token_details": {
            "text_tokens": text_in,
            "audio_tokens": audio_in,
            "cached_tokens": cached,
            "cached_tokens_details": {
                "text_tokens": cached - audio_cached,
                "audio_tokens": audio_cached,
            },
        },
        "output_token_details": {"text_tokens": out, "audio_tokens": audio_out},
    }
    return json.dumps({"type": "response.done", "response": {"usage": usage}}).encode()


def test_openai_realtime_audio_tokens_are_priced_at_the_audio_rates() -> None:
    from reel_core.tools import cost_usd

    log = WebSocketLog(
        (
            msg("server", 1, b'{"type": "session.created", "session": {"model": "gpt-realtime"}}'),
            msg("server", 2, _openai_done(1000, 2000, 500, 200, 300, 400)),
            msg("server", 3, _openai_done(100, 0, 0, 0, 50, 0)),  # a text-only turn
        )
    )
    usage = websocket_usage("openai", (), log)
    assert (usage.input_tokens, usage.output_tokens, usage.cached_tokens) == (3100, 750, 500)
    assert (usage.audio_input_tokens, usage.audio_output_tokens, usage.audio_cached_tokens) == (
        2000,
        400,
        200,
    )
    # gpt-realtime: text $4 / cached $0.40 / out $16; audio $32 / cached $0.40 / out $64
    text_fresh, audio_fresh = 1100 - 300, 2000 - 200
    expected = (
        text_fresh * 4.00 + audio_fresh * 32.00 + 500 * 0.40 + 350 * 16.00 + 400 * 64.00
    ) / 1_000_000
    assert cost_usd(usage) == pytest.approx(expected)
    meta = usage.to_meta()
    assert (meta["tokens_audio_in"], meta["tokens_audio_out"], meta["tokens_audio_cached"]) == (
        2000,
        400,
        200,
    )
    # a model without audio rates bills every token at its text rates
    from dataclasses import replace

    plain = replace(usage, model="gpt-4o")
    assert cost_usd(plain) == pytest.approx((2600 * 2.50 + 500 * 1.25 + 750 * 10.00) / 1e6)
    # a session reporting no audio keeps the line's usual meta keys
    text_only = websocket_usage("openai", (), WebSocketLog(log.messages[2:]))
    assert "tokens_audio_in" in text_only.to_meta()  # reported, as 0
    assert (
        "tokens_audio_in"
        not in replace(text_only, audio_input_tokens=None, audio_output_tokens=None).to_meta()
    )


def test_gemini_live_audio_and_video_tokens_from_the_modality_details() -> None:
    from reel_core.tools import cost_usd

    meta = {
        "promptTokenCount": 1000,
        "responseTokenCount": 500,
        "promptTokensDetails": [
            {"modality": "TEXT", "tokenCount": 200},
            {"modality": "AUDIO", "tokenCount": 700},
            {"modality": "VIDEO", "tokenCount": 100},
            "junk",
        ],
        "responseTokensDetails": [{"modality": "AUDIO", "tokenCount": 450}, {"modality": "TEXT"}],
        "cacheTokensDetails": "not a list",
    }
    log = WebSocketLog(
        (
            msg("client", 0, b'{"setup": {"model": "models/gemini-live-2.5-flash-preview"}}'),
            msg("server", 1, json.dumps({"usageMetadata": meta}).encode()),
        )
    )
    usage = websocket_usage("gemini", (), log)
    assert (usage.audio_input_tokens, usage.audio_output_tokens, usage.audio_cached_tokens) == (
        800,
        450,
        None,
    )
    # $0.50 text / $3.00 audio+video input; $2.00 text / $12.00 audio output
    expected = (200 * 0.50 + 800 * 3.00 + 50 * 2.00 + 450 * 12.00) / 1_000_000
    assert cost_usd(usage) == pytest.approx(expected)


def test_audio_counts_past_the_totals_are_capped() -> None:
    """Odd reports (audio above the total) never bill more tokens than the totals."""
    from reel_core.tools import Usage, cost_usd

    usage = Usage(
        model="gpt-realtime-mini",
        input_tokens=10,
        output_tokens=5,
        cached_tokens=4,
        audio_input_tokens=50,
        audio_cached_tokens=9,
        audio_output_tokens=50,
    )
    # cached 4 audio at $0.30; the other 6 input as audio at $10; 5 audio out at $20
    assert cost_usd(usage) == pytest.approx((4 * 0.30 + 6 * 10.00 + 5 * 20.00) / 1e6)
    silent = Usage(
        model="gpt-realtime-mini", input_tokens=10, output_tokens=5, audio_input_tokens=0
    )
    assert cost_usd(silent) == pytest.approx((10 * 0.60 + 5 * 2.40) / 1e6)
