"""A plain HTTP API as agents' tools reach one (``GET /web/...``): what an
HTTP client does with the response headers, not the body, is the point.

================================  ==============================================
path                              answer
================================  ==============================================
``/web/redirect/302``             302, ``location: /web/redirect/301``
``/web/redirect/301``             301, ``location: /web/redirect/final``
``/web/redirect/final``           200 JSON, with a ``set-cookie``
``/web/items?page=N``             page N of 3: JSON, a ``link`` header for the
                                  next page (none on the last) and another for
                                  the first, ``x-total-count``
``/web/doc``                      200 JSON with ``etag``, ``last-modified``,
                                  ``cache-control``, two ``vary`` headers,
                                  ``content-disposition``; 304 (the same
                                  validators, no body) to an ``if-none-match``
                                  naming its ``etag``
================================  ==============================================

Any other ``/web/`` path is a 404.  Every answer carries
``x-served-by: fake-web``.
"""

from __future__ import annotations

from .wire import Headers, ReceivedRequest, Reply, compact

__all__ = ["DOC_ETAG", "PAGES", "respond"]

#: The pages ``/web/items`` has.
PAGES = 3
#: The validator of ``/web/doc``.
DOC_ETAG = '"doc-v1-5f3a"'
_JSON = ("content-type", "application/json")
_SERVED = ("x-served-by", "fake-web")
_REDIRECTS = {
    "/web/redirect/302": (302, "/web/redirect/301"),
    "/web/redirect/301": (301, "/web/redirect/final"),
}
_VALIDATORS: Headers = (
    ("etag", DOC_ETAG),
    ("last-modified", "Wed, 21 Oct 2015 07:28:00 GMT"),
    ("cache-control", "private, max-age=60, must-revalidate"),
    ("vary", "accept"),
    ("vary", "accept-encoding"),
)


def respond(request: ReceivedRequest) -> Reply:
    """The answer to a ``/web/`` request."""
    path = request.path
    if path in _REDIRECTS:
        status, location = _REDIRECTS[path]
        headers: Headers = (("content-type", "text/plain"), ("location", location), _SERVED)
        return Reply(status, headers, (f"moved to {location}\n".encode(),))
    if path == "/web/redirect/final":
        headers = (
            _JSON,
            ("set-cookie", "session=fake-web-session; Path=/; HttpOnly"),
            ("cache-control", "no-store"),
            _SERVED,
        )
        return Reply(200, headers, (compact({"arrived": True}),))
    if path == "/web/items":
        return _page(request)
    if path == "/web/doc":
        if request.header("if-none-match") == DOC_ETAG:
            return Reply(304, (*_VALIDATORS, _SERVED), ())
        headers = (
            _JSON,
            *_VALIDATORS,
            ("content-disposition", 'attachment; filename="doc.json"'),
            _SERVED,
        )
        return Reply(200, headers, (compact({"doc": "the text", "version": 1}),))
    return Reply(404, (_JSON, _SERVED), (compact({"error": f"no such page {path}"}),))


def _page(request: ReceivedRequest) -> Reply:
    try:
        page = int(request.query.get("page", ["1"])[0])
    except ValueError:
        page = 0
    if not 1 <= page <= PAGES:
        return Reply(404, (_JSON, _SERVED), (compact({"error": "no such page"}),))
    links: list[tuple[str, str]] = []
    if page < PAGES:
        links.append(("link", f'</web/items?page={page + 1}>; rel="next"'))
    links.append(("link", '</web/items?page=1>; rel="first"'))
    headers = (_JSON, *links, ("x-total-count", str(PAGES * 2)), _SERVED)
    items = [f"item-{page}-{i}" for i in (1, 2)]
    return Reply(200, headers, (compact({"page": page, "items": items}),))
