"""Assets in the core: which payloads move out of a line, the reference
they leave, the media type it names, and every way putting them back fails
(a missing or corrupt asset, an edited line: a clear error, never a wrong
body)."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest

from reel_core import Cassette, CassetteError, CassetteMeta
from reel_core.tools import (
    ASSET_THRESHOLD,
    MemoryAssets,
    asset_digests,
    asset_name,
    cassette_assets,
    decode_lines,
    join_line,
    load_json,
    read_line,
    sniff_media_type,
    split_line,
)

T = 128
KEY = "sha256:" + "ab" * 32
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 16


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def line_of(request_body: Any = None, response_body: Any = None, **more: Any) -> bytes:
    obj = {
        "key": KEY,
        "id": "x",
        "request": {"method": "POST", "path": "/v1/x", "body": request_body},
        "response": {"status": 200, "headers": [], "body": response_body},
        **more,
        "meta": {},
    }
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def only_ref(line: bytes) -> dict[str, Any]:
    refs = load_json(line)["assets"]
    assert len(refs) == 1
    ref: dict[str, Any] = refs[0]
    return ref


def test_an_openai_vision_image_moves_out_and_comes_back() -> None:
    url = "data:image/png;base64," + b64(PNG)
    body = {"json": {"messages": [{"content": [{"type": "image_url", "image_url": {"url": url}}]}]}}
    line = line_of(body)
    split, assets = split_line(line, T)
    digest = hashlib.sha256(PNG).hexdigest()
    assert assets == {digest: PNG}  # the decoded bytes: a PNG that opens
    assert only_ref(split) == {
        "at": ["request", "body", "json", "messages", 0, "content", 0, "image_url", "url"],
        "from": 22,
        "sha256": digest,
        "type": "image/png",
        "bytes": len(PNG),
    }
    assert f'"url":"data:image/png;base64,asset:sha256-{digest}"'.encode() in split
    assert len(split) < len(line) // 2  # readable: the payload is gone
    assert join_line(load_json(split), MemoryAssets(assets)) == load_json(line)
    assert read_line(split, MemoryAssets(assets)).request.body == read_line(line).request.body
    assert asset_digests(load_json(split)) == [digest]
    assert asset_name(digest) == f"sha256-{digest}"


@pytest.mark.parametrize(
    ("holder", "kind"),
    [
        ({"type": "input_audio_buffer.append", "audio": b64(bytes(300))}, "audio/pcm;rate=24000"),
        ({"type": "response.output_audio.delta", "delta": b64(bytes(300))}, "audio/pcm;rate=24000"),
        ({"mime_type": "audio/pcm;rate=16000", "data": b64(bytes(300))}, "audio/pcm;rate=16000"),
        ({"type": "base64", "media_type": "image/jpeg", "data": b64(bytes(300))}, "image/jpeg"),
        ({"data": b64(b"\xff\xd8\xff" + bytes(300))}, "image/jpeg"),
        ({"data": b64(b"GIF89a" + bytes(300))}, "image/gif"),
        ({"data": b64(b"%PDF-1.7" + bytes(300))}, "application/pdf"),
        ({"data": b64(b"ID3" + bytes(300))}, "audio/mpeg"),
        ({"data": b64(b"OggS" + bytes(300))}, "audio/ogg"),
        ({"data": b64(b"fLaC" + bytes(300))}, "audio/flac"),
        ({"data": b64(b"RIFF\0\0\0\0WAVE" + bytes(300))}, "audio/wav"),
        ({"data": b64(b"RIFF\0\0\0\0WEBP" + bytes(300))}, "image/webp"),
        ({"data": b64(b"RIFF\0\0\0\0AVI " + bytes(300))}, "application/octet-stream"),
        ({"mime_type": "not a type", "data": b64(bytes(300))}, "application/octet-stream"),
        ({"type": "image", "data": b64(bytes(300))}, "application/octet-stream"),
    ],
)
def test_the_reference_names_the_media_type(holder: dict[str, str], kind: str) -> None:
    split, _ = split_line(line_of({"json": holder}), T)
    assert only_ref(split)["type"] == kind


def test_realtime_audio_in_websocket_messages() -> None:
    audio = bytes(range(256)) * 4
    messages = [
        {
            "from": "client",
            "at": 1.0,
            "json": {"type": "input_audio_buffer.append", "audio": b64(audio)},
        },
        {"from": "server", "at": 2.0, "base64": b64(audio + b"x")},
    ]
    line = line_of(websocket={"messages": messages})
    split, assets = split_line(line, T)
    assert [ref["at"] for ref in load_json(split)["assets"]] == [
        ["websocket", "messages", 0, "json", "audio"],
        ["websocket", "messages", 1, "base64"],
    ]
    assert set(assets.values()) == {audio, audio + b"x"}
    assert join_line(load_json(split), MemoryAssets(assets)) == load_json(line)


def test_several_runs_in_one_string_and_the_same_payload_twice() -> None:
    text = b64(PNG)
    frame = f'data: {{"delta":"{text}"}}\n\ndata: {{"delta":"{text}"}}\n\n'
    line = line_of(None, {"text": frame})
    split, assets = split_line(line, T)
    assert len(assets) == 1
    assert [r["from"] for r in load_json(split)["assets"]] == [
        len('data: {"delta":"'),
        len('data: {"delta":"') * 2 + len('"}\n\n') + len("asset:sha256-") + 64,
    ]
    assert read_line(split, MemoryAssets(assets)).response.body == frame.encode()


@pytest.mark.parametrize(
    "text",
    [
        b64(PNG + b"x").rstrip("="),  # unpadded: not what b64encode writes
        b64(PNG + b"\0")[:-3] + "B==",  # padding with stray bits
        "\n".join(b64(PNG)[i : i + 76] for i in range(0, len(b64(PNG)), 76)),  # MIME lines
        "A" * 101,  # not whole groups of four
        "A" * 96,  # short
    ],
)
def test_only_canonical_runs_over_the_threshold_move(text: str) -> None:
    line = line_of({"text": text})
    assert split_line(line, 100) == (line, {})


def test_lines_that_are_left_as_they_are() -> None:
    big = line_of({"base64": b64(PNG)})
    assert split_line(big, 0)[0] is big  # the threshold 0: never
    assert split_line(big, len(big) + 1)[0] is big  # shorter than the threshold
    odd = b"[" + b'"' + b64(PNG).encode() + b'"]\n'
    assert split_line(odd, T)[0] is odd  # not a line of Reel's
    marked = line_of({"base64": b64(PNG)}, assets=[])
    assert split_line(marked, T)[0] is marked  # split already
    keyed = line_of(None, None, ts=b64(PNG))
    assert split_line(keyed, T)[0] is keyed  # ts, key, id, meta are never payload


def test_an_empty_assets_list_is_dropped() -> None:
    obj = load_json(line_of({"text": "hi"}, assets=[]))
    assert "assets" not in join_line(obj, None)


def test_a_missing_asset_is_a_bad_line_naming_it_and_what_to_do() -> None:
    split, _ = split_line(line_of({"base64": b64(PNG)}), T)
    digest = hashlib.sha256(PNG).hexdigest()
    with pytest.raises(
        ValueError, match=f"asset sha256-{digest} is missing: restore it, or record"
    ):
        read_line(split, MemoryAssets())
    cassette = Cassette.loads(
        CassetteMeta().to_line() + split, name="c.jsonl", assets=MemoryAssets()
    )
    with pytest.raises(CassetteError) as info:
        cassette.interactions()
    assert info.value.line == 2
    assert "is missing: restore it, or record the line again" in str(info.value)


def test_a_corrupt_asset_is_never_served() -> None:
    split, assets = split_line(line_of({"base64": b64(PNG)}), T)
    digest = next(iter(assets))
    with pytest.raises(ValueError, match=rf"asset sha256-{digest} is corrupt .*hash to sha256-"):
        read_line(split, MemoryAssets({digest: PNG[:-1] + b"!"}))


def test_a_line_read_without_its_assets_says_so() -> None:
    split, _ = split_line(line_of({"base64": b64(PNG)}), T)
    with pytest.raises(ValueError, match="read without its assets: open the cassette through"):
        read_line(split)
    decoded = decode_lines(CassetteMeta().to_line() + split, "c.jsonl")
    assert decoded.lines[0].error is not None
    assert "read without its assets" in decoded.lines[0].error


def test_decode_lines_puts_assets_back() -> None:
    line = line_of({"base64": b64(PNG)})
    split, assets = split_line(line, T)
    decoded = decode_lines(CassetteMeta().to_line() + split, "c.jsonl", assets=MemoryAssets(assets))
    interaction = decoded.lines[0].interaction
    assert interaction is not None
    assert interaction.request.body == PNG


@pytest.mark.parametrize(
    "refs",
    [
        {"at": []},
        ["x"],
        [{"at": [], "from": 0, "sha256": "0" * 64}],
        [{"at": ["request", True], "from": 0, "sha256": "0" * 64}],
        [{"at": ["request"], "from": -1, "sha256": "0" * 64}],
        [{"at": ["request"], "from": True, "sha256": "0" * 64}],
        [{"at": ["request"], "from": 0, "sha256": "0" * 63}],
        [{"at": ["request"], "from": 0}],
    ],
)
def test_a_bad_reference_is_a_bad_line(refs: object) -> None:
    with pytest.raises(ValueError, match="asset"):
        read_line(line_of({"text": "hi"}, assets=refs), MemoryAssets())


@pytest.mark.parametrize(
    "at",
    [
        ["request", "body", "text"],  # no token there
        ["request", "body", "nope"],
        ["request", "body", 0],  # an index into an object
        ["meta", "x", "y"],
        ["request", "body", "list", 5],  # out of the list
        ["request", "body", "list", 0],  # not a string
    ],
)
def test_a_reference_that_misses_its_token_is_an_edited_line(at: list[Any]) -> None:
    digest = "0" * 64
    line = line_of({"text": "hi", "list": [1]}, assets=[{"at": at, "from": 0, "sha256": digest}])
    with pytest.raises(ValueError, match=r"does not point at its token .*record it again"):
        read_line(line, MemoryAssets({digest: b""}))


def test_the_threshold_a_cassette_splits_at() -> None:
    assert CassetteMeta().asset_threshold() == ASSET_THRESHOLD == 32 * 1024
    assert CassetteMeta().asset_threshold(100) == 100  # the setting
    own = CassetteMeta(extra={"assets": {"threshold": 7}})
    assert own.asset_threshold(100) == 7  # the cassette's own wins
    assert CassetteMeta(schema=2).asset_threshold(100) == 0  # older readers: inline
    meta = Cassette.loads(b'{"_meta":{"schema":3,"assets":{"threshold":0}}}\n').meta
    assert meta.asset_threshold(100) == 0


@pytest.mark.parametrize(
    "setting", ['{"threshold":-1}', '{"threshold":"1"}', '{"threshold":true}', "[]", '{"x":1}']
)
def test_a_bad_assets_setting_is_a_bad_meta_line(setting: str) -> None:
    with pytest.raises(CassetteError, match='bad "_meta" assets settings: "assets" must be'):
        Cassette.loads(b'{"_meta":{"assets":%s}}\n' % setting.encode())


def test_memory_assets() -> None:
    assets = MemoryAssets({"a" * 64: b"x"})
    assert assets.read("a" * 64) == b"x"
    assert assets.read("b" * 64) is None
    assert assets.describe("a" * 64) == "sha256-" + "a" * 64


def test_an_overlapping_reference_is_an_edited_line() -> None:
    split, assets = split_line(line_of({"text": b64(PNG) + " " + b64(PNG[1:])}), T)
    obj = load_json(split)
    obj["assets"][1]["from"] = obj["assets"][0]["from"] + 5
    with pytest.raises(ValueError, match="does not point at its token"):
        join_line(obj, MemoryAssets(assets))


# -- cost: linear in the line, however many runs -------------------------------------


def _many_runs(n: int) -> bytes:
    """One text of ``n`` short payloads (each moved), and a list of as many."""
    runs = [b64(i.to_bytes(4, "big") * 40) for i in range(n)]
    return line_of({"text": " ".join(runs), "json": {"v": runs}})


def _near_misses(n: int) -> bytes:
    """Runs one character short of the threshold, and one that is not whole groups."""
    return line_of({"text": ("A" * (T - 1) + " ") * n + "A" * (T * n + 1)})


@pytest.mark.parametrize("make", [_many_runs, _near_misses])
def test_splitting_and_joining_scale_linearly(make: Any) -> None:
    from tests.property.test_scaling import RATIO, Case, scaling_ratio

    def round_trip(line: bytes) -> object:
        split, assets = split_line(line, T)
        return join_line(load_json(split), MemoryAssets(assets))

    assert scaling_ratio(Case(make, round_trip, 200)) < RATIO


def test_sniff_media_type() -> None:
    assert sniff_media_type(PNG) == "image/png"
    assert sniff_media_type(b"RIFF\0\0\0\0WAVE") == "audio/wav"
    assert sniff_media_type(b"plain") == "application/octet-stream"


def test_which_assets_a_cassettes_lines_refer_to() -> None:
    one, _ = split_line(line_of({"base64": b64(PNG)}), T)
    two, _ = split_line(line_of({"text": b64(PNG) + " " + b64(PNG)}, {"base64": b64(PNG[1:])}), T)
    data = b"".join(
        [
            b'{"_meta":{"schema":3,"assets":{"threshold":128}}}\n',
            one,
            b'{"key":"x","assets":[ not JSON\n',
            b'["assets":[]]\n',
            b'[{"assets":[1]}]\n',
            line_of({"text": "hi"}, assets=[{"at": []}]),  # a bad reference: a bad line
            two,
        ]
    )
    image, other = hashlib.sha256(PNG).hexdigest(), hashlib.sha256(PNG[1:]).hexdigest()
    assert cassette_assets(data) == {image: [2, 7], other: [7]}


def test_file_uploads_multipart_parts_and_raw_bodies() -> None:
    # a part sent as base64 text: the asset is the file itself
    form = (
        '--b\r\ncontent-disposition: form-data; name="file"; filename="a.png"\r\n'
        "content-transfer-encoding: base64\r\n\r\n" + b64(PNG) + "\r\n--b--\r\n"
    )
    split, assets = split_line(line_of({"text": form}), T)
    assert list(assets.values()) == [PNG]
    assert only_ref(split)["type"] == "image/png"
    # a raw binary body (an upload of the file alone) is stored as base64: it moves whole
    split, assets = split_line(line_of({"base64": b64(PNG)}), T)
    assert list(assets.values()) == [PNG]


def multipart(*parts: tuple[bytes, bytes]) -> bytes:
    body = b"".join(b"--xyz\r\n" + head + b"\r\n\r\n" + data + b"\r\n" for head, data in parts)
    return body + b"--xyz--\r\n"


WAV = b"RIFF\0\0\0\0WAVE" + bytes(range(256)) * 8


def test_a_multipart_uploads_large_parts_are_the_files_themselves() -> None:
    # OpenAI's transcription upload: a model field and the audio file
    body = multipart(
        (b'content-disposition: form-data; name="model"', b"whisper-1"),
        (
            b'content-disposition: form-data; name="file"; filename="a.wav"\r\n'
            b"content-type: audio/wav",
            WAV,
        ),
        (b'content-disposition: form-data; name="image"; filename="a.png"', PNG),
    )
    line = line_of({"base64": b64(body)})
    split, assets = split_line(line, T)
    assert list(assets.values()) == [WAV, PNG]  # files that open
    refs = load_json(split)["assets"]
    assert [(r["type"], r["bytes"], r["in"]) for r in refs] == [
        ("audio/wav", len(WAV), "bytes"),
        ("image/png", len(PNG), "bytes"),
    ]
    stored = load_json(split)["request"]["body"]["base64"]
    assert base64.b64decode(stored[:20])[:5] == b"--xyz"  # the rest: base64 of its own
    assert join_line(load_json(split), MemoryAssets(assets)) == load_json(line)
    assert read_line(split, MemoryAssets(assets)).request.body == body


@pytest.mark.parametrize(
    "body",
    [
        multipart((b"h", b"x" * 10), (b"h", b"y" * 10)) + bytes(200),  # no part large enough
        b"--xyz" + b"y" * 200,  # no line end
        b"--" + b"z" * 100 + b"\r\n" + PNG,  # a boundary too long
        b"--xyz\r\nno head end" + PNG,
        b"--xyz\r\nh\r\n\r\n" + PNG + b"no closing delimiter",
    ],
)
def test_other_bodies_starting_like_multipart_move_whole(body: bytes) -> None:
    split, assets = split_line(line_of({"base64": b64(body)}), T)
    assert list(assets.values()) == [body]
    assert "in" not in only_ref(split)


def test_base64_that_starts_like_multipart_but_is_no_run_stays() -> None:
    text = "LS0t" + "!" * 200
    line = line_of({"text": text})
    assert split_line(line, T) == (line, {})


@pytest.mark.parametrize("edit", ["segment", "mixed"])
def test_an_edited_multipart_reference_is_a_bad_line(edit: str) -> None:
    body = multipart(
        (b'content-disposition: form-data; name="a"', PNG),
        (b'content-disposition: form-data; name="b"', PNG[::-1]),
    )
    split, assets = split_line(line_of({"base64": b64(body)}), T)
    obj = load_json(split)
    if edit == "segment":
        stored = obj["request"]["body"]["base64"]
        obj["request"]["body"]["base64"] = "!!!!" + stored[4:]
        with pytest.raises(ValueError, match="not base64 beside an asset's token"):
            join_line(obj, MemoryAssets(assets))
    else:
        del obj["assets"][1]["in"]
        with pytest.raises(ValueError, match="does not point at its token"):
            join_line(obj, MemoryAssets(assets))
