"""The values of a cassette: frozen, compared by value, no I/O.

An :class:`Interaction` (a recorded request and its response) is the only
thing that crosses a cassette's boundary: readers and writers of other
formats build and take these.  How each value is written as a line and read
back lives in :mod:`reel_core._codec`; the methods here say the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ._forms import FORM, MULTIPART, form_fields, parse_multipart, redact_form, redact_multipart
from ._match import MatchConfig, match_key
from ._redact import Redactor
from ._version import SCHEMA_VERSION, __version__

__all__ = [
    "CassetteMeta",
    "Interaction",
    "RecordedRequest",
    "RecordedResponse",
    "StreamCut",
]


@dataclass(frozen=True)
class RecordedRequest:
    """The stored, redacted request: never any header.  What the headers
    said about the body is kept only when it changes how the body is read."""

    method: str
    path: str
    query: tuple[tuple[str, str], ...] = ()
    #: The body as redacted and keyed: decoded when it was sent encoded.
    body: bytes = b""
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
        ):
            return self  # nearly every request: nothing to scrub, nothing to build
        kinds: dict[str, list[str]] = {"request.path": [], "request.query": [], "request.body": []}
        redacted = replace(
            self,
            path=redactor.text(self.path, kinds["request.path"]),
            query=redactor.query(self.query, kinds["request.query"]),
            body=_redact_body(self.body, self.content_type, redactor, kinds["request.body"]),
        )
        if found is not None:
            for where, replaced in kinds.items():
                found(where, replaced)
        return redacted


def _redact_body(
    body: bytes, content_type: str | None, redactor: Redactor, found: list[str]
) -> bytes:
    """A request body redacted as what it is: form fields by the query
    string's name rules, then any text by the text rules."""
    if content_type == FORM and form_fields(body) is not None:
        body = redact_form(body, redactor, found)
    elif content_type == MULTIPART and parse_multipart(body) is not None:
        return redact_multipart(body, redactor, found)
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

    @property
    def content(self) -> bytes:
        """The whole body: the frames joined, for a stream."""
        if self.stream is None:
            return self.body
        return b"".join(data for _, data in self.frames)


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

    def to_line(self) -> bytes:
        """The cassette line (``\\n``-terminated UTF-8 bytes)."""
        return _codec.interaction_line(self)

    @classmethod
    def from_json(cls, obj: Any) -> Interaction:
        """Build from a parsed line; ``ValueError`` says what is wrong."""
        return _codec.interaction_from_json(obj)


@dataclass(frozen=True)
class CassetteMeta:
    """The settings of a cassette's ``_meta`` line, honoured by every replay."""

    schema: int = SCHEMA_VERSION
    match: MatchConfig = MatchConfig()
    #: The Reel version that wrote the cassette.
    writer: str = __version__
    #: In replay mode, once every recording of a request was served: serve
    #: the last one again (``True``, the default) or miss (``False``).
    repeat: bool = True
    #: Other settings (redaction switches, extra patterns), kept as given.
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def to_line(self) -> bytes:
        """The ``_meta`` line (``\\n``-terminated UTF-8 bytes)."""
        return _codec.meta_line(self)

    @classmethod
    def from_json(cls, obj: Any, name: str) -> CassetteMeta:
        """Read a parsed ``_meta`` line of cassette ``name``;
        :class:`~reel_core.CassetteError` says what is wrong."""
        return _codec.meta_from_json(obj, name)


# The codec builds these values: imported once they exist.
from . import _codec  # noqa: E402
