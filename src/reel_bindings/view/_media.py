"""The images and sounds of an interaction, as the viewer's detail panel
shows them: pure functions, tested without a browser.

Found where LLM traffic carries them: data URLs (OpenAI's ``image_url``,
``input_audio``), base64 beside a media type (Anthropic's ``source``,
Gemini's ``inline_data`` / ``inlineData``), a file upload's parts
(``reel_core.parse_multipart``), whole bodies whose
``content-type`` is an image or a sound (a text-to-speech answer), and a
realtime session's audio events (OpenAI Realtime's
``input_audio_buffer.append`` and ``response.(output_)audio.delta``,
Gemini Live's PCM chunks), joined into one clip per side.  Raw PCM16 gets
a WAV header here, so the page plays every sound with a plain ``<audio>``
element (``data:`` URLs: the page asks nothing of the network).

The payloads are read from the interactions, so from assets (see
:mod:`reel_core._assets`) as from inline base64 alike.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from collections.abc import Iterator
from typing import Any

from reel_core import Interaction
from reel_core.tools import load_json, parse_multipart, sniff_media_type

__all__ = ["MAX_MEDIA", "MAX_MEDIA_ITEMS", "media", "wav"]

#: Bytes of one image or clip the page embeds; a larger one is named only.
MAX_MEDIA = 16 * 1024 * 1024
#: Items shown per interaction (a session's images beyond are counted).
MAX_MEDIA_ITEMS = 24

#: A media type the page may show: an image or a sound, parameters plain.
_KIND = re.compile(r"(image|audio)/[a-z0-9.+-]+(;[a-z0-9_.-]+=[a-z0-9_.-]+)*", re.IGNORECASE)
_DATA_URL = re.compile(r"data:([^;,]+(?:;[^;,=]+=[^;,]+)*);base64,(.*)\Z", re.DOTALL)
_TYPE_KEYS = ("mime_type", "mimeType", "media_type", "mediaType")
#: Bare base64 this long is decoded to see whether it is an image or a sound.
_SNIFFED = 64
#: Realtime events whose field is a chunk of the session's PCM16 audio.
_PCM_EVENTS = {
    "input_audio_buffer.append": "audio",
    "response.audio.delta": "delta",
    "response.output_audio.delta": "delta",
}
#: OpenAI Realtime's default audio: PCM16 mono at 24 kHz.
_REALTIME_RATE = 24000
_RATE = re.compile(r";\s*rate=(\d{3,6})")


def wav(pcm: bytes, rate: int, channels: int = 1) -> bytes:
    """16-bit little-endian PCM wrapped in a WAV (RIFF) header."""
    pcm = pcm[: len(pcm) - len(pcm) % (2 * channels)]
    header = struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF",
        36 + len(pcm),
        b"WAVE",
        b"fmt ",
        16,
        1,  # PCM
        channels,
        rate,
        rate * channels * 2,
        channels * 2,
        16,
        b"data",
        len(pcm),
    )
    return header + pcm


def _decoded(text: str) -> bytes | None:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def _strings(
    value: Any, path: str, key: object, holder: dict[str, Any]
) -> Iterator[tuple[str, object, str, dict[str, Any]]]:
    """Every string in ``value``: its path, its key, it, and the object
    holding it."""
    if isinstance(value, str):
        yield path, key, value, holder
    elif isinstance(value, dict):
        for name, item in value.items():
            yield from _strings(item, f"{path}.{name}" if path else str(name), name, value)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, f"{path}[{i}]", i, holder)


def _in_json(value: Any, where: str) -> Iterator[tuple[str, str, bytes]]:
    """``(where, type, bytes)`` of each image or sound a JSON value carries."""
    for path, key, text, holder in _strings(value, "", None, {}):
        if len(text) < 16:
            continue
        m = _DATA_URL.match(text)
        named = [holder[k] for k in _TYPE_KEYS if isinstance(holder.get(k), str)]
        if m is not None:
            kind, payload = m.group(1), m.group(2)
        elif key == "data" and named:
            kind, payload = named[0], text
        elif len(text) >= _SNIFFED:  # bare base64 (OpenAI's b64_json, audio.data)
            kind, payload = "", text
        else:
            continue
        data = _decoded(payload)
        if not data:
            continue
        kind = kind or sniff_media_type(data)
        if _KIND.fullmatch(kind):
            yield f"{where} {path}", kind.lower(), data


def _in_parts(body: bytes, where: str) -> Iterator[tuple[str, str, bytes]]:
    """``(where, type, bytes)`` of each image or sound a multipart body
    (a file upload: a transcription's audio, an image) carries."""
    for part in parse_multipart(body) or ():
        data = body[part.start : part.end]
        named = (part.content_type or "").split(";")[0].strip()
        kind = named if _KIND.fullmatch(named) else sniff_media_type(data)
        if _KIND.fullmatch(kind):
            yield f"{where} part {part.name!r}", kind.lower(), data


def _json(data: bytes) -> Any:
    try:
        return load_json(data)
    except ValueError:
        return None


def _header(headers: Any, name: str) -> str:
    for key, value in headers:
        if key.lower() == name:
            return str(value)
    return ""


def _playable(where: str, kind: str, data: bytes) -> tuple[str, str, bytes]:
    """Raw PCM becomes a WAV the page plays; anything else stays as it is."""
    if kind.startswith(("audio/pcm", "audio/l16")):
        m = _RATE.search(kind)
        return where, "audio/wav", wav(data, int(m.group(1)) if m else _REALTIME_RATE)
    return where, kind, data


def _session(ix: Interaction) -> Iterator[tuple[str, str, bytes]]:
    """A WebSocket session's images, and its audio joined: one clip per
    sender and media type, in order."""
    assert ix.websocket is not None
    clips: dict[tuple[str, str], list[bytes]] = {}
    for i, message in enumerate(ix.websocket.messages):
        if message.binary:
            continue
        value = _json(message.data)
        if not isinstance(value, dict):
            continue
        field = _PCM_EVENTS.get(str(value.get("type")))
        chunk = value.get(field) if field is not None else None
        if isinstance(chunk, str):
            data = _decoded(chunk)
            if data is not None:
                clips.setdefault((message.sender, f"audio/pcm;rate={_REALTIME_RATE}"), []).append(
                    data
                )
            continue
        for where, kind, data in _in_json(value, f"message {i + 1}"):
            if kind.startswith(("audio/pcm", "audio/l16")):
                clips.setdefault((message.sender, kind), []).append(data)
            else:
                yield where, kind, data
    for (sender, kind), chunks in clips.items():
        yield f"{sender} audio ({len(chunks)} messages)", kind, b"".join(chunks)


def media(ix: Interaction) -> list[dict[str, Any]]:
    """The images and sounds of ``ix``, each ``{"where", "type", "bytes",
    "src"}`` (``src`` a data URL, ``None`` over :data:`MAX_MEDIA`)."""
    found: list[tuple[str, str, bytes]] = []
    body = ix.request.body
    if body.startswith(b"--"):
        found += _in_parts(body, "request")
    else:
        found += _in_json(_json(body) if body else None, "request")
    response = ix.response
    if ix.websocket is not None:
        found += _session(ix)
    elif response.stream is None and response.body:
        kind = _header(response.headers, "content-type").split(",")[0].strip()
        if _KIND.fullmatch(kind.replace(" ", "")):
            found.append(("response body", kind.replace(" ", "").lower(), response.body))
        else:
            found += _in_json(_json(response.body), "response")
    out = []
    for where, kind, data in found[:MAX_MEDIA_ITEMS]:
        where, kind, data = _playable(where, kind, data)
        src = None
        if len(data) <= MAX_MEDIA:
            src = f"data:{kind};base64," + base64.b64encode(data).decode("ascii")
        out.append({"where": where, "type": kind, "bytes": len(data), "src": src})
    return out
