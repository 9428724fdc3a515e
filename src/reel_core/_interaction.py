"""The values of a cassette line, and the line's form: frozen, compared by
value, pure functions, no I/O.

An :class:`Interaction` (a recorded request and its response) is the only
thing that crosses a cassette's boundary: readers and writers of other
formats build and take these.  How one is written as its JSON line
(:func:`interaction_line`) and read back (:func:`interaction_from_json`)
lives here beside it, so the values need nothing above them; the ``_meta``
line is :mod:`reel_core._meta`'s, a whole file :mod:`reel_core._codec`'s.

A WebSocket session (schema 2) is an interaction like any other: its
request is the upgrade ``GET``, its response the upstream's ``101`` head,
and :attr:`Interaction.websocket` (a :class:`WebSocketLog`) holds the
messages both ways and the close.  Its line says ``"stream":"websocket"``
in the response, so a Reel of schema 1 reports such a line as bad (its
reader knows only ``sse`` and ``chunks``) instead of replaying a bare 101.

A recorded call (a tool, see :mod:`reel_core._calls`) is an interaction
too: :attr:`Interaction.call` holds it, its request is the call as the
matcher keys it (:func:`call_request`) and its response an empty 200.  Its
line has ``call`` and ``result`` or ``error`` in place of ``request`` and
``response``.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ._body import cheap_body, decode_body, encode_body
from ._forms import FORM, MULTIPART, form_fields, parse_multipart, redact_form, redact_multipart
from ._grpc import has_compressed, rescrubbed, rescrubbed_body
from ._grpc_log import GRPC_SESSION, GrpcLog, grpc_in, grpc_out
from ._headers import scrub_value, stored_headers
from ._match import MatchConfig, match_key
from ._redact import Redactor

if TYPE_CHECKING:  # a call's line loads the calls' room when one is read or written
    from ._calls import Call, CallLog

__all__ = [
    "CALL_RESPONSE",
    "STREAM_KINDS",
    "UNSAFE_HEADER",
    "WS_CLOSERS",
    "WS_SENDERS",
    "Interaction",
    "RecordedRequest",
    "RecordedResponse",
    "StreamCut",
    "WebSocketClose",
    "WebSocketLog",
    "WebSocketMessage",
    "call_interaction",
    "call_request",
    "format_timestamp",
    "interaction_from_json",
    "interaction_line",
    "redact_chunks",
]

#: The kinds of a stored stream (``response.stream``) besides
#: ``"websocket"``: byte-exact SSE events, timed chunks, whole gRPC messages.
STREAM_KINDS = ("sse", "chunks", "grpc")

#: What :meth:`RecordedResponse.redacted` reports for a header it drops
#: (``set-cookie``, one of a hop, the framing, one the user names).
UNSAFE_HEADER = "unsafe-header"

_HEX = re.compile(rb"[0-9a-f]{64}")


#: Where a request read from a line keeps its JSON body's value and style
#: until it is rendered (``_unrendered_request``).
_JSON_VALUE, _JSON_STYLE = "_json_value", "_json_style"


class _RenderedOnUse:
    """``RecordedRequest.body`` where the instance has none: a request read
    from a line keeps a JSON body's value and style and renders it the
    first time ``body`` is read, then keeps the bytes (the instance's own
    ``body`` hides this descriptor from then on) and lets the value go.
    Read on the class, as a dataclass reads a field's default: ``b""``.
    Two threads may both render it: the same bytes either way."""

    def __get__(self, request: RecordedRequest | None, owner: type) -> bytes:
        if request is None:
            return b""
        # not through ``__dict__``: reading it would make the instance a
        # dict of its own, one more object for the garbage collector
        get = object.__getattribute__
        try:
            stored = {"json": get(request, _JSON_VALUE), "style": get(request, _JSON_STYLE)}
        except AttributeError:  # another thread rendered it meanwhile (body first)
            body: bytes = get(request, "body")
            return body
        body = decode_body(stored)
        object.__setattr__(request, "body", body)
        for name in (_JSON_VALUE, _JSON_STYLE):
            with contextlib.suppress(AttributeError):  # let go by another thread
                object.__delattr__(request, name)
        return body


@dataclass(frozen=True)
class RecordedRequest:
    """The stored, redacted request: never any header.  What the headers
    said about the body is kept only when it changes how the body is read.

    A request read from a cassette line holds a JSON body as stored and
    renders ``body`` when it is first asked for (a replay never needs it;
    see :func:`interaction_from_json`)."""

    method: str
    path: str
    query: tuple[tuple[str, str], ...] = ()
    #: The body as redacted and keyed: decoded when it was sent encoded.
    body: bytes = _RenderedOnUse()  # type: ignore[assignment]  # its default: b""
    #: :data:`~reel_core._forms.FORM` or :data:`~reel_core._forms.MULTIPART`
    #: for a body read as a form; ``None`` for any other body.
    content_type: str | None = None
    #: The ``content-encoding`` the body was sent with (``"gzip"``...).
    encoding: str | None = None
    #: Why a body sent with ``encoding`` did not decode (it is kept as sent).
    encoding_error: str | None = None

    def key(self, config: MatchConfig) -> str:
        return match_key(
            self.method, self.path, self.query, self.body, config, content_type=self.content_type
        )

    def redacted(
        self, redactor: Redactor, found: Callable[[str, list[str]], None] | None = None
    ) -> RecordedRequest:
        """This request with its path, query and body redacted (the one rule
        for what of a request is scrubbed).  ``found(where, kinds)`` hears
        what was replaced in ``request.path``, ``request.query`` and
        ``request.body``."""
        if (
            found is None
            and not self.query
            and self.content_type is None
            and redactor.keeps(self.path, self.body)
            and not has_compressed(self.body)  # its bytes are not what it says
        ):
            return self  # nearly every request: nothing to scrub, nothing to build
        kinds: dict[str, list[str]] = {"request.path": [], "request.query": [], "request.body": []}
        notes: list[tuple[str, str]] = []
        redacted = replace(
            self,
            path=redactor.text(self.path, kinds["request.path"]),
            query=redactor.query(self.query, kinds["request.query"]),
            body=_redact_body(self.body, self.content_type, redactor, kinds["request.body"], notes),
        )
        if notes and redacted.encoding_error is None:  # a message kept compressed, unscanned
            redacted = replace(redacted, encoding=notes[0][0], encoding_error=notes[0][1])
        if found is not None:
            for where, replaced in kinds.items():
                found(where, replaced)
        return redacted


def _redact_body(
    body: bytes,
    content_type: str | None,
    redactor: Redactor,
    found: list[str],
    notes: list[tuple[str, str]],
) -> bytes:
    """A request body redacted as what it is: form fields by the query
    string's name rules, then any text by the text rules; gRPC messages
    each by the text rules (a compressed one decompressed: ``notes`` hears
    of one that is not)."""
    if content_type == FORM and form_fields(body) is not None:
        body = redact_form(body, redactor, found)
    elif content_type == MULTIPART and parse_multipart(body) is not None:
        return redact_multipart(body, redactor, found)
    elif content_type is None:
        messages = rescrubbed_body(body, lambda data: redactor.data(data, found), notes=notes)
        if messages is not None:
            return messages
    return redactor.data(body, found)


@dataclass(frozen=True)
class StreamCut:
    """A stream the upstream broke off: where, and how."""

    #: Milliseconds after the first response byte.
    at_ms: float
    #: The failure kind (``reset``, ``timeout``, ``closed``, ``protocol``...).
    error: str
    detail: str = ""


@dataclass(frozen=True)
class RecordedResponse:
    """The stored response: a whole body, or a stream of timed frames."""

    status: int
    headers: tuple[tuple[str, str], ...] = ()
    #: The decoded body of a non-stream response.
    body: bytes = b""
    #: ``"sse"`` (byte-exact events) or ``"chunks"`` (timed chunks); ``None``
    #: for a whole body.
    stream: str | None = None
    #: ``(offset in ms from the first response byte, bytes)`` per frame.
    frames: tuple[tuple[float, bytes], ...] = ()
    #: Offset of the stream's clean end, in ms.
    end_ms: float = 0.0
    #: Set when the upstream broke the stream off.
    cut: StreamCut | None = None
    #: The ``content-encoding`` of a body stored still encoded (flagged:
    #: ``encoding_error`` says why it was not decoded); ``None`` otherwise.
    encoding: str | None = None
    #: Why such a body is stored as it came: a coding this install does not
    #: read, or more decoded bytes than the body limit.  ``reel check``
    #: fails on it.
    encoding_error: str | None = None
    #: The response's trailers (HTTP/2; a gRPC call's ``grpc-status`` and
    #: ``grpc-message``), ``(name, value)`` as the headers; replayed after
    #: the last frame, before the end.
    trailers: tuple[tuple[str, str], ...] = ()

    @property
    def content(self) -> bytes:
        """The whole body: the frames joined, for a stream."""
        if self.stream is None:
            return self.body
        return b"".join(data for _, data in self.frames)

    def redacted(
        self,
        redactor: Redactor,
        found: Callable[[str, list[str]], None] | None = None,
        *,
        drop: frozenset[str] = frozenset(),
    ) -> RecordedResponse:
        """This response redacted (the one rule for what of a response is
        scrubbed, when it is recorded, imported and by ``reel redact``):
        the headers a recording stores (:func:`~reel_core._headers.stored_headers`:
        every end-to-end one, in order, but ``set-cookie`` and the lower-case
        names in ``drop``), their values, the body, each SSE event (whole,
        so no secret is split), timed chunks (:func:`redact_chunks`) and a
        cut's detail.  ``found(where, kinds)`` hears what was replaced
        where, and each header dropped as :data:`UNSAFE_HEADER`."""

        def scrub(where: str, text: str, rule: Callable[..., str] = redactor.text) -> str:
            kinds: list[str] | None = None if found is None else []
            out = rule(text, kinds)
            if found is not None and kinds is not None:
                found(where, kinds)
            return out

        kept, dropped = stored_headers(self.headers, drop)
        if found is not None:
            for name in dropped:
                found(f"response.headers.{name}", [UNSAFE_HEADER])

        def scrubbed(where: str, pairs: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
            return tuple(
                (
                    name,
                    scrub(
                        f"response.{where}.{name.lower()}",
                        value,
                        functools.partial(scrub_value, redactor, name),
                    ),
                )
                for name, value in pairs
            )

        fields: dict[str, Any] = {"headers": scrubbed("headers", kept)}
        if self.trailers:  # the same rule as the headers: kept ones, redacted
            kept_trailers, dropped = stored_headers(self.trailers, drop)
            if found is not None:
                for name in dropped:
                    found(f"response.trailers.{name}", [UNSAFE_HEADER])
            fields["trailers"] = scrubbed("trailers", kept_trailers)
        if self.stream is None:
            kinds: list[str] | None = None if found is None else []
            fields["body"] = redactor.data(self.body, kinds)
            if found is not None and kinds is not None:
                found("response.body", kinds)
        elif self.stream == "sse":
            frames = self.frames
            if found is not None:
                redacted = []
                for i, (at, frame) in enumerate(frames):
                    kinds = []
                    redacted.append((at, redactor.data(frame, kinds)))
                    found(f"response.frames[{i}]", kinds)
                frames = tuple(redacted)
            # one scan of them all says when none needs it, the usual case
            elif not redactor.keeps(*(frame for _, frame in frames)):
                frames = tuple((at, redactor.data(frame)) for at, frame in frames)
            fields["frames"] = frames
        elif self.stream == "grpc":  # each message scrubbed, its prefix kept true
            grpc_kinds: list[str] | None = None if found is None else []
            notes: list[tuple[str, str]] = []
            fields["frames"] = tuple(
                (at, rescrubbed(frame, lambda data: redactor.data(data, grpc_kinds), notes=notes))
                for at, frame in self.frames
            )
            if found is not None and grpc_kinds is not None:
                found("response.frames", grpc_kinds)
            if notes and self.encoding_error is None:  # a message kept compressed, unscanned
                fields["encoding"], fields["encoding_error"] = notes[0]
        else:
            kinds = None if found is None else []
            fields["frames"] = tuple(redact_chunks(self.frames, redactor, kinds))
            if found is not None and kinds is not None:
                found("response.frames", kinds)
        if self.cut is not None:
            fields["cut"] = replace(self.cut, detail=scrub("response.cut", self.cut.detail))
        return replace(self, **fields)


#: Who sends a WebSocket message.
WS_SENDERS = ("client", "server")
#: Who ended a WebSocket session: a close frame from the client or the
#: server (the upstream), or a connection dropped with no close frame.
WS_CLOSERS = ("client", "server", "upstream-dropped", "client-dropped")


@dataclass(frozen=True)
class WebSocketMessage:
    """One whole WebSocket message (its frames joined), as it crossed."""

    #: ``"client"`` or ``"server"`` (:data:`WS_SENDERS`).
    sender: str
    #: Milliseconds after the upgrade (the 101) went out.
    at_ms: float
    #: The payload: UTF-8 for a text message.
    data: bytes
    #: A binary message (else a text one).
    binary: bool = False


@dataclass(frozen=True)
class WebSocketClose:
    """How a WebSocket session ended."""

    #: The close code (``None``: a close frame without one, or no close
    #: frame at all: a dropped connection).
    code: int | None
    reason: str
    #: One of :data:`WS_CLOSERS`.
    by: str
    #: Milliseconds after the upgrade.
    at_ms: float


@dataclass(frozen=True)
class WebSocketLog:
    """A recorded WebSocket session: its messages in the order they crossed
    the proxy, and its close (``None``: not recorded, as in an import)."""

    messages: tuple[WebSocketMessage, ...] = ()
    close: WebSocketClose | None = None

    def redacted(
        self, redactor: Redactor, found: Callable[[str, list[str]], None] | None = None
    ) -> WebSocketLog:
        """Every message redacted as a whole unit (a secret split across two
        messages is neither's: each is scrubbed on its own), text or binary,
        by all the rules (:meth:`Redactor.data`: the text between a binary
        message's bytes is scanned as any binary body's); the close reason
        too.  ``found(where, kinds)`` hears what was replaced in
        ``websocket.messages[i]`` and ``websocket.close``."""
        messages = []
        for i, message in enumerate(self.messages):
            kinds: list[str] = []
            data = redactor.data(message.data, kinds)
            if found is not None:
                found(f"websocket.messages[{i}]", kinds)
            messages.append(message if data == message.data else replace(message, data=data))
        close = self.close
        if close is not None:
            kinds = []
            close = replace(close, reason=redactor.text(close.reason, kinds))
            if found is not None:
                found("websocket.close", kinds)
        return WebSocketLog(tuple(messages), close)


@dataclass(frozen=True)
class Interaction:
    """One recorded exchange: a line of a cassette."""

    key: str
    id: str
    request: RecordedRequest
    response: RecordedResponse
    timestamp: str | None = None
    provider: str = "generic"
    endpoint: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict)
    #: The messages and close of a WebSocket session (the request is its
    #: upgrade, the response the 101 head); ``None`` for an HTTP exchange.
    websocket: WebSocketLog | None = None
    #: Which recording of its request this line belongs to: a re-record of a
    #: stale recording starts the next generation, and only the newest
    #: generation of a key answers (``"gen"`` on the line, absent for 0).
    generation: int = 0
    #: The SHA-256 (hex) of the request exactly as it was sent, when
    #: recording redacted nothing from it (:mod:`reel_core._sent`): a
    #: replay of the same bytes finds the key by it (``"sent"`` on the line,
    #: right after the key; absent when there is none).
    sent: str | None = None
    #: The call this line records (a tool's, see :mod:`reel_core._calls`):
    #: ``request`` is then the call as keyed (:func:`call_request`) and
    #: ``response`` an empty 200.  ``None`` for an HTTP exchange.
    call: CallLog | None = None
    #: The conversation of a gRPC session (a client-streaming or
    #: bidirectional call: :mod:`reel_core._grpc_session`), both ways; the
    #: request's body is its first client message, the response its head
    #: and trailers.  ``None`` for any other exchange.
    grpc: GrpcLog | None = None

    def redacted(
        self,
        redactor: Redactor,
        keying: MatchConfig,
        found: Callable[[str, list[str]], None] | None = None,
        *,
        drop: frozenset[str] = frozenset(),
    ) -> Interaction:
        """This interaction redacted again (``reel redact``): its request
        (:meth:`RecordedRequest.redacted`), its response
        (:meth:`RecordedResponse.redacted`, the headers named in ``drop``
        left out too), an endpoint that is not the
        request's ``METHOD path``, and the string values of ``meta``.  When
        the request changed, its key is recomputed under ``keying`` (the
        id is kept).  ``found(where, kinds)`` hears what was replaced where;
        nothing found: this very interaction."""
        changed = False

        def heard(where: str, kinds: list[str]) -> None:
            nonlocal changed
            changed = changed or bool(kinds)
            if found is not None:
                found(where, kinds)

        req = self.request
        call = self.call
        if call is not None:
            call = call.redacted(redactor, heard)
            request = call_request(call.call)
        else:
            request = req.redacted(redactor, heard)
        response = self.response.redacted(redactor, heard, drop=drop)
        websocket = None if self.websocket is None else self.websocket.redacted(redactor, heard)
        notes: list[tuple[str, str]] = []
        grpc = None if self.grpc is None else self.grpc.redacted(redactor, heard, notes)
        if notes and response.encoding_error is None:  # a message kept compressed, unscanned
            response = replace(response, encoding=notes[0][0], encoding_error=notes[0][1])
        # a body newly flagged as not scanned (a compressed gRPC message) is a change too
        changed = changed or (request.encoding_error, response.encoding_error) != (
            req.encoding_error,
            self.response.encoding_error,
        )
        endpoint = self.endpoint
        if endpoint == f"{req.method} {req.path}":
            endpoint = f"{request.method} {request.path}"
        else:
            kinds: list[str] = []
            endpoint = redactor.text(endpoint, kinds)
            heard("endpoint", kinds)
        meta = _redact_meta(dict(self.meta), "meta", redactor, heard)
        if not changed:
            return self
        key = self.key if request == req else request.key(keying)
        # the digest was of the request as the line showed it: never kept
        # beside a redacted line (it would be a digest of unredacted bytes)
        return replace(
            self,
            sent=None,
            key=key,
            request=request,
            response=response,
            endpoint=endpoint,
            meta=meta,
            websocket=websocket,
            call=call,
            grpc=grpc,
        )

    def to_line(self) -> bytes:
        """The cassette line (``\\n``-terminated UTF-8 bytes)."""
        return interaction_line(self)

    @classmethod
    def from_json(cls, obj: Any) -> Interaction:
        """Build from a parsed line; ``ValueError`` says what is wrong."""
        return interaction_from_json(obj)


def _redact_meta(
    value: Any, where: str, redactor: Redactor, found: Callable[[str, list[str]], None]
) -> Any:
    if isinstance(value, str):
        kinds: list[str] = []
        out = redactor.text(value, kinds)
        found(where, kinds)
        return out
    if isinstance(value, dict):
        return {k: _redact_meta(v, f"{where}.{k}", redactor, found) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_meta(v, f"{where}[{i}]", redactor, found) for i, v in enumerate(value)]
    return value


def redact_chunks(
    frames: Sequence[tuple[float, bytes]], redactor: Redactor, found: list[str] | None = None
) -> list[tuple[float, bytes]]:
    """Timed chunks, redacted so that no secret escapes by straddling two
    chunks (or by a chunk that splits a UTF-8 character, which the redactor
    cannot read).  Chunks are redacted one by one when that is as good as
    redacting the whole body; else they are re-cut at line ends (a JSON
    string never spans lines), each line stamped with the chunk that
    completed it; else the body is kept as one chunk.  The kinds replaced
    are appended to ``found`` when given."""
    joined = b"".join(data for _, data in frames)
    whole = redactor.data(joined, found)
    if whole == joined:
        return list(frames)
    redacted = [(at, redactor.data(data)) for at, data in frames]
    if b"".join(data for _, data in redacted) == whole:
        return redacted
    lines: list[tuple[float, bytes]] = []
    pending: list[bytes] = []
    for at, data in frames:
        cut = data.rfind(b"\n") + 1
        if cut:
            lines.append((at, redactor.data(b"".join([*pending, data[:cut]]))))
            pending = [data[cut:]]
        else:
            pending.append(data)
    rest = b"".join(pending)
    if rest:
        lines.append((frames[-1][0], redactor.data(rest)))
    if b"".join(data for _, data in lines) == whole:
        return lines
    return [(frames[-1][0], whole)]


# -- an interaction <-> its line ----------------------------------------------


def call_request(call: Call) -> RecordedRequest:
    """A call as the matcher keys and diffs it (:func:`~reel_core._calls.call_target`)."""
    from ._calls import call_target

    method, path, body = call_target(call)
    return RecordedRequest(method, path, (), body)


#: The response of every call line (its outcome is the line's ``call``).
CALL_RESPONSE = RecordedResponse(200)


def call_interaction(
    log: CallLog,
    *,
    keying: MatchConfig,
    id: str,
    timestamp: str | None = None,
    meta: Mapping[str, Any] | None = None,
    generation: int = 0,
) -> Interaction:
    """The interaction (the line) recording ``log``, keyed under ``keying``
    (the cassette's match settings): what a recording and an importer of
    calls build.  ``log`` is stored as it is: redact it first."""
    request = call_request(log.call)
    return Interaction(
        key=request.key(keying),
        id=id,
        request=request,
        response=CALL_RESPONSE,
        timestamp=timestamp,
        endpoint=f"{request.method} {request.path}",
        meta=dict(meta or {}),
        generation=generation,
        call=log,
    )


def interaction_line(interaction: Interaction) -> bytes:
    """The cassette line of ``interaction`` (``\\n``-terminated UTF-8 bytes)."""
    if interaction.call is not None:
        return _call_line(interaction, interaction.call)
    req = interaction.request
    request: dict[str, Any] = {"method": req.method, "path": req.path}
    if req.query:
        request["query"] = [list(pair) for pair in req.query]
    request["body"] = encode_body(req.body)
    if req.content_type is not None:
        request["content_type"] = req.content_type
    if req.encoding is not None:
        request["encoding"] = req.encoding
    if req.encoding_error is not None:
        request["encoding_error"] = req.encoding_error
    resp = interaction.response
    response: dict[str, Any] = {
        "status": resp.status,
        "headers": [list(pair) for pair in resp.headers],
    }
    websocket = None
    if interaction.websocket is not None:
        response["stream"] = "websocket"
        websocket = _websocket_out(interaction.websocket)
    elif interaction.grpc is not None:  # the messages are the session's
        response["stream"] = GRPC_SESSION
        if resp.cut is None:
            response["end"] = {"at": resp.end_ms}
        else:
            response["cut"] = {
                "at": resp.cut.at_ms,
                "error": resp.cut.error,
                "detail": resp.cut.detail,
            }
    elif resp.stream is None:
        response["body"] = encode_body(resp.body)
    else:
        response["stream"] = resp.stream
        if resp.stream == "grpc":  # binary messages behind a binary prefix
            response["frames"] = [[at, _base64_out(data)] for at, data in resp.frames]
        else:
            response["frames"] = [[at, _frame_out(data)] for at, data in resp.frames]
        if resp.cut is None:
            response["end"] = {"at": resp.end_ms}
        else:
            response["cut"] = {
                "at": resp.cut.at_ms,
                "error": resp.cut.error,
                "detail": resp.cut.detail,
            }
    if resp.trailers:
        response["trailers"] = [list(pair) for pair in resp.trailers]
    if resp.encoding is not None:
        response["encoding"] = resp.encoding
    if resp.encoding_error is not None:
        response["encoding_error"] = resp.encoding_error
    obj = {
        "key": interaction.key,
        **({"sent": interaction.sent} if interaction.sent is not None else {}),
        "id": interaction.id,
        "ts": interaction.timestamp,
        **({"gen": interaction.generation} if interaction.generation else {}),
        "provider": interaction.provider,
        "endpoint": interaction.endpoint,
        "request": request,
        "response": response,
    }
    if websocket is not None:
        obj["websocket"] = websocket
    if interaction.grpc is not None:
        obj["grpc"] = grpc_out(interaction.grpc)
    obj["meta"] = dict(interaction.meta)
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    # A lone surrogate (read from a "\ud800" escape) is written back as one.
    return text.encode("utf-8", "backslashreplace") + b"\n"


def _call_line(interaction: Interaction, call: CallLog) -> bytes:
    from ._calls import call_fields

    obj = {
        "key": interaction.key,
        "id": interaction.id,
        "ts": interaction.timestamp,
        **({"gen": interaction.generation} if interaction.generation else {}),
        **call_fields(call),
        "meta": dict(interaction.meta),
    }
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8", "backslashreplace") + b"\n"


def interaction_from_json(obj: Any) -> Interaction:
    """An interaction from a parsed line; ``ValueError`` says what is wrong."""
    if not isinstance(obj, dict):
        raise ValueError(
            f"not an interaction (a JSON {_json_type(obj)}, not an object): "
            "is this a Reel cassette?"
        )
    if "call" in obj:
        return _call_from_json(obj)
    if not ("key" in obj or "request" in obj or "response" in obj):
        raise ValueError(
            'not an interaction (no "request" or "response"): is this a Reel cassette?'
        )
    o: dict[str, Any] = obj
    key = _str(o, "key")
    if not key.startswith("sha256:") or not _HEX.fullmatch(key[7:].encode()):
        raise ValueError('"key" must be "sha256:" and 64 lowercase hex digits')
    req = _obj(o.get("request"), "request")
    query = req.get("query", [])
    if not isinstance(query, list) or not all(_is_pair(p) for p in query):
        raise ValueError('"request.query" must be a list of [name, value] string pairs')
    method = _str(req, "method", "request.")
    path = _str(req, "path", "request.")
    pairs = tuple((p[0], p[1]) for p in query)
    body = _cheap_body(req, "request.body")
    content_type = _optional_str(req, "content_type", "request.")
    encoding = _optional_str(req, "encoding", "request.")
    encoding_error = _optional_str(req, "encoding_error", "request.")
    if body is None:  # JSON: rendered when first read
        request = _unrendered_request(
            method, path, pairs, req["body"], content_type, encoding, encoding_error
        )
    else:
        request = RecordedRequest(method, path, pairs, body, content_type, encoding, encoding_error)
    resp = _obj(o.get("response"), "response")
    status = resp.get("status")
    if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 999:
        raise ValueError('"response.status" must be an integer from 100 to 999')
    headers = resp.get("headers", [])
    if not isinstance(headers, list) or not all(_is_pair(p) for p in headers):
        raise ValueError('"response.headers" must be a list of [name, value] string pairs')
    stream = resp.get("stream")
    fields: dict[str, Any] = {}
    websocket = grpc = None
    if "grpc" in o and stream != GRPC_SESSION:
        raise ValueError(f'a line with "grpc" needs "response.stream": "{GRPC_SESSION}"')
    if stream == "websocket":
        websocket = _websocket_in(o.get("websocket"))
    elif "websocket" in o:
        raise ValueError('a line with "websocket" needs "response.stream": "websocket"')
    elif stream is None:
        fields["body"] = _body(resp, "response.body")
    elif stream in STREAM_KINDS or stream == GRPC_SESSION:
        fields["stream"] = stream
        if stream == GRPC_SESSION:
            grpc = grpc_in(o.get("grpc"), _ms)
        else:
            fields["frames"] = _frames(resp.get("frames"))
        if "cut" in resp:
            cut = _obj(resp["cut"], "response.cut")
            fields["cut"] = StreamCut(
                _ms(cut.get("at"), "response.cut.at"),
                _str(cut, "error", "response.cut."),
                str(cut.get("detail", "")),
            )
        else:
            end = _obj(resp.get("end"), "response.end")
            fields["end_ms"] = _ms(end.get("at"), "response.end.at")
    else:
        raise ValueError(
            '"response.stream" must be "sse", "chunks", "grpc", "grpc-session" or '
            f'"websocket", not {stream!r}'
        )
    if "trailers" in resp:
        trailers = resp["trailers"]
        if not isinstance(trailers, list) or not all(_is_pair(p) for p in trailers):
            raise ValueError('"response.trailers" must be a list of [name, value] string pairs')
        fields["trailers"] = tuple((t[0], t[1]) for t in trailers)
    if "encoding_error" in resp or "encoding" in resp:  # a body Reel could not decode
        fields["encoding"] = _optional_str(resp, "encoding", "response.")
        fields["encoding_error"] = _optional_str(resp, "encoding_error", "response.")
    response = RecordedResponse(
        status=status, headers=tuple((h[0], h[1]) for h in headers), **fields
    )
    ts, meta, gen = _line_facts(o)
    sent = o.get("sent")
    if sent is not None and not (
        isinstance(sent, str) and sent.isascii() and _HEX.fullmatch(sent.encode("ascii"))
    ):
        raise ValueError('"sent" must be 64 lowercase hex digits')
    return Interaction(
        key=key,
        sent=sent,
        id=_str(o, "id"),
        request=request,
        response=response,
        timestamp=ts,
        provider=str(o.get("provider", "generic")),
        endpoint=str(o.get("endpoint", "")),
        meta=meta,
        websocket=websocket,
        generation=gen,
        grpc=grpc,
    )


def _line_facts(o: dict[str, Any]) -> tuple[str | None, dict[str, Any], int]:
    """A line's ``ts``, ``meta`` and ``gen``, checked (any kind of line)."""
    ts = o.get("ts")
    if ts is not None and not isinstance(ts, str):
        raise ValueError('"ts" must be a string or null')
    meta = o.get("meta", {})
    if not isinstance(meta, dict):
        raise ValueError('"meta" must be an object')
    gen = o.get("gen", 0)
    if not isinstance(gen, int) or isinstance(gen, bool) or gen < 0:
        raise ValueError('"gen" must be a whole number, 0 or more')
    return ts, meta, gen


def _call_from_json(o: dict[str, Any]) -> Interaction:
    """A call line (``call``, then ``result`` or ``error``) read back."""
    if "request" in o or "response" in o:
        raise ValueError('a call line has "call" and no "request" or "response"')
    key = _str(o, "key")
    if not key.startswith("sha256:") or not _HEX.fullmatch(key[7:].encode()):
        raise ValueError('"key" must be "sha256:" and 64 lowercase hex digits')
    from ._calls import call_from_json

    log = call_from_json(o)
    ts, meta, gen = _line_facts(o)
    request = call_request(log.call)
    return Interaction(  # as call_interaction, but for the key the line gives
        key=key,
        id=_str(o, "id"),
        request=request,
        response=CALL_RESPONSE,
        timestamp=ts,
        endpoint=f"{request.method} {request.path}",
        meta=meta,
        generation=gen,
        call=log,
    )


def _websocket_out(log: WebSocketLog) -> dict[str, Any]:
    """The ``websocket`` field of a line: each message's payload stored as
    a body is (a binary message always as base64, a text one never)."""
    messages = []
    for m in log.messages:
        item: dict[str, Any] = {"from": m.sender, "at": m.at_ms}
        if m.binary:
            item["base64"] = base64.b64encode(m.data).decode("ascii")
        else:
            stored = encode_body(m.data)
            item.update(stored if stored is not None else {"text": ""})
        messages.append(item)
    out: dict[str, Any] = {"messages": messages}
    if log.close is not None:
        c = log.close
        out["close"] = {"code": c.code, "reason": c.reason, "by": c.by, "at": c.at_ms}
    return out


_PAYLOAD_KEYS = ("json", "style", "text", "base64")


def _websocket_in(value: Any) -> WebSocketLog:
    ws = _obj(value, "websocket")
    items = ws.get("messages")
    if not isinstance(items, list):
        raise ValueError('"websocket.messages" must be a list of messages')
    messages = []
    last = 0.0
    for i, item in enumerate(items):
        where = f"websocket.messages[{i}]"
        m = _obj(item, where)
        sender = m.get("from")
        if sender not in WS_SENDERS:
            raise ValueError(f'"{where}.from" must be "client" or "server", not {sender!r}')
        at = _ms(m.get("at"), f"{where}.at")
        if at < last:
            raise ValueError(f'"{where}" goes back in time ({at} < {last} ms)')
        last = at
        payload = {k: m[k] for k in _PAYLOAD_KEYS if k in m}
        binary = "base64" in payload and not ("json" in payload or "text" in payload)
        try:
            data = decode_body(payload)
        except ValueError as exc:
            raise ValueError(f'"{where}": {exc}') from None
        messages.append(WebSocketMessage(sender, at, data, binary))
    close = None
    if ws.get("close") is not None:
        c = _obj(ws["close"], "websocket.close")
        code = c.get("code")
        if code is not None and (
            not isinstance(code, int) or isinstance(code, bool) or not 1000 <= code <= 4999
        ):
            raise ValueError('"websocket.close.code" must be null or an integer from 1000 to 4999')
        by = c.get("by")
        if by not in WS_CLOSERS:
            raise ValueError(
                f'"websocket.close.by" must be one of {", ".join(WS_CLOSERS)}, not {by!r}'
            )
        reason = c.get("reason", "")
        if not isinstance(reason, str):
            raise ValueError('"websocket.close.reason" must be a string')
        close = WebSocketClose(code, reason, by, _ms(c.get("at"), "websocket.close.at"))
    return WebSocketLog(tuple(messages), close)


def format_timestamp(epoch: float | None) -> str | None:
    """An ISO 8601 UTC timestamp (millisecond precision) for a wall-clock reading."""
    if epoch is None:
        return None
    from datetime import datetime, timezone  # for a recording only: not loaded by a replay

    moment = datetime.fromtimestamp(epoch, tz=timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _frame_out(data: bytes) -> Any:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return _base64_out(data)


def _base64_out(data: bytes) -> dict[str, str]:
    return {"base64": base64.b64encode(data).decode("ascii")}


#: The offsets a frame's fast check takes as they are (no ``bool``, no
#: huge ``int``): anything else is checked by ``_ms``.
_PLAIN_MS = (int, float)
_MAX_PLAIN_MS = 1e15


def _frames(value: Any) -> tuple[tuple[float, bytes], ...]:
    if not isinstance(value, list):
        raise ValueError('"response.frames" must be a list of [offset_ms, data] pairs')
    frames = []
    last = 0.0
    for i, item in enumerate(value):
        # the usual frame, [offset, text], checked at once: a long stream of
        # small frames is parsed at a few hundred nanoseconds a frame; any
        # other shape takes the checks below, which say what is wrong
        if type(item) is list and len(item) == 2:
            at, data = item
            if type(data) is str and type(at) in _PLAIN_MS and last <= at <= _MAX_PLAIN_MS:
                last = float(at)
                frames.append((last, data.encode("utf-8")))
                continue
        if not isinstance(item, list) or len(item) != 2:
            raise ValueError(f'"response.frames[{i}]" must be an [offset_ms, data] pair')
        at = _ms(item[0], f"response.frames[{i}][0]")
        if at < last:
            raise ValueError(f'"response.frames[{i}]" goes back in time ({at} < {last} ms)')
        last = at
        data = item[1]
        if isinstance(data, str):
            frames.append((at, data.encode("utf-8")))
        else:
            try:
                frames.append((at, decode_body(data)))
            except ValueError as exc:
                raise ValueError(f'"response.frames[{i}][1]": {exc}') from None
    return tuple(frames)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return "string" if isinstance(value, str) else "array"


def _obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f'"{where}" must be an object')
    return value


def _str(obj: dict[str, Any], name: str, prefix: str = "") -> str:
    value = obj.get(name)
    if not isinstance(value, str):
        raise ValueError(f'"{prefix}{name}" must be a string')
    return value


def _optional_str(obj: dict[str, Any], name: str, prefix: str) -> str | None:
    value = obj.get(name)
    if value is not None and not isinstance(value, str):
        raise ValueError(f'"{prefix}{name}" must be a string when present')
    return value


def _ms(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f'"{where}" must be a number of milliseconds >= 0')
    try:
        ms = float(value)
    except OverflowError:
        ms = math.inf
    if not math.isfinite(ms):
        raise ValueError(f'"{where}" must be a finite number of milliseconds')
    return ms


def _is_pair(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], str)
    )


def _cheap_body(obj: dict[str, Any], where: str) -> bytes | None:
    """As :func:`_body`, but ``None`` for a JSON body (its style checked),
    which is not rendered (:func:`~reel_core._body.cheap_body`)."""
    try:
        return cheap_body(obj.get("body"))
    except ValueError as exc:
        raise ValueError(f'"{where}": {exc}') from None


def _unrendered_request(
    method: str,
    path: str,
    query: tuple[tuple[str, str], ...],
    stored: dict[str, Any],
    content_type: str | None,
    encoding: str | None,
    encoding_error: str | None,
) -> RecordedRequest:
    """A request read from a line whose JSON body (``stored``, checked) is
    rendered when ``body`` is first read (:class:`_RenderedOnUse`).  Its
    fields are set one by one, as the dataclass's ``__init__`` would set
    them, all but ``body`` (a test compares it with one built whole)."""
    request = object.__new__(RecordedRequest)
    set_field = object.__setattr__
    set_field(request, "method", method)
    set_field(request, "path", path)
    set_field(request, "query", query)
    set_field(request, "content_type", content_type)
    set_field(request, "encoding", encoding)
    set_field(request, "encoding_error", encoding_error)
    set_field(request, _JSON_VALUE, stored["json"])
    set_field(request, _JSON_STYLE, stored.get("style", "compact"))
    return request


def _body(obj: dict[str, Any], where: str) -> bytes:
    try:
        return decode_body(obj.get("body"))
    except ValueError as exc:
        raise ValueError(f'"{where}": {exc}') from None
