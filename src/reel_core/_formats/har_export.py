"""Reel's interactions as a HAR 1.2 archive, for DevTools, Playwright's
``routeFromHAR`` and Reel's own HAR importer.

A cassette keeps no request headers and no host: each entry's url is the
interaction's provider's real API host (``base_url`` when given, else
``http://localhost`` for a provider without one), and its request headers
are the one ``content-type`` that says how the body reads (a form, a
multipart body with its boundary, JSON): see :mod:`._export`.  Bodies are the stored (decoded,
redacted) ones: ``content.text`` as UTF-8 text, or base64 for other bytes;
a stream's frames joined.  The timing Reel keeps goes in ``timings``
(``wait`` the time to first byte, ``receive`` the stream's length) and, to
the millisecond frame by frame, in an ``_reel`` extension on the entry:
``frames`` (``[offset in ms, bytes]`` per frame of ``content.text``),
``end_ms``, ``ttfb_ms``, ``stream``, a broken-off stream's ``cut``, ``ts:
null`` for an interaction without a timestamp, and the interaction's
``id``: :mod:`.har` reads them back.  A cut stream comes back ending
cleanly where it broke off (an import records no cut).

A WebSocket session is written the way Chrome's DevTools write one: the
upgrade's entry (``_resourceType: "websocket"``, status 101) with its
messages in ``_webSocketMessages``, each ``{"type": "send" | "receive",
"time": epoch seconds, "opcode": 1 (text) | 2 (binary, base64), "data"}``;
the close, which DevTools do not keep, goes in ``_reel.websocket_close``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from datetime import datetime
from http import HTTPStatus
from typing import Any

from .._interaction import Interaction, WebSocketLog
from .._version import __version__
from ._export import request_type, url_of

__all__ = ["DESCRIPTION", "DETAILS", "NAME", "SUFFIX", "export"]

NAME = "har"
DESCRIPTION = "HAR 1.2 (browsers' DevTools, Playwright's routeFromHAR)"
DETAILS = (
    "Write HAR 1.2: each interaction an entry (stream bodies as text, the frame offsets in "
    "the entry's _reel extension, the time to first byte in timings.wait). `reel import har` "
    "reads it back."
)
SUFFIX = ".har"

_EPOCH = "1970-01-01T00:00:00.000Z"


def export(interactions: Sequence[Interaction], *, base_url: str | None = None) -> bytes:
    """The HAR 1.2 archive (UTF-8 JSON) of ``interactions``, in order."""
    doc = {
        "log": {
            "version": "1.2",
            "creator": {"name": "Reel", "version": __version__},
            "entries": [_entry(ix, base_url) for ix in interactions if exportable(ix)],
        }
    }
    return (json.dumps(doc, indent=2) + "\n").encode("ascii")


def exportable(ix: Interaction) -> bool:
    """Whether ``ix`` is an HTTP exchange a HAR holds: a tool call's line
    is none (said by :func:`losses`)."""
    return ix.call is None


def losses(interactions: Sequence[Interaction]) -> list[str]:
    """What a HAR cannot hold of ``interactions``: tool calls."""
    calls = sum(not exportable(ix) for ix in interactions)
    if not calls:
        return []
    return [f"{calls} tool call{'' if calls == 1 else 's'}: NOT exported (a HAR holds HTTP only)"]


def _text(data: bytes) -> dict[str, Any]:
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"text": base64.b64encode(data).decode("ascii"), "encoding": "base64"}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _entry(ix: Interaction, base_url: str | None) -> dict[str, Any]:
    req, resp = ix.request, ix.response
    url = url_of(ix, base_url)
    request: dict[str, Any] = {
        "method": req.method,
        "url": url,
        "httpVersion": "HTTP/1.1",
        "cookies": [],
        "headers": [],
        "queryString": [{"name": k, "value": v} for k, v in req.query],
        "headersSize": -1,
        "bodySize": len(req.body),
    }
    if req.body:
        mime = request_type(ix)
        request["headers"] = [{"name": "content-type", "value": mime}]
        request["postData"] = {"mimeType": mime, **_text(req.body)}
    body = resp.content
    headers = [{"name": k, "value": v} for k, v in resp.headers]
    mime = next((v for k, v in resp.headers if k.lower() == "content-type"), "")
    location = next((v for k, v in resp.headers if k.lower() == "location"), "")
    try:
        reason = HTTPStatus(resp.status).phrase
    except ValueError:
        reason = ""
    ttfb = _number(ix.meta.get("ttfb_ms"))
    extension: dict[str, Any] = {"id": ix.id, "ttfb_ms": ttfb}
    receive = 0.0
    if ix.timestamp is None:
        extension["ts"] = None  # startedDateTime must be given: 1970 stands in
    if resp.stream is not None:
        extension["stream"] = resp.stream
        extension["frames"] = [[at, len(data)] for at, data in resp.frames]
        if resp.cut is None:
            receive = resp.end_ms
        else:
            receive = resp.cut.at_ms
            extension["cut"] = {"at_ms": receive, "error": resp.cut.error}
        extension["end_ms"] = receive
    wait = ttfb or 0.0
    extra: dict[str, Any] = {}
    if ix.websocket is not None:
        extra = {
            "_resourceType": "websocket",
            "_webSocketMessages": _messages(ix.websocket, _epoch(ix.timestamp)),
        }
        close = ix.websocket.close
        if close is not None:
            extension["websocket_close"] = {
                "code": close.code,
                "reason": close.reason,
                "by": close.by,
                "at_ms": close.at_ms,
            }
        receive = close.at_ms if close is not None else 0.0
    return {
        "startedDateTime": ix.timestamp or _EPOCH,
        "time": wait + receive,
        "request": request,
        "response": {
            "status": resp.status,
            "statusText": reason,
            "httpVersion": "HTTP/1.1",
            "cookies": [],
            "headers": headers,
            "content": {"size": len(body), "mimeType": mime or "x-unknown", **_text(body)},
            "redirectURL": location,
            "headersSize": -1,
            "bodySize": len(body),
        },
        "cache": {},
        "timings": {"send": 0, "wait": wait, "receive": receive},
        **extra,
        "_reel": extension,
    }


def _epoch(timestamp: str | None) -> float:
    """A line's ``ts`` in epoch seconds (0: none, as ``startedDateTime``'s 1970)."""
    if timestamp is None:
        return 0.0
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def _messages(log: WebSocketLog, started: float) -> list[dict[str, Any]]:
    """DevTools' ``_webSocketMessages``: absolute times, opcode 1 or 2."""
    out = []
    for m in log.messages:
        data = base64.b64encode(m.data).decode("ascii") if m.binary else m.data.decode()
        out.append(
            {
                "type": "send" if m.sender == "client" else "receive",
                "time": started + m.at_ms / 1000.0,
                "opcode": 2 if m.binary else 1,
                "data": data,
            }
        )
    return out
