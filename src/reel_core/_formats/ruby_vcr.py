"""Ruby VCR cassettes (YAML, or JSON with the same keys; VCR 2 to 6).

``http_interactions``: each a ``request`` (``method`` in lower case,
``uri``, ``body`` ``{encoding, string | base64_string}``, ``headers`` as
name -> list of values), a ``response`` (``status`` ``{code, message}``,
``headers``, ``body`` like the request's) and ``recorded_at`` (an RFC 2822
date, the interaction's timestamp).  A body Psych could not write as text
is a ``!binary`` (base64) string; one recorded with
``preserve_exact_body_bytes`` is a ``base64_string``.  A text body's bytes
are its UTF-8, whatever its ``encoding`` says (VCR only relabels them).
Placeholders VCR's ``filter_sensitive_data`` left (``<OPENAI_API_KEY>``)
are kept as they are; a URI whose host (or whole base) is a placeholder is
stored by its path, which is what Reel matches on.  A cassette of VCR's
``compressed`` serializer (zlib-deflated YAML, ``.zz``) is inflated first.
Ruby VCR keeps no timing.  An interaction holding a Ruby object tag is
skipped, never built.
"""

from __future__ import annotations

import base64
import binascii
import re
import zlib
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from .._decode import DecodeError, Failure, decode_content
from .._errors import CassetteError
from .._http import Limits
from .._shown_url import shown_url
from ._base import Exchange, Skipped
from ._encoding import settle_encoding
from ._fields import Skip, header_pairs, http_date, status_code, text_bytes
from ._yaml import Unsupported, find_unsupported, load

__all__ = ["DESCRIPTION", "NAME", "parse", "sniff"]

NAME = "ruby-vcr"
DESCRIPTION = "Ruby VCR YAML cassettes (http_interactions, recorded_with: VCR)"

#: The most bytes a ``compressed`` cassette inflates to (the one decoding limit).
_LIMIT = Limits.max_body
#: A placeholder ``filter_sensitive_data`` writes: ``<NAME>``.
_PLACEHOLDER = re.compile(r"<[^<>/\s]+>")
#: The top key, in YAML (at a line's start) or JSON.
_KEY = re.compile(rb'(?:^|\n)http_interactions:|"http_interactions"\s*:')
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def sniff(data: bytes) -> bool:
    """A Ruby VCR cassette: an ``http_interactions`` key near the top
    (after inflating it, for the ``compressed`` serializer's)."""
    head = data[:4096]
    if _deflated(head):
        try:
            return _KEY.search(zlib.decompressobj().decompress(head, 4096)) is not None
        except zlib.error:
            pass  # text that starts as zlib data does
    return _KEY.search(head) is not None


def _deflated(data: bytes) -> bool:
    """Whether ``data`` starts with a zlib header (VCR's ``compressed``
    serializer: ``Zlib::Deflate`` of the YAML, in a ``.zz`` file)."""
    return len(data) >= 2 and data[0] == 0x78 and (data[0] << 8 | data[1]) % 31 == 0


def _inflate(data: bytes, name: str) -> bytes:
    """The YAML in a ``compressed`` cassette, inflated through the one
    bounded path; ``data`` itself when it is not one after all (YAML text
    may start with a zlib header's two bytes).  A cassette that inflates
    to more than the body limit is refused, not inflated."""
    try:
        return decode_content(data, ("deflate",), _LIMIT)
    except DecodeError as exc:
        if exc.failure is Failure.TOO_LARGE:
            raise CassetteError(
                name,
                None,
                f"the compressed cassette inflates to over {_LIMIT} bytes (the body limit): "
                "inflate it yourself (Ruby: Zlib::Inflate.inflate) and import the YAML",
            ) from None
        return data


def parse(data: bytes, name: str) -> list[Exchange | Skipped]:
    if _deflated(data):
        data = _inflate(data, name)
    doc = load(data, name)
    items = doc.get("http_interactions") if isinstance(doc, Mapping) else None
    if not isinstance(items, list):
        what = "a list (VCR 1?)" if isinstance(doc, list) else type(doc).__name__
        raise CassetteError(
            name,
            None,
            f'not a Ruby VCR cassette: no "http_interactions" list at the top (found {what})',
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
    found = find_unsupported(item)
    if found:
        raise Skip(
            found.reason
            or f"it holds a {found.tag} YAML tag, which Reel does not load (it would build an "
            "object)"
        )
    method = req.get("method")
    if not isinstance(method, str) or not method.isalpha():
        raise Skip(f"the request method {method!r} is not an HTTP method")
    notes: list[str] = []
    target = _target(req.get("uri"), notes)
    request_body = _body(req.get("body"), "request")
    body = _body(resp.get("body"), "response")
    try:
        headers, settled = settle_encoding(header_pairs(resp.get("headers"), "response"), body)
    except ValueError as exc:
        raise Skip(str(exc)) from None
    return Exchange(
        source=i,
        method=method.upper(),
        target=target,
        request_headers=header_pairs(req.get("headers"), "request"),
        request_body=request_body,
        status=status_code(resp.get("status")),
        response_headers=headers,
        body=body,
        timestamp=_recorded_at(item.get("recorded_at"), notes),
        notes=(*notes, *settled),
    )


def _target(value: Any, notes: list[str]) -> str:
    """The request target: the URI, or its path when its host is a
    placeholder (``https://<HOST>/v1/x``, ``<API_BASE>/chat``)."""
    if not isinstance(value, str) or not value.strip():
        raise Skip("the request has no uri")
    uri: str = value.strip()
    scheme = _SCHEME.match(uri)
    if scheme:
        rest = uri[scheme.end() :]
        cut = min((rest.find(c) for c in "/?" if c in rest), default=len(rest))
        host, path = rest[:cut], rest[cut:]
        if not _PLACEHOLDER.search(host):
            return uri
        where = f"host {host}"
    elif uri.startswith("/"):
        return uri
    else:
        found = _PLACEHOLDER.match(uri)
        path = uri[found.end() :] if found else ""
        if not found or (path and path[0] not in "/?"):
            raise Skip(f"the request uri {shown_url(uri)!r} is neither a URL nor a path")
        where = f"base {found.group()}"
    if not path.startswith("/"):
        path = "/" + path
    notes.append(
        f"the uri's {where} is a placeholder: the request is stored by its path {path}"
        " (a path the placeholder stood for is not known)"
    )
    return path


def _body(value: Any, where: str) -> bytes:
    """A body's bytes: ``{string: text | !binary}``, ``{base64_string}``,
    or (hand-written) a bare string."""
    if isinstance(value, Mapping):
        if value.get("base64_string") is not None:
            coded = value["base64_string"]
            if not isinstance(coded, str):
                raise Skip(f"the {where} body's base64_string is a {type(coded).__name__}")
            try:
                return base64.b64decode(coded, validate=False)
            except (binascii.Error, ValueError) as exc:
                raise Skip(f"the {where} body's base64_string is not base64: {exc}") from None
        if "string" not in value:
            keys = ", ".join(map(str, value)) or "none"
            raise Skip(f'the {where} body has no "string" nor "base64_string" (its keys: {keys})')
        value = value["string"]
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return text_bytes(value)
    raise Skip(f"the {where} body is a {type(value).__name__}, not text or bytes")


def _recorded_at(value: Any, notes: list[str]) -> float | None:
    if value is None:
        return None
    if isinstance(value, datetime):  # a YAML timestamp (a hand edit)
        when = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return when.timestamp()
    stamp = http_date(str(value))
    if stamp is None:
        notes.append(f"recorded_at {str(value)[:40]!r} is no RFC 2822 date: no timestamp kept")
    return stamp
