"""The answers Reel makes itself: its refusals, its misses, its failures.

Theory of operation.  Most answers are the upstream's, recorded or
forwarded.  The others Reel makes itself: a miss, a request refused (a head
or body over the limits, a method it does not serve, a request it cannot
read), an upstream that could not be reached, a store that is down, a
cassette that cannot be read.  Every one of them is built here, by
:func:`own_answer`, from the request's ``content-type``, an HTTP status, a
kind and a message, and nowhere else:

- for an HTTP client, the status and Reel's JSON error body
  (:func:`error_body`: ``{"error": {"type", "code", "message", ...}}``);
- for a gRPC client (:func:`~reel_core._grpc.is_grpc`, over a protocol
  that carries trailers: HTTP/2, a gRPC channel in process), which reads only a
  ``200`` and the ``grpc-status`` trailer (any other status is an opaque
  transport error to it, and a JSON body a message it cannot parse): a
  ``200``, ``content-type: application/grpc``, no message, and the
  trailers ``grpc-status`` (the code :func:`grpc_code` gives for the
  status and, for an upstream failure, what failed) and ``grpc-message``
  (the message, :func:`~reel_core._grpc.percent_encode`\\ d).

So a gRPC request never gets a non-200 or a JSON body from Reel itself, and
an HTTP request's answers are what they always were.
"""

from __future__ import annotations

import json
from typing import Protocol

from ._events import EndOfResponse, Event, Frame, ResponseHead, Trailers
from ._grpc import GrpcStatus, is_grpc, percent_encode
from ._http import Headers


class _Summarized(Protocol):
    """A :class:`~reel_core.MissReport` (named by what is used of it: this
    room imports nothing of the miss report's)."""

    def summary(self) -> str: ...


__all__ = [
    "error_body",
    "grpc_code",
    "grpc_cut_trailers",
    "grpc_error_answer",
    "grpc_miss_answer",
    "json_response",
    "own_answer",
]

_JSON = (b"content-type", b"application/json")
_GRPC = (b"content-type", b"application/grpc")
_ENDED_AT_ONCE = EndOfResponse(0.0)

#: The gRPC status of each HTTP status Reel answers with itself (the
#: table of docs/grpc.md, "Errors Reel answers itself").  It follows the
#: meaning of Reel's own answers, not the gRPC spec's mapping of a proxy's
#: statuses: Reel knows why it refused, so its 404 (a miss, a cassette not
#: there) is ``NOT_FOUND``, not the spec's ``UNIMPLEMENTED``.
_BY_STATUS: dict[int, GrpcStatus] = {
    400: GrpcStatus.INVALID_ARGUMENT,  # a request Reel cannot read, a bad cassette name
    401: GrpcStatus.UNAUTHENTICATED,
    403: GrpcStatus.PERMISSION_DENIED,
    404: GrpcStatus.NOT_FOUND,  # a miss; a cassette that is not there
    405: GrpcStatus.UNIMPLEMENTED,  # a method Reel does not serve (CONNECT)
    408: GrpcStatus.DEADLINE_EXCEEDED,
    413: GrpcStatus.RESOURCE_EXHAUSTED,  # a body over the limit
    421: GrpcStatus.UNIMPLEMENTED,  # a path Reel does not know where to send
    429: GrpcStatus.RESOURCE_EXHAUSTED,
    431: GrpcStatus.RESOURCE_EXHAUSTED,  # a head over the limit
    500: GrpcStatus.INTERNAL,  # a cassette line that cannot be read
    501: GrpcStatus.UNIMPLEMENTED,
    502: GrpcStatus.UNAVAILABLE,  # an upstream not reached, reset, closed; a store down
    503: GrpcStatus.UNAVAILABLE,
    504: GrpcStatus.DEADLINE_EXCEEDED,  # an upstream that did not answer in time
}

#: What failed, where it says more than the status (an
#: :class:`~reel_core.UpstreamError` or :class:`~reel_core.Abort` value).
_BY_FAILURE: dict[str, GrpcStatus] = {
    "timeout": GrpcStatus.DEADLINE_EXCEEDED,
    "protocol": GrpcStatus.INTERNAL,  # the upstream answered what is not HTTP: not transient
    "client-closed": GrpcStatus.CANCELLED,
    "store": GrpcStatus.UNAVAILABLE,
}


def error_body(type_: str, message: str, **extra: object) -> bytes:
    """The JSON body of an error Reel answers itself."""
    error = {"type": type_, "code": type_, "message": message, **extra}
    return json.dumps({"error": error}, ensure_ascii=False).encode() + b"\n"


def json_response(
    status: int, body: bytes, *, head_only: bool = False, extra: Headers = ()
) -> tuple[Event, ...]:
    """The events of a JSON answer of Reel's own (``extra``: headers after
    its own)."""
    headers = (_JSON, (b"content-length", str(len(body)).encode()), *extra)
    if head_only:  # the answer to a HEAD request has no body
        return ResponseHead(status, headers), _ENDED_AT_ONCE
    return ResponseHead(status, headers), Frame(body, 0.0), _ENDED_AT_ONCE


def grpc_code(status: int, failure: str | None = None) -> GrpcStatus:
    """The gRPC status of an answer Reel makes itself with HTTP ``status``
    (``failure``: what failed upstream, an ``UpstreamError`` or ``Abort``
    value, for a failure).  A status the table does not know is ``UNKNOWN``."""
    if failure is not None and failure in _BY_FAILURE:
        return _BY_FAILURE[failure]
    return _BY_STATUS.get(status, GrpcStatus.UNKNOWN)


def grpc_error_answer(
    status: int, message: str, *, failure: str | None = None
) -> tuple[int, Headers, Headers]:
    """A gRPC client's form of an answer Reel makes itself with HTTP
    ``status``: ``200`` (the call reached a server), the head's headers and
    the trailers (:func:`grpc_code`'s code, ``message`` percent-encoded),
    and no message."""
    trailers: Headers = (
        (b"grpc-status", b"%d" % grpc_code(status, failure)),
        (b"grpc-message", percent_encode(message)),
    )
    return 200, (_GRPC,), trailers


def own_answer(
    content_type: bytes | None,
    status: int,
    kind: str,
    message: str,
    *,
    body: bytes | None = None,
    failure: str | None = None,
    trailers: bool = True,
    head_only: bool = False,
    extra: Headers = (),
) -> tuple[Event, ...]:
    """The events of an answer Reel makes itself to a request whose
    ``content-type`` is ``content_type``: the one path every such answer
    takes.

    For a gRPC request, :func:`grpc_error_answer` (``message`` in
    ``grpc-message``); for any other, ``status`` and ``body`` (by default
    :func:`error_body` of ``kind``, ``message`` and the ``failure``).
    ``trailers``: whether the client reads trailers (HTTP/2 does, HTTP/1.1
    here does not: a gRPC status it never got would leave a ``200`` that
    reads as a success, so its gRPC request gets the JSON answer).
    ``extra``: headers after Reel's own, in either form."""
    if trailers and is_grpc(content_type):
        _, headers, fields = grpc_error_answer(status, message, failure=failure)
        return ResponseHead(200, headers + extra), Trailers(fields, 0.0), _ENDED_AT_ONCE
    if body is None:
        more = {} if failure is None else {"failure": failure}
        body = error_body(kind, message, **more)
    return json_response(status, body, head_only=head_only, extra=extra)


def grpc_miss_answer(report: _Summarized) -> tuple[int, Headers, Headers]:
    """What a gRPC client gets for a miss (:func:`grpc_error_answer` of a
    404): ``NOT_FOUND`` with the report's one line (its
    :meth:`~reel_core.MissReport.summary`) in ``grpc-message``."""
    return grpc_error_answer(404, report.summary())


def grpc_cut_trailers(error: str, detail: str) -> Headers:
    """The trailers that end a gRPC call whose answer broke off after its
    head (a :class:`~reel_core.Cut`, live or replayed): what broke it
    (``error``, an ``UpstreamError`` or ``Abort`` value) as
    :func:`grpc_code` reads it, and what Reel knows of it in
    ``grpc-message``.  A gRPC client reads a reset stream as an opaque
    ``INTERNAL``; these say ``UNAVAILABLE`` for a reset or a close,
    ``DEADLINE_EXCEEDED`` for a timeout, and why."""
    return (
        (b"grpc-status", b"%d" % grpc_code(502, error)),
        (b"grpc-message", percent_encode(f"Reel: the call broke off ({error}: {detail})")),
    )
