"""The tools the proxy peers section runs: how each one is started recording
and replaying, in a child process pinned to the server core, and how much
memory its process tree took.

Reel's proxy runs as ``bench._servers proxy``; mitmproxy as ``mitmdump`` in
reverse-proxy mode (``-w FILE`` to record; ``--server-replay FILE`` with
reuse, ``kill`` for a request it has not recorded and a lazy upstream
connection, to replay); talkback through ``bench/_talkback.js`` (record mode
``OVERWRITE`` to record, ``DISABLED`` with a 404 fallback to replay).  Each
tool keeps its files under a directory of its own: ``corpus/`` (what it
recorded and replays) and ``overhead/`` (what the record-overhead figure
recorded), and a log per mode.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ._common import ROOT, Row, pin_to_cpu
from ._loadgen import LoadResult
from .proxy import SERVER_CPU

__all__ = ["Server", "Tool", "serving"]


@dataclass
class Tool:
    """One row: how to start it recording and replaying, and its figures."""

    name: str
    version: str
    kind: str  # "reel", "mitmproxy" or "talkback"
    command: tuple[str, ...] = ()
    backend: str = "asyncio"
    #: Why the row has no figures (not installed, or failed), or "".
    failed: str = ""
    files: Path = Path()
    loads: dict[int, list[LoadResult]] = field(default_factory=dict)
    figures: Row = field(default_factory=dict)


class Server:
    """A tool's server in a child process, pinned to the server core."""

    def __init__(self, proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
        self.proc = proc
        self.url = url
        self.log = log

    def peak_rss_kb(self) -> int:
        """Peak resident memory of the process and its descendants (VmHWM summed)."""
        return sum(_vm_hwm(pid) for pid in [self.proc.pid, *_descendants(self.proc.pid)])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def _launch(command: Sequence[str], port: int, log: Path) -> Iterator[Server]:
    """Start ``command`` (which listens on ``port``), wait until it accepts
    a connection, SIGTERM it on leaving."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            list(command),
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            preexec_fn=lambda: pin_to_cpu(SERVER_CPU),
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                tail = log.read_text(errors="replace")[-600:]
                raise RuntimeError(f"exited with {proc.returncode} before listening: {tail}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("did not listen within 60 s") from None
                time.sleep(0.05)
        yield Server(proc, f"http://127.0.0.1:{port}", log)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _vm_hwm(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


# -- how each tool records and replays ----------------------------------------


def _command(tool: Tool, port: int, upstream: str, mode: str) -> list[str]:
    """``mode``: "record" (everything, afresh: the corpus), "overhead" (the
    same, into files of its own), "replay" (the corpus, as fast as it can)
    or "realtime" (Reel's recorded timing; the peers have none)."""
    record = mode in ("record", "overhead")
    files = tool.files / ("overhead" if mode == "overhead" else "corpus")
    files.mkdir(parents=True, exist_ok=True)
    if tool.kind == "reel":
        args = [sys.executable, "-m", "bench._servers", "proxy", "--cpu", str(SERVER_CPU)]
        args += ["--backend", tool.backend, "--cassette", str(files / "reel.jsonl")]
        args += ["--port", str(port), "-q"]
        if record:
            return [*args, "--mode", "record", "--upstream", upstream]
        return [*args, "--timing", "realtime" if mode == "realtime" else "fast"]
    if tool.kind == "mitmproxy":
        args = [*tool.command, "-q", "--listen-host", "127.0.0.1", "--listen-port", str(port)]
        args += ["--mode", f"reverse:{upstream}", "--set", f"confdir={tool.files / 'conf'}"]
        if record:
            return [*args, "-w", str(files / "flows.mitm")]
        # lazy: a replayed request never connects upstream (eager connects
        # for each client connection, to the upstream that is gone)
        args += ["--server-replay", str(files / "flows.mitm"), "--server-replay-reuse"]
        return [*args, "--server-replay-extra", "kill", "--set", "connection_strategy=lazy"]
    talkback_mode = "OVERWRITE" if record else "DISABLED"
    return [*tool.command, str(port), upstream, str(files / "tapes"), talkback_mode]


@contextlib.contextmanager
def serving(tool: Tool, upstream: str, mode: str) -> Iterator[Server]:
    port = _free_port()
    log = tool.files / f"{mode}.log"
    with _launch(_command(tool, port, upstream, mode), port, log) as server:
        yield server
