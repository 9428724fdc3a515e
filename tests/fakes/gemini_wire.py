"""Gemini payloads: generateContent, streamGenerateContent and errors (sans-IO).

Plain bodies and errors are 2-space indented JSON with a trailing newline.
``:streamGenerateContent?alt=sse`` frames are ``data: {...}\\r\\n\\r\\n`` with
Google's ``","`` / ``": "`` spacing; without ``alt=sse`` the stream is one JSON
array delivered piecewise: ``[{...}\\n``, then ``,\\r\\n{...}\\n`` per element,
then ``]``.  Every chunk carries ``usageMetadata``; the last one the
``finishReason``.
"""

from __future__ import annotations

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
    pretty,
    scrub,
    sse_frame,
    text_of,
    text_pieces,
)

__all__ = ["error", "generate", "parse_generate"]

#: How many chunks of a stream go out before the in-stream error (``stream-error``).
ERROR_AFTER = 2

_JSON = "application/json; charset=UTF-8"
_COMMON: Headers = (
    ("vary", "Origin"),
    ("vary", "X-Origin"),
    ("vary", "Referer"),
    ("server", "scaffolding on HTTPServer2"),
    ("server-timing", "gfet4t7; dur=7"),
    ("x-xss-protection", "0"),
    ("x-frame-options", "SAMEORIGIN"),
    ("x-content-type-options", "nosniff"),
)


def _headers(*, sse: bool) -> Headers:
    if sse:
        sse_type = ("content-type", "text/event-stream")
        return (sse_type, ("content-disposition", "attachment"), *_COMMON[:5])
    return (("content-type", _JSON), *_COMMON)


def _field(obj: Mapping[str, Any], camel: str) -> Any:
    """``obj[camel]``, or its snake_case spelling (Google's JSON accepts both)."""
    if camel in obj:
        return obj[camel]
    return obj.get("".join("_" + c.lower() if c.isupper() else c for c in camel))


def _tools(body: Mapping[str, Any]) -> tuple[ToolSpec, ...]:
    config = _field(body, "toolConfig")
    calling = _field(config, "functionCallingConfig") if isinstance(config, Mapping) else None
    if isinstance(calling, Mapping) and str(calling.get("mode", "")).upper() == "NONE":
        return ()
    specs: list[ToolSpec] = []
    for tool in body.get("tools") or []:
        if not isinstance(tool, Mapping):
            continue
        for decl in _field(tool, "functionDeclarations") or []:
            if isinstance(decl, Mapping) and isinstance(decl.get("name"), str):
                params = decl.get("parameters") or _field(decl, "parametersJsonSchema")
                specs.append(ToolSpec(decl["name"], params if isinstance(params, Mapping) else {}))
    return tuple(specs)


def parse_generate(
    model: str, body: Mapping[str, Any], seed: str, secrets: tuple[str, ...], *, stream: bool
) -> Ask:
    prompt, result = "", None
    contents = [c for c in body.get("contents") or [] if isinstance(c, Mapping)]
    for content in contents:
        if content.get("role", "user") != "user":
            continue
        parts = [p for p in content.get("parts") or [] if isinstance(p, Mapping)]
        responses = [_field(p, "functionResponse") for p in parts]
        responses = [r for r in responses if r is not None]
        if responses and content is contents[-1]:
            response = responses[-1]
            value = response.get("response") if isinstance(response, Mapping) else response
            result = scrub(json.dumps(value, ensure_ascii=False), secrets)
        texts = [p for p in parts if "text" in p]
        if texts:
            prompt = text_of(texts)
    return Ask(
        model=model,
        prompt=scrub(prompt, secrets),
        tool_result=result,
        tools=_tools(body),
        stream=stream,
        seed=seed,
        body=body,
    )


def _response_id(ask: Ask) -> str:
    return ask.hexid("gemini", 23)


def _usage(ask: Ask, candidates: int) -> dict[str, Any]:
    return {
        "promptTokenCount": ask.input_tokens,
        "candidatesTokenCount": candidates,
        "totalTokenCount": ask.input_tokens + candidates,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": ask.input_tokens}],
    }


def _chunk(ask: Ask, parts: list[dict[str, Any]], candidates: int, *, last: bool) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
    if last:
        candidate["finishReason"] = "STOP"
    return {
        "candidates": [candidate],
        "usageMetadata": _usage(ask, candidates),
        "modelVersion": ask.model,
        "responseId": _response_id(ask),
    }


def _call_part(ask: Ask, tool: ToolSpec) -> dict[str, Any]:
    return {"functionCall": {"name": tool.name, "args": ask.arguments}}


def generate(ask: Ask, scenarios: frozenset[Scenario], *, sse: bool) -> Reply:
    """``:generateContent`` (``ask.stream`` false) or ``:streamGenerateContent``."""
    tool = ask.tool
    if not ask.stream:
        part = _call_part(ask, tool) if tool is not None else {"text": ask.text}
        body = pretty(_chunk(ask, [part], ask.output_tokens, last=True))
        return Reply(200, _headers(sse=False), (body,), False, scenarios)
    chunks: list[dict[str, Any]] = []
    if tool is not None:
        chunks.append(_chunk(ask, [_call_part(ask, tool)], ask.output_tokens, last=True))
    else:
        pieces = text_pieces(ask.text)
        for n, piece in enumerate(pieces, start=1):
            chunks.append(_chunk(ask, [{"text": piece}], n, last=n == len(pieces)))
    if Scenario.STREAM_ERROR in scenarios:
        del chunks[ERROR_AFTER:]
        chunks.append(_error_object(Scenario.SERVER_ERROR))
    if sse:
        frames = [sse_frame(compact(c, google=True), crlf=True) for c in chunks]
        return Reply(200, _headers(sse=True), tuple(frames), True, scenarios)
    elements = [pretty(c)[:-1] for c in chunks]  # pretty() adds a newline; place it below
    frames = [b"[" + elements[0] + b"\n"]
    frames += [b",\r\n" + e + b"\n" for e in elements[1:]]
    frames.append(b"]")
    return Reply(200, _headers(sse=False), tuple(frames), True, scenarios)


# ----------------------------------------------------------------------- errors

_ERRORS: dict[Scenario, tuple[int, str, str]] = {
    Scenario.BAD_REQUEST: (400, "INVALID_ARGUMENT", "Invalid JSON payload received."),
    # Google answers a bad key with 400, not 401.
    Scenario.UNAUTHORIZED: (
        400,
        "INVALID_ARGUMENT",
        "API key not valid. Please pass a valid API key.",
    ),
    Scenario.RATE_LIMITED: (
        429,
        "RESOURCE_EXHAUSTED",
        "Resource has been exhausted (e.g. check quota).",
    ),
    Scenario.SERVER_ERROR: (
        500,
        "INTERNAL",
        "An internal error has occurred. Please retry or report in"
        " https://developers.generativeai.google/guide/troubleshooting",
    ),
    Scenario.OVERLOADED: (503, "UNAVAILABLE", "The model is overloaded. Please try again later."),
}


def _error_object(kind: Scenario, message: str | None = None) -> dict[str, Any]:
    status, code_name, text = _ERRORS[kind]
    err: dict[str, Any] = {"code": status, "message": message or text, "status": code_name}
    if kind is Scenario.UNAUTHORIZED:
        err["details"] = [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "API_KEY_INVALID",
                "domain": "googleapis.com",
                "metadata": {"service": "generativelanguage.googleapis.com"},
            }
        ]
    if kind is Scenario.RATE_LIMITED:
        err["details"] = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"}]
    return {"error": err}


def error(kind: Scenario, seed: str, message: str | None = None) -> Reply:
    """The error Gemini answers for ``kind`` (always plain JSON, even for a stream)."""
    del seed  # Google's errors carry no request id
    status = _ERRORS[kind][0]
    headers = _headers(sse=False)
    if status == 429:
        headers = (*headers, ("retry-after", "1"))
    return Reply(status, headers, (pretty(_error_object(kind, message)),), False, frozenset({kind}))
