"""A miss under a store (``--reel-store redis://...``) says where the
cassette is and gives a command that keeps the store: it used to say the
cassette *file* did not exist and to run ``--reel-mode record`` without
``--reel-store`` (which records into files beside the tests).  A store
URL's user and password are never printed."""

from __future__ import annotations

import pytest

from tests.redis_server import RedisServer

MISSING = """
import httpx


def test_miss(reel):
    with httpx.Client(transport=reel.transport()) as client:
        client.post("https://api.openai.com/v1/chat/completions", json={"model": "m"})
"""


@pytest.mark.parametrize("how", ["flag", "variable"])
def test_a_miss_under_a_store_keeps_the_store_in_its_advice(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    redis_server: RedisServer,
    redis_url: str,
    how: str,
) -> None:
    # a user of its own with a password: the hint must not print it
    assert redis_server.command("ACL", "SETUSER", "hinted", "on", ">pw-s3cret", "~*", "&*", "+@all")
    signed = redis_url.replace("redis://", "redis://hinted:pw-s3cret@")
    shown = redis_url
    pytester.makepyfile(test_hint=MISSING)
    if how == "flag":
        result = pytester.runpytest_inprocess("--reel-store", signed)
        command = f"pytest test_hint.py::test_miss --reel-store {shown} --reel-mode record"
    else:
        monkeypatch.setenv("REEL_STORE", signed)
        result = pytester.runpytest_inprocess()
        command = "pytest test_hint.py::test_miss --reel-mode record"  # REEL_STORE is read again
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "pw-s3cret" not in out
    assert (
        f"to record it: the cassette test_hint/test_miss.jsonl in the store {shown} does not "
        f"exist yet; record it with `{command}`"
    ) in out, out
