"""``--proto-descriptor``, ``REEL_PROTO_DESCRIPTOR``, ``proto_descriptor=``:
every entry point reads a descriptor set through the one setting, hands
its schema to the core's ``Config.proto``, and a file that is no
descriptor set is a clear error naming where it came from."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("google.protobuf", reason="descriptor sets need protobuf: the grpc extra")

from reel_bindings._inprocess import Player
from reel_bindings._settings import SettingError, Settings
from reel_bindings.proxy import parse_options
from reel_core import ConfigError
from reel_core.tools import ProtoSchema
from tests.protos import tiny_set


@pytest.fixture
def descriptor(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.pb"
    path.write_bytes(tiny_set())
    return path


def test_the_proxy_flag_and_variable_give_the_config_its_schema(descriptor: Path) -> None:
    by_flag = parse_options(["--proto-descriptor", str(descriptor)], environ={})
    assert by_flag.proto == ProtoSchema(tiny_set())
    assert by_flag.config().proto == ProtoSchema(tiny_set())
    by_env = parse_options([], environ={"REEL_PROTO_DESCRIPTOR": str(descriptor)})
    assert by_env.config().proto == ProtoSchema(tiny_set())
    assert parse_options([], environ={}).config().proto is None


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b'{"file": []}', "is not a descriptor set"),
        (None, "cannot read"),
    ],
)
def test_a_bad_file_is_a_usage_error_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes | None, said: str
) -> None:
    path = tmp_path / "set.pb"
    if data is not None:
        path.write_bytes(data)
    with pytest.raises(SystemExit) as exit_:
        parse_options(["--proto-descriptor", str(path)], environ={})
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"--proto-descriptor {str(path)!r}" in err or f"--proto-descriptor: {said}" in err
    assert said in err
    assert "include_imports" in err
    assert "Traceback" not in err


def test_the_variable_is_named_when_it_is_bad(tmp_path: Path) -> None:
    (tmp_path / "x.pb").write_bytes(b"not a set at all")
    with pytest.raises(SettingError, match=r"REEL_PROTO_DESCRIPTOR .*is not a descriptor set"):
        Settings.resolve(env={"REEL_PROTO_DESCRIPTOR": str(tmp_path / "x.pb")})


def test_an_in_process_binding_takes_it_as_an_argument(descriptor: Path, tmp_path: Path) -> None:
    player = Player(tmp_path / "c.jsonl", mode="auto", proto_descriptor=descriptor)
    assert player.config.proto == ProtoSchema(tiny_set())
    schema = ProtoSchema(tiny_set())
    assert Player(tmp_path / "c.jsonl", mode="auto", proto_descriptor=schema).config.proto is schema


def test_protobuf_missing_is_a_config_error_naming_the_extra(
    descriptor: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    from reel_bindings import _settings

    real = importlib.import_module
    _settings._schema.cache_clear()

    def without(name: str, package: str | None = None) -> object:
        if name.startswith("google.protobuf"):
            raise ImportError(name)
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", without)
    with pytest.raises(ConfigError, match=r"proto_descriptor=: .*pip install 'reel-llm\[grpc\]'"):
        Settings.resolve({"proto_descriptor": str(descriptor)})
    _settings._schema.cache_clear()
