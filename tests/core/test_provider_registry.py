"""The provider registry: every registered provider implements the whole
interface, and the decisions read from it agree with the modules."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from reel_core import _providers
from reel_core._providers import (
    ANSWER_READERS,
    DRIFT_FIELDS,
    PROVIDER_HOSTS,
    PROVIDERS,
    USAGE_READERS,
    Claim,
    Piece,
    Provider,
    Tally,
    answer_pieces,
    anthropic,
    endpoint_family,
    gemini,
    generic,
    guess_provider,
    openai,
    xai,
)

MODULES = {
    "openai": openai,
    "anthropic": anthropic,
    "gemini": gemini,
    "xai": xai,
    "generic": generic,
}

# One object of each shape the readers know, to drive every reader once.
SAMPLES: list[tuple[dict[str, Any], object]] = [
    ({"type": "message_start", "message": {"model": "claude"}}, None),
    ({"type": "response.completed", "response": {"model": "gpt"}}, None),
    ({"candidates": [], "modelVersion": "gemini"}, None),
    ({"choices": [{"delta": {"content": "hi"}}]}, None),
    ({"message": {"content": "hi"}, "done": False}, None),
    ({}, None),
    ({"type": ["not", "a", "name"]}, None),
]


def test_the_registry_names_every_provider_module() -> None:
    assert set(PROVIDERS) == set(MODULES)
    for name, provider in PROVIDERS.items():
        assert MODULES[name].PROVIDER is provider
        assert provider.name == name
    # generic recognizes anything, so it must be tried last.
    assert list(PROVIDERS)[-1] == "generic"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_provider_implements_the_whole_interface(name: str) -> None:
    provider = PROVIDERS[name]
    assert isinstance(provider, Provider)
    with pytest.raises(AttributeError):  # a frozen value
        provider.name = "x"  # type: ignore[misc]
    assert provider.host is None or provider.host.startswith("https://")
    assert isinstance(provider.recognizes("/v1/x", "", ()), bool)
    assert isinstance(provider.family("/v1/x"), bool)
    assert all(isinstance(f, str) and f for f in provider.drift_fields)
    assert isinstance(provider.stream_event_kinds, frozenset)
    assert all(isinstance(k, str) for k in provider.stream_event_kinds)
    assert isinstance(provider.stream_usage_opt_in, bool)
    # Every reader takes (tally, object, kind) / (object, kind), never
    # raises on the shapes of other providers, and is offered objects by
    # the registry's order.
    assert isinstance(provider.title, str)
    assert provider.title
    assert isinstance(provider.rank, int)
    assert isinstance(provider.family_claim, Claim)
    assert all(isinstance(k, str) and k for k in provider.system_keys + provider.prompt_keys)
    assert all(k.isupper() for k in provider.key_variables)
    assert provider.base_url_variable is None or provider.base_url_variable.isupper()
    for claim, read_usage in provider.usage_readers:
        assert isinstance(claim, Claim)
        assert len(inspect.signature(read_usage).parameters) == 3
        assert read_usage in USAGE_READERS
        for obj, kind in SAMPLES:
            assert read_usage(Tally(), obj, obj.get("type", kind)) in (True, False, None)
    for claim, read_answer in provider.answer_readers:
        assert isinstance(claim, Claim)
        assert len(inspect.signature(read_answer).parameters) == 2
        assert read_answer in ANSWER_READERS
        for obj, kind in SAMPLES:
            pieces = read_answer(obj, obj.get("type", kind))
            assert pieces is None or all(isinstance(p, Piece) for p in pieces)


def test_every_reader_in_the_orders_belongs_to_a_provider() -> None:
    usage = [r for p in PROVIDERS.values() for _, r in p.usage_readers]
    answers = [r for p in PROVIDERS.values() for _, r in p.answer_readers]
    assert sorted(map(id, usage)) == sorted(map(id, USAGE_READERS))
    assert sorted(map(id, answers)) == sorted(map(id, ANSWER_READERS))


def test_the_tables_are_read_from_the_providers() -> None:
    assert {p.name: p.host for p in PROVIDERS.values() if p.host} == PROVIDER_HOSTS
    assert "generic" not in PROVIDER_HOSTS
    assert {p.name: p.drift_fields for p in PROVIDERS.values() if p.drift_fields} == DRIFT_FIELDS
    assert PROVIDERS["generic"].drift_fields == ()


def test_generic_claims_what_nothing_else_does() -> None:
    assert generic.recognizes("/anything", "", ())
    assert not generic.family("/v1/chat/completions")
    assert guess_provider("/api/chat", "127.0.0.1:11434") == "generic"


def test_families_are_tried_gemini_first() -> None:
    # A Gemini method path is Gemini's even when it ends like another family.
    path = "/v1beta/models/m:generateContent/messages"
    assert gemini.family(path)
    assert anthropic.family(path)
    assert endpoint_family(path) == "gemini"


def test_the_registry_cannot_be_changed() -> None:
    with pytest.raises(TypeError):
        _providers.PROVIDERS["x"] = PROVIDERS["generic"]  # type: ignore[index]


def test_answer_pieces_of_what_no_provider_reads() -> None:
    assert answer_pieces([1, 2]) is None
    assert answer_pieces({"unknown": 1}) is None
    assert answer_pieces({"type": ["odd"]}) is None
    # The object's own type wins over the SSE event name.
    assert answer_pieces({"type": "ping"}, "content_block_delta") == []


def test_stream_usage_is_opt_in_only_for_openai_shapes() -> None:
    assert {n for n, p in PROVIDERS.items() if p.stream_usage_opt_in} == {"openai", "generic"}


def test_each_model_is_priced_by_one_provider() -> None:
    from reel_core._prices import ALIASES, PRICES

    assert sum(len(p.prices) for p in PROVIDERS.values()) == len(PRICES)
    assert sum(len(p.aliases) for p in PROVIDERS.values()) == len(ALIASES)
    for provider in PROVIDERS.values():
        # An alias names a price of its own provider.
        assert set(provider.aliases.values()) <= set(provider.prices)
    assert PROVIDERS["generic"].prices == {}
