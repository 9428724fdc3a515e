"""Reel's in-process work per test, without pytest or the SDK: for each of
``N`` tests its own cassette (1 to 3 lines of the bench corpus) opened, an
``httpx`` transport made on it (``fast`` timing, the pytest plugin's
default), each of its requests played once (the
first play: keyed, its line parsed, its response built) and the transport
closed.  CPU time (``time.process_time``) of the whole loop, best and
median of ``--rounds``, per test; ``--profile`` prints cProfile's top
functions instead.  A before/after runs it twice, each with its own
``PYTHONPATH``, taking turns::

    PYTHONPATH=src:. python -m bench.pertransport [--tests 300] [--rounds 7] [--streams]

(``python bench/run.py --only pertransport`` runs it with and without streams.)
Nothing is asserted; the figures go to ``docs/performance.md`` by hand.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from reel_bindings.httpcore import Transport
from reel_core import Cassette

from ._answers import BASE_URL, PATH, REQUEST_HEADERS, is_stream, request_body
from ._common import Row, median
from ._data import _line

__all__ = ["per_transport_rows", "plan", "play"]


def plan(work: Path, tests: int, *, streams: bool) -> list[tuple[Path, list[bytes]]]:
    """Each test's cassette and the request bodies it sends, written under ``work``."""
    out: list[tuple[Path, list[bytes]]] = []
    k = 0
    for t in range(tests):
        lines: list[int] = []
        while len(lines) < 1 + t % 3:
            if streams or not is_stream(k):
                lines.append(k)
            k += 1
        path = work / f"test_{t}.jsonl"
        with path.open("wb") as f:
            f.write(Cassette().meta.to_line())
            f.writelines(_line(i) for i in lines)
        out.append((path, [request_body(i, stream=is_stream(i)) for i in lines]))
    return out


def play(tests: list[tuple[Path, list[bytes]]], client: httpx.Client) -> None:
    """Every test's cassette opened, its requests played once, closed."""
    url = BASE_URL + PATH
    for path, bodies in tests:
        transport = Transport(path, mode="replay", timing="fast")
        for body in bodies:
            request = client.build_request("POST", url, content=body, headers=REQUEST_HEADERS)
            response = transport.handle_request(request)
            response.read()
            response.close()
        transport.close()


def _times(tests: list[tuple[Path, list[bytes]]], client: httpx.Client, rounds: int) -> list[float]:
    """CPU ms per test of each of ``rounds`` plays of every test."""
    times = []
    for _ in range(rounds):
        start = time.process_time()
        play(tests, client)
        times.append((time.process_time() - start) * 1000 / len(tests))
    return times


def per_transport_rows(tests: int, rounds: int) -> list[Row]:
    """One row without streams and one with a fifth of the calls streamed
    (fast timing, the pytest plugin's default): Reel's CPU ms per test,
    median and best of ``rounds``."""
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as work, httpx.Client() as client:
        for streams in (False, True):
            where = Path(work) / ("streams" if streams else "plain")
            where.mkdir()
            suite = plan(where, tests, streams=streams)
            play(suite, client)  # warm
            times = _times(suite, client, rounds)
            rows.append(
                {
                    "cassettes": "a fifth of the calls streamed" if streams else "no streams",
                    "tests": tests,
                    "cpu_ms_per_test": round(median(times), 3),
                    "best_ms_per_test": round(min(times), 3),
                    "rounds": rounds,
                }
            )
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--streams", action="store_true", help="a fifth of the calls stream")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work, httpx.Client() as client:
        tests = plan(Path(work), args.tests, streams=args.streams)
        play(tests, client)  # warm: imports, the first cassette's memo
        if args.profile:
            profile = cProfile.Profile()
            profile.runcall(play, tests, client)
            order = os.environ.get("REEL_BENCH_SORT", "cumulative")
            pstats.Stats(profile).sort_stats(order).print_stats("reel_", 40)
            return
        times = sorted(_times(tests, client, args.rounds))
    print(f"CPU ms per test: median {times[len(times) // 2]:.3f}, best {times[0]:.3f}")


if __name__ == "__main__":
    main()
