"""Everything Reel knows about OpenAI's API and OpenAI-compatible servers.

- Recognition: the ``openai`` host or any ``/v1/`` path not claimed by
  another provider; the family is chat completions, responses, legacy
  completions and embeddings under any prefix (compatible servers too).
- Drift: ``user``, ``metadata``, ``prompt_cache_key``, ``safety_identifier``.
- Usage, chat completions (and legacy completions, and compatible servers):
  ``usage.prompt_tokens`` / ``completion_tokens``, with
  ``prompt_tokens_details.cached_tokens`` (DeepSeek:
  ``prompt_cache_hit_tokens``) and ``completion_tokens_details.reasoning_tokens``;
  Groq puts a stream's usage under ``x_groq``.  A stream carries usage in
  its last chunk only when the request set ``stream_options.include_usage``.
- Usage, Responses API: ``usage.input_tokens`` / ``output_tokens`` with
  ``input_tokens_details.cached_tokens`` and
  ``output_tokens_details.reasoning_tokens``, in the body or in the
  ``response`` of the ``response.completed`` (or ``.incomplete`` /
  ``.failed``) event.
- Usage, embeddings: ``usage.prompt_tokens``; the output count is 0.
- Cache reads are counted inside the input; reasoning inside the output.
- Realtime (``/v1/realtime`` over WebSocket): each ``response.done``
  event's ``response.usage`` (``input_tokens``, ``output_tokens``,
  ``input_token_details.cached_tokens``), summed over the session; the
  client events' ``event_id`` is volatile; a replay's mismatch is told
  with an ``error`` event, the Realtime API's own shape.
- Answers: chat message / delta content, refusals and tool calls (also the
  Assistants API's message deltas); Responses output text, refusals and
  function calls, whole or as events.
"""

from __future__ import annotations

from typing import Any

from .._http import Headers
from . import anthropic, generic
from ._base import (
    Claim,
    Piece,
    Price,
    Provider,
    Tally,
    count,
    dumps,
    mapping,
    string,
    sub_count,
    text,
)

__all__ = [
    "ALIASES",
    "PRICES",
    "PROVIDER",
    "RESPONSES_DELTAS",
    "RESPONSES_WITH_BODY",
    "chat_pieces",
    "read_chat_usage",
    "read_realtime_usage",
    "read_responses_usage",
    "realtime_error",
    "responses_pieces",
]

#: Responses API stream events that carry the whole response object.
RESPONSES_WITH_BODY = frozenset(
    {
        "response.created",
        "response.in_progress",
        "response.queued",
        "response.completed",
        "response.incomplete",
        "response.failed",
    }
)
#: Responses API stream events that carry generated content in ``delta``.
RESPONSES_DELTAS = frozenset(
    {
        "response.output_text.delta",
        "response.refusal.delta",
        "response.function_call_arguments.delta",
        "response.custom_tool_call_input.delta",
        "response.reasoning_text.delta",
        "response.reasoning_summary_text.delta",
    }
)


def recognizes(path: str, host: str, headers: Headers) -> bool:
    return "openai" in host or path.startswith("/v1/")


def family(path: str) -> bool:
    return path.endswith(("/chat/completions", "/responses", "/completions", "/embeddings"))


# -- usage: the Responses API --------------------------------------------------


def read_responses_usage(tally: Tally, obj: dict[str, Any], kind: object) -> bool | None:
    """A Responses stream event, or a whole response object."""
    if isinstance(kind, str) and kind.startswith("response."):
        if kind in RESPONSES_WITH_BODY:
            body = obj.get("response")
            if isinstance(body, dict):
                _responses_body(tally, body)
            return False
        return kind in RESPONSES_DELTAS and text(obj.get("delta"))
    if obj.get("object") == "response":
        _responses_body(tally, obj)
        return False
    return None


def _responses_body(tally: Tally, body: dict[str, Any]) -> None:
    tally.set_model(body.get("model"))
    usage = body.get("usage")
    if isinstance(usage, dict):
        _responses_counts(tally, usage)


def _responses_counts(tally: Tally, usage: dict[str, Any]) -> None:
    tally.input = count(usage.get("input_tokens"))
    tally.output = count(usage.get("output_tokens"))
    tally.cached = sub_count(usage, "input_tokens_details", "cached_tokens")
    tally.reasoning = sub_count(usage, "output_tokens_details", "reasoning_tokens")
    tally.includes_cached = True


# -- usage: chat completions, completions, embeddings; compatible servers ------


def read_chat_usage(tally: Tally, obj: dict[str, Any], kind: object) -> bool:
    """Anything else: read as a chat completion (or chunk), a legacy
    completion, an embeddings list, or a compatible server's answer."""
    tally.set_model(obj.get("model"))
    usage = obj.get("usage")
    if not isinstance(usage, dict):
        extra = obj.get("x_groq")  # Groq puts stream usage here
        usage = extra.get("usage") if isinstance(extra, dict) else None
    if isinstance(usage, dict):
        _chat_counts(tally, usage, list_object=obj.get("object") == "list")
    else:
        generic.read_ollama_counts(tally, obj)
    choices = obj.get("choices")
    if isinstance(choices, list):
        return any(isinstance(choice, dict) and _choice_content(choice) for choice in choices)
    if obj.get("object") == "thread.message.delta":  # the Assistants API
        delta = obj.get("delta")
        content = delta.get("content") if isinstance(delta, dict) else None
        return isinstance(content, list) and any(
            isinstance(part, dict)
            and isinstance(part.get("text"), dict)
            and text(part["text"].get("value"))
            for part in content
        )
    message = obj.get("message")  # Ollama chat: an OpenAI-style message
    if isinstance(message, dict) and delta_content(message):
        return True
    return generic.ollama_generated(obj)


def _chat_counts(tally: Tally, usage: dict[str, Any], *, list_object: bool) -> None:
    if "prompt_tokens" in usage or "completion_tokens" in usage:
        prompt = count(usage.get("prompt_tokens"))
        completion = count(usage.get("completion_tokens"))
        if completion is None and prompt is not None and list_object:
            completion = 0  # an embeddings list: no output
        tally.input, tally.output = prompt, completion
        cached = sub_count(usage, "prompt_tokens_details", "cached_tokens")
        if cached is None:
            cached = count(usage.get("prompt_cache_hit_tokens"))  # DeepSeek
        tally.cached = cached
        tally.reasoning = sub_count(usage, "completion_tokens_details", "reasoning_tokens")
        tally.includes_cached = True
    elif "cache_read_input_tokens" in usage or "cache_creation_input_tokens" in usage:
        anthropic.read_counts(tally, usage)  # a compatible server, Anthropic's counts
    elif "input_tokens" in usage or "output_tokens" in usage:
        _responses_counts(tally, usage)


def delta_content(delta: dict[str, Any]) -> bool:
    """Whether a chat message or delta carries generated content."""
    if (
        text(delta.get("content"))
        or text(delta.get("reasoning_content"))
        or text(delta.get("reasoning"))
        or text(delta.get("refusal"))
    ):
        return True
    calls = delta.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and (
                text(function.get("name")) or text(function.get("arguments"))
            ):
                return True
    function = delta.get("function_call")
    return isinstance(function, dict) and (
        text(function.get("name")) or text(function.get("arguments"))
    )


def _choice_content(choice: dict[str, Any]) -> bool:
    delta = choice.get("delta")
    if isinstance(delta, dict):
        return delta_content(delta)
    return text(choice.get("text"))  # legacy completions stream


# -- answers -------------------------------------------------------------------


def responses_pieces(obj: dict[str, Any], kind: object) -> list[Piece] | None:
    """Responses stream events, then a whole response object."""
    if isinstance(kind, str) and kind.startswith("response."):
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            return [Piece(string(obj.get("delta")))]
        if kind == "response.output_item.added":
            item = mapping(obj.get("item"))
            if item.get("type") == "function_call":
                slot = f"r{obj.get('output_index', 0)}"
                return [Piece(tool=(slot, string(item.get("name")), ""))]
        if kind == "response.function_call_arguments.delta":
            slot = f"r{obj.get('output_index', 0)}"
            return [Piece(tool=(slot, None, string(obj.get("delta"))))]
        return []
    if obj.get("object") == "response" and isinstance(obj.get("output"), list):
        out: list[Piece] = []
        for i, item in enumerate(obj["output"]):
            if not isinstance(item, dict):
                continue
            if item.get("type") == "function_call":
                name, args = string(item.get("name")), string(item.get("arguments"))
                out.append(Piece(tool=(f"r{i}", name, args)))
            for part in item.get("content") or []:
                if isinstance(part, dict) and part.get("type") in ("output_text", "refusal"):
                    out.append(Piece(string(part.get("text")) or string(part.get("refusal"))))
        return out
    return None


def chat_pieces(obj: dict[str, Any], kind: object) -> list[Piece] | None:
    """The first choice of a chat completion (or chunk) or legacy completion."""
    if not isinstance(obj.get("choices"), list):
        return None
    out: list[Piece] = []
    for choice in obj["choices"][:1]:
        if not isinstance(choice, dict):
            continue
        message = choice.get("delta", choice.get("message"))
        if isinstance(message, dict):
            out.append(Piece(string(message.get("content")) or string(message.get("refusal"))))
            for k, call in enumerate(message.get("tool_calls") or []):
                if not isinstance(call, dict):
                    continue
                fn = mapping(call.get("function"))
                slot = f"o{call.get('index', k)}"
                out.append(
                    Piece(tool=(slot, string(fn.get("name")) or None, string(fn.get("arguments"))))
                )
        elif "text" in choice:
            out.append(Piece(string(choice.get("text"))))
    return out


# -- prices --------------------------------------------------------------------

#: USD per million tokens, by model (see :mod:`reel_core._prices`).
PRICES: dict[str, Price] = {
    # -- OpenAI ----------------------------------------------------------------
    # Source: OpenAI's pricing page (developers.openai.com/api/docs/pricing,
    # "Standard", text tokens: input / cached input / output) and per-model
    # pages (developers.openai.com/api/docs/models/gpt-5-nano, a stored copy
    # from late 2026), cross-checked with simonw/llm-prices data/openai.json
    # (snapshot listing gpt-5.5), morphllm.com's table "as of June 2026"
    # (gpt-5.4/5.5 family), github/docs data/tables/copilot/models-and-
    # pricing.yml (late 2026: gpt-5-mini, gpt-5.4 family, gpt-5.5) and
    # deploybase.ai's copy of the pricing page of 2026-03-21 (gpt-5, gpt-4.1,
    # gpt-4o, o3, o4-mini).  o3 is at its June 2025 price ($2 / $0.50 cached /
    # $8; llm-prices still has the old one).
    # GPT-5.4 and GPT-5.5 cost more past 272k prompt tokens: base tier here.
    "gpt-5.5": Price(5.00, 30.00, 0.50),
    "gpt-5.4": Price(2.50, 15.00, 0.25),
    "gpt-5.4-mini": Price(0.75, 4.50, 0.075),
    "gpt-5.4-nano": Price(0.20, 1.25, 0.02),
    "gpt-5.2": Price(1.75, 14.00, 0.175),
    "gpt-5.1": Price(1.25, 10.00, 0.125),
    "gpt-5": Price(1.25, 10.00, 0.125),
    "gpt-5-mini": Price(0.25, 2.00, 0.025),
    "gpt-5-nano": Price(0.05, 0.40, 0.005),
    "gpt-5-pro": Price(15.00, 120.00),
    "gpt-4.1": Price(2.00, 8.00, 0.50),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.025),
    "gpt-4o": Price(2.50, 10.00, 1.25),
    # The first gpt-4o snapshot kept its launch price.
    "gpt-4o-2024-05-13": Price(5.00, 15.00),
    "gpt-4o-mini": Price(0.15, 0.60, 0.075),
    "o3": Price(2.00, 8.00, 0.50),
    "o3-pro": Price(20.00, 80.00),
    "o3-mini": Price(1.10, 4.40, 0.55),
    "o4-mini": Price(1.10, 4.40, 0.275),
    "o1": Price(15.00, 60.00, 7.50),
    "o1-mini": Price(1.10, 4.40, 0.55),
    "o1-pro": Price(150.00, 600.00),
    "gpt-4-turbo": Price(10.00, 30.00),
    "gpt-4": Price(30.00, 60.00),
    "gpt-3.5-turbo": Price(0.50, 1.50),
    "text-embedding-3-small": Price(0.02, 0.0),
    "text-embedding-3-large": Price(0.13, 0.0),
    "text-embedding-ada-002": Price(0.10, 0.0),
    # -- OpenAI Realtime (WebSocket sessions) ------------------------------------
    # Source: OpenAI's model pages (developers.openai.com/api/docs/models/
    # gpt-realtime-1.5, gpt-realtime-2, gpt-realtime-2.1-mini,
    # gpt-4o-realtime-preview, gpt-4o-mini-realtime-preview: "Text tokens" and
    # "Audio tokens", input / cached input / output per 1M), stored copies of
    # 2026 (read 2026-11-22; gpt-realtime-2 and 2.1-mini name their "Quick
    # comparison" with gpt-realtime-1.5 and gpt-realtime-mini, at the same
    # rates).  gpt-realtime is at gpt-realtime-1.5's rates (its price since it
    # shipped in August 2025).  gpt-4o-realtime-preview-2024-10-01 billed audio
    # at $100/$200: its dated name resolves here, under-estimated.  Image
    # input tokens are not modelled.  Price(text in, text out, text cached,
    # None, audio in, audio cached, audio out).
    "gpt-realtime": Price(4.00, 16.00, 0.40, None, 32.00, 0.40, 64.00),
    "gpt-realtime-1.5": Price(4.00, 16.00, 0.40, None, 32.00, 0.40, 64.00),
    "gpt-realtime-2": Price(4.00, 24.00, 0.40, None, 32.00, 0.40, 64.00),
    "gpt-realtime-mini": Price(0.60, 2.40, 0.06, None, 10.00, 0.30, 20.00),
    "gpt-realtime-2.1-mini": Price(0.60, 2.40, 0.06, None, 10.00, 0.30, 20.00),
    "gpt-4o-realtime-preview": Price(5.00, 20.00, 2.50, None, 40.00, 2.50, 80.00),
    "gpt-4o-mini-realtime-preview": Price(0.60, 2.40, 0.30, None, 10.00, 0.30, 20.00),
}

#: Model names that are not a price key plus a snapshot suffix.
ALIASES: dict[str, str] = {
    "gpt-5-chat-latest": "gpt-5",
    "gpt-5-codex": "gpt-5",
    "gpt-5.1-codex": "gpt-5.1",
    "gpt-5.1-codex-mini": "gpt-5-mini",  # same prices
    "o1-preview": "o1",
    "gpt-4-1106-preview": "gpt-4-turbo",
    "gpt-4-0125-preview": "gpt-4-turbo",
    "gpt-4-vision-preview": "gpt-4-turbo",
}

# -- realtime: the WebSocket API --------------------------------------------------


#: Realtime events that carry generated content in ``delta``.
REALTIME_DELTAS = frozenset(
    {
        "response.text.delta",
        "response.output_text.delta",
        "response.audio.delta",
        "response.output_audio.delta",
        "response.audio_transcript.delta",
        "response.output_audio_transcript.delta",
        "response.function_call_arguments.delta",
    }
)


def read_realtime_usage(tally: Tally, obj: dict[str, Any], kind: object) -> bool | None:
    """A Realtime server event: ``response.done`` adds its response's usage
    to the session's; a delta is generated content."""
    if kind == "response.done":
        response = mapping(obj.get("response"))
        usage = mapping(response.get("usage"))
        _add(tally, "input", count(usage.get("input_tokens")))
        _add(tally, "output", count(usage.get("output_tokens")))
        _add(tally, "cached", sub_count(usage, "input_token_details", "cached_tokens"))
        details = mapping(usage.get("input_token_details"))
        _add(tally, "audio_in", count(details.get("audio_tokens")))
        _add(tally, "audio_cached", sub_count(details, "cached_tokens_details", "audio_tokens"))
        _add(tally, "audio_out", sub_count(usage, "output_token_details", "audio_tokens"))
        return False
    if kind in REALTIME_DELTAS:
        return text(obj.get("delta"))
    if kind in ("session.created", "session.updated"):
        tally.set_model(mapping(obj.get("session")).get("model"))
        return False
    return None


def _add(tally: Tally, name: str, value: int | None) -> None:
    if value is not None:
        setattr(tally, name, (getattr(tally, name) or 0) + value)


def realtime_error(code: str, message: str) -> bytes:
    """The Realtime API's own error event (``{"type": "error", ...}``)."""
    error = {"type": "invalid_request_error", "code": code, "message": message, "param": None}
    return dumps({"type": "error", "event_id": f"event_{code}", "error": error}).encode()


PROVIDER = Provider(
    name="openai",
    title="OpenAI",
    # after the providers whose paths also start with /v1/
    rank=300,
    host="https://api.openai.com",
    recognizes=recognizes,
    family=family,
    family_claim=Claim.SHAPED,
    # End-user id, free-form metadata, prompt cache routing key, hashed
    # end-user id for abuse monitoring.
    drift_fields=("user", "metadata", "prompt_cache_key", "safety_identifier"),
    stream_event_kinds=RESPONSES_WITH_BODY
    | RESPONSES_DELTAS
    | {"response.output_item.added", "error"},
    stream_usage_opt_in=True,
    # the Responses API by its event and object types; chat completions (and
    # compatible servers) read whatever no other reader claims
    usage_readers=((Claim.MARKED, read_responses_usage), (Claim.ANY, read_chat_usage)),
    prices=PRICES,
    aliases=ALIASES,
    answer_readers=((Claim.MARKED, responses_pieces), (Claim.SHAPED, chat_pieces)),
    system_keys=("instructions",),
    prompt_keys=("messages", "input", "prompt"),
    key_variables=("OPENAI_API_KEY",),
    base_url_variable="OPENAI_BASE_URL",
    base_url_suffix="/v1",
    realtime_volatile=("event_id",),
    realtime_error=realtime_error,
    realtime_usage=read_realtime_usage,
)
