"""A body over the limit: the 413 names the settings that raise it, and
every binding reads them (the proxy's --max-body, REEL_MAX_BODY)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import requests

from reel_bindings.httpcore import Transport
from reel_bindings.proxy import parse_options
from reel_bindings.requests import Adapter
from reel_core import ConfigError, Limits, RemoteProtocolError


@pytest.fixture
def cassette(tmp_path: Path) -> Path:
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"")
    return path


def test_in_process_bindings_read_reel_max_body(
    cassette: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REEL_MAX_BODY", "100")
    with (
        httpx.Client(transport=Transport(cassette, mode="replay")) as client,
        pytest.raises(RemoteProtocolError) as info,
    ):
        client.post("http://api.openai.com/v1/chat/completions", content=b"x" * 101)
    assert info.value.status == 413
    assert "request body of 101 bytes is over the 100-byte limit" in str(info.value)
    assert "REEL_MAX_BODY=BYTES" in str(info.value)
    session = requests.Session()
    session.mount("http://", Adapter(cassette, mode="replay"))
    with pytest.raises(RemoteProtocolError, match="--max-body BYTES"):
        session.post("http://api.openai.com/v1/chat/completions", data=b"x" * 101)
    monkeypatch.setenv("REEL_MAX_BODY", "1000")
    with httpx.Client(transport=Transport(cassette, mode="replay")) as client:
        miss = client.post("http://api.openai.com/v1/chat/completions", content=b"x" * 101)
    assert miss.status_code == 404


@pytest.mark.parametrize("value", ["lots", "0", "-5"])
def test_a_bad_reel_max_body_is_refused(
    value: str, cassette: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REEL_MAX_BODY", value)
    with pytest.raises(ConfigError, match=f"REEL_MAX_BODY='{value}'"):
        Transport(cassette, mode="replay")


def test_the_proxy_reads_reel_max_body_and_the_flag_wins(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert parse_options([], environ={}).max_body == Limits().max_body
    assert parse_options([], environ={"REEL_MAX_BODY": "100"}).max_body == 100
    assert parse_options(["--max-body", "7"], environ={"REEL_MAX_BODY": "100"}).max_body == 7
    with pytest.raises(SystemExit) as info:
        parse_options([], environ={"REEL_MAX_BODY": "lots"})
    assert info.value.code == 2
    assert "REEL_MAX_BODY='lots' is not a positive number of bytes" in capsys.readouterr().err
