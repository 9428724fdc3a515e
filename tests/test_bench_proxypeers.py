"""The proxy peers section of the benchmark (bench/proxypeers.py) reads its
rows right and never fails for a peer it cannot run.  Nothing here is timed:
the figures are the benchmark's, not the tests'."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench import proxypeers
from bench._common import Row
from bench._peer_install import _talkback, find


def _reel(backend: str, rps: int, rss: float, ttfb: float, p99: float) -> Row:
    return {
        "tool": f"reel ({backend})",
        "requests_per_s_1": rps,
        "requests_per_s_16": 2 * rps,
        "peak_rss_mb": rss,
        "record_added_ttfb_json_us": ttfb,
        "offset_err_p99_ms": p99,
        "stream_arrivals": 40,
    }


def test_lead_reads_ratios_and_says_why_a_peer_has_none() -> None:
    rows = [
        _reel("asyncio", 1000, 40.0, 700.0, 0.3),
        _reel("trio", 1200, 44.0, 800.0, 0.2),
        {
            "tool": "mitmproxy",
            "requests_per_s_1": 200,
            "requests_per_s_16": 300,
            "peak_rss_mb": 88.0,
            "record_added_ttfb_json_us": 1100.0,
            "offset_err_p99_ms": 317.4,
            "stream_arrivals": 1,
        },
        {"tool": "talkback", "requests_per_s_1": "not run: npm is not on PATH"},
    ]
    assert proxypeers.lead(rows) == [
        ("Reel's requests/s over mitmproxy's (1 and 16 connections, each backend)",
         "5.00x-8.00x", True),
        ("mitmproxy's peak RSS over Reel's", "2.00x-2.20x", True),
        ("record mode's added TTFB, p50 (non-stream): Reel vs mitmproxy",
         "0.70-0.80 ms vs 1.10 ms", True),
        ("the 40-frame stream's offset error p99: Reel vs mitmproxy",
         "0.3 ms vs 317.4 ms (1 arrivals)", True),
        ("Reel vs talkback", "not run: npm is not on PATH", None),
    ]  # fmt: skip


def test_lead_says_when_a_peer_is_ahead() -> None:
    slow = _reel("asyncio", 100, 90.0, 3000.0, 400.0)
    fast = {**slow, "tool": "mitmproxy", "requests_per_s_1": 1000, "requests_per_s_16": 2000}
    fast.update(peak_rss_mb=45.0, record_added_ttfb_json_us=1000.0, offset_err_p99_ms=300.0)
    assert [met for _, _, met in proxypeers.lead([slow, fast])] == [False] * 4


@pytest.mark.parametrize(
    ("response", "body"),
    [
        (b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello", b"hello"),
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n", b""),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"3;x=y\r\nhel\r\nc\r\nlo\r\n\r\ndata: \r\n0\r\n\r\n",
            b"hello\r\n\r\ndata: ",
        ),
    ],
)
def test_body_dechunks(response: bytes, body: bytes) -> None:
    assert proxypeers._body(response) == body


def test_a_peer_not_installed_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REEL_BENCH_PEERS", str(tmp_path))
    mitmproxy, talkback = find(install=False)
    assert not mitmproxy.command
    assert mitmproxy.missing.startswith(f"not installed in {tmp_path / 'mitmproxy'}")
    assert "--only proxypeers" in mitmproxy.missing
    assert not talkback.command
    assert talkback.missing  # not installed, or no node on this machine
    monkeypatch.setenv("PATH", str(tmp_path))  # no node, no npm: nothing to install with
    assert _talkback(install=True).missing == "node is not on PATH"
    assert not (tmp_path / "talkback").exists()
