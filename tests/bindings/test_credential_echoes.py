"""The two echoes issue 32 names, end to end against the fake upstream,
through the proxy and the in-process bindings: an ``x-api-key`` an
upstream writes back in a JSON body with ``+`` as ``\\u002B``, and an
opaque ``?key=`` / ``?api-key=`` credential an HTTP upstream echoes.  The
whole family is the property in tests/property/test_credential_echoes.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reel_core import Mode
from tests.fakes.upstream import SCENARIO_HEADER, FakeUpstreamThread
from tests.secrets import ESCAPED_KEY, QUERY_KEY, recoverable

from .openers import BINDINGS, Call

#: The proxy, and an in-process binding of each kind.
USED = ("proxy-asyncio", "httpx", "httpx-async-trio", "requests")
CHAT = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})


def _record(binding: str, tmp_path: Path, call: Call) -> tuple[bytes, bytes]:
    """Record ``call`` through ``binding``: what the client got, and the cassette."""
    cassette = tmp_path / "echo.jsonl"
    with FakeUpstreamThread() as fake, BINDINGS[binding](cassette, Mode.RECORD, fake.url) as send:
        reply = send(call)
    assert reply.status == 401
    return reply.body, cassette.read_bytes()


@pytest.mark.parametrize("binding", USED)
def test_an_x_api_key_echoed_with_json_escapes_is_scrubbed(binding: str, tmp_path: Path) -> None:
    headers = {
        "content-type": "application/json",
        "x-api-key": ESCAPED_KEY,
        SCENARIO_HEADER: "echo-escaped",
    }
    got, written = _record(binding, tmp_path, Call("POST", "/v1/messages", CHAT.encode(), headers))
    # the upstream wrote it back escaped (so there was something to find)
    assert b"xak1\\u002BHq7\\u002FVn3\\u002BTz8Wm" in got
    assert ESCAPED_KEY in json.loads(got)["error"]["message"]
    assert recoverable(ESCAPED_KEY, written) == []
    assert b"[REDACTED:credential]" in written


@pytest.mark.parametrize("name", ["key", "api-key"])
@pytest.mark.parametrize("scenario", ["echo-key", "echo-escaped"])
@pytest.mark.parametrize("binding", USED)
def test_a_query_credential_an_upstream_echoes_is_scrubbed(
    binding: str, scenario: str, name: str, tmp_path: Path
) -> None:
    headers = {"content-type": "application/json", SCENARIO_HEADER: scenario}
    call = Call("POST", f"/v1/chat/completions?{name}={QUERY_KEY}", CHAT.encode(), headers)
    got, written = _record(binding, tmp_path, call)
    assert QUERY_KEY in json.loads(got)["error"]["message"]
    assert recoverable(QUERY_KEY, written) == []
    assert b"[REDACTED:credential]" in written
    assert b"[REDACTED:query-secret]" in written  # the request's own query
