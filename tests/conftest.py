"""Shared fixtures: every async test runs on asyncio and on trio."""

from __future__ import annotations

import pytest

# pytester runs the pytest plugin's tests (tests/plugin); pytest only takes
# pytest_plugins from a top-level conftest.
pytest_plugins = ["pytester"]


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend
