"""Assets through the bindings: every store keeps them (files beside the
cassette, memory, a Redis hash), a recording writes them before its line,
a replay sends the recorded bytes, and a missing or corrupt asset is an
answer naming the asset and what to do, never a wrong body."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from reel_bindings._files import CassetteFile
from reel_bindings._store import FileStore, MemoryStore, Store
from reel_bindings.httpcore import Transport
from reel_core import Mode, Redactor, Request
from reel_core.tools import load_json, record_exchange
from tests.fakes.upstream import FakeUpstreamThread
from tests.fakes.wire import Reply

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 200  # 51 KiB: 68 KiB of base64
IMAGE = hashlib.sha256(PNG).hexdigest()
WAV = b"RIFF\0\0\0\0WAVE" + bytes(40_000)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@pytest.fixture(params=["file", "memory", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "file":
        yield FileStore(tmp_path)
    elif request.param == "memory":
        yield MemoryStore()
    else:
        pytest.importorskip("redis", reason="pip install redis (in the test extra)")
        from reel_bindings._redis import RedisStore

        url = request.getfixturevalue("redis_url")
        redis_store = RedisStore(url, prefix="t", compress=False)
        yield redis_store
        redis_store.close()


def test_every_store_keeps_assets_by_digest(store: Store) -> None:
    assert store.assets("c.jsonl") == []
    assert store.read_asset("c.jsonl", IMAGE) is None
    store.write_asset("c.jsonl", IMAGE, PNG)
    store.write_asset("c.jsonl", IMAGE, PNG)  # content-addressed: once
    store.write_asset("other.jsonl", "0" * 64, b"")
    assert store.assets("c.jsonl") == [IMAGE]
    assert store.read_asset("c.jsonl", IMAGE) == PNG
    assert IMAGE in store.describe_asset("c.jsonl", IMAGE)
    store.delete_asset("c.jsonl", IMAGE)
    store.delete_asset("c.jsonl", IMAGE)  # gone already: nothing
    assert store.assets("c.jsonl") == []
    assert store.read_asset("other.jsonl", "0" * 64) == b""
    with pytest.raises(ValueError, match="not an asset digest"):
        store.read_asset("c.jsonl", "../c.jsonl")
    assert "c.jsonl" not in store.list()  # assets are no cassette


def test_files_lie_beside_the_cassette(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    store.append("dir/chat.jsonl", b'{"_meta":{}}\n')
    store.write_asset("dir/chat.jsonl", IMAGE, PNG)
    store.write_asset("odd", IMAGE, PNG)
    assert (tmp_path / "dir" / "chat.assets" / f"sha256-{IMAGE}").read_bytes() == PNG
    assert (tmp_path / "odd.assets" / f"sha256-{IMAGE}").read_bytes() == PNG
    (tmp_path / "dir" / "chat.assets" / "notes.txt").write_text("mine")
    assert store.assets("dir/chat.jsonl") == [IMAGE]  # other files are not assets
    assert store.list() == ["dir/chat.jsonl"]
    assert store.assets("missing.jsonl") == []


def test_a_damaged_asset_is_written_again(store: Store) -> None:
    store.write_asset("c.jsonl", IMAGE, PNG[:10])  # a crash's leftover
    store.write_asset("c.jsonl", IMAGE, PNG)
    assert store.read_asset("c.jsonl", IMAGE) == PNG
    store.write_asset("c.jsonl", IMAGE, PNG[::-1])  # the same size, other bytes
    store.write_asset("c.jsonl", IMAGE, PNG)
    assert store.read_asset("c.jsonl", IMAGE) == PNG


def test_redis_keeps_assets_in_a_hash_and_delete_drops_them(redis_url: str) -> None:
    redis = pytest.importorskip("redis", reason="pip install redis (in the test extra)")
    from reel_bindings._redis import RedisStore

    store = RedisStore(redis_url, prefix="p", compress=True)
    store.append("c.jsonl", b"{}\n")
    store.write_asset("c.jsonl", IMAGE, PNG)
    client = redis.Redis.from_url(redis_url)
    assert client.hkeys("p:assets:c.jsonl") == [IMAGE.encode()]
    assert len(client.hget("p:assets:c.jsonl", IMAGE)) < len(PNG)  # compressed as lines are
    assert store.read_asset("c.jsonl", IMAGE) == PNG
    store.delete("c.jsonl")
    assert not client.exists("p:assets:c.jsonl")
    store.close()


def vision_line() -> bytes:
    body = {
        "model": "gpt-4o",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is this?"},
                    {
                        "type": "image_url",
                        "image_url": {"url": "data:image/png;base64," + b64(PNG)},
                    },
                ],
            }
        ],
    }
    request = Request(
        "POST",
        "/v1/chat/completions",
        ((b"host", b"api.openai.com"), (b"content-type", b"application/json")),
        json.dumps(body).encode(),
    )
    answer = json.dumps({"audio": {"data": b64(WAV)}}, indent=2).encode()
    recorded = record_exchange(
        request, 200, [("content-type", "application/json")], answer, redactor=Redactor()
    )
    return recorded.to_line()


def test_a_cassette_file_writes_assets_then_the_line_and_reads_them_back(store: Store) -> None:
    line = vision_line()
    file = CassetteFile("chat.jsonl", mode=Mode.RECORD, store=store)
    file.append(line)
    written = (store.read("chat.jsonl") or b"").splitlines()
    assert written[0].startswith(b'{"_meta":{"schema":3,')
    assert len(written[1]) < 2000  # readable: two references, not 120 KiB of base64
    refs = load_json(written[1])["assets"]
    assert [(r["type"], r["bytes"]) for r in refs] == [
        ("image/png", len(PNG)),
        ("audio/wav", len(WAV)),
    ]
    assert sorted(store.assets("chat.jsonl")) == sorted([IMAGE, hashlib.sha256(WAV).hexdigest()])
    again = CassetteFile("chat.jsonl", mode=Mode.REPLAY, store=store)
    assert [i.to_line() for i in again.cassette] == [line]


def test_the_threshold_setting_and_the_cassettes_own(tmp_path: Path) -> None:
    line = vision_line()
    store = FileStore(tmp_path)
    CassetteFile("off.jsonl", mode=Mode.RECORD, store=store, asset_threshold=0).append(line)
    assert store.read("off.jsonl") == store.read("off.jsonl")
    assert (store.read("off.jsonl") or b"").endswith(line)  # kept inline
    assert store.assets("off.jsonl") == []
    big = 200 * 1024  # over the image's base64, under nothing else
    CassetteFile("big.jsonl", mode=Mode.RECORD, store=store, asset_threshold=big).append(line)
    assert store.assets("big.jsonl") == []
    store.replace("own.jsonl", b'{"_meta":{"schema":3,"assets":{"threshold":60000}}}\n')
    CassetteFile("own.jsonl", mode=Mode.AUTO, store=store, asset_threshold=0).append(line)
    assert store.assets("own.jsonl") == [IMAGE]  # the cassette's own wins; the WAV's is shorter


def test_an_older_schema_keeps_payloads_inline_until_recorded_afresh(tmp_path: Path) -> None:
    line = vision_line()
    store = FileStore(tmp_path)
    store.replace("old.jsonl", b'{"_meta":{"schema":2}}\n')
    CassetteFile("old.jsonl", mode=Mode.AUTO, store=store).append(line)
    assert (store.read("old.jsonl") or b"").endswith(line)  # a schema-2 reader replays it right
    fresh = CassetteFile("old.jsonl", mode=Mode.RECORD, store=store)
    fresh.append(line)
    assert (store.read("old.jsonl") or b"").startswith(b'{"_meta":{"schema":3')
    assert len(store.assets("old.jsonl")) == 2


def test_held_lines_write_their_assets_at_commit(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    file = CassetteFile("h.jsonl", mode=Mode.RECORD, store=store, held=True)
    file.append(vision_line())
    assert store.assets("h.jsonl") == []
    file.commit()
    assert len(store.assets("h.jsonl")) == 2
    assert len(store.read("h.jsonl") or b"") < 3000


# -- through an in-process client, recorded then replayed ------------------------


def vision_request() -> dict[str, object]:
    return {
        "model": "gpt-4o",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64," + b64(PNG)}}
                ],
            }
        ],
    }


ANSWER = (
    json.dumps({"id": "img", "data": [{"b64_json": b64(PNG[::-1])}]}, indent=2).encode() + b"\n"
)


def record(cassette: Path) -> None:
    with FakeUpstreamThread() as fake:
        fake.push_reply(Reply(200, (("content-type", "application/json"),), (ANSWER,)))
        with httpx2.Client(transport=Transport(cassette, mode="record")) as client:
            got = client.post(fake.url + "/v1/chat/completions", json=vision_request())
        assert got.content == ANSWER


def replay(cassette: Path) -> httpx2.Response:
    with httpx2.Client(transport=Transport(cassette, mode="replay")) as client:
        return client.post("http://127.0.0.1:9/v1/chat/completions", json=vision_request())


def test_a_replay_is_byte_exact(tmp_path: Path) -> None:
    cassette = tmp_path / "vision.jsonl"
    record(cassette)
    assets = sorted((tmp_path / "vision.assets").iterdir())
    assert {p.read_bytes() for p in assets} == {PNG, PNG[::-1]}  # files that open
    assert cassette.stat().st_size < 3000
    got = replay(cassette)
    assert got.status_code == 200
    assert got.content == ANSWER


@pytest.mark.parametrize("fault", ["missing", "corrupt"])
def test_a_missing_or_corrupt_asset_is_an_error_never_a_wrong_body(
    tmp_path: Path, fault: str
) -> None:
    cassette = tmp_path / "vision.jsonl"
    record(cassette)
    answer = tmp_path / "vision.assets" / f"sha256-{hashlib.sha256(PNG[::-1]).hexdigest()}"
    if fault == "missing":
        answer.unlink()
    else:
        answer.write_bytes(PNG)
    got = replay(cassette)
    assert got.status_code == 500
    assert b"b64_json" not in got.content
    text = got.text
    assert str(answer) in text
    assert f"is {fault}" in text
    assert "`reel check` lists every missing or corrupt asset" in text


# -- tool calls (call lines) whose arguments and results hold payloads ----------------


def test_a_tool_calls_image_arguments_and_result_are_assets(tmp_path: Path) -> None:
    from reel_bindings import calls_on, tool

    runs: list[str] = []

    @tool
    def caption(image: str) -> dict[str, str]:
        runs.append(image[:10])
        return {"thumbnail": b64(PNG[::-1]), "caption": "a rectangle"}

    cassette = tmp_path / "agent.jsonl"
    with calls_on(cassette, mode="record"):
        live = caption("data:image/png;base64," + b64(PNG))
    line = cassette.read_bytes().splitlines()[1]
    assert len(line) < 2000
    refs = load_json(line)["assets"]
    assert [(r["at"][:3], r["type"]) for r in refs] == [
        (["call", "args", "image"], "image/png"),
        (["result", "json", "thumbnail"], "application/octet-stream"),
    ]
    with calls_on(cassette, mode="replay"):
        assert caption("data:image/png;base64," + b64(PNG)) == live
    assert len(runs) == 1  # replayed, not run


def test_writers_of_one_asset_at_once_never_show_a_part(tmp_path: Path) -> None:
    """Recordings in several threads (or xdist workers) keep the same
    payload: each write is atomic, so a reader sees it whole or not yet."""
    import threading

    store = FileStore(tmp_path)
    seen: list[bytes | None] = []
    start = threading.Barrier(9)

    def write() -> None:
        start.wait()
        for _ in range(5):
            store.write_asset("c.jsonl", IMAGE, PNG)

    def read() -> None:
        start.wait()
        for _ in range(200):
            seen.append(store.read_asset("c.jsonl", IMAGE))

    threads = [threading.Thread(target=write) for _ in range(8)] + [threading.Thread(target=read)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {s for s in seen if s is not None} <= {PNG}
    assert store.assets("c.jsonl") == [IMAGE]  # no temporary file is taken for one


def test_the_threshold_setting_is_read_once_and_checked() -> None:
    from reel_bindings._settings import Settings
    from reel_core import ConfigError

    assert Settings.from_env({}).asset_threshold is None
    assert Settings.from_env({"REEL_ASSET_THRESHOLD": " 4096 "}).asset_threshold == 4096
    assert Settings.from_env({"REEL_ASSET_THRESHOLD": "0"}).asset_threshold == 0
    assert Settings.from_env({}, asset_threshold=7).asset_threshold == 7
    for bad in ("-1", "32k", "1.5"):
        with pytest.raises(ConfigError, match=f"REEL_ASSET_THRESHOLD='{bad}' is not a number"):
            Settings.from_env({"REEL_ASSET_THRESHOLD": bad})


def test_a_cassette_file_moved_reads_the_assets_beside_its_new_name(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    CassetteFile("a.jsonl", mode=Mode.AUTO, store=store).append(vision_line())
    file = CassetteFile("a.jsonl", mode=Mode.AUTO, store=store)  # lines parsed when used
    (tmp_path / "a.jsonl").rename(tmp_path / "b.jsonl")
    (tmp_path / "a.assets").rename(tmp_path / "b.assets")
    file.path = "b.jsonl"
    assert [i.to_line() for i in file.cassette] == [vision_line()]
