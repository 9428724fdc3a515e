"""A scripted grpcio server for the gRPC binding's tests: raw-bytes
handlers (no protobuf), each call answering what its request says.

A request is a :class:`Script` as JSON: the initial metadata, the messages,
the status (code, details) and the trailing metadata, the gap between
streamed messages.  ``/test.Scripted/Unary`` answers its first message (or
none, for an error), ``/test.Scripted/Stream`` all of them, one by one.
``/test.Scripted/Upload`` is client-streaming (it joins what it gets).
``/test.Scripted/Chat`` is bidirectional, scripted by the client's messages
(:class:`Turn`): each says what the server answers to it, and may end the
call there; the first also says what the server sends after the client's
end, and the status it ends with.

Metadata values of a ``-bin`` key travel as hex in the script (JSON has no
bytes)."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import pytest

grpc = pytest.importorskip("grpc", reason="the gRPC binding's tests need grpcio")

__all__ = ["CHAT", "STREAM", "UNARY", "UPLOAD", "Script", "ScriptedServer", "Turn"]

UNARY = "/test.Scripted/Unary"
STREAM = "/test.Scripted/Stream"
UPLOAD = "/test.Scripted/Upload"
CHAT = "/test.Scripted/Chat"

MetadataPairs = tuple[tuple[str, "str | bytes"], ...]


def _pairs_json(pairs: MetadataPairs) -> list[list[str]]:
    return [[k, v.hex() if isinstance(v, bytes) else v] for k, v in pairs]


def _pairs(items: list[list[str]]) -> MetadataPairs:
    return tuple((k, bytes.fromhex(v) if k.endswith("-bin") else v) for k, v in items)


@dataclass(frozen=True)
class Script:
    """What the server answers to the request that carries it."""

    messages: tuple[bytes, ...] = (b"ok",)
    code: int = 0
    details: str = ""
    initial: MetadataPairs = ()
    trailing: MetadataPairs = ()
    gap: float = 0.0
    #: Anything, to tell two requests apart.
    tag: str = ""

    def request(self) -> bytes:
        return json.dumps(
            {
                "messages": [m.hex() for m in self.messages],
                "code": self.code,
                "details": self.details,
                "initial": _pairs_json(self.initial),
                "trailing": _pairs_json(self.trailing),
                "gap": self.gap,
                "tag": self.tag,
            }
        ).encode()

    @classmethod
    def of(cls, request: bytes) -> Script:
        data = json.loads(request)
        return cls(
            tuple(bytes.fromhex(m) for m in data["messages"]),
            data["code"],
            data["details"],
            _pairs(data["initial"]),
            _pairs(data["trailing"]),
            data["gap"],
            data["tag"],
        )


@dataclass(frozen=True)
class Turn:
    """A client message of ``/test.Scripted/Chat``: what the server answers
    to it, and whether the server then ends the call (``stop``: its code
    and details).  The first turn's ``final`` and ``code``/``details``: what
    the server sends after the client's end, and how it ends then."""

    reply: tuple[bytes, ...] = ()
    stop: tuple[int, str] | None = None
    final: tuple[bytes, ...] = ()
    code: int = 0
    details: str = ""
    #: Anything, to tell two messages apart.
    tag: str = ""
    #: How long the server thinks before it answers this turn (seconds).
    gap: float = 0.0

    def message(self) -> bytes:
        return json.dumps(
            {
                "gap": self.gap,
                "reply": [m.hex() for m in self.reply],
                "stop": list(self.stop) if self.stop is not None else None,
                "final": [m.hex() for m in self.final],
                "code": self.code,
                "details": self.details,
                "tag": self.tag,
            }
        ).encode()

    @classmethod
    def of(cls, message: bytes) -> Turn:
        data = json.loads(message)
        stop = data["stop"]
        return cls(
            tuple(bytes.fromhex(m) for m in data["reply"]),
            None if stop is None else (stop[0], stop[1]),
            tuple(bytes.fromhex(m) for m in data["final"]),
            data["code"],
            data["details"],
            data["tag"],
            data["gap"],
        )


_CODES = {code.value[0]: code for code in grpc.StatusCode}


@dataclass
class ScriptedServer:
    """The server on a free port of 127.0.0.1 while entered."""

    calls: Counter[str] = field(default_factory=Counter)
    metadata: list[MetadataPairs] = field(default_factory=list)
    port: int = 0
    _server: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _begin(self, name: str, request: bytes, context: Any) -> Script:
        with self._lock:
            self.calls[name] += 1
            self.metadata.append(tuple(context.invocation_metadata()))
        script = Script.of(request)
        if script.initial:
            context.send_initial_metadata(script.initial)
        if script.trailing:
            context.set_trailing_metadata(script.trailing)
        return script

    def _end(self, script: Script, context: Any) -> None:
        if script.code:
            context.abort(_CODES[script.code], script.details)
        if script.details:
            context.set_details(script.details)

    def _unary(self, request: bytes, context: Any) -> bytes:
        script = self._begin("Unary", request, context)
        self._end(script, context)
        return script.messages[0]

    def _stream(self, request: bytes, context: Any) -> Iterator[bytes]:
        script = self._begin("Stream", request, context)
        for i, message in enumerate(script.messages):
            if i and script.gap:
                time.sleep(script.gap)
            yield message
        self._end(script, context)

    def _upload(self, requests: Iterator[bytes], context: Any) -> bytes:
        with self._lock:
            self.calls["Upload"] += 1
        return b"+".join(requests)

    def _chat(self, requests: Iterator[bytes], context: Any) -> Iterator[bytes]:
        with self._lock:
            self.calls["Chat"] += 1
            self.metadata.append(tuple(context.invocation_metadata()))
        first: Turn | None = None
        for message in requests:
            turn = Turn.of(message)
            first = first or turn
            if turn.gap:
                time.sleep(turn.gap)
            yield from turn.reply
            if turn.stop is not None:
                code, details = turn.stop
                if code:
                    context.abort(_CODES[code], details)
                context.set_details(details)
                return
        if first is None:
            return
        yield from first.final
        if first.code:
            context.abort(_CODES[first.code], first.details)
        if first.details:
            context.set_details(first.details)

    def __enter__(self) -> ScriptedServer:
        handler = grpc.method_handlers_generic_handler(
            "test.Scripted",
            {
                "Unary": grpc.unary_unary_rpc_method_handler(self._unary),
                "Stream": grpc.unary_stream_rpc_method_handler(self._stream),
                "Upload": grpc.stream_unary_rpc_method_handler(self._upload),
                "Chat": grpc.stream_stream_rpc_method_handler(self._chat),
            },
        )
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        server.add_generic_rpc_handlers((handler,))
        self.port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self._server = server
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.stop(grace=None).wait()
