"""The answers Reel makes itself, as a real grpcio client of the in-process
channels (sync and grpc.aio) raises them (issue 35): a store that is down
is ``UNAVAILABLE``, a cassette line that cannot be read ``INTERNAL``, each
with Reel's own words in the details, never "HTTP 502" or "HTTP 500" read
back from a JSON body."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.bindings.grpc_server import STREAM, UNARY, Script, ScriptedServer
from tests.bindings.test_grpc import GONE, KINDS, both

grpc = pytest.importorskip("grpc", reason="the gRPC binding's tests need grpcio")

from reel_bindings._store import MemoryStore, StoreUnavailableError  # noqa: E402

URL = "redis://gone:6379/0"


class _DownStore(MemoryStore):
    """A store whose server is gone (what a Redis store's check says then)."""

    def check(self) -> None:
        raise StoreUnavailableError(f"the cassette store {URL} cannot be reached")


@pytest.fixture(scope="module")
def server() -> Any:
    with ScriptedServer() as running:
        yield running


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("method", [UNARY, STREAM])
def test_a_store_that_is_down_is_unavailable_and_nothing_is_sent(
    kind: str, method: str, server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REEL_MODE", raising=False)
    before = sum(server.calls.values())
    script = Script(messages=(b"m",), tag=f"down {kind} {method}")
    name = Path("down.jsonl")  # a name in the store
    got = both(kind, server.address, name, method, script, mode="record", store=_DownStore())
    assert got[0] == ()
    assert got[1] is grpc.StatusCode.UNAVAILABLE
    details = got[2]
    assert details.startswith(f"Reel did not forward {method}: the cassette store cannot keep")
    assert URL in details
    assert "Nothing was sent upstream" in details
    assert "HTTP 502" not in details
    assert sum(server.calls.values()) == before


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("method", [UNARY, STREAM])
def test_a_cassette_line_that_cannot_be_read_is_internal(
    kind: str, method: str, server: ScriptedServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "broken.jsonl"
    script = Script(messages=(b"m",), tag=f"broken {kind}")
    both(kind, server.address, cassette, method, script, mode="record")
    meta, line = cassette.read_text().splitlines()
    key = json.loads(line)["key"]
    # indexed (key first, ends in "}") but not JSON: found only when used
    cassette.write_text(meta + "\n" + '{"key":' + json.dumps(key) + ',"id":BROKEN}\n')
    got = both(kind, GONE, cassette, method, script, mode="replay")
    assert got[0] == ()
    assert got[1] is grpc.StatusCode.INTERNAL
    assert "broken.jsonl:2: not a JSON line" in got[2]
    assert "Fix or delete that line" in got[2]
    assert "HTTP 500" not in got[2]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("error", "code"),
    [
        ("reset", grpc.StatusCode.UNAVAILABLE),
        ("closed", grpc.StatusCode.UNAVAILABLE),
        ("timeout", grpc.StatusCode.DEADLINE_EXCEEDED),
    ],
)
def test_a_replayed_cut_ends_with_the_code_of_what_broke_it(
    kind: str, error: str, code: Any, server: ScriptedServer, tmp_path: Path
) -> None:
    # the code the proxy's HTTP/2 adapter ends such a call with (grpc_code)
    cassette = tmp_path / "cut.jsonl"
    script = Script(messages=(b"one", b"two"), tag=f"cut {kind} {error}")
    both(kind, server.address, cassette, STREAM, script, mode="record")
    meta, line = cassette.read_text().splitlines()
    recorded = json.loads(line)
    response = recorded["response"]
    response["cut"] = {"at": response.pop("end")["at"], "error": error, "detail": "boom"}
    del response["trailers"]
    cassette.write_text(meta + "\n" + json.dumps(recorded) + "\n")
    got = both(kind, GONE, cassette, STREAM, script, mode="replay", timing="fast")
    assert got[0] == (b"one", b"two")
    assert got[1] is code
    assert f"the recorded call broke off ({error}: boom)" in got[2]
