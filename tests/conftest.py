"""Shared fixtures: every async test runs on asyncio and on trio; and at the
end of the run, no secret any test sent may be in a file under basetemp.

Tests marked ``slow`` are deselected unless CI or REEL_FULL is set
(``tests/slow.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.secrets import scan

# pytester runs the pytest plugin's tests (tests/plugin), and tests.inner_runs
# keeps its in-process runs from leaving a second copy of a module behind;
# tests.redis_server starts a real redis-server (redis_server, redis_url);
# tests.slow deselects the slow tests outside CI; pytest only takes
# pytest_plugins from a top-level conftest.
pytest_plugins = ["pytester", "tests.inner_runs", "tests.redis_server", "tests.slow"]


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend


@pytest.fixture(scope="session", autouse=True)
def no_secret_on_disk(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[None]:
    """After the last test (of this xdist worker: each has its own
    basetemp), scan every file the tests and Reel wrote under basetemp for
    every secret in ``tests/secrets.py``; a hit fails the run."""
    policy = pytestconfig.getini("tmp_path_retention_policy")
    if policy != "all":  # the files would be gone before the scan: it could not fail
        pytest.fail(
            f"tmp_path_retention_policy is {policy!r}: the secret scan needs 'all'",
            pytrace=False,
        )
    yield
    root = tmp_path_factory.getbasetemp()
    hits = scan(root)
    if hits:
        lines = "\n".join(f"  {path}: {kind}" for path, kind in hits)
        pytest.fail(
            f"{len(hits)} secret(s) written to disk under {root}:\n{lines}\n"
            "Reel must scrub every credential the client sent (see docs/redaction.md); "
            "find what wrote each file and scrub it there.",
            pytrace=False,
        )
