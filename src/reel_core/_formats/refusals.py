"""Files that look like recordings but hold nothing Reel can import, told
apart so that ``reel import`` refuses each with why (one line), instead of
"cannot tell its format".

These are no format: no ``reel import`` subcommand reads them.  Each test
here is narrow (the file's own markers, never a word another format's file
could hold at its top), so a file of an importable format is never refused;
``import_source`` asks :func:`refusal` before any format's parser, and
``reel import auto`` asks it when no format recognizes a file.  They are kept
out of the formats' own sniffers, which stay "is this mine?" tests.
"""

from __future__ import annotations

import re

from .._nesting import load_json

__all__ = ["refusal"]

_SQLITE = b"SQLite format 3\x00"
#: A JSON object whose first key is a response's (other formats' JSON
#: files open with ``log``, ``request``, ``interactions``, ``_meta``...).
_RESPONSE_START = re.compile(rb'\s*\{\s*"(?:status|statusText|headers|body)"\s*:')
#: The fields of a lone response fixture (``fetch``'s ``Response`` init).
_RESPONSE_FIELDS = frozenset({"status", "statusText", "headers", "body"})


def refusal(data: bytes) -> str | None:
    """Why ``data`` cannot be imported, when it is one of the recordings
    Reel knows it cannot take; ``None`` otherwise."""
    head = data[:4096]
    if data.startswith(_SQLITE):
        if b"CREATE TABLE recordings" in data[:65536]:
            return (
                "the index of a Llama Stack recordings directory (index.sqlite), not a "
                "recording: import the directory that holds it and its responses/, "
                "as the llamastack format"
            )
        return None
    if _RESPONSE_START.match(head):
        return _lone_response(data)
    return None


def _lone_response(data: bytes) -> str | None:
    """A JSON object that is only a response (``status``, ``headers``,
    ``body``), as JavaScript tests keep mock fixtures."""
    try:
        doc = load_json(data)
    except ValueError:
        return None
    if (
        not isinstance(doc, dict)
        or not {"status", "body"} <= doc.keys()
        or not doc.keys() <= _RESPONSE_FIELDS
    ):
        return None
    return (
        f"a lone HTTP response (status {doc['status']!r}, headers, body) with no request: "
        "nothing says what was asked, so it could never match one; record the test again "
        "with Reel"
    )
