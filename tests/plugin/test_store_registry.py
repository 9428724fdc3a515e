"""A store added in one module (``tests/bindings/stores_extra.py``,
``mem://``) records and replays a test's cassette through the pytest
plugin: ``-p`` loads the module, ``--reel-store`` names the store, and
nothing else knows the scheme."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from reel_bindings import _store

TEST = """
import httpx
import pytest

URL = "https://api.openai.com/v1/chat/completions"


def answer(request):
    return httpx.Response(200, json={"answer": 42})


def refuse(request):
    raise AssertionError("a replay reaches no upstream")


def ask(reel, upstream):
    transport = reel.transport(upstream=httpx.MockTransport(upstream))
    with httpx.Client(transport=transport) as client:
        return client.post(URL, json={"model": "m"}).json()


@pytest.mark.reel("chat", mode="auto")
def test_1_records(reel):
    assert ask(reel, answer) == {"answer": 42}


@pytest.mark.reel("chat", mode="replay")
def test_2_replays(reel):
    assert ask(reel, refuse) == {"answer": 42}


def test_3_the_store_holds_it():
    from tests.bindings.stores_extra import STORES

    store = STORES["plugged"]
    assert store.list() == ["test_mem/chat.jsonl"]
    assert store.checks >= 1
"""


@pytest.fixture
def registry() -> Iterator[None]:
    saved = dict(_store._SCHEMES)
    sys.modules.pop("tests.bindings.stores_extra", None)  # ``-p`` imports it afresh
    yield
    _store._SCHEMES.clear()
    _store._SCHEMES.update(saved)


def test_a_store_in_one_module_serves_the_plugin(pytester: pytest.Pytester, registry: None) -> None:
    pytester.makepyfile(test_mem=TEST)
    result = pytester.runpytest_inprocess(
        "-p", "tests.bindings.stores_extra", "--reel-store", "mem://plugged"
    )
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["reel: mode replay (default)*cassettes in mem://plugged*"])
    assert not (pytester.path / "tests").exists()  # no file was written instead


def test_without_its_module_the_scheme_stops_the_run(
    pytester: pytest.Pytester, registry: None
) -> None:
    pytester.makepyfile(test_mem=TEST)
    result = pytester.runpytest_inprocess("--reel-store", "mem://plugged")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--reel-store: unknown store mem://plugged: give a directory*"])
