"""Where an in-process first play goes: the pieces of Reel's work for a
request played for the first time, each timed on its own, next to the
floor and to Reel's whole first and second (warm) plays in the same run.

    python -m bench.firstplay [--interactions N] [--requests N]

A first play does what a second play does (the session, the events, the
transport, httpx's response) plus two things a second play finds done:
keying the request (its credential values, the secret check of its path
and body, the canonical JSON of the body and a SHA-256; the keying memo
keeps the answer) and parsing its recording's line (``json.loads``, the
checks of every field, and the stored bodies rendered back to bytes; the
cassette keeps the parsed line).  Each piece is timed here over the same
distinct requests and lines as the whole plays, from a cassette opened once
(so nothing is left over from an earlier play).  The pieces run in a tight
loop with the CPU's caches warm, so they add up to less than the gap
between a first and a warm play measured through httpx: that gap also holds
the cache misses of running all of it cold, between httpx's own work.

Nothing is asserted; the figures go to ``docs/performance.md`` by hand.
"""

from __future__ import annotations

import argparse
import gc
import json
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx

from reel_bindings.httpcore import Transport
from reel_core import Engine, Request
from reel_core.tools import decode_body, exchange_redactor, read_line

from ._answers import BASE_URL, PATH, REQUEST_HEADERS, request_body
from ._common import median, ratio, us
from ._data import Corpus
from .inprocess import _floor_client, _floor_transport, _time_requests

URL = BASE_URL + PATH
T = TypeVar("T")
#: The whole plays run in turns, this many blocks of requests each.
BLOCKS = 8


def _each(items: Sequence[T], fn: Callable[[T], object]) -> float:
    """The median time of ``fn(item)`` over ``items``, each timed alone."""
    clock = time.perf_counter
    times = []
    for item in items:
        start = clock()
        fn(item)
        times.append(clock() - start)
    return median(times)


def breakdown(interactions: int, requests: int, work: Path) -> list[tuple[str, float]]:
    """``(what, p50 seconds)`` for the whole plays and each piece."""
    corpus = Corpus(work, interactions)
    path = corpus.write_reel()
    # the same lines as a Reel before the digest as sent wrote them: A/B
    unsent = Corpus(work, interactions, sent=False).write_reel()
    indices = corpus.non_stream(requests)
    bodies = [request_body(i) for i in indices]
    floor = _floor_client()
    _time_requests(floor, bodies[:5], [])
    first: list[float] = []
    first_unsent: list[float] = []
    warm: list[float] = []
    floor_times: list[float] = []
    with (
        httpx.Client(transport=Transport(path, mode="replay")) as client,
        httpx.Client(transport=Transport(unsent, mode="replay")) as old,
        _collections() as gcs,
    ):
        # The phases take turns, a block of requests each, so that the
        # machine's other load weighs on all of them alike.
        size = -(-len(bodies) // BLOCKS)
        for block in [bodies[k : k + size] for k in range(0, len(bodies), size)]:
            for phase, target, times in (
                ("floor", floor, floor_times),
                ("first, no digest", old, first_unsent),
                ("first", client, first),
                ("warm", client, warm),
            ):
                gcs["phase"] = phase
                _time_requests(target, block, times)
            gcs["phase"] = None
    floor.close()

    # The same requests as the core sees them, and their recordings' lines.
    headers = [(k.encode(), v.encode()) for k, v in REQUEST_HEADERS.items()]
    host = (b"host", b"api.openai.com")
    core = [Request("POST", PATH, (host, *headers), b) for b in bodies]
    lines = path.read_bytes().split(b"\n")[1:]
    raws = [lines[i] for i in indices]
    objs: list[dict[str, Any]] = [json.loads(raw) for raw in raws]
    transport = Transport(path, mode="replay")
    engine = Engine(transport.player.file.cassette, transport.player.config)
    old_transport = Transport(unsent, mode="replay")
    full = Engine(old_transport.player.file.cassette, old_transport.player.config)
    base = engine.redactor
    keying = engine.match.keying()
    redactors = [exchange_redactor(base, r.headers) for r in core]
    recorded = [engine.recorded_request(r) for r in core]
    parsed = [read_line(raw) for raw in raws]

    def secret_check(request: Request) -> bool:
        return redactors[0].keeps(request.path, request.body)

    def stored(where: str) -> Callable[[dict[str, Any]], bytes]:
        return lambda obj: decode_body(obj[where]["body"])

    # A warm play's transport alone, next to MockTransport's (the floor's):
    # what Reel adds to a request played again, without httpx's client.
    with httpx.Client() as builder:  # the requests as a client sends them
        sent = [
            builder.build_request("POST", URL, content=b, headers=REQUEST_HEADERS) for b in bodies
        ]
    for built in sent:
        transport.handle_request(built)  # the first play: keyed, parsed
    mock = _floor_transport()

    per_request = {phase: gcs.get(phase, 0.0) / len(bodies) for phase in ("floor", "first", "warm")}
    return [
        ("floor (httpx + MockTransport)", median(floor_times)),
        ("Reel first play, lines without the digest as sent", median(first_unsent)),
        ("Reel first play", median(first)),
        ("Reel second play (warm)", median(warm)),
        ("floor's transport alone (MockTransport)", _each(sent, mock.handle_request)),
        ("Reel's transport alone, a warm play", _each(sent, transport.handle_request)),
        ("key the request (Engine._key, by the digest as sent)", _each(core, engine._key)),
        ("key the request in full (no digest)", _each(core, full._key)),
        ("  credential values", _each(core, lambda r: exchange_redactor(base, r.headers))),
        ("  secret check of path and body", _each(core, secret_check)),
        ("  match key (canonical JSON, SHA-256)", _each(recorded, lambda r: r.key(keying))),
        ("parse the line (read_line)", _each(raws, read_line)),
        ("  json.loads of the line", _each(raws, json.loads)),
        ("  render the request body", _each(objs, stored("request"))),
        ("  render the response body", _each(objs, stored("response"))),
        ("replay events", _each(parsed, lambda p: engine._replay_events(p, head_only=False))),
        ("garbage collection, mean a floor request", per_request["floor"]),
        ("garbage collection, mean a first play", per_request["first"]),
        ("garbage collection, mean a warm play", per_request["warm"]),
    ]


@contextmanager
def _collections() -> Iterator[dict[str, Any]]:
    """Seconds the garbage collector ran, summed by ``result["phase"]`` (set
    by the caller as it goes): a first play keeps objects (its parsed line,
    its key in the memo), so collections come more often and cost more."""
    result: dict[str, Any] = {"phase": None}
    started = [0.0]

    def heard(event: str, info: dict[str, int]) -> None:
        if event == "start":
            started[0] = time.perf_counter()
        elif result["phase"] is not None:
            spent = time.perf_counter() - started[0]
            result[result["phase"]] = result.get(result["phase"], 0.0) + spent

    gc.callbacks.append(heard)
    try:
        yield result
    finally:
        gc.callbacks.remove(heard)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--interactions", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=2_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="reel-firstplay-") as tmp:
        rows = breakdown(args.interactions, args.requests, Path(tmp))
    floor = rows[0][1]
    gap = rows[2][1] - rows[3][1]
    print(f"| what | p50 us | vs floor | share of first - warm ({us(gap)} us) |")
    print("|---|---|---|---|")
    for what, seconds in rows:
        whole = what.startswith(("floor", "Reel", "garbage"))
        share = "" if whole else f"{ratio(seconds, gap)}"
        print(f"| {what} | {us(seconds)} | {ratio(seconds, floor)} | {share} |")


if __name__ == "__main__":
    main()
