"""Many writers into one Redis cassette, a reader meanwhile, and a
redis-server killed mid-recording (a real server: tests/redis_server.py).

The figures of the concurrency test are printed (``-s``) and quoted in
docs/reliability.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from reel_core import Cassette
from tests.fakes.upstream import FakeUpstreamThread
from tests.redis_server import RedisServer

from ._support import proxy_process

redis = pytest.importorskip("redis", reason="pip install redis (in the test extra)")

from reel_bindings._redis import RedisStore  # noqa: E402

NAME = "shared/chat.jsonl"
PROCESSES = 4
THREADS = 8
PER_THREAD = 4

WRITER = textwrap.dedent(
    """
    import json, sys, threading
    import httpx

    process, proxies, threads, per_thread = (
        int(sys.argv[1]), sys.argv[2].split(","), int(sys.argv[3]), int(sys.argv[4]))
    failures = []

    def run(t):
        clients = [httpx.Client(base_url=url, timeout=60) for url in proxies]
        for n in range(per_thread):
            body = {"model": "gpt-4o-mini", "messages": [
                {"role": "user", "content": f"process {process} thread {t} request {n}"}]}
            got = clients[(t + n) % len(clients)].post("/v1/chat/completions", json=body)
            if got.status_code != 200 or b"chatcmpl-" not in got.content:
                failures.append(got.text[:200])
        for client in clients:
            client.close()

    workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    print(json.dumps(failures))
    """
)

READER = textwrap.dedent(
    """
    import json, os, sys
    from reel_bindings._redis import RedisStore
    from reel_core import Cassette

    url, name, stop = sys.argv[1], sys.argv[2], sys.argv[3]
    store = RedisStore(url)
    reads, most, bad = 0, 0, []
    while not os.path.exists(stop):
        data = store.read(name)
        if data is None:
            continue
        reads += 1
        if not data.endswith(b"\\n"):
            bad.append("torn tail")
        try:
            cassette = Cassette.loads(data, name=name, strict=True)
            cassette.validate()
        except Exception as exc:
            bad.append(repr(exc)[:200])
        most = max(most, len(cassette))
    print(json.dumps({"reads": reads, "most": most, "bad": bad[:5]}))
    """
)


@pytest.mark.slow
def test_processes_threads_and_two_proxies_append_to_one_redis_cassette(
    redis_url: str, tmp_path: Path
) -> None:
    """4 processes x 8 threads, each request to one of 2 proxies in auto
    mode, all recording into one Redis cassette while another process
    reads it over and over: every line valid, none lost, none twice."""
    stop = tmp_path / "stop"
    with FakeUpstreamThread(frame_delay=0.0) as fake:
        args = ["--mode", "auto", "--store", redis_url, "--cassette", NAME, "-q"]
        args += ["--upstream", fake.url, "--timing", "fast"]
        with proxy_process(args) as one, proxy_process(args) as two:
            reader = subprocess.Popen(
                [sys.executable, "-c", READER, redis_url, NAME, str(stop)],
                stdout=subprocess.PIPE,
                text=True,
            )
            writers = [
                subprocess.Popen(
                    [
                        *(sys.executable, "-c", WRITER, str(p), f"{one.url},{two.url}"),
                        *(str(THREADS), str(PER_THREAD)),
                    ],
                    stdout=subprocess.PIPE,
                    text=True,
                )
                for p in range(PROCESSES)
            ]
            failures = [json.loads(w.communicate(timeout=120)[0]) for w in writers]
            stop.touch()
            read = json.loads(reader.communicate(timeout=60)[0])
        forwarded = len(fake.requests)
    assert failures == [[]] * PROCESSES
    total = PROCESSES * THREADS * PER_THREAD
    data = RedisStore(redis_url).read(NAME)
    assert data is not None
    lines = data.splitlines()
    assert b'"_meta"' in lines[0]
    assert sum(b'"_meta"' in line[:10] for line in lines) == 1
    assert len(set(lines)) == len(lines), "a line was written twice"
    recorded = list(Cassette.loads(data, name=NAME, strict=True))
    prompts = {json.loads(i.request.body)["messages"][0]["content"] for i in recorded}
    assert prompts == {
        f"process {p} thread {t} request {n}"
        for p in range(PROCESSES)
        for t in range(THREADS)
        for n in range(PER_THREAD)
    }
    assert forwarded == total == len(recorded)
    assert read["bad"] == []
    assert read["reads"] > 0
    print(
        f"redis appends: {PROCESSES} processes x {THREADS} threads x 2 proxies, "
        f"{len(recorded)} lines of {total}, {read['reads']} whole reads meanwhile "
        f"(the largest {read['most']} interactions), 0 bad"
    )


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_killing_redis_mid_recording(redis_server: RedisServer, backend: str) -> None:
    """Replay keeps serving what it loaded; a request to record is answered
    502 saying why (and not forwarded); every line acknowledged before the
    kill is there; the proxy records again once the server is back."""
    redis_server.flush()
    url = redis_server.url

    def chat(client: httpx.Client, text: str) -> httpx.Response:
        body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]}
        return client.post("/v1/chat/completions", json=body)

    with FakeUpstreamThread(frame_delay=0.0) as fake:
        common = ["--backend", backend, "--store", url, "--cassette", NAME, "--timing", "fast"]
        auto = ["--mode", "auto", "--upstream", fake.url, *common]
        with (
            proxy_process(auto) as recorder,
            httpx.Client(base_url=recorder.url, timeout=30) as client,
        ):
            before = [chat(client, f"before {n}") for n in range(5)]
            assert all(r.status_code == 200 for r in before)
            # each line is appended once its client has the answer: wait for the 5th
            for _ in range(2000):
                if (kept := RedisStore(url).read(NAME) or b"").count(b"\n") >= 6:
                    break
                time.sleep(0.005)
            with proxy_process(["--mode", "replay", *common]) as player:
                redis_server.kill()
                with httpx.Client(base_url=player.url, timeout=30) as replay:
                    again = [chat(replay, f"before {n}") for n in range(5)]
                assert [r.content for r in again] == [r.content for r in before]
                sent = len(fake.requests)
                lost = chat(client, "while redis is down")
                assert lost.status_code == 502
                assert "Reel did not forward" in lost.text
                assert url in lost.text
                assert len(fake.requests) == sent  # not forwarded
                redis_server.start()
                back = chat(client, "after")
                assert back.status_code == 200
                for _ in range(2000):  # appended once the client has its answer
                    if b"after" in (RedisStore(url).read(NAME) or b""):
                        break
                    time.sleep(0.005)
        assert "NOT forwarded (answered 502)" in recorder.stderr
    assert kept.count(b"\n") == 6  # the _meta line and 5 acknowledged lines
    after = RedisStore(url).read(NAME)
    assert after is not None
    assert b"after" in after
