"""The fake upstream of the suite benchmark, and the tripwire that replaces
it while the tools replay: ``python -m bench.suite_upstream`` prints its
base URL (``http://127.0.0.1:PORT``) and serves until stopped.

One server in one process keeps one port for the whole section, so every
cassette is recorded against the URL it is replayed at.  Two modes, switched
by the benchmark (never through a tool):

- ``POST /_suite/record``: answer each call as ``bench.suite_calls.answer``
  says (a retry's first attempt 429 or 500), the attempts counted afresh;
- ``POST /_suite/tripwire``: answer every request 418 and count it; a
  replay must count 0.

Each answers with the figures as they were before the switch (``tripwire``,
``count``: requests the tripwire answered, ``served``: requests answered
while recording), then zeroes the count of the mode it enters, so reading
after a run and arming for the next are one request.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .suite_calls import Attempts, answer

__all__ = ["main"]


class _State:
    def __init__(self) -> None:
        self.tripwire = False
        self.count = 0
        self.served = 0
        self.attempts = Attempts()
        self.lock = threading.Lock()


STATE = _State()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # one write per response: head and body written apart would wait out
    # the client's delayed ACK
    wbufsize = -1
    disable_nagle_algorithm = True

    def _send(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def _control(self) -> bool:
        if not self.path.startswith("/_suite/"):
            return False
        what = self.path.removeprefix("/_suite/")
        with STATE.lock:
            # the figures so far, then the switch: a switch reads and zeroes
            figures = {"tripwire": STATE.tripwire, "count": STATE.count, "served": STATE.served}
            if what == "record":
                STATE.tripwire = False
                STATE.served = 0
                STATE.attempts.clear()
            elif what == "tripwire":
                STATE.tripwire = True
                STATE.count = 0
        self._send(200, [("content-type", "application/json")], json.dumps(figures).encode())
        return True

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        with STATE.lock:
            tripped = STATE.tripwire
            if tripped:
                STATE.count += 1
            else:
                STATE.served += 1
        if tripped:
            trip = b'{"error": {"message": "tripwire: a replay reached the upstream"}}'
            headers = [("content-type", "application/json"), ("x-should-retry", "false")]
            self._send(418, headers, trip)
            return
        status, headers, content = answer(body, STATE.attempts.next(body))
        self._send(status, headers, content)

    def do_POST(self) -> None:
        if not self._control():
            self._answer()

    def do_GET(self) -> None:
        if not self._control():
            self._answer()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    print(f"http://127.0.0.1:{server.server_port}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):  # stopped by hand
        server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) > 1:
        sys.exit("usage: python -m bench.suite_upstream  (prints its URL, serves until stopped)")
    main()
