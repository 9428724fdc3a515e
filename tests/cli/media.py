"""Interactions that carry images and sounds, for the viewer's tests: a real
PNG (it decodes in a browser), a WAV, a realtime session's PCM16 audio."""

from __future__ import annotations

import base64
import json
import struct
import zlib

from reel_core import Interaction, RecordedRequest, RecordedResponse
from reel_core.tools import WebSocketLog, WebSocketMessage


def png(width: int = 3, height: int = 2) -> bytes:
    """A real RGB PNG of ``width`` x ``height`` red pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\0" + b"\xff\0\0" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


PNG = png()
DATA_URL = "data:image/png;base64," + base64.b64encode(PNG).decode("ascii")
#: Half a second of silence at 24 kHz, PCM16: in four chunks each way.
PCM = bytes(24000)


def vision(answer_audio: bytes = b"") -> Interaction:
    """An OpenAI chat with an image in (a data URL) and, when given,
    ``answer_audio`` out (``message.audio.data``, bare base64)."""
    body = {
        "model": "gpt-4o",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is this?"},
                    {
                        "type": "image_url",
                        "image_url": {"url": DATA_URL},
                    },
                ],
            }
        ],
    }
    message: dict[str, object] = {"role": "assistant", "content": "a red rectangle"}
    if answer_audio:
        message["audio"] = {"id": "audio_1", "data": b64(answer_audio)}
    answer = {"choices": [{"index": 0, "message": message}]}
    return Interaction(
        key="sha256:" + "cd" * 32,
        id="cdcdcdcdcdcd",
        request=RecordedRequest("POST", "/v1/chat/completions", (), json.dumps(body).encode()),
        response=RecordedResponse(
            200, (("content-type", "application/json"),), body=json.dumps(answer).encode()
        ),
        provider="openai",
        endpoint="chat.completions",
    )


def realtime() -> Interaction:
    """An OpenAI Realtime session: the client's audio in four appends, the
    answer's in four deltas."""
    quarter = len(PCM) // 4
    chunks = [PCM[i * quarter : (i + 1) * quarter] for i in range(4)]
    messages = [
        WebSocketMessage(
            "client",
            float(i),
            json.dumps({"type": "input_audio_buffer.append", "audio": b64(c)}).encode(),
        )
        for i, c in enumerate(chunks)
    ] + [
        WebSocketMessage(
            "server",
            10.0 + i,
            json.dumps({"type": "response.output_audio.delta", "delta": b64(c)}).encode(),
        )
        for i, c in enumerate(chunks)
    ]
    return Interaction(
        key="sha256:" + "ef" * 32,
        id="efefefefefef",
        request=RecordedRequest("GET", "/v1/realtime", (("model", "gpt-realtime"),), b""),
        response=RecordedResponse(101, (), stream="websocket"),
        provider="openai",
        endpoint="realtime",
        websocket=WebSocketLog(tuple(messages)),
    )
