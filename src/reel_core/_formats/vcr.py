"""vcrpy / pytest-recording cassettes (YAML, or JSON with the same keys).

``interactions``: each a ``request`` (``method``, ``uri``, ``headers`` as
name -> list of values, ``body`` as text, ``!!binary`` bytes or
``{"string": ...}``) and a ``response`` (``status`` ``{code, message}``,
``headers``, ``body`` ``{"string": ...}``).  pydantic-ai's ``parsed_body``
dialect (the body as YAML data) is re-serialized with ``json.dumps`` as
its own loader does.  vcrpy keeps no timing.  Interactions holding a YAML
tag that would build a Python object are skipped, never constructed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from .._errors import CassetteError
from ._base import Exchange, Skipped
from ._encoding import settle_encoding
from ._fields import Skip, header_pairs, status_code, text_bytes
from ._yaml import Unsupported, find_unsupported, load

__all__ = ["DESCRIPTION", "NAME", "TOOL", "parse", "sniff"]

#: A ``uri`` key: a YAML line (``uri:``, ``- uri:``) or a JSON key.
_URI = re.compile(rb'^[ \t]*(?:-[ \t]+)?uri:|"uri"[ \t]*:', re.M)

NAME = "vcr"
TOOL = "vcrpy"
DESCRIPTION = "vcrpy / pytest-recording YAML cassettes"


def sniff(data: bytes) -> bool:
    """A vcrpy cassette: ``interactions:`` at the top with ``uri:`` keys
    (the first may come after a request body of any size)."""
    head = data[:4096]
    if b"interactions" not in head or b"http_interactions" in head:
        return False
    return b"uri" in head or _URI.search(data) is not None


def parse(data: bytes, name: str) -> list[Exchange | Skipped]:
    doc = load(data, name)
    items = doc.get("interactions") if isinstance(doc, Mapping) else None
    if not isinstance(items, list):
        what = "a list (vcrpy before 1.0?)" if isinstance(doc, list) else type(doc).__name__
        raise CassetteError(
            name, None, f'not a vcrpy cassette: no "interactions" list at the top (found {what})'
        )
    out: list[Exchange | Skipped] = []
    for i, item in enumerate(items):
        try:
            out.append(_exchange(i, item))
        except Skip as exc:
            out.append(Skipped(i, str(exc)))
    return out


def _exchange(i: int, item: Any) -> Exchange:
    if isinstance(item, Unsupported) and item.reason:  # a recursive alias, say
        raise Skip(item.reason)
    if not isinstance(item, Mapping):
        raise Skip(f"an interaction is a {type(item).__name__}, not a mapping")
    req, resp = item.get("request"), item.get("response")
    if not isinstance(req, Mapping) or not isinstance(resp, Mapping):
        raise Skip("no request or no response")
    found = find_unsupported(req) or find_unsupported(resp)
    if found:
        raise Skip(
            found.reason
            or f"it holds a {found.tag} YAML tag, which Reel does not load (it would build a "
            "Python object)"
        )
    uri, method = req.get("uri"), req.get("method", "GET")
    if not isinstance(uri, str) or not uri:
        raise Skip("the request has no uri")
    if not isinstance(method, str) or not method.isalpha():
        raise Skip(f"the request method {method!r} is not an HTTP method")
    notes: list[str] = []
    request_body = _request_body(req, notes)
    body = _response_body(resp)
    try:
        headers, settled = settle_encoding(header_pairs(resp.get("headers"), "response"), body)
    except ValueError as exc:
        raise Skip(str(exc)) from None
    return Exchange(
        source=i,
        method=method,
        target=uri,
        request_headers=header_pairs(req.get("headers"), "request"),
        request_body=request_body,
        status=status_code(resp.get("status")),
        response_headers=headers,
        body=body,
        notes=(*notes, *settled),
    )


def _request_body(req: Mapping[str, Any], notes: list[str]) -> bytes:
    if req.get("parsed_body") is not None:
        return text_bytes(json.dumps(req["parsed_body"]))
    body = req.get("body")
    if isinstance(body, Mapping) and "string" in body:
        plain = _plain_body(body["string"])
        if plain is not None:
            return plain
    plain = _plain_body(body)
    if plain is not None:
        return plain
    if isinstance(body, (Mapping, list)):
        notes.append("the request body was YAML data: stored as its JSON")
        return text_bytes(json.dumps(body))
    raise Skip(f"the request body is a {type(body).__name__}, not text or bytes")


def _response_body(resp: Mapping[str, Any]) -> bytes:
    if resp.get("parsed_body") is not None:
        return text_bytes(json.dumps(resp["parsed_body"]))
    body = resp.get("body")
    if isinstance(body, Mapping):
        if "string" not in body:
            keys = ", ".join(map(str, body)) or "none"
            raise Skip(f'the response body has no "string" (its keys: {keys})')
        body = body["string"]
    plain = _plain_body(body)
    if plain is None:
        raise Skip(f"the response body is a {type(body).__name__}, not text or bytes")
    return plain


def _plain_body(body: Any) -> bytes | None:
    """The bytes of a body stored as bytes, text or nothing (``None``: it
    stored something else)."""
    if body is None:
        return b""
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return text_bytes(body)
    return None
