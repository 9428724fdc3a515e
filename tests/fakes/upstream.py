"""A fake OpenAI / Anthropic / Gemini upstream for Reel's tests: real HTTP/1.1 on 127.0.0.1.

The server (:mod:`tests.fakes.server`) speaks h11 over anyio sockets, so it
runs on asyncio and on trio, with keep-alive.  Each streamed frame is its own
socket write, with the frame delay between writes, so a recorder sees real
timing.  What it answers is decided without I/O by
:func:`tests.fakes.routes.respond`, so a test can compute the exact frames.

Three ways to run it::

    async with serve_fake() as fake:  # inside an async test (asyncio or trio)
        fake.url, fake.requests, fake.connections

    with FakeUpstreamThread() as fake:  # sync tests: its own thread and loop
        ...

    python -m tests.fakes.upstream --port 8099  # standalone; prints its URL

Scenarios, asked for with the header ``x-fake-scenario: a,b`` or a model named
``fake-a+b`` (Gemini: the model in the path):

=================  =========================================================
``400`` ``401``    the provider's error (Gemini answers a bad key with 400)
``429``            the provider's rate-limit error, ``retry-after: 1``
``500``            the provider's internal error
``overloaded``     Anthropic 529 overloaded_error, OpenAI/Gemini 503 (alias
                   ``529``, ``503``)
``stream-error``   a stream that breaks off with the provider's in-stream error
``gzip``           ``content-encoding: gzip`` (streams: a sync flush per frame)
``zstd``           ``content-encoding: zstd`` (streams: a flushed block per frame)
``gzip-bomb``      a 200 whose ~0.5 MB gzip body inflates to 512 MiB of zeros
``slow``           50 ms between frames (``x-fake-frame-delay-ms: N`` sets any)
``cut``            head and the first frames (half a body), then a clean close
``reset``          as ``cut``, then a TCP RST
``stall``          head, then silence until the client gives up
``garbage``        non-HTTP bytes, then close
``close-early``    close before any response byte
``echo-key``       echo the request's credential header and query values: a
                   401 body (as is, base64 in a data URL, URL-encoded); with
                   ``"stream": true`` SSE, each value split across two writes
``echo-escaped``   echo the credential header and query (``?key=``,
                   ``?api-key=``) values in a 401 JSON body, every character
                   but a letter, digit or space a ``\\uXXXX`` escape
=================  =========================================================

:func:`closed_port_url` gives a URL nothing listens on (connection refused).
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from contextlib import suppress
from types import TracebackType

import anyio
import anyio.from_thread
import anyio.lowlevel

from .openai_wire import embedding_vector
from .routes import respond
from .server import (
    CUT_AFTER,
    DEFAULT_FRAME_DELAY,
    GARBAGE,
    SLOW_FRAME_DELAY,
    FakeUpstream,
    serve_fake,
)
from .wire import (
    FAKE_CREATED,
    FRAME_DELAY_HEADER,
    SCENARIO_HEADER,
    ReceivedRequest,
    Reply,
    Scenario,
    ToolSpec,
    fragments,
    reply_text,
    text_pieces,
    token_count,
    tool_arguments,
    tool_result_text,
)

__all__ = [
    "CUT_AFTER",
    "DEFAULT_FRAME_DELAY",
    "FAKE_CREATED",
    "FRAME_DELAY_HEADER",
    "GARBAGE",
    "SCENARIO_HEADER",
    "SLOW_FRAME_DELAY",
    "FakeUpstream",
    "FakeUpstreamThread",
    "ReceivedRequest",
    "Reply",
    "Scenario",
    "ToolSpec",
    "closed_port_url",
    "embedding_vector",
    "fragments",
    "main",
    "reply_text",
    "respond",
    "serve_fake",
    "text_pieces",
    "token_count",
    "tool_arguments",
    "tool_result_text",
]


class FakeUpstreamThread:
    """The fake on its own event loop in a daemon thread, for sync tests and subprocesses.

    ``with FakeUpstreamThread() as fake:`` starts it and waits until it
    listens; leaving the block stops it and joins the thread, re-raising
    anything that went wrong in it.
    """

    def __init__(
        self,
        *,
        frame_delay: float = DEFAULT_FRAME_DELAY,
        port: int = 0,
        backend: str = "asyncio",
    ) -> None:
        self._frame_delay = frame_delay
        self._port = port
        self._backend = backend
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._server: FakeUpstream | None = None
        self._stop: anyio.Event | None = None
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self._error: BaseException | None = None

    @property
    def server(self) -> FakeUpstream:
        if self._server is None:
            raise RuntimeError("the fake upstream thread is not running")
        return self._server

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def requests(self) -> list[ReceivedRequest]:
        return self.server.requests

    @property
    def answered(self) -> list[Reply]:
        return self.server.answered

    @property
    def connections(self) -> int:
        return self.server.connections

    @property
    def hangups(self) -> int:
        return self.server.hangups

    def push_reply(self, reply: Reply) -> None:
        self.server.push_reply(reply)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="fake-upstream", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout=30):
            raise RuntimeError("the fake upstream did not start within 30 s")
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return
        if self._stop is not None and self._token is not None:
            with suppress(anyio.RunFinishedError):
                anyio.from_thread.run_sync(self._stop.set, token=self._token)
        thread.join(timeout=30)
        if self._error is not None:
            raise self._error

    def __enter__(self) -> FakeUpstreamThread:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            anyio.run(self._main, backend=self._backend)
        except BaseException as exc:  # handed to the thread that called start()/stop()
            self._error = exc
        finally:
            self._ready.set()

    async def _main(self) -> None:
        async with serve_fake(frame_delay=self._frame_delay, port=self._port) as server:
            self._server = server
            self._stop = anyio.Event()
            self._token = anyio.lowlevel.current_token()
            self._ready.set()
            await self._stop.wait()


def closed_port_url() -> str:
    """``http://127.0.0.1:PORT`` for a port nothing listens on: connections are refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


async def _serve_until_signal(port: int, frame_delay: float) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with serve_fake(port=port, frame_delay=frame_delay) as fake:
            print(fake.url, flush=True)
            async for _ in signals:
                return


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tests.fakes.upstream [--port N] [--frame-delay S] [--backend B]``."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.fakes.upstream", description="Run the fake LLM upstream."
    )
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any)")
    parser.add_argument(
        "--frame-delay",
        type=float,
        default=DEFAULT_FRAME_DELAY,
        help="seconds between streamed frames",
    )
    parser.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    args = parser.parse_args(argv)
    anyio.run(_serve_until_signal, args.port, args.frame_delay, backend=args.backend)
    return 0


if __name__ == "__main__":
    sys.exit(main())
