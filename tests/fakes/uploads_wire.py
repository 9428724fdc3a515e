"""Request bodies that are not JSON, as the fake reads them (independently of
Reel's own parser), and the endpoints that take them.

- a ``content-encoding`` on the request (gzip, deflate) is undone first;
- ``/v1/files`` takes ``multipart/form-data`` (``purpose`` and ``file``) and
  answers an OpenAI file object;
- ``/v1/audio/transcriptions`` takes ``multipart/form-data`` (``file``,
  ``model``...) and answers ``{"text": ...}`` describing the upload;
- ``…/oauth/token`` takes ``application/x-www-form-urlencoded`` and answers
  the field names it got (never their values: some are secrets).

Ids in replies are seeded by the *parts* of a multipart body, never its
boundary (a client draws a new one per call), so equal uploads get equal
replies.
"""

from __future__ import annotations

import dataclasses
import email.parser
import email.policy
import gzip
import hashlib
import json
import zlib
from dataclasses import dataclass
from urllib.parse import parse_qsl

from .openai_wire import JSON_TYPE, headers
from .wire import ReceivedRequest, Reply, pretty

__all__ = [
    "Upload",
    "decoded",
    "file_object",
    "form_fields",
    "form_token",
    "parts_of",
    "stable_body",
    "transcription",
]

CREATED = 1735689600


def decoded(request: ReceivedRequest) -> ReceivedRequest:
    """``request`` with a gzip or deflate request body decoded (a body that
    does not decode is left as it is, and the route answers 400)."""
    encoding = (request.header("content-encoding") or "").strip().lower()
    try:
        if encoding == "gzip":
            body = gzip.decompress(request.body)
        elif encoding == "deflate":
            body = zlib.decompress(request.body)
        else:
            return request
    except (OSError, EOFError, zlib.error):
        return request
    return dataclasses.replace(request, body=body)


@dataclass(frozen=True)
class Upload:
    """One part of a multipart body."""

    name: str
    filename: str | None
    content_type: str | None
    content: bytes


def parts_of(request: ReceivedRequest) -> list[Upload] | None:
    """The parts of a ``multipart/form-data`` body, or ``None``."""
    content_type = request.header("content-type") or ""
    if not content_type.lower().startswith("multipart/form-data"):
        return None
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + request.body)
    if not message.is_multipart():
        return None
    out = []
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            return None
        filename = part.get_filename()
        payload = part.get_payload(decode=True)
        ctype = part.get("content-type")
        out.append(
            Upload(
                name,
                filename,
                str(ctype) if ctype is not None else None,
                payload if isinstance(payload, bytes) else b"",
            )
        )
    return out


def form_fields(request: ReceivedRequest) -> list[tuple[str, str]] | None:
    content_type = request.header("content-type") or ""
    if not content_type.lower().startswith("application/x-www-form-urlencoded"):
        return None
    return parse_qsl(request.body.decode("utf-8", "replace"), keep_blank_values=True)


def stable_body(request: ReceivedRequest) -> bytes:
    """What ids are seeded with: a multipart body's parts, else the body."""
    parts = parts_of(request)
    if parts is None:
        return request.body
    rows = [
        [p.name, p.filename, p.content_type, hashlib.sha256(p.content).hexdigest()] for p in parts
    ]
    return json.dumps(rows).encode()


def _field(parts: list[Upload], name: str) -> Upload | None:
    return next((p for p in parts if p.name == name), None)


def file_object(parts: list[Upload], seed: str) -> Reply | None:
    """``POST /v1/files``: the file object of the upload (``None``: a bad upload)."""
    file, purpose = _field(parts, "file"), _field(parts, "purpose")
    if file is None or purpose is None:
        return None
    out = {
        "id": f"file-{seed[:24]}",
        "object": "file",
        "bytes": len(file.content),
        "created_at": CREATED,
        "filename": file.filename or "upload",
        "purpose": purpose.content.decode("utf-8", "replace"),
        "status": "processed",
        "expires_at": None,
        "status_details": None,
    }
    return Reply(200, _headers(seed), (pretty(out),))


def transcription(parts: list[Upload], seed: str) -> Reply | None:
    """``POST /v1/audio/transcriptions``: a made-up transcript of the upload."""
    file, model = _field(parts, "file"), _field(parts, "model")
    if file is None or model is None:
        return None
    digest = hashlib.sha256(file.content).hexdigest()[:12]
    text = f"Fake transcript of {len(file.content)} bytes ({digest}) from {file.filename}."
    return Reply(200, _headers(seed), (pretty({"text": text}),))


def form_token(fields: list[tuple[str, str]], seed: str) -> Reply:
    """``POST …/oauth/token``: the names of the fields received."""
    out = {
        "token_type": "bearer",
        "expires_in": 3600,
        "fields": [name for name, _ in fields],
        "grant_type": dict(fields).get("grant_type"),
    }
    return Reply(200, _headers(seed), (pretty(out),))


def _headers(seed: str) -> tuple[tuple[str, str], ...]:
    return tuple(headers(seed, JSON_TYPE))
