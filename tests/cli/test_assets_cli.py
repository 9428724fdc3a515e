"""The ``reel`` commands and assets: every reader sees the payloads, ``reel
check`` finds missing, corrupt and unreferenced assets, ``reel compact``
removes unreferenced ones (files and Redis), ``reel redact`` keeps payloads
beside the file, ``reel push`` / ``reel pull`` carry them."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest

from reel_bindings._files import CassetteFile, StoreAssets
from reel_bindings._store import FileStore, Store
from reel_bindings.cli import main
from reel_core import Interaction, Mode, RecordedRequest, RecordedResponse
from reel_core.tools import load_json, read_line
from tests.bindings.test_assets import PNG, WAV, vision_line

IMAGE = hashlib.sha256(PNG).hexdigest()
SOUND = hashlib.sha256(WAV).hexdigest()


def recorded(store: Store, name: str) -> None:
    CassetteFile(name, mode=Mode.AUTO, store=store).append(vision_line())


@pytest.fixture
def cassette(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    recorded(FileStore(), "chat.jsonl")
    return Path("chat.jsonl")


def test_readers_see_the_payloads(cassette: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(cassette)]) == 0
    assert "ok, 1 interaction (schema 3)" in capsys.readouterr().out
    assert main(["inspect", str(cassette), "--json"]) == 0
    assert "read without its assets" not in capsys.readouterr().out


def test_check_passes_a_cassette_with_its_assets(
    cassette: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", str(cassette)]) == 0
    assert "asset" not in capsys.readouterr().out


@pytest.mark.parametrize("fault", ["missing", "corrupt"])
def test_check_fails_on_a_missing_or_corrupt_asset(
    cassette: Path, fault: str, capsys: pytest.CaptureFixture[str]
) -> None:
    image = Path("chat.assets") / f"sha256-{IMAGE}"
    if fault == "missing":
        image.unlink()
    else:
        image.write_bytes(b"not the image")
    assert main(["check", str(cassette)]) == 1
    out, err = capsys.readouterr()
    assert f"chat.jsonl:2: asset {image} is {fault}" in out
    assert "restore the assets (from version control), or record those requests again" in err
    assert main(["validate", str(cassette)]) == 1  # the line cannot be read
    assert f"asset {image} is {fault}" in capsys.readouterr().err


def test_check_lists_an_unreferenced_asset_and_compact_removes_it(
    cassette: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stray = Path("chat.assets") / ("sha256-" + "0" * 64)
    stray.write_bytes(b"left over")
    assert main(["check", str(cassette)]) == 0  # it harms no replay
    assert f"asset {stray} is unreferenced (`reel compact chat.jsonl` removes it)" in (
        capsys.readouterr().out
    )
    assert main(["compact", str(cassette), "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert f"would drop asset {stray}: unreferenced" in out
    assert "1 unreferenced asset(s) would go" in err
    assert stray.exists()
    assert main(["compact", str(cassette)]) == 0
    assert "1 unreferenced asset(s) removed" in capsys.readouterr().err
    assert not stray.exists()
    assert sorted(FileStore().assets("chat.jsonl")) == sorted([IMAGE, SOUND])


def test_compact_in_redis(redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("redis", reason="pip install redis (in the test extra)")
    from reel_bindings._redis import RedisStore

    store = RedisStore(redis_url)
    recorded(store, "team/chat.jsonl")
    store.write_asset("team/chat.jsonl", "1" * 64, b"stray")
    assert main(["compact", "team/chat.jsonl", "--store", redis_url]) == 0
    assert "1 unreferenced asset(s) removed" in capsys.readouterr().err
    assert sorted(store.assets("team/chat.jsonl")) == sorted([IMAGE, SOUND])
    assert main(["validate", "team/chat.jsonl", "--store", redis_url]) == 0
    store.close()


def test_push_and_pull_carry_the_assets(
    cassette: Path, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("redis", reason="pip install redis (in the test extra)")
    from reel_bindings._redis import RedisStore

    store = RedisStore(redis_url)
    assert main(["push", str(cassette), redis_url, "--as", "c.jsonl"]) == 0
    assert sorted(store.assets("c.jsonl")) == sorted([IMAGE, SOUND])
    assert main(["pull", redis_url, "c.jsonl", "-o", "back.jsonl"]) == 0
    assert Path("back.jsonl").read_bytes() == cassette.read_bytes()
    assert Path("back.assets", f"sha256-{IMAGE}").read_bytes() == PNG
    (Path("chat.assets") / f"sha256-{SOUND}").unlink()
    capsys.readouterr()
    assert main(["push", str(cassette), redis_url, "--as", "d.jsonl"]) == 2
    assert "is missing (1 in all): nothing was pushed" in capsys.readouterr().err
    assert not store.exists("d.jsonl")
    store.close()


def test_redact_keeps_the_payloads_beside_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    secret = "sk-proj-" + "a1B2c3D4e5" * 4
    body = {"key": secret, "image": base64.b64encode(PNG).decode()}
    interaction = Interaction(
        key="sha256:" + "ab" * 32,
        id="x",
        request=RecordedRequest("POST", "/v1/x", (), json.dumps(body).encode()),
        response=RecordedResponse(200, (), body=b"{}"),
    )
    # a line written before redaction knew this secret's shape, say
    FileStore().append("old.jsonl", interaction.to_line(), header=b'{"_meta":{"schema":3}}\n')
    assert main(["redact", "old.jsonl"]) == 0
    line = Path("old.jsonl").read_bytes().splitlines()[1]
    assert secret.encode() not in line
    assert load_json(line)["assets"][0]["sha256"] == IMAGE
    back = read_line(line, StoreAssets(FileStore(), "old.jsonl"))
    assert json.loads(back.request.body)["image"] == body["image"]
