"""A finished exchange to its recording, without a session.

An importer of another recorder's cassettes (or any code that holds a whole
request and its whole response) turns them into the :class:`Interaction` a
recording session would have written, through :func:`record_exchange`:
the request keyed and redacted as a recorded one is (the credential
values of its headers, query and body scrubbed from everything, its body
decoded when sent with a ``content-encoding``, read as a form when it is
one), the response through
the same :class:`~reel_core._record.Recorder` a live recording feeds
(its end-to-end headers kept, bodies decoded, SSE cut into byte-exact
frames, usage and cost in ``meta``).  Nothing is parsed back from a line.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ._body import decode_request_body
from ._cassette import Cassette
from ._forms import body_kind
from ._headers import drop_names
from ._hints import Hints
from ._http import Limits, Request, normalize_fields
from ._interaction import Interaction, RecordedRequest
from ._literals import CREDENTIAL_HEADERS, exchange_redactor, header_names
from ._match import MatchConfig
from ._providers import guess_provider
from ._redact import Redactor

if TYPE_CHECKING:
    from ._protobuf import ProtoSchema
    from ._record import Recorder

__all__ = [
    "interaction_id",
    "new_recorder",
    "plain_request",
    "record_exchange",
]

_LIMITS = Limits()
_HINTS = Hints()


def plain_request(request: Request, max_body: int) -> RecordedRequest:
    """``request`` as it is keyed and stored, not yet redacted: its body
    decoded when it was sent with a ``content-encoding`` (at most
    ``max_body`` bytes of it), read as a form when it is one.  What is
    stored is this redacted by the exchange's redactor, which collects the
    credentials it carries (:func:`~reel_core._literals.exchange_redactor`)."""
    body, encoding, error = decode_request_body(
        request.body, request.header("content-encoding"), max_body
    )
    return RecordedRequest(
        request.method,
        request.path,
        request.query,
        body,
        content_type=None if error else body_kind(request.header("content-type"), body),
        encoding=encoding,
        encoding_error=error,
    )


def interaction_id(key: str, seen: int) -> str:
    """The id of a new recording of ``key`` when ``seen`` recordings of the
    same request are already stored: the key's first 12 hex digits, then
    ``-2``, ``-3``... for the repeats."""
    return key[7:19] + (f"-{seen + 1}" if seen else "")


def new_recorder(
    request: Request,
    recorded: RecordedRequest,
    key: str,
    seen: int,
    redactor: Redactor,
    sent: str | None = None,
    drop: frozenset[str] = frozenset(),
    max_body: int = _LIMITS.max_body,
    proto: ProtoSchema | None = None,
) -> Recorder:
    """The recorder of ``request`` (stored as ``recorded`` under ``key``,
    after ``seen`` recordings of it): its provider and endpoint named.
    ``sent`` is the request's digest for its line (:mod:`reel_core._sent`);
    ``drop`` names response headers never stored (lower case); its body
    decodes to at most ``max_body`` bytes; ``proto``, a descriptor set's
    schema, reads a gRPC call's usage."""
    from ._record import Recorder  # the recorder, usage and prices: not for a replay

    host = request.header("host")
    return Recorder(
        recorded,
        key=key,
        id=interaction_id(key, seen),
        redactor=redactor,
        provider=guess_provider(
            recorded.path, host.decode("latin-1") if host else None, request.headers
        ),
        endpoint=f"{recorded.method} {recorded.path}",
        sent=sent,
        drop=drop,
        max_body=max_body,
        proto=proto,
    )


def record_exchange(
    request: Request,
    status: int,
    headers: Iterable[tuple[str | bytes, str | bytes]],
    body: bytes | Sequence[tuple[float, bytes]] = b"",
    *,
    redactor: Redactor,
    cassette: Cassette | None = None,
    credential_headers: Iterable[str] = (),
    drop_response_headers: Iterable[str] = (),
    limits: Limits = _LIMITS,
    hints: Hints = _HINTS,
    timestamp: float | None = None,
    trailers: Iterable[tuple[str | bytes, str | bytes]] = (),
    proto: ProtoSchema | None = None,
) -> Interaction:
    """The recording of a finished exchange: ``request`` answered with
    ``status``, response ``headers`` (as sent: a ``content-encoding`` body
    is decoded) and ``body``, either whole bytes or ``(seconds after the
    head, bytes)`` chunks as they came.

    ``cassette`` is the cassette it will go into: it is keyed under that
    cassette's match settings, and its id numbers it after the cassette's
    recordings of the same request; add it there with
    :meth:`Cassette.add`.  Without one it is keyed under the default
    settings.  ``credential_headers`` names request headers whose values
    are scrubbed besides the usual ones (``authorization``...);
    ``drop_response_headers`` response headers not stored, besides those
    Reel never stores and those the cassette's ``_meta`` names.
    ``timestamp`` (epoch seconds) is stored as the line's ``ts``;
    ``trailers``, the response's (HTTP/2, gRPC's status), are stored
    redacted as its headers are; ``proto``, a descriptor set's schema,
    reads a gRPC call's model and usage for ``meta``.  A body
    over ``limits.max_body`` raises :class:`~reel_core.RemoteProtocolError`
    (413; ``hints.max_body`` says how to raise it), as it does for a
    session; a response body that decodes to more is stored as it came,
    flagged (``encoding_error``).
    """
    if len(request.body) > limits.max_body:
        raise limits.body_too_large(len(request.body), hints.max_body)
    names = header_names({"headers": list(credential_headers)})
    credentials = CREDENTIAL_HEADERS | {n.encode("ascii") for n in names}
    plain = plain_request(request, limits.max_body)
    scrub = exchange_redactor(redactor, request.headers, credentials, plain)
    recorded = plain.redacted(scrub)
    keying = cassette.keying if cassette is not None else MatchConfig().keying()
    key = recorded.key(keying)
    seen = cassette.count(key, keying) if cassette is not None else 0
    drop = drop_names(drop_response_headers, "drop_response_headers")
    if cassette is not None:
        drop |= cassette.meta.drop_response_headers
    recorder = new_recorder(
        request, recorded, key, seen, scrub, drop=drop, max_body=limits.max_body, proto=proto
    )
    chunks = [(0.0, body)] if isinstance(body, bytes) else list(body)
    recorder.head(status, normalize_fields(headers), 0.0, None, timestamp)
    for at, data in chunks:
        recorder.data(data, at)
    trailing = normalize_fields(trailers)
    if trailing:
        recorder.trailers(trailing)
    return recorder.end(max((at for at, _ in chunks), default=0.0))
