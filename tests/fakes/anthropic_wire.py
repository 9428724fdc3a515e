"""Anthropic payloads: ``POST /v1/messages`` plain and streamed, and errors (sans-IO).

Plain bodies are compact JSON with no trailing newline.  Streams are
``event: <type>`` / ``data: {compact}`` pairs: message_start,
content_block_start, ping, content_block_delta (``text_delta``;
``input_json_delta`` for a tool call, the first fragment empty),
content_block_stop, message_delta with the usage, message_stop.  Like the real
API, some ``data:`` lines carry trailing spaces (deterministic here).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from .wire import (
    Ask,
    Headers,
    Reply,
    Scenario,
    ToolSpec,
    compact,
    fragments,
    scrub,
    sse_frame,
    text_of,
    text_pieces,
)

__all__ = ["error", "messages", "parse_messages", "tool_preamble"]

#: How many frames of a stream go out before the in-stream error (``stream-error``).
ERROR_AFTER = 5

_JSON = "application/json"
_SSE = "text/event-stream; charset=utf-8"


def _headers(seed: str, content_type: str) -> Headers:
    headers: Headers = (
        ("content-type", content_type),
        ("request-id", "req_011C" + seed[:20]),
        ("anthropic-organization-id", "00000000-0000-4000-8000-000000000000"),
    )
    if content_type == _SSE:
        headers = (*headers, ("cache-control", "no-cache"))
    return headers


def _tools(body: Mapping[str, Any]) -> tuple[ToolSpec, ...]:
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping) and choice.get("type") == "none":
        return ()
    specs: list[ToolSpec] = []
    for tool in body.get("tools") or []:
        if isinstance(tool, Mapping) and isinstance(tool.get("name"), str):
            schema = tool.get("input_schema")
            if isinstance(schema, Mapping):  # server tools (web_search, ...) have none
                specs.append(ToolSpec(tool["name"], schema))
    return tuple(specs)


def parse_messages(body: Mapping[str, Any], seed: str, secrets: tuple[str, ...]) -> Ask:
    prompt, result = "", None
    messages = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
    for message in messages:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        blocks = content if isinstance(content, list) else [content]
        results = [b for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool_result"]
        if results and message is messages[-1]:
            result = scrub(text_of(results[-1].get("content")), secrets)
        texts = [b for b in blocks if not (isinstance(b, Mapping) and b.get("type") != "text")]
        if texts:
            prompt = text_of(texts)
    return Ask(
        model=str(body.get("model", "")),
        prompt=scrub(prompt, secrets),
        tool_result=result,
        tools=_tools(body),
        stream=body.get("stream") is True,
        seed=seed,
        body=body,
    )


def tool_preamble(tool: ToolSpec) -> str:
    """The text block Anthropic's fake "model" writes before calling ``tool``."""
    return f"I'll use the {tool.name} tool."


def _message_id(ask: Ask) -> str:
    return "msg_01" + ask.hexid("msg", 22)


def _tool_id(ask: Ask) -> str:
    return "toolu_01" + ask.hexid("toolu", 22)


def _usage(ask: Ask, output_tokens: int, *, full: bool) -> dict[str, Any]:
    """Usage as message_start and plain bodies carry it (``full``) or message_delta does."""
    usage: dict[str, Any] = {
        "input_tokens": ask.input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    if full:
        usage["cache_creation"] = {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0}
    usage["output_tokens"] = output_tokens
    if full:
        usage["service_tier"] = "standard"
    return usage


def _output_tokens(ask: Ask) -> int:
    tool = ask.tool
    if tool is not None:
        return len(text_pieces(tool_preamble(tool))) + ask.output_tokens
    return ask.output_tokens


def _arguments(ask: Ask) -> str:
    return json.dumps(ask.arguments, ensure_ascii=False)


def messages(ask: Ask, scenarios: frozenset[Scenario]) -> Reply:
    """``POST /v1/messages``."""
    if ask.stream:
        return _stream(ask, scenarios)
    tool = ask.tool
    content: list[dict[str, Any]]
    if tool is not None:
        content = [
            {"type": "text", "text": tool_preamble(tool)},
            {"type": "tool_use", "id": _tool_id(ask), "name": tool.name, "input": ask.arguments},
        ]
    else:
        content = [{"type": "text", "text": ask.text}]
    body = {
        "model": ask.model,
        "id": _message_id(ask),
        "type": "message",
        "role": "assistant",
        "content": content,
        "stop_reason": "tool_use" if tool is not None else "end_turn",
        "stop_sequence": None,
        "usage": _usage(ask, _output_tokens(ask), full=True),
    }
    return Reply(200, _headers(ask.seed, _JSON), (compact(body),), False, scenarios)


def _pad(ask: Ask, index: int) -> bytes:
    """Anthropic pads some data lines with spaces; here 0..15 of them, by position."""
    return b" " * (hashlib.sha256(f"{ask.seed}:pad:{index}".encode()).digest()[0] % 16)


def _stream(ask: Ask, scenarios: frozenset[Scenario]) -> Reply:
    frames: list[bytes] = []

    def event(kind: str, data: dict[str, Any], *, pad: bool = True) -> None:
        payload = compact({"type": kind, **data})
        if pad:
            payload += _pad(ask, len(frames))
        frames.append(sse_frame(payload, event=kind))

    start: dict[str, Any] = {
        "model": ask.model,
        "id": _message_id(ask),
        "type": "message",
        "role": "assistant",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": _usage(ask, 1, full=True),
    }
    event("message_start", {"message": start})
    tool = ask.tool
    text = tool_preamble(tool) if tool is not None else ask.text
    event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
    frames.append(sse_frame(b'{"type": "ping"}', event="ping"))
    for piece in text_pieces(text):
        event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": piece}})
    if Scenario.STREAM_ERROR in scenarios:
        del frames[ERROR_AFTER:]
        error_body = {
            "type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded"},
        }
        frames.append(sse_frame(json.dumps(error_body).encode(), event="error"))
        return Reply(200, _headers(ask.seed, _SSE), tuple(frames), True, scenarios)
    event("content_block_stop", {"index": 0})
    if tool is not None:
        block = {"type": "tool_use", "id": _tool_id(ask), "name": tool.name, "input": {}}
        event("content_block_start", {"index": 1, "content_block": block})
        for piece in ["", *fragments(_arguments(ask))]:
            delta = {"type": "input_json_delta", "partial_json": piece}
            event("content_block_delta", {"index": 1, "delta": delta})
        event("content_block_stop", {"index": 1})
    stop = {"stop_reason": "tool_use" if tool is not None else "end_turn", "stop_sequence": None}
    usage = _usage(ask, _output_tokens(ask), full=False)
    event("message_delta", {"delta": stop, "usage": usage}, pad=False)
    event("message_stop", {})
    return Reply(200, _headers(ask.seed, _SSE), tuple(frames), True, scenarios)


# ----------------------------------------------------------------------- errors

_ERRORS: dict[Scenario, tuple[int, str, str]] = {
    Scenario.BAD_REQUEST: (400, "invalid_request_error", "Invalid request: body is not valid JSON"),
    Scenario.UNAUTHORIZED: (401, "authentication_error", "invalid x-api-key"),
    Scenario.RATE_LIMITED: (
        429,
        "rate_limit_error",
        "This request would exceed the rate limit for your organization of 5 requests"
        " per minute. Please try again later.",
    ),
    Scenario.SERVER_ERROR: (500, "api_error", "Internal server error"),
    Scenario.OVERLOADED: (529, "overloaded_error", "Overloaded"),
}


def error(kind: Scenario, seed: str, message: str | None = None) -> Reply:
    """The error Anthropic answers for ``kind``: compact ``{"type": "error", ...}``."""
    status, kind_name, text = _ERRORS[kind]
    body = {
        "type": "error",
        "error": {"type": kind_name, "message": message or text},
        "request_id": "req_011C" + seed[:20],
    }
    headers = _headers(seed, _JSON)
    if status == 429:
        headers = (
            *headers,
            ("retry-after", "1"),
            ("anthropic-ratelimit-requests-limit", "5"),
            ("anthropic-ratelimit-requests-remaining", "0"),
            ("anthropic-ratelimit-requests-reset", "2025-01-01T00:00:01Z"),
        )
    if status in (429, 500, 529):
        headers = (*headers, ("x-should-retry", "true"))
    return Reply(status, headers, (compact(body),), False, frozenset({kind}))
