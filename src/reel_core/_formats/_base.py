"""What every importer shares: the neutral exchange, and its recording.

An importer reads one other tool's cassette format.  It is a pure function,
``parse(data, name) -> list[Exchange | Skipped]``: bytes in, the exchanges
the file holds out (in the file's order), and for each entry it cannot
take, why.  It decides nothing Reel decides: :func:`import_exchanges`
records every exchange through :func:`reel_core.record_exchange`, the same
redaction, keying, decoding, SSE framing and usage as a live recording.
A WebSocket session (an exchange whose ``websocket`` is set: the upgrade
``GET`` and its messages) goes through the same
:class:`~reel_core.WebSocketRecorder` the proxy feeds.  A function call
another tool recorded (a :class:`CallEntry`: a tool, a retrieval, a memory
read or write) goes through the same call engine a boundary's recording
does, in record mode; the freeze base values a source keeps
(:class:`Bases`) go into the new cassette's ``_meta``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from .._calls import Call, CallError, CallResult
from .._cassette import Cassette
from .._errors import ReelError
from .._exchange import plain_request, record_exchange
from .._freeze import Freeze
from .._hints import Hints
from .._http import Limits, Request
from .._interaction import Interaction, WebSocketLog, interaction_from_json
from .._literals import CREDENTIAL_HEADERS, exchange_redactor
from .._meta import CassetteMeta
from .._nesting import load_json
from .._redact import Redactor
from .._shown_url import shown_url
from .._websocket import WebSocketRecorder

if TYPE_CHECKING:
    from .._call_engine import CallEngine

__all__ = [
    "Bases",
    "CallEntry",
    "Exchange",
    "ImportReport",
    "Skipped",
    "frames_of",
    "import_exchanges",
]

Pairs = tuple[tuple[str, str], ...]

_LIMITS = Limits()
_HINTS = Hints()


@dataclass(frozen=True)
class Exchange:
    """One request and the answer another tool stored for it.

    ``target`` is an absolute URL (``https://host/path?query``; the host
    becomes the ``host`` header unless one is given) or a bare
    ``/path?query``.  ``body`` is the response body as the wire carried it
    (still content-encoded when ``response_headers`` say so), whole, or as
    ``(seconds after the head, bytes)`` chunks when the source kept timing.
    """

    #: The entry's position in the source (0-based), for the report.
    source: int
    method: str
    target: str
    request_headers: Pairs
    request_body: bytes
    status: int
    response_headers: Pairs
    body: bytes | tuple[tuple[float, bytes], ...]
    #: Seconds from sending the request to the response head, when known.
    ttfb: float | None = None
    #: When it was recorded (epoch seconds), when known.
    timestamp: float | None = None
    #: What was assumed or adjusted on the way (said in the report).
    notes: tuple[str, ...] = ()
    #: A WebSocket session: the messages after the upgrade (``status``
    #: 101, ``body`` empty), their offsets in ms from it, and its close.
    websocket: WebSocketLog | None = None
    #: The response's trailers (a gRPC call's ``grpc-status``), if any.
    trailers: Pairs = ()

    @property
    def timed(self) -> bool:
        """Whether the source kept the timing of the body (of a session:
        any message or the close at an offset other than 0)."""
        if self.websocket is not None:
            close = self.websocket.close
            return any(m.at_ms for m in self.websocket.messages) or bool(close and close.at_ms)
        return not isinstance(self.body, bytes)


@dataclass(frozen=True)
class CallEntry:
    """A function call another tool recorded (a tool, a retrieval, a memory
    read or write): what was asked and how it ended, as Reel's boundaries
    record them (see :mod:`reel_core._calls`)."""

    #: The entry's position in the source (0-based), for the report.
    source: int
    call: Call
    outcome: CallResult | CallError
    #: How long the call took (ms), when known.
    total_ms: float | None = None
    #: When it was recorded (epoch seconds), when known.
    timestamp: float | None = None
    #: What was assumed or adjusted on the way (said in the report).
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Bases:
    """The ``freeze`` base values a source keeps (its clock, uuid and random
    values): they go into the new cassette's ``_meta``, so that a replay
    under ``freeze=`` sees what the source's run saw.  Not an entry."""

    source: int
    freeze: Freeze


@dataclass(frozen=True)
class Skipped:
    """An entry of the source that is not imported, and why (one line)."""

    source: int
    reason: str


@dataclass
class ImportReport:
    """What one source file became."""

    #: The format's name (``vcr``, ``har``...), stored as ``meta.imported``.
    tool: str
    #: The interactions recorded, in the source's order.
    interactions: list[Interaction] = field(default_factory=list)
    #: The source position of each interaction.
    sources: list[int] = field(default_factory=list)
    #: ``(source position, why)`` of each entry that could not be imported.
    failures: list[tuple[int, str]] = field(default_factory=list)
    #: ``(source position, note)``: what was assumed or adjusted.
    notes: list[tuple[int, str]] = field(default_factory=list)
    #: How many entries the source holds.
    total: int = 0
    #: The new cassette's ``_meta`` (its salt is the one used to redact).
    meta: CassetteMeta = field(default_factory=CassetteMeta)
    #: How the report names a source position, when not ``interaction N``
    #: (a directory's files: ``responses/ab12.json: interaction 0``).
    labels: dict[int, str] = field(default_factory=dict)

    def label(self, source: int) -> str:
        """How the report names the entry at ``source``."""
        return self.labels.get(source, f"interaction {source}")

    def dumps(self) -> bytes:
        """The cassette: its ``_meta`` line, then one line per interaction."""
        return self.meta.to_line() + b"".join(ix.to_line() for ix in self.interactions)


def _octets(text: str) -> bytes:
    """A header's text as bytes: latin-1, as HTTP/1.1 carries it; text
    outside it (a hand edit) as UTF-8 with escapes."""
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace")


def _wire(pairs: Pairs) -> tuple[tuple[bytes, bytes], ...]:
    return tuple((_octets(k), _octets(v)) for k, v in pairs)


def _authority(target: str) -> str:
    """The authority of an absolute ``target`` (``""`` for a path)."""
    if "://" not in target:
        return ""
    return re.split(r"[/?#]", target.split("://", 1)[1], maxsplit=1)[0]


def _bad_authority(target: str) -> str | None:
    """Why an absolute ``target``'s authority is not ``[userinfo@]host[:port]``,
    or ``None``.  A password with an unencoded ``/``, ``?`` or ``#`` ends the
    authority early (``user:pa`` of ``user:pa/ss@host``): the rest of the
    password would be stored as the path."""
    host = _authority(target).rpartition("@")[2]
    _, colon, port = host.rpartition("]")[2].partition(":")
    if colon and not port.isdigit():
        return (
            f"the url's host is not host[:port]: {shown_url(target, limit=80)} (a password "
            "with /, ? or # in it must be percent-encoded)"
        )
    return None


def _request(exchange: Exchange) -> Request:
    headers = list(exchange.request_headers)
    if "://" in exchange.target:
        host = _authority(exchange.target).rpartition("@")[2]  # never the userinfo
        if host and not any(k.lower() == "host" for k, _ in headers):
            headers.append(("host", host))
    return Request(exchange.method, exchange.target, _wire(tuple(headers)), exchange.request_body)


def import_exchanges(
    items: Iterable[Exchange | CallEntry | Bases | Skipped],
    *,
    tool: str,
    redactor: Redactor,
    meta: CassetteMeta | None = None,
    name: str = "import.jsonl",
    limits: Limits = _LIMITS,
    hints: Hints = _HINTS,
) -> ImportReport:
    """Record every exchange of ``items`` as Reel would have recorded it.

    Repeats of a request are numbered in the source's order.  An exchange
    the core cannot record (a body over the limit, a body that does not
    decode, or decodes to more than ``limits.max_body``) is a failure with
    the core's reason: nothing is stored in an encoding Reel cannot read.  Without timing in the
    source, every frame is at offset 0 and the timing figures are ``null``.
    """
    report = ImportReport(tool, meta=meta if meta is not None else CassetteMeta())
    entries: list[Exchange | CallEntry | Skipped] = []
    for item in items:
        if isinstance(item, Bases):
            kept = report.meta.freeze.merged(item.freeze)
            report.meta = replace(report.meta, freeze=kept)
        else:
            entries.append(item)
    cassette = Cassette(name, report.meta)
    report.total = len(entries)
    calls = None
    for item in entries:
        if isinstance(item, Skipped):
            report.failures.append((item.source, item.reason))
            continue
        if isinstance(item, CallEntry):
            if calls is None:
                from .._call_engine import CallEngine
                from .._config import Config, Mode

                calls = CallEngine(cassette, Config(mode=Mode.RECORD, redactor=redactor))
            interaction = _call(calls, item, tool)  # checked JSON: it records
            report.interactions.append(interaction)
            report.sources.append(item.source)
            report.notes.extend((item.source, note) for note in item.notes)
            continue
        bad = _bad_authority(item.target)
        if bad is not None:
            report.failures.append((item.source, bad))
            continue
        try:
            interaction = record_exchange(
                _request(item),
                item.status,
                _wire(item.response_headers),
                item.body,
                redactor=redactor,
                cassette=cassette,
                timestamp=item.timestamp,
                limits=limits,
                hints=hints,
                trailers=_wire(item.trailers),
            )
            if item.websocket is not None:
                interaction = _session(item, item.websocket, interaction, redactor)
        except ReelError as exc:
            report.failures.append((item.source, str(exc)))
            continue
        cut = interaction.response.cut
        if cut is not None:
            report.failures.append((item.source, f"the body could not be decoded: {cut.detail}"))
            continue
        undecoded = _undecoded(interaction)
        if undecoded is not None:
            report.failures.append((item.source, undecoded))
            continue
        cassette.add(interaction)  # its repeats are numbered after it
        report.interactions.append(_stamp(interaction, item, tool))
        report.sources.append(item.source)
        report.notes.extend((item.source, note) for note in item.notes)
    return report


def _call(engine: CallEngine, item: CallEntry, tool: str) -> Interaction:
    """The recording of an imported call, made (and added to the cassette)
    by the call engine as a boundary's is; a time the source did not keep
    is unknown (``null``)."""
    from .._call_engine import CallRun

    run = engine.decide(item.call)
    assert isinstance(run, CallRun)  # record mode runs every call
    recorded = engine.finish(run, item.outcome, total_ms=item.total_ms or 0.0, wall=item.timestamp)
    assert recorded is not None  # record mode records
    interaction = interaction_from_json(load_json(recorded.line))
    meta = dict(interaction.meta, imported=tool)
    if item.total_ms is None:
        meta.update(total_ms=None)
    return replace(interaction, meta=meta)


def _undecoded(interaction: Interaction) -> str | None:
    """Why an imported entry would be stored in an encoding Reel cannot
    read (then it is not imported), or ``None``."""
    for where, error in (
        ("request", interaction.request.encoding_error),
        ("response", interaction.response.encoding_error),
    ):
        if error is not None:
            return f"the {where} body could not be decoded: {error}"
    return None


def _session(
    item: Exchange, log: WebSocketLog, upgrade: Interaction, redactor: Redactor
) -> Interaction:
    """The recording of an imported WebSocket session: ``upgrade`` (its
    ``GET`` and 101, recorded) with the messages, redacted as the proxy's
    recording is, and the close the source kept (``None``: none)."""
    request = _request(item)
    plain = plain_request(request, Limits().max_body)
    scrub = exchange_redactor(redactor, request.headers, CREDENTIAL_HEADERS, plain)
    recorder = WebSocketRecorder(request, scrub, opened=0.0)
    for message in log.messages:
        feed = recorder.client_message if message.sender == "client" else recorder.server_message
        feed(message.data, message.binary, message.at_ms / 1000)
    last = max((m.at_ms for m in log.messages), default=0.0)
    close = log.close
    if close is not None:
        recorder.closed(close.code, close.reason, close.by, close.at_ms / 1000)
    session = recorder.finish(upgrade, mono=last / 1000)
    if close is not None:
        return session
    assert session.websocket is not None  # finish() closed it as dropped: it was not
    meta = dict(session.meta, total_ms=last)
    return replace(session, websocket=replace(session.websocket, close=None), meta=meta)


def _stamp(interaction: Interaction, item: Exchange, tool: str) -> Interaction:
    """Timing figures the source did not keep are unknown (``null``), not 0;
    a time to first byte it kept is stored, and counted in the total."""
    meta = dict(interaction.meta)
    if not item.timed:
        meta.update(total_ms=None, ttft_ms=None)
    if item.ttfb is None:
        meta.update(ttfb_ms=None)
    else:
        ttfb_ms = round(item.ttfb * 1000, 1)
        meta.update(ttfb_ms=ttfb_ms)
        total = meta.get("total_ms")
        if isinstance(total, (int, float)):
            meta.update(total_ms=round(total + ttfb_ms, 1))
    meta.update(imported=tool)
    return replace(interaction, meta=meta)


def frames_of(chunks: Sequence[tuple[float, bytes]]) -> tuple[tuple[float, bytes], ...]:
    """``chunks`` as an :class:`Exchange` body (offsets never go back)."""
    out: list[tuple[float, bytes]] = []
    last = 0.0
    for at, data in chunks:
        last = max(last, at)
        out.append((last, data))
    return tuple(out)
