"""nock recordings (Node.js): the JSON array ``nock.recorder.rec({output_objects:
true})`` prints and ``nockBack`` writes to its fixture files.

Each definition: ``scope`` (``https://api.openai.com:443``), ``method``,
``path`` (with its query), ``body`` (the request's: text, or the JSON value
nock parsed it into), ``status`` (a number, or its text; older files say
``reply``), ``response`` (text, a parsed JSON value, a hex string when
``responseIsBinary``, or a list of hex chunks when the response was
content-encoded), ``rawHeaders`` (``[name, value, name, value...]``; older
files a ``headers`` object) and ``reqheaders`` (request headers, when
recorded).  Where nock itself fills a gap on replay, Reel does as nock does:
no status is 200, no response is an empty body, and a parsed JSON response
is written back with ``JSON.stringify`` (compact).  nock keeps no timing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from .._errors import CassetteError
from .._nesting import load_json
from .._shown_url import shown_url
from ._base import Exchange, Skipped
from ._encoding import settle_encoding
from ._fields import Skip, header_pairs, status_code, text_bytes

__all__ = ["DESCRIPTION", "NAME", "parse", "sniff"]

NAME = "nock"
DESCRIPTION = "nock recordings (Node.js): the JSON array nock.recorder / nockBack write"

_DEFAULT_PORTS = {"http": 80, "https": 443}
_REQUIRED = ("scope", "method", "path")


def sniff(data: bytes) -> bool:
    """A JSON array whose first definition names a ``scope``."""
    head = data[:4096].lstrip()
    return head.startswith(b"[") and b'"scope"' in head


def parse(data: bytes, name: str) -> list[Exchange | Skipped]:
    try:
        doc = load_json(data)
    except ValueError as exc:
        raise CassetteError(name, None, f"not a nock recording: not JSON: {exc}") from None
    if not isinstance(doc, list):
        raise CassetteError(
            name,
            None,
            f"not a nock recording: the file holds a JSON {_kind(doc)}, not an array of "
            "definitions",
        )
    if doc and not any(isinstance(d, Mapping) and any(k in d for k in _REQUIRED) for d in doc):
        hint = (
            " (nock.recorder.rec() without output_objects: true prints JavaScript code, which "
            "Reel does not run: record with output_objects: true)"
            if all(isinstance(d, str) for d in doc)
            else ""
        )
        raise CassetteError(
            name,
            None,
            f"not a nock recording: no element of the array has a scope, method or path{hint}",
        )
    out: list[Exchange | Skipped] = []
    for i, item in enumerate(doc):
        try:
            out.append(_exchange(i, item))
        except Skip as exc:
            out.append(Skipped(i, str(exc)))
    return out


def _kind(value: Any) -> str:
    return "object" if isinstance(value, Mapping) else type(value).__name__


def _exchange(i: int, item: Any) -> Exchange:
    if not isinstance(item, Mapping):
        raise Skip(f"a definition is a JSON {_kind(item)}, not an object")
    missing = [k for k in _REQUIRED if not isinstance(item.get(k), str) or not item[k]]
    if missing:
        raise Skip(f"the definition has no {' and no '.join(missing)}: nock could not replay it")
    method = item["method"]
    if not method.isalpha():
        raise Skip(f"the method {method!r} is not an HTTP method")
    notes: list[str] = []
    target = _origin(item["scope"], item.get("port")) + _path(item["path"])
    request_body = _request_body(item.get("body"), notes)
    status = _status(item, notes)
    body = _response_body(item, notes)
    try:
        headers, settled = settle_encoding(_response_headers(item), body)
    except ValueError as exc:
        raise Skip(str(exc)) from None
    return Exchange(
        source=i,
        method=method.upper(),
        target=target,
        request_headers=header_pairs(item.get("reqheaders"), "request"),
        request_body=request_body,
        status=status,
        response_headers=headers,
        body=body,
        notes=(*notes, *settled),
    )


def _origin(scope: str, port: Any) -> str:
    """``scope`` as ``scheme://host[:port]``, the scheme's own port left out
    (a client sends ``Host: api.openai.com``, not ``:443``).  An old
    definition's separate ``port`` joins a scope that has none."""
    parts = urlsplit(scope if "://" in scope else f"http://{scope}")
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise Skip(f"the scope {shown_url(scope)!r} is not an http(s) origin")
    try:
        number = parts.port
    except ValueError:
        raise Skip(f"the scope {shown_url(scope)!r} has a port that is not a number") from None
    if number is None and port is not None:
        if not str(port).isdigit():
            raise Skip(f"the port {port!r} is not a number")
        number = int(port)
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    if number is not None and number != _DEFAULT_PORTS[scheme]:
        host += f":{number}"
    return f"{scheme}://{host}"


def _path(path: str) -> str:
    return path if path.startswith("/") else "/" + path


def _compact(value: Any) -> bytes:
    """A parsed JSON value written back as ``JSON.stringify`` writes it."""
    return text_bytes(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def _request_body(body: Any, notes: list[str]) -> bytes:
    if body is None:
        return b""
    if isinstance(body, str):
        return text_bytes(body)
    notes.append(
        "the request body was stored as parsed JSON: re-serialized compact (as JSON.stringify "
        "writes it), not necessarily the bytes sent"
    )
    return _compact(body)


def _status(item: Mapping[str, Any], notes: list[str]) -> int:
    value = item["reply"] if item.get("reply") is not None else item.get("status")
    if value is None:
        notes.append("no status: 200 assumed, as nock replays it")
        return 200
    try:
        return status_code(value)
    except Skip:
        raise Skip(f"the status {value!r} is not an HTTP status code") from None


def _hex(text: Any, what: str) -> bytes:
    if not isinstance(text, str):
        raise Skip(f"{what} is a JSON {_kind(text)}, not a hex string")
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise Skip(f"{what} is not hex: {text[:40]!r}") from None


def _response_body(item: Mapping[str, Any], notes: list[str]) -> bytes:
    response = item.get("response")
    if not response and not isinstance(response, (list, Mapping)):
        return b""  # nock replays a falsy response (absent, null, "", 0, false) as empty
    if isinstance(response, list) and response and all(isinstance(c, str) for c in response):
        # content-encoded responses: the chunks as they came, each in hex
        encoded = any(k.lower() == "content-encoding" for k, _ in _response_headers(item))
        if encoded or item.get("responseIsBinary"):
            return b"".join(_hex(c, f"response chunk {n}") for n, c in enumerate(response))
    if item.get("responseIsBinary"):
        return _hex(response, "the binary response")
    if isinstance(response, str):
        return text_bytes(response)
    notes.append(
        "the response body was stored as parsed JSON: re-serialized compact (as nock replays "
        "it, with JSON.stringify), not the bytes the server sent"
    )
    return _compact(response)


def _response_headers(item: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    raw = item.get("rawHeaders")
    if raw is None:
        return header_pairs(item.get("headers"), "response")
    if isinstance(raw, Mapping):
        return header_pairs(raw, "response")
    if not isinstance(raw, list) or len(raw) % 2:
        raise Skip("rawHeaders is not a list of names and values in pairs")
    return tuple((str(raw[n]).strip().lower(), str(raw[n + 1])) for n in range(0, len(raw), 2))
