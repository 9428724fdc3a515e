"""reel_core._providers.gemini: what had no direct test before the provider
modules (answers, the model in a method path, the readers' claims)."""

from __future__ import annotations

import pytest

from reel_core._providers import Piece, Tally, gemini


@pytest.mark.parametrize(
    ("path", "model"),
    [
        ("/v1beta/models/gemini-2.5-flash:generateContent", "gemini-2.5-flash"),
        ("/v1/projects/p/models/a:x/models/b:y", "b"),
        ("/v1beta/models/:generateContent", None),
        ("/v1/chat/completions", None),
    ],
)
def test_path_model_takes_the_last_models_segment(path: str, model: str | None) -> None:
    assert gemini.path_model(path) == model


@pytest.mark.parametrize(
    ("provider", "path", "model"),
    [
        ("gemini", "/v1beta/models/gemini-2.5-flash:generateContent", "gemini-2.5-flash"),
        ("gemini", "/v1beta/models/gemini-pro", "gemini-pro"),
        ("openai", "/v1beta/models/gemini-pro", None),
        ("generic", "/x/models/m:predict", "m"),
        ("gemini", "/v1/chat/completions", None),
    ],
)
def test_method_model_is_the_usage_fallback(provider: str, path: str, model: str | None) -> None:
    assert gemini.method_model(provider, path) == model


def test_usage_claims_only_gemini_shapes() -> None:
    assert gemini.read_usage(Tally(), {"choices": []}, None) is None
    tally = Tally()
    assert gemini.read_usage(tally, {"modelVersion": "gemini-x"}, None) is False
    assert tally.model == "gemini-x"
    call = {"candidates": [{"content": {"parts": [{"functionCall": {"name": "f"}}]}}]}
    assert gemini.read_usage(Tally(), call, None) is True
    assert gemini.PROVIDER.stream_event_kinds == frozenset()


def test_answer_pieces_of_the_first_candidate() -> None:
    obj = {
        "candidates": [
            {
                "content": {
                    "parts": [
                        {"text": "Hi"},
                        "junk",
                        {"functionCall": {"name": "get", "args": {"q": 1}}},
                        {"thought": True},
                    ]
                }
            },
            {"content": {"parts": [{"text": "second candidate"}]}},
        ]
    }
    assert gemini.answer_pieces(obj, None) == [
        Piece("Hi"),
        Piece(tool=("", "get", '{"q":1}')),
        Piece(""),
    ]
    assert gemini.answer_pieces({"candidates": ["junk"]}, None) == []
    assert gemini.answer_pieces({"candidates": [{"content": {"parts": 3}}]}, None) == []
    assert gemini.answer_pieces({"candidates": []}, None) == []


def test_a_usage_only_element_says_nothing() -> None:
    assert gemini.answer_pieces({"usageMetadata": {"promptTokenCount": 1}}, None) == []
    assert gemini.answer_pieces({"modelVersion": "m"}, None) == []
    assert gemini.answer_pieces({"candidates": "junk"}, None) is None
