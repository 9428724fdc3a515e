"""Turning a forwarded upstream response into a recorded interaction.

The binding feeds the head, each body chunk with a ``now`` reading, and the
end or a failure.  Bodies are stored decoded, through the one bounded path
(:func:`~reel_core._decode.decode_chunks`: gzip, deflate, and br and zstd
when their packages are installed, at most the body limit); server-sent
events become byte-exact frames, other streams timed chunks, each stamped
with its offset from the first response byte.  A body in a coding this
install does not read, or one that decodes to more than the limit, is
stored as it came (timed chunks for a stream), its ``content-encoding``
kept and the response flagged (``encoding_error``), for ``reel check`` to
fail on.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from ._body import parse_json
from ._decode import DecodeError, Failure, codings_of, decode_chunks
from ._errors import RemoteProtocolError
from ._frames import SSESplitter, sse_event_ends
from ._grpc import GrpcSplitter, is_grpc, rescrubbed
from ._http import Headers, Limits, header_value
from ._interaction import (
    Interaction,
    RecordedRequest,
    RecordedResponse,
    StreamCut,
    format_timestamp,
)
from ._literals import ExchangeRedactor, Literals
from ._prices import cost_usd
from ._redact import Redactor
from ._upstream import Abort, UpstreamError
from ._usage import extract_usage

if TYPE_CHECKING:
    from ._protobuf import ProtoSchema

__all__ = ["Recorder", "Steps", "UpstreamError", "response_shape", "run_steps"]

T = TypeVar("T")
#: Work done in steps: each ``next()`` runs one, the last one returns a ``T``
#: (see :meth:`~reel_core.PendingRecording.step`).
Steps: TypeAlias = Generator[None, None, T]


def run_steps(steps: Steps[T]) -> T:
    """What ``steps`` build, all run now."""
    while True:
        try:
            next(steps)
        except StopIteration as end:
            return end.value  # type: ignore[no-any-return]


_NO_LITERALS = Literals(())


def _ms(seconds: float) -> float:
    return round(max(0.0, seconds) * 1000.0, 3)


def stream_kind(request: RecordedRequest, status: int, content_type: str) -> str | None:
    """``"sse"``, ``"grpc"``, ``"chunks"`` or ``None`` (a whole body) for a
    response."""
    if content_type.startswith("text/event-stream"):
        return "sse"
    if is_grpc(content_type):
        return "grpc"
    if status >= 400:
        return None
    if content_type.startswith(("application/x-ndjson", "application/jsonl", "application/ndjson")):
        return "chunks"
    if ":streamGenerateContent" in request.path:
        return "chunks"
    body = request.body
    if b'"stream"' in body and (b'"stream":true' in body or b'"stream": true' in body):
        return "chunks"
    return None


def response_shape(response: RecordedResponse, content_type: str) -> str:
    """What a response body is: ``sse``, ``grpc``, ``json-array-stream`` (Gemini's
    streamed JSON array), ``ndjson``, ``chunks`` (another stream), ``json``,
    ``text``, ``binary`` or ``empty``."""
    content = response.content
    if response.stream in ("sse", "grpc"):
        return response.stream
    if response.stream == "chunks":
        if "ndjson" in content_type or "jsonl" in content_type:
            return "ndjson"
        head = content.lstrip()[:1]
        if head == b"[":
            return "json-array-stream"
        if head == b"{" and content.count(b"\n") > 1:
            return "ndjson"
        return "chunks"
    if not content:
        return "empty"
    if parse_json(content)[0]:
        return "json"
    try:
        content.decode("utf-8")
    except UnicodeDecodeError:
        return "binary"
    return "text"


class Recorder:
    """Builds one :class:`Interaction` from a fed upstream response.

    Feeding only keeps what came and when: decoding, cutting SSE events,
    redaction and the header filter all run once, in :meth:`end` or
    :meth:`fail`.  A proxy forwarding a stream then does no recording work
    per chunk, and does it all after the client has its answer.

    ``drop`` names (lower case) response headers never stored, besides
    those :mod:`reel_core._headers` leaves out.

    With an :class:`~reel_core._literals.ExchangeRedactor`, the request's
    credential values are scrubbed from the response first, a stream over
    its joined bytes (a value split across two frames is found).
    """

    def __init__(
        self,
        request: RecordedRequest,
        *,
        key: str,
        id: str,
        redactor: Redactor,
        provider: str = "generic",
        endpoint: str = "",
        timestamp: str | None = None,
        sent: str | None = None,
        drop: frozenset[str] = frozenset(),
        max_body: int = Limits.max_body,
        proto: ProtoSchema | None = None,
    ) -> None:
        self.request = request
        #: A descriptor set's schema: a gRPC call's usage is read through it.
        self.proto = proto
        #: The most decoded bytes a body may have (the engine's body limit).
        self.max_body = max_body
        self.key = key
        #: The digest of the request as sent (see :mod:`reel_core._sent`),
        #: when the line may carry it.
        self.sent = sent
        self.id = id
        self.provider = provider
        self.endpoint = endpoint
        self.timestamp = timestamp
        self._wall: float | None = None
        self._literals = _NO_LITERALS
        if isinstance(redactor, ExchangeRedactor):
            self._literals, redactor = redactor.literals, redactor.base
        self._redactor = redactor
        #: Response headers (lower case) the user named, never stored.
        self._drop = drop
        self._status = 0
        self._raw_headers: Headers = ()
        self._received: list[tuple[float, bytes]] = []
        self._headers: tuple[tuple[str, str], ...] = ()
        self._kind: str | None = None
        self._content_type = ""
        self._codings: tuple[str, ...] = ()
        #: Why the body is kept as it came (a coding not read here, too big).
        self._undecoded: str | None = None
        self._splitter = SSESplitter()
        self._grpc = GrpcSplitter(max_body)
        self._frames: list[tuple[float, bytes]] = []
        self._head_at = 0.0
        self._sent_at: float | None = None
        self._last_ms = 0.0
        self._size = 0
        self._broken: StreamCut | None = None
        self._trailers: Headers = ()

    def head(
        self,
        status: int,
        headers: Headers,
        mono: float,
        sent_at: float | None,
        wall: float | None = None,
    ) -> None:
        """The head came at monotonic time ``mono`` (``sent_at``: the
        request went out, on the same clock); ``wall``, the wall-clock time
        then (epoch seconds), is stored as the line's timestamp when given."""
        self._status = status
        self._raw_headers = headers
        self._head_at = mono
        self._sent_at = sent_at
        if wall is not None:
            self._wall = wall

    def data(self, chunk: bytes, now: float) -> None:
        if chunk:
            self._received.append((now, chunk))

    def trailers(self, trailers: Headers) -> None:
        """The response's trailers (stored redacted, as its headers are)."""
        self._trailers = trailers

    def _read_head(self) -> None:
        headers = self._raw_headers
        self._codings = codings_of(header_value(headers, b"content-encoding"))
        self._headers = tuple(
            [(n.decode("latin-1"), self._literals.data(v).decode("latin-1")) for n, v in headers]
        )
        content_type = (header_value(headers, b"content-type") or b"").decode("latin-1").lower()
        self._content_type = content_type
        self._kind = stream_kind(self.request, self._status, content_type)

    def _stamp(self, now: float) -> float:
        self._last_ms = max(self._last_ms, _ms(now - self._head_at))
        return self._last_ms

    def _decode(self, now: float) -> None:
        """Take the body's chunks decoded, as they came; a body that does
        not decode whole is kept as it came (flagged), or, when its data is
        corrupt, what decoded of it is kept and the stream is cut there."""
        at = now

        def chunks() -> Iterator[tuple[float, bytes]]:
            nonlocal at
            for when, chunk in self._received:
                at = when  # where a corrupt body breaks off
                yield when, chunk

        try:
            for when, decoded in decode_chunks(chunks(), self._codings, self.max_body):
                self._take(decoded, when)
        except DecodeError as exc:
            if exc.failure is Failure.CORRUPT:
                self._broken = StreamCut(self._stamp(at), "protocol", str(exc))
                return
            self._keep_encoded(str(exc))

    def _keep_encoded(self, why: str) -> None:
        """Drop what decoded: the body is stored as it came, in timed
        chunks when it streams."""
        self._undecoded = why
        self._frames = []
        self._splitter = SSESplitter()
        self._size = 0
        self._last_ms = 0.0
        if self._kind in ("sse", "grpc"):
            self._kind = "chunks"  # compressed bytes hold no events to cut
        for at, chunk in self._received:
            self._frames.append((self._stamp(at), chunk))
            self._size += len(chunk)

    def _take(self, decoded: bytes, now: float) -> None:
        # never empty: ``data()`` keeps no empty chunk, a decoder yields none
        at = self._stamp(now)
        self._size += len(decoded)
        if self._kind == "sse":
            self._frames.extend((at, frame) for frame in self._splitter.feed(decoded))
        elif self._kind == "grpc":
            try:
                self._frames.extend((at, message) for message in self._grpc.feed(decoded))
            except RemoteProtocolError:  # a message over the body limit: timed chunks
                self._kind = "chunks"
                self._frames.append((at, self._grpc.close()))
        else:
            self._frames.append((at, decoded))

    def _take_sse_at_once(self) -> bool:
        """``_take`` every chunk of an SSE body kept as it came (no content
        decoding) in one pass over the whole body, each event stamped with
        the chunk that completed it: what taking the chunks one by one does,
        a few times faster on a long stream.  False, having taken nothing,
        when a line ends in CR (then they are taken one by one)."""
        body = b"".join([chunk for _, chunk in self._received])
        ends = sse_event_ends(body)
        if ends is None:
            return False
        chunks = iter(self._received)
        received = start = 0
        at = 0.0
        for end in ends:
            while received < end:  # up to the chunk holding the event's last byte
                now, chunk = next(chunks)
                received += len(chunk)
                at = self._stamp(now)
            self._frames.append((at, body[start:end]))
            start = end
        for now, _ in chunks:
            self._stamp(now)
        self._size += len(body)
        self._splitter.feed(body[start:])  # no event ends there: kept for close()
        return True

    def _finish(self, now: float) -> None:
        # The chunks in the order they came, as if read live: each event is
        # stamped with the arrival of the chunk that completed it.
        self._read_head()
        if self._codings and self._received:  # an empty body has nothing to decode
            self._decode(now)
        elif not (self._kind == "sse" and self._take_sse_at_once()):
            for at, chunk in self._received:
                self._take(chunk, at)
        self._received = []
        at = self._stamp(now)
        if self._kind == "sse":
            self._frames.extend((at, frame) for frame in self._splitter.close())
            self._frames = self._literals.frames(self._frames)
        elif self._kind == "grpc":
            rest = self._grpc.close()
            if rest:  # a message that never completed: a frame of its own
                self._frames.append((at, rest))
            scrub = self._literals.data
            self._frames = [
                (when, rescrubbed(frame, scrub, limit=self.max_body))
                for when, frame in self._frames
            ]

    def end(self, now: float) -> Interaction:
        """The upstream response ended cleanly."""
        return run_steps(self.ending(now))

    def ending(self, now: float) -> Steps[Interaction]:
        """:meth:`end` in steps: the body taken, the response redacted, the
        interaction."""
        self._finish(now)
        yield
        return (yield from self._building(self._broken, now))

    def fail(self, error: UpstreamError | Abort, detail: str, now: float) -> Interaction:
        """The upstream broke off after the head: record a cut."""
        return run_steps(self.failing(error, detail, now))

    def failing(self, error: UpstreamError | Abort, detail: str, now: float) -> Steps[Interaction]:
        """:meth:`fail` in steps, as :meth:`ending`."""
        self._finish(now)
        yield
        cut = self._broken or StreamCut(self._stamp(now), error.value, detail)
        return (yield from self._building(cut, now))

    def _building(self, cut: StreamCut | None, now: float) -> Steps[Interaction]:
        kind = self._kind
        headers = self._headers
        encoding = None
        if self._undecoded is not None:
            encoding = ", ".join(self._codings)
        elif self._codings:  # decoded: the header no longer says what the body is
            headers = tuple([(k, v) for k, v in headers if k != "content-encoding"])
        if kind is None and cut is not None:
            kind = "chunks"  # a body cut short replays as the chunks that came
        if cut is not None:
            cut = replace(cut, detail=self._literals.text(cut.detail))
        if kind is None:
            body = self._literals.data(b"".join(data for _, data in self._frames))
            response = RecordedResponse(self._status, headers, body=body)
        else:
            frames = self._frames
            if kind == "chunks":
                frames = self._literals.frames(frames)
            response = RecordedResponse(
                self._status,
                headers,
                stream=kind,
                frames=tuple(frames),
                # A cut stream has no clean end (its line stores none).
                end_ms=self._last_ms if cut is None else 0.0,
                cut=cut,
            )
        if encoding is not None:
            response = replace(response, encoding=encoding, encoding_error=self._undecoded)
        if self._trailers:
            trailers = tuple(
                [
                    (n.decode("latin-1"), self._literals.data(v).decode("latin-1"))
                    for n, v in self._trailers
                ]
            )
            response = replace(response, trailers=trailers)
        # the request's credential values are gone: now the one rule of
        # what of a response is stored and scrubbed (the end-to-end headers,
        # each SSE event whole, chunks so that no secret straddles two)
        response = response.redacted(self._redactor, drop=self._drop)
        yield
        meta: dict[str, Any] = {
            "ttfb_ms": None if self._sent_at is None else _ms(self._head_at - self._sent_at),
            "total_ms": _ms(now - (self._head_at if self._sent_at is None else self._sent_at)),
            "bytes": self._size,
        }
        if kind is not None:
            meta["frames"] = len(response.frames)
        meta["shape"] = response_shape(response, self._content_type)
        usage = extract_usage(
            self.provider, self.request.path, self.request.body, response, self.proto
        )
        meta.update(usage.to_meta())
        meta["cost_usd"] = cost_usd(usage)
        return Interaction(
            key=self.key,
            id=self.id,
            request=self.request,
            response=response,
            timestamp=self.timestamp if self._wall is None else format_timestamp(self._wall),
            provider=self.provider,
            endpoint=self.endpoint,
            meta=meta,
            sent=self.sent,
        )
