"""Reyn LLMReplay fixtures: JSONL, one ``litellm.acompletion`` call a line.

Each line: ``key`` (SHA-256 of the model and the messages), ``model`` (as
passed to litellm), ``prompt_preview`` (the first 200 characters of the last
user message) and ``response`` (litellm's ``ModelResponse.model_dump()``:
an OpenAI-shaped ``chat.completion``).  No HTTP request is stored, and not
the messages: the request is rebuilt as the OpenAI-compatible call whose
answer the line holds, ``POST /v1/chat/completions`` with ``{"model",
"messages": [{"role": "user", "content": prompt_preview}]}``, on
``api.openai.com`` for the models litellm sends there and without a host
otherwise.  Each exchange's notes say so: it replays when the messages are
left out of matching (``ignore_fields=["messages"]``), calls to one model
then answered in recorded order.  The calls were not streamed: status 200,
the response re-serialized as JSON; its ``created`` is the recording time.
"""

from __future__ import annotations

import json
from typing import Any

from .._errors import CassetteError
from .._nesting import load_json
from ._base import Exchange, Skipped
from ._fields import Skip, text_bytes

__all__ = ["DESCRIPTION", "NAME", "parse", "sniff"]

NAME = "reyn"
DESCRIPTION = "Reyn LLMReplay JSONL fixtures (litellm chat completions)"

PATH = "/v1/chat/completions"
#: Model names litellm sends to OpenAI itself (no provider prefix needed).
_OPENAI_MODELS = ("gpt-", "o1", "o3", "o4", "chatgpt-", "openai/")
_PREVIEW = 200
_FIELDS = ("model", "prompt_preview", "response")


def sniff(data: bytes) -> bool:
    """A JSONL file whose first line is a Reyn fixture."""
    line = data.lstrip().split(b"\n", 1)[0]
    if not line.startswith(b"{") or b'"prompt_preview"' not in line:
        return False
    try:
        first = load_json(line)
    except ValueError:
        return False
    return isinstance(first, dict) and all(k in first for k in _FIELDS)


def parse(data: bytes, name: str) -> list[Exchange | Skipped]:
    entries: list[tuple[int, Any]] = []
    errors: list[tuple[int, str]] = []
    for number, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            entries.append((number, load_json(raw)))
        except ValueError as exc:
            entries.append((number, None))
            errors.append((number, f"not JSON: {exc}"))
    _check(entries, errors, name)
    out: list[Exchange | Skipped] = []
    bad = dict(errors)
    for i, (number, value) in enumerate(entries):
        try:
            if number in bad:
                raise Skip(bad[number])
            out.append(_exchange(i, value))
        except Skip as exc:
            out.append(Skipped(i, f"line {number}: {exc}"))
    return out


def _check(entries: list[tuple[int, Any]], errors: list[tuple[int, str]], name: str) -> None:
    """:class:`CassetteError` unless some line is a Reyn fixture."""
    if any(isinstance(v, dict) and all(k in v for k in _FIELDS) for _, v in entries):
        return
    if not entries:
        return  # an empty fixture file: nothing was recorded
    first = entries[0][1]
    if isinstance(first, dict) and "_meta" in first:
        why = "it is a Reel cassette already (its first line is _meta): nothing to import"
    elif errors and len(errors) == len(entries):
        why = f"not JSONL: line {errors[0][0]}: {errors[0][1]}"
    else:
        why = "no line holds a Reyn fixture (an object with model, prompt_preview and response)"
    raise CassetteError(name, None, f"not a Reyn fixture file: {why}")


def _exchange(i: int, value: Any) -> Exchange:
    if not isinstance(value, dict):
        raise Skip(f"a JSON {type(value).__name__}, not a Reyn fixture object")
    missing = [k for k in _FIELDS if k not in value]
    if missing:
        raise Skip(f"not a Reyn fixture: no {' and no '.join(missing)}")
    model, preview, response = value["model"], value["prompt_preview"], value["response"]
    if not isinstance(model, str) or not model:
        raise Skip(f"the model {model!r} is not a model name")
    if not isinstance(preview, str):
        raise Skip(f"the prompt_preview is a {type(preview).__name__}, not text")
    if not isinstance(response, dict):
        raise Skip(f"the response is a {type(response).__name__}, not a chat completion object")
    sent = model.removeprefix("openai/")
    request = {"model": sent, "messages": [{"role": "user", "content": preview}]}
    cut = " (cut there)" if len(preview) >= _PREVIEW else ""
    notes = [
        "Reyn stores no HTTP request: rebuilt as POST /v1/chat/completions with the model and "
        "one user message, the stored prompt_preview (the first 200 characters of the last user "
        f"message{cut}); the real messages are not stored: replay with the messages ignored "
        '(ignore_fields=["messages"]) or record again',
        "the response was stored as parsed JSON (litellm's model_dump): re-serialized, "
        "status 200 assumed",
    ]
    if model.startswith(_OPENAI_MODELS):
        target = "https://api.openai.com" + PATH
    else:
        target = PATH
        notes.append(
            f"litellm called {model}'s own provider API, which Reyn did not keep: stored as the "
            "OpenAI-compatible call (no host) whose answer the fixture holds"
        )
    created = response.get("created")
    stamp = None
    if isinstance(created, (int, float)) and not isinstance(created, bool) and created > 0:
        stamp = float(created)
    return Exchange(
        source=i,
        method="POST",
        target=target,
        request_headers=(("content-type", "application/json"),),
        request_body=_compact(request),
        status=200,
        response_headers=(("content-type", "application/json"),),
        body=_compact(response),
        timestamp=stamp,
        notes=tuple(notes),
    )


def _compact(value: Any) -> bytes:
    return text_bytes(json.dumps(value, separators=(",", ":"), ensure_ascii=False))
