"""OpenAI payloads: chat completions, embeddings and errors (sans-IO).

Shapes follow what api.openai.com sends: plain bodies are 2-space indented JSON
with a trailing newline; chat streams are ``data: {compact}\\n\\n`` chunks that
carry ``usage: null`` when usage was asked for, then a ``choices: []`` usage
chunk, and end with ``data: [DONE]``.  The Responses API is in
:mod:`tests.fakes.responses_wire`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from collections.abc import Mapping
from typing import Any

from .wire import (
    FAKE_CREATED,
    Ask,
    Headers,
    Reply,
    Scenario,
    ToolSpec,
    compact,
    fragments,
    obfuscation,
    pretty,
    scrub,
    sse_frame,
    text_of,
    text_pieces,
    token_count,
)

__all__ = [
    "ERROR_AFTER",
    "JSON_TYPE",
    "SSE_TYPE",
    "arguments_json",
    "call_id",
    "chat",
    "embedding_vector",
    "embeddings",
    "error",
    "error_object",
    "function_tools",
    "headers",
    "parse_chat",
]

_FINGERPRINT = "fp_reelfake0"
#: How many frames of a stream go out before the in-stream error (``stream-error``).
ERROR_AFTER = 2


def headers(seed: str, content_type: str) -> Headers:
    """The headers api.openai.com sends (a stable subset)."""
    return (
        ("content-type", content_type),
        ("openai-organization", "reel-fake-org"),
        ("openai-processing-ms", "7"),
        ("openai-version", "2020-10-01"),
        ("x-request-id", "req_" + seed[:32]),
        ("x-ratelimit-limit-requests", "10000"),
        ("x-ratelimit-remaining-requests", "9999"),
        ("x-ratelimit-reset-requests", "6ms"),
    )


JSON_TYPE = "application/json"
SSE_TYPE = "text/event-stream; charset=utf-8"


# ---------------------------------------------------------------------- parsing


def function_tools(body: Mapping[str, Any]) -> tuple[ToolSpec, ...]:
    """The function tools of a chat or Responses request (none if ``tool_choice`` is none)."""
    if body.get("tool_choice") == "none":
        return ()
    specs: list[ToolSpec] = []
    for tool in body.get("tools") or []:
        if not isinstance(tool, Mapping):
            continue
        fn = tool.get("function", tool)  # chat nests the function; Responses does not
        if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
            params = fn.get("parameters")
            specs.append(ToolSpec(fn["name"], params if isinstance(params, Mapping) else {}))
    return tuple(specs)


def parse_chat(body: Mapping[str, Any], seed: str, secrets: tuple[str, ...]) -> Ask:
    prompt, result = "", None
    messages = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
    for message in messages:
        if message.get("role") == "user":
            prompt = text_of(message.get("content"))
    if messages and messages[-1].get("role") in ("tool", "function"):
        result = scrub(text_of(messages[-1].get("content")), secrets)
    return Ask(
        model=str(body.get("model", "")),
        prompt=scrub(prompt, secrets),
        tool_result=result,
        tools=function_tools(body),
        stream=body.get("stream") is True,
        seed=seed,
        body=body,
    )


# ------------------------------------------------------------- chat completions


def _usage(ask: Ask) -> dict[str, Any]:
    return {
        "prompt_tokens": ask.input_tokens,
        "completion_tokens": ask.output_tokens,
        "total_tokens": ask.input_tokens + ask.output_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def chat_id(ask: Ask) -> str:
    return "chatcmpl-" + ask.hexid("chat", 29)


def call_id(ask: Ask) -> str:
    return "call_" + ask.hexid("call", 24)


def chat(ask: Ask, scenarios: frozenset[Scenario]) -> Reply:
    """``POST /v1/chat/completions``."""
    if ask.stream:
        return _chat_stream(ask, scenarios)
    tool = ask.tool
    message: dict[str, Any] = {"role": "assistant"}
    if tool is not None:
        message["content"] = None
        message["tool_calls"] = [
            {
                "id": call_id(ask),
                "type": "function",
                "function": {"name": tool.name, "arguments": arguments_json(ask)},
            }
        ]
    else:
        message["content"] = ask.text
    message["refusal"] = None
    message["annotations"] = []
    body = {
        "id": chat_id(ask),
        "object": "chat.completion",
        "created": FAKE_CREATED,
        "model": ask.model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": _logprobs(ask) if tool is None else None,
                "finish_reason": "tool_calls" if tool is not None else "stop",
            }
        ],
        "usage": _usage(ask),
        "service_tier": "default",
        "system_fingerprint": _FINGERPRINT,
    }
    return Reply(200, headers(ask.seed, JSON_TYPE), (pretty(body),), False, scenarios)


def _logprobs(ask: Ask) -> dict[str, Any] | None:
    """``logprobs.content`` when the request asks for it: one entry per
    word of the reply, each with a ``token`` field."""
    if ask.body.get("logprobs") is not True:
        return None
    words = ask.text.split(" ")
    return {
        "content": [
            {"token": w, "logprob": -0.25, "bytes": list(w.encode()), "top_logprobs": []}
            for w in words
        ],
        "refusal": None,
    }


def arguments_json(ask: Ask) -> str:
    """The tool-call arguments as OpenAI writes them: compact JSON."""
    return json.dumps(ask.arguments, separators=(",", ":"), ensure_ascii=False)


def _chat_stream(ask: Ask, scenarios: frozenset[Scenario]) -> Reply:
    options = ask.body.get("stream_options")
    options = options if isinstance(options, Mapping) else {}
    include_usage = options.get("include_usage") is True
    obfuscate = options.get("include_obfuscation", True) is not False
    frames: list[bytes] = []

    def chunk(delta: dict[str, Any], finish: str | None = None) -> None:
        data: dict[str, Any] = {
            "id": chat_id(ask),
            "object": "chat.completion.chunk",
            "created": FAKE_CREATED,
            "model": ask.model,
            "service_tier": "default",
            "system_fingerprint": _FINGERPRINT,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:
            data["usage"] = None
        if obfuscate:
            data["obfuscation"] = obfuscation(ask.seed, len(frames))
        frames.append(sse_frame(compact(data)))

    tool = ask.tool
    if tool is not None:
        chunk(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "index": 0,
                        "id": call_id(ask),
                        "type": "function",
                        "function": {"name": tool.name, "arguments": ""},
                    }
                ],
                "refusal": None,
            }
        )
        for piece in fragments(arguments_json(ask)):
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
    else:
        chunk({"role": "assistant", "content": "", "refusal": None})
        for piece in text_pieces(ask.text):
            chunk({"content": piece})
    if Scenario.STREAM_ERROR in scenarios:
        err = error_object(Scenario.SERVER_ERROR)
        frames[ERROR_AFTER:] = [sse_frame(compact(err))]
        return Reply(200, headers(ask.seed, SSE_TYPE), tuple(frames), True, scenarios)
    chunk({}, "tool_calls" if tool is not None else "stop")
    if include_usage:
        last: dict[str, Any] = {
            "id": chat_id(ask),
            "object": "chat.completion.chunk",
            "created": FAKE_CREATED,
            "model": ask.model,
            "service_tier": "default",
            "system_fingerprint": _FINGERPRINT,
            "choices": [],
            "usage": _usage(ask),
        }
        if obfuscate:
            last["obfuscation"] = obfuscation(ask.seed, len(frames))
        frames.append(sse_frame(compact(last)))
    frames.append(sse_frame(b"[DONE]"))
    return Reply(200, headers(ask.seed, SSE_TYPE), tuple(frames), True, scenarios)


# ------------------------------------------------------------------- embeddings


def embedding_vector(text: str, dimensions: int = 8) -> list[float]:
    """The fake embedding of ``text``: multiples of 1/1024 in [-1, 1), exact in float32."""
    out: list[float] = []
    counter = 0
    while len(out) < dimensions:
        raw = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        for i in range(0, len(raw), 2):
            out.append((int.from_bytes(raw[i : i + 2], "big") % 2048 - 1024) / 1024)
        counter += 1
    return out[:dimensions]


def embeddings(body: Mapping[str, Any], seed: str, secrets: tuple[str, ...]) -> Reply:
    """``POST /v1/embeddings``; ``encoding_format: "base64"`` gives float32 LE base64."""
    raw = body.get("input")
    inputs: list[Any] = raw if isinstance(raw, list) else [raw]
    if inputs and all(isinstance(i, int) for i in inputs):
        inputs = [inputs]  # one input given as a token list
    dims = body.get("dimensions")
    dims = dims if isinstance(dims, int) and dims > 0 else 8
    as_base64 = body.get("encoding_format") == "base64"
    data: list[dict[str, Any]] = []
    tokens = 0
    for index, item in enumerate(inputs):
        text = scrub(item if isinstance(item, str) else json.dumps(item), secrets)
        tokens += token_count(text)
        vector = embedding_vector(text, dims)
        value: Any = vector
        if as_base64:
            value = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
        data.append({"object": "embedding", "index": index, "embedding": value})
    out = {
        "object": "list",
        "data": data,
        "model": str(body.get("model", "")),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
    return Reply(200, headers(seed, JSON_TYPE), (pretty(out),))


# ----------------------------------------------------------------------- errors

_ERRORS: dict[Scenario, tuple[int, str, str, str | None]] = {
    Scenario.BAD_REQUEST: (
        400,
        "We could not parse the JSON body of your request. (HINT: This likely means"
        " you aren't using your HTTP library correctly. The OpenAI API expects a JSON"
        " payload, but what was sent was not valid JSON.)",
        "invalid_request_error",
        None,
    ),
    Scenario.UNAUTHORIZED: (
        401,
        "Incorrect API key provided. You can find your API key at"
        " https://platform.openai.com/account/api-keys.",
        "invalid_request_error",
        "invalid_api_key",
    ),
    Scenario.RATE_LIMITED: (
        429,
        "Rate limit reached for requests per min (RPM): Limit 3, Used 3, Requested 1."
        " Please try again in 1s. Visit https://platform.openai.com/account/rate-limits"
        " to learn more.",
        "requests",
        "rate_limit_exceeded",
    ),
    Scenario.SERVER_ERROR: (
        500,
        "The server had an error while processing your request. Sorry about that!",
        "server_error",
        None,
    ),
    Scenario.OVERLOADED: (
        503,
        "The engine is currently overloaded, please try again later",
        "server_error",
        None,
    ),
}


def error_object(kind: Scenario, message: str | None = None) -> dict[str, Any]:
    _, text, kind_name, code = _ERRORS[kind]
    return {"error": {"message": message or text, "type": kind_name, "param": None, "code": code}}


def error(kind: Scenario, seed: str, message: str | None = None) -> Reply:
    """The error OpenAI answers for ``kind`` (one of the status scenarios).

    The edge (401, 429, 5xx) answers 4-space indented JSON with a newline; the
    API's own validation (400) answers 2-space indented JSON without one.
    """
    status = _ERRORS[kind][0]
    obj = error_object(kind, message)
    if status == 400:
        body = json.dumps(obj, indent=2, ensure_ascii=False).encode()
    else:
        body = (json.dumps(obj, indent=4, ensure_ascii=False) + "\n").encode()
    answer_headers = headers(seed, JSON_TYPE)
    if status == 429:
        answer_headers = (
            *answer_headers[:-2],
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", "1s"),
            ("retry-after", "1"),
        )
    return Reply(status, answer_headers, (body,), False, frozenset({kind}))
