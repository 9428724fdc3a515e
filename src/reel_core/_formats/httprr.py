"""Go httprr traces (``rsc.io/httprr``, ``golang.org/x/oscar``, langchaingo).

The first line is ``httprr trace v1``; then records, each a line ``N M``
followed by ``N`` bytes of raw HTTP request (as Go's ``Request.WriteProxy``
writes it: an absolute URL in the request line) and ``M`` bytes of raw HTTP
response (as ``Response.Write`` writes it: ``HTTP/2.0`` status lines
included).  Both are read with h11, as the core reads live traffic: a
chunked body is de-chunked, header lines ending in a bare ``\\n`` (a
scrubber's edit) are read as well.  A trace may be gzip-compressed
(``.httprr.gz``).  httprr keeps no timing; the response's ``Date`` header
is the exchange's timestamp.  A corrupt record ends the trace: the records
before it are imported, the rest reported.
"""

from __future__ import annotations

import re
import zlib

import h11

from .._decode import DecodeError, Failure, decode_content
from .._errors import CassetteError
from .._http import Limits
from .._reader import _remote_error
from ._base import Exchange, Skipped
from ._encoding import settle_encoding
from ._fields import http_date

__all__ = ["DESCRIPTION", "NAME", "parse", "sniff"]

NAME = "httprr"
DESCRIPTION = "Go httprr traces (httprr trace v1, or gzip-compressed)"

_MAGIC = b"httprr trace v1\n"
#: The most bytes a ``.httprr.gz`` trace inflates to (the one decoding limit).
_LIMIT = Limits.max_body
_GZIP = b"\x1f\x8b"
#: A record's line: the sizes of its request and its response.
_RECORD = re.compile(rb"(\d{1,15}) (\d{1,15})")

Pairs = tuple[tuple[str, str], ...]


class _Skip(Exception):
    """A record that cannot be imported, and why."""


def sniff(data: bytes) -> bool:
    """An httprr trace: its first line, plain or in gzip."""
    if data.startswith(_GZIP):
        try:
            data = zlib.decompressobj(31).decompress(data[:4096], len(_MAGIC))
        except zlib.error:
            return False
    return data.startswith(_MAGIC)


def _gunzip(data: bytes, name: str) -> bytes:
    """A ``.httprr.gz`` trace inflated (its gzip members one after the
    other) through the one bounded path: never more than the body limit."""
    try:
        return decode_content(data, ("gzip",), _LIMIT)
    except DecodeError as exc:
        if exc.failure is Failure.TOO_LARGE:
            reason = (
                f"the trace inflates to over {_LIMIT} bytes (the body limit): gunzip it "
                "yourself and import the .httprr file"
            )
        else:
            reason = f"not an httprr trace: {exc}"
        raise CassetteError(name, None, reason) from None


def parse(data: bytes, name: str) -> list[Exchange | Skipped]:
    if data.startswith(_GZIP):
        data = _gunzip(data, name)
    if not data.startswith(_MAGIC):
        first = data.split(b"\n", 1)[0][:40]
        raise CassetteError(
            name,
            None,
            f"not an httprr trace: the first line is {first!r}, not b'httprr trace v1'",
        )
    out: list[Exchange | Skipped] = []
    pos = len(_MAGIC)
    while pos < len(data):
        i = len(out)
        end = data.find(b"\n", pos)
        if end < 0:
            line = data[pos:]
            out.append(
                Skipped(i, f"the trace is cut short at byte {pos}: {line[:40]!r} ends the file")
            )
            break
        line = data[pos:end]
        sizes = _RECORD.fullmatch(line)
        if not sizes:
            out.append(
                Skipped(
                    i,
                    f"the trace is corrupt at byte {pos}: {line[:40]!r} is no 'N M' record line; "
                    "the rest of the file is not read",
                )
            )
            break
        n, m = int(sizes[1]), int(sizes[2])
        start = end + 1
        if start + n + m > len(data):
            out.append(
                Skipped(
                    i,
                    f"the trace is cut short: record {i} says {n} + {m} bytes, "
                    f"{len(data) - start} are left",
                )
            )
            break
        pos = start + n + m
        try:
            out.append(_exchange(i, data[start : start + n], data[start + n : pos]))
        except _Skip as exc:
            out.append(Skipped(i, str(exc)))
    return out


def _exchange(i: int, raw_request: bytes, raw_response: bytes) -> Exchange:
    method, target, request_headers, request_body = _read_request(raw_request)
    if method == "CONNECT":
        raise _Skip("a CONNECT request opens a tunnel: there is no answer to replay")
    status, headers, body = _read_response(method, raw_response)
    try:
        response_headers, notes = settle_encoding(headers, body)
    except ValueError as exc:
        raise _Skip(str(exc)) from None
    dates = [v for k, v in response_headers if k == "date"]
    return Exchange(
        source=i,
        method=method,
        target=target,
        request_headers=request_headers,
        request_body=request_body,
        status=status,
        response_headers=response_headers,
        body=body,
        timestamp=http_date(dates[-1]) if dates else None,
        notes=notes,
    )


def _pairs(head: h11.Request | h11.Response) -> Pairs:
    return tuple(
        (k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in head.headers.raw_items()
    )


def _events(conn: h11.Connection, data: bytes, what: str) -> list[h11.Event]:
    """Every event of one whole message in ``data`` (then the end of input)."""
    conn.receive_data(data)
    conn.receive_data(b"")
    events: list[h11.Event] = []
    try:
        while not isinstance(event := conn.next_event(), h11.EndOfMessage):
            if not isinstance(
                event, (h11.Request, h11.Response, h11.InformationalResponse, h11.Data)
            ):
                # (all input is given: h11 never waits for more; EOF came first)
                raise _Skip(f"the {what} is empty")
            events.append(event)
    except h11.RemoteProtocolError as exc:
        raise _Skip(f"the {what} is not HTTP/1.x h11 can read: {_remote_error(exc)}") from None
    extra, _ = conn.trailing_data
    if extra.strip():
        raise _Skip(
            f"{len(extra)} bytes follow the {what}'s body (its content-length or chunks end "
            "it sooner)"
        )
    return events


def _read_request(raw: bytes) -> tuple[str, str, Pairs, bytes]:
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=max(len(raw), 16384))
    head, *data = _events(conn, raw, "request")
    assert isinstance(head, h11.Request)
    body = b"".join(bytes(e.data) for e in data if isinstance(e, h11.Data))
    return head.method.decode("latin-1"), head.target.decode("latin-1"), _pairs(head), body


def _read_response(method: str, raw: bytes) -> tuple[int, Pairs, bytes]:
    conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=max(len(raw), 16384))
    conn.send(h11.Request(method=method, target="/", headers=[("host", "httprr")]))
    conn.send(h11.EndOfMessage())
    events = [
        e for e in _events(conn, raw, "response") if not isinstance(e, h11.InformationalResponse)
    ]
    head = events[0]
    assert isinstance(head, h11.Response)
    body = b"".join(bytes(e.data) for e in events if isinstance(e, h11.Data))
    # the body is de-chunked: its framing is not the stored body's
    headers = tuple((k, v) for k, v in _pairs(head) if k != "transfer-encoding")
    return head.status_code, headers, body
