"""vcrpy, measured in a process of its own (it patches httpx's transports).

``python -m bench._vcr_worker CASSETTE INDICES BUDGET`` opens the YAML
cassette with vcrpy (record mode none, matching on method, uri and body) and
replays the first request, timing both; then replays the non-stream
interactions ``INDICES`` (comma-separated), each the first play of its
recording (a small cassette is reopened, untimed, between rounds), for at
most ``BUDGET`` seconds.  Prints one JSON line:
``{"open_s": ..., "times": [...]}``.
"""

from __future__ import annotations

import json
import sys
import time

import httpx
import vcr  # type: ignore[import-untyped]

from ._answers import BASE_URL, PATH, REQUEST_HEADERS, request_body

URL = BASE_URL + PATH


def _post(client: httpx.Client, body: bytes) -> float:
    begin = time.perf_counter()
    response = client.post(URL, content=body, headers=REQUEST_HEADERS)
    response.read()
    elapsed = time.perf_counter() - begin
    if response.status_code != 200:
        raise RuntimeError(f"vcrpy answered {response.status_code}")
    return elapsed


def main(argv: list[str]) -> None:
    path, indices_text, budget_text = argv
    indices = [int(i) for i in indices_text.split(",")]
    budget = float(budget_text)
    recorder = vcr.VCR(record_mode="none", match_on=("method", "uri", "body"))
    bodies = [request_body(i) for i in indices]
    # Warm httpx (imports, first calls) outside any cassette: nothing patched.
    canned = httpx.MockTransport(lambda request: httpx.Response(200, content=b"{}"))
    with httpx.Client(transport=canned) as warm:
        warm.post(URL, content=bodies[0], headers=REQUEST_HEADERS).read()
    client = httpx.Client()

    start = time.perf_counter()
    context = recorder.use_cassette(path)
    context.__enter__()
    _post(client, bodies[-1])
    open_s = time.perf_counter() - start

    times: list[float] = []
    stop = time.perf_counter() + budget
    if len(bodies) > 100:  # a large cassette: one pass, in the cassette just opened
        for body in bodies[:-1]:
            times.append(_post(client, body))
            if time.perf_counter() >= stop and len(times) >= 3:
                break
        context.__exit__(None, None, None)
    else:
        context.__exit__(None, None, None)
        while time.perf_counter() < stop and len(times) < len(bodies) * 250:
            with recorder.use_cassette(path):  # a fresh play count: each a first play
                times.extend(_post(client, body) for body in bodies)
    print(json.dumps({"open_s": open_s, "times": times}))


if __name__ == "__main__":
    main(sys.argv[1:])
