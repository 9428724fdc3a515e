"""pydantic-ai's xAI gRPC cassettes (its ``test_xai`` tests, YAML).

The root holds ``version`` (1) and ``interactions``, each one unary call of
xAI's chat service, as pydantic-ai's test double kept it:
``request_sample`` and ``response_sample``, each with ``json`` (the
protobuf message shown as JSON, for people) and ``raw`` (``!!binary``: the
serialized protobuf message itself).  Each becomes a gRPC exchange as the
xAI SDK (``xai-sdk``) makes it over HTTP/2:

- ``POST /xai_api.Chat/GetCompletion`` on ``api.x.ai`` (the SDK's default
  host; the service and method as its generated stubs name them), a
  response whose messages carry ``delta`` (a streamed chunk) as
  ``/xai_api.Chat/GetCompletionChunk``;
- the request body: ``raw`` as one length-prefixed gRPC message,
  ``content-type: application/grpc``;
- the response: ``200``, ``content-type: application/grpc``, ``raw`` as one
  message, and the trailers ``grpc-status: 0`` (the file keeps no status: a
  recorded sample is a call that succeeded).

The file keeps no metadata (no ``authorization``) and no timing: the
message is at offset 0.  ``json`` is not read (``raw`` is the bytes sent);
an entry without ``raw`` bytes is skipped with why.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .._grpc import grpc_frame
from ._base import Exchange, Skipped
from ._fields import Skip
from ._yaml import Unsupported, load_interactions

__all__ = ["DESCRIPTION", "NAME", "TOOL", "parse", "sniff"]

NAME = "pydantic-xai-grpc"
TOOL = "pydantic-ai-xai-grpc"
DESCRIPTION = (
    "pydantic-ai's xAI gRPC cassettes (xai tests, YAML: protobuf request and response samples)"
)

HOST = "https://api.x.ai"
UNARY = "/xai_api.Chat/GetCompletion"
STREAMED = "/xai_api.Chat/GetCompletionChunk"
GRPC = (("content-type", "application/grpc"),)
#: An entry opening with ``request_sample`` (the refusal of old said so).
_SAMPLE = re.compile(rb"^-[ \t]+request_sample:[ \t]*$", re.M)
_URI = re.compile(rb"^[ \t]*(?:-[ \t]+)?uri:", re.M)


def sniff(data: bytes) -> bool:
    """An ``interactions`` list whose entries open with ``request_sample``
    (and no HTTP ``uri`` anywhere: that is a vcrpy cassette)."""
    head = data[:4096]
    return b"interactions:" in head and bool(_SAMPLE.search(head)) and not _URI.search(data)


def parse(data: bytes, name: str) -> list[Exchange | Skipped]:
    items = load_interactions(data, name, "pydantic-ai xAI gRPC")
    out: list[Exchange | Skipped] = []
    for i, item in enumerate(items):
        try:
            out.append(_call(i, item))
        except Skip as exc:
            out.append(Skipped(i, str(exc)))
    return out


def _raw(item: Mapping[str, Any], side: str) -> tuple[bytes, Any]:
    """The ``raw`` bytes of ``item[side]``, and its ``json``."""
    sample = item.get(side)
    if not isinstance(sample, Mapping):
        raise Skip(f"no {side} mapping")
    raw = sample.get("raw")
    if isinstance(raw, Unsupported):
        raise Skip(raw.reason or f"{side}.raw is a {raw.tag} value, which Reel does not construct")
    if not isinstance(raw, bytes):
        raise Skip(f"{side}.raw is a {type(raw).__name__}, not !!binary protobuf bytes")
    return raw, sample.get("json")


def _call(i: int, item: Any) -> Exchange:
    if not isinstance(item, Mapping):
        raise Skip(f"entry {i} is a {type(item).__name__}, not a mapping")
    request, _ = _raw(item, "request_sample")
    response, shown = _raw(item, "response_sample")
    path = STREAMED if _streamed(shown) else UNARY
    return Exchange(
        i,
        "POST",
        HOST + path,
        (*GRPC, ("te", "trailers")),
        grpc_frame(request),
        200,
        GRPC,
        grpc_frame(response),
        notes=(
            f"the file keeps no URL: assumed the xAI SDK's POST {path} on api.x.ai "
            "over gRPC, the samples' raw protobuf as one message each way",
            "the file keeps no status: grpc-status 0 (OK) in the trailers",
        ),
        trailers=(("grpc-status", "0"),),
    )


def _streamed(shown: Any) -> bool:
    """Whether the response as shown is a streamed chunk (its outputs
    carry ``delta``, not ``message``)."""
    outputs = shown.get("outputs") if isinstance(shown, Mapping) else None
    return isinstance(outputs, list) and any(
        isinstance(output, Mapping) and "delta" in output for output in outputs
    )
