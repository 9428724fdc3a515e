"""What marks a call's line (:mod:`reel_core._calls`), for the cassette's
index: the method a call is keyed as, and the text its line holds.  A room
of its own, so that a cassette, which asks every line it indexes whether
it records calls, need not load the calls' values and their redaction (a
replay of HTTP exchanges never does)."""

from __future__ import annotations

import json

__all__ = ["CALL_METHOD", "COMPACT", "call_marker"]

#: The method of the request a call is keyed as: no HTTP client's.
CALL_METHOD = "CALL"
#: A call's arguments and results are written compactly, in the order given.
COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def call_marker(path: str) -> bytes:
    """The text every line recording calls to ``path`` (``KIND:NAME``)
    holds, as written: a reader finds such lines without parsing the rest."""
    kind, _, name = path.partition(":")
    text = COMPACT.encode({"name": name, "kind": kind})
    return text[1:-1].encode("utf-8", "surrogatepass")
