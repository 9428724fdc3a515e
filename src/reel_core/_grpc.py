"""gRPC's length-prefixed messages, and what a gRPC miss answers.

A gRPC body (request or response, ``content-type: application/grpc``) is a
run of messages, each a 1-byte compressed flag, a 4-byte big-endian length
and that many bytes (gRPC over HTTP/2, "Length-Prefixed-Message").  A
recording stores a gRPC response as its messages, each frame one whole
message as sent (flag and length included), stamped when its last byte
came: :class:`GrpcSplitter` cuts any chunking of the stream into them,
byte-exact, in time linear in the bytes however they are cut.

The call's status travels in the trailers (``grpc-status``, and
``grpc-message`` percent-encoded as the spec says).  A miss is not an HTTP
404 for a gRPC client, which would report an opaque transport error: it is
a ``200`` with no message and the trailers ``grpc-status: 5`` (NOT_FOUND)
and the miss report's one line (:func:`grpc_miss_answer`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Protocol

from ._errors import RemoteProtocolError
from ._hints import Hints
from ._http import Headers, Limits

__all__ = [
    "GRPC_PREFIX",
    "GrpcSplitter",
    "GrpcStatus",
    "grpc_frame",
    "grpc_messages",
    "grpc_miss_answer",
    "is_grpc",
    "percent_encode",
    "rescrubbed",
]

#: The bytes before each message: the compressed flag and the length.
GRPC_PREFIX = 5


class GrpcStatus(enum.IntEnum):
    """gRPC's status codes (``grpc-status``), with their names."""

    #: Not an error.
    OK = 0
    #: The operation was cancelled, typically by the caller.
    CANCELLED = 1
    #: An unknown error.
    UNKNOWN = 2
    #: The client gave an invalid argument.
    INVALID_ARGUMENT = 3
    #: The deadline passed before the operation completed.
    DEADLINE_EXCEEDED = 4
    #: Some requested entity was not found (what a Reel miss answers).
    NOT_FOUND = 5
    #: The entity the client tried to create already exists.
    ALREADY_EXISTS = 6
    #: The caller may not run the operation.
    PERMISSION_DENIED = 7
    #: A resource (a quota, the disk) is exhausted.
    RESOURCE_EXHAUSTED = 8
    #: The system is not in a state the operation needs.
    FAILED_PRECONDITION = 9
    #: The operation was aborted (a concurrency conflict).
    ABORTED = 10
    #: The operation went past the valid range.
    OUT_OF_RANGE = 11
    #: The operation is not implemented or supported.
    UNIMPLEMENTED = 12
    #: An internal error.
    INTERNAL = 13
    #: The service is unavailable (transient: retry).
    UNAVAILABLE = 14
    #: Unrecoverable data loss or corruption.
    DATA_LOSS = 15
    #: The request has no valid credentials.
    UNAUTHENTICATED = 16


def is_grpc(content_type: str | bytes | None) -> bool:
    """Whether a ``content-type`` is gRPC's: ``application/grpc``, or
    ``application/grpc+proto`` and the other ``+format`` ones (case and
    parameters aside; ``application/grpc-web`` is another protocol)."""
    if content_type is None:
        return False
    if isinstance(content_type, bytes):
        content_type = content_type.decode("latin-1")
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/grpc" or media.startswith("application/grpc+")


def grpc_frame(message: bytes, *, compressed: bool = False) -> bytes:
    """``message`` length-prefixed, as it goes on the wire."""
    return bytes([compressed]) + len(message).to_bytes(4, "big") + message


def _too_large(length: int, limit: int, hint: str) -> RemoteProtocolError:
    return RemoteProtocolError(
        f"gRPC message of {length} bytes is over the {limit}-byte body limit: {hint}", 413
    )


class GrpcSplitter:
    """Incremental gRPC message splitter.

    ``feed`` returns the whole messages (prefix included) a chunk
    completes; ``close`` returns what is left when the stream ends (the
    bytes of a message that never completed, or nothing).  Joined, they
    are exactly the bytes fed.

    Linear in the bytes fed, however they are cut: the unfinished tail is
    one growing buffer, and a message's length is read once, when its
    prefix is whole; a message over ``max_message`` bytes raises
    :class:`~reel_core.RemoteProtocolError` as soon as its prefix says so
    (``hint`` says how to raise the limit).
    """

    def __init__(self, max_message: int = Limits.max_body, hint: str = Hints.max_body) -> None:
        self._max = max_message
        self._hint = hint
        self._buf = bytearray()
        self._need = GRPC_PREFIX  # buffered bytes that complete the next step
        self._prefixed = False  # the buffered prefix was read (_need is the whole)

    def feed(self, data: bytes) -> list[bytes]:
        """Buffer ``data``; return the messages it completes."""
        buf = self._buf
        buf += data
        out: list[bytes] = []
        pos = 0  # start of the message being read
        while len(buf) - pos >= self._need:
            if not self._prefixed:
                length = int.from_bytes(buf[pos + 1 : pos + GRPC_PREFIX], "big")
                if length > self._max:
                    raise _too_large(length, self._max, self._hint)
                self._need = GRPC_PREFIX + length
                self._prefixed = True
                continue
            end = pos + self._need
            out.append(bytes(buf[pos:end]))
            pos = end
            self._need, self._prefixed = GRPC_PREFIX, False
        if pos:  # drop what was handed out: what is left came in ``data``
            del buf[:pos]
        return out

    def close(self) -> bytes:
        """End of stream: the bytes of an unfinished message (``b""`` when
        the stream ended on a message boundary)."""
        rest = bytes(self._buf)
        self._buf = bytearray()
        self._need, self._prefixed = GRPC_PREFIX, False
        return rest


def grpc_messages(
    body: bytes, max_message: int = Limits.max_body, hint: str = Hints.max_body
) -> list[bytes]:
    """The messages of a whole gRPC body, each without its prefix.  A body
    that ends inside a message, or holds one over ``max_message`` bytes,
    raises :class:`~reel_core.RemoteProtocolError` saying so (``hint``: how
    to raise the limit, as :attr:`~reel_core.Hints.max_body` words it)."""
    messages = []
    pos, size = 0, len(body)
    while pos < size:
        if size - pos < GRPC_PREFIX:
            raise RemoteProtocolError(
                f"gRPC body truncated: {size - pos} bytes at offset {pos} are not a "
                f"whole {GRPC_PREFIX}-byte message prefix",
                400,
            )
        length = int.from_bytes(body[pos + 1 : pos + GRPC_PREFIX], "big")
        if length > max_message:
            raise _too_large(length, max_message, hint)
        end = pos + GRPC_PREFIX + length
        if end > size:
            raise RemoteProtocolError(
                f"gRPC body truncated: the message at offset {pos} declares {length} "
                f"bytes and {size - pos - GRPC_PREFIX} follow",
                400,
            )
        messages.append(body[pos + GRPC_PREFIX : end])
        pos = end
    return messages


def rescrubbed(frame: bytes, scrub: Callable[[bytes], bytes]) -> bytes:
    """A stored gRPC frame with ``scrub`` applied to its message, its
    length prefix written again for what is left (a frame that is no whole
    message, the unfinished tail of a stream, is scrubbed whole).  The
    frame stays one well-formed message; a protobuf whose string field lost
    a secret no longer parses as that message (its own lengths are not
    rewritten): no secret on disk wins over a readable message."""
    if (
        len(frame) >= GRPC_PREFIX
        and int.from_bytes(frame[1:GRPC_PREFIX], "big") == len(frame) - GRPC_PREFIX
    ):
        message = frame[GRPC_PREFIX:]
        scrubbed = scrub(message)
        if scrubbed == message:
            return frame
        return grpc_frame(scrubbed, compressed=bool(frame[0]))
    return scrub(frame)


class _Summarized(Protocol):
    """A :class:`~reel_core.MissReport` (named by what is used of it: this
    room imports nothing of the miss report's)."""

    def summary(self) -> str: ...


#: Bytes ``grpc-message`` carries as they are: space and visible ASCII but
#: ``%`` (gRPC over HTTP/2, "Percent-Byte-Unencoded": %x20-%x24 / %x26-%x7E).
_UNENCODED = frozenset(range(0x20, 0x7F)) - {0x25}


def percent_encode(text: str) -> bytes:
    """``text`` as a ``grpc-message`` value: its UTF-8 bytes, each one
    outside space and visible ASCII (and ``%``) written ``%XX``."""
    return "".join(
        chr(byte) if byte in _UNENCODED else f"%{byte:02X}" for byte in text.encode("utf-8")
    ).encode("ascii")


def grpc_miss_answer(report: _Summarized) -> tuple[int, Headers, Headers]:
    """What a gRPC client gets for a miss: the status (``200``: the call
    reached a server), the head's headers and the trailers, and no message.
    The trailers say ``NOT_FOUND`` with the report's one line (its
    :meth:`~reel_core.MissReport.summary`) in ``grpc-message``."""
    headers: Headers = ((b"content-type", b"application/grpc"),)
    trailers: Headers = (
        (b"grpc-status", b"%d" % GrpcStatus.NOT_FOUND),
        (b"grpc-message", percent_encode(report.summary())),
    )
    return 200, headers, trailers
