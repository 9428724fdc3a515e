"""Real servers and browsers the tests start: found on PATH, or skipped.

On a developer's machine without the Debian package a test skips and says
which package to install; in CI (``CI=true``) ``.ci/run`` installed them, so a
missing program fails the test instead of skipping it silently.
"""

from __future__ import annotations

import os
import shutil

import pytest

#: program -> the Debian package that provides it
PACKAGES = {
    "chromium": "chromium",
    "redis-server": "redis-server",
}


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def need_program(name: str) -> str:
    """The path of ``name``; skip the test (fail it in CI) when it is absent."""
    path = shutil.which(name)
    if path is not None:
        return path
    package = PACKAGES.get(name, name)
    reason = f"{name} is not installed: apt-get install -y {package}"
    if in_ci():
        pytest.fail(f"{reason} (CI=true: .ci/run should have installed it)", pytrace=False)
    pytest.skip(reason)
