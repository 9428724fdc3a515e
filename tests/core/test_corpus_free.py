"""What the core met only in ../shared/corpus's real recordings, met again
in inputs of the repository's own: the core's 100 % branch gate holds on a
clone without the corpus (issue 31, part 5).  Each case is a shape a real
server sent, cut down to what takes the branch."""

from __future__ import annotations

import json
from typing import Any

from reel_core import RecordedResponse
from reel_core._usage import extract_usage


def whole(obj: Any) -> RecordedResponse:
    return RecordedResponse(200, body=json.dumps(obj).encode())


def test_gemini_parts_without_an_answer_are_passed_over() -> None:
    # a candidate may carry only its role, or parts with no text (an empty
    # one, inline data) before the one with the answer
    parts = [{"text": ""}, {"inlineData": {"mimeType": "image/png", "data": ""}}, {"text": "hi"}]
    chunk = {
        "candidates": [
            {"content": {"role": "model"}, "index": 0},
            {"content": {"parts": [{"text": ""}], "role": "model"}, "index": 1},
            {"content": {"parts": parts, "role": "model"}, "index": 2},
        ],
        "usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 1},
        "modelVersion": "gemini-2.0-flash",
    }
    path = "/v1beta/models/gemini-2.0-flash:generateContent"
    usage = extract_usage("gemini", path, b"", whole(chunk))
    assert (usage.model, usage.input_tokens, usage.output_tokens) == ("gemini-2.0-flash", 4, 1)


def test_openai_usage_with_only_a_total_has_no_counts() -> None:
    # OpenAI-compatible servers send usage objects of their own shape: one
    # with none of the counts Reel reads gives none
    answer = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "local-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
        "usage": {"total_tokens": 5},
    }
    usage = extract_usage("openai", "/v1/chat/completions", b"", whole(answer))
    assert (usage.model, usage.input_tokens, usage.output_tokens) == ("local-model", None, None)
