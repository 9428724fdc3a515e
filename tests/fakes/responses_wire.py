"""OpenAI Responses API payloads: ``POST /v1/responses`` plain and streamed (sans-IO).

A plain answer is the response object, 2-space indented with a trailing
newline.  A stream is typed ``event: response.*`` / ``data: {compact}`` pairs,
each ``data`` starting with its ``type`` and carrying a ``sequence_number``:
created, in_progress, output_item.added, content_part.added,
output_text.delta…, output_text.done, content_part.done, output_item.done,
completed (a function call streams ``function_call_arguments.delta`` instead of
the text events).  There is no ``[DONE]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .openai_wire import (
    ERROR_AFTER,
    JSON_TYPE,
    SSE_TYPE,
    arguments_json,
    call_id,
    error_object,
    function_tools,
    headers,
)
from .wire import (
    FAKE_CREATED,
    Ask,
    Reply,
    Scenario,
    compact,
    fragments,
    obfuscation,
    pretty,
    scrub,
    sse_frame,
    text_of,
    text_pieces,
)

__all__ = ["parse_responses", "responses"]


def parse_responses(body: Mapping[str, Any], seed: str, secrets: tuple[str, ...]) -> Ask:
    prompt, result = "", None
    items = body.get("input")
    if isinstance(items, str):
        prompt = items
    elif isinstance(items, list):
        for item in items:
            if not isinstance(item, Mapping):
                continue
            if item.get("role") == "user":
                prompt = text_of(item.get("content"))
        last = items[-1] if items else None
        if isinstance(last, Mapping) and last.get("type") == "function_call_output":
            result = scrub(text_of(last.get("output")), secrets)
    return Ask(
        model=str(body.get("model", "")),
        prompt=scrub(prompt, secrets),
        tool_result=result,
        tools=function_tools(body),
        stream=body.get("stream") is True,
        seed=seed,
        body=body,
    )


def _response_usage(ask: Ask) -> dict[str, Any]:
    return {
        "input_tokens": ask.input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": ask.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": ask.input_tokens + ask.output_tokens,
    }


def _output_item(ask: Ask, *, done: bool) -> dict[str, Any]:
    status = "completed" if done else "in_progress"
    tool = ask.tool
    if tool is not None:
        return {
            "id": "fc_" + ask.hexid("fc", 48),
            "type": "function_call",
            "status": status,
            "arguments": arguments_json(ask) if done else "",
            "call_id": call_id(ask),
            "name": tool.name,
        }
    content = [_text_part(ask.text)] if done else []
    return {
        "id": "msg_" + ask.hexid("msg", 48),
        "type": "message",
        "status": status,
        "content": content,
        "role": "assistant",
    }


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}


def _response(ask: Ask, *, done: bool) -> dict[str, Any]:
    instructions = ask.body.get("instructions")
    return {
        "id": "resp_" + ask.hexid("resp", 48),
        "object": "response",
        "created_at": FAKE_CREATED,
        "status": "completed" if done else "in_progress",
        "background": False,
        "completed_at": FAKE_CREATED + 1 if done else None,
        "error": None,
        "incomplete_details": None,
        "instructions": instructions if isinstance(instructions, str) else None,
        "max_output_tokens": ask.body.get("max_output_tokens"),
        "model": ask.model,
        "output": [_output_item(ask, done=True)] if done else [],
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "service_tier": "default",
        "store": ask.body.get("store", True) is not False,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": "auto",
        "tools": list(ask.body.get("tools") or []),
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": _response_usage(ask) if done else None,
        "user": None,
        "metadata": {},
    }


def responses(ask: Ask, scenarios: frozenset[Scenario]) -> Reply:
    """``POST /v1/responses``."""
    if not ask.stream:
        body = pretty(_response(ask, done=True))
        return Reply(200, headers(ask.seed, JSON_TYPE), (body,), False, scenarios)
    frames: list[bytes] = []

    def event(kind: str, **fields: Any) -> None:
        fields["sequence_number"] = len(frames)
        data = {"type": kind, **dict(sorted(fields.items()))}
        frames.append(sse_frame(compact(data), event=kind))

    event("response.created", response=_response(ask, done=False))
    event("response.in_progress", response=_response(ask, done=False))
    item = _output_item(ask, done=False)
    event("response.output_item.added", item=item, output_index=0)
    where = {"item_id": item["id"], "output_index": 0}
    if ask.tool is not None:
        for piece in fragments(arguments_json(ask)):
            obf = obfuscation(ask.seed, len(frames))
            event("response.function_call_arguments.delta", delta=piece, obfuscation=obf, **where)
        event("response.function_call_arguments.done", arguments=arguments_json(ask), **where)
    else:
        text = ask.text
        event("response.content_part.added", content_index=0, part=_text_part(""), **where)
        for piece in text_pieces(text):
            obf = obfuscation(ask.seed, len(frames))
            event(
                "response.output_text.delta",
                content_index=0,
                delta=piece,
                logprobs=[],
                obfuscation=obf,
                **where,
            )
        if Scenario.STREAM_ERROR in scenarios:
            del frames[ERROR_AFTER + 3 :]
            err = error_object(Scenario.SERVER_ERROR)["error"]
            event("error", code=err["type"], message=err["message"], param=None)
            return Reply(200, headers(ask.seed, SSE_TYPE), tuple(frames), True, scenarios)
        event("response.output_text.done", content_index=0, logprobs=[], text=text, **where)
        event("response.content_part.done", content_index=0, part=_text_part(text), **where)
    event("response.output_item.done", item=_output_item(ask, done=True), output_index=0)
    event("response.completed", response=_response(ask, done=True))
    return Reply(200, headers(ask.seed, SSE_TYPE), tuple(frames), True, scenarios)
