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
and the miss report's one line; every other answer Reel makes itself to
a gRPC call is a gRPC status the same way (:mod:`reel_core._own_answers`).

A message whose compressed flag is set is compressed with the call's
``grpc-encoding`` (``gzip`` or ``deflate``, told apart by their first
bytes: a stored frame needs no header to be read).  Everything that reads
a message's contents (the redaction scan, a descriptor's JSON, the
display) reads it through :func:`message_payload`: decompressed by the
core's one bounded path (:func:`reel_core._decode.decode_content`), so a
message that inflates past the limit is refused, never expanded whole.
"""

from __future__ import annotations

import enum
import zlib
from collections.abc import Callable
from urllib.parse import unquote_to_bytes

from ._decode import DecodeError, decode_content
from ._errors import RemoteProtocolError
from ._hints import Hints
from ._http import Limits

__all__ = [
    "GRPC_PREFIX",
    "GrpcSplitter",
    "GrpcStatus",
    "grpc_frame",
    "grpc_messages",
    "has_compressed",
    "is_grpc",
    "message_coding",
    "message_payload",
    "percent_decode",
    "percent_encode",
    "rescrubbed",
    "rescrubbed_body",
    "whole_frames",
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


def has_compressed(body: bytes) -> bool:
    """Whether ``body`` is whole gRPC messages with one compressed among
    them (its contents are not its bytes: a scan must decompress it)."""
    frames = whole_frames(body)
    return frames is not None and any(frame[0] for frame in frames)


def whole_frames(body: bytes) -> list[bytes] | None:
    """The frames of a body that is whole gRPC messages end to end (each
    with its prefix, a flag of 0 or 1), else ``None`` (no JSON or text body
    begins with such a byte).  An empty body is no gRPC body."""
    frames = []
    pos, size = 0, len(body)
    while pos < size:
        if size - pos < GRPC_PREFIX or body[pos] > 1:
            return None
        end = pos + GRPC_PREFIX + int.from_bytes(body[pos + 1 : pos + GRPC_PREFIX], "big")
        if end > size:
            return None
        frames.append(body[pos:end])
        pos = end
    return frames or None


def message_coding(data: bytes) -> str:
    """The coding of a compressed message, from its first bytes: ``gzip``
    (its magic number) or else ``deflate`` (zlib-wrapped as gRPC's spec
    says, or raw as some servers send it)."""
    return "gzip" if data[:2] == b"\x1f\x8b" else "deflate"


def message_payload(message: bytes, compressed: bool, limit: int = Limits.max_body) -> bytes:
    """A message's contents: ``message`` itself, or decompressed when its
    flag says it is compressed, at most ``limit`` bytes of it (raises
    :class:`~reel_core._decode.DecodeError` saying why it cannot: corrupt,
    or a bomb that inflates past the limit, refused as it inflates)."""
    if not compressed:
        return message
    return decode_content(message, (message_coding(message),), limit)


def _compressed_like(data: bytes, original: bytes) -> bytes:
    """``data`` compressed as ``original`` was: gzip, zlib-wrapped or raw
    deflate (what its reader took it for), so the client reads it back."""
    coding = message_coding(original)
    if coding == "gzip":
        wbits = zlib.MAX_WBITS | 16
    else:
        wrapped = len(original) >= 2 and original[0] & 0x0F == 8
        wrapped = wrapped and (original[0] << 8 | original[1]) % 31 == 0
        wbits = zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS
    packer = zlib.compressobj(wbits=wbits)
    return packer.compress(data) + packer.flush()


def rescrubbed(
    frame: bytes,
    scrub: Callable[[bytes], bytes],
    *,
    limit: int = Limits.max_body,
    notes: list[tuple[str, str]] | None = None,
) -> bytes:
    """A stored gRPC frame with ``scrub`` applied to its message, its
    length prefix written again for what is left (a frame that is no whole
    message, the unfinished tail of a stream, is scrubbed whole).  The
    frame stays one well-formed message; a protobuf whose string field lost
    a secret no longer parses as that message (its own lengths are not
    rewritten): no secret on disk wins over a readable message.  A
    message is rarely UTF-8 whole: ``scrub`` reads bytes that are not
    (:meth:`~reel_core.Redactor.data` scans the text between a protobuf's
    binary bytes, as it does any binary body's).

    A compressed message is scrubbed decompressed (at most ``limit``
    bytes: :func:`message_payload`) and compressed again the way it came,
    so a replay stays a valid message.  One that does not decompress (a
    bomb past the limit, corrupt data, a coding not read here) is kept as
    it came, its bytes scrubbed as they are, and ``notes`` hears its coding
    and why: the one path every stored gRPC message is scrubbed through."""
    if not (
        len(frame) >= GRPC_PREFIX
        and int.from_bytes(frame[1:GRPC_PREFIX], "big") == len(frame) - GRPC_PREFIX
    ):
        return scrub(frame)
    message = frame[GRPC_PREFIX:]
    if frame[0]:
        try:
            plain = message_payload(message, True, limit)
        except DecodeError as exc:
            if notes is not None:
                notes.append(
                    (
                        message_coding(message),
                        "a compressed gRPC message kept as it came, not scanned for "
                        f"secrets: {exc}",
                    )
                )
        else:
            scrubbed = scrub(plain)
            if scrubbed == plain:
                return frame
            return grpc_frame(_compressed_like(scrubbed, message), compressed=True)
    scrubbed = scrub(message)
    if scrubbed == message:
        return frame
    return grpc_frame(scrubbed, compressed=bool(frame[0]))


def rescrubbed_body(
    body: bytes,
    scrub: Callable[[bytes], bytes],
    *,
    limit: int = Limits.max_body,
    notes: list[tuple[str, str]] | None = None,
) -> bytes | None:
    """A body of whole gRPC messages (a request's) with each message
    :func:`rescrubbed`; ``None`` when ``body`` is no such body."""
    frames = whole_frames(body)
    if frames is None:
        return None
    return b"".join([rescrubbed(f, scrub, limit=limit, notes=notes) for f in frames])


#: Bytes ``grpc-message`` carries as they are: space and visible ASCII but
#: ``%`` (gRPC over HTTP/2, "Percent-Byte-Unencoded": %x20-%x24 / %x26-%x7E).
_UNENCODED = frozenset(range(0x20, 0x7F)) - {0x25}
_PERCENT = tuple(chr(b) if b in _UNENCODED else f"%{b:02X}" for b in range(256))


def percent_encode(text: str) -> bytes:
    """``text`` as a ``grpc-message`` value: its UTF-8 bytes, each one
    outside space and visible ASCII (and ``%``) written ``%XX``, and so are
    its leading and trailing spaces: a header value loses them (RFC 9110,
    5.5), and the message must come out as it went in.  Total: a lone
    surrogate (a text read with ``surrogateescape``) is encoded as UTF-8
    would were it a character (``surrogatepass``), never an error.  The
    value is always a legal header value that no stripping changes."""
    data = text.encode("utf-8", "surrogatepass")
    inner = data.strip(b" ")
    if not inner:
        return b"%20" * len(data)
    lead = len(data) - len(data.lstrip(b" "))
    trail = len(data) - len(data.rstrip(b" "))
    return b"%20" * lead + "".join([_PERCENT[b] for b in inner]).encode("ascii") + b"%20" * trail


def percent_decode(value: bytes) -> str:
    """A ``grpc-message`` value's text: each ``%XX`` its byte (a ``%`` that
    begins no such triple kept as it is, as the spec says), the bytes read
    as UTF-8 (:func:`percent_encode`'s lone surrogates too; bytes that are
    not UTF-8 come out as U+FFFD)."""
    data = unquote_to_bytes(value)
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace")
