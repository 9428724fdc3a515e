"""The upstream the proxy peers record the corpus from.

``python -m bench._corpus_upstream`` prints its URL and answers request
``i`` of the corpus (its ``Question i:``) as the corpus does: a non-stream
request with answer ``i`` (``bench._data.answer_body``, content length), a
stream (``"stream":true``) with the 40 SSE frames of interaction ``i``,
chunked, each frame one write at its recorded offset from the response head
(``bench._data.sse_frames``), so a recorder sees the gaps the offsets say.
Every tool records the same bytes at the same times.  Stops on SIGTERM.
"""

from __future__ import annotations

import re
import signal
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any

from ._answers import RESPONSE_HEADERS, SSE_HEADERS, STREAM_FRAMES, answer_body, sse_frames

__all__ = ["main"]

_QUESTION = re.compile(rb"Question (\d+):")
_STREAM = re.compile(rb'"stream"\s*:\s*true')


class _Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Head and body in one write, sent at once (see bench._peer_worker).
    wbufsize = -1
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"] or 0))
        found = _QUESTION.search(body)
        if found is None:
            self._send(400, (("content-type", "text/plain"),), b"no 'Question N:' in the body")
            return
        i = int(found.group(1))
        if _STREAM.search(body):
            self._stream(i)
        else:
            self._send(200, RESPONSE_HEADERS, answer_body(i))

    def _send(self, status: int, headers: tuple[tuple[str, str], ...], data: bytes) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _stream(self, i: int) -> None:
        self.send_response(200)
        for name, value in SSE_HEADERS:
            self.send_header(name, value)
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        head = time.perf_counter()
        for at, frame in sse_frames(i, STREAM_FRAMES):
            delay = head + at / 1000 - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    server.daemon_threads = True

    def stop(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    print(f"http://127.0.0.1:{server.server_port}", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        sys.stdout.flush()


if __name__ == "__main__":
    main()
