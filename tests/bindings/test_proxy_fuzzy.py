"""Fuzzy matching through the proxy: a reworded prompt is served the nearest
recording, the log line shows the score, and a fuzzy miss reports it."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from reel_core import MatchConfig, MatchMode, Mode
from tests.fakes.upstream import serve_fake

from .proxy_support import chat_call, fetch, options, proxied

pytestmark = pytest.mark.anyio


async def test_fuzzy_hit_and_miss(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cassette = tmp_path / "c.jsonl"
    async with (
        serve_fake() as fake,
        proxied(options(Mode.RECORD, cassette, upstream=fake.url)) as c,
    ):
        recorded = await fetch(c, chat_call("What is the capital of France?"))
    fuzzy = MatchConfig(MatchMode.FUZZY, threshold=0.85)
    caplog.set_level(logging.INFO, logger="reel.proxy")
    async with proxied(options(Mode.REPLAY, cassette, match=fuzzy)) as client:
        hit = await fetch(client, chat_call("what's the capital of France?"))
        miss = await fetch(client, chat_call("What is the population of Peru?"))
    assert hit.status == 200
    assert hit.body == recorded.body
    assert any("hit (fuzzy 0.9" in r.getMessage() for r in caplog.records)
    assert miss.status == 404
    error = miss.json()["error"]
    assert error["match"] == "fuzzy"
    assert error["reason"] == "no recording reaches the fuzzy threshold 0.85"
    assert 0 < error["closest"]["similarity"] < 0.85
