"""2. Cassette open to first replay: opening the file as the bindings do
(``CassetteFile``: read whole, or indexed in pieces when large), indexing it
and serving one request (the last line's), next to reading and splitting the
file, ``json.loads`` of every line, and vcrpy's open of the same
interactions (measured in its child process, to its first replay too), and
cassetter's and agenttape's of their own cassettes where they ran.
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reel_bindings import CassetteFile
from reel_core import Config, EndOfResponse, Engine, Mode, Request, ResponseHead

from ._answers import PATH, is_stream, request_body
from ._common import Row, ratio
from ._data import Corpus

__all__ = ["open_row"]


def _reel_open(path: Path, body: bytes) -> None:
    # as every binding opens it: a large file is indexed in pieces, its
    # lines left in the file (reel_bindings._files.FileLines)
    cassette = CassetteFile(path, mode=Mode.REPLAY).cassette
    session = Engine(cassette, Config(mode=Mode.REPLAY))
    session.receive_request(Request("POST", PATH, (), body))
    while not isinstance(event := session.next_event(), EndOfResponse):
        if isinstance(event, ResponseHead) and event.status != 200:
            raise RuntimeError(f"the first replay answered {event.status}")


def _split(path: Path) -> None:
    path.read_bytes().split(b"\n")


def _json_every_line(path: Path) -> None:
    for line in path.read_bytes().split(b"\n"):
        if line:
            json.loads(line)


def _timed(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def open_row(
    corpus: Corpus,
    repeat: int,
    vcr: dict[str, Any] | None,
    peers: dict[str, dict[str, Any]] | None = None,
) -> Row:
    """Best of ``repeat`` runs of each (one of json.loads at the largest sizes)."""
    path = corpus.write_reel()
    last = corpus.n - 1
    body = request_body(last, stream=is_stream(last))
    # Interleaved, so a busy moment of the machine hits every figure alike.
    read = split = reel = loads = float("inf")
    for _ in range(repeat if corpus.n >= 100_000 else repeat * 2):
        read = min(read, _timed(path.read_bytes, 1))
        split = min(split, _timed(lambda: _split(path), 1))
        reel = min(reel, _timed(lambda: _reel_open(path, body), 1))
    loads = _timed(lambda: _json_every_line(path), 1 if corpus.n >= 100_000 else repeat)
    row: Row = {
        "interactions": corpus.n,
        "file_mb": round(path.stat().st_size / 2**20, 1),
        "read_ms": round(read * 1000, 1),
        "read_split_ms": round(split * 1000, 1),
        "json_loads_ms": round(loads * 1000, 1),
        "reel_ms": round(reel * 1000, 1),
        "reel_vs_split": ratio(reel, split),
        "json_loads_vs_reel": ratio(loads, reel, 1),
        # no open that reads the file can beat this
        "json_loads_vs_read": ratio(loads, read, 1),
    }
    if vcr is not None:
        row["vcrpy_ms"] = round(vcr["open_s"] * 1000, 1)
        row["vcrpy_vs_reel"] = ratio(vcr["open_s"], reel, 1)
    for peer, result in (peers or {}).items():  # their own cassettes, when they ran
        if "open_s" in result:
            row[f"{peer}_ms"] = round(result["open_s"] * 1000, 1)
            row[f"{peer}_vs_reel"] = ratio(result["open_s"], reel, 1)
    return row
