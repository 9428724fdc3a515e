"""Recordings Reel cannot import, refused with why in one line: by
``import_source`` whatever format is named, and by ``reel import auto``
when no format recognizes the file."""

from __future__ import annotations

import json

import pytest

from reel_core import CassetteError, Redactor
from reel_core.tools import import_refusal, import_source, sniff_format

GRPC = b"""version: 1
interactions:
- request_sample:
    json:
      model: grok-4-fast-non-reasoning
    raw: !!binary |
      CiIKHgocWW91
  response_sample:
    json:
      id: 332bd54b
"""
RESPONSE = json.dumps(
    {"status": 200, "headers": {"content-type": "application/json"}, "body": '{"id": "msg_1"}'},
    indent=2,
).encode()
INDEX = b"SQLite format 3\x00" + b"\x00" * 3000 + b"CREATE TABLE recordings (request_hash TEXT"

RESPONSE_WHY = (
    "a lone HTTP response (status 200, headers, body) with no request: nothing says what was "
    "asked, so it could never match one; record the test again with Reel"
)
INDEX_WHY = (
    "the index of a Llama Stack recordings directory (index.sqlite), not a recording: import "
    "the directory that holds it and its responses/, as the llamastack format"
)


@pytest.mark.parametrize(
    ("data", "why"),
    [(RESPONSE, RESPONSE_WHY), (INDEX, INDEX_WHY)],
)
def test_a_known_recording_without_http_is_refused_whatever_format_is_named(
    data: bytes, why: str
) -> None:
    assert sniff_format(data) is None
    assert import_refusal(data) == why
    for name in ("vcr", "nock", "llamastack"):
        with pytest.raises(CassetteError) as caught:
            import_source(name, data, "f.yaml", Redactor())
        assert caught.value.reason == why


@pytest.mark.parametrize(
    "data",
    [
        b"SQLite format 3\x00" + b"\x00" * 100 + b"CREATE TABLE other (x)",  # another database
        b'{"status": 200, "body": "x", "request": {}}',  # a request beside it
        b'{"status": 200}',  # no body
        b'{"body": "x", "headers": {}}',  # no status
        b'{"status": 200, "body": "x" oops',  # not JSON
        b'[{"status": 200, "body": "x"}]',  # not an object
        b'{"log": {"status": 200, "body": "x"}}',  # another format's first key
        GRPC + b"- request:\n    uri: https://api.x.ai/v1/chat\n",  # an HTTP interaction too
        # pydantic-ai's WebSocket sessions and xAI gRPC calls import now
        # (``pydantic-ws``, ``pydantic-xai-grpc``)
        GRPC,
        b"version: 1\ninteractions:\n- kind: message\n  direction: sent\n  data: {setup: {}}\n",
        GRPC.replace(b"interactions:", b"samples:"),
        b"interactions:\n- request:\n    body: request_sample\n",
        b"",
    ],
)
def test_near_misses_are_not_refused(data: bytes) -> None:
    assert import_refusal(data) is None


def test_a_status_of_any_kind_is_named() -> None:
    data = b'{"status": "404", "statusText": "Not Found", "body": ""}'
    assert import_refusal(data) == RESPONSE_WHY.replace("status 200", "status '404'")
