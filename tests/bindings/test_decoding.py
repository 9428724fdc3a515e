"""Every binding asks upstream only for the codings this install decodes,
and stores every body readable, or flagged.

The proxy (asyncio, trio), the httpx and httpx2 transports (sync and
async) and the requests adapter all forward the client's
``accept-encoding`` through the core's one decision
(:func:`reel_core.accept_encoding`); a zstd answer is stored decoded; one
that arrives in a coding this install cannot read anyway (an upstream that
ignores ``accept-encoding``) is stored as it came and flagged, and ``reel
check`` fails on it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from reel_bindings.cli import main
from reel_core import Cassette, Mode
from reel_core.tools import decodable_codings
from tests.fakes.upstream import SCENARIO_HEADER, FakeUpstreamThread
from tests.secrets import OPENAI_KEY

from .openers import BINDINGS, Call

pytest.importorskip("zstandard", reason="pip install zstandard (in the test extra)")

ASKED = "gzip, deflate, zstd, compress, sdch"


def chat(*scenarios: str) -> Call:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
    headers = {
        "content-type": "application/json",
        "authorization": f"Bearer {OPENAI_KEY}",
        "accept-encoding": ASKED,
    }
    if scenarios:
        headers[SCENARIO_HEADER] = ",".join(scenarios)
    return Call("POST", "/v1/chat/completions", json.dumps(body).encode(), headers)


def forwarded(fake: FakeUpstreamThread) -> list[str | None]:
    """The ``accept-encoding`` of each request the fake received."""
    return [dict(r.headers).get("accept-encoding") for r in fake.requests]


@pytest.mark.parametrize("binding", list(BINDINGS))
def test_a_zstd_answer_is_stored_decoded(binding: str, tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    with FakeUpstreamThread() as fake:
        with BINDINGS[binding](cassette, Mode.RECORD, fake.url) as send:
            reply = send(chat("zstd"))
        asked = forwarded(fake)
    assert asked == ["gzip, deflate, zstd"]  # compress and sdch: no Reel decodes them
    assert reply.status == 200  # its body as the client decodes it (httpx2 has no zstd)
    (ix,) = Cassette.loads(cassette.read_bytes())
    assert ix.response.encoding_error is None
    assert json.loads(ix.response.body)["choices"]
    assert all(k != "content-encoding" for k, _ in ix.response.headers)


@pytest.mark.parametrize("binding", list(BINDINGS))
def test_without_zstandard_zstd_is_not_asked_for_and_flagged_when_it_comes(
    binding: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(sys.modules, "zstandard", None)
    decodable_codings.cache_clear()
    cassette = tmp_path / "c.jsonl"
    try:
        with FakeUpstreamThread() as fake:
            with BINDINGS[binding](cassette, Mode.RECORD, fake.url) as send:
                send(chat())
                send(chat("zstd"))  # an upstream that answers zstd all the same
            asked = forwarded(fake)
    finally:
        decodable_codings.cache_clear()
    assert asked == ["gzip, deflate"] * 2
    plain, packed = Cassette.loads(cassette.read_bytes())
    assert plain.response.encoding_error is None
    assert packed.response.encoding == "zstd"
    assert packed.response.encoding_error == (
        "cannot decode content-encoding 'zstd' (install zstandard: pip install 'reel-llm[zstd]')"
    )
    assert ("content-encoding", "zstd") in packed.response.headers
    capsys.readouterr()
    assert main(["check", str(cassette)]) == 1
    out, err = capsys.readouterr()
    assert f"{cassette}:3: response.body (stored zstd-encoded) not decoded" in out
    assert "pip install 'reel-llm[zstd]'" in out
    assert "re-record those requests" in err
