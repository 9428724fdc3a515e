"""Reel's benchmarks: ``python bench/run.py`` (``nox -s bench``); ``--quick``
is the CI smoke run (smaller sizes, shorter runs, well under a minute).

Every figure is measured next to its peer in the same run and reported as a
ratio: the in-process transport against vcrpy and against httpx's
MockTransport; cassette open against reading and splitting the file; the
proxy against a minimal h11-on-anyio server (over HTTP/2 and gRPC, against
a bare h2-on-anyio server); fast streaming against a bare
anyio server; recording against talking to the upstream directly and
through a bare h11 relay.  Results go to bench/results/latest.md and
latest.json with the machine they ran on; ``--docs`` also copies the tables
into docs/performance.md.  Nothing here is asserted: the targets are read
from the table, not tested.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import (
    http2,
    imports,
    inprocess,
    opening,
    pertest,
    pertransport,
    proxy,
    proxypeers,
    redaction,
    stores,
    streaming,
    websocket,
)
from bench._common import ROOT, Row, machine, pinned
from bench._data import Corpus
from bench.suite import SuitePlan, SuiteRun

RESULTS = Path(__file__).resolve().parent / "results"
DOCS = ROOT / "docs" / "performance.md"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
SECTIONS = (
    "suite",
    "import",
    "replay",
    "open",
    "proxy",
    "h2",
    "streaming",
    "fast",
    "big",
    "websocket",
    "ws-fast",
    "record",
    "inrecord",
    "memory",
    "stores",
    "proxypeers",
    "pertest",
    "redact",
    "pertransport",
)


@dataclass(frozen=True)
class Plan:
    """How much of each figure a run measures."""

    replay_sizes: tuple[int, ...]
    replay_requests: int
    vcr_budget: float
    #: The sizes at which cassetter and agenttape record their own cassettes
    #: and replay them (each recording takes a while: not every size).
    peer_sizes: tuple[int, ...]
    open_sizes: tuple[int, ...]
    open_repeat: int
    proxy_seconds: float
    proxy_rounds: int
    fidelity_streams: int
    fidelity_rounds: int
    fast_seconds: float
    #: Size of the stream the "big" section replays, in MB.
    big_megabytes: float
    #: Rounds of the "big" section (its figures are their medians).
    big_rounds: int
    record_requests: int
    #: Cassette sizes the memory section serves (the full run's last: about 1 GB).
    memory_sizes: tuple[int, ...]
    #: The cassette the stores section opens, and each writer's appends.
    store_size: int = 10_000
    store_appends: int = 500
    #: WebSocket realtime: server messages per session (10 ms apart),
    #: sessions per round, rounds; fast mode's seconds per via.
    ws_messages: int = 200
    ws_sessions: int = 3
    ws_rounds: int = 3
    ws_fast_seconds: float = 2.0
    #: Fresh interpreters per module in the import section (the best counts).
    import_repeat: int = 10
    #: Proxy peers (mitmproxy, talkback): what they record and replay, and
    #: whether a missing one is installed (a full run) or its row says so.
    peers_proxy: proxypeers.PeerPlan = proxypeers.PeerPlan(
        interactions=1_000, seconds=2.0, rounds=3, streams=3, record_requests=150, install=True
    )
    #: The per-test section: tests in its generated suite, interleaved
    #: rounds, xdist worker counts (0: serial), and whether Reel's phase
    #: timer runs once more per variant (and the variants timed).
    pertest_tests: int = 300
    pertest_rounds: int = 5
    pertest_workers: tuple[int, ...] = (0, 2)
    pertest_phases: bool = True
    pertest_variants: tuple[str, ...] = ("inprocess", "proxy", "proxy-sdk")
    pertransport_tests: int = 300
    pertransport_rounds: int = 7
    #: The generated test suites: their sizes, rounds, serial and ``-n 2``.
    suite: SuitePlan = SuitePlan(sizes=(300, 1_000), rounds=3)
    #: Redaction: the size of each big body and of the SSE stream (MB), rounds.
    redact_megabytes: float = 1.0
    redact_stream_megabytes: float = 10.0
    redact_rounds: int = 5


FULL = Plan(
    replay_sizes=(10, 1_000, 10_000, 100_000),
    replay_requests=2000,
    vcr_budget=4.0,
    peer_sizes=(10, 1_000, 10_000),
    open_sizes=(1_000, 10_000, 100_000),
    open_repeat=3,
    proxy_seconds=2.0,
    proxy_rounds=2,
    fidelity_streams=3,
    fidelity_rounds=3,
    fast_seconds=2.0,
    big_megabytes=50.0,
    big_rounds=3,
    record_requests=300,
    memory_sizes=(100_000, 280_000),
)
QUICK = Plan(
    replay_sizes=(10, 1_000),
    replay_requests=400,
    vcr_budget=0.5,
    peer_sizes=(10,),
    open_sizes=(1_000,),
    open_repeat=2,
    proxy_seconds=0.4,
    proxy_rounds=1,
    fidelity_streams=1,
    fidelity_rounds=1,
    fast_seconds=0.4,
    big_megabytes=5.0,
    big_rounds=1,
    record_requests=40,
    memory_sizes=(10_000,),
    store_size=1_000,
    store_appends=50,
    ws_messages=50,
    ws_sessions=1,
    ws_rounds=1,
    ws_fast_seconds=0.4,
    import_repeat=3,
    peers_proxy=proxypeers.PeerPlan(
        interactions=50,
        seconds=0.3,
        rounds=1,
        streams=1,
        record_requests=10,
        install=False,
        backends=("asyncio",),
    ),
    pertest_tests=30,
    pertest_rounds=1,
    pertest_workers=(0,),
    pertest_phases=False,
    pertest_variants=("inprocess", "proxy"),
    pertransport_tests=30,
    pertransport_rounds=2,
    suite=SuitePlan(sizes=(30,), rounds=1, workers=(0,), wirings=("per-test",), import_repeat=2),
    redact_megabytes=0.25,
    redact_stream_megabytes=1.0,
    redact_rounds=2,
)


class Run:
    """One run: its plan, its scratch directory, its figures so far."""

    def __init__(self, plan: Plan, work: Path, sections: tuple[str, ...]) -> None:
        self.plan = plan
        self.work = work
        self.sections = sections
        self.corpora: dict[int, Corpus] = {}
        self.vcr: dict[int, dict[str, Any]] = {}
        self.peers: dict[int, dict[str, dict[str, Any]]] = {}
        self.results: dict[str, list[Row]] = {}
        self.started = time.perf_counter()
        self.seconds: dict[str, float] = {}

    def corpus(self, n: int) -> Corpus:
        if n not in self.corpora:
            self.corpora[n] = Corpus(self.work, n)
        return self.corpora[n]

    def vcr_for(self, n: int) -> dict[str, Any]:
        """vcrpy's open and per-request times on the size-``n`` corpus (one
        child process serves both figures)."""
        if n not in self.vcr:
            corpus = self.corpus(n)
            indices = corpus.non_stream(self.plan.replay_requests)
            self.vcr[n] = inprocess.vcr_run(corpus, indices, self.plan.vcr_budget)
        return self.vcr[n]

    def peers_for(self, n: int) -> dict[str, dict[str, Any]]:
        """cassetter's and agenttape's figures on their own size-``n``
        cassettes (each records its own, in a child process of its own); a
        size not in the plan's ``peer_sizes`` is skipped, saying so."""
        if n not in self.peers:
            if n not in self.plan.peer_sizes:
                sizes = ", ".join(f"{s:,}" for s in self.plan.peer_sizes)
                skipped = {"skipped": f"not run at this size (peers run at {sizes})"}
                return dict.fromkeys(inprocess.PEERS, skipped)
            corpus = self.corpus(n)
            indices = corpus.non_stream(self.plan.replay_requests)
            self.peers[n] = {
                peer: inprocess.peer_run(peer, n, indices, self.plan.vcr_budget, self.work)
                for peer in inprocess.PEERS
            }
        return self.peers[n]

    def section(self, name: str, measure: Callable[[], list[Row]]) -> None:
        if name not in self.sections:
            return
        start = time.perf_counter()
        _log(f"{name}...")
        self.results[name] = measure()
        self.seconds[name] = round(time.perf_counter() - start, 1)
        _log(f"{name}: {self.seconds[name]} s")


def _log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def measure(run: Run) -> None:
    plan = run.plan
    backends = ["asyncio", "trio"]
    # whole pytest runs, serial and on two workers: both cores, so unpinned
    suite = SuiteRun(run.work, plan.suite)
    run.section("suite", suite.measure)
    if suite.cpu_rows:
        run.results["suite-cpu"] = suite.cpu_rows
    if suite.split:
        run.results["suite-split"] = suite.split
    run.section("import", lambda: imports.import_rows(plan.import_repeat))
    run.section(
        "redact",
        lambda: redaction.redaction_rows(
            plan.redact_megabytes, plan.redact_stream_megabytes, plan.redact_rounds
        ),
    )
    run.section(
        "replay",
        lambda: [
            inprocess.replay_cost(
                run.corpus(n), plan.replay_requests, vcr=run.vcr_for(n), peers=run.peers_for(n)
            )
            for n in plan.replay_sizes
        ],
    )
    run.section(
        "open",
        lambda: [
            opening.open_row(run.corpus(n), plan.open_repeat, run.vcr_for(n), run.peers.get(n))
            for n in plan.open_sizes
        ],
    )
    run.section(
        "stores",
        lambda: stores.store_rows(
            run.corpus(plan.store_size),
            plan.open_repeat,
            plan.replay_requests,
            plan.store_appends,
            run.work,
        ),
    )
    run.section(
        "pertest",
        lambda: pertest.per_test_rows(
            run.work,
            plan.pertest_tests,
            plan.pertest_rounds,
            workers=plan.pertest_workers,
            variants=plan.pertest_variants,
            phases=plan.pertest_phases,
        ),
    )
    run.section(
        "pertransport",
        lambda: pertransport.per_transport_rows(plan.pertransport_tests, plan.pertransport_rounds),
    )
    with pinned(proxy.CLIENT_CPU):
        run.section(
            "proxy",
            lambda: proxy.throughput(
                run.corpus(1_000), backends, plan.proxy_seconds, plan.proxy_rounds, run.work
            ),
        )
        run.section(
            "h2",
            lambda: http2.h2_throughput(
                run.corpus(1_000), backends, plan.proxy_seconds, plan.proxy_rounds, run.work
            ),
        )
        run.section(
            "streaming",
            lambda: streaming.fidelity(
                run.work, backends, plan.fidelity_streams, plan.fidelity_rounds
            ),
        )
        run.section("fast", lambda: streaming.fast_mode(run.work, backends, plan.fast_seconds))
        run.section(
            "big",
            lambda: streaming.big_stream(run.work, backends, plan.big_megabytes, plan.big_rounds),
        )
        run.section(
            "websocket",
            lambda: websocket.ws_fidelity(
                run.work, backends, plan.ws_sessions, plan.ws_rounds, plan.ws_messages
            ),
        )
        run.section("ws-fast", lambda: websocket.ws_fast(run.work, backends, plan.ws_fast_seconds))
        run.section("record", lambda: proxy.record_overhead(plan.record_requests, run.work))
        run.section("inrecord", lambda: inprocess.record_ttfb(plan.record_requests // 3, run.work))
        run.section(
            "memory",
            lambda: [proxy.memory(run.corpus(n), run.corpus(10)) for n in plan.memory_sizes],
        )
        run.section("proxypeers", lambda: proxypeers.peer_rows(run.work, plan.peers_proxy))


# -- targets -------------------------------------------------------------------


def targets(results: dict[str, list[Row]]) -> list[dict[str, Any]]:
    """Each target of the benchmark issue, read off the figures."""
    out: list[dict[str, Any]] = []

    def add(section: str, target: str, figure: str, met: bool | None) -> None:
        out.append({"section": section, "target": target, "figure": figure, "met": met})

    imported = {r["module"]: r for r in results.get("import", [])}
    if imported:
        core = imported["reel_core"]["import_ms"]
        add("import", "import reel_core <= 60 ms", f"{core} ms", core <= 60)
        http = imported["reel_bindings.httpcore"]
        add(
            "import",
            "import reel_bindings.httpcore <= 70 ms, no client family imported",
            f"{http['import_ms']} ms, families: {http['families_imported']}",
            http["import_ms"] <= 70 and http["families_imported"] == "none",
        )
    for body in results.get("redact", []):
        if body["body"].startswith(("binary", "text past")):
            per_mb = body["ms"] / body["mb"]
            add("redact", f"{body['body']}: <= 50 ms a MB", f"{per_mb:.1f} ms a MB", per_mb <= 50)
    replay = results.get("replay", [])
    if replay:
        times = [r["reel_us"] for r in replay]
        spread = round(max(times) / min(times), 2)
        sizes = f"{replay[0]['interactions']:,}-{replay[-1]['interactions']:,}"
        add(
            "replay", f"flat over {sizes} interactions (max/min <= 1.2)", f"{spread}", spread <= 1.2
        )
        vcr = min(r.get("vcrpy_vs_reel", float("inf")) for r in replay)
        add("replay", "vcrpy per request vs Reel (no target)", f"{vcr}x slower or more", None)
        for peer in inprocess.PEERS:
            ratios = [r[f"{peer}_vs_floor"] for r in replay if f"{peer}_vs_floor" in r]
            if ratios:
                add(
                    "replay",
                    f"{peer} first play vs the floor (no target; Reel's above)",
                    f"{min(ratios)}x-{max(ratios)}x",
                    None,
                )
    opened = results.get("open", [])
    if opened:
        worst = max(r["reel_vs_split"] for r in opened)
        add("open", "open to first replay <= 2x read-and-split", f"{worst}x", worst <= 2)
        least = min(r["json_loads_vs_reel"] for r in opened)
        add("open", ">= 5x faster than json.loads of every line", f"{least}x", least >= 5)
    rows = results.get("proxy", [])
    if rows:
        worst = min(r["reel_vs_baseline"] for r in rows)
        add("proxy", ">= 60% of the baseline's requests/s", f"{worst * 100:.0f}%", worst >= 0.6)
    for protocol in ("HTTP/2", "gRPC unary"):
        h2_rows = [r for r in results.get("h2", []) if r["protocol"] == protocol]
        if h2_rows:
            worst = min(r["reel_vs_baseline"] for r in h2_rows)
            add(
                "h2",
                f"{protocol} replay vs a bare h2 server's requests/s (no target)",
                f"{worst * 100:.0f}%",
                None,
            )
    realtime = [r for r in results.get("streaming", []) if "reference" not in r["via"]]
    if realtime:
        p99 = max(r["offset_p99_ms"] for r in realtime)
        add("streaming", "realtime frame offset p99 <= 1 ms", f"{p99} ms", p99 <= 1)
        dur = max(r["duration_error_pct"] for r in realtime)
        add("streaming", "realtime duration error <= 1%", f"{dur}%", dur <= 1)
    fast = results.get("fast", [])
    if fast:
        worst = min(r["reel_vs_bare"] for r in fast)
        add(
            "streaming",
            "fast mode >= 50% of a bare anyio server's frames/s",
            f"{worst * 100:.0f}%",
            worst >= 0.5,
        )
    ws = [r for r in results.get("websocket", []) if r["via"] == "proxy"]
    if ws:
        p99 = max(r["offset_p99_ms"] for r in ws)
        add("websocket", "realtime message offset p99 <= 1 ms (like SSE)", f"{p99} ms", p99 <= 1)
    ws_fast = results.get("ws-fast", [])
    if ws_fast:
        worst = min(r["reel_vs_bare"] for r in ws_fast)
        add(
            "websocket",
            "fast mode messages/s vs a bare wsproto server (no target)",
            f"{worst * 100:.0f}%",
            None,
        )
    big = results.get("big", [])
    if big:
        slowest_mb = min(r["proxy_mb_per_s"] for r in big)
        add(
            "big",
            f"a {big[0]['stream_mb']} MB stream through the proxy >= 50 MB/s (HTTP/1.1)",
            f"{slowest_mb} MB/s",
            slowest_mb >= 50,
        )
        slowest = max(r["proxy_vs_inprocess"] for r in big)
        add(
            "big",
            f"a {big[0]['stream_mb']} MB stream through the proxy vs in process (no target)",
            f"{slowest}x the time",
            None,
        )
        during = max(r["small_request_during_ms"] for r in big)
        add("big", "a small request served during it (no target)", f"{during} ms", None)
    record = results.get("record", [])
    if record:
        # the worst of Reel's figures, and the relay's for the same request and time
        added, row, what = max(
            (r[f"added_{what}_p50_us"], i, what)
            for i, r in enumerate(record)
            for what in ("ttfb", "total")
        )
        relay = record[row][f"relay_added_{what}_p50_us"]
        add(
            "record",
            "a bare h11 relay adds there, in the same run (no target)",
            f"{relay / 1000:.2f} ms (Reel {record[row][f'{what}_vs_relay']}x of it)",
            None,
        )
    inrecord = results.get("inrecord", [])
    if inrecord:
        added = max(r["added_ttfb_p50_us"] for r in inrecord)
        add(
            "inrecord",
            "in-process record adds <= 1 ms at p50 TTFB (a new transport each request)",
            f"{added / 1000:.2f} ms",
            added <= 1000,
        )
    memory = results.get("memory", [])
    if memory:
        # the target is the largest file's: a small one shows the fixed
        # cost (the parsed lines kept, the memo, the replay events)
        largest = max(memory, key=lambda r: r["file_mb"])
        others = ", ".join(f"{r['added_rss_vs_file']}x at {r['file_mb']} MB" for r in memory)
        add(
            "memory",
            "replay's added peak RSS <= 0.25x the largest cassette file, every line served",
            f"{largest['added_rss_vs_file']}x at {largest['file_mb']} MB ({others})",
            # read at the full run's 1 GB row: a small file is mostly fixed cost
            largest["added_rss_vs_file"] <= 0.25 if largest["file_mb"] >= 1000 else None,
        )
    out += [
        {"section": "proxypeers", "target": t, "figure": f, "met": m}
        for t, f, m in proxypeers.lead(results.get("proxypeers", []))
    ]
    return out


# -- guards --------------------------------------------------------------------

#: The guards of issue 36's decision, read off the figures of every run: a
#: regression shows as FAIL; nothing asserts them (``--strict-guards`` makes
#: a FAIL the run's exit status).  The budget analysis behind them is in
#: docs/performance.md.
FIRST_PLAY_GUARD = 2.5
RECORD_ADDED_GUARD_US = 1500.0
RECORD_RELAY_GUARD = 2.0


def guards(results: dict[str, list[Row]]) -> list[dict[str, Any]]:
    """Each guard, with the figure this run measured (``passed`` None: the
    section was not run)."""
    out: list[dict[str, Any]] = []

    def add(section: str, guard: str, figure: str, passed: bool | None) -> None:
        out.append({"section": section, "guard": guard, "figure": figure, "passed": passed})

    replay = results.get("replay", [])
    guard = f"in-process first play <= {FIRST_PLAY_GUARD}x the MockTransport floor"
    if replay:
        worst = max(r["reel_vs_floor"] for r in replay)
        add("replay", guard, f"{worst}x", worst <= FIRST_PLAY_GUARD)
    else:
        add("replay", guard, "not measured (--only replay)", None)
    record = results.get("record", [])
    added_guard = f"record mode adds <= {RECORD_ADDED_GUARD_US / 1000} ms at p50 (TTFB and total)"
    relay_guard = f"record mode adds <= {RECORD_RELAY_GUARD}x what a bare relay adds"
    if record:
        # every figure of every row (TTFB and total, non-stream and stream): the worst
        figures = [
            (r[f"added_{w}_p50_us"], r[f"{w}_vs_relay"], f"{r.get('request', '')} {w}".strip())
            for r in record
            for w in ("ttfb", "total")
        ]
        added, _, which = max(figures, key=lambda f: f[0])
        figure = f"{added / 1000:.2f} ms ({which})"
        add("record", added_guard, figure, added <= RECORD_ADDED_GUARD_US)
        # The ratio to the relay leaves out a stream's total: there both add
        # a few hundred us to some 40 ms of the upstream's own sleeps, and the
        # difference of two medians of those cannot resolve it (the relay's
        # read 30 to 800 us across rounds of one run, so the ratio 2x to 14x);
        # the absolute guard above still reads it.
        resolved = [f for f in figures if f[2] != "stream (SSE) total"]
        _, relay, which = max(resolved, key=lambda f: f[1])
        add("record", relay_guard, f"{relay}x ({which})", relay <= RECORD_RELAY_GUARD)
    else:
        for text in (added_guard, relay_guard):
            add("record", text, "not measured (--only record)", None)
    return out


def guard_lines(checked: list[dict[str, Any]]) -> list[str]:
    """The guards as the run prints them: one PASS, FAIL or NOT RUN line each."""
    word = {True: "PASS", False: "FAIL", None: "NOT RUN"}
    return [f"{word[g['passed']]:7} {g['section']}: {g['guard']}: {g['figure']}" for g in checked]


# -- output --------------------------------------------------------------------

CAPTIONS = {
    "suite": "9. A whole test suite in replay (bench/suite.py): the same generated pytest "
    "suite (N tests, each its own cassette of 1 to 5 OpenAI SDK calls, 20% streamed, 10% "
    "retried after a 429 or 500) recorded by each tool against one fake upstream, then "
    "replayed with a tripwire in its place (every run passed all N tests and sent it 0 "
    "requests). floor_s: the median wall time of the whole pytest run with the SDK "
    "answered by httpx2.MockTransport; *_ms: each tool's cost per test above that floor "
    "(same variant, wiring and run), ms; *_vs_reel: over Reel in process. per-test: a "
    "client made in each test as the tool's docs show (Reel: reel.openai(); the others and "
    "the per-test proxy: openai.OpenAI()); shared: one openai.OpenAI() per module. "
    "agenttape records no OpenAI stream: it runs the stream-free variant, beside Reel and "
    "the floor on it. Medians of interleaved rounds; load: the highest load average after "
    "a round.",
    "suite-cpu": "9a. The same runs in CPU time: user and system seconds of the pytest "
    "process and its xdist workers (floor_s), and each tool's CPU per test above the floor's "
    "(*_ms). A machine busy with other work slows a run's wall time far more than its CPU "
    "time: on a loaded machine, read these.",
    "suite-split": "9b. Where Reel's own time per test goes: a serial replay of the per-test "
    "suite under cProfile (inflated by the profiler: read the shares), Reel's functions "
    "counted where pytest, the SDK or the test enter them; est_ms_per_test applies each "
    "share to the unprofiled CPU figure of 9a (serial, per-test). Imports: the plugin and "
    "the core in a fresh interpreter after pytest and the SDK, paid once per process.",
    "redact": "12. Redaction throughput: `Redactor.data` over each body, best of rounds "
    "(bench/redaction.py): ms, MB/s; the 0.8 KB chat body in us; the SSE stream recorded "
    "(record_exchange) in 4 KB reads, each event scrubbed as a frame.",
    "import": "0. Import cost: `import X` in a fresh interpreter (byte-code cached), best of "
    "runs, ms (-X importtime's cumulative figure, without the interpreter's start-up), and "
    "the client families it pulled in. httpx and httpx2 are the reference: the transports "
    "used to import both up front.",
    "replay": "1. In-process replay, per request (p50 us): httpx + Reel's Transport, "
    "vcrpy (matching method, uri, body) and the floor (httpx.MockTransport with a canned "
    "response). Each request is the first play of its recording; warm: its second play. "
    "cassetter and agenttape each record their own cassette of the same requests against "
    "a local fake upstream answering the same bodies (non-stream: agenttape records no "
    "streams), then replay it (matching method, URI and body), each in a process of its "
    "own; *_vs_floor is over this row's floor.",
    "open": "2. Cassette open to first replay (ms, best of runs): Reel reads, indexes and "
    "serves one request; baselines read and split the file, json.loads every line, and "
    "vcrpy's use_cassette + first request (cassetter's and agenttape's on their own "
    "cassettes of the same size where they ran). read_ms is reading the file alone: "
    "json_loads_vs_read bounds what any open that reads the file can reach.",
    "proxy": "3. Proxy replay throughput, keep-alive (fast timing): Reel's proxy vs a "
    "minimal h11-on-anyio server with a fixed response; server and load generator on "
    "separate cores.",
    "h2": "3b. Proxy replay throughput over HTTP/2 (h2c, fast timing), JSON and gRPC unary "
    "calls: Reel's proxy vs a bare h2-on-anyio server with a fixed response of the same size "
    "(gRPC: one message and its grpc-status trailers); one connection with 1 and 16 streams "
    "in flight, h2's client as load generator; server and load generator on separate cores.",
    "streaming": "4a. Streaming fidelity: a 200-frame SSE stream (~2 s) replayed in realtime; "
    "|actual - recorded| offset of each frame as the client sees it, and the error of the "
    "whole stream's duration. The reference rows time Reel's deadline sleeps alone, with "
    "no I/O. Each row is the best of its rounds (lowest p99; every round's p99 is listed): "
    "a round disturbed by the machine's other load is dropped.",
    "fast": "4b. Fast mode: frames per second of the same stream through the proxy, vs a bare "
    "anyio server writing the same frames one write each (the target's peer) and all in one "
    "write (what Reel does with frames due at once), same backend and client.",
    "big": "4c. A big SSE stream (small frames, all due at once) replayed in fast mode: "
    "through the proxy to a raw socket client (proxy_cpu_s: the proxy's CPU time meanwhile), "
    "over HTTP/2 to an h2 client (a proxy of its own: the line's first play too), and "
    "through the async transport in process (httpx reading raw chunks); the median of the "
    "rounds, backends taking turns. small_request_during_ms: a small request on a second "
    "connection, sent once the stream's first bytes arrived and answered while the proxy "
    "writes the stream (written in bounded writes, so other connections are served between).",
    "websocket": "8a. WebSocket replay in realtime: a recorded session (one client message, "
    "then server messages 10 ms apart) through the proxy, and through a bare wsproto server "
    "on anyio playing the same messages gated the same way with the same deadline sleeps (no "
    "matching, no cassette); |arrival - recorded offset| of each server message as the "
    "client sees it, counted from its send of the client message (so the client message's "
    "trip and its check are in the figure). Best round each (every round's p99 listed).",
    "ws-fast": "8b. WebSocket fast mode: server messages per second within a session of 10 "
    "turns of 100 messages (each turn opened by a client message), the proxy vs the same "
    "bare wsproto server, same backend and client (a wsproto client on a core of its own).",
    "record": "5. Record mode overhead: the proxy recording vs straight to the same local "
    "upstream (tests/fakes), p50 over interleaved requests on keep-alive connections. The "
    "peer: a bare h11-on-anyio relay to the same upstream, which records nothing (relay_added_* "
    "is what it adds; *_vs_relay is Reel's added time over the relay's).",
    "stores": "7. Stores: the same cassette opened to its first replay and replayed per "
    "request (in process, Player.decide) from files and from Redis (a local redis-server, "
    "values plain and zstd-compressed), and appends per second from 8 writer threads into "
    "one cassette of each; *_vs_files is Redis over files in the same run. No rows without "
    "redis-server.",
    "inrecord": "5b. In-process record: time to the first body chunk of a request recorded "
    "through a new Reel transport each time (as an SDK helper makes a client of its own; "
    "the transport's first request included) vs the same request straight to the same local "
    "upstream on a long-lived httpx client, interleaved.",
    "proxypeers": "10. Proxy peers: Reel's proxy (fast timing; realtime for the stream), "
    "mitmproxy (mitmdump reverse proxy: -w to record, --server-replay with reuse and kill "
    "to replay) and talkback (npm; OVERWRITE to record, DISABLED to replay), each on its own "
    "recording of the same interactions from the same local upstream, server on one core and "
    "the raw-socket client on the other. requests/s, p50 and p99 at 1 and 16 keep-alive "
    "connections (medians of interleaved rounds); peak RSS of the replaying process tree; "
    "bodies replayed byte for byte as recorded; a 40-frame SSE stream: frames whole, separate "
    "arrivals, |offset - recorded| and the gap error; record mode's added TTFB and total "
    "(p50, vs straight to the fake upstream, interleaved); record_s: starting the tool and "
    "recording the corpus through it. A peer not installed or failing says why.",
    "pertest": "11. Reel's own cost per test: a generated suite (1 to 3 OpenAI SDK calls a "
    "test, every fifth a stream, a cassette each) timed as whole `pytest -q` runs, medians "
    "of interleaved rounds; above_floor_ms is (median run - the floor's) / tests, the floor "
    "being the same suite on httpx.MockTransport with Reel's plugin off. inprocess: "
    "reel.openai() per test; proxy: the worker's proxy and reel.proxy_openai(); proxy-sdk: "
    "the proxy and a plain openai.OpenAI() built by the test. reel_own_ms: Reel's phase "
    "timer's total per test (one more run).",
    "pertransport": "11a. Reel's in-process work per test without pytest or the SDK: "
    "each test's cassette (1 to 3 corpus lines) opened, an httpx transport on it (fast "
    "timing), every request played once, closed; CPU ms per test, median and best of the "
    "rounds (bench/pertransport.py; --profile there shows where it goes).",
    "memory": "6. Memory: peak RSS of a proxy that opened the cassette and served every "
    "line of it once (streams too, fast timing, 4 connections), vs the same proxy that "
    "served a 10-interaction cassette; parsed_lines: how many parsed lines it keeps "
    "(--parsed-lines; default 4,096).",
}


def _table(rows: list[Row]) -> list[str]:
    columns: list[str] = []
    for row in rows:
        columns += [c for c in row if c not in columns]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(_cell(row.get(c, "")) for c in columns) + " |")
    return lines


def _cell(value: object) -> str:
    if isinstance(value, bool) or value is None:
        return {True: "met", False: "**missed**", None: "-"}[value]
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [
        f"Run: {report['mode']} on {report['date']} in {report['seconds']} s. "
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['python']}, {m['os']} "
        f"(load average {m['load_average_at_start']} at start).",
        "",
        "Guards (issue 36; printed with every run, never asserted in tests):",
        "",
        "```",
        *guard_lines(report["guards"]),
        "```",
        "",
        "| section | target | figure | met |",
        "|---|---|---|---|",
    ]
    for t in report["targets"]:
        lines.append(f"| {t['section']} | {t['target']} | {t['figure']} | {_cell(t['met'])} |")
    for name, rows in report["results"].items():
        lines += ["", f"**{CAPTIONS[name]}**", "", *_table(rows)]
    return "\n".join(lines) + "\n"


def update_docs(table: str) -> None:
    text = DOCS.read_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    DOCS.write_text(text[:start] + "\n\n" + table + "\n" + text[end:])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, short runs: a smoke run")
    parser.add_argument(
        "--only", action="append", choices=SECTIONS, help="run only this section (repeatable)"
    )
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="write the generated cassettes here and reuse them (default: a temporary directory)",
    )
    parser.add_argument(
        "--docs", action="store_true", help="copy the tables into docs/performance.md"
    )
    parser.add_argument(
        "--suite-size",
        type=int,
        action="append",
        metavar="N",
        help="the suite section's number of tests (repeatable; default: 300 and 1,000)",
    )
    parser.add_argument(
        "--strict-guards",
        action="store_true",
        help="exit with status 1 when a guard fails (they are printed either way)",
    )
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    if args.suite_size:
        plan = replace(plan, suite=replace(plan.suite, sizes=tuple(args.suite_size)))
    sections = tuple(args.only or SECTIONS)
    os.environ.setdefault("PYTHONHASHSEED", "0")
    with tempfile.TemporaryDirectory(prefix="reel-bench-") as scratch:
        work = args.keep or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        run = Run(plan, work, sections)
        info = machine()
        measure(run)
    report: dict[str, Any] = {
        "mode": "quick" if args.quick else "full",
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "seconds": round(time.perf_counter() - run.started, 1),
        "machine": info,
        "section_seconds": run.seconds,
        "guards": guards(run.results),
        "targets": targets(run.results),
        "results": run.results,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "latest.json").write_text(json.dumps(report, indent=2) + "\n")
    table = markdown(report)
    (RESULTS / "latest.md").write_text("# Reel benchmark results\n\n" + table)
    if args.docs:
        update_docs(table)
    print(table)
    for line in guard_lines(report["guards"]):
        _log(f"guard {line}")
    if args.strict_guards and any(g["passed"] is False for g in report["guards"]):
        sys.exit(1)


if __name__ == "__main__":
    main()
