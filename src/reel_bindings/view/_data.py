"""What the viewer page shows, as JSON values: pure functions of the
interactions (no file, no clock), tested without a browser.

Each interaction gives a *row* (the list: provider, model, endpoint, status,
stream kind, tokens, cost, timing, recorded time) and a *detail* (request
and response as stored, bodies parsed when they are JSON, a stream's frames
with their offsets and text, the assembled answer, tool calls, usage and
cost).  The figures are ``reel inspect``'s and ``reel cost``'s
(:func:`~reel_bindings._figures.figures`), the answer and the frames'
text ``reel inspect``'s (:mod:`reel_bindings._text`): the page shows the
same numbers as the commands.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from reel_core import Interaction
from reel_core.tools import CallError, ProtoSchema, load_json

from .._figures import Figures, figures
from .._text import GrpcShown, assemble, frame_text, grpc_shown
from ._media import media
from ._run import call_detail, timeline

__all__ = [
    "MAX_BINARY",
    "MAX_WHOLE_ANSWER",
    "Source",
    "body_value",
    "detail",
    "miss_view",
    "row",
    "view_data",
]

#: Bytes of a binary body shown (as base64); the rest is counted.
MAX_BINARY = 4096
#: Characters of a whole (not streamed) body's answer shown apart from the
#: body: the body holds it all, so a long one is not written twice.
MAX_WHOLE_ANSWER = 1000


@dataclass(frozen=True)
class Source:
    """One cassette shown on the page: its name and what was read from it."""

    name: str
    #: (line number, interaction) in file order.
    interactions: Sequence[tuple[int, Interaction]]
    #: (line number, why it is not an interaction): shown as a warning.
    skipped: Sequence[tuple[int, str]] = ()


def _finite(value: float | None) -> float | None:
    """A number the page's JSON can hold (NaN and infinities are ``None``)."""
    if value is None or not math.isfinite(value):
        return None
    return value


def _ms(value: float | None) -> float | None:
    """Milliseconds to the microsecond."""
    value = _finite(value)
    return None if value is None else round(value, 3)


def _reject(name: str) -> Any:
    raise ValueError(name)  # NaN and Infinity are not JSON a browser reads


def body_value(data: bytes) -> dict[str, Any]:
    """A body as the page shows it: ``{"json": value}`` when it parses as
    JSON, ``{"text": ...}`` when it is UTF-8, ``{"empty": true}``, else
    ``{"binary": n, "base64": the first MAX_BINARY bytes}``."""
    if not data:
        return {"empty": True}
    try:
        return {"json": load_json(data, parse_constant=_reject)}
    except ValueError:
        pass
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        head = base64.b64encode(data[:MAX_BINARY]).decode("ascii")
        return {"binary": len(data), "base64": head}


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def _duration(ix: Interaction, f: Figures) -> float | None:
    """From sending the request to the last byte, when the line says; else
    what is known of it (the stream's own length; a WebSocket session's
    close, or its last message)."""
    ws = ix.websocket
    if f.total_ms is not None and (ws is None or "total_ms" in ix.meta):
        return f.total_ms
    if ws is not None:  # (a stream's own length is no session's: it has none)
        if ws.close is not None:
            return ws.close.at_ms
        return ws.messages[-1].at_ms if ws.messages else None
    response = ix.response
    if response.stream is None:
        return None
    return response.cut.at_ms if response.cut is not None else response.end_ms


def row(
    ix: Interaction, *, index: int, cassette: int, line: int, proto: ProtoSchema | None = None
) -> dict[str, Any]:
    """One line of the page's list (a gRPC call's figures read through
    ``proto``, a descriptor set, when its line has none)."""
    f = figures(ix, proto)
    req, resp = ix.request, ix.response
    return {
        "i": index,
        "cassette": cassette,
        "line": line,
        "id": ix.id,
        "provider": ix.provider,
        "model": f.model,
        "method": req.method,
        "path": req.path,
        "status": resp.status,
        "stream": resp.stream,
        "frames": None if resp.stream is None else len(resp.frames),
        # a WebSocket session: its messages each way
        "ws": None if ix.websocket is None else _counts(ix),
        "cut": None if resp.cut is None else resp.cut.error,
        "tokens_in": f.tokens_in,
        "tokens_out": f.tokens_out,
        "tokens_cached": f.tokens_cached,
        # a call line costs no tokens: not an unknown cost
        "cost_usd": 0.0 if ix.call is not None else _finite(f.cost_usd),
        "cost_unknown": None if ix.call is not None else f.unknown_reason,
        "ttfb_ms": _ms(f.ttfb_ms),
        "ttft_ms": _ms(f.ttft_ms),
        "duration_ms": _ms(_duration(ix, f)),
        "recorded": ix.timestamp,
        # a call line: its kind and name, and the class of what it raised
        "call": None if ix.call is None else _call_row(ix),
    }


def _call_row(ix: Interaction) -> dict[str, Any]:
    assert ix.call is not None
    outcome = ix.call.outcome
    error = outcome if isinstance(outcome, CallError) else getattr(outcome, "error", None)
    return {
        "kind": ix.call.call.kind,
        "name": ix.call.call.name,
        "raised": None if error is None else error.type,
    }


def _counts(ix: Interaction) -> dict[str, int]:
    assert ix.websocket is not None
    senders = [m.sender for m in ix.websocket.messages]
    return {"client": senders.count("client"), "server": senders.count("server")}


def _message_payload(data: bytes, binary: bool) -> dict[str, Any]:
    """A WebSocket message as the page shows it: a text one as a body is
    (JSON, else text), a binary one counted with its start in base64."""
    if binary:
        head = base64.b64encode(data[:MAX_BINARY]).decode("ascii")
        return {"binary": len(data), "base64": head}
    return body_value(data)


def _websocket(ix: Interaction) -> dict[str, Any]:
    """A WebSocket session: ``[from, at_ms, bytes, payload]`` per message,
    in order, and the close (``None``: not recorded)."""
    assert ix.websocket is not None
    ws = ix.websocket
    close = None
    if ws.close is not None:
        c = ws.close
        close = {"code": c.code, "reason": c.reason, "by": c.by, "at_ms": _ms(c.at_ms)}
    return {
        "messages": [
            [m.sender, _ms(m.at_ms) or 0.0, len(m.data), _message_payload(m.data, m.binary)]
            for m in ws.messages
        ],
        "close": close,
    }


def _frames(ix: Interaction, grpc: GrpcShown | None = None) -> list[list[Any]]:
    """``[offset_ms, bytes, kind, event, text]`` per frame, in order (a gRPC
    message's text: its JSON, or how many bytes it holds)."""
    stream = ix.response.stream or "chunks"
    out: list[list[Any]] = []
    for i, (at, data) in enumerate(ix.response.frames):
        if grpc is not None and i < len(grpc.response):
            message = json.dumps(grpc.response[i], ensure_ascii=False, separators=(",", ":"))
            out.append([_ms(at) or 0.0, len(data), "data", None, message])
            continue
        text = frame_text(data, stream)
        out.append([_ms(at) or 0.0, len(data), text.kind, text.event, text.text])
    return out


def detail(ix: Interaction, proto: ProtoSchema | None = None) -> dict[str, Any]:
    """Everything the page shows of one interaction when it is opened; a
    gRPC call's messages as JSON through ``proto`` (a descriptor set), else
    as bytes with a note (``grpc_note``)."""
    f = figures(ix, proto)
    req, resp = ix.request, ix.response
    grpc = grpc_shown(ix, proto)
    request: dict[str, Any] = {
        "method": req.method,
        "path": req.path,
        "query": [list(pair) for pair in req.query],
        "body": body_value(req.body)
        if grpc is None or not grpc.request
        else {"json": {"messages": grpc.request}},
    }
    if grpc is not None and grpc.request and grpc.request_note is not None:
        request["grpc_note"] = grpc.request_note
    for name in ("content_type", "encoding", "encoding_error"):
        value = getattr(req, name)
        if value is not None:
            request[name] = value
    response: dict[str, Any] = {
        "status": resp.status,
        "reason": _reason(resp.status),
        "headers": [list(pair) for pair in resp.headers],
        "stream": resp.stream,
    }
    for name in ("encoding", "encoding_error"):  # a body Reel could not decode: flagged
        value = getattr(resp, name)
        if value is not None:
            response[name] = value
    if ix.websocket is not None:
        response["websocket"] = _websocket(ix)
    elif resp.stream is None:
        response["body"] = body_value(resp.body)
    else:
        response["frames"] = _frames(ix, grpc)
        if grpc is not None and grpc.response_note is not None:
            response["grpc_note"] = grpc.response_note
        response["end_ms"] = None if resp.cut is not None else _ms(resp.end_ms)
        response["cut"] = (
            None
            if resp.cut is None
            else {"at_ms": _ms(resp.cut.at_ms), "error": resp.cut.error, "detail": resp.cut.detail}
        )
    answer = assemble(resp, grpc)
    text = answer.text if answer.recognised else None
    more = 0
    if text is not None and resp.stream is None and len(text) > MAX_WHOLE_ANSWER:
        more = len(text) - MAX_WHOLE_ANSWER
        text = text[:MAX_WHOLE_ANSWER]
    return {
        "id": ix.id,
        "key": ix.key,
        "endpoint": ix.endpoint or f"{req.method} {req.path}",
        "request": request,
        "response": response,
        "text": text,
        # characters of a whole body's answer left out of "text" (in the body)
        "text_more": more,
        "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in answer.tool_calls],
        "usage": {
            "model": f.model,
            "tokens_in": f.tokens_in,
            "tokens_out": f.tokens_out,
            "tokens_cached": f.tokens_cached,
            "cost_usd": _finite(f.cost_usd),
            "cost_source": f.cost_source,
            "cost_unknown": f.unknown_reason,
            "ttfb_ms": _ms(f.ttfb_ms),
            "ttft_ms": _ms(f.ttft_ms),
            "duration_ms": _ms(_duration(ix, f)),
        },
        "meta": _jsonable(dict(ix.meta)),
        # a call line (a tool's): what was called and how it ended
        "call": None if ix.call is None else _jsonable(call_detail(ix.call, ix.meta)),
        # the images and sounds the detail panel shows (see _media)
        "media": media(ix),
    }


def _jsonable(value: Any) -> Any:
    """``value`` with any NaN or infinity (which a cassette's JSON may hold)
    made ``null``, so the page's JSON parses."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def view_data(
    sources: Sequence[Source], proto: ProtoSchema | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The page's list (the cassettes, one row per interaction) and the
    details, one per row in the same order; gRPC messages read through
    ``proto``, a descriptor set."""
    rows: list[dict[str, Any]] = []
    details: list[dict[str, Any]] = []
    cassettes: list[dict[str, Any]] = []
    for c, source in enumerate(sources):
        cassettes.append(
            {
                "name": source.name,
                "interactions": len(source.interactions),
                "skipped": [{"line": n, "reason": why} for n, why in source.skipped],
            }
        )
        for line, ix in source.interactions:
            rows.append(row(ix, index=len(rows), cassette=c, line=line, proto=proto))
            details.append(detail(ix, proto))
    return {"cassettes": cassettes, "rows": rows, "timeline": timeline(sources)}, details


# -- a miss report: a file someone handed over -----------------------------------
#
# A report is read from a file, and a file may claim anything: every value
# of it is checked for its type here, the one way into the page -- text is
# a string or None, a number a finite number or None, a count an int -- and
# the page's script escapes every string it shows.  What the report's diff
# holds (recorded and received JSON values) stays as it is: the page shows
# it as JSON text, escaped.


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return _finite(float(value))


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def miss_view(report: Any, sources: Sequence[Source]) -> dict[str, Any]:
    """A miss report (the JSON body Reel answers a miss with) beside its
    closest recording: ``error`` holds the report's fields, ``closest_row``
    the page index of the recording it names (``None`` when no cassette
    shown holds it).  Every field is type-checked (a string, a finite
    number, a count: anything else is ``None`` or 0).  Raises
    ``ValueError`` for JSON that is no miss report."""
    error = report.get("error") if isinstance(report, dict) else None
    if not isinstance(error, dict) or error.get("type") != "reel_miss":
        raise ValueError('not a Reel miss report: expected {"error": {"type": "reel_miss", ...}}')
    closest = error.get("closest")
    if closest is not None and not isinstance(closest, dict):
        raise ValueError('"error.closest" must be an object or null')
    diff = [] if closest is None else closest.get("diff", [])
    if not isinstance(diff, list) or not all(isinstance(d, dict) for d in diff):
        raise ValueError('"error.closest.diff" must be a list of objects')
    found: int | None = None
    if closest is not None:
        index = 0
        for source in sources:
            for _, ix in source.interactions:
                if found is None and ix.id == closest.get("id"):
                    found = index
                index += 1
    asked = error.get("request")
    request: dict[str, Any] = asked if isinstance(asked, dict) else {}
    return {
        "message": _text(error.get("message")) or "",
        "cassette": _text(error.get("cassette")),
        "mode": _text(error.get("mode")),
        "match": _text(error.get("match")),
        "key": _text(error.get("key")),
        "method": _text(request.get("method")),
        "path": _text(request.get("path")),
        "reason": _text(error.get("reason")),
        "rerecord": _text(error.get("rerecord")),
        "closest": None
        if closest is None
        else {
            "id": _text(closest.get("id")),
            "method": _text(closest.get("method")),
            "path": _text(closest.get("path")),
            "similarity": _number(closest.get("similarity")),
            "more_differences": _count(closest.get("more_differences")),
        },
        "diff": [
            {
                "path": _text(d.get("path")) or "",
                "kind": _text(d.get("kind")) or "",
                "recorded": d.get("recorded"),
                "received": d.get("received"),
                "has_recorded": "recorded" in d,
                "has_received": "received" in d,
            }
            for d in diff
        ],
        "closest_row": found,
    }
