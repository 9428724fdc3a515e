"""Routing of the fake upstream: a received request in, a :class:`Reply` out (sans-IO).

Routes (POST only, but for the ``GET /web/...`` API below; anything else is a
404 in OpenAI's "Invalid URL" shape):

================================================  =========================
path                                              answer
================================================  =========================
``…/chat/completions``                            OpenAI chat (any prefix)
``…/responses``                                   OpenAI Responses
``…/embeddings``                                  OpenAI embeddings
``/v1/messages``                                  Anthropic messages
``/{v1,v1beta,v1alpha}/models/M:generateContent``        Gemini
``/{v1,v1beta,v1alpha}/models/M:streamGenerateContent``  Gemini stream
``…/files``                                       OpenAI file upload (multipart)
``…/audio/transcriptions``                        OpenAI transcription (multipart)
``…/oauth/token``                                 a token endpoint (form-urlencoded)
================================================  =========================

``GET /web/...`` is a plain HTTP API: redirects, ``link`` pagination, a
conditional request (see :mod:`tests.fakes.web_wire`).

A gzip or deflate ``content-encoding`` on the request is undone first (see
:mod:`tests.fakes.uploads_wire`).

Scenarios come from the ``x-fake-scenario`` header and from a model named
``fake-<scenario>[+<scenario>…]``; an unknown scenario name is a 400 that says
so.  A status scenario (400, 401, 429, 500, overloaded) replaces the answer
with the provider's error; ``gzip`` compresses whatever is answered; the
connection faults are carried on the reply for the server to play.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import json
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

from . import anthropic_wire, gemini_wire, openai_wire, responses_wire, uploads_wire, web_wire
from .wire import (
    SCENARIO_HEADER,
    ReceivedRequest,
    Reply,
    Scenario,
    UnknownScenarioError,
    compact,
    credentials_of,
    digest,
    parse_scenarios,
    pretty,
    query_credentials_of,
    scrub,
    secrets_of,
    sse_frame,
)

__all__ = ["STATUS_SCENARIOS", "Endpoint", "Provider", "match", "respond", "scenarios_of"]

#: Scenarios that replace the answer with an error status, in order of precedence.
STATUS_SCENARIOS = (
    Scenario.BAD_REQUEST,
    Scenario.UNAUTHORIZED,
    Scenario.RATE_LIMITED,
    Scenario.SERVER_ERROR,
    Scenario.OVERLOADED,
)


class Provider(enum.Enum):
    """Whose wire format a route speaks."""

    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    GEMINI = "gemini"


class Endpoint(enum.Enum):
    """The endpoints the fake answers."""

    OPENAI_CHAT = "openai-chat"
    OPENAI_RESPONSES = "openai-responses"
    OPENAI_EMBEDDINGS = "openai-embeddings"
    ANTHROPIC_MESSAGES = "anthropic-messages"
    GEMINI_GENERATE = "gemini-generate"
    GEMINI_STREAM = "gemini-stream"
    OPENAI_FILES = "openai-files"
    OPENAI_TRANSCRIPTIONS = "openai-transcriptions"
    OPENAI_FORM_TOKEN = "openai-form-token"

    @property
    def provider(self) -> Provider:
        return Provider(self.value.split("-")[0])


_GEMINI = re.compile(
    r"^/(?:v1|v1beta|v1alpha)/models/(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent)$"
)
_SUFFIXES = (
    ("/v1/messages", Endpoint.ANTHROPIC_MESSAGES),
    ("/chat/completions", Endpoint.OPENAI_CHAT),
    ("/responses", Endpoint.OPENAI_RESPONSES),
    ("/embeddings", Endpoint.OPENAI_EMBEDDINGS),
    ("/files", Endpoint.OPENAI_FILES),
    ("/audio/transcriptions", Endpoint.OPENAI_TRANSCRIPTIONS),
    ("/oauth/token", Endpoint.OPENAI_FORM_TOKEN),
)
#: Endpoints whose requests are not JSON.
_UPLOADS = (Endpoint.OPENAI_FILES, Endpoint.OPENAI_TRANSCRIPTIONS, Endpoint.OPENAI_FORM_TOKEN)

_ErrorFn = Callable[[Scenario, str, str | None], Reply]
_ERROR: dict[Provider, _ErrorFn] = {
    Provider.OPENAI: openai_wire.error,
    Provider.ANTHROPIC: anthropic_wire.error,
    Provider.GEMINI: gemini_wire.error,
}


def match(request: ReceivedRequest) -> tuple[Endpoint, str] | None:
    """The endpoint a request goes to, and the model named in its path (Gemini), or None."""
    if request.method != "POST":
        return None
    path = request.path
    found = _GEMINI.match(path)
    if found:
        stream = found["method"] == "streamGenerateContent"
        return (Endpoint.GEMINI_STREAM if stream else Endpoint.GEMINI_GENERATE), found["model"]
    for suffix, endpoint in _SUFFIXES:
        if path.endswith(suffix):
            return endpoint, ""
    return None


def scenarios_of(request: ReceivedRequest, model: str = "") -> frozenset[Scenario]:
    """The scenarios a request asks for (header and ``fake-…`` model); may raise."""
    found: frozenset[Scenario] = frozenset()
    for name, value in request.headers:
        if name == SCENARIO_HEADER:
            found |= parse_scenarios(value)
    if model.startswith("fake-"):
        found |= parse_scenarios(model[len("fake-") :])
    return found


def _not_found(request: ReceivedRequest, scenarios: frozenset[Scenario]) -> Reply:
    path = scrub(request.path, secrets_of(request))
    body = {
        "error": {
            "message": f"Invalid URL ({request.method} {path})",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }
    headers = (("content-type", "application/json"),)
    return Reply(404, headers, (pretty(body),), False, scenarios)


def respond(request: ReceivedRequest) -> Reply:
    """The fake's whole answer to ``request``: status, headers, frames and faults."""
    if request.method == "GET" and request.path.startswith("/web/"):
        return web_wire.respond(request)
    request = uploads_wire.decoded(request)
    seed = digest(dataclasses.replace(request, body=uploads_wire.stable_body(request)))
    secrets = secrets_of(request)
    routed = match(request)

    def finish(reply: Reply, scenarios: frozenset[Scenario]) -> Reply:
        return _seal(reply, scenarios, secrets)

    try:
        header_scenarios = scenarios_of(request)
    except UnknownScenarioError as exc:
        if routed is None:
            return finish(_not_found(request, frozenset()), frozenset())
        return finish(_ERROR[routed[0].provider](Scenario.BAD_REQUEST, seed, str(exc)), frozenset())
    if routed is None:
        return finish(_not_found(request, header_scenarios), header_scenarios)
    endpoint, path_model = routed
    fail = _ERROR[endpoint.provider]
    if endpoint in _UPLOADS:
        for kind in STATUS_SCENARIOS:
            if kind in header_scenarios:
                return finish(fail(kind, seed, None), header_scenarios)
        reply = _upload(request, endpoint, seed)
        if reply is None:
            return finish(fail(Scenario.BAD_REQUEST, seed, None), header_scenarios)
        return finish(reply, header_scenarios)
    try:
        body: Any = json.loads(request.body)
    except ValueError:
        body = None
    if not isinstance(body, Mapping):
        return finish(fail(Scenario.BAD_REQUEST, seed, None), header_scenarios)
    model = path_model or str(body.get("model", ""))
    try:
        scenarios = header_scenarios | scenarios_of(request, model)
    except UnknownScenarioError as exc:
        return finish(fail(Scenario.BAD_REQUEST, seed, str(exc)), header_scenarios)
    if Scenario.ECHO_KEY in scenarios:
        return _seal(_echo_key(request, seed, bool(body.get("stream"))), scenarios, ())
    if Scenario.ECHO_ESCAPED in scenarios:
        return _seal(_echo_escaped(request), scenarios, ())
    for kind in STATUS_SCENARIOS:
        if kind in scenarios:
            return finish(fail(kind, seed, None), scenarios)
    return finish(_answer(request, endpoint, model, body, seed, secrets, scenarios), scenarios)


def _answer(
    request: ReceivedRequest,
    endpoint: Endpoint,
    model: str,
    body: Mapping[str, Any],
    seed: str,
    secrets: tuple[str, ...],
    scenarios: frozenset[Scenario],
) -> Reply:
    if endpoint is Endpoint.OPENAI_CHAT:
        return openai_wire.chat(openai_wire.parse_chat(body, seed, secrets), scenarios)
    if endpoint is Endpoint.OPENAI_RESPONSES:
        return responses_wire.responses(
            responses_wire.parse_responses(body, seed, secrets), scenarios
        )
    if endpoint is Endpoint.OPENAI_EMBEDDINGS:
        return openai_wire.embeddings(body, seed, secrets)
    if endpoint is Endpoint.ANTHROPIC_MESSAGES:
        return anthropic_wire.messages(
            anthropic_wire.parse_messages(body, seed, secrets), scenarios
        )
    stream = endpoint is Endpoint.GEMINI_STREAM
    ask = gemini_wire.parse_generate(model, body, seed, secrets, stream=stream)
    sse = "sse" in request.query.get("alt", [])
    return gemini_wire.generate(ask, scenarios, sse=sse)


def _echo_key(request: ReceivedRequest, seed: str, stream: bool) -> Reply:
    """What an upstream that echoes credentials answers (the ``echo-key``
    scenario): never scrubbed, so Reel's own scrubbing is all there is."""
    values = (*credentials_of(request), *query_credentials_of(request))
    if not stream:
        seen = "; ".join(
            f"{value} (data:image/png;base64,{base64.b64encode(value.encode()).decode()}, "
            f"{quote(value, safe='')})"
            for value in values
        )
        body = {
            "error": {
                "message": f"Incorrect API key provided: {seen}.",
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_api_key",
            }
        }
        return Reply(401, (("content-type", "application/json"),), (pretty(body),))
    frames: list[bytes] = []
    for value in values:
        event = sse_frame(compact(_delta(seed, f"your key is {value}")))
        cut = event.index(value.encode()) + len(value) // 2
        frames += [event[:cut], event[cut:]]  # two socket writes, the key split
        b64 = base64.b64encode(f"->{value}".encode()).decode()
        frames.append(sse_frame(compact(_delta(seed, f"data:image/png;base64,{b64}"))))
    frames.append(sse_frame(b"[DONE]"))
    return Reply(200, (("content-type", "text/event-stream"),), tuple(frames), True)


def _escaped(text: str) -> str:
    """``text`` as the inside of a JSON string written by .NET's default
    encoder: each character but a letter, a digit or a space escaped."""
    out = []
    for c in text:
        if c == " " or (c.isascii() and c.isalnum()):
            out.append(c)
        else:  # past U+FFFF: a surrogate pair
            units = c.encode("utf-16-be", "surrogatepass")
            out += (f"\\u{units[i] << 8 | units[i + 1]:04X}" for i in range(0, len(units), 2))
    return "".join(out)


def _echo_escaped(request: ReceivedRequest) -> Reply:
    """What an upstream that echoes credentials with JSON escapes answers
    (the ``echo-escaped`` scenario): its headers' and its query's."""
    values = (*credentials_of(request), *query_credentials_of(request))
    seen = "; ".join(_escaped(value) for value in values)
    body = (
        '{"error":{"message":"Incorrect API key provided: ' + seen + '",'
        '"type":"invalid_request_error","param":null,"code":"invalid_api_key"}}'
    )
    return Reply(401, (("content-type", "application/json"),), (body.encode(),))


def _delta(seed: str, text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-" + seed[:29],
        "object": "chat.completion.chunk",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
    }


def _upload(request: ReceivedRequest, endpoint: Endpoint, seed: str) -> Reply | None:
    if endpoint is Endpoint.OPENAI_FORM_TOKEN:
        fields = uploads_wire.form_fields(request)
        return None if fields is None else uploads_wire.form_token(fields, seed)
    parts = uploads_wire.parts_of(request)
    if parts is None:
        return None
    if endpoint is Endpoint.OPENAI_FILES:
        return uploads_wire.file_object(parts, seed)
    return uploads_wire.transcription(parts, seed)


def _seal(reply: Reply, scenarios: frozenset[Scenario], secrets: tuple[str, ...]) -> Reply:
    """Attach the scenarios, scrub secrets from every byte (a last line of
    defence), compress (gzip, zstd) or answer a gzip bomb."""
    frames = reply.frames
    for secret in secrets:
        token = secret.encode("utf-8", "replace")
        frames = tuple(f.replace(token, b"[REDACTED]") for f in frames)
    reply = dataclasses.replace(reply, frames=frames, scenarios=scenarios)
    if Scenario.GZIP_BOMB in scenarios:
        return reply.bomb()
    if Scenario.ZSTD in scenarios:
        return reply.zstded()
    return reply.gzipped() if Scenario.GZIP in scenarios else reply
