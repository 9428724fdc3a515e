"""What the exporters share: where a request went, and what its body is.

A cassette keeps no host and no request header.  An exported request's URL
is the interaction's provider's real API host (``base_url`` when given,
else ``http://localhost`` for a provider without one), its path and its
query; the one request header an exporter can tell again is the
``content-type`` that says how the body reads (a form, a multipart body
with its boundary, JSON).
"""

from __future__ import annotations

from urllib.parse import urlencode

from .._body import parse_json
from .._forms import FORM, MULTIPART
from .._interaction import Interaction
from .._providers import PROVIDER_HOSTS

__all__ = ["request_type", "url_of"]


def url_of(ix: Interaction, base_url: str | None) -> str:
    """The absolute URL ``ix``'s request is exported with (a lone surrogate
    in the query, which a line's JSON may escape, percent-encoded as its
    code point's bytes, not an error)."""
    req = ix.request
    base = (base_url or PROVIDER_HOSTS.get(ix.provider) or "http://localhost").rstrip("/")
    query = urlencode(req.query, errors="surrogatepass") if req.query else ""
    return base + req.path + ("?" + query if query else "")


def request_type(ix: Interaction) -> str:
    """The ``content-type`` of ``ix``'s (non-empty) request body: a form's,
    a multipart body's with its boundary, JSON, else octet-stream."""
    req = ix.request
    if req.content_type == MULTIPART:
        boundary = req.body.split(b"\r\n", 1)[0][2:].decode("latin-1")
        return f"{MULTIPART}; boundary={boundary}"
    if req.content_type == FORM:
        return FORM
    return "application/json" if parse_json(req.body)[0] else "application/octet-stream"
