"""Fixtures for the pytest plugin's tests: each runs small test files in a
pytest subprocess (pytester) that loads the plugin by its entry point, with
the fake upstream in this process and its URL in ``$FAKE_URL``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.upstream import FakeUpstreamThread, closed_port_url
from tests.inner import inner_ini
from tests.secrets import PLUGIN_KEY

#: Variables of the outer environment an inner run must not inherit, with
#: every registered provider's key and base-URL variables (see
#: :func:`provider_variables`).
SCRUBBED = (
    "REEL_MODE",
    "REEL_TIMING",
    "REEL_UPSTREAM",
    "REEL_MATCH",
    "REEL_CASSETTE",
    "REEL_CASSETTE_DIR",
    "REEL_REDACT_PII",
    "REEL_DROP_RESPONSE_HEADERS",
    "REEL_PROTO_DESCRIPTOR",
    "PYTEST_ADDOPTS",
    "PYTEST_PLUGINS",
    "PYTEST_XDIST_WORKER",
    "PYTEST_XDIST_TESTRUNUID",
    "PYTEST_XDIST_WORKER_COUNT",
)

#: The inner runs' configuration: as strict as this project's own.
INNER_INI = inner_ini()

#: A key to record with (the fake upstream takes any; no known shape, so
#: only its value says it is a secret).
FAKE_KEY = PLUGIN_KEY


def provider_variables() -> list[str]:
    """The API-key and base-URL variables of every registered provider
    (read when asked: a test may have registered one)."""
    from reel_core.tools import PROVIDERS

    found = [v for p in PROVIDERS.values() for v in p.key_variables]
    return found + [p.base_url_variable for p in PROVIDERS.values() if p.base_url_variable]


@pytest.fixture(autouse=True)
def inner_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in (*SCRUBBED, *provider_variables()):
        monkeypatch.delenv(variable, raising=False)
    # Until a test starts the fake: a URL where nothing listens.
    monkeypatch.setenv("FAKE_URL", closed_port_url())
    pytester.makeini(INNER_INI)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeUpstreamThread]:
    """The fake upstream, its URL in ``$FAKE_URL``; stop it to prove a replay
    needs no network."""
    with FakeUpstreamThread() as server:
        monkeypatch.setenv("FAKE_URL", server.url)
        yield server


#: The inner runs' workers: one process, and two xdist workers (a file each).
SERIAL_AND_N2 = pytest.mark.parametrize(
    "workers", [[], ["-n", "2", "--dist", "loadfile"]], ids=["serial", "n2"]
)


def recorded_questions(pytester: pytest.Pytester, module: str, test: str) -> list[str]:
    """The first message of each request recorded in the cassette of
    ``module::test`` of an inner run (its lines after the ``_meta``)."""
    import json

    path = pytester.path / f"tests/cassettes/{module}/{test}.jsonl"
    lines = [json.loads(text) for text in path.read_text("utf-8").splitlines()[1:]]
    return [line["request"]["body"]["json"]["messages"][0]["content"] for line in lines]
