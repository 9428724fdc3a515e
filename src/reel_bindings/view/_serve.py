"""``reel view --serve``: the page served on the loopback interface, drawn
again when a cassette changes (a proxy recording into it), and reloaded by
the browser.

Small by design: the standard library's threading HTTP server, two routes
(``/`` the page, ``/_reel/version`` what it was drawn from), loopback only,
and a ``Host`` header check so that no other site can read it through DNS
rebinding.  The page polls the version and reloads itself when it changes,
keeping its filters, page and open interaction.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["LOOPBACK", "Page", "ViewServer"]

#: The only address the viewer listens on.
LOOPBACK = "127.0.0.1"

#: What the server serves: ``(version, html)``; called for each request,
#: it draws the page again only when the version changed.
Page = Callable[[], tuple[str, str]]


class ViewServer:
    """Serves ``page`` on ``127.0.0.1:port`` (0: any free port)."""

    def __init__(self, page: Page, port: int = 0) -> None:
        self._page = page
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            server_version = "reel-view"

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: the terminal shows what the CLI prints

            def do_GET(self) -> None:
                owner._answer(self)

        self.httpd = ThreadingHTTPServer((LOOPBACK, port), Handler)
        self.httpd.daemon_threads = True
        self.port: int = self.httpd.server_address[1]
        self.url = f"http://{LOOPBACK}:{self.port}/"
        self._serving = False

    def _allowed_host(self, host: str | None) -> bool:
        return host in {f"{LOOPBACK}:{self.port}", f"localhost:{self.port}"}

    def _answer(self, request: BaseHTTPRequestHandler) -> None:
        if not self._allowed_host(request.headers.get("host")):
            self._send(request, HTTPStatus.FORBIDDEN, "text/plain", b"reel view: wrong Host\n")
            return
        path = request.path.split("?", 1)[0]
        if path not in {"/", "/_reel/version"}:
            self._send(request, HTTPStatus.NOT_FOUND, "text/plain", b"reel view: not found\n")
            return
        with self._lock:  # one drawing at a time; the page draws only on a change
            version, html = self._page()
        if path == "/":
            body = html.encode("utf-8")
            self._send(request, HTTPStatus.OK, "text/html; charset=utf-8", body)
        else:
            body = json.dumps({"version": version}).encode()
            self._send(request, HTTPStatus.OK, "application/json", body)

    @staticmethod
    def _send(
        request: BaseHTTPRequestHandler, status: HTTPStatus, content_type: str, body: bytes
    ) -> None:
        request.send_response(status)
        request.send_header("content-type", content_type)
        request.send_header("content-length", str(len(body)))
        request.send_header("cache-control", "no-store")
        request.send_header("x-content-type-options", "nosniff")
        request.end_headers()
        request.wfile.write(body)

    def serve_forever(self) -> None:
        self._serving = True
        self.httpd.serve_forever(poll_interval=0.2)

    def close(self) -> None:
        """Stop serving (from another thread) and free the port."""
        if self._serving:
            self.httpd.shutdown()
        self.httpd.server_close()
