"""Real realtime sessions (pydantic-ai's WebSocket cassettes in
../shared/corpus): their messages go through the recorder and the replay
script as Reel would have recorded them, and usage reads as the providers
reported it."""

from __future__ import annotations

import json

import pytest
import yaml

from reel_core import Interaction, RecordedRequest, RecordedResponse, Redactor, Request, Timing
from reel_core.tools import (
    WebSocketRecorder,
    WebSocketReplay,
    WebSocketSignal,
    WebSocketStep,
    read_line,
)
from tests.corpus import CORPUS, NO_CORPUS

REALTIME = CORPUS / "pydantic__pydantic-ai" / "tests" / "realtime" / "cassettes"
if not REALTIME.is_dir():
    pytest.skip(NO_CORPUS, allow_module_level=True)

CASES = {
    "test_openai_ws/test_text_in_audio_out_turn.yaml": (
        "openai",
        "/v1/realtime?model=gpt-realtime",
        ("gpt-realtime", 16, 24),
    ),
    "test_google_ws/test_text_in_audio_out_turn.yaml": (
        "gemini",
        "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent",
        ("gemini-2.5-flash-native-audio-preview-09-2025", 1131, 50),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_real_session_records_and_replays(name: str) -> None:
    provider, target, (model, tokens_in, tokens_out) = CASES[name]
    items = yaml.safe_load((REALTIME / name).read_text())["interactions"]
    recorder = WebSocketRecorder(Request("GET", target), Redactor(), opened=0.0)
    for i, item in enumerate(items):
        data = json.dumps(item["data"]).encode()
        if item["direction"] == "sent":
            recorder.client_message(data, False, i / 10)
        else:
            recorder.server_message(data, False, i / 10)
    recorder.closed(1000, "", "client", len(items) / 10)
    upgrade = Interaction(
        "sha256:" + "ef" * 32,
        "efefefefefef",
        RecordedRequest("GET", target.partition("?")[0]),
        RecordedResponse(101),
        provider=provider,
    )
    line = recorder.finish(upgrade).to_line()
    session = read_line(line)
    assert session.websocket is not None
    meta = session.meta
    assert (meta["model"], meta["tokens_in"], meta["tokens_out"]) == (model, tokens_in, tokens_out)
    assert meta["ttft_ms"] is not None
    # the replay hands the server messages out in order, gated by the client's
    replay = WebSocketReplay(session.websocket, timing=Timing.parse("fast"), provider=provider)
    client = [m.data for m in session.websocket.messages if m.sender == "client"]
    sent: list[bytes] = []
    while (step := replay.next_step()) is not WebSocketSignal.DONE:
        if step is WebSocketSignal.NEED_CLIENT:
            if client:
                replay.client_message(client.pop(0), False, 1.0)
            else:
                replay.client_closed(1000, now=2.0)
            continue
        assert isinstance(step, WebSocketStep)
        sent.append(step.data)
    assert sent == [m.data for m in session.websocket.messages if m.sender == "server"]
    assert replay.miss is None
