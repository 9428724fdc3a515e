"""A provider is one module (issue 33): ``tests/fakes/acme_provider.py``,
registered through ``register_provider``, is recognised, routed, keyed
without its drift fields, read (usage, answers, prompt) and priced, with no
other edit; unregistered, every table is as it was.  The plugin's part is
in ``tests/plugin/test_provider_added.py``."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from reel_core import (
    Cassette,
    Config,
    Engine,
    Forward,
    MatchConfig,
    MatchMode,
    Mode,
    RecordedResponse,
    Refused,
    Request,
)
from reel_core._prices import ALIASES, PRICES
from reel_core._providers import (
    ANSWER_READERS,
    DRIFT_FIELDS,
    PROVIDER_HOSTS,
    USAGE_READERS,
    endpoint_family,
    guess_provider,
    openai,
    prompt_text,
    route,
    routed_titles,
)
from reel_core.tools import (
    PROVIDERS,
    Piece,
    Provider,
    answer_pieces,
    cost_usd,
    extract_usage,
    match_key,
    register_provider,
    resolve_model,
    unregister_provider,
)
from tests.fakes import acme_provider

from ._helpers import pull

PATH = "/acme/v1/generate"
BODY = json.dumps({"model": "acme-1", "preamble": "be kind", "ask": "hi", "trace_id": "t-1"})
STREAM = (
    b'event: acme.delta\ndata: {"text": "Hel"}\n\n',
    b'event: acme.delta\ndata: {"text": "lo"}\n\n',
    b'event: acme.done\ndata: {"model": "acme-1", "usage": {"in": 1000, "out": 200}}\n\n',
)


def _tables() -> tuple[object, ...]:
    return (
        list(PROVIDERS.items()),
        dict(PROVIDER_HOSTS),
        dict(DRIFT_FIELDS),
        list(USAGE_READERS),
        list(ANSWER_READERS),
        dict(PRICES),
        dict(ALIASES),
        routed_titles(),
    )


@pytest.fixture
def acme() -> Iterator[Provider]:
    before = _tables()
    register_provider(acme_provider.PROVIDER)
    try:
        yield acme_provider.PROVIDER
    finally:
        unregister_provider("acme")
    assert _tables() == before


def test_unregistered_it_is_nobody_s() -> None:
    assert guess_provider(PATH) == "generic"
    assert route(PATH, (), None) is None
    assert endpoint_family(PATH) is None
    assert resolve_model("acme-latest") is None


def test_it_is_recognised_and_routed_in_its_rank(acme: Provider) -> None:
    assert list(PROVIDERS) == ["anthropic", "gemini", "acme", "xai", "openai", "generic"]
    assert guess_provider(PATH) == "acme"
    assert guess_provider("/v1/chat/completions", "api.acme.test") == "acme"
    assert guess_provider("/v1/chat/completions") == "openai"  # the others keep theirs
    assert route(PATH, (), None) == "https://api.acme.test" + PATH
    assert endpoint_family(PATH) == "acme"
    assert routed_titles() == "Anthropic, Gemini, Acme, xAI or OpenAI"


def test_the_engine_routes_records_and_reads_it(acme: Provider) -> None:
    cassette = Cassette("acme.jsonl")
    engine = Engine(cassette, Config(mode=Mode.RECORD, routing=True))
    engine.receive_request(Request("POST", PATH, (), BODY.encode()))
    forward = engine.next_event()
    assert isinstance(forward, Forward)
    assert forward.url == "https://api.acme.test" + PATH
    engine.upstream_head(200, [(b"content-type", b"text/event-stream")], mono=0.0, sent_at=0.0)
    for i, chunk in enumerate(STREAM):
        engine.upstream_data(chunk, mono=0.1 * (i + 1))
    engine.upstream_end(mono=0.4)
    pull(engine)
    recorded = engine.record()
    assert recorded is not None
    (line,) = Cassette.loads(recorded.line).interactions()
    assert line.provider == "acme"
    assert line.meta["model"] == "acme-1"
    assert (line.meta["tokens_in"], line.meta["tokens_out"]) == (1000, 200)
    assert line.meta["ttft_ms"] == pytest.approx(100.0)  # the first delta with text
    assert line.meta["cost_usd"] == pytest.approx((1000 * 1.0 + 200 * 3.0) / 1e6)
    usage = extract_usage("acme", PATH, BODY.encode(), line.response)
    assert cost_usd(usage) == line.meta["cost_usd"]


def test_a_path_of_nobody_s_names_it_among_the_routed(acme: Provider) -> None:
    engine = Engine(Cassette(), Config(mode=Mode.AUTO, routing=True))
    engine.receive_request(Request("POST", "/api/generate", (), b"{}"))
    refused = engine.next_event()
    assert isinstance(refused, Refused)
    assert "not an API path of Anthropic, Gemini, Acme, xAI or OpenAI" in refused.message


def test_its_drift_fields_answers_prompt_and_prices(acme: Provider) -> None:
    normalized = MatchConfig(MatchMode.NORMALIZED)
    other = BODY.replace("t-1", "t-2").encode()
    assert match_key("POST", PATH, (), BODY.encode(), normalized) == match_key(
        "POST", PATH, (), other, normalized
    )
    exact = MatchConfig(MatchMode.EXACT)
    assert match_key("POST", PATH, (), BODY.encode(), exact) != match_key(
        "POST", PATH, (), other, exact
    )
    assert answer_pieces({"text": "Hel"}, "acme.delta") == [Piece("Hel")]
    assert answer_pieces({"type": "acme.done"}) == []
    assert prompt_text(json.loads(BODY)) == "be kind\nhi"
    assert resolve_model("acme-latest") == "acme-1"
    assert resolve_model("acme-1-20260101") == "acme-1"


def test_the_drift_fields_it_brings_replace_a_cached_key() -> None:
    # A key computed before the provider came is not kept past it.
    normalized = MatchConfig(MatchMode.NORMALIZED)
    other = BODY.replace("t-1", "t-2").encode()
    assert match_key("POST", PATH, (), BODY.encode(), normalized) != match_key(
        "POST", PATH, (), other, normalized
    )
    register_provider(acme_provider.PROVIDER)
    try:
        assert match_key("POST", PATH, (), BODY.encode(), normalized) == match_key(
            "POST", PATH, (), other, normalized
        )
    finally:
        unregister_provider("acme")


def test_a_reader_that_nobody_claims_reads_nothing() -> None:
    # Without OpenAI's readers (its chat reader claims whatever is left), a
    # chat completion's usage is nobody's: no figures, no error.
    chunk = {"model": "gpt", "usage": {"prompt_tokens": 5, "completion_tokens": 2}}
    assert openai.read_chat_usage in USAGE_READERS
    unregister_provider("openai")
    try:
        assert openai.read_chat_usage not in USAGE_READERS
        body = json.dumps(chunk).encode()
        usage = extract_usage(
            "openai", "/v1/chat/completions", b"{}", RecordedResponse(200, (), body)
        )
        assert (usage.input_tokens, usage.output_tokens) == (None, None)
    finally:
        register_provider(openai.PROVIDER)
    assert list(PROVIDERS) == ["anthropic", "gemini", "xai", "openai", "generic"]


def test_only_a_provider_registers() -> None:
    with pytest.raises(TypeError, match="not a Provider"):
        register_provider("acme")  # type: ignore[arg-type]
    with pytest.raises(KeyError):
        unregister_provider("acme")
