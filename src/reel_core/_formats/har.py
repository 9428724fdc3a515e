"""HAR 1.2 archives: browsers' DevTools, Playwright, Polly.JS, mitmproxy.

``log.entries``: each a ``request`` (``method``, absolute ``url``,
``headers`` as ``{name, value}`` pairs, ``queryString``, ``postData``
``{mimeType, text}`` or form ``params``) and a ``response`` (``status``,
``headers``, ``content`` ``{text, encoding, mimeType}``), ``timings`` in
milliseconds and ``startedDateTime``.

- ``content.text`` is the body decoded (HAR 1.2 says so): a
  ``content-encoding`` header beside it is dropped, with a note.  With
  ``encoding: base64`` it is the body's bytes, which Polly.JS keeps still
  encoded, as a JSON list of base64 chunks: they are joined, and the
  header kept when the bytes are in its encoding.
- The time to first byte is ``timings.send + timings.wait``; HAR keeps no
  offsets inside the body, so its frames are at offset 0, unless the
  entry carries Reel's own ``_reel`` extension (``frames``: ``[offset in
  ms, bytes]`` per frame of ``content.text``, ``end_ms``), as Reel's HAR
  export writes it, with the time to first byte (``ttfb_ms``, ``null`` when
  unknown) to the millisecond and ``ts: null`` for no timestamp.
- An entry without an HTTP response (status 0: aborted, blocked, failed),
  a WebSocket, a body kept outside the archive (Playwright's ``_file``) or
  not saved at all is skipped, with why.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import urlencode

from .._errors import CassetteError
from .._interaction import WS_CLOSERS, WebSocketClose, WebSocketLog, WebSocketMessage
from .._nesting import load_json
from .._shown_url import shown_url
from ._base import Exchange, Skipped, frames_of
from ._encoding import settle_encoding

__all__ = ["DESCRIPTION", "NAME", "parse", "sniff"]

NAME = "har"
DESCRIPTION = "HAR 1.2 archives (browsers, Playwright, Polly.JS, mitmproxy)"

Pairs = tuple[tuple[str, str], ...]
Frames = tuple[tuple[float, bytes], ...]

_DATE = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?\s*(Z|[+-]\d\d:?\d\d)?",
    re.IGNORECASE,
)


_HEAD = re.compile(rb'(?:\xef\xbb\xbf)?\s*\{\s*"log"\s*:\s*\{')


class _Skip(Exception):
    """An entry that cannot be imported, and why."""


def sniff(data: bytes) -> bool:
    """A HAR archive: a JSON object that opens with its ``log`` object."""
    return _HEAD.match(data[:4096]) is not None


def parse(data: bytes, name: str) -> list[Exchange | Skipped]:
    try:
        doc = load_json(data)
    except ValueError as exc:
        raise CassetteError(name, None, f"not a HAR file: not JSON: {exc}") from None
    if not isinstance(doc, Mapping):
        raise CassetteError(name, None, f"not a HAR file: {_kind(doc)}, not a JSON object")
    log = doc.get("log")
    if not isinstance(log, Mapping):
        raise CassetteError(
            name, None, f'not a HAR file: no "log" object at the top (found {_kind(log)})'
        )
    entries = log.get("entries")
    if not isinstance(entries, list):
        raise CassetteError(
            name, None, f'not a HAR file: its "log" has no "entries" list (found {_kind(entries)})'
        )
    out: list[Exchange | Skipped] = []
    for i, entry in enumerate(entries):
        try:
            out.append(_exchange(i, entry))
        except _Skip as exc:
            out.append(Skipped(i, str(exc)))
    return out


def _kind(value: Any) -> str:
    """What a JSON value is, in JSON's words."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, Mapping):
        return "an object"
    return "a list" if isinstance(value, list) else "a string"


def _exchange(i: int, entry: Any) -> Exchange:
    if not isinstance(entry, Mapping):
        raise _Skip(f"an entry is {_kind(entry)}, not an object")
    req, resp = entry.get("request"), entry.get("response")
    if not isinstance(req, Mapping) or not isinstance(resp, Mapping):
        raise _Skip("the entry has no request or no response object")
    method = req.get("method")
    if not isinstance(method, str) or not method.isalpha():
        raise _Skip(f"the request method {method!r} is not an HTTP method")
    notes: list[str] = []
    session = isinstance(entry.get("_webSocketMessages"), list)
    target = _target(req, notes, websocket=session)
    status = _status(resp, websocket=session)
    request_body = _request_body(req.get("postData"), notes)
    body, decoded = _response_body(resp.get("content"))
    headers = _headers(resp.get("headers"), "response")
    if decoded and body:
        encodings = [v for k, v in headers if k == "content-encoding"]
        if encodings:
            headers = tuple((k, v) for k, v in headers if k != "content-encoding")
            notes.append(
                f"content-encoding {encodings[-1].strip()} dropped: HAR's content.text "
                "holds the body decoded"
            )
    try:
        headers, settled = settle_encoding(headers, body)
    except ValueError as exc:
        raise _Skip(str(exc)) from None
    notes.extend(settled)
    timestamp = _timestamp(entry.get("startedDateTime"), entry.get("_reel"), notes)
    websocket = _session(entry, timestamp or 0.0, notes) if session else None
    return Exchange(
        source=i,
        method=method,
        target=target,
        request_headers=_headers(req.get("headers"), "request"),
        request_body=request_body,
        status=status,
        response_headers=headers,
        body=_timed(entry.get("_reel"), body, notes),
        ttfb=_ttfb(entry.get("timings"), entry.get("_reel")),
        timestamp=timestamp,
        notes=tuple(notes),
        websocket=websocket,
    )


def _session(entry: Mapping[str, Any], started: float, notes: list[str]) -> WebSocketLog:
    """A WebSocket entry's messages (DevTools' ``_webSocketMessages``: send
    or receive, epoch seconds, opcode 1 text or 2 base64 binary) and the
    close Reel's ``_reel.websocket_close`` keeps.  Other opcodes (DevTools
    keep none) and unreadable messages are left out, said in the notes."""
    messages: list[WebSocketMessage] = []
    left, last = 0, 0.0
    for item in entry["_webSocketMessages"]:
        if not isinstance(item, Mapping):
            left += 1
            continue
        kind, opcode, data, at = (item.get(k) for k in ("type", "opcode", "data", "time"))
        if (
            kind not in ("send", "receive")
            or opcode not in (1, 2)
            or not isinstance(data, str)
            or isinstance(at, bool)
            or not isinstance(at, (int, float))
        ):
            left += 1
            continue
        try:
            payload = base64.b64decode(data, validate=True) if opcode == 2 else data.encode()
        except binascii.Error:
            left += 1
            continue
        last = max(last, round(max(at - started, 0.0) * 1000.0, 3))
        sender = "client" if kind == "send" else "server"
        messages.append(WebSocketMessage(sender, last, payload, opcode == 2))
    if left:
        notes.append(f"{left} WebSocket message(s) left out: not a text or binary message")
    extension = entry.get("_reel")
    close = extension.get("websocket_close") if isinstance(extension, Mapping) else None
    ending = None
    if isinstance(close, Mapping) and close.get("by") in WS_CLOSERS:
        code = close.get("code")
        ending = WebSocketClose(
            code if isinstance(code, int) and not isinstance(code, bool) else None,
            str(close.get("reason") or ""),
            str(close["by"]),
            max(_ms(close.get("at_ms")) or last, last),
        )
    return WebSocketLog(tuple(messages), ending)


def _target(req: Mapping[str, Any], notes: list[str], *, websocket: bool = False) -> str:
    url = req.get("url")
    if not isinstance(url, str) or not url.strip():
        raise _Skip("the request has no url")
    url = url.strip().split("#", 1)[0]
    scheme = url.split(":", 1)[0].lower() if "://" in url else ""
    if websocket and scheme in ("ws", "wss"):  # DevTools name the upgrade by its ws URL
        scheme = "https" if scheme == "wss" else "http"
        url = scheme + url[url.index(":") :]
    if scheme not in ("http", "https") and not url.startswith("/"):
        raise _Skip(f"not an HTTP request: {shown_url(url, limit=60)}")
    if scheme:
        start = len(scheme) + 3
        authority = url[start:].split("/", 1)[0].split("?", 1)[0]
        if "@" in authority:
            url = url[:start] + url[start + authority.rindex("@") + 1 :]
            notes.append("the url's user and password were left out")
    query = req.get("queryString")
    if "?" not in url and isinstance(query, list) and query:
        pairs = [(str(p.get("name", "")), str(p.get("value", ""))) for p in query if _pair(p)]
        if pairs:
            url += "?" + urlencode(pairs)
            notes.append("the url had no query: rebuilt from queryString")
    return url


def _pair(value: Any) -> bool:
    return isinstance(value, Mapping) and isinstance(value.get("name"), str)


def _status(resp: Mapping[str, Any], *, websocket: bool = False) -> int:
    code: Any = resp.get("status")
    if isinstance(code, str) and code.strip().isdigit():
        code = int(code)
    if code == 0 or code is None:
        error = resp.get("_error")
        why = f" ({error})" if isinstance(error, str) and error else ""
        raise _Skip(f"no HTTP response: status {code}{why}: the request was aborted or failed")
    if isinstance(code, bool) or not isinstance(code, int) or not 100 <= code <= 999:
        raise _Skip(f"the response status {code!r} is not an HTTP status code")
    if code == 101 and not websocket:
        raise _Skip(
            "a protocol switch (status 101) without its WebSocket messages "
            "(no _webSocketMessages list): nothing to replay"
        )
    return code


def _text_bytes(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a "\ud800" escape
        return text.encode("utf-8", "surrogatepass")


def _base64(text: str, where: str) -> bytes:
    try:
        return base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        raise _Skip(f"the {where} says base64 but is not base64") from None


def _request_body(post: Any, notes: list[str]) -> bytes:
    if post is None:
        return b""
    if not isinstance(post, Mapping):
        raise _Skip(f"the request's postData is {_kind(post)}, not an object")
    text = post.get("text")
    if isinstance(text, str):
        if post.get("encoding") == "base64":
            return _base64(text, "request body")
        return _text_bytes(text)
    if text is not None:
        raise _Skip(f"the request body is {_kind(text)}, not text")
    if isinstance(post.get("_file"), str):
        raise _Skip(
            f"the request body is in a file beside the archive ({post['_file']}): "
            "record the HAR with its content embedded"
        )
    params = post.get("params")
    if not isinstance(params, list) or not params:
        return b""
    mime = str(post.get("mimeType") or "").strip().lower()
    if not mime.startswith("application/x-www-form-urlencoded") or not all(map(_pair, params)):
        raise _Skip(
            f"the request body was stored only as form params ({mime or 'no mimeType'}): "
            "its bytes are lost"
        )
    notes.append("the request body was stored only as form params: rebuilt url-encoded")
    return urlencode([(p["name"], str(p.get("value", ""))) for p in params]).encode("ascii")


def _response_body(content: Any) -> tuple[bytes, bool]:
    """The body, and whether it is stored decoded (text, not base64)."""
    if content is None:
        return b"", True
    if not isinstance(content, Mapping):
        raise _Skip(f"the response content is {_kind(content)}, not an object")
    text = content.get("text")
    if text is None:
        if isinstance(content.get("_file"), str):
            raise _Skip(
                f"the body is in a file beside the archive ({content['_file']}): "
                "record the HAR with its content embedded"
            )
        size = content.get("size")
        if isinstance(size, int) and not isinstance(size, bool) and size > 0:
            raise _Skip(
                f"the response body was not saved (content.size {size}, no content.text): "
                "save the HAR with its content"
            )
        return b"", True
    if not isinstance(text, str):
        raise _Skip(f"the response body is {_kind(text)}, not text")
    encoding = content.get("encoding")
    if encoding == "base64":
        if text.lstrip().startswith("["):  # Polly.JS: a JSON list of base64 chunks
            try:
                chunks = load_json(text)
            except ValueError:
                chunks = None
            if not isinstance(chunks, list) or not all(isinstance(c, str) for c in chunks):
                raise _Skip("the response body says base64 but is not base64 or a list of it")
            return b"".join(_base64(c, "response body") for c in chunks), False
        return _base64(text, "response body"), False
    if encoding not in (None, "", "utf8", "utf-8"):
        raise _Skip(f"the response body's encoding {encoding!r} is neither base64 nor text")
    return _text_bytes(text), True


def _headers(value: Any, where: str) -> Pairs:
    """The pairs, names lower-case; HTTP/2's pseudo-headers (``:path``...)
    are not headers and are left out."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise _Skip(f"the {where} headers are {_kind(value)}, not a list")
    pairs = []
    for item in value:
        if not _pair(item):
            raise _Skip(f"a {where} header is not a {{name, value}} object: {item!r}"[:200])
        name = item["name"].strip().lower()
        if name and not name.startswith(":") and item.get("value") is not None:
            pairs.append((name, str(item["value"])))
    return tuple(pairs)


def _ms(value: Any) -> float | None:
    """A HAR time in ms; ``None`` for -1 (does not apply) and junk."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        return None
    return float(value)


def _ttfb(timings: Any, extension: Any) -> float | None:
    """``timings.send + timings.wait``; Reel's ``_reel.ttfb_ms`` (``null``
    when it was unknown) over them."""
    if isinstance(extension, Mapping) and "ttfb_ms" in extension:
        ms = _ms(extension["ttfb_ms"])
        return None if ms is None else ms / 1000
    if not isinstance(timings, Mapping):
        return None
    wait = _ms(timings.get("wait"))
    if wait is None:
        return None
    return (wait + (_ms(timings.get("send")) or 0.0)) / 1000


def _timestamp(value: Any, extension: Any, notes: list[str]) -> float | None:
    """``startedDateTime`` in epoch seconds; none when Reel's ``_reel.ts``
    says the recording had none (HAR asks for one: 1970 stands in)."""
    if value is None or (isinstance(extension, Mapping) and extension.get("ts", "") is None):
        return None
    m = _DATE.fullmatch(value.strip()) if isinstance(value, str) else None
    if m is None:
        notes.append(f"startedDateTime {value!r} is not an ISO 8601 time: no timestamp kept")
        return None
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    fraction, zone = m.group(7), (m.group(8) or "Z").upper()
    offset = timedelta(0)
    if zone != "Z":
        digits = zone[1:].replace(":", "")
        offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
        offset = -offset if zone[0] == "-" else offset
    try:
        moment = datetime(year, month, day, hour, minute, second, tzinfo=timezone(offset))
    except ValueError:
        notes.append(f"startedDateTime {value!r} is not a valid time: no timestamp kept")
        return None
    return moment.timestamp() + (float("0." + fraction) if fraction else 0.0)


def _timed(extension: Any, body: bytes, notes: list[str]) -> bytes | Frames:
    """The body cut into the frames Reel's ``_reel`` extension lists."""
    if not isinstance(extension, Mapping) or "frames" not in extension:
        return body
    frames = extension["frames"]
    sizes: list[tuple[float, int]] = []
    if isinstance(frames, list):
        for frame in frames:
            if not (isinstance(frame, list) and len(frame) == 2):
                break
            at, size = _ms(frame[0]), frame[1]
            if at is None or isinstance(size, bool) or not isinstance(size, int) or size < 0:
                break
            sizes.append((at, size))
        else:
            if sum(size for _, size in sizes) == len(body):
                chunks, start = [], 0
                for at, size in sizes:
                    chunks.append((at / 1000, body[start : start + size]))
                    start += size
                end = _ms(extension.get("end_ms"))
                if end is not None:
                    chunks.append((end / 1000, b""))  # the clean end, after the last frame
                if isinstance(extension.get("cut"), Mapping):
                    notes.append("the stream was broken off in the source: it ends cleanly here")
                return frames_of(chunks)
    notes.append("the _reel frames do not cut this body: its frames are at offset 0")
    return body
