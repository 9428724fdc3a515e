"""Fake realtime upstreams: OpenAI Realtime and Gemini Live over WebSockets.

The ``websockets`` library's threaded server, so one fake serves tests on
asyncio and trio alike.  Each session answers the way the real services
do, in their own event shapes (see the real sessions in
``../shared/corpus/pydantic__pydantic-ai/tests/realtime/cassettes/``), with
its reply cut into pieces sent some milliseconds apart:

- OpenAI (``/v1/realtime?model=``): ``session.created`` on connect;
  ``session.update`` -> ``session.updated``; ``conversation.item.create`` ->
  ``conversation.item.added``; ``response.create`` -> ``response.created``,
  ``response.output_text.delta`` x N, ``response.output_text.done``,
  ``response.done`` with usage.
- Gemini (``/ws/google.ai.generativelanguage.{version}.GenerativeService.
  BidiGenerateContent``, any API version: google-genai dials ``v1`` by
  default, ``v1beta`` or ``v1alpha`` when told): ``setup`` ->
  ``setupComplete``; ``clientContent`` -> ``serverContent.modelTurn`` parts
  x N, then ``turnComplete`` with ``usageMetadata``.

Any other path is answered 404, as the real services do: a client that
dials a path the fake does not serve fails at once instead of waiting for
an answer in the other provider's shape that never comes.

The reply says back the user's text, so a changed text changes the answer.
``drop_after`` deltas into a response, the fake drops the connection
without a close frame; ``refuse`` answers the upgrade with that status;
``prefix`` mounts it under a path (a gateway's ``/team/openai``): an
upgrade outside it is answered 404.
"""

from __future__ import annotations

import itertools
import json
import re
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.sync.server import ServerConnection, serve

__all__ = ["GEMINI_LIVE_PATH", "FakeRealtime", "reply_pieces", "serve_realtime"]

GEMINI_LIVE_PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
#: The Live paths of every API version (and the ephemeral tokens' method).
_GEMINI_LIVE = re.compile(
    r"/ws/google\.ai\.generativelanguage\.v[^./]+\.GenerativeService\."
    r"BidiGenerateContent(Constrained)?(\?|$)"
)
_OPENAI_REALTIME = re.compile(r"/v1/realtime(\?|$)")
#: The gap between two pieces of a reply, in seconds.
GAP = 0.02


def reply_pieces(text: str) -> list[str]:
    """The pieces the fake answers ``text`` with (its words, said back)."""
    words = f"You said: {text}".split(" ")
    return [w if i == 0 else " " + w for i, w in enumerate(words)]


@dataclass
class FakeRealtime:
    """A running fake: its URL, and what it saw."""

    url: str = ""
    port: int = 0
    #: (path with query, headers) of each upgrade, in order.
    upgrades: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    #: Every message a client sent (parsed JSON), in order.
    received: list[dict[str, Any]] = field(default_factory=list)
    #: Drop the connection after this many pieces of a reply (``None``: never).
    drop_after: int | None = None
    #: Answer the upgrade with this status instead of 101.
    refuse: int | None = None
    #: The path the fake is mounted under ("": the root).
    prefix: str = ""
    sessions: int = 0
    _ids: Iterator[int] = field(default_factory=itertools.count)

    def _id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):06d}"

    # -- the server ----------------------------------------------------------------

    def process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        self.upgrades.append((request.path, {k.lower(): v for k, v in request.headers.raw_items()}))
        if self.refuse is not None:
            body = json.dumps({"error": {"message": "refused by the fake", "code": self.refuse}})
            return connection.respond(HTTPStatus(self.refuse), body)
        if not request.path.startswith(self.prefix + "/"):
            return connection.respond(HTTPStatus.NOT_FOUND, f"not under {self.prefix}/\n")
        path = request.path[len(self.prefix) :]
        if not (_GEMINI_LIVE.match(path) or _OPENAI_REALTIME.match(path)):
            body = json.dumps({"error": {"message": f"no such path: {request.path}", "code": 404}})
            return connection.respond(HTTPStatus.NOT_FOUND, body)
        return None

    def handler(self, ws: ServerConnection) -> None:
        self.sessions += 1
        path = ws.request.path[len(self.prefix) :] if ws.request is not None else ""
        try:
            if _GEMINI_LIVE.match(path):
                self._gemini(ws)
            else:
                self._openai(ws)
        except (ConnectionClosed, _Dropped):
            pass

    def _send(self, ws: ServerConnection, event: dict[str, Any]) -> None:
        ws.send(json.dumps(event))

    def _pieces(self, ws: ServerConnection, pieces: list[str], each: Any) -> None:
        for n, piece in enumerate(pieces):
            if self.drop_after is not None and n == self.drop_after:
                ws.socket.shutdown(socket.SHUT_RDWR)  # no close frame: a drop
                raise _Dropped
            time.sleep(GAP)
            self._send(ws, each(piece))

    # -- OpenAI Realtime ------------------------------------------------------------

    def _openai(self, ws: ServerConnection) -> None:
        session: dict[str, Any] = {
            "type": "realtime",
            "object": "realtime.session",
            "id": self._id("sess"),
            "model": "gpt-realtime",
            "output_modalities": ["audio"],
            "instructions": "",
        }
        self._send(
            ws, {"type": "session.created", "event_id": self._id("event"), "session": session}
        )
        text = ""
        for raw in ws:
            message = json.loads(raw)
            self.received.append(message)
            kind = message.get("type")
            if kind == "session.update":
                session.update(message.get("session", {}))
                self._send(
                    ws,
                    {"type": "session.updated", "event_id": self._id("event"), "session": session},
                )
            elif kind == "conversation.item.create":
                item = dict(message["item"], id=self._id("item"), status="completed")
                text = " ".join(
                    c.get("text", "") for c in item.get("content", []) if isinstance(c, dict)
                )
                self._send(
                    ws,
                    {
                        "type": "conversation.item.added",
                        "event_id": self._id("event"),
                        "previous_item_id": None,
                        "item": item,
                    },
                )
            elif kind == "response.create":
                self._openai_response(ws, text)

    def _openai_response(self, ws: ServerConnection, text: str) -> None:
        response_id, item_id = self._id("resp"), self._id("item")
        base = {"response_id": response_id, "item_id": item_id, "output_index": 0}
        response: dict[str, Any] = {
            "object": "realtime.response",
            "id": response_id,
            "status": "in_progress",
            "output": [],
        }
        self._send(
            ws, {"type": "response.created", "event_id": self._id("event"), "response": response}
        )
        pieces = reply_pieces(text)
        self._pieces(
            ws,
            pieces,
            lambda piece: {
                "type": "response.output_text.delta",
                "event_id": self._id("event"),
                **base,
                "content_index": 0,
                "delta": piece,
            },
        )
        whole = "".join(pieces)
        self._send(
            ws,
            {
                "type": "response.output_text.done",
                "event_id": self._id("event"),
                **base,
                "content_index": 0,
                "text": whole,
            },
        )
        words = len(text.split())
        usage = {
            "total_tokens": 20 + words + len(pieces),
            "input_tokens": 20 + words,
            "output_tokens": len(pieces),
            "input_token_details": {
                "text_tokens": 20 + words,
                "audio_tokens": 0,
                "cached_tokens": 0,
            },
            "output_token_details": {"text_tokens": len(pieces), "audio_tokens": 0},
        }
        done = dict(response, status="completed", usage=usage)
        done["output"] = [
            {
                "id": item_id,
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": whole}],
            }
        ]
        self._send(ws, {"type": "response.done", "event_id": self._id("event"), "response": done})

    # -- Gemini Live ----------------------------------------------------------------

    def _gemini(self, ws: ServerConnection) -> None:
        for raw in ws:
            message = json.loads(raw)
            self.received.append(message)
            if "setup" in message:
                self._send(ws, {"setupComplete": {}})
                continue
            content = message.get("clientContent") or message.get("client_content")
            if content is None:
                continue  # realtimeInput, toolResponse...: nothing to say
            text = " ".join(
                part.get("text", "")
                for turn in content.get("turns", [])
                for part in turn.get("parts", [])
            )
            pieces = reply_pieces(text)
            self._pieces(
                ws,
                pieces,
                lambda piece: {
                    "serverContent": {"modelTurn": {"role": "model", "parts": [{"text": piece}]}}
                },
            )
            words = len(text.split())
            self._send(
                ws,
                {
                    "serverContent": {"turnComplete": True},
                    "usageMetadata": {
                        "promptTokenCount": 10 + words,
                        "responseTokenCount": len(pieces),
                        "totalTokenCount": 10 + words + len(pieces),
                    },
                },
            )


class _Dropped(Exception):
    """The fake dropped the connection on purpose."""


@contextmanager
def serve_realtime(
    *, ssl_context: ssl.SSLContext | None = None, **settings: Any
) -> Iterator[FakeRealtime]:
    """A fake realtime upstream on a free port, in a thread of its own
    (behind TLS with ``ssl_context``: its URL is then ``https://``)."""
    fake = FakeRealtime(**settings)
    server = serve(
        fake.handler,
        "127.0.0.1",
        0,
        process_request=fake.process_request,
        compression=None,
        ssl=ssl_context,
    )
    port = server.socket.getsockname()[1]
    fake.port = port
    fake.url = f"{'https' if ssl_context else 'http'}://127.0.0.1:{port}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        thread.join(timeout=10)
