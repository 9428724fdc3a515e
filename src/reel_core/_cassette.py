"""Cassette schema 1: interactions as values, lines as bytes, and the index.

A cassette is UTF-8 JSON lines.  An optional first line ``{"_meta": {...}}``
holds per-cassette settings; every other line is one interaction, written
with its match key first::

    {
        "key": "sha256:<64 hex>",
        "id": ...,
        "ts": ...,
        "provider": ...,
        "endpoint": ...,
        "request": {...},
        "response": {...},
        "meta": {...},
    }

so :meth:`Cassette.loads` indexes a file by slicing the key out of each line,
without parsing any body: a line is parsed the first time it is used.
"""

from __future__ import annotations

import base64
import json
import math
import re
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from ._body import decode_body, encode_body
from ._errors import CassetteError, LocalProtocolError, RemoteProtocolError, SchemaVersionError
from ._forms import FORM, MULTIPART, form_fields, parse_multipart, redact_form, redact_multipart
from ._literals import header_names
from ._match import MatchConfig, MatchMode, match_key
from ._redact import Redactor
from ._version import SCHEMA_VERSION, __version__

__all__ = [
    "Cassette",
    "CassetteMeta",
    "CassetteWarning",
    "Interaction",
    "RecordedRequest",
    "RecordedResponse",
    "StreamCut",
    "is_meta_line",
    "safe_cassette_name",
]

_BOM = b"\xef\xbb\xbf"
_KEY_PREFIX = b'{"key":"sha256:'
_KEY_END = len(_KEY_PREFIX) + 64  # index of the quote closing the key
_HEX = re.compile(rb"[0-9a-f]{64}")
#: The start of a line written by Reel: its key, then the next field.
_KEY_LINE = re.compile(rb'\{"key":"sha256:[0-9a-f]{64}"')
#: A line of Reel's ending, and the next starting: ``}``, newline, the key.
_JOINT = b"}\n" + _KEY_PREFIX
#: ``sha256:<64 hex>"`` of a line matching ``_KEY_LINE`` (its head), with its
#: hex digits turned into "0" by ``_HEX_AS_ZERO``: only a head reads so.
_HEX_AS_ZERO = bytes.maketrans(b"123456789abcdef", b"0" * 15)
_ZEROED_HEAD = b"sha256:".translate(_HEX_AS_ZERO) + b"0" * 64 + b'"'
#: A version number (PEP 440-ish), safe to put in an upgrade command.
_VERSION = re.compile(r"[0-9][0-9A-Za-z.+!]*")


def encoding_problem(data: bytes) -> str | None:
    """Why ``data`` (a whole file) cannot be a cassette's UTF-8, from its
    first bytes: another Unicode encoding, a compressed or binary file.
    ``None`` when it may be UTF-8 (each line's bytes are checked when read)."""
    head = data[:64]
    if head.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):
        return "this file is UTF-32, not UTF-8: re-save it as UTF-8"
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "this file is UTF-16, not UTF-8: re-save it as UTF-8"
    if head.startswith(b"\x1f\x8b"):
        return "this file is gzip-compressed, not UTF-8 text: decompress it (gunzip) first"
    if b"\x00" in head:
        half = len(head) // 2
        if half and (head[0::2].count(0) >= half or head[1::2].count(0) >= half):
            return "this file is UTF-16, not UTF-8: re-save it as UTF-8"
        return "this file holds NUL bytes: a binary file, not UTF-8 JSON lines"
    return None


def torn_note(reason: str) -> str:
    """What to add to ``reason``, why the last line of a file is bad: a line
    that is not JSON there is most likely a write cut short."""
    return " (a torn last line: a write cut short)" if reason.startswith("not a JSON") else ""


def not_a_cassette(has_meta: bool, read: int, bad: Sequence[tuple[int, bytes, str]]) -> str | None:
    """Why a file is no cassette at all, or ``None``: it has no ``_meta``
    line, no line is an interaction (``read`` is how many are), and no bad
    line (``(number, raw, reason)``) starts like a line of Reel's (a torn
    one, say).  Every reader of cassettes decides so."""
    if has_meta or read or not bad:
        return None
    if any(raw.lstrip(b"\xef\xbb\xbf \t").startswith(_KEY_PREFIX) for _, raw, _ in bad):
        return None
    number, _, reason = bad[0]
    return f"not a Reel cassette: no line is an interaction (line {number}: {reason})"


def read_line(raw: bytes) -> Interaction:
    """Parse one interaction line; ``ValueError`` says what is wrong (what
    every reader of cassettes reports for a bad line)."""
    try:
        obj = json.loads(raw)
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"not UTF-8 at byte {exc.start + 1} of the line (0x{raw[exc.start]:02x}): "
            "re-save the file as UTF-8"
        ) from None
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"not a JSON line ({exc})") from None
    if isinstance(obj, dict) and "_meta" in obj:
        raise ValueError("a _meta line must be the first line")
    return Interaction.from_json(obj)


class CassetteWarning(UserWarning):
    """A tolerant load skipped a line it could not read."""


def is_meta_line(raw: bytes) -> bool:
    """Whether ``raw``, the first line of a cassette, is its ``_meta`` line:
    an object naming ``"_meta"`` near its start, however it was formatted
    (every reader of cassettes, ``reel validate`` included, decides so)."""
    return raw.lstrip(b"\xef\xbb\xbf \t").startswith(b"{") and b'"_meta"' in raw[:64]


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
        req = self.request
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
        resp = self.response
        response: dict[str, Any] = {
            "status": resp.status,
            "headers": [list(pair) for pair in resp.headers],
        }
        if resp.stream is None:
            response["body"] = encode_body(resp.body)
        else:
            response["stream"] = resp.stream
            response["frames"] = [[at, _frame_out(data)] for at, data in resp.frames]
            if resp.cut is None:
                response["end"] = {"at": resp.end_ms}
            else:
                response["cut"] = {
                    "at": resp.cut.at_ms,
                    "error": resp.cut.error,
                    "detail": resp.cut.detail,
                }
        obj = {
            "key": self.key,
            "id": self.id,
            "ts": self.timestamp,
            "provider": self.provider,
            "endpoint": self.endpoint,
            "request": request,
            "response": response,
            "meta": dict(self.meta),
        }
        text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
        # A lone surrogate (read from a "\ud800" escape) is written back as one.
        return text.encode("utf-8", "backslashreplace") + b"\n"

    @classmethod
    def from_json(cls, obj: Any) -> Interaction:
        """Build from a parsed line; ``ValueError`` says what is wrong."""
        if not isinstance(obj, dict):
            raise ValueError(
                f"not an interaction (a JSON {_json_type(obj)}, not an object): "
                "is this a Reel cassette?"
            )
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
        request = RecordedRequest(
            method=_str(req, "method", "request."),
            path=_str(req, "path", "request."),
            query=tuple((p[0], p[1]) for p in query),
            body=_body(req, "request.body"),
            content_type=_optional_str(req, "content_type", "request."),
            encoding=_optional_str(req, "encoding", "request."),
            encoding_error=_optional_str(req, "encoding_error", "request."),
        )
        resp = _obj(o.get("response"), "response")
        status = resp.get("status")
        if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 999:
            raise ValueError('"response.status" must be an integer from 100 to 999')
        headers = resp.get("headers", [])
        if not isinstance(headers, list) or not all(_is_pair(p) for p in headers):
            raise ValueError('"response.headers" must be a list of [name, value] string pairs')
        stream = resp.get("stream")
        fields: dict[str, Any] = {}
        if stream is None:
            fields["body"] = _body(resp, "response.body")
        elif stream in ("sse", "chunks"):
            fields["stream"] = stream
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
            raise ValueError(f'"response.stream" must be "sse" or "chunks", not {stream!r}')
        response = RecordedResponse(
            status=status, headers=tuple((h[0], h[1]) for h in headers), **fields
        )
        ts = o.get("ts")
        if ts is not None and not isinstance(ts, str):
            raise ValueError('"ts" must be a string or null')
        meta = o.get("meta", {})
        if not isinstance(meta, dict):
            raise ValueError('"meta" must be an object')
        return cls(
            key=key,
            id=_str(o, "id"),
            request=request,
            response=response,
            timestamp=ts,
            provider=str(o.get("provider", "generic")),
            endpoint=str(o.get("endpoint", "")),
            meta=meta,
        )


def format_timestamp(epoch: float | None) -> str | None:
    """An ISO 8601 UTC timestamp (millisecond precision) for a wall-clock reading."""
    if epoch is None:
        return None
    moment = datetime.fromtimestamp(epoch, tz=timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _frame_out(data: bytes) -> Any:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def _frames(value: Any) -> tuple[tuple[float, bytes], ...]:
    if not isinstance(value, list):
        raise ValueError('"response.frames" must be a list of [offset_ms, data] pairs')
    frames = []
    last = 0.0
    for i, item in enumerate(value):
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


def _body(obj: dict[str, Any], where: str) -> bytes:
    try:
        return decode_body(obj.get("body"))
    except ValueError as exc:
        raise ValueError(f'"{where}": {exc}') from None


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
        meta: dict[str, Any] = {
            "schema": self.schema,
            "reel": self.writer,
            "match": self.match.mode.value,
        }
        if self.match.ignore_fields:
            meta["ignore_fields"] = list(self.match.ignore_fields)
        if not self.repeat:
            meta["repeat"] = False
        meta.update(self.extra)
        return (
            json.dumps({"_meta": meta}, ensure_ascii=False, separators=(",", ":")).encode(
                "utf-8", "backslashreplace"
            )
            + b"\n"
        )

    @classmethod
    def from_json(cls, obj: Any, name: str) -> CassetteMeta:
        meta = obj.get("_meta") if isinstance(obj, dict) else None
        if not isinstance(meta, dict):
            raise CassetteError(name, 1, '"_meta" must be an object')
        schema = meta.get("schema", SCHEMA_VERSION)
        writer = meta.get("reel", "unknown")
        if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
            raise CassetteError(
                name, 1, f'"_meta.schema" must be a positive integer, not {schema!r}'
            )
        if schema > SCHEMA_VERSION:
            raise SchemaVersionError(
                name,
                1,
                f"cassette schema {schema} (written by Reel {writer}) is newer than this "
                f"Reel {__version__} reads (schema {SCHEMA_VERSION} and older): "
                + _upgrade(str(writer), schema),
            )
        try:
            mode = MatchMode(meta.get("match", MatchMode.NORMALIZED.value))
            ignore = meta.get("ignore_fields", [])
            if not isinstance(ignore, list) or not all(isinstance(p, str) for p in ignore):
                raise CassetteError(name, 1, '"_meta.ignore_fields" must be a list of JSON paths')
            match = MatchConfig(mode, tuple(ignore))
        except (ValueError, LocalProtocolError) as exc:
            raise CassetteError(name, 1, f'bad "_meta" match settings: {exc}') from None
        repeat = meta.get("repeat", True)
        if not isinstance(repeat, bool):
            raise CassetteError(
                name, 1, f'"_meta.repeat" must be true or false, not {json.dumps(repeat)}'
            )
        known = {"schema", "reel", "match", "ignore_fields", "repeat"}
        extra = {k: v for k, v in meta.items() if k not in known}
        redact = extra.get("redact", {})
        try:
            if not isinstance(redact, dict):
                raise LocalProtocolError('"redact" must be an object')
            Redactor.from_settings(redact)
            header_names(redact)
        except LocalProtocolError as exc:
            raise CassetteError(name, 1, f'bad "_meta" redact settings: {exc}') from None
        return cls(schema=schema, match=match, writer=str(writer), repeat=repeat, extra=extra)


def _release(version: str) -> tuple[int, ...] | None:
    """The release numbers of a version (``0.10.0rc1`` -> ``(0, 10, 0)``)."""
    m = re.match(r"(\d+(?:\.\d+)*)", version)
    if m is None:
        return None
    numbers = [int(n) for n in m.group(1).split(".")]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    return tuple(numbers)


def _upgrade(writer: str, schema: int) -> str:
    """What to install to read a cassette of ``schema`` written by Reel
    ``writer``: a pin only when the writer is newer than this Reel (and is a
    version number: never whatever a hand-edited line holds)."""
    theirs, ours = _release(writer), _release(__version__)
    if _VERSION.fullmatch(writer) and theirs is not None and ours is not None and theirs > ours:
        return f"upgrade with `pip install -U 'reel>={writer}'`"
    return (
        f"it needs a Reel that reads schema {schema} (`pip install -U reel` gets the newest; "
        "if that is this one, the _meta line was edited: record the cassette again)"
    )


class _Lines:
    """The lines of a cassette, column by column: line ``i`` is
    ``sources[i][starts[i]:ends[i]]``, a slice of the bytes the cassette was
    loaded from (not copied: loading never holds the file twice) or bytes of
    its own.  Columns rather than an object per line: building that object
    cost more than finding the line."""

    __slots__ = ("ends", "keys", "numbers", "parsed", "sources", "starts")

    def __init__(self) -> None:
        self.sources: list[bytes] = []
        self.starts: list[int] = []
        self.ends: list[int] = []
        #: 1-based numbers of the lines in their file, for error messages.
        self.numbers: list[int] = []
        self.keys: list[str] = []
        #: Each line parsed, once it was used.
        self.parsed: list[Interaction | None] = []

    def __len__(self) -> int:
        return len(self.keys)

    def append(self, raw: bytes, number: int, key: str, parsed: Interaction) -> None:
        self.sources.append(raw)
        self.starts.append(0)
        self.ends.append(len(raw))
        self.numbers.append(number)
        self.keys.append(key)
        self.parsed.append(parsed)

    def extend(
        self, source: bytes, starts: list[int], ends: list[int], keys: list[str], number: int
    ) -> None:
        """Add the lines ``source[starts[i]:ends[i]]``, numbered from ``number``."""
        count = len(keys)
        self.sources += [source] * count
        self.starts += starts
        self.ends += ends
        self.numbers += range(number, number + count)
        self.keys += keys
        self.parsed += [None] * count

    def clear(self) -> None:
        for column in (self.sources, self.starts, self.ends, self.numbers, self.keys, self.parsed):
            column.clear()

    def raw(self, i: int) -> bytes:
        source, start, end = self.sources[i], self.starts[i], self.ends[i]
        if start == 0 and end == len(source):
            return source
        return source[start:end]

    def holds(self, i: int, needle: bytes) -> bool:
        return self.sources[i].find(needle, self.starts[i], self.ends[i]) >= 0

    def starts_with(self, i: int, prefix: bytes) -> bool:
        return self.sources[i].startswith(prefix, self.starts[i], self.ends[i])


#: An index: the position of the line (or lines, in recorded order) holding
#: each key.  Loading files a bare position for each key: a list for each of
#: 100,000 keys, each tracked by the garbage collector, cost a quarter of the
#: whole load.
_Index = dict[str, int | list[int]]


def _file_position(index: _Index, key: str, position: int) -> None:
    """Add line ``position`` to the recordings of ``key`` in ``index``."""
    positions = index.setdefault(key, [])
    if isinstance(positions, int):
        positions = index[key] = [positions]
    positions.append(position)


def _scan_keyed(data: bytes, pos: int) -> tuple[list[int], list[int], list[str]]:
    """The lines Reel wrote from ``pos`` on, up to the first it did not (or
    the end): their starts, ends and keys.

    Reel's line starts with its key (``_KEY_LINE``) and ends with ``}``; a
    JSON line never holds a raw newline, so each ``\\n`` ends a line.  One
    check at each newline covers the lines on both sides of it (``_JOINT``),
    and the keys are checked and decoded for the whole run at once: per
    line, a regex match and a decode cost nearly as much as the whole loop.
    """
    if not data.startswith(_KEY_PREFIX, pos):
        return [], [], []
    first = pos
    ends: list[int] = []
    heads: list[bytes] = []
    # bound once: this loop runs once a line
    find, starts_with = data.find, data.startswith
    add_end, add_head = ends.append, heads.append
    while True:
        end = find(b"\n", pos)
        if not starts_with(_JOINT, end - 1):
            break
        add_end(end)
        add_head(data[pos + 8 : pos + _KEY_END + 1])
        pos = end + 1
    # the run's last line, which no line of Reel's follows
    if end < 0:
        end = len(data)
    if data[end - 1] == 0x7D:  # "}"
        add_end(end)
        add_head(data[pos + 8 : pos + _KEY_END + 1])
    starts = [first, *[stop + 1 for stop in ends]]
    starts.pop()  # where the run stopped
    blob = b"".join(heads)
    if blob.translate(_HEX_AS_ZERO) != _ZEROED_HEAD * len(ends):
        # a key that is not one (a hand-edited line): the run stops before it
        good = next(i for i, start in enumerate(starts) if _KEY_LINE.match(data, start) is None)
        del starts[good:], ends[good:]
        blob = blob[: good * len(_ZEROED_HEAD)]  # the heads before it are whole
    keys = blob.decode("ascii").split('"')
    keys.pop()  # the empty string after the last key's quote
    return starts, ends, keys


class Cassette:
    """An in-memory cassette: the lines, an index by match key, and the count
    of times each key was played.

    It never touches a file: a binding reads the bytes and hands them to
    :meth:`loads`, and appends the lines the session gives back.
    """

    def __init__(self, name: str = "<memory>", meta: CassetteMeta | None = None) -> None:
        self.name = name
        self.meta = meta if meta is not None else CassetteMeta()
        self._lines = _Lines()
        #: The settings the keys on the lines were computed with.
        self.keying = self.meta.match.keying()
        self._indexes: dict[MatchConfig, _Index] = {self.keying: {}}
        self._plays: dict[tuple[MatchConfig, str], int] = {}

    # -- loading -------------------------------------------------------------

    @classmethod
    def loads(cls, data: bytes, *, name: str = "<memory>", strict: bool = True) -> Cassette:
        """Index cassette bytes.

        Strict loading raises :class:`CassetteError` at the first bad line;
        tolerant loading (``strict=False``) skips bad lines with a
        :class:`CassetteWarning` each and keeps every other line.  A newer
        schema raises :class:`SchemaVersionError` either way.
        """
        problem = encoding_problem(data)
        if problem is not None:
            raise CassetteError(name, None, problem)
        # a byte order mark an editor added is skipped, not cut off: no copy
        pos = len(_BOM) if data.startswith(_BOM) else 0
        size = len(data)
        find = data.find
        first_end = find(b"\n", pos)
        if first_end < 0:
            first_end = size
        meta = None
        number = 0  # the number of the line before ``pos``
        if is_meta_line(data[pos:first_end]):
            try:
                obj = json.loads(data[pos:first_end])
            except (ValueError, RecursionError) as exc:
                raise CassetteError(name, 1, f"the _meta line is not JSON ({exc})") from None
            meta = CassetteMeta.from_json(obj, name)
            pos, number = first_end + 1, 1
        cassette = cls(name, meta)
        skipped: list[tuple[int, bytes, str]] = []
        # Lines are indexed where they lie in ``data``: no split, no copy.
        while pos <= size:
            starts, ends, keys = _scan_keyed(data, pos)
            if keys:
                cassette._file(data, starts, ends, keys, number + 1)
                number += len(keys)
                pos = ends[-1] + 1
                continue
            end = find(b"\n", pos)
            if end < 0:
                end = size  # the last line (torn if it is not JSON)
            number += 1
            raw = data[pos:end]
            pos = end + 1
            if not raw.strip():
                continue
            try:
                parsed = cassette._slow_parse(raw, number)
            except CassetteError as exc:
                reason = exc.reason + (torn_note(exc.reason) if end == size else "")
                if strict:
                    raise CassetteError(name, number, reason) from None
                skipped.append((number, raw, reason))
                continue
            _file_position(cassette._indexes[cassette.keying], parsed.key, len(cassette._lines))
            cassette._lines.append(raw, number, parsed.key, parsed)
        if skipped:
            junk = not_a_cassette(meta is not None, len(cassette._lines), skipped)
            if junk is not None:
                raise CassetteError(name, None, junk)
            for number, _, reason in skipped:
                warnings.warn(f"{name}:{number}: skipped: {reason}", CassetteWarning, stacklevel=2)
        return cassette

    def _file(
        self, source: bytes, starts: list[int], ends: list[int], keys: list[str], number: int
    ) -> None:
        """Add and index the lines ``source[starts[i]:ends[i]]`` with keys
        ``keys``, numbered from ``number``."""
        index = self._indexes[self.keying]
        first = len(self._lines)
        fresh: _Index = dict(zip(keys, range(first, first + len(keys)), strict=True))
        if len(fresh) == len(keys) and index.keys().isdisjoint(fresh.keys()):
            index.update(fresh)
        else:  # a request recorded more than once
            for position, key in enumerate(keys, first):
                _file_position(index, key, position)
        self._lines.extend(source, starts, ends, keys, number)

    def _slow_parse(self, raw: bytes, number: int) -> Interaction:
        try:
            return read_line(raw)
        except ValueError as exc:
            raise CassetteError(self.name, number, str(exc)) from None

    # -- reading -------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._lines)

    def __iter__(self) -> Iterator[Interaction]:
        for i in range(len(self._lines)):
            yield self._get(i)

    def _get(self, i: int) -> Interaction:
        lines = self._lines
        parsed = lines.parsed[i]
        if parsed is None:
            parsed = self._slow_parse(lines.raw(i), lines.numbers[i])
            if parsed.key != lines.keys[i]:  # a hand-edited line naming two keys
                raise CassetteError(self.name, lines.numbers[i], "key changed while parsing")
            lines.parsed[i] = parsed
        return parsed

    def readable(self) -> Iterator[Interaction]:
        """Every interaction that parses, in file order (a tolerant
        ``iter``: lines that do not parse are left out)."""
        for i in range(len(self._lines)):
            interaction = self._parsed_or_none(i)
            if interaction is not None:
                yield interaction

    def _parsed_or_none(self, i: int) -> Interaction | None:
        """Line ``i`` parsed, or ``None`` when it does not parse: such a line
        is no candidate for anything (serving it under its own key answers
        the error, naming the line; ``reel validate`` lists it)."""
        try:
            return self._get(i)
        except CassetteError:
            return None

    def same_endpoint(self, method: str, path: str) -> Iterator[Interaction]:
        """The recordings of ``method`` ``path``, parsing only lines that can be."""
        needle = json.dumps(
            {"method": method, "path": path}, ensure_ascii=False, separators=(",", ":")
        )
        marker = needle[1:-1].encode()
        lines = self._lines
        for i in range(len(lines)):
            if (
                lines.parsed[i] is None
                and not lines.holds(i, marker)
                and lines.starts_with(i, _KEY_PREFIX)
            ):
                continue  # our own lines always hold this exact text when they match
            interaction = self._parsed_or_none(i)
            if (
                interaction is not None
                and interaction.request.method == method
                and interaction.request.path == path
            ):
                yield interaction

    def validate(self) -> None:
        """Parse every line; raise :class:`CassetteError` at the first bad one."""
        for _ in self:
            pass

    def _index(self, config: MatchConfig) -> _Index:
        index = self._indexes.get(config)
        if index is None:
            # Keys on disk are for the cassette's own match settings; other
            # settings need every request parsed once.
            index = {}
            for i in range(len(self._lines)):
                interaction = self._parsed_or_none(i)
                if interaction is not None:  # a bad line has no key under other settings
                    _file_position(index, interaction.request.key(config), i)
            self._indexes[config] = index
        return index

    def _positions(self, key: str, config: MatchConfig) -> Sequence[int]:
        """The lines recording ``key``, in recorded order."""
        positions = self._index(config).get(key, ())
        return (positions,) if isinstance(positions, int) else positions

    def count(self, key: str, config: MatchConfig) -> int:
        """How many recordings answer ``key``."""
        return len(self._positions(key, config))

    def play(self, key: str, config: MatchConfig, *, repeat: bool = True) -> Interaction | None:
        """The next recording for ``key``: recordings of one request are
        served in recorded order; once all were served the last one repeats
        (``repeat=True``) or there is none (``repeat=False``)."""
        positions = self._positions(key, config)
        if not positions:
            return None
        n = self._plays.get((config, key), 0)
        if n >= len(positions) and not repeat:
            return None
        self._plays[(config, key)] = n + 1
        return self._get(positions[min(n, len(positions) - 1)])

    def plays(self, key: str, config: MatchConfig) -> int:
        """How many times ``key`` was served (or recorded) so far."""
        return self._plays.get((config, key), 0)

    def interactions(self) -> list[Interaction]:
        """Every interaction, parsed (in file order)."""
        return list(self)

    # -- writing -------------------------------------------------------------

    def add(
        self, interaction: Interaction, *, played: bool = True, line: bytes | None = None
    ) -> None:
        """Add a freshly recorded interaction (served live, so it counts as
        played once unless ``played=False``); ``line`` is its
        :meth:`~Interaction.to_line`, when the caller has it already."""
        number = len(self._lines) + 1
        raw = (interaction.to_line() if line is None else line)[:-1]
        self._lines.append(raw, number, interaction.key, interaction)
        position = len(self._lines) - 1
        for config, index in self._indexes.items():
            key = interaction.key if config == self.keying else interaction.request.key(config)
            _file_position(index, key, position)
            if played:
                self._plays[(config, key)] = self._plays.get((config, key), 0) + 1

    def clear(self) -> None:
        """Forget every interaction (record mode starts a cassette afresh)."""
        self._lines.clear()
        self._indexes = {self.keying: {}}
        self._plays.clear()

    def dumps(self) -> bytes:
        """The whole cassette as bytes: the ``_meta`` line, then every line."""
        lines = self._lines
        # one join, one copy of each line; the empty last part ends the file
        return b"\n".join([self.meta.to_line()[:-1], *map(lines.raw, range(len(lines))), b""])


_NAME_PART = re.compile(r"[A-Za-z0-9_\-][A-Za-z0-9._\-]*")


def safe_cassette_name(name: str) -> str:
    """A cassette name from a request header, checked to stay inside the
    cassette directory: relative, ``/``-separated parts of letters, digits,
    ``._-`` (none starting with a dot), at most 200 characters.  ``.jsonl``
    is added when the name has no suffix.  Raises
    :class:`RemoteProtocolError` (400) saying what is wrong."""
    parts = name.split("/")
    if not name or len(name) > 200 or not all(_NAME_PART.fullmatch(p) for p in parts):
        raise RemoteProtocolError(
            f"bad cassette name {name[:200]!r}: use a relative path of letters, digits, "
            "'.', '_', '-' and '/' (no '..', no absolute path), e.g. openai/chat-basic",
            400,
        )
    return name if "." in parts[-1] else name + ".jsonl"
