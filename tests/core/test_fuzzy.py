"""Fuzzy matching: the nearest recording by prompt similarity."""

from __future__ import annotations

import json

import pytest

from reel_core import MatchConfig, MatchMode, RecordedRequest
from reel_core._fuzzy import nearest, text_similarity

from ._helpers import cassette_of, interaction

FUZZY = MatchConfig(MatchMode.FUZZY)


def test_text_similarity() -> None:
    assert text_similarity("same", "same") == 1.0
    assert text_similarity("Hello", "hello!") == pytest.approx(1.0)
    assert text_similarity("", "abc") == 0.0
    assert text_similarity("ab", "ab ") == 0.0  # too short for any trigram
    near = text_similarity("What is the capital of France?", "What's the capital of France?")
    far = text_similarity("What is the capital of France?", "What is the capital of Spain?")
    assert 0.85 < near < 1.0
    assert far < 0.85
    assert text_similarity("abc def", "xyz uvw") == 0.0
    a, b = "tell me a joke about cats", "tell me a joke about dogs"
    assert text_similarity(a, b) == pytest.approx(text_similarity(b, a))


def chat(content: str, model: str = "gpt-4o", path: str = "/v1/chat/completions") -> bytes:
    return json.dumps({"model": model, "messages": [{"role": "user", "content": content}]}).encode()


def test_nearest_picks_the_most_similar_above_the_threshold() -> None:
    c = cassette_of(
        interaction(id="france", body=chat("What is the capital of France?")),
        interaction(id="spain", body=chat("What is the capital of Spain?")),
        interaction(id="other-model", body=chat("What's the capital of France?", "gpt-4.1")),
        interaction(
            id="other-path", path="/v1/responses", body=chat("What's the capital of France?")
        ),
        interaction(id="get", method="GET", body=chat("What's the capital of France?")),
    )
    req = RecordedRequest("POST", "/v1/chat/completions", (), chat("What's the capital of France?"))
    found = nearest(req, c, FUZZY)
    assert found is not None
    assert found[0].id == "france"
    assert 0.85 <= found[1] < 1.0
    strict = MatchConfig(MatchMode.FUZZY, threshold=0.99)
    assert nearest(req, c, strict) is None
    anything = MatchConfig(MatchMode.FUZZY, threshold=0.0)
    unrelated = RecordedRequest("POST", "/v1/chat/completions", (), chat("zzz qqq"))
    got = nearest(unrelated, c, anything)
    assert got is not None
    assert got[1] < 0.5


def test_nearest_with_a_custom_similarity() -> None:
    c = cassette_of(
        interaction(id="a", body=chat("alpha")),
        interaction(id="b", body=chat("beta")),
    )
    calls: list[tuple[str, str]] = []

    def sim(x: str, y: str) -> float:
        calls.append((x, y))
        return 0.95 if y.endswith("beta") else 0.5

    cfg = MatchConfig(MatchMode.FUZZY, similarity=sim)
    found = nearest(RecordedRequest("POST", "/v1/chat/completions", (), chat("gamma")), c, cfg)
    assert found is not None
    assert found[0].id == "b"
    assert found[1] == 0.95
    assert calls == [("user:\ngamma", "user:\nalpha"), ("user:\ngamma", "user:\nbeta")]


def test_nearest_gemini_model_from_the_path() -> None:
    def gem(text: str) -> bytes:
        return json.dumps({"contents": [{"role": "user", "parts": [{"text": text}]}]}).encode()

    flash = "/v1beta/models/gemini-2.5-flash:generateContent"
    c = cassette_of(interaction(id="g", path=flash, body=gem("Name two pelicans please")))
    req = RecordedRequest("POST", flash, (), gem("Name two pelicans, please"))
    found = nearest(req, c, FUZZY)
    assert found is not None
    assert found[0].id == "g"
    other = RecordedRequest("POST", "/v1beta/models/gemini-pro:generateContent", (), req.body)
    assert nearest(other, c, FUZZY) is None


def test_no_prompt_has_nothing_to_be_near() -> None:
    c = cassette_of(
        interaction(id="t", path="/v1/x", body=b"plain text"),
        interaction(id="p1", method="GET", path="/v1/files", body=b"", query=[("after", "1")]),
    )
    anything = MatchConfig(MatchMode.FUZZY, threshold=0.0)
    for req in (
        RecordedRequest("POST", "/v1/x", (), b"other plain text"),
        RecordedRequest("GET", "/v1/files", (("after", "2"),), b""),
        RecordedRequest("POST", "/v1/x", (), b'{"model":"m","n":2}'),
    ):
        assert nearest(req, c, anything) is None


def test_the_stream_flag_and_query_must_agree() -> None:
    def body(stream: bool | None) -> bytes:
        doc: dict[str, object] = {
            "model": "m",
            "messages": [{"role": "user", "content": "hi there"}],
        }
        if stream is not None:
            doc["stream"] = stream
        return json.dumps(doc).encode()

    c = cassette_of(
        interaction(id="streamed", body=body(True)),
        interaction(
            id="sse",
            path="/v1beta/models/g:streamGenerateContent",
            body=body(None),
            query=[("alt", "sse")],
        ),
    )
    path = "/v1/chat/completions"
    assert nearest(RecordedRequest("POST", path, (), body(None)), c, FUZZY) is None
    assert nearest(RecordedRequest("POST", path, (), body(False)), c, FUZZY) is None
    found = nearest(RecordedRequest("POST", path, (), body(True)), c, FUZZY)
    assert found is not None
    assert found[0].id == "streamed"
    gpath = "/v1beta/models/g:streamGenerateContent"
    assert nearest(RecordedRequest("POST", gpath, (), body(None)), c, FUZZY) is None
    found = nearest(RecordedRequest("POST", gpath, (("alt", "sse"),), body(None)), c, FUZZY)
    assert found is not None
    assert found[0].id == "sse"
