"""A store is one module: ``tests/bindings/stores_extra.py`` registers
``mem://`` and every place a store is named takes it, with no other edit
(the CLI's ``--store`` and ``reel push``/``pull``, the in-process
``store=``, ``$REEL_STORE``).  URL schemes are checked in one registry:
one of no store is refused the same from every entry point."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from reel_bindings import _store
from reel_bindings._settings import Settings
from reel_bindings._store import Store, StoreUnavailableError, from_url, is_store_url
from reel_bindings.cli import main
from reel_bindings.httpcore import Transport
from reel_core import ConfigError

DEMO = Path(__file__).parents[2] / "src" / "reel_bindings" / "demo" / "demo.jsonl"
URL = "https://api.openai.com/v1/chat/completions"


@pytest.fixture
def extra() -> Iterator[ModuleType]:
    """``stores_extra`` imported afresh (its import registers ``mem://``);
    the registry as it was afterwards."""
    saved = dict(_store._SCHEMES)
    name = "tests.bindings.stores_extra"
    module = importlib.reload(sys.modules[name]) if name in sys.modules else None
    module = module or importlib.import_module(name)
    yield module
    _store._SCHEMES.clear()
    _store._SCHEMES.update(saved)


def test_a_scheme_is_unknown_until_its_module_registers_it() -> None:
    with pytest.raises(StoreUnavailableError, match="unknown store mem://x: give a directory"):
        is_store_url("mem://x")


def test_the_registered_store_opens_from_every_spelling(
    extra: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = from_url("mem://team")
    assert isinstance(store, Store)
    assert store is extra.STORES["team"]
    assert Settings.resolve(flags={"store": "MEM://team"}).open_store() is store
    monkeypatch.setenv("REEL_STORE", "mem://team")
    assert Settings.resolve().open_store() is store
    assert [s.checks for s in extra.STORES.values()] == [2]  # checked before each use
    # the message of an unknown scheme lists what is registered
    with pytest.raises(ConfigError, match=r"REEL_STORE: unknown store mem2://x: .*mem://NAME"):
        Settings.from_env({"REEL_STORE": "mem2://x"})


def test_push_pull_and_view_through_the_cli(
    extra: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["push", str(DEMO), "mem://cli", "--as", "demo.jsonl"]) == 0
    assert extra.STORES["cli"].read("demo.jsonl") == DEMO.read_bytes()
    out = tmp_path / "pulled.jsonl"
    assert main(["pull", "mem://cli", "demo.jsonl", "-o", str(out)]) == 0
    assert out.read_bytes() == DEMO.read_bytes()
    page = tmp_path / "page.html"
    assert main(["view", "--store", "mem://cli", "demo.jsonl", "-o", str(page)]) == 0
    assert "demo.jsonl" in page.read_text()
    capsys.readouterr()
    assert main(["pull", "mem2://cli", "demo.jsonl", "-o", str(out), "--force"]) == 2
    assert "unknown store mem2://cli" in capsys.readouterr().err


def test_an_in_process_binding_records_and_replays_through_it(extra: ModuleType) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"answer": 42})

    with httpx.Client(
        transport=Transport(
            "chat.jsonl", mode="auto", store="mem://inproc", upstream=httpx.MockTransport(answer)
        )
    ) as client:
        assert client.post(URL, json={"model": "m"}).json() == {"answer": 42}
    assert b'"answer"' in (extra.STORES["inproc"].read("chat.jsonl") or b"")

    def refuse(request: httpx.Request) -> httpx.Response:
        raise AssertionError("a replay reaches no upstream")

    replay = Transport(
        "chat.jsonl", mode="replay", store="mem://inproc", upstream=httpx.MockTransport(refuse)
    )
    with httpx.Client(transport=replay) as client:
        assert client.post(URL, json={"model": "m"}).json() == {"answer": 42}
