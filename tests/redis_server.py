"""A real redis-server for the tests: started on a free port with a
temporary directory, once per test session (per xdist worker), flushed
before each test that asks for it; skipped without the program (failed in
CI, see ``tests/programs.py``).

``redis_server`` is the running server (kill it and start it again on the
same port for the fault tests); ``redis_url`` is its URL, the database
flushed first.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.programs import need_program

#: An inner test module (pytester) that records, or replays, one chat through
#: the ``reel`` fixture's transport, against the ``fake_url`` fixture.
CHAT_TEST = textwrap.dedent(
    """
    import httpx, pytest

    @pytest.mark.reel
    def test_chat(reel, fake_url):
        with httpx.Client(transport=reel.transport(), base_url=fake_url) as client:
            r = client.post("/v1/chat/completions", json={
                "model": "gpt-4o-mini",
                "messages": [{"role": "user", "content": "plugin"}]})
        assert r.status_code == 200
    """
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class RedisServer:
    """One redis-server process (no persistence: the tests need none)."""

    def __init__(self, program: str, directory: Path) -> None:
        self.program = program
        self.directory = directory
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        log = open(self.directory / "redis.log", "ab")  # noqa: SIM115 - the server's
        with log:
            self.process = subprocess.Popen(
                [
                    self.program,
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--dir",
                    str(self.directory),
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.wait_ready()

    def wait_ready(self) -> None:
        for _ in range(500):
            assert self.process is not None
            if self.process.poll() is not None:
                log = (self.directory / "redis.log").read_text(errors="replace")
                raise RuntimeError(f"redis-server exited: {log[-2000:]}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock,
            ):
                sock.sendall(b"PING\r\n")
                if sock.recv(64).startswith(b"+PONG"):
                    return
            time.sleep(0.01)
        raise RuntimeError(f"redis-server on port {self.port} did not answer")

    def kill(self) -> None:
        """Kill the server at once (SIGKILL: no goodbye to its clients)."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:  # pragma: no cover - a stuck server
                self.process.kill()
                self.process.wait()
            self.process = None

    def command(self, *words: str) -> bytes:
        """Send one inline command; its first reply line."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
            sock.sendall(" ".join(words).encode() + b"\r\n")
            return sock.recv(4096)

    def flush(self) -> None:
        if self.process is None:
            self.start()
        assert self.command("FLUSHALL").startswith(b"+OK")


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    program = need_program("redis-server")
    pytest.importorskip("redis", reason="pip install 'reel-llm[redis]'")
    server = RedisServer(program, tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The URL of the session's redis-server, flushed (restarted if a test
    killed it)."""
    redis_server.flush()
    return redis_server.url
