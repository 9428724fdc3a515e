"""Llama Stack recordings (``tests/integration/**/recordings/*.json``).

One JSON file is one call: ``{request, response}``, or the later
``{test_id, request, response, id_normalization_mapping}``.  Two kinds:

* SDK calls: ``request`` is ``{method, url, headers, body, endpoint,
  model}`` where ``body`` holds the SDK call's arguments, and the response
  body is the SDK's objects (``{"__type__": "openai.types...",
  "__data__": {...}}``), a list of them when ``is_streaming`` (the chunks)
  or for a model list.  The HTTP body is rebuilt from them: the object's
  JSON; a stream as the provider sends it (OpenAI-compatible: ``data:
  <chunk>`` events then ``data: [DONE]``; Ollama's ``/api/...``: one JSON
  object a line).  The recorder joined the SDK's base URL and an endpoint
  that starts with ``/v1`` (``.../v1/v1/chat/completions``): that doubled
  ``/v1`` is dropped.  A recorded exception (``is_exception``) becomes the
  error response the provider sent (its status, else 500, with an
  OpenAI-shaped ``{"error": ...}`` body).
* Raw HTTP calls: ``request`` is ``{url, method, payload}`` and the
  response ``{status, body}``, the body as JSON, or a stream as its SSE
  lines.

google-genai calls recorded as ``vertexai:///...`` keep the SDK's
arguments but not the HTTP request (its project and location): skipped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from .._errors import CassetteError
from .._nesting import load_json
from .._shown_url import shown_url
from ._base import Exchange, Skipped

__all__ = ["DESCRIPTION", "NAME", "TOOL", "parse", "sniff"]

NAME = "llamastack"
TOOL = "llama-stack"
DESCRIPTION = "Llama Stack recordings (one responses/*.json file each)"
#: A directory source: its recordings (``recordings/*.json`` or, with an
#: ``index.sqlite`` beside them, ``recordings/responses/*.json``).
DIRECTORY = "**/*.json"

JSON = ("content-type", "application/json")
#: Calls the SDKs make with GET that the recorder wrote down as POST.
_GETS = ("/v1/models", "/models", "/api/tags", "/api/ps")


class _Skip(Exception):
    """A recording that cannot be imported, and why."""


def sniff(data: bytes) -> bool:
    """A JSON object holding a ``request`` and an ``is_streaming`` flag."""
    return data.lstrip()[:1] == b"{" and b'"is_streaming"' in data and b'"request"' in data


def parse(data: bytes, name: str) -> list[Exchange | Skipped]:
    try:
        doc = load_json(data)
    except ValueError as exc:
        raise CassetteError(name, None, f"not a Llama Stack recording: not JSON: {exc}") from None
    req = doc.get("request") if isinstance(doc, Mapping) else None
    resp = doc.get("response") if isinstance(doc, Mapping) else None
    if not isinstance(req, Mapping) or not isinstance(resp, Mapping):
        raise CassetteError(
            name,
            None,
            'not a Llama Stack recording: no "request" and "response" objects at the top '
            f"(found {type(doc).__name__})",
        )
    try:
        return [_exchange(req, resp)]
    except _Skip as exc:
        return [Skipped(0, str(exc))]


def _exchange(req: Mapping[str, Any], resp: Mapping[str, Any]) -> Exchange:
    url, method = req.get("url"), req.get("method", "POST")
    if not isinstance(url, str) or not url:
        raise _Skip("the request has no url")
    if not isinstance(method, str) or not method.isalpha():
        raise _Skip(f"the request method {method!r} is not an HTTP method")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise _Skip(
            f"{shown_url(url)} is an SDK call, not an HTTP request: the recording keeps the SDK's "
            "arguments but not the request's URL (a Vertex AI project and location), so it "
            "cannot be replayed over HTTP"
        )
    notes: list[str] = []
    if "payload" in req:  # the raw HTTP generation
        headers: tuple[tuple[str, str], ...] = ()
        body = req["payload"]
        request_body = b"" if body is None else _json(body)
        if request_body:
            headers = (JSON,)
        status, response_headers, response_body = _raw_response(resp)
        return Exchange(
            0, method.upper(), url, headers, request_body, status, response_headers, response_body
        )
    endpoint = req.get("endpoint")
    endpoint = endpoint if isinstance(endpoint, str) else ""
    path = _path(parts.path, endpoint, notes)
    headers = _headers(req.get("headers"))
    body = req.get("body")
    query = parts.query
    if isinstance(body, Mapping):
        body = dict(body)
        body.update(_mapping(body.pop("extra_body", None), "extra_body"))
        extra_query = _mapping(body.pop("extra_query", None), "extra_query")
        headers += tuple(
            (k.lower(), str(v))
            for k, v in _mapping(body.pop("extra_headers", None), "extra_headers").items()
        )
        if extra_query:
            query = "&".join(q for q in (query, urlencode(extra_query, doseq=True)) if q)
    elif body is not None:
        raise _Skip(f"the request body is a {type(body).__name__}, not the SDK call's arguments")
    if endpoint in _GETS and method.upper() == "POST":
        method = "GET"
        body = None
        notes.append(f"{endpoint} is a GET request (the recorder wrote POST): stored as GET")
    request_body = b"" if not body else _json(body)
    if request_body:
        headers = (*headers, JSON)
    target = urlunsplit((parts.scheme, parts.netloc, path, query, ""))
    status, response_headers, response_body = _sdk_response(resp, endpoint, notes)
    return Exchange(
        0,
        method.upper(),
        target,
        headers,
        request_body,
        status,
        response_headers,
        response_body,
        notes=tuple(notes),
    )


def _path(path: str, endpoint: str, notes: list[str]) -> str:
    """The path the SDK sent: its base URL's path, then the endpoint
    without the ``/v1`` the recorder put before it."""
    if endpoint.startswith("/v1/") and path.endswith(endpoint):
        base = path[: -len(endpoint)]
        if base:
            fixed = base + endpoint[3:]
            notes.append(
                f"the recorder joined the SDK's base URL and {endpoint}: the path "
                f"{path} is stored as {fixed}"
            )
            return fixed
    return path


def _headers(value: Any) -> tuple[tuple[str, str], ...]:
    return tuple((str(k).lower(), str(v)) for k, v in _mapping(value, "headers").items())


def _mapping(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _Skip(f"the request's {what} is a {type(value).__name__}, not a mapping")
    return dict(value)


def _json(value: Any) -> bytes:
    """``value`` as compact JSON, UTF-8 (escaped where it holds a lone
    surrogate)."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":")).encode("ascii")


def _raw_response(resp: Mapping[str, Any]) -> tuple[int, tuple[tuple[str, str], ...], bytes]:
    status = _status(resp.get("status", 200))
    body = resp.get("body")
    if resp.get("is_streaming"):
        if not isinstance(body, list) or not all(isinstance(line, str) for line in body):
            raise _Skip("the streamed response is not a list of SSE lines")
        text = "".join(line + "\n" for line in body)
        return status, (("content-type", "text/event-stream"),), text.encode("utf-8")
    return status, (JSON,), _json(body)


def _sdk_response(
    resp: Mapping[str, Any], endpoint: str, notes: list[str]
) -> tuple[int, tuple[tuple[str, str], ...], bytes]:
    if resp.get("is_exception"):
        return _error(resp, notes)
    body = resp.get("body")
    if isinstance(body, list):
        items = [_data(item) for item in body]
        if not resp.get("is_streaming"):  # a model list
            return 200, (JSON,), _json({"object": "list", "data": items})
        if endpoint.startswith("/api/"):  # Ollama's own API: NDJSON
            ndjson = b"".join(_json(item) + b"\n" for item in items)
            return 200, (("content-type", "application/x-ndjson"),), ndjson
        events = b"".join(b"data: " + _json(item) + b"\n\n" for item in items)
        return 200, (("content-type", "text/event-stream"),), events + b"data: [DONE]\n\n"
    return 200, (JSON,), _json(_data(body))


def _data(item: Any) -> Any:
    """The JSON the provider sent for one of the SDK's objects."""
    if not isinstance(item, Mapping) or "__data__" not in item:
        shape = "a google-genai response" if isinstance(item, Mapping) else type(item).__name__
        raise _Skip(
            f"the response body is {shape}, not a serialized SDK object "
            '({"__type__", "__data__"}): Reel cannot rebuild its HTTP body'
        )
    return item["__data__"]


def _error(
    resp: Mapping[str, Any], notes: list[str]
) -> tuple[int, tuple[tuple[str, str], ...], bytes]:
    data = resp.get("exception_data")
    data = data if isinstance(data, Mapping) else {}
    kind = data.get("type") or "an exception"
    code: Any = data.get("status_code")
    known = isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599
    status = code if known else 500
    body = data.get("body")
    message = data.get("message") or resp.get("exception_message") or str(kind)
    if isinstance(body, Mapping) and "error" in body:
        error: Any = dict(body)
    elif isinstance(body, Mapping):
        error = {"error": dict(body)}
    else:
        error = {"error": {"message": str(message), "type": str(kind), "param": None, "code": None}}
    said = f"status {status}" if known else "status 500 (the exception has no HTTP status)"
    notes.append(f"a recorded {kind}: stored as an error response, {said}, OpenAI-shaped body")
    return status, (JSON,), _json(error)


def _status(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 100 <= value <= 999:
        raise _Skip(f"the response status {value!r} is not an HTTP status code")
    return value
