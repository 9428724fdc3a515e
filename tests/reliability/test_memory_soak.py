"""Memory stays bounded however long the proxy runs (issue 36, part 3).

A soak of mixed traffic through two proxy processes, sampling their
resident memory (``VmRSS``) as it goes:

* a replayer (``replay`` mode, ``--cassette-dir`` of four cassettes chosen
  per request by ``x-reel-cassette``) serving hits, SSE streams, and misses
  (a miss report each, which reads every line of its cassette);
* a recorder (``auto`` mode, ``--parsed-lines 256``) asked for
  ``RECORD_KEYS`` requests round and round, into a temporary cassette
  through the fake upstream: a recording made live counts as served, and
  auto mode serves a recording once, so each ask is recorded again (a
  line more), its key already known (the keying memo holds them all).

The invariant (docs/reliability.md, "Memory stays bounded"): after its
warm-up, a proxy's memory grows with nothing per request.  Checked without
a clock: memory is taken as a function of the requests served, and the
slope of its second half (bytes per request) must stay under a quarter of
the first half's slope (which holds the warm-up: caches filling, the
allocator's arenas), plus the allocator's granularity (1 MiB over the
half).  A recorder keeps each line it recorded (it may serve it next), as
its file does: its memory is taken less the bytes its cassette file grew
by and an index entry a line (``INDEX_ENTRY``), so what is left must be
as flat as the replayer's.

``REEL_MEMORY_SOAK_SECONDS`` sets how long it runs (default 30; CI runs
the default, ``REEL_MEMORY_SOAK_SECONDS=3600`` is the one-hour run quoted
in docs/performance.md).  The figures are printed (``-s``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.abc
import h11
import pytest

from tests.bindings.proxy_support import Call, chat_call

from ._support import check_cassette, connect, proxy_process, record
from .test_concurrency import fake_process, prompt

SECONDS = float(os.environ.get("REEL_MEMORY_SOAK_SECONDS", "30"))
#: Clients of the replayer and of the recorder, each with a kept-alive connection.
REPLAY_CLIENTS = 6
RECORD_CLIENTS = 2
#: Distinct recordings per cassette (every other one a stream), cassettes,
#: and distinct misses the replayer is asked for, round and round.
HITS = 12
CASSETTES = 4
MISSES = 300
RECORD_KEYS = 200
#: What a recorded line holds in memory besides its bytes: its key, its
#: digest as sent, its index and cursor entries (170 to 230 bytes measured:
#: an hour's run held 171 a line).
INDEX_ENTRY = 256
#: The allocator's granularity: growth this small over a half is noise.
SLACK = 1 << 20
#: A sample every this many seconds.
EVERY = 0.25


def rss(pid: int) -> int:
    """The resident memory of process ``pid`` now (bytes, Linux ``/proc``)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS line")  # pragma: no cover - Linux has one


@dataclass
class Samples:
    """``(requests served so far, memory)`` pairs of one proxy."""

    points: list[tuple[int, int]] = field(default_factory=list)

    def slopes(self) -> tuple[float, float, int]:
        """The least-squares slope (bytes a request) of the first half of
        the requests and of the second, and the second half's request count."""
        total = self.points[-1][0]
        first = [p for p in self.points if p[0] <= total / 2]
        second = [p for p in self.points if p[0] >= total / 2]
        return _slope(first), _slope(second), total - total // 2


def _slope(points: list[tuple[int, int]]) -> float:
    n = len(points)
    assert n >= 3, f"too few samples: {points}"
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    return sxy / sxx if sxx else 0.0


@dataclass
class Traffic:
    replayed: int = 0
    streams: int = 0
    misses: int = 0
    #: Requests sent to the recorder.
    asked: int = 0
    errors: list[str] = field(default_factory=list)


class Grown:
    """How many bytes and lines a cassette file grew by, read as it grows."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.size = 0
        self.lines = 0

    def read(self) -> None:
        if not self.path.exists():
            return
        with self.path.open("rb") as f:
            f.seek(self.size)
            new = f.read()
        self.size += len(new)
        self.lines += new.count(b"\n")


async def exchange(
    stream: anyio.abc.SocketStream, conn: h11.Connection, call: Call, cassette: str | None
) -> tuple[int, bytes]:
    """One request on a kept-alive connection: the status and the body."""
    content = call.content
    headers = [("host", "soak"), ("content-type", "application/json")]
    headers.append(("content-length", str(len(content))))
    if cassette is not None:
        headers.append(("x-reel-cassette", cassette))
    data = conn.send(h11.Request(method="POST", target=call.path, headers=headers))
    await stream.send(data + conn.send(h11.Data(data=content)) + conn.send(h11.EndOfMessage()))
    status, body = 0, b""
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await stream.receive())
        elif isinstance(event, h11.Response):
            status = event.status_code
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            conn.start_next_cycle()
            return status, body
        else:
            raise AssertionError(f"unexpected {event!r}")


async def drive(
    replayer: tuple[str, int],
    recorder: tuple[str, int, Path],
    hits: list[Call],
    expected: dict[str, bytes],
) -> tuple[Traffic, Samples, Samples]:
    """Run the clients for ``SECONDS``; sample both proxies' memory."""
    traffic = Traffic()
    replay_samples, record_samples = Samples(), Samples()
    deadline = anyio.current_time() + SECONDS

    async def replay_client(worker: int) -> None:
        n = worker
        async with await connect(replayer[0]) as stream:
            conn = h11.Connection(h11.CLIENT)
            while anyio.current_time() < deadline:
                n += REPLAY_CLIENTS
                cassette = f"hits-{n % CASSETTES}"
                miss = n % 5 == 0
                call = chat_call(f"soak miss {n % MISSES}") if miss else hits[n % len(hits)]
                with anyio.fail_after(60):
                    status, body = await exchange(stream, conn, call, cassette)
                if miss:
                    traffic.misses += 1
                    if status != 404:
                        traffic.errors.append(f"miss answered {status}")
                elif status != 200 or body != expected[prompt(call.content)]:
                    traffic.errors.append(f"{prompt(call.content)}: {status}, body differs")
                else:
                    traffic.replayed += 1
                    traffic.streams += bool(call.body and call.body.get("stream"))

    async def record_client(worker: int) -> None:
        n = worker
        async with await connect(recorder[0]) as stream:
            conn = h11.Connection(h11.CLIENT)
            while anyio.current_time() < deadline:
                n += RECORD_CLIENTS
                k = n % RECORD_KEYS
                call = chat_call(f"soak recorded {k}", stream=k % 3 == 0)
                with anyio.fail_after(60):
                    status, _ = await exchange(stream, conn, call, None)
                if status != 200:
                    traffic.errors.append(f"record answered {status}")
                traffic.asked += 1

    grown = Grown(recorder[2])

    async def sample() -> None:
        while anyio.current_time() < deadline:
            served = traffic.replayed + traffic.misses
            replay_samples.points.append((served, rss(replayer[1])))
            memory = rss(recorder[1])
            grown.read()
            held = memory - grown.size - INDEX_ENTRY * grown.lines
            record_samples.points.append((traffic.asked, held))
            await anyio.sleep(EVERY)

    async with anyio.create_task_group() as tg:
        tg.start_soon(sample)
        for worker in range(REPLAY_CLIENTS):
            tg.start_soon(replay_client, worker)
        for worker in range(RECORD_CLIENTS):
            tg.start_soon(record_client, worker)
    return traffic, replay_samples, record_samples


def flat(samples: Samples) -> dict[str, float]:
    """The figures of one proxy, and whether its second half was flat."""
    first, second, later = samples.slopes()
    bound = max(first, 0.0) / 4 + SLACK / max(later, 1)
    return {
        "first_half_bytes_per_request": round(first, 1),
        "second_half_bytes_per_request": round(second, 1),
        "bound_bytes_per_request": round(bound, 1),
        "start_mb": round(samples.points[0][1] / 2**20, 1),
        "end_mb": round(samples.points[-1][1] / 2**20, 1),
        "flat": second <= bound,
    }


@pytest.mark.slow
@pytest.mark.soak
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_memory_stays_flat_under_mixed_traffic(tmp_path: Path, backend: str) -> None:
    hits = [chat_call(f"memory hit {n} " + "word " * n, stream=n % 2 == 1) for n in range(HITS)]
    recorded = tmp_path / "recorded.jsonl"
    anyio.run(record, recorded, hits)
    expected = {prompt(i.request.body): i.response.content for i in check_cassette(recorded)}
    directory = tmp_path / "cassettes"
    directory.mkdir()
    for k in range(CASSETTES):
        shutil.copy(recorded, directory / f"hits-{k}.jsonl")
    new = tmp_path / "new.jsonl"
    replay_args = ["--backend", backend, "--mode", "replay", "--timing", "fast", "-q"]
    record_args = ["--backend", backend, "--mode", "auto", "--timing", "fast", "-q"]
    record_args += ["--parsed-lines", "256"]
    with (
        fake_process() as upstream,
        proxy_process([*replay_args, "--cassette-dir", str(directory)]) as replayer,
        proxy_process([*record_args, "--cassette", str(new), "--upstream", upstream]) as recorder,
    ):
        started = time.perf_counter()
        traffic, replay_samples, record_samples = anyio.run(
            drive,
            (replayer.url, replayer.proc.pid),
            (recorder.url, recorder.proc.pid, new),
            hits,
            expected,
        )
        took = time.perf_counter() - started
        for proxy in (replayer, recorder):
            proxy.proc.send_signal(signal.SIGTERM)
            assert proxy.proc.wait(timeout=60) == 0
    replaying, recording = flat(replay_samples), flat(record_samples)
    figures = {
        "backend": backend,
        "seconds": round(took),
        "replayed": traffic.replayed,
        "streams": traffic.streams,
        "misses": traffic.misses,
        "asked_recorder": traffic.asked,
        "errors": len(traffic.errors),
        "replayer": replaying,
        "recorder_less_its_lines": recording,
    }
    print(f"memory soak: {json.dumps(figures)}")  # -s shows it
    lines = len(check_cassette(new))
    assert traffic.errors == []
    assert traffic.replayed
    assert traffic.streams
    assert traffic.misses
    assert lines == traffic.asked  # each ask recorded (a recording made live counts as served)
    assert replaying["flat"], figures
    assert recording["flat"], figures
    assert replayer.stderr == recorder.stderr == ""  # -q: nothing logged
