"""Assets under the pytest plugin: a marked test's vision request keeps its
image beside the test's cassette (``REEL_ASSET_THRESHOLD`` read per run),
and the replay, with no upstream, gets the same answer."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from tests.fakes.upstream import FakeUpstreamThread

from .test_record_replay import stop

IMAGE = bytes(range(256)) * 24  # 6 KiB: 8,192 base64 characters

VISION = f"""
import os

import httpx
import pytest

URL = os.environ["FAKE_URL"]
IMAGE = "data:image/png;base64,{base64.b64encode(IMAGE).decode()}"


@pytest.mark.reel
def test_vision(reel):
    body = {{"model": "gpt-4o-mini", "messages": [{{"role": "user", "content": [
        {{"type": "text", "text": "What is Reel?"}},
        {{"type": "image_url", "image_url": {{"url": IMAGE}}}}]}}]}}
    with httpx.Client(transport=reel.transport()) as client:
        reply = client.post(URL + "/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    assert reel.misses == []
"""


def test_a_marked_tests_image_is_an_asset_and_replays(
    pytester: pytest.Pytester, fake: FakeUpstreamThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_vision=VISION)
    monkeypatch.setenv("REEL_ASSET_THRESHOLD", "4096")
    pytester.runpytest_subprocess("--reel-mode", "record").assert_outcomes(passed=1)
    cassette = pytester.path / "tests/cassettes/test_vision/test_vision.jsonl"
    line = json.loads(cassette.read_text("utf-8").splitlines()[1])
    (ref,) = line["assets"]
    assert ref["sha256"] == hashlib.sha256(IMAGE).hexdigest()
    asset = cassette.with_suffix(".assets") / f"sha256-{ref['sha256']}"
    assert asset.read_bytes() == IMAGE
    stop(fake, monkeypatch)
    monkeypatch.delenv("REEL_ASSET_THRESHOLD")
    pytester.runpytest_subprocess().assert_outcomes(passed=1)  # replay, nothing upstream
    asset.unlink()
    failed = pytester.runpytest_subprocess()
    failed.assert_outcomes(failed=1)
    # the answer names the missing file and what to do
    assert f"asset {asset} is missing" in failed.stdout.str()
    assert "`reel check` lists every missing or corrupt asset" in failed.stdout.str()
