"""Usage extraction: tokens, model and time to first token, per wire format.

Hand-written bodies for every format (OpenAI chat completions, Responses and
embeddings, Anthropic messages, Gemini generateContent, OpenAI-compatible
servers), whole and streamed; garbage that must never raise; and every
recording of ../shared/corpus that carries an OpenAI, Anthropic or Gemini
usage block, checked against the numbers in its recorded body (skipped when
the corpus is absent).
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reel_core import RecordedResponse
from reel_core._usage import Usage, _extract, extract_usage
from reel_core.tools import SSESplitter
from tests.corpus import CORPUS, NO_CORPUS

# -- helpers -------------------------------------------------------------------


def sse(*events: Any, eol: str = "\n", step: float = 10.0) -> RecordedResponse:
    """A recorded SSE stream: one frame per event, ``step`` ms apart.  An event
    is a JSON value (sent as ``data:``), ``(name, value)`` for a named event,
    or a raw string."""
    frames = []
    for i, event in enumerate(events):
        if isinstance(event, str):
            text = event
        elif isinstance(event, tuple):
            name, value = event
            text = f"event: {name}{eol}data: {json.dumps(value)}{eol}{eol}"
        else:
            text = f"data: {json.dumps(event)}{eol}{eol}"
        frames.append(((i + 1) * step, text.encode()))
    return RecordedResponse(200, stream="sse", frames=tuple(frames), end_ms=len(frames) * step)


def chunks(data: bytes, size: int, step: float = 5.0) -> RecordedResponse:
    """``data`` as a timed-chunks stream cut every ``size`` bytes."""
    frames = tuple(
        ((i + 1) * step, data[at : at + size]) for i, at in enumerate(range(0, len(data), size))
    )
    return RecordedResponse(200, stream="chunks", frames=frames, end_ms=len(frames) * step)


def body(obj: Any, status: int = 200) -> RecordedResponse:
    return RecordedResponse(status, body=json.dumps(obj).encode())


def req(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


def first_chunk_with(response: RecordedResponse, needle: bytes) -> float:
    """The offset of the chunk in which ``needle`` starts."""
    joined = response.content
    at = joined.index(needle)
    pos = 0
    for offset, data in response.frames:
        pos += len(data)
        if at < pos:
            return offset
    raise AssertionError("not found")


def chunk_completing(response: RecordedResponse, needle: bytes) -> float:
    """The offset of the chunk that completes the SSE event holding ``needle``."""
    joined = response.content
    end = joined.index(b"\n\n", joined.index(needle)) + 2
    pos = 0
    for offset, data in response.frames:
        pos += len(data)
        if end <= pos:
            return offset
    raise AssertionError("not found")


# -- realistic bodies ------------------------------------------------------------

CHAT_ID = "chatcmpl-BzX9"


def chat_chunk(delta: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "id": CHAT_ID,
        "object": "chat.completion.chunk",
        "created": 1754000000,
        "model": "gpt-4o-2024-08-06",
        "system_fingerprint": "fp_07871e2ad8",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}],
        **extra,
    }


OPENAI_CHAT = {
    "id": CHAT_ID,
    "object": "chat.completion",
    "created": 1754000000,
    "model": "o4-mini-2025-04-16",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Paris.", "refusal": None},
            "finish_reason": "stop",
        }
    ],
    "usage": {
        "prompt_tokens": 1843,
        "completion_tokens": 212,
        "total_tokens": 2055,
        "prompt_tokens_details": {"cached_tokens": 1536, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 192,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    },
    "service_tier": "default",
}

OPENAI_CHAT_STREAM = sse(
    chat_chunk({"role": "assistant", "content": "", "refusal": None}),
    chat_chunk({"content": "Hel"}),
    chat_chunk({"content": "lo"}),
    chat_chunk({}, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}]),
    {
        "id": CHAT_ID,
        "object": "chat.completion.chunk",
        "created": 1754000000,
        "model": "gpt-4o-2024-08-06",
        "choices": [],
        "usage": {
            "prompt_tokens": 19,
            "completion_tokens": 2,
            "total_tokens": 21,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
    },
    "data: [DONE]\n\n",
)

OPENAI_TOOL_STREAM = sse(
    chat_chunk({"role": "assistant", "content": None}),
    chat_chunk(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_Q1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": ""},
                }
            ]
        }
    ),
    chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
    chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
    "data: [DONE]\n\n",
)


def responses_body(usage: dict[str, Any] | None, status: str = "completed") -> dict[str, Any]:
    return {
        "id": "resp_68af",
        "object": "response",
        "created_at": 1756000000,
        "status": status,
        "model": "gpt-5-mini-2025-08-07",
        "output": [],
        "usage": usage,
    }


RESPONSES_USAGE = {
    "input_tokens": 5120,
    "input_tokens_details": {"cached_tokens": 4096},
    "output_tokens": 860,
    "output_tokens_details": {"reasoning_tokens": 640},
    "total_tokens": 5980,
}


def responses_stream(*middle: dict[str, Any]) -> RecordedResponse:
    events: list[Any] = [
        (
            "response.created",
            {
                "type": "response.created",
                "response": responses_body(None, "in_progress"),
                "sequence_number": 0,
            },
        ),
        (
            "response.in_progress",
            {
                "type": "response.in_progress",
                "response": responses_body(None, "in_progress"),
                "sequence_number": 1,
            },
        ),
    ]
    events += [(e["type"], e) for e in middle]
    events.append(
        (
            "response.completed",
            {
                "type": "response.completed",
                "response": responses_body(RESPONSES_USAGE),
                "sequence_number": 99,
            },
        )
    )
    return sse(*events)


REASONING_ITEM = {
    "type": "response.output_item.added",
    "output_index": 0,
    "item": {"id": "rs_1", "type": "reasoning", "summary": []},
}
TEXT_PART = {
    "type": "response.content_part.added",
    "item_id": "msg_1",
    "output_index": 1,
    "content_index": 0,
    "part": {"type": "output_text", "annotations": [], "text": ""},
}
TEXT_DELTA = {
    "type": "response.output_text.delta",
    "item_id": "msg_1",
    "output_index": 1,
    "content_index": 0,
    "delta": "Hi",
}
ARGS_DELTA = {
    "type": "response.function_call_arguments.delta",
    "item_id": "fc_1",
    "output_index": 1,
    "delta": '{"q":',
}

EMBEDDINGS = {
    "object": "list",
    "data": [{"object": "embedding", "index": 0, "embedding": [0.0023, -0.0093]}],
    "model": "text-embedding-3-small",
    "usage": {"prompt_tokens": 8, "total_tokens": 8},
}

ANTHROPIC_MESSAGE = {
    "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [{"type": "text", "text": "Hello!"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 12,
        "cache_creation_input_tokens": 248,
        "cache_read_input_tokens": 2048,
        "cache_creation": {"ephemeral_5m_input_tokens": 248, "ephemeral_1h_input_tokens": 0},
        "output_tokens": 6,
        "service_tier": "standard",
    },
}


def anthropic_stream(*blocks: tuple[str, dict[str, Any]], eol: str = "\n") -> RecordedResponse:
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "model": "claude-haiku-4-5-20251001",
            "content": [],
            "stop_reason": None,
            "usage": {
                "input_tokens": 25,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 1024,
                "output_tokens": 1,
            },
        },
    }
    events: list[Any] = [("message_start", start), ("ping", {"type": "ping"})]
    events += list(blocks)
    events += [
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": None},
                "usage": {"output_tokens": 10},
            },
        ),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"input_tokens": 25, "cache_read_input_tokens": 1024, "output_tokens": 15},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return sse(*events, eol=eol)


TEXT_BLOCK_START = (
    "content_block_start",
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
)
TEXT_BLOCK_DELTA = (
    "content_block_delta",
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}},
)
BLOCK_STOP = ("content_block_stop", {"type": "content_block_stop", "index": 0})
TOOL_BLOCK_START = (
    "content_block_start",
    {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "now", "input": {}},
    },
)
EMPTY_JSON_DELTA = (
    "content_block_delta",
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": ""},
    },
)


def gemini_chunk(
    parts: list[dict[str, Any]], usage: dict[str, Any] | None = None
) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "candidates": [{"content": {"parts": parts, "role": "model"}, "index": 0}],
        "modelVersion": "gemini-2.5-flash",
        "responseId": "fS9_aO2x",
    }
    if usage is not None:
        chunk["usageMetadata"] = usage
    return chunk


GEMINI_BODY = {
    "candidates": [
        {
            "content": {"parts": [{"text": "A pelican named Pete."}], "role": "model"},
            "finishReason": "STOP",
            "index": 0,
        }
    ],
    "usageMetadata": {
        "promptTokenCount": 2090,
        "candidatesTokenCount": 7,
        "totalTokenCount": 2168,
        "cachedContentTokenCount": 2048,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 2090}],
        "thoughtsTokenCount": 71,
    },
    "modelVersion": "gemini-2.5-pro",
    "responseId": "qjN_aLvC",
}

GEMINI_STREAM = [
    gemini_chunk(
        [{"text": "**Naming**", "thought": True}], {"promptTokenCount": 9, "totalTokenCount": 9}
    ),
    gemini_chunk(
        [{"text": "Pelly"}],
        {"promptTokenCount": 9, "totalTokenCount": 60, "thoughtsTokenCount": 48},
    ),
    gemini_chunk(
        [{"text": " and Beaky."}],
        {
            "promptTokenCount": 9,
            "candidatesTokenCount": 6,
            "totalTokenCount": 63,
            "thoughtsTokenCount": 48,
        },
    ),
]
GEMINI_STREAM_USAGE = {"input_tokens": 9, "output_tokens": 54, "reasoning_tokens": 48}


def gemini_array_bytes(items: list[dict[str, Any]]) -> bytes:
    # The array as the server sends it: pretty-printed, "\r\n," between items.
    return ("[" + "\r\n,".join(json.dumps(i, indent=2) for i in items) + "]").encode()


GEMINI_FUNCTION_CALL = [
    gemini_chunk([{"functionCall": {"name": "pelican_name_generator", "args": {}}}]),
    gemini_chunk([], {"promptTokenCount": 105, "candidatesTokenCount": 13, "totalTokenCount": 118}),
]


@dataclass
class Case:
    response: RecordedResponse
    expected: dict[str, Any]
    provider: str = "openai"
    path: str = "/v1/chat/completions"
    request: bytes = b""
    extra: dict[str, Any] = field(default_factory=dict)


CASES: dict[str, Case] = {
    "openai-chat-cached-reasoning": Case(
        body(OPENAI_CHAT),
        {
            "model": "o4-mini-2025-04-16",
            "input_tokens": 1843,
            "output_tokens": 212,
            "cached_tokens": 1536,
            "reasoning_tokens": 192,
            "first_token_ms": None,
            "input_includes_cached": True,
        },
    ),
    "openai-chat-stream-include-usage": Case(
        OPENAI_CHAT_STREAM,
        {
            "model": "gpt-4o-2024-08-06",
            "input_tokens": 19,
            "output_tokens": 2,
            "cached_tokens": 0,
            "reasoning_tokens": 0,
            "first_token_ms": 20.0,  # the first frame is an empty role delta
        },
        request=req(model="gpt-4o", stream=True, stream_options={"include_usage": True}),
    ),
    "openai-chat-stream-no-usage": Case(
        OPENAI_TOOL_STREAM,
        {
            "model": "gpt-4o-2024-08-06",
            "input_tokens": None,
            "output_tokens": None,
            "cached_tokens": None,
            "first_token_ms": 20.0,  # the tool call's name
        },
        request=req(model="gpt-4o", stream=True),
    ),
    "openai-chat-stream-crlf": Case(
        sse(
            chat_chunk({"role": "assistant", "content": ""}),
            chat_chunk({"content": "x"}),
            chat_chunk({}, choices=[], usage={"prompt_tokens": 3, "completion_tokens": 1}),
            eol="\r\n",
        ),
        {"input_tokens": 3, "output_tokens": 1, "cached_tokens": None, "first_token_ms": 20.0},
    ),
    "openai-responses": Case(
        body(responses_body(RESPONSES_USAGE)),
        {
            "model": "gpt-5-mini-2025-08-07",
            "input_tokens": 5120,
            "output_tokens": 860,
            "cached_tokens": 4096,
            "reasoning_tokens": 640,
            "first_token_ms": None,
        },
        path="/v1/responses",
    ),
    "openai-responses-stream-text": Case(
        responses_stream(REASONING_ITEM, TEXT_PART, TEXT_DELTA, TEXT_DELTA),
        {
            "model": "gpt-5-mini-2025-08-07",
            "input_tokens": 5120,
            "output_tokens": 860,
            "cached_tokens": 4096,
            "reasoning_tokens": 640,
            "first_token_ms": 50.0,  # frame 5: the first output_text.delta
        },
        path="/v1/responses",
    ),
    "openai-responses-stream-function-call": Case(
        responses_stream(REASONING_ITEM, ARGS_DELTA, TEXT_DELTA),
        {"input_tokens": 5120, "first_token_ms": 40.0},
        path="/v1/responses",
    ),
    "openai-responses-stream-cut-before-completed": Case(
        sse(
            (
                "response.created",
                {"type": "response.created", "response": responses_body(None, "in_progress")},
            ),
            TEXT_DELTA,
        ),
        {
            "model": "gpt-5-mini-2025-08-07",
            "input_tokens": None,
            "output_tokens": None,
            "first_token_ms": 20.0,
        },
        path="/v1/responses",
    ),
    "openai-embeddings": Case(
        body(EMBEDDINGS),
        {
            "model": "text-embedding-3-small",
            "input_tokens": 8,
            "output_tokens": 0,
            "cached_tokens": None,
        },
        path="/v1/embeddings",
    ),
    "openai-legacy-completions-stream": Case(
        sse(
            {
                "id": "cmpl-1",
                "object": "text_completion",
                "model": "gpt-3.5-turbo-instruct",
                "choices": [{"text": "", "index": 0}],
            },
            {
                "id": "cmpl-1",
                "object": "text_completion",
                "model": "gpt-3.5-turbo-instruct",
                "choices": [{"text": "Hi", "index": 0}],
            },
            {
                "id": "cmpl-1",
                "object": "text_completion",
                "model": "gpt-3.5-turbo-instruct",
                "choices": [],
                "usage": {"prompt_tokens": 4, "completion_tokens": 1, "total_tokens": 5},
            },
        ),
        {
            "model": "gpt-3.5-turbo-instruct",
            "input_tokens": 4,
            "output_tokens": 1,
            "first_token_ms": 20.0,
        },
        path="/v1/completions",
    ),
    "anthropic-message-cache": Case(
        body(ANTHROPIC_MESSAGE),
        {
            "model": "claude-sonnet-4-5-20250929",
            "input_tokens": 12,
            "output_tokens": 6,
            "cached_tokens": 2048,
            "cache_write_tokens": 248,
            "reasoning_tokens": None,
            "first_token_ms": None,
            "input_includes_cached": False,
        },
        provider="anthropic",
        path="/v1/messages",
    ),
    "anthropic-stream-last-delta-wins": Case(
        anthropic_stream(TEXT_BLOCK_START, TEXT_BLOCK_DELTA, TEXT_BLOCK_DELTA, BLOCK_STOP),
        {
            "model": "claude-haiku-4-5-20251001",
            "input_tokens": 25,
            "output_tokens": 15,
            "cached_tokens": 1024,
            "cache_write_tokens": 0,
            "first_token_ms": 40.0,  # start, ping, block start, then the delta
            "input_includes_cached": False,
        },
        provider="anthropic",
        path="/v1/messages",
    ),
    "anthropic-stream-crlf-tool-without-arguments": Case(
        anthropic_stream(TOOL_BLOCK_START, EMPTY_JSON_DELTA, BLOCK_STOP, eol="\r\n"),
        {"output_tokens": 15, "first_token_ms": 30.0},
        provider="anthropic",
        path="/v1/messages",
    ),
    "anthropic-stream-thinking": Case(
        anthropic_stream(
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "thinking_delta", "thinking": "Let me"},
                },
            ),
        ),
        {"first_token_ms": 40.0},
        provider="anthropic",
        path="/v1/messages",
    ),
    "gemini-generate-content": Case(
        body(GEMINI_BODY),
        {
            "model": "gemini-2.5-pro",
            "input_tokens": 2090,
            "output_tokens": 7 + 71,  # candidates + thoughts: all billed as output
            "cached_tokens": 2048,
            "reasoning_tokens": 71,
            "first_token_ms": None,
            "input_includes_cached": True,
        },
        provider="gemini",
        path="/v1beta/models/gemini-2.5-pro:generateContent",
    ),
    "gemini-sse-crlf": Case(
        sse(*GEMINI_STREAM, eol="\r\n"),
        {
            "model": "gemini-2.5-flash",
            **GEMINI_STREAM_USAGE,
            "cached_tokens": None,
            "first_token_ms": 10.0,
        },
        provider="gemini",
        path="/v1beta/models/gemini-2.5-flash:streamGenerateContent",
    ),
    "gemini-json-array-in-chunks": Case(
        chunks(gemini_array_bytes(GEMINI_STREAM), 7),
        {"model": "gemini-2.5-flash", **GEMINI_STREAM_USAGE},
        provider="gemini",
        path="/v1beta/models/gemini-2.5-flash:streamGenerateContent",
        extra={"first_token_at": b'"text"'},
    ),
    "gemini-json-array-function-call": Case(
        chunks(gemini_array_bytes(GEMINI_FUNCTION_CALL), 50),
        {"input_tokens": 105, "output_tokens": 13, "reasoning_tokens": None},
        provider="gemini",
        path="/v1beta/models/gemini-2.5-flash:streamGenerateContent",
        extra={"first_token_at": b'"functionCall"'},
    ),
    "gemini-json-array-cut-short": Case(
        chunks(gemini_array_bytes(GEMINI_STREAM)[:-120], 64),
        {"input_tokens": 9, "output_tokens": 48, "reasoning_tokens": 48},
        provider="gemini",
        path="/v1beta/models/gemini-2.5-flash:streamGenerateContent",
    ),
    "gemini-one-chunk-array": Case(
        chunks(gemini_array_bytes(GEMINI_STREAM[2:]), 1 << 20),
        {"input_tokens": 9, "output_tokens": 54, "first_token_ms": 5.0},
        provider="gemini",
        path="/v1beta/models/gemini-2.5-flash:streamGenerateContent",
    ),
    "gemini-model-from-path": Case(
        body({"candidates": [], "usageMetadata": {"promptTokenCount": 4, "totalTokenCount": 4}}),
        {"model": "gemini-2.0-flash", "input_tokens": 4, "output_tokens": 0},
        provider="gemini",
        path="/v1beta/models/gemini-2.0-flash:generateContent",
    ),
    "gemini-openai-compatible-endpoint": Case(
        body(
            {
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "ok"},
                        "finish_reason": "stop",
                    }
                ],
                "model": "gemini-2.5-flash",
                "object": "chat.completion",
                "usage": {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13},
            }
        ),
        {"model": "gemini-2.5-flash", "input_tokens": 11, "output_tokens": 2},
        provider="gemini",
        path="/v1beta/openai/chat/completions",
    ),
    "generic-groq-usage": Case(
        sse(
            chat_chunk({"role": "assistant", "content": ""}, model="llama-3.1-8b-instant"),
            chat_chunk({"content": "Hi"}, model="llama-3.1-8b-instant"),
            chat_chunk(
                {},
                model="llama-3.1-8b-instant",
                x_groq={
                    "id": "req_1",
                    "usage": {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49},
                },
            ),
        ),
        {"model": "llama-3.1-8b-instant", "input_tokens": 40, "output_tokens": 9},
        provider="generic",
    ),
    "generic-deepseek-cache-hits": Case(
        body(
            {
                "model": "deepseek-chat",
                "choices": [],
                "usage": {
                    "prompt_tokens": 100,
                    "completion_tokens": 5,
                    "prompt_cache_hit_tokens": 64,
                    "prompt_cache_miss_tokens": 36,
                },
            }
        ),
        {"input_tokens": 100, "cached_tokens": 64},
        provider="generic",
    ),
    "generic-sse-served-as-chunks": Case(
        chunks(OPENAI_CHAT_STREAM.content, 33),
        {"input_tokens": 19, "output_tokens": 2},
        extra={"event_with": b'"Hel"'},
    ),
    "generic-ndjson-ollama": Case(
        chunks(
            b'{"model":"llama3.2","message":{"role":"assistant","content":"Hi"},"done":false}\n'
            b'{"model":"llama3.2","message":{"role":"assistant","content":""},"done":true,'
            b'"prompt_eval_count":26,"eval_count":2}\n',
            40,
        ),
        {"model": "llama3.2", "input_tokens": 26, "output_tokens": 2},
        provider="generic",
        path="/api/chat",
        extra={"first_token_at": b'"content":"Hi"'},
    ),
    "model-from-request-on-error": Case(
        body(
            {
                "error": {
                    "message": "Rate limit reached",
                    "type": "requests",
                    "code": "rate_limit_exceeded",
                }
            },
            status=429,
        ),
        {"model": "gpt-4.1", "input_tokens": None, "output_tokens": None},
        request=req(model="gpt-4.1", messages=[]),
    ),
    "multi-line-data": Case(
        sse(
            'data: {"model": "m", "choices": [],\n'
            'data: "usage": {"prompt_tokens": 1, "completion_tokens": 2}}\n\n'
        ),
        {"model": "m", "input_tokens": 1, "output_tokens": 2},
    ),
    "openai-assistants-run-stream": Case(
        sse(
            (
                "thread.run.created",
                {"id": "run_1", "object": "thread.run", "model": "gpt-4o-mini", "usage": None},
            ),
            (
                "thread.message.delta",
                {
                    "id": "msg_1",
                    "object": "thread.message.delta",
                    "delta": {"content": [{"index": 0, "type": "text", "text": {"value": "Hi"}}]},
                },
            ),
            (
                "thread.run.completed",
                {
                    "id": "run_1",
                    "object": "thread.run",
                    "model": "gpt-4o-mini",
                    "usage": {"prompt_tokens": 381, "completion_tokens": 88, "total_tokens": 469},
                },
            ),
            "event: done\ndata: [DONE]\n\n",
        ),
        {"model": "gpt-4o-mini", "input_tokens": 381, "output_tokens": 88, "first_token_ms": 20.0},
        path="/v1/threads/thread_1/runs",
    ),
    "compatible-server-with-anthropic-usage": Case(
        body(
            {
                "model": "x",
                "choices": [],
                "usage": {"input_tokens": 5, "output_tokens": 2, "cache_read_input_tokens": 3},
            }
        ),
        {"input_tokens": 5, "output_tokens": 2, "cached_tokens": 3, "input_includes_cached": False},
        provider="generic",
    ),
    "compatible-server-with-responses-usage": Case(
        body({"model": "x", "choices": [], "usage": {"input_tokens": 5, "output_tokens": 2}}),
        {
            "input_tokens": 5,
            "output_tokens": 2,
            "cached_tokens": None,
            "input_includes_cached": True,
        },
        provider="generic",
    ),
    "integral-float-counts": Case(
        body({"model": "x", "usage": {"prompt_tokens": 12.0, "completion_tokens": 3.5}}),
        {"input_tokens": 12, "output_tokens": None},
        provider="generic",
    ),
    "embeddings-without-a-list-object": Case(
        body({"model": "text-embedding-3-large", "usage": {"prompt_tokens": 8, "total_tokens": 8}}),
        {"input_tokens": 8, "output_tokens": 0},
        path="/v1/embeddings",
    ),
    "nested-arrays": Case(
        RecordedResponse(
            200, body=b'[[{"model": "m", "usage": {"prompt_tokens": 2, "completion_tokens": 1}}]]'
        ),
        {"model": "m", "input_tokens": 2, "output_tokens": 1},
        provider="generic",
    ),
    "anthropic-stream-overloaded-midway": Case(
        sse(
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "model": "claude-opus-4-1-20250805",
                        "usage": {"input_tokens": 8, "output_tokens": 1},
                    },
                },
            ),
            TEXT_BLOCK_START,
            (
                "error",
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            ),
        ),
        {
            "model": "claude-opus-4-1-20250805",
            "input_tokens": 8,
            "output_tokens": 1,
            "cached_tokens": None,
            "first_token_ms": None,
        },
        provider="anthropic",
        path="/v1/messages",
    ),
    "sse-text-as-a-whole-body": Case(
        RecordedResponse(200, body=OPENAI_CHAT_STREAM.content),
        {"input_tokens": 19, "output_tokens": 2, "first_token_ms": None},
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_extract_usage(name: str) -> None:
    case = CASES[name]
    usage = extract_usage(case.provider, case.path, case.request, case.response)
    got = {key: getattr(usage, key) for key in case.expected}
    assert got == case.expected
    needle = case.extra.get("first_token_at")
    if needle is not None:
        assert usage.first_token_ms == first_chunk_with(case.response, needle)
    needle = case.extra.get("event_with")
    if needle is not None:
        assert usage.first_token_ms == chunk_completing(case.response, needle)


def test_gemini_array_first_token_is_the_chunk_where_text_starts() -> None:
    data = gemini_array_bytes(GEMINI_STREAM)
    for size in (1, 3, 16, 100, len(data)):
        response = chunks(data, size)
        usage = extract_usage("gemini", "/v1beta/models/x:streamGenerateContent", b"", response)
        assert usage.first_token_ms == first_chunk_with(response, b'"text"')
        assert (usage.input_tokens, usage.output_tokens) == (9, 54)


def test_chunked_sse_is_timed_by_the_chunk_completing_the_event() -> None:
    data = OPENAI_CHAT_STREAM.content
    for size in (1, 5, 64, len(data)):
        response = chunks(data, size)
        usage = extract_usage("openai", "/v1/chat/completions", b"", response)
        assert (usage.input_tokens, usage.output_tokens) == (19, 2)
        assert usage.first_token_ms == chunk_completing(response, b'"Hel"')


def test_to_meta_has_every_key_even_when_unknown() -> None:
    keys = [
        "model",
        "tokens_in",
        "tokens_out",
        "tokens_cached",
        "tokens_cache_write",
        "tokens_reasoning",
        "ttft_ms",
    ]
    assert list(Usage().to_meta()) == keys
    assert set(Usage().to_meta().values()) == {None}
    usage = extract_usage("anthropic", "/v1/messages", b"", body(ANTHROPIC_MESSAGE))
    assert usage.to_meta() == {
        "model": "claude-sonnet-4-5-20250929",
        "tokens_in": 12,
        "tokens_out": 6,
        "tokens_cached": 2048,
        "tokens_cache_write": 248,
        "tokens_reasoning": None,
        "ttft_ms": None,
    }
    json.dumps(usage.to_meta())  # JSON-ready


def test_usage_is_a_frozen_value() -> None:
    usage = Usage(model="m", input_tokens=1)
    with pytest.raises(AttributeError):
        usage.model = "n"  # type: ignore[misc]
    assert usage == Usage(model="m", input_tokens=1)
    assert hash(usage) == hash(Usage(model="m", input_tokens=1))


# -- odd input never raises ---------------------------------------------------------

GARBAGE: list[bytes] = [
    b"",
    b"\x00\xff\xfe\x80garbage\x1f\x8b",
    gzip.compress(b'{"usage": {"prompt_tokens": 1}}'),
    b"not json at all",
    b"data: \n\n",
    b"data: [DONE]\n\n",
    b"event: message_start\ndata: {broken\n\n",
    b'data: 42\n\ndata: null\n\ndata: []\n\ndata: "s"\n\n',
    b": comment only\n\n",
    b"[",
    b"[]",
    b'[{}, 1, "x", [], null]',
    b"]]]][[[[",
    b"{" * 5000 + b"}" * 5000,
    b"[" * 5000,
    b'{"usage": "lots"}',
    b'{"usage": {"prompt_tokens": -5, "completion_tokens": true}}',
    b'{"usage": {"prompt_tokens": 1e400, "completion_tokens": NaN}}',
    b'{"usageMetadata": [], "candidates": {"a": 1}}',
    b'{"usageMetadata": {"promptTokenCount": "9"}, "candidates": [null, {"content": []}]}',
    b'{"type": "message_start", "message": "no"}',
    b'{"type": "message_delta", "usage": [1, 2]}',
    b'{"type": "content_block_delta", "delta": "x"}',
    b'{"type": "response.completed", "response": []}',
    b'{"type": 7, "choices": [1, {"delta": []}, {"delta": {"tool_calls": [1, {"function": 2}]}}]}',
    b'{"choices": [{"delta": {"function_call": "x"}}], "x_groq": []}',
    b'{"model": 5, "message": "x", "response": 3}',
    'data: {"model": "\u2028"}\r\rdata: {}\r\r'.encode(),
    b"\r\n\r\n\n\n\r\r",
]


@pytest.mark.parametrize("data", GARBAGE, ids=range(len(GARBAGE)))
@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini", "generic"])
def test_garbage_never_raises(data: bytes, provider: str) -> None:
    path = "/v1beta/models/g:streamGenerateContent" if provider == "gemini" else "/v1/x"
    responses = [
        RecordedResponse(200, body=data),
        RecordedResponse(200, stream="sse", frames=((0.0, data),)),
        RecordedResponse(200, stream="chunks", frames=((0.0, data[:3]), (1.0, data[3:]))),
        RecordedResponse(200, stream="chunks", frames=()),
    ]
    for response in responses:
        usage = _extract(provider, path, data, response)  # the unguarded reader
        assert isinstance(usage, Usage)
        assert usage.input_tokens is None or usage.input_tokens >= 0
        assert usage.output_tokens is None or usage.output_tokens >= 0


JSON_BITS = st.sampled_from(
    [
        b"data: ",
        b"event: message_delta\n",
        b"\n",
        b"\r\n",
        b"\n\n",
        b"[",
        b"]",
        b",",
        b"{",
        b"}",
        b'"usage":',
        b'"usageMetadata":',
        b'{"prompt_tokens": 3, "completion_tokens": 4}',
        b'{"promptTokenCount": 1, "thoughtsTokenCount": 2}',
        b'"type": "message_start"',
        b'"type": "response.completed", "response": ',
        b'"candidates": [{"content": {"parts": [{"text": "x"}]}}]',
        b'"choices": [{"delta": {"content": "x"}}]',
        b"[DONE]",
        b"\xff",
        b"1",
        b"null",
    ]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pieces=st.lists(st.one_of(JSON_BITS, st.binary(max_size=8)), max_size=40),
    cut=st.integers(min_value=0, max_value=400),
    kind=st.sampled_from([None, "sse", "chunks"]),
    provider=st.sampled_from(["openai", "anthropic", "gemini", "generic"]),
)
def test_fuzzed_bodies_never_raise(
    pieces: list[bytes], cut: int, kind: str | None, provider: str
) -> None:
    data = b"".join(pieces)
    if kind is None:
        response = RecordedResponse(200, body=data)
    else:
        response = RecordedResponse(200, stream=kind, frames=((0.0, data[:cut]), (1.0, data[cut:])))
    usage = _extract(provider, "/v1/chat/completions", data, response)
    assert isinstance(usage, Usage)


def test_the_guard_turns_a_bug_into_an_empty_usage(monkeypatch: pytest.MonkeyPatch) -> None:
    import reel_core._usage as module

    def boom(*args: Any) -> Usage:
        raise RuntimeError("a bug")

    monkeypatch.setattr(module, "_extract", boom)
    assert extract_usage("openai", "/v1/chat/completions", b"", body(OPENAI_CHAT)) == Usage()


# -- the recorded corpus ---------------------------------------------------------------

PROVIDERS = {"openai", "anthropic", "gemini", "azure-openai", "vertex"}


def _provider_of(uri: str) -> str | None:
    host = (urlsplit(uri).hostname or "").lower()
    if host == "api.anthropic.com":
        return "anthropic"
    if host == "api.openai.com" or host.endswith((".openai.azure.com", ".azure.com")):
        return "openai"
    if host == "generativelanguage.googleapis.com" or host.endswith("aiplatform.googleapis.com"):
        return "gemini"
    return None


@dataclass(frozen=True)
class Recorded:
    """One corpus interaction with a usage block in its response."""

    index: int
    provider: str
    path: str
    request: bytes
    response: RecordedResponse
    #: The decoded response body, as recorded.
    raw: bytes


def _bytes(value: Any) -> bytes:
    if isinstance(value, dict):  # {"string": ...} (vcrpy, Ruby VCR) or base64
        if "base64_string" in value:
            return base64.b64decode(value["base64_string"])
        value = value.get("string")
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    return value if isinstance(value, bytes) else b""


def _header(headers: Any, name: str) -> str:
    if not isinstance(headers, dict):
        return ""
    for key, value in headers.items():
        if str(key).lower() == name:
            return str(value[0] if isinstance(value, list) and value else value)
    return ""


def _decode(data: bytes, encoding: str) -> bytes | None:
    """The body as the core stores it (decoded); None when it cannot be."""
    encoding = encoding.lower()
    try:
        if data[:2] == b"\x1f\x8b":  # some recorders kept the header, not the gzip
            return gzip.decompress(data)
        if "deflate" in encoding:
            return zlib.decompress(data)
    except (OSError, zlib.error, EOFError):
        return None
    return None if "br" in encoding else data


def _recorded_response(status: int, content_type: str, path: str, data: bytes) -> RecordedResponse:
    """What the core's recorder would have stored (with made-up timing)."""
    if "text/event-stream" in content_type.lower():
        splitter = SSESplitter()
        frames = splitter.feed(data) + splitter.close()
        return RecordedResponse(
            status, stream="sse", frames=tuple((10.0 * i, f) for i, f in enumerate(frames))
        )
    if status < 400 and (":streamGenerateContent" in path or data.lstrip().startswith(b"data:")):
        return chunks(data, 97)
    return RecordedResponse(status, body=data)


def _load(path: Path) -> Any:
    import yaml

    base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):  # type: ignore[misc]
        """A safe loader (!!binary built in) that also reads Ruby VCR's !binary."""

    def binary(loader: Any, node: Any) -> bytes:
        return base64.b64decode(str(loader.construct_scalar(node)))

    Loader.add_constructor("!binary", binary)
    return yaml.load(path.read_bytes(), Loader=Loader)


def _corpus_files() -> list[str]:
    manifest = CORPUS / "MANIFEST.jsonl"
    if not manifest.is_file():
        return []
    names = []
    for line in manifest.read_text().splitlines():
        entry = json.loads(line)
        providers = {i.get("provider") for i in entry.get("interactions", [])}
        if entry.get("format") in ("vcrpy", "ruby_vcr") and providers & PROVIDERS:
            names.append(entry["file"])
    return names


def _exchanges(name: str) -> Iterator[Recorded]:
    import yaml

    try:
        doc = _load(CORPUS / name)
    except yaml.YAMLError:  # python/object tags and the like: not ours to read
        return
    if not isinstance(doc, dict):
        return
    items = doc.get("interactions") or doc.get("http_interactions") or []
    for index, item in enumerate(items):
        request, response = item.get("request", {}), item.get("response", {})
        provider = _provider_of(str(request.get("uri", "")))
        status = response.get("status")
        code = status.get("code") if isinstance(status, dict) else status
        if provider is None or not isinstance(code, int):
            continue
        headers = response.get("headers")
        data = _decode(_bytes(response.get("body")), _header(headers, "content-encoding"))
        if data is None or (b'"usage"' not in data and b'"usageMetadata"' not in data):
            continue
        path = urlsplit(str(request["uri"])).path
        yield Recorded(
            index,
            provider,
            path,
            _bytes(request.get("body")),
            _recorded_response(code, _header(headers, "content-type"), path, data),
            data,
        )


# An independent reading of the recorded numbers: every usage block in the
# body, wherever it is; for each count the last value given wins.


def _json_objects(raw: bytes) -> list[Any]:
    text = raw.decode("utf-8", "replace")
    if text.lstrip().startswith(("data:", "event:")):
        values = []
        for event in text.replace("\r\n", "\n").split("\n\n"):
            data = "\n".join(
                line[5:].lstrip(" ") for line in event.split("\n") if line.startswith("data:")
            )
            if data and data != "[DONE]":
                with contextlib.suppress(ValueError):
                    values.append(json.loads(data))
        return values
    try:
        return [json.loads(text)]
    except ValueError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def _usage_blocks(value: Any, out: list[tuple[str, dict[str, Any]]]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            if key in ("usage", "usageMetadata") and isinstance(inner, dict):
                out.append((key, inner))
            else:
                _usage_blocks(inner, out)
    elif isinstance(value, list):
        for inner in value:
            _usage_blocks(inner, out)


def _expected(raw: bytes, path: str) -> dict[str, Any]:
    blocks: list[tuple[str, dict[str, Any]]] = []
    for value in _json_objects(raw):
        _usage_blocks(value, blocks)
    last: dict[str, Any] = {}
    gemini = None
    for key, block in blocks:
        if key == "usageMetadata":
            gemini = block
            continue
        for name, inner in block.items():
            if inner is not None:
                last[name] = inner
    if gemini is not None:
        prompt = gemini.get("promptTokenCount")
        if prompt is None and "candidatesTokenCount" not in gemini:
            return {"input_tokens": None, "output_tokens": None}
        thoughts = gemini.get("thoughtsTokenCount")
        return {
            "input_tokens": prompt + gemini.get("toolUsePromptTokenCount", 0),
            "output_tokens": gemini.get("candidatesTokenCount", 0) + (thoughts or 0),
            "cached_tokens": gemini.get("cachedContentTokenCount"),
            "reasoning_tokens": thoughts,
        }
    if "prompt_tokens" in last:  # chat completions, embeddings
        output = last.get("completion_tokens")
        if output is None and path.endswith("/embeddings"):
            output = 0
        return {
            "input_tokens": last["prompt_tokens"],
            "output_tokens": output,
            "cached_tokens": last.get("prompt_tokens_details", {}).get("cached_tokens"),
            "reasoning_tokens": last.get("completion_tokens_details", {}).get("reasoning_tokens"),
        }
    if "cache_read_input_tokens" in last or "cache_creation_input_tokens" in last:  # Anthropic
        return {
            "input_tokens": last.get("input_tokens"),
            "output_tokens": last.get("output_tokens"),
            "cached_tokens": last.get("cache_read_input_tokens"),
            "cache_write_tokens": last.get("cache_creation_input_tokens"),
            "input_includes_cached": False,
        }
    return {  # the Responses API
        "input_tokens": last.get("input_tokens"),
        "output_tokens": last.get("output_tokens"),
        "cached_tokens": last.get("input_tokens_details", {}).get("cached_tokens"),
        "reasoning_tokens": last.get("output_tokens_details", {}).get("reasoning_tokens"),
    }


CORPUS_FILES = [name for name in _corpus_files() if any(True for _ in _exchanges(name))]


@pytest.mark.skipif(not CORPUS_FILES, reason=NO_CORPUS)
def test_the_corpus_has_usage_for_every_provider() -> None:
    seen = {(r.provider, r.response.stream) for n in CORPUS_FILES for r in _exchanges(n)}
    for provider in ("openai", "anthropic", "gemini"):
        assert (provider, None) in seen
        assert (provider, "sse") in seen
    assert ("gemini", "chunks") in seen  # the JSON-array stream
    assert len(CORPUS_FILES) >= 50


@pytest.mark.parametrize(
    "name",
    [pytest.param(name, id=name) for name in CORPUS_FILES]
    or [pytest.param("", marks=pytest.mark.skip(reason=NO_CORPUS))],
)
def test_corpus_usage_matches_the_recorded_body(name: str) -> None:
    checked = 0
    for recorded in _exchanges(name):
        usage = extract_usage(recorded.provider, recorded.path, recorded.request, recorded.response)
        expected = _expected(recorded.raw, recorded.path)
        got = {key: getattr(usage, key) for key in expected}
        assert got == expected, f"{name} #{recorded.index}"
        if recorded.response.stream is None:
            assert usage.first_token_ms is None
        elif usage.first_token_ms is not None:
            assert usage.first_token_ms in {at for at, _ in recorded.response.frames}
        if usage.input_tokens is not None:
            assert usage.model is not None, f"{name} #{recorded.index}: no model"
        checked += 1
    assert checked


def test_skipping_content_events_changes_no_usage(monkeypatch: pytest.MonkeyPatch) -> None:
    # Once the model and the first content are known, events holding no
    # count are not parsed: every case and every corpus exchange (when the
    # corpus is there) reads the same with all of them parsed.
    from reel_core import _usage

    exchanges = [(c.provider, c.path, c.request, c.response) for c in CASES.values()]
    exchanges += [
        (r.provider, r.path, r.request, r.response) for n in CORPUS_FILES for r in _exchanges(n)
    ]
    skipping = [extract_usage(*exchange) for exchange in exchanges]
    monkeypatch.setattr(_usage, "_may_count", lambda event: True)
    assert skipping == [extract_usage(*exchange) for exchange in exchanges]
    assert sum(1 for *_, response in exchanges if response.stream == "sse") >= 5


def test_a_json_array_stream_with_a_nested_array_and_non_objects() -> None:
    body = b'[[1, {"usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 4}}]]'
    response = RecordedResponse(200, stream="chunks", frames=((5.0, body),), end_ms=6.0)
    usage = extract_usage(
        "gemini", "/v1beta/models/gemini-2.5-flash:streamGenerateContent", b"{}", response
    )
    assert (usage.input_tokens, usage.output_tokens) == (3, 4)
