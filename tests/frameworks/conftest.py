"""The frameworks' settings for the matrix: nothing but 127.0.0.1 is ever asked.

Set here, before any test module imports a framework: litellm fetches its
model cost map at import unless told to use the one it ships, and the
tracing and telemetry of langchain, openai-agents and litellm would post to
their services.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

# imported before any framework is (they are imported by the first test that
# uses each, see matrix.framework): litellm imports httpx, and a collection
# while it does may close an earlier test's openai stream, whose close reads
# httpx.TimeoutException off the half-imported module
import httpx  # noqa: F401
import pytest

from tests.fakes.upstream import FakeUpstreamThread

_QUIET = {
    # litellm: the cost map it ships, no telemetry
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_TELEMETRY": "False",
    # openai-agents: no trace export (the tests also call set_tracing_disabled)
    "OPENAI_AGENTS_DISABLE_TRACING": "1",
    "DO_NOT_TRACK": "1",
}
for _name, _value in _QUIET.items():
    os.environ[_name] = _value
# langchain traces to LangSmith when one of these is on
for _name in ("LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING", "LANGSMITH_TRACING"):
    os.environ.pop(_name, None)
# a key or base URL of the machine's would send a test elsewhere
for _name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
    os.environ.pop(_name, None)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeUpstreamThread]:
    """One fake provider per module, on its own thread and loop: the truth
    each case is compared with, and the tripwire a replay must not touch."""
    with FakeUpstreamThread() as server:
        yield server
