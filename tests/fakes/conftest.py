"""Fixtures for the fake upstream's own tests (``anyio_backend`` is in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.upstream import FakeUpstreamThread


@pytest.fixture(params=["asyncio", "trio"])
def threaded_fake(request: pytest.FixtureRequest) -> Iterator[FakeUpstreamThread]:
    """The fake in its own thread, its loop on asyncio or on trio, for sync clients."""
    with FakeUpstreamThread(backend=request.param) as fake:
        yield fake
