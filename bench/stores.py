"""7. Stores: the same cassette opened and replayed from files and from
Redis (a redis-server the run starts on a free port), and appends per
second from 8 writer threads into one cassette of each.  No rows when
redis-server or the redis client is absent.
"""

from __future__ import annotations

import gc
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from reel_bindings._files import CassetteFile
from reel_bindings._inprocess import Decision, Player
from reel_bindings._store import FileStore, Store
from reel_core import Mode, Request

from ._answers import PATH, is_stream, request_body
from ._common import Row, ratio
from ._data import Corpus

__all__ = ["store_rows"]

WRITERS = 8


@contextmanager
def _redis_server(work: Path) -> Iterator[str | None]:
    """A redis-server's URL, or ``None`` when it or the client is missing."""
    program = shutil.which("redis-server")
    try:
        import redis  # noqa: F401
    except ImportError:
        program = None
    if program is None:
        yield None
        return
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    directory = Path(tempfile.mkdtemp(dir=work, prefix="redis-"))
    args = [program, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory)]
    proc = subprocess.Popen(
        [*args, "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(500):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                time.sleep(0.01)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait()


def _best(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _open_and_replay(name: str, store: Store, body: bytes) -> None:
    file = CassetteFile(name, mode=Mode.REPLAY, store=store)
    player = Player(file, mode=Mode.REPLAY, timing="fast", repeat=True)
    decision = player.decide(Request("POST", PATH, (), body))
    if not isinstance(decision, Decision) or decision.head.status != 200:
        raise RuntimeError("the first replay did not answer 200")


def _per_request_us(name: str, store: Store, corpus: Corpus, requests: int) -> float:
    file = CassetteFile(name, mode=Mode.REPLAY, store=store)
    player = Player(file, mode=Mode.REPLAY, timing="fast", repeat=True)
    bodies = [request_body(i) for i in corpus.non_stream(requests)]
    start = time.perf_counter()
    for body in bodies:
        player.decide(Request("POST", PATH, (), body))
    return (time.perf_counter() - start) / len(bodies) * 1e6


def _appends_per_second(store: Store, name: str, per_writer: int) -> float:
    line = b'{"id":"%d","pad":"' + b"x" * 2000 + b'"}\n'

    def write(w: int) -> None:
        for n in range(per_writer):
            store.append(name, line % (w * per_writer + n), header=b'{"_meta":{"schema":1}}\n')

    threads = [threading.Thread(target=write, args=(w,)) for w in range(WRITERS)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    data = store.read(name)
    assert data is not None
    assert data.count(b"\n") == WRITERS * per_writer + 1
    return WRITERS * per_writer / elapsed


def store_rows(corpus: Corpus, repeat: int, requests: int, appends: int, work: Path) -> list[Row]:
    """One row per store: open to first replay, per-request replay,
    appends/s from 8 writers; the Redis row has its ratios to files."""
    from reel_bindings._redis import RedisStore

    path = corpus.write_reel()
    data = path.read_bytes()
    last = corpus.n - 1
    body = request_body(last, stream=is_stream(last))
    rows: list[Row] = []
    with _redis_server(work) as url:
        if url is None:
            return rows
        files = FileStore(work / "store-files")
        redis_store = RedisStore(url, prefix="bench")
        packed = RedisStore(url, prefix="bench-zstd", compress=True)
        stores: list[tuple[str, Store]] = [("files", files), ("redis", redis_store)]
        try:
            import zstandard  # noqa: F401

            stores.append(("redis+zstd", packed))
        except ImportError:
            pass
        for _, store in stores:
            store.replace("c.jsonl", data)
        figures: dict[str, Row] = {}
        for label, store in stores:
            opened = _best(lambda s=store: _open_and_replay("c.jsonl", s, body), repeat)  # type: ignore[misc]
            per_request = _per_request_us("c.jsonl", store, corpus, requests)
            rate = _appends_per_second(store, "appends.jsonl", appends)
            figures[label] = {
                "store": label,
                "interactions": corpus.n,
                "open_ms": round(opened * 1000, 1),
                "replay_us": round(per_request, 1),
                "appends_per_s_8_writers": round(rate),
            }
        base = figures["files"]
        for label, row in figures.items():
            if label != "files":
                row["open_vs_files"] = ratio(row["open_ms"], base["open_ms"])
                row["replay_vs_files"] = ratio(row["replay_us"], base["replay_us"])
                row["appends_vs_files"] = ratio(
                    row["appends_per_s_8_writers"], base["appends_per_s_8_writers"]
                )
            rows.append(row)
        redis_store.close()
        packed.close()
    return rows
