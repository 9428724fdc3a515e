"""Shared vocabulary of the fake upstream: requests, replies, scenarios, framing.

Theory of operation
-------------------
The fake is split like Reel itself: this module and the ``*_wire`` modules are
sans-IO.  ``routes.respond`` turns a :class:`ReceivedRequest` into a
:class:`Reply` (status, headers, body frames); ``upstream`` owns the sockets,
writes the frames one socket write each with a delay between them, and plays
the faults (``cut``, ``stall``, ``garbage``, ...).

Everything in a reply is a pure function of the request, so a test can predict
the bytes: ids are derived from a digest of the request, timestamps are the
constant :data:`FAKE_CREATED`, the text is :func:`reply_text` of the prompt,
streams are split with :func:`text_pieces` and tool arguments are built by
:func:`tool_arguments`.  Secret values the request carried (Authorization,
x-api-key, x-goog-api-key, api-key, ``?key=``) are scrubbed from anything the
fake derives from the request, so they can never be echoed back.
"""

from __future__ import annotations

import base64
import enum
import gzip
import hashlib
import json
import re
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import zstandard

__all__ = [
    "FAKE_CREATED",
    "FRAME_DELAY_HEADER",
    "SCENARIO_HEADER",
    "Ask",
    "Headers",
    "ReceivedRequest",
    "Reply",
    "Scenario",
    "ToolSpec",
    "UnknownScenarioError",
    "compact",
    "credentials_of",
    "digest",
    "fragments",
    "obfuscation",
    "parse_scenarios",
    "pretty",
    "query_credentials_of",
    "reply_text",
    "scrub",
    "secrets_of",
    "sse_frame",
    "text_of",
    "text_pieces",
    "token_count",
    "tool_arguments",
    "tool_result_text",
]

#: Every ``created``/``created_at`` timestamp the fake sends (2025-01-01T00:00:00Z).
FAKE_CREATED = 1735689600

#: Request header naming the scenarios to play, comma separated: ``429``, ``gzip,slow``.
SCENARIO_HEADER = "x-fake-scenario"
#: Request header overriding the delay between streamed frames, in milliseconds.
FRAME_DELAY_HEADER = "x-fake-frame-delay-ms"

#: Header names whose values are secrets, and the query parameter Google uses for its key.
_SECRET_HEADERS = (
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "x-goog-api-key",
    "api-key",
    "cookie",
)
_SECRET_QUERY = ("key",)
#: The credential query parameters the ``echo-escaped`` scenario echoes.
_ECHOED_QUERY = ("key", "api-key", "api_key")

Headers = tuple[tuple[str, str], ...]


class Scenario(enum.Enum):
    """Something a test asks the fake to do instead of (or on top of) a normal answer.

    Ask with the request header ``x-fake-scenario: 429`` (several: ``gzip,slow``)
    or with a model name ``fake-429`` (several: ``fake-gzip+slow``); for Gemini
    the model is the one in the path, ``/v1beta/models/fake-429:generateContent``.
    """

    #: 400 with the provider's invalid-request error body.
    BAD_REQUEST = "400"
    #: Authentication failure in the provider's shape (Gemini answers 400 API_KEY_INVALID).
    UNAUTHORIZED = "401"
    #: 429 with ``retry-after: 1`` and the provider's rate-limit error body.
    RATE_LIMITED = "429"
    #: 500 with the provider's internal-error body.
    SERVER_ERROR = "500"
    #: Anthropic 529 overloaded_error; OpenAI and Gemini 503.  Aliases ``529``, ``503``.
    OVERLOADED = "overloaded"
    #: A stream that starts fine and then carries the provider's in-stream error.
    STREAM_ERROR = "stream-error"
    #: Body gzip-compressed, ``content-encoding: gzip`` (streams: one sync-flush per frame).
    GZIP = "gzip"
    #: Body zstd-compressed, ``content-encoding: zstd`` (streams: one flushed
    #: block per frame).  Needs ``zstandard``.
    ZSTD = "zstd"
    #: A decompression bomb: ``content-encoding: gzip`` over about 0.5 MB
    #: (512 gzip members) that inflate to 512 MiB of zeros.
    GZIP_BOMB = "gzip-bomb"
    #: 50 ms between streamed frames instead of the server's default.
    SLOW = "slow"
    #: Head and the first frames (half a plain body), then close without finishing the body.
    CUT = "cut"
    #: Like ``cut`` but the connection is aborted with a TCP RST (SO_LINGER 0).
    RESET = "reset"
    #: Head only, then nothing until the client gives up (or the server stops).
    STALL = "stall"
    #: Bytes that are not HTTP at all, then close.
    GARBAGE = "garbage"
    #: Close the connection after reading the request, before any response byte.
    CLOSE_EARLY = "close-early"
    #: Echo the request's credential header and query (``?key=``,
    #: ``?api-key=``) values back: a 401 JSON body holding each value as it is, base64 in a
    #: data URL and URL-encoded; with ``"stream": true`` an SSE stream with
    #: each value split across two socket writes, and its base64 in a data URL.
    ECHO_KEY = "echo-key"
    #: Echo the request's credential values, its headers' and its credential
    #: query parameters' (``?key=``, ``?api-key=``), in a 401 JSON body
    #: written as .NET's encoder writes it: every character but a letter, a
    #: digit or a space as a ``\uXXXX`` escape (``+`` as ``\u002B``).
    ECHO_ESCAPED = "echo-escaped"


_ALIASES = {"529": Scenario.OVERLOADED, "503": Scenario.OVERLOADED}
_SPLIT = re.compile(r"[\s,+]+")


class UnknownScenarioError(ValueError):
    """A scenario header or ``fake-…`` model named a scenario the fake does not know."""


def parse_scenarios(text: str) -> frozenset[Scenario]:
    """``"gzip, slow"`` or ``"gzip+slow"`` -> the scenarios; raises on an unknown name."""
    found: set[Scenario] = set()
    for word in _SPLIT.split(text.strip().lower()):
        if not word:
            continue
        if word in _ALIASES:
            found.add(_ALIASES[word])
            continue
        try:
            found.add(Scenario(word))
        except ValueError:
            known = ", ".join(sorted([s.value for s in Scenario] + list(_ALIASES)))
            raise UnknownScenarioError(f"unknown fake scenario {word!r}; known: {known}") from None
    return frozenset(found)


@dataclass(frozen=True)
class ReceivedRequest:
    """One request as the fake received it (header names lower-cased)."""

    method: str
    target: str
    headers: Headers
    body: bytes

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.target).query, keep_blank_values=True)

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or None."""
        wanted = name.lower()
        for key, value in self.headers:
            if key == wanted:
                return value
        return None

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class Reply:
    """What the fake answers: a head and body frames.

    ``streamed`` replies go out chunked, one socket write per frame with the
    frame delay before each; other replies carry ``content-length`` and go out
    in one write.  ``content-length``/``transfer-encoding`` are added by the
    server, never stored here.
    """

    status: int
    headers: Headers
    frames: tuple[bytes, ...]
    streamed: bool = False
    #: The scenarios that shaped this reply (faults are played by the server).
    scenarios: frozenset[Scenario] = field(default_factory=frozenset)

    @property
    def body(self) -> bytes:
        return b"".join(self.frames)

    def header(self, name: str) -> str | None:
        wanted = name.lower()
        for key, value in self.headers:
            if key == wanted:
                return value
        return None

    def gzipped(self) -> Reply:
        """This reply gzip-compressed, deterministically (mtime 0).

        A plain body is compressed whole; a stream keeps one output frame per
        input frame (a sync flush after each), so frames still arrive one by one.
        """
        headers = (*self.headers, ("content-encoding", "gzip"))
        if not self.streamed:
            body = gzip.compress(self.body, mtime=0)
            return Reply(self.status, headers, (body,), False, self.scenarios)
        packer = zlib.compressobj(wbits=31)
        frames = [packer.compress(f) + packer.flush(zlib.Z_SYNC_FLUSH) for f in self.frames]
        frames.append(frames.pop() + packer.flush() if frames else packer.flush())
        return Reply(self.status, headers, tuple(frames), True, self.scenarios)

    def zstded(self) -> Reply:
        """This reply zstd-compressed: one frame for a plain body, a
        flushed block per frame for a stream."""
        headers = (*self.headers, ("content-encoding", "zstd"))
        packer = zstandard.ZstdCompressor().compressobj()
        flush = zstandard.COMPRESSOBJ_FLUSH_BLOCK
        if not self.streamed:
            body = packer.compress(self.body) + packer.flush()
            return Reply(self.status, headers, (body,), False, self.scenarios)
        frames = [packer.compress(f) + packer.flush(flush) for f in self.frames]
        frames.append(frames.pop() + packer.flush() if frames else packer.flush())
        return Reply(self.status, headers, tuple(frames), True, self.scenarios)

    def bomb(self) -> Reply:
        """A 200 whose ~0.5 MB gzip body inflates to 512 MiB of zeros."""
        member = gzip.compress(b"\0" * (1 << 20), mtime=0)
        headers = (("content-type", "application/json"), ("content-encoding", "gzip"))
        return Reply(200, headers, (member * 512,), False, self.scenarios)


#: What a :data:`Scenario.GZIP_BOMB` body inflates to.
BOMB_SIZE = 512 << 20


@dataclass(frozen=True)
class ToolSpec:
    """A function tool the request offered: its name and JSON-schema parameters."""

    name: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True)
class Ask:
    """What a provider request asks for, as the provider modules parsed it."""

    model: str
    #: The last user text, secrets scrubbed.
    prompt: str
    #: The tool result the last message carries (scrubbed), if it is one.
    tool_result: str | None
    #: Function tools offered (empty when ``tool_choice`` says none).
    tools: tuple[ToolSpec, ...]
    stream: bool
    #: :func:`digest` of the request: every id in the reply derives from it.
    seed: str
    body: Mapping[str, Any]

    @property
    def tool(self) -> ToolSpec | None:
        """The tool the fake calls: the first one offered, unless answering a tool result."""
        if self.tools and self.tool_result is None:
            return self.tools[0]
        return None

    @property
    def text(self) -> str:
        """The reply text (for a tool call: none is sent by OpenAI and Gemini)."""
        if self.tool_result is not None:
            return tool_result_text(self.tool_result)
        return reply_text(self.prompt)

    @property
    def arguments(self) -> dict[str, Any]:
        tool = self.tool
        return tool_arguments(tool, self.prompt) if tool is not None else {}

    @property
    def input_tokens(self) -> int:
        return token_count(f"{self.prompt} {self.tool_result or ''}")

    @property
    def output_tokens(self) -> int:
        if self.tool is not None:
            return token_count(json.dumps(self.arguments))
        return token_count(self.text)

    def hexid(self, salt: str, length: int) -> str:
        """A deterministic hex id of ``length`` characters, distinct per ``salt``."""
        out = ""
        counter = 0
        while len(out) < length:
            out += hashlib.sha256(f"{self.seed}:{salt}:{counter}".encode()).hexdigest()
            counter += 1
        return out[:length]


# ----------------------------------------------------------------------------- text


def secrets_of(request: ReceivedRequest) -> tuple[str, ...]:
    """The secret values the request carried (headers and ``?key=``), longest first."""
    values: list[str] = []
    for name, value in request.headers:
        if name in _SECRET_HEADERS and value:
            values.append(value)
            scheme, _, token = value.partition(" ")
            if token and scheme.lower() in ("bearer", "basic"):
                values.append(token.strip())
    for name in _SECRET_QUERY:
        values.extend(v for v in request.query.get(name, []) if v)
    return tuple(sorted({v for v in values if len(v) >= 6}, key=len, reverse=True))


def credentials_of(request: ReceivedRequest) -> tuple[str, ...]:
    """The credential values of a request's headers, as the ``echo-key``
    scenario echoes them: the token after an ``Authorization`` scheme
    (``Bearer X`` -> ``X``), each cookie's value, the other headers whole."""
    values: list[str] = []
    for name, value in request.headers:
        if name not in _SECRET_HEADERS or not value:
            continue
        if name == "cookie":
            values.extend(c.partition("=")[2].strip() for c in value.split(";") if "=" in c)
        elif name.endswith("authorization"):
            values.append(value.partition(" ")[2].strip() or value)
        else:
            values.append(value)
    return tuple(v for v in values if v)


def query_credentials_of(request: ReceivedRequest) -> tuple[str, ...]:
    """The values of a request's credential query parameters, as the
    ``echo-escaped`` scenario echoes them."""
    return tuple(v for name in _ECHOED_QUERY for v in request.query.get(name, []) if v)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret value replaced by ``[REDACTED]``."""
    for secret in secrets:
        text = text.replace(secret, "[REDACTED]")
    return text


def text_of(content: Any) -> str:
    """The text of a message ``content``: a string, or the ``text`` of its parts joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        content = [content]
    if isinstance(content, list):
        texts: list[str] = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                texts.append(part["text"])
        return "".join(texts)
    return ""


def reply_text(prompt: str) -> str:
    """The text the fake answers to a (scrubbed) prompt."""
    return f"Fake reply to: {prompt}"


def tool_result_text(result: str) -> str:
    """The text the fake answers when the last message carries a tool result."""
    return f"The tool said: {result}"


_PIECE = re.compile(r"\s*\S+")


def text_pieces(text: str) -> list[str]:
    """How a streamed text is split: word by word, leading space attached.

    ``"".join(text_pieces(t)) == t`` always holds; an empty text is ``[""]``.
    """
    pieces = _PIECE.findall(text)
    rest = text[len("".join(pieces)) :]
    if rest:
        if pieces:
            pieces[-1] += rest
        else:
            pieces.append(rest)
    return pieces or [""]


def token_count(text: str) -> int:
    """The fake's token count of a text: its number of pieces, at least 1."""
    return max(1, len(_PIECE.findall(text)))


def fragments(text: str, size: int = 8) -> list[str]:
    """How streamed tool arguments are split: ``size``-character fragments."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _fake_value(schema: Any, prompt: str) -> Any:
    if not isinstance(schema, Mapping):
        return prompt
    enum_values = schema.get("enum")
    if isinstance(enum_values, list) and enum_values:
        return enum_values[0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if isinstance(kind, str):
        kind = kind.lower()  # Gemini spells types in capitals
    if kind in ("integer", "number"):
        return 42
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return {}
    return prompt


def tool_arguments(tool: ToolSpec, prompt: str) -> dict[str, Any]:
    """The arguments the fake "model" calls ``tool`` with.

    Every declared property gets a value by its type: strings (and untyped)
    the prompt, numbers 42, booleans true, arrays [], objects {}; an ``enum``
    gives its first value.
    """
    properties = tool.parameters.get("properties")
    if not isinstance(properties, Mapping):
        return {}
    return {str(name): _fake_value(schema, prompt) for name, schema in properties.items()}


# -------------------------------------------------------------------------- framing


def pretty(obj: Any) -> bytes:
    """2-space indented JSON with a trailing newline (OpenAI and Gemini bodies)."""
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode()


def compact(obj: Any, *, google: bool = False) -> bytes:
    """Compact JSON; ``google`` uses Google's ``", "``-less, ``": "`` spacing."""
    separators = (",", ": ") if google else (",", ":")
    return json.dumps(obj, separators=separators, ensure_ascii=False).encode()


def sse_frame(data: bytes, *, event: str | None = None, crlf: bool = False) -> bytes:
    """One server-sent event: optional ``event:`` line, a ``data:`` line, a blank line."""
    eol = b"\r\n" if crlf else b"\n"
    head = b"event: " + event.encode() + eol if event is not None else b""
    return head + b"data: " + data + eol + eol


def digest(request: ReceivedRequest) -> str:
    """Hex SHA-256 of method, path and body: the seed of every id in a reply."""
    h = hashlib.sha256()
    h.update(request.method.encode() + b" " + request.path.encode() + b"\n")
    h.update(request.body)
    return h.hexdigest()


def obfuscation(seed: str, index: int) -> str:
    """A deterministic stand-in for OpenAI's random ``obfuscation`` padding (1-12 chars)."""
    raw = hashlib.sha256(f"{seed}:{index}".encode()).digest()
    letters = "".join(c for c in base64.b64encode(raw).decode() if c.isalnum())
    return letters[: 1 + index % 12]
