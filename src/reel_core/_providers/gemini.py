"""Everything Reel knows about Google's Gemini API (AI Studio and Vertex AI).

- Recognition: the ``generativelanguage`` or ``aiplatform`` host, a
  ``/v1beta/`` path, an ``x-goog-api-key`` header, or a
  ``/models/{model}:method`` path; the family is ``generateContent`` /
  ``streamGenerateContent`` calls.
- Drift: ``labels`` (Vertex AI billing labels).
- Model: the ``models/{model}:method`` path segment asks for it;
  ``modelVersion`` in the response names the one that answered.
- Usage: ``usageMetadata`` (``promptTokenCount``, ``candidatesTokenCount``,
  ``thoughtsTokenCount``, ``cachedContentTokenCount``,
  ``toolUsePromptTokenCount``); in a stream the last one wins, whether the
  stream is SSE (``alt=sse``) or the JSON array kept as timed chunks.
  Thoughts are reported apart from the candidates, so the output count is
  their sum; tool-use prompt tokens are billed as input and added to it;
  cache reads are inside the input count.  Zero counts are left out of the
  JSON (proto3).
- Live (``BidiGenerateContent`` over WebSocket, recognised by that path):
  each server message's ``usageMetadata`` (``promptTokenCount``,
  ``responseTokenCount``, ``thoughtsTokenCount``), summed over the
  session's turns; ``serverContent.modelTurn`` parts are generated content.
  The Live API has no error event: a replay's mismatch is told by the close.
- Answers: the first candidate's text parts and ``functionCall`` parts.
"""

from __future__ import annotations

import re
from typing import Any

from .._http import Headers, header_value
from ._base import Claim, Piece, Price, Provider, Tally, count, dumps, string, text

__all__ = [
    "ALIASES",
    "PRICES",
    "PROVIDER",
    "answer_pieces",
    "method_model",
    "path_model",
    "read_live_usage",
    "read_usage",
]


def recognizes(path: str, host: str, headers: Headers) -> bool:
    return (
        "generativelanguage" in host
        or "aiplatform" in host
        or path.startswith("/v1beta/")
        or header_value(headers, b"x-goog-api-key") is not None
        or ("/models/" in path and ":" in path.rpartition("/")[2])
        or "BidiGenerateContent" in path
    )


def family(path: str) -> bool:
    return ":generateContent" in path or ":streamGenerateContent" in path


def path_model(path: str) -> str | None:
    """The model of a ``.../models/{model}:method`` path."""
    if "/models/" in path:
        return path.rpartition("/models/")[2].partition(":")[0] or None
    return None


_MODEL_PATH = re.compile(r"/models/([^/:]+)")


def method_model(provider: str, path: str) -> str | None:
    """The model of a recorded ``.../models/{model}:method`` call, the
    fallback when a response names none: the first ``models/`` segment,
    when the interaction is Gemini's or the path ends in a ``:method``."""
    match = _MODEL_PATH.search(path)
    if match and (provider == "gemini" or ":" in path.rpartition("/")[2]):
        return match.group(1)
    return None


def _is_gemini(obj: dict[str, Any]) -> bool:
    return "candidates" in obj or "usageMetadata" in obj or "modelVersion" in obj


def read_usage(tally: Tally, obj: dict[str, Any], kind: object) -> bool | None:
    """A ``GenerateContentResponse`` (whole, or one element of a stream)."""
    if not _is_gemini(obj):
        return None
    tally.set_model(obj.get("modelVersion"))
    meta = obj.get("usageMetadata")
    if isinstance(meta, dict):
        prompt = count(meta.get("promptTokenCount"))
        candidates = count(meta.get("candidatesTokenCount"))
        thoughts = count(meta.get("thoughtsTokenCount"))
        if prompt is not None or candidates is not None or thoughts is not None:
            # Zero counts are left out of Gemini's JSON (proto3).
            tool_prompt = count(meta.get("toolUsePromptTokenCount")) or 0
            tally.input = None if prompt is None else prompt + tool_prompt
            tally.output = (candidates or 0) + (thoughts or 0)
            tally.cached = count(meta.get("cachedContentTokenCount"))
            tally.reasoning = thoughts
            tally.includes_cached = True
    candidates_list = obj.get("candidates")
    if isinstance(candidates_list, list):
        for candidate in candidates_list:
            content = candidate.get("content") if isinstance(candidate, dict) else None
            parts = content.get("parts") if isinstance(content, dict) else None
            if isinstance(parts, list):
                for part in parts:
                    if isinstance(part, dict) and (
                        text(part.get("text")) or isinstance(part.get("functionCall"), dict)
                    ):
                        return True
    return False


def read_live_usage(tally: Tally, obj: dict[str, Any], kind: object) -> bool | None:
    """A Live API server message: its ``usageMetadata`` added to the
    session's; model turn parts with text or inline data are content."""
    meta = obj.get("usageMetadata")
    content = obj.get("serverContent")
    if not isinstance(meta, dict) and not isinstance(content, dict):
        return None
    if isinstance(meta, dict):
        prompt = count(meta.get("promptTokenCount"))
        response = count(meta.get("responseTokenCount"))
        thoughts = count(meta.get("thoughtsTokenCount"))
        if prompt is not None:
            tally.input = (tally.input or 0) + prompt
        if response is not None or thoughts is not None:
            tally.output = (tally.output or 0) + (response or 0) + (thoughts or 0)
        if thoughts is not None:
            tally.reasoning = (tally.reasoning or 0) + thoughts
        cached = count(meta.get("cachedContentTokenCount"))
        if cached is not None:
            tally.cached = (tally.cached or 0) + cached
        for name, slot in (
            ("promptTokensDetails", "audio_in"),
            ("responseTokensDetails", "audio_out"),
            ("cacheTokensDetails", "audio_cached"),
        ):
            audio = _audio_tokens(meta.get(name))
            if audio is not None:
                setattr(tally, slot, (getattr(tally, slot) or 0) + audio)
    turn = content.get("modelTurn") if isinstance(content, dict) else None
    parts = turn.get("parts") if isinstance(turn, dict) else None
    return isinstance(parts, list) and any(
        isinstance(p, dict) and (text(p.get("text")) or isinstance(p.get("inlineData"), dict))
        for p in parts
    )


def _audio_tokens(details: Any) -> int | None:
    """The audio and video tokens of a Live ``*TokensDetails`` list (both
    priced at the Live models' audio rate); ``None`` when it is no list."""
    if not isinstance(details, list):
        return None
    return sum(
        count(d.get("tokenCount")) or 0
        for d in details
        if isinstance(d, dict) and d.get("modality") in ("AUDIO", "VIDEO")
    )


def answer_pieces(obj: dict[str, Any], kind: object) -> list[Piece] | None:
    """The first candidate's parts; a usage-only element says nothing."""
    if isinstance(obj.get("candidates"), list):
        out: list[Piece] = []
        for candidate in obj["candidates"][:1]:
            content = candidate.get("content") if isinstance(candidate, dict) else None
            parts = content.get("parts") if isinstance(content, dict) else None
            for part in parts if isinstance(parts, list) else []:
                if not isinstance(part, dict):
                    continue
                call = part.get("functionCall")
                if isinstance(call, dict):
                    out.append(Piece(tool=("", string(call.get("name")), dumps(call.get("args")))))
                else:
                    out.append(Piece(string(part.get("text"))))
        return out
    if "usageMetadata" in obj or "modelVersion" in obj:
        return []
    return None


# -- prices --------------------------------------------------------------------

#: USD per million tokens, by model (see :mod:`reel_core._prices`).
PRICES: dict[str, Price] = {
    # -- Gemini (Gemini Developer API, paid tier) ------------------------------
    # Source: Google's pricing page (ai.google.dev/gemini-api/docs/pricing:
    # text/image/video input, output "including thinking tokens", context
    # caching) as quoted from it on 2026-07-04 (factquire.com,
    # gemini-3-flash-preview) and in morphllm.com's 2026 table, with cached
    # rates from simonw/llm-prices data/google.json and github/docs
    # data/tables/copilot/models-and-pricing.yml (late 2026: gemini-3.1-pro,
    # gemini-3.5-flash).  Not in those sources, so less sure: the cached
    # rates of gemini-3-pro-preview ($0.20, as 3.1 Pro) and gemini-2.0-flash
    # ($0.025, Google's 2025 page).  Gemini 2.5 Pro and 3.x Pro cost more
    # past 200k prompt tokens ($2.50/$15 and $4/$18): base tier here.  Cache
    # storage (per token-hour) is not a per-request cost and is left out.
    "gemini-3.5-flash": Price(1.50, 9.00, 0.15),
    "gemini-3.1-pro-preview": Price(2.00, 12.00, 0.20),
    "gemini-3-pro-preview": Price(2.00, 12.00, 0.20),
    "gemini-3-flash-preview": Price(0.50, 3.00, 0.05),
    "gemini-2.5-pro": Price(1.25, 10.00, 0.125),
    "gemini-2.5-flash": Price(0.30, 2.50, 0.03),
    "gemini-2.5-flash-lite": Price(0.10, 0.40, 0.01),
    "gemini-2.0-flash": Price(0.10, 0.40, 0.025),
    "gemini-2.0-flash-lite": Price(0.075, 0.30),
    # -- Gemini Live (WebSocket sessions) ----------------------------------------
    # Source: Google's pricing page (ai.google.dev/gemini-api/docs/pricing,
    # paid tier) as quoted on 2026-05-16 (anttisahla.com, "Gemini 2.5 Flash
    # Live Preview": input $0.50 text, $3.00 audio or video; output $2.00
    # text, $12.00 audio) and, for gemini-2.0-flash-live-001, by Google's
    # forum staff (discuss.ai.google.dev, "Pricing and usages for S2S
    # models": $0.35 text and $2.10 audio/image/video input, $1.50 text and
    # $8.50 audio output).  No cache rate is published for them.
    "gemini-2.5-flash-native-audio": Price(0.50, 2.00, None, None, 3.00, None, 12.00),
    "gemini-live-2.5-flash": Price(0.50, 2.00, None, None, 3.00, None, 12.00),
    "gemini-2.0-flash-live": Price(0.35, 1.50, None, None, 2.10, None, 8.50),
}

#: Model names that are not a price key plus a snapshot suffix.
ALIASES: dict[str, str] = {
    "gemini-3-pro": "gemini-3-pro-preview",
    "gemini-3-flash": "gemini-3-flash-preview",
    "gemini-3.1-pro": "gemini-3.1-pro-preview",
    "gemini-live-2.5-flash-preview-native-audio": "gemini-live-2.5-flash",
    "gemini-2.5-flash-preview-native-audio-dialog": "gemini-2.5-flash-native-audio",
}

PROVIDER = Provider(
    name="gemini",
    title="Gemini",
    rank=200,
    host="https://generativelanguage.googleapis.com",
    recognizes=recognizes,
    family=family,
    # a Gemini method path is Gemini's even when it ends like another family's
    family_claim=Claim.MARKED,
    drift_fields=("labels",),
    # Gemini streams are unnamed elements (SSE data-only, or a JSON array).
    stream_event_kinds=frozenset(),
    stream_usage_opt_in=False,
    usage_readers=((Claim.SHAPED, read_usage),),
    prices=PRICES,
    aliases=ALIASES,
    answer_readers=((Claim.SHAPED, answer_pieces),),
    system_keys=("system_instruction", "systemInstruction"),
    prompt_keys=("contents",),
    # google-genai reads either; a replay sets the first when neither is set
    key_variables=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    base_url_variable="GOOGLE_GEMINI_BASE_URL",
    realtime_usage=read_live_usage,
)
