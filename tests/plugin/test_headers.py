"""Response headers through the pytest plugin: the marker's
drop_response_headers= (else $REEL_DROP_RESPONSE_HEADERS) reaches the
in-process bindings and the test's proxy; a bad one is the test's error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.upstream import FakeUpstreamThread

TESTS = """
import os

import httpx
import pytest
import requests

URL = os.environ["FAKE_URL"]


@pytest.mark.reel("named", drop_response_headers=["X-Served-By"])
def test_transport(reel):
    with httpx.Client(transport=reel.transport(), base_url=URL) as client:
        assert client.get("/web/doc").headers["etag"]


@pytest.mark.reel("named-proxy", upstream=URL, drop_response_headers=["x-served-by"])
def test_proxy(reel):
    with httpx.Client(base_url=reel.proxy_url) as client:
        assert client.get("/web/doc").headers["etag"]


@pytest.mark.reel("from-env")
def test_requests(reel):
    assert reel.requests_session().get(URL + "/web/doc").headers["etag"]
"""


def _headers(path: Path) -> list[str]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [name for ix in lines[1:] for name, _ in ix["response"]["headers"]]


def test_named_headers_are_never_stored(
    pytester: pytest.Pytester, fake: FakeUpstreamThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REEL_DROP_RESPONSE_HEADERS", "last-modified, Cache-Control")
    pytester.makepyfile(test_web=TESTS)
    result = pytester.runpytest_subprocess("--reel-mode", "record")
    result.assert_outcomes(passed=3)
    cassettes = pytester.path / "tests" / "cassettes" / "test_web"
    for name in ("named", "named-proxy"):
        stored = _headers(cassettes / f"{name}.jsonl")
        assert "etag" in stored
        assert "x-served-by" not in stored
        assert "last-modified" in stored  # the marker's list wins over the variable
    stored = _headers(cassettes / "from-env.jsonl")
    assert "x-served-by" in stored
    assert "last-modified" not in stored
    assert "cache-control" not in stored


def test_a_bad_marker_value_is_the_tests_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_bad="""
import pytest

@pytest.mark.reel(drop_response_headers="x-a")
def test_a(reel):
    pass

@pytest.mark.reel(drop_response_headers=["not a name"])
def test_b(reel):
    pass
"""
    )
    result = pytester.runpytest_subprocess("test_bad.py")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        [
            "*@pytest.mark.reel: drop_response_headers=: give a list of header names*",
            "*@pytest.mark.reel: drop_response_headers=: drop_response_headers must name "
            "response headers*",
        ]
    )
