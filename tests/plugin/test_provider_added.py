"""A provider added in one module (``tests/fakes/acme_provider.py``) is
picked up by the pytest plugin with no other edit: its per-test proxy
points the provider's base-URL variable at itself and, in replay mode, sets
a placeholder for its unset API key (issue 33; the core's part is in
``tests/core/test_provider_added.py``)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from reel_bindings.pytest_plugin import proxy_environment
from reel_bindings.sdk import REPLAY_KEY
from reel_core.tools import PROVIDERS, Provider, register_provider, unregister_provider
from tests.fakes import acme_provider

URL = "http://127.0.0.1:7878"


@pytest.fixture
def acme() -> Iterator[Provider]:
    register_provider(acme_provider.PROVIDER)
    try:
        yield acme_provider.PROVIDER
    finally:
        unregister_provider("acme")


def test_reel_s_own_providers_are_set_as_before() -> None:
    assert proxy_environment(URL, replay=True, environ={}) == {
        "ANTHROPIC_BASE_URL": URL,
        "ANTHROPIC_API_KEY": REPLAY_KEY,
        "GOOGLE_GEMINI_BASE_URL": URL,
        "GEMINI_API_KEY": REPLAY_KEY,
        "OPENAI_BASE_URL": URL + "/v1",
        "OPENAI_API_KEY": REPLAY_KEY,
        "XAI_API_KEY": REPLAY_KEY,
    }
    # a key of the environment is left alone; either of Gemini's will do
    set_keys = {"OPENAI_API_KEY": "sk-x", "GOOGLE_API_KEY": "g-x"}
    env = proxy_environment(URL, replay=True, environ=set_keys)
    assert {"OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"}.isdisjoint(env)
    assert env["ANTHROPIC_API_KEY"] == REPLAY_KEY
    # no placeholder outside replay mode: a recording needs the real key
    assert not any(k.endswith("_KEY") for k in proxy_environment(URL, replay=False, environ={}))


def test_a_registered_provider_s_variables_are_set(acme: Provider) -> None:
    env = proxy_environment(URL, replay=True, environ={})
    assert env["ACME_BASE_URL"] == URL + "/acme"
    assert env["ACME_API_KEY"] == REPLAY_KEY
    assert "ACME_TOKEN" not in env  # the first of its key variables only
    env = proxy_environment(URL, replay=True, environ={"ACME_TOKEN": "a-x"})
    assert "ACME_API_KEY" not in env
    assert "ACME_API_KEY" not in proxy_environment(URL, replay=False, environ={})


INNER = """
import os

from reel_core.tools import register_provider, unregister_provider
from tests.fakes.acme_provider import PROVIDER


def test_acme(reel):
    register_provider(PROVIDER)
    try:
        url = reel.proxy_url
        assert os.environ["ACME_BASE_URL"] == url + "/acme"
        assert os.environ["ACME_API_KEY"] == "reel-replay-no-key"
        assert os.environ["OPENAI_BASE_URL"] == url + "/v1"
    finally:
        unregister_provider("acme")
"""


def test_the_per_test_proxy_sets_them(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_acme=INNER)
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
    assert "ACME_BASE_URL" not in os.environ  # put back after the test
    assert "acme" not in PROVIDERS


def test_inner_runs_do_not_inherit_its_variables(acme: Provider) -> None:
    from tests.plugin.conftest import provider_variables

    assert {"ACME_API_KEY", "ACME_TOKEN", "ACME_BASE_URL"} <= set(provider_variables())
    assert {"OPENAI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"} <= set(
        provider_variables()
    )
