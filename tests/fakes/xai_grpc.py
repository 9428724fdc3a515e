"""A fake xAI gRPC server for Reel's tests: grpcio on 127.0.0.1, built with
the ``xai-sdk`` package's own generated stubs (``xai_sdk.proto.v6``).

``xai_sdk.Client(api_key=fake.key, api_host=fake.address,
use_insecure_channel=True)`` talks to it.  It serves ``xai_api.Chat``:

- ``GetCompletion``: the assistant's answer, ``"Reel heard: <last user
  text>"``; given tools, a call of the first one instead (finish reason
  ``REASON_TOOL_CALLS``, arguments ``{"city": "Paris"}``);
- ``GetCompletionChunk``: the same answer in :data:`CHUNKS` chunks, each
  its own message, :data:`GAP` seconds apart (a recorder sees real timing),
  the last with the finish reason and the usage.

Every call must carry ``authorization: Bearer <key>`` (the SDK's own
interceptor sends it): another key is answered ``UNAUTHENTICATED``.  A user
text containing ``"fail"`` is answered ``INVALID_ARGUMENT`` with trailing
metadata ``x-fake-reason: asked``; one containing ``"echo-key"`` is
answered with the ``authorization`` it came with, in the answer's text (a
stream's last chunk holds it whole) and in the trailing metadata ``x-echo``
(an upstream that echoes a credential).  :attr:`FakeXai.calls` counts the calls
per method (unauthenticated ones too), :attr:`FakeXai.metadata` keeps each
call's metadata.

Use it as a context manager (it starts on a free port and stops at the end)::

    with FakeXai() as fake:
        client = xai_sdk.Client(api_key=fake.key, api_host=fake.address, use_insecure_channel=True)
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent import futures
from types import TracebackType
from typing import Any

import pytest

grpc = pytest.importorskip("grpc", reason="the fake xAI server needs grpcio: pip install grpcio")
pytest.importorskip("xai_sdk", reason="the fake xAI server needs xai-sdk: pip install xai-sdk")

from xai_sdk.proto.v6 import (  # noqa: E402 - after the skip
    chat_pb2,
    chat_pb2_grpc,
    sample_pb2,
    usage_pb2,
)

__all__ = ["CHUNKS", "GAP", "MODEL", "FakeXai", "answer"]

#: The model the fake answers as (whatever was asked).
MODEL = "grok-fake"
#: How many chunks a streamed answer has, and the seconds between them.
CHUNKS = 3
GAP = 0.03
#: The key the fake expects unless given another (no known shape).
DEFAULT_KEY = "xai-fake0" + "5c9e2b7d" * 3


def _last_user_text(request: Any) -> str:
    for message in reversed(request.messages):
        if message.role == chat_pb2.ROLE_USER:
            return "".join(part.text for part in message.content)
    return ""


def answer(text: str) -> str:
    """What the fake answers to a user text."""
    return f"Reel heard: {text}"


def _pieces(text: str, count: int) -> list[str]:
    size = -(-len(text) // count)
    return [text[i * size : (i + 1) * size] for i in range(count)]


def _usage() -> Any:
    return usage_pb2.SamplingUsage(prompt_tokens=7, completion_tokens=5, total_tokens=12)


class _Chat(chat_pb2_grpc.ChatServicer):  # type: ignore[misc]  # grpcio is untyped
    def __init__(self, fake: FakeXai) -> None:
        self._fake = fake

    def _check(self, method: str, context: Any) -> str:
        """Count the call, keep its metadata; abort one without the key.
        The ``authorization`` it came with."""
        metadata = tuple(context.invocation_metadata())
        with self._fake.lock:
            self._fake.calls[method] += 1
            self._fake.metadata.append(metadata)
        given = dict(metadata).get("authorization")
        if given != f"Bearer {self._fake.key}":
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "the fake wants its key")
        return str(given)

    def _answer(self, request: Any, given: str, context: Any) -> list[str]:
        """The answer's pieces: its text, the echoed key whole in the last."""
        text = _last_user_text(request)
        echo = ""
        if "echo-key" in text:
            context.set_trailing_metadata((("x-echo", given),))
            echo = f" with {given}"
        return [*[p for p in [answer(text)] if p], echo] if echo else [answer(text)]

    def GetCompletion(self, request: Any, context: Any) -> Any:
        given = self._check("GetCompletion", context)
        text = _last_user_text(request)
        if "fail" in text:
            context.set_trailing_metadata((("x-fake-reason", "asked"),))
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"the fake refuses: {text}")
        if request.tools:
            name = request.tools[0].function.name
            call = chat_pb2.ToolCall(
                id="call-1",
                type=chat_pb2.TOOL_CALL_TYPE_CLIENT_SIDE_TOOL,
                function=chat_pb2.FunctionCall(name=name, arguments=json.dumps({"city": "Paris"})),
            )
            message = chat_pb2.CompletionMessage(role=chat_pb2.ROLE_ASSISTANT, tool_calls=[call])
            reason = sample_pb2.REASON_TOOL_CALLS
        else:
            content = "".join(self._answer(request, given, context))
            message = chat_pb2.CompletionMessage(role=chat_pb2.ROLE_ASSISTANT, content=content)
            reason = sample_pb2.REASON_STOP
        output = chat_pb2.CompletionOutput(index=0, finish_reason=reason, message=message)
        return chat_pb2.GetChatCompletionResponse(
            id="fake-1", model=MODEL, outputs=[output], usage=_usage()
        )

    def GetCompletionChunk(self, request: Any, context: Any) -> Iterator[Any]:
        given = self._check("GetCompletionChunk", context)
        text, *echo = self._answer(request, given, context)
        pieces = _pieces(text, CHUNKS)
        pieces[-1] += "".join(echo)  # a key echoed whole, in one message
        for i, piece in enumerate(pieces):
            if i:
                time.sleep(GAP)
            last = i == len(pieces) - 1
            delta = chat_pb2.Delta(content=piece, role=chat_pb2.ROLE_ASSISTANT)
            output = chat_pb2.CompletionOutputChunk(
                index=0,
                delta=delta,
                finish_reason=sample_pb2.REASON_STOP if last else sample_pb2.REASON_INVALID,
            )
            yield chat_pb2.GetChatCompletionChunk(
                id="fake-1", model=MODEL, outputs=[output], usage=_usage() if last else None
            )


class FakeXai:
    """The fake server, on a free port of 127.0.0.1 while entered."""

    def __init__(self, key: str = DEFAULT_KEY) -> None:
        #: The key every call must carry (``Bearer <key>``).
        self.key = key
        #: Calls per method name (``"GetCompletion"``...).
        self.calls: Counter[str] = Counter()
        #: Each call's metadata, in arrival order.
        self.metadata: list[tuple[tuple[str, str | bytes], ...]] = []
        self.lock = threading.Lock()
        self._server: Any = None
        self.port = 0

    @property
    def address(self) -> str:
        """``host:port``, the SDK's ``api_host``."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> FakeXai:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        chat_pb2_grpc.add_ChatServicer_to_server(_Chat(self), server)
        self.port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=None).wait()
            self._server = None

    def __enter__(self) -> FakeXai:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
