"""The viewer's images and sounds (``reel_bindings.view._media``), without a
browser: what is found where, the WAV header raw PCM gets, the limits."""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import wave
from pathlib import Path

import pytest

from reel_bindings._files import CassetteFile, StoreAssets
from reel_bindings._store import FileStore
from reel_bindings.view import _media
from reel_bindings.view._data import detail
from reel_bindings.view._live import LivePage, source_of_bytes
from reel_bindings.view._media import media, wav
from reel_core import Interaction, Mode, RecordedRequest, RecordedResponse
from reel_core.tools import WebSocketLog, WebSocketMessage

from .media import DATA_URL, PCM, PNG, b64, realtime, vision


def decoded(src: str) -> bytes:
    return base64.b64decode(src.split(",", 1)[1])


def test_wav_wraps_pcm16_so_any_player_reads_it() -> None:
    data = wav(PCM + b"\x01", 24000)  # an odd byte is no sample
    with wave.open(io.BytesIO(data)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 24000)
        assert w.getnframes() == len(PCM) // 2


def test_an_image_in_and_audio_out_of_a_chat() -> None:
    sound = wav(PCM, 24000)
    found = media(vision(answer_audio=sound))
    assert [(m["where"], m["type"], m["bytes"]) for m in found] == [
        ("request messages[0].content[1].image_url.url", "image/png", len(PNG)),
        ("response choices[0].message.audio.data", "audio/wav", len(sound)),
    ]
    assert decoded(found[0]["src"]) == PNG
    assert found[0]["src"].startswith("data:image/png;base64,")
    assert decoded(found[1]["src"]) == sound
    assert detail(vision())["media"] == media(vision())


def test_a_realtime_sessions_audio_is_one_clip_a_side() -> None:
    found = media(realtime())
    assert [(m["where"], m["type"]) for m in found] == [
        ("client audio (4 messages)", "audio/wav"),
        ("server audio (4 messages)", "audio/wav"),
    ]
    for item in found:
        with wave.open(io.BytesIO(decoded(item["src"]))) as w:
            assert w.getframerate() == 24000
            assert w.getnframes() == len(PCM) // 2


def _ws(*payloads: object, binary: bytes = b"") -> Interaction:
    messages = [
        WebSocketMessage(
            "server", float(i), json.dumps(p).encode() if not isinstance(p, bytes) else p
        )
        for i, p in enumerate(payloads)
    ]
    if binary:
        messages.append(WebSocketMessage("server", 99.0, binary, binary=True))
    return Interaction(
        key="sha256:" + "01" * 32,
        id="x",
        request=RecordedRequest("GET", "/ws", (), b""),
        response=RecordedResponse(101, (), stream="websocket"),
        websocket=WebSocketLog(tuple(messages)),
    )


def test_gemini_live_pcm_and_images_in_a_session() -> None:
    part = {"inlineData": {"mimeType": "audio/pcm;rate=16000", "data": b64(PCM[:3200])}}
    image = {"inlineData": {"mimeType": "image/png", "data": b64(PNG)}}
    turn = {"serverContent": {"modelTurn": {"parts": [part, image]}}}
    found = media(
        _ws(
            turn,
            turn,
            [1, 2],  # not an object
            b"not json",
            {"type": "response.output_audio.delta", "delta": "not base64!"},
            binary=b"\0\1",
        )
    )
    assert [(m["where"], m["type"]) for m in found] == [
        ("message 1 serverContent.modelTurn.parts[1].inlineData.data", "image/png"),
        ("message 2 serverContent.modelTurn.parts[1].inlineData.data", "image/png"),
        ("server audio (2 messages)", "audio/wav"),
    ]
    with wave.open(io.BytesIO(decoded(found[2]["src"]))) as w:
        assert w.getframerate() == 16000
        assert w.getnframes() == 3200


@pytest.mark.parametrize(
    ("body", "headers", "found"),
    [
        # a text-to-speech answer: the whole body is the sound
        (b"ID3" + bytes(100), (("content-type", "audio/mpeg"),), [("response body", "audio/mpeg")]),
        # Anthropic's source: base64 beside its media type
        (
            json.dumps(
                {"source": {"type": "base64", "media_type": "image/png", "data": b64(PNG)}}
            ).encode(),
            (),
            [("response source.data", "image/png")],
        ),
        # named, but not an image or a sound; a bad data URL; short and bare strings
        (
            json.dumps(
                {
                    "a": {"mime_type": "application/pdf", "data": b64(b"%PDF-" + bytes(80))},
                    "b": "data:image/png;base64,@@@@@@@@@@@@@@@@@@@@",
                    "c": "data:text/html;base64," + b64(b"<script>" * 20),
                    "d": b64(bytes(100)),
                    "e": "short",
                    "f": "x" * 100,
                }
            ).encode(),
            (),
            [],
        ),
        (b"not json at all", (("content-type", "text/plain"),), []),
    ],
)
def test_what_a_response_carries(
    body: bytes, headers: tuple[tuple[str, str], ...], found: list[tuple[str, str]]
) -> None:
    ix = Interaction(
        key="sha256:" + "02" * 32,
        id="x",
        request=RecordedRequest("POST", "/x", (), b""),
        response=RecordedResponse(200, headers, body=body),
    )
    assert [(m["where"], m["type"]) for m in media(ix)] == found


def test_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_media, "MAX_MEDIA", len(PNG) - 1)
    monkeypatch.setattr(_media, "MAX_MEDIA_ITEMS", 1)
    found = media(vision(answer_audio=wav(PCM, 24000)))
    assert len(found) == 1
    assert found[0]["src"] is None  # named, not embedded
    assert found[0]["bytes"] == len(PNG)


def test_the_live_page_reads_assets_from_the_store(tmp_path: Path) -> None:
    """``reel view --serve`` and the proxy's ``--ui`` draw from a store:
    the payloads come back from its assets."""
    store = FileStore(tmp_path)
    CassetteFile("v.jsonl", mode=Mode.AUTO, store=store, asset_threshold=128).append(
        vision(answer_audio=wav(PCM, 24000)).to_line()
    )
    assert store.assets("v.jsonl")
    data = store.read("v.jsonl") or b""
    source = source_of_bytes("v.jsonl", data, StoreAssets(store, "v.jsonl"))
    ((_, ix),) = source.interactions
    assert media(ix)[0]["src"] == DATA_URL  # too small to be an asset: inline
    assert decoded(media(ix)[1]["src"]) == wav(PCM, 24000)  # from the asset
    without = source_of_bytes("v.jsonl", data)  # no assets: a line it names, not a wrong body
    assert not without.interactions
    assert "read without its assets" in without.skipped[0][1]
    _, html = LivePage(store, lambda: ["v.jsonl"], title=lambda names: "t").page()
    assert "read without its assets" not in html


def test_a_file_upload_shows_its_image_and_sound() -> None:
    sound = wav(PCM, 16000)
    body = (
        b'--b\r\ncontent-disposition: form-data; name="model"\r\n\r\nwhisper-1\r\n'
        b'--b\r\ncontent-disposition: form-data; name="file"; filename="a.wav"\r\n'
        b"content-type: audio/wav\r\n\r\n" + sound + b"\r\n"
        b'--b\r\ncontent-disposition: form-data; name="image"; filename="a.png"\r\n\r\n'
        + PNG
        + b"\r\n--b--\r\n"
    )
    ix = Interaction(
        key="sha256:" + "03" * 32,
        id="x",
        request=RecordedRequest("POST", "/v1/audio/transcriptions", (), body),
        response=RecordedResponse(200, (), body=b'{"text":"hi"}'),
    )
    assert [(m["where"], m["type"], m["bytes"]) for m in media(ix)] == [
        ("request part 'file'", "audio/wav", len(sound)),
        ("request part 'image'", "image/png", len(PNG)),
    ]
    broken = RecordedRequest("POST", "/x", (), b"--b\r\nnot a form")
    assert media(dataclasses.replace(ix, request=broken)) == []
