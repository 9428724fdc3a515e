"""1. In-process replay cost per request: an httpx client on Reel's
transport, on vcrpy, on cassetter and agenttape, and on the floor
(``httpx.MockTransport`` answering a canned response) -- the same non-stream
chat completions, same client code.

Every timed request is the first play of its recording (what a test suite
does): a small cassette is reopened (untimed) between rounds, a large one
gives each request a recording of its own.  vcrpy patches httpx's
transports, so it runs in a child process (:mod:`bench._vcr_worker`) and
never touches the Reel or floor measurements; so do cassetter and
agenttape (:mod:`bench._peer_worker`), each recording its own cassette
against a local fake upstream first.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import httpx

from reel_bindings.httpcore import Transport

from ._answers import BASE_URL, PATH, REQUEST_HEADERS, RESPONSE_HEADERS, answer_body, request_body
from ._common import Row, median, percentile, ratio, run_json, us
from ._data import Corpus

__all__ = ["PEERS", "peer_run", "record_ttfb", "replay_cost", "vcr_run"]

#: The peers that record their own cassettes (see bench/_peer_worker.py).
PEERS = ("cassetter", "agenttape")

URL = BASE_URL + PATH


def _time_requests(client: httpx.Client, bodies: Sequence[bytes], out: list[float]) -> None:
    post = client.post
    clock = time.perf_counter
    for body in bodies:
        start = clock()
        response = post(URL, content=body, headers=REQUEST_HEADERS)
        response.read()
        out.append(clock() - start)
        if response.status_code != 200:
            raise RuntimeError(f"bench request answered {response.status_code}: {response.text}")


def _floor_transport() -> httpx.MockTransport:
    answer = answer_body(0)
    headers = [*RESPONSE_HEADERS, ("content-length", str(len(answer)))]

    def handler(request: httpx.Request) -> httpx.Response:
        request.read()
        return httpx.Response(200, headers=headers, content=answer)

    return httpx.MockTransport(handler)


def _floor_client() -> httpx.Client:
    return httpx.Client(transport=_floor_transport())


def vcr_run(corpus: Corpus, indices: Sequence[int], budget: float) -> dict[str, Any]:
    """vcrpy in a child process: its cassette open (to first replay) and
    per-request times on ``indices``."""
    path = corpus.write_vcr()
    args = ["-m", "bench._vcr_worker", str(path), ",".join(map(str, indices)), str(budget)]
    result: dict[str, Any] = run_json(args)
    return result


def peer_run(
    peer: str, n: int, indices: Sequence[int], budget: float, work: Path
) -> dict[str, Any]:
    """``peer`` (cassetter or agenttape) in a child process: it records its
    own ``n``-interaction cassette into ``work``, then opens it and replays
    ``indices``.  ``{"skipped": why}`` when it could not."""
    args = ["-m", "bench._peer_worker", peer, str(n), ",".join(map(str, indices)), str(budget)]
    try:
        return cast(dict[str, Any], run_json([*args, str(work)]))
    except RuntimeError as exc:  # it crashed: say so in the table, go on
        return {"skipped": f"failed: {str(exc).splitlines()[-1][:200]}"}


def _peer_columns(row: Row, peer: str, result: dict[str, Any], floor_p50: float) -> None:
    if "skipped" in result:
        row[f"{peer}_us"] = result["skipped"]
        return
    first = median(result["times"])
    row[f"{peer}_us"] = us(first)
    row[f"{peer}_vs_floor"] = ratio(first, floor_p50)
    if result["warm"]:
        row[f"{peer}_warm_us"] = us(median(result["warm"]))
    else:
        row[f"{peer}_warm_us"] = f"none: {result['warm_note']}"


def replay_cost(
    corpus: Corpus,
    requests: int,
    *,
    blocks: int = 4,
    vcr: dict[str, Any] | None = None,
    peers: dict[str, dict[str, Any]] | None = None,
) -> Row:
    """Per-request time of Reel and of the floor (interleaved in ``blocks``),
    next to vcrpy's (measured in a child, passed in as ``vcr``)."""
    indices = corpus.non_stream(requests)
    path = corpus.write_reel()
    bodies = [request_body(i) for i in indices]
    floor = _floor_client()
    reel_times: list[float] = []
    warm_times: list[float] = []
    floor_times: list[float] = []
    # Warm both clients (imports, first-call caches) on recordings not timed.
    _warm(path, bodies[:5], floor)

    small = len(bodies) < requests  # a whole cassette per round, reopened
    rounds: list[Sequence[bytes]]
    if small:
        rounds = [bodies] * max(blocks, -(-requests // len(bodies)))
    else:
        size = -(-len(bodies) // blocks)
        rounds = [bodies[k : k + size] for k in range(0, len(bodies), size)]
    large: Transport | None = None if small else Transport(path, mode="replay")
    for chunk in rounds:
        _time_requests(floor, chunk, floor_times)
        transport = Transport(path, mode="replay") if large is None else large
        with httpx.Client(transport=transport) as client:
            _time_requests(client, chunk, reel_times)
            _time_requests(client, chunk, warm_times)  # second plays: lines parsed already
    floor.close()
    reel_p50 = median(reel_times)
    floor_p50 = median(floor_times)
    row: Row = {
        "interactions": corpus.n,
        "requests": len(reel_times),
        "floor_us": us(floor_p50),
        "reel_us": us(reel_p50),
        "reel_p90_us": us(percentile(reel_times, 90)),
        "reel_vs_floor": ratio(reel_p50, floor_p50),
        "reel_warm_us": us(median(warm_times)),
        "warm_vs_floor": ratio(median(warm_times), floor_p50),
    }
    if vcr is not None:
        vcr_p50 = median(vcr["times"])
        row["vcrpy_us"] = us(vcr_p50)
        row["vcrpy_requests"] = len(vcr["times"])
        row["vcrpy_vs_reel"] = ratio(vcr_p50, reel_p50, 1)
    for peer, result in (peers or {}).items():
        _peer_columns(row, peer, result, floor_p50)
    return row


def _warm(path: Path, bodies: Sequence[bytes], floor: httpx.Client) -> None:
    with httpx.Client(transport=Transport(path, mode="replay")) as client:
        _time_requests(client, bodies, [])
    _time_requests(floor, bodies, [])


def flatness(rows: Sequence[Row], key: Callable[[Row], float]) -> float:
    """Largest over smallest of a figure across cassette sizes."""
    values = [key(r) for r in rows]
    return ratio(max(values), min(values))


def record_ttfb(requests: int, work: Path) -> list[Row]:
    """In-process record: time to the first body chunk of a request
    recorded through a *new* Reel transport each time (what an SDK helper
    does: a client of its own), first request of each transport included,
    next to the same request sent straight to the same local upstream (the
    fake OpenAI of ``tests/fakes``) on a long-lived client, interleaved."""
    from ._common import spawn

    rows: list[Row] = []
    upstream_args = ["-m", "tests.fakes.upstream", "--port", "0", "--frame-delay", "0.001"]
    with spawn(upstream_args) as upstream, httpx.Client() as direct:
        url = upstream.url + PATH
        for stream in (False, True):
            times: dict[str, list[float]] = {"direct": [], "reel": []}
            for i in range(requests + 5):
                content = request_body(10_000 + i, stream=stream)  # each one a new recording
                cassette = work / f"in-process-record-{int(stream)}.jsonl"
                for side in ("direct", "reel"):
                    client = (
                        direct
                        if side == "direct"
                        else httpx.Client(transport=Transport(cassette, mode="auto"))
                    )
                    start = time.perf_counter()
                    with client.stream("POST", url, content=content, headers=REQUEST_HEADERS) as r:
                        chunks = r.iter_raw()
                        first = next(chunks, b"")
                        ttfb = time.perf_counter() - start
                        for _ in chunks:  # read to the end: the recording is kept then
                            pass
                    if r.status_code != 200 or not first:
                        raise RuntimeError(f"{side} answered {r.status_code}")
                    if client is not direct:
                        client.close()
                    if i >= 5:  # the first ones warm imports and connections
                        times[side].append(ttfb)
            direct_p50, reel_p50 = median(times["direct"]), median(times["reel"])
            rows.append(
                {
                    "request": "stream (SSE)" if stream else "non-stream",
                    "direct_ttfb_p50_us": us(direct_p50),
                    "reel_ttfb_p50_us": us(reel_p50),
                    "added_ttfb_p50_us": us(reel_p50 - direct_p50),
                    "added_ttfb_p90_us": us(
                        percentile(times["reel"], 90) - percentile(times["direct"], 90)
                    ),
                    "requests": requests,
                }
            )
    return rows
