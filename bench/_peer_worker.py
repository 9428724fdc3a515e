"""cassetter and agenttape, the in-process peers, each measured in a process
of its own (both patch httpx while a cassette is in use).

``python -m bench._peer_worker PEER N INDICES BUDGET DIR`` (PEER:
``cassetter`` or ``agenttape``):

1. Records the peer's own cassette of ``N`` interactions (in ``DIR``,
   reused when already there): a small HTTP server in this process (the
   fake upstream, stdlib) answers request ``i`` of the corpus with its
   answer, and an httpx client sends every request through the peer in its
   record mode.  Every interaction is recorded as a non-stream one:
   agenttape does not record streams, and the timed requests are
   non-stream ones, as Reel's and vcrpy's.
2. Stops the server, opens the cassette in the peer's replay-only mode and
   replays the last request, timing both (the open figure).
3. Replays the non-stream interactions ``INDICES`` (comma-separated), each
   the first play of its recording (a small cassette is reopened, untimed,
   between rounds), for at most ``BUDGET`` seconds; then the same requests
   again in the same cassette: the warm plays, when the peer replays a
   recording twice (agenttape serves each recording once: its second play
   is a miss, so it has no warm figure, and the output says why).

Prints one JSON line: ``{"version", "record_s", "open_s", "times",
"warm", "warm_note"}``; or ``{"skipped": why}`` when the recording could
not be made or read back.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from ._answers import PATH, REQUEST_HEADERS, RESPONSE_HEADERS, answer_body, request_body

__all__ = ["PEERS"]

_QUESTION = re.compile(rb"Question (\d+):")

#: How long recording a cassette may take before the size is skipped.
RECORD_BUDGET = 300.0


class _Upstream(BaseHTTPRequestHandler):
    """The fake upstream: request ``i`` (its ``Question i:``) gets answer ``i``."""

    protocol_version = "HTTP/1.1"
    # One write per response, sent at once: head and body written apart
    # would wait out the client's delayed ACK (40 ms a request).
    wbufsize = -1
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        found = _QUESTION.search(body)
        data = answer_body(int(found.group(1))) if found else b"{}"
        self.send_response(200 if found else 400)
        for name, value in RESPONSE_HEADERS:
            self.send_header(name, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def _upstream() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}{PATH}"
    finally:
        server.shutdown()
        server.server_close()


# -- the peers: a cassette path, and a context manager per mode -----------------

Use = Callable[[Path, bool], AbstractContextManager[Any]]


def _cassetter(path: Path, record: bool) -> AbstractContextManager[Any]:
    import cassetter

    mode = "all" if record else "none"
    manager: AbstractContextManager[Any] = cassetter.use_cassette(
        path, record_mode=mode, match_on=["method", "uri", "body"]
    )
    return manager


def _agenttape(path: Path, record: bool) -> AbstractContextManager[Any]:
    import agenttape

    session: AbstractContextManager[Any] = agenttape.use_cassette(
        path.stem, mode="record" if record else "none", cassette_dir=path.parent, format="json"
    )
    return session


#: Peer -> (its cassette's file suffix: its fastest format, how it is used).
PEERS: dict[str, tuple[str, Use]] = {
    "cassetter": (".toml", _cassetter),
    "agenttape": (".json", _agenttape),
}


def _post(client: httpx.Client, url: str, body: bytes) -> float:
    begin = time.perf_counter()
    response = client.post(url, content=body, headers=REQUEST_HEADERS)
    response.read()
    elapsed = time.perf_counter() - begin
    if response.status_code != 200:
        raise RuntimeError(f"answered {response.status_code}: {response.text[:300]}")
    return elapsed


def _record(use: Use, path: Path, n: int) -> tuple[str, float]:
    """Record ``n`` interactions into ``path``: the upstream's URL, and the
    seconds it took."""
    with _upstream() as url:
        start = time.perf_counter()
        with use(path, True), httpx.Client() as client:
            for i in range(n):
                _post(client, url, request_body(i))
                if time.perf_counter() - start > RECORD_BUDGET:
                    raise TimeoutError(f"recording {n} took over {RECORD_BUDGET:.0f} s")
        return url, time.perf_counter() - start


def main(argv: list[str]) -> None:
    peer, n_text, indices_text, budget_text, directory = argv
    n = int(n_text)
    indices = [int(i) for i in indices_text.split(",")]
    budget = float(budget_text)
    suffix, use = PEERS[peer]
    path = Path(directory) / f"{peer}-{n}{suffix}"
    url_file = path.with_suffix(path.suffix + ".url")
    record_s = 0.0  # a cassette recorded by an earlier run (--keep) is reused
    if not (path.exists() and url_file.exists()):
        try:
            url, record_s = _record(use, path, n)
        except Exception as exc:  # the peer could not record this size: say so
            path.unlink(missing_ok=True)
            print(json.dumps({"skipped": f"recording failed: {type(exc).__name__}: {exc}"[:300]}))
            return
        url_file.write_text(url)
    url = url_file.read_text()  # the URL recorded at (its upstream is gone now)
    bodies = [request_body(i) for i in indices]
    # Warm httpx (imports, first calls) outside any cassette: nothing patched.
    canned = httpx.MockTransport(lambda request: httpx.Response(200, content=b"{}"))
    with httpx.Client(transport=canned) as warm:
        warm.post(url, content=bodies[0], headers=REQUEST_HEADERS).read()
    client = httpx.Client()

    start = time.perf_counter()
    try:
        context = use(path, False)
        context.__enter__()
        _post(client, url, bodies[-1])
    except Exception as exc:
        print(json.dumps({"skipped": f"replay failed: {type(exc).__name__}: {exc}"[:300]}))
        return
    open_s = time.perf_counter() - start

    times: list[float] = []
    warm_times: list[float] = []
    warm_note = ""
    stop = time.perf_counter() + budget
    if len(bodies) > 100:  # a large cassette: one pass, in the cassette just opened
        played = []
        for body in bodies[:-1]:
            times.append(_post(client, url, body))
            played.append(body)
            if time.perf_counter() >= stop and len(times) >= 3:
                break
        stop = time.perf_counter() + budget  # the warm plays get a budget of their own
        try:
            for body in played:
                warm_times.append(_post(client, url, body))
                if time.perf_counter() >= stop and len(warm_times) >= 3:
                    break
        except Exception as exc:
            warm_note = f"a second play fails ({type(exc).__name__})"
        context.__exit__(None, None, None)
    else:
        context.__exit__(None, None, None)
        while time.perf_counter() < stop and len(times) < len(bodies) * 250:
            with use(path, False):  # a fresh play count: each a first play
                times.extend(_post(client, url, body) for body in bodies)
                if warm_note:
                    continue
                try:
                    warm_times.extend(_post(client, url, body) for body in bodies)
                except Exception as exc:
                    warm_note = f"a second play fails ({type(exc).__name__})"
                    warm_times = []
    print(
        json.dumps(
            {
                "version": importlib.metadata.version(peer),
                "record_s": record_s,
                "open_s": open_s,
                "times": times,
                "warm": [] if warm_note else warm_times,
                "warm_note": warm_note,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])
