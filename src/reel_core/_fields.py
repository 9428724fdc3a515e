"""Header fields as each protocol carries them: checked, never rewritten.

Theory of operation.  RFC 9113 (8.2.1) forbids an HTTP/2 field value that
starts or ends with a space or a tab, and h2 holds to it both ways: with
``validate_inbound_headers`` it refuses such a field (the whole connection
fails), with ``normalize_outbound_headers`` it strips it.  But gRPC's
``grpc-message`` is Percent-Encoded with the space left as it is, and
grpcio sends a status's details that start or end with one as they are
(``grpc-message: " no more"``): refused, the call's status became Reel's
``INTERNAL`` where the server said ``FAILED_PRECONDITION``; stripped, a
replay said ``"no more"``.  A wrong answer either way.

So Reel's HTTP/2 connections turn both off and do the work here, once per
header block:

- :func:`check_received` applies every rule of h2's inbound validation
  but the whitespace one: no NUL, CR or LF in a value; a name not empty,
  lower-case, of legal bytes, a colon only to start a pseudo-header; no
  connection-specific field; ``te`` only ``trailers``; pseudo-header fields
  known, once each, before the others, none in trailers, those a request
  or a response needs and no other; a request's ``host`` and
  ``:authority`` agreeing, its ``:path`` not empty.  It raises
  :class:`RemoteProtocolError` saying which rule the peer broke.
- :func:`h2_sent` is what h2's outbound normalization did, values kept:
  names lower-case, the fields of one hop left out.  A value no peer may
  be sent (NUL, CR, LF: a line smuggled into the client's framing) or a
  name no HTTP/2 peer takes raises :class:`LocalProtocolError`: such a
  field comes from a line edited by hand, never from a recording.
- :func:`h11_sent` is the same for an HTTP/1.1 head (h11 refuses a value
  with surrounding whitespace): there the whitespace around a value is the
  field's padding, which every HTTP/1.1 reader strips (RFC 9110 5.5), so
  it is left out, as the client would have read it.

The core keeps a response's values as they came (:func:`~reel_core._http.
normalize_fields`): a recording holds what the upstream sent, and each
adapter says it in its own protocol.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence

from ._errors import LocalProtocolError, RemoteProtocolError
from ._http import HOP_BY_HOP

__all__ = ["HeaderBlock", "check_received", "h2_sent", "h11_sent"]

#: Fields of one connection, never in an HTTP/2 message (RFC 9113 8.2.2;
#: h2's ``CONNECTION_HEADERS``).
CONNECTION_SPECIFIC = frozenset(
    {b"connection", b"proxy-connection", b"keep-alive", b"transfer-encoding", b"upgrade"}
)
#: Fields an HTTP/2 response never carries (the adapters write their own
#: pseudo-header fields).
_NOT_SENT = HOP_BY_HOP | CONNECTION_SPECIFIC | {b"host"}

_PSEUDO = frozenset({b":method", b":scheme", b":authority", b":path", b":status", b":protocol"})
_REQUEST_ONLY = frozenset({b":method", b":scheme", b":authority", b":path", b":protocol"})

#: The bytes no field value may hold, at any position (RFC 9113 8.2.1).
_NOT_IN_VALUE = frozenset(b"\x00\r\n")
_BYTE_NAMES = {0x00: "NUL", 0x0D: "CR", 0x0A: "LF"}


class HeaderBlock(enum.Enum):
    """Which header block of a message a header list is."""

    #: A request's head (``:method`` and its company).
    REQUEST = "request"
    #: A response's head, final or informational (``:status``).
    RESPONSE = "response"
    #: The fields after a body (no pseudo-header field).
    TRAILERS = "trailers"


def _bad_name(name: bytes) -> str | None:
    """Why ``name`` may not be an HTTP/2 field name, or ``None``."""
    if not name:
        return "an empty header name"
    for byte in name:
        if 0x41 <= byte <= 0x5A:
            return f"an uppercase header name {name!r}"
        if byte <= 0x20 or byte >= 0x7F:
            return f"an illegal byte {bytes([byte])!r} in the header name {name!r}"
    if name.find(b":", 1) != -1:
        return f"a colon inside the header name {name!r}"
    return None


def _bad_value(name: bytes, value: bytes) -> str | None:
    """Why ``value`` may not be a field value, or ``None``."""
    if _NOT_IN_VALUE.isdisjoint(value):
        return None
    byte = next(b for b in value if b in _NOT_IN_VALUE)
    return f"a {_BYTE_NAMES[byte]} byte in the value of {name!r}"


def check_received(headers: Sequence[tuple[bytes, bytes]], block: HeaderBlock) -> None:
    """Check a header block received over HTTP/2 as h2's validation does,
    but for its rule against a value that starts or ends with a space or a
    tab (see the module's docstring).  Raises :class:`RemoteProtocolError`
    (400) naming the rule the peer broke."""

    def refuse(why: str) -> RemoteProtocolError:
        return RemoteProtocolError(f"malformed HTTP/2 {block.value} header block: {why}")

    pseudo: dict[bytes, bytes] = {}
    hosts: list[bytes] = []
    regular = False
    for name, value in headers:
        why = _bad_name(name) or _bad_value(name, value)
        if why is not None:
            raise refuse(f"{why} (RFC 9113 8.2.1)")
        if name.startswith(b":"):
            if name in pseudo:
                raise refuse(f"the pseudo-header field {name!r} twice")
            if regular:
                raise refuse(f"the pseudo-header field {name!r} after a regular field")
            if name not in _PSEUDO:
                raise refuse(f"an unknown pseudo-header field {name!r}")
            pseudo[name] = value
            continue
        regular = True
        if name in CONNECTION_SPECIFIC:
            raise refuse(f"the connection-specific field {name!r} (RFC 9113 8.2.2)")
        if name == b"te" and value.lower() != b"trailers":
            raise refuse(f"te: {value!r} (only 'trailers' is allowed)")
        if name == b"host":
            hosts.append(value)
    _check_pseudo(pseudo, hosts, block, refuse)


def _check_pseudo(
    pseudo: dict[bytes, bytes],
    hosts: list[bytes],
    block: HeaderBlock,
    refuse: Callable[[str], RemoteProtocolError],
) -> None:
    """The pseudo-header fields a block of its kind needs, and no other
    (RFC 9113 8.3, RFC 8441 for ``:protocol``)."""
    if block is HeaderBlock.TRAILERS:
        if pseudo:
            raise refuse(f"pseudo-header fields in trailers: {sorted(pseudo)}")
        return
    if block is HeaderBlock.RESPONSE:
        if b":status" not in pseudo:
            raise refuse("no :status")
        extra = sorted(pseudo.keys() & _REQUEST_ONLY)
        if extra:
            raise refuse(f"request pseudo-header fields in a response: {extra}")
        return
    method = pseudo.get(b":method")
    if method is None:
        raise refuse("no :method")
    if b":status" in pseudo:
        raise refuse("the response pseudo-header field :status in a request")
    if method == b"CONNECT" and b":protocol" not in pseudo:
        if b":scheme" in pseudo or b":path" in pseudo:
            raise refuse("a CONNECT request with :scheme or :path")
    else:
        for needed in (b":scheme", b":path"):
            if needed not in pseudo:
                raise refuse(f"no {needed.decode()}")
        if b":protocol" in pseudo and method != b"CONNECT":
            raise refuse(":protocol in a request that is no CONNECT")
    if len(hosts) > 1:
        raise refuse("more than one host field")
    authority = pseudo.get(b":authority")
    if authority is None and not hosts:
        raise refuse("neither :authority nor host")
    if authority is not None and hosts and hosts[0] != authority:
        raise refuse(f":authority {authority!r} and host {hosts[0]!r} differ")
    if pseudo.get(b":path") == b"":
        raise refuse("an empty :path")


def h2_sent(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The fields of ``headers`` an HTTP/2 response sends, values byte for
    byte as given: names lower-case, and no field of one hop, no ``host``,
    no empty name, no pseudo-header field (the adapter writes its own; a
    HAR of an HTTP/2 page imported with its ``:status``, say).  Raises
    :class:`LocalProtocolError` for a value holding NUL, CR or LF, or a
    name no HTTP/2 peer takes."""
    sent = []
    for key, value in headers:
        name = key.lower()
        if not name or name in _NOT_SENT or name.startswith(b":"):
            continue
        why = _bad_name(name) or _bad_value(name, value)
        if why is not None:
            raise LocalProtocolError(
                f"a response field no HTTP/2 client may be sent: {why} (RFC 9113 8.2.1); "
                "fix the header on its cassette line"
            )
        sent.append((name, value))
    return sent


def h11_sent(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """``headers`` for an HTTP/1.1 head: each value without the spaces and
    tabs around it, the padding every HTTP/1.1 reader strips (RFC 9110 5.5),
    which h11 refuses to write."""
    return [(name, value.strip(b" \t")) for name, value in headers]
