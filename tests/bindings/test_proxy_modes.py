"""Modes, misses, isolation from the network, concurrency and the log line."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import anyio
import httpx
import pytest

from reel_bindings.proxy import Proxy, ProxyOptions, running
from reel_core import Mode, Verdict
from tests.fakes.upstream import SCENARIO_HEADER, Reply, closed_port_url, reply_text, serve_fake
from tests.secrets import AZURE_KEY, forms

from .proxy_support import (
    Call,
    Exchange,
    chat_call,
    fetch,
    interactions,
    options,
    proxied,
)

pytestmark = pytest.mark.anyio


# ------------------------------------------------------------------ misses


async def test_miss_is_404_naming_the_closest_recording(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    async with (
        serve_fake() as fake,
        proxied(options(Mode.RECORD, cassette, upstream=fake.url)) as client,
    ):
        await fetch(client, chat_call("What is the capital of Norway?"))
        await fetch(client, chat_call("Something else entirely", model="gpt-4.1"))
    recorded = interactions(cassette)[0]
    async with proxied(options(Mode.REPLAY, cassette)) as client:
        miss = await fetch(client, chat_call("What is the capital of Sweden?"))
    assert miss.status == 404
    assert miss.headers["content-type"] == "application/json"
    error = miss.json()["error"]
    assert error["type"] == "reel_miss"
    assert error["mode"] == "replay"
    assert error["cassette"] == str(cassette)
    assert error["key"].startswith("sha256:")
    assert error["closest"]["id"] == recorded.id
    [diff] = error["closest"]["diff"]
    assert diff["path"] == "messages[0].content"
    assert diff["recorded"] == "What is the capital of Norway?"
    assert diff["received"] == "What is the capital of Sweden?"
    assert recorded.id in error["message"]
    assert "messages[0].content" in error["message"]
    assert "--mode auto" in error["rerecord"]


async def test_replay_never_touches_the_network(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    hit = chat_call("Recorded once", stream=True)
    async with serve_fake() as fake:
        async with proxied(options(Mode.RECORD, cassette, upstream=fake.url)) as client:
            first = await fetch(client, hit)
        connections, requests = fake.connections, len(fake.requests)
        assert connections >= 1
        # the upstream is still there, and named: replay must not use it
        async with proxied(options(Mode.REPLAY, cassette, upstream=fake.url)) as client:
            again = await fetch(client, hit)
            miss = await fetch(client, chat_call("Never recorded"))
        assert fake.connections == connections
        assert len(fake.requests) == requests
    assert again.body == first.body
    assert miss.status == 404
    # and with the upstream gone it all still works
    async with proxied(options(Mode.REPLAY, cassette, upstream=fake.url)) as client:
        gone = await fetch(client, hit)
    assert gone.status == 200
    assert gone.body == first.body


# ------------------------------------------------------------------- modes


async def test_record_starts_the_cassette_afresh(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    async with serve_fake() as fake:
        async with proxied(options(Mode.RECORD, cassette, upstream=fake.url)) as client:
            await fetch(client, chat_call("old"))
        assert [i.request.body for i in interactions(cassette)] == [chat_call("old").content]
        async with proxied(options(Mode.RECORD, cassette, upstream=fake.url)) as client:
            new = await fetch(client, chat_call("new"))
            # a request recorded before is forwarded again (refresh), not replayed
            await fetch(client, chat_call("new"))
        assert len(fake.requests) == 3
    assert new.status == 200
    bodies = [i.request.body for i in interactions(cassette)]
    assert bodies == [chat_call("new").content] * 2
    assert cassette.read_bytes().count(b'{"_meta"') == 1


async def test_auto_replays_hits_and_records_misses(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    call = chat_call("Auto, please", stream=True)
    async with serve_fake() as fake:
        async with proxied(options(Mode.AUTO, cassette, upstream=fake.url)) as client:
            first = await fetch(client, call)
            assert len(fake.requests) == 1
            other = await fetch(client, chat_call("A new one"))
            assert len(fake.requests) == 2  # a miss: forwarded and recorded
            # asked again in the same run: one more occurrence, recorded too
            second = await fetch(client, call)
            assert len(fake.requests) == 3
        assert first.body == second.body  # the fake answers alike
        assert other.status == 200
        assert len(interactions(cassette)) == 3
        # a new proxy on the same cassette replays all three, in order
        async with proxied(options(Mode.AUTO, cassette, upstream=fake.url)) as client:
            third = await fetch(client, call)
            fourth = await fetch(client, chat_call("A new one"))
            fifth = await fetch(client, call)
        assert len(fake.requests) == 3  # hits: not forwarded
    assert third.body == fifth.body == first.body
    assert fourth.body == other.body
    assert len(interactions(cassette)) == 3


async def test_live_forwards_and_writes_nothing(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    async with serve_fake() as fake:
        async with proxied(options(Mode.LIVE, cassette, upstream=fake.url)) as client:
            one = await fetch(client, chat_call("live one", stream=True))
            two = await fetch(client, chat_call("live one", stream=True))
        assert len(fake.requests) == 2
    assert one.status == two.status == 200
    assert reply_text("live one").split()[-1].encode() in one.body
    assert not cassette.exists()
    # an existing cassette is left alone too
    cassette.write_bytes(b"")
    async with serve_fake() as fake:
        async with proxied(options(Mode.LIVE, cassette, upstream=fake.url)) as client:
            await fetch(client, chat_call("live two"))
        assert len(fake.requests) == 1
    assert cassette.read_bytes() == b""


def _scripted(text: str) -> Reply:
    body = b'{"answer": "' + text.encode() + b'"}\n'
    return Reply(200, (("content-type", "application/json"),), (body,))


async def test_identical_requests_replay_in_recorded_order_then_repeat(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    call = chat_call("Same question")
    async with serve_fake() as fake:
        for text in ("first", "second", "third"):
            fake.push_reply(_scripted(text))
        async with proxied(options(Mode.RECORD, cassette, upstream=fake.url)) as client:
            recorded = [(await fetch(client, call)).json()["answer"] for _ in range(3)]
    assert recorded == ["first", "second", "third"]
    assert len({i.id for i in interactions(cassette)}) == 3
    async with proxied(options(Mode.REPLAY, cassette)) as client:
        replayed = [(await fetch(client, call)).json()["answer"] for _ in range(5)]
    assert replayed == ["first", "second", "third", "third", "third"]


# ------------------------------------------------------------- concurrency


async def test_fifty_concurrent_streams_each_get_their_own(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    calls = [chat_call(f"Prompt number {n} of fifty", stream=True) for n in range(50)]
    recorded: dict[int, Exchange] = {}
    replayed: dict[int, Exchange] = {}

    async with serve_fake() as fake:
        async with proxied(options(Mode.AUTO, cassette, upstream=fake.url)) as client:

            async def record(n: int) -> None:
                recorded[n] = await fetch(client, calls[n])

            async with anyio.create_task_group() as tg:
                for n in range(50):
                    tg.start_soon(record, n)
        assert len(fake.requests) == 50
    assert len(interactions(cassette)) == 50

    async with proxied(options(Mode.REPLAY, cassette)) as client:

        async def replay(n: int) -> None:
            replayed[n] = await fetch(client, calls[n])

        async with anyio.create_task_group() as tg:
            for n in range(50):
                tg.start_soon(replay, n)

    for n in range(50):
        rec, rep = recorded[n], replayed[n]
        assert rec.error is None
        assert rep.error is None
        assert rep.status == 200
        assert rep.body == rec.body
        assert rep.events == rec.events
        assert chat_text(rep) == reply_text(f"Prompt number {n} of fifty")


def chat_text(exchange: Exchange) -> str:
    """The text a chat completion stream carries."""
    text = ""
    for event in exchange.events:
        data = event.removeprefix(b"data: ").strip()
        if data and data != b"[DONE]":
            for choice in json.loads(data)["choices"]:
                text += choice["delta"].get("content") or ""
    return text


# --------------------------------------------------------------------- logs


async def test_one_log_line_per_request(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="reel.proxy")
    cassette = tmp_path / "c.jsonl"
    async with (
        serve_fake() as fake,
        proxied(options(Mode.RECORD, cassette, upstream=fake.url)) as client,
    ):
        await fetch(client, chat_call("log me", stream=True))
    key = interactions(cassette)[0].key[7:19]

    def lines() -> list[str]:
        return [
            r.getMessage()
            for r in caplog.records
            if r.name == "reel.proxy" and "/v1/chat/completions" in r.getMessage()
        ]

    [recorded] = lines()
    assert recorded.startswith("record ")
    assert "recorded" in recorded
    assert f"key={key}" in recorded
    assert " 200 " in recorded
    assert recorded.endswith("ms")
    caplog.clear()
    async with proxied(options(Mode.REPLAY, cassette)) as client:
        await fetch(client, chat_call("log me", stream=True))
        await fetch(client, chat_call("not me"))
    hit, miss = lines()
    assert hit.startswith("replay ")
    assert " hit " in hit
    assert f"key={key}" in hit
    assert " 200 " in hit
    assert miss.startswith("replay ")
    assert " miss " in miss
    assert " 404 " in miss
    assert "key=" in miss
    assert "key=-" not in miss
    for line in (recorded, hit, miss):
        duration = line.rsplit(" ", 1)[1]
        assert float(duration.removesuffix("ms")) >= 0


async def test_log_lines_never_show_a_credential(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The target, the upstream failure and the miss report the proxy logs
    are scrubbed of the credential values the request carried."""
    caplog.set_level(logging.DEBUG, logger="reel.proxy")
    cassette = tmp_path / "c.jsonl"
    headers = {"api-key": AZURE_KEY, SCENARIO_HEADER: "echo-key"}
    call = chat_call(f"mine is {AZURE_KEY}", headers=headers)
    call = dataclasses.replace(call, path=call.path + f"?trace={AZURE_KEY}")
    async with (
        serve_fake() as fake,
        proxied(options(Mode.RECORD, cassette, upstream=fake.url)) as client,
    ):
        echoed = await fetch(client, call)
    assert AZURE_KEY.encode() in echoed.body  # the client gets what the upstream said
    async with proxied(options(Mode.RECORD, cassette, upstream=closed_port_url())) as client:
        failed = await fetch(client, call)
    async with proxied(options(Mode.REPLAY, cassette)) as client:
        miss = await fetch(client, dataclasses.replace(call, body={"model": "other"}))
    assert (failed.status, miss.status) == (502, 404)
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name == "reel.proxy")
    assert "upstream failed for" in logged
    assert "[REDACTED:credential]" in logged
    assert not [form for form in forms(AZURE_KEY) if form.decode() in logged]
    assert not [form for form in forms(AZURE_KEY) if form in cassette.read_bytes()]


@pytest.mark.parametrize("report", [False, True], ids=["serving", "per-test"])
async def test_only_a_reporting_proxy_keeps_what_each_request_got(
    tmp_path: Path, report: bool
) -> None:
    """A proxy that serves for days keeps no list that grows by a line a
    request (its log says what each got); the pytest plugin's proxy, alive
    for one test, keeps them for the test's verdict and the run report."""
    cassette = tmp_path / "kept.jsonl"
    recorded = chat_call("recorded once")
    async with serve_fake() as fake, proxied(options(Mode.AUTO, cassette, upstream=fake.url)) as c:
        assert (await fetch(c, recorded)).status == 200
    # a recording older than a millisecond is stale: served and noted
    opts = options(Mode.REPLAY, cassette, max_age=0.001)
    await anyio.sleep(0.01)
    proxy = Proxy(opts.config(), cassette=cassette, report=report)
    async with (
        running(opts, proxy=proxy) as url,
        httpx.AsyncClient(base_url=url, timeout=30, trust_env=False) as client,
    ):
        for _ in range(20):
            assert (await fetch(client, recorded)).status == 200
        assert (await fetch(client, chat_call("never recorded"))).status == 404
    runlog = proxy.runlog
    # both count what each request got (the counts are bounded whatever the traffic)
    assert runlog.counts[Verdict.HIT] == 20
    assert runlog.counts[Verdict.MISS] == 1
    assert (runlog.misses.total, runlog.stale.total) == (1, 20)
    if report:
        assert len(runlog.last) == 21
        assert [s.verdict for s in runlog.last].count(Verdict.MISS) == 1
        assert len(runlog.misses) == 1
        assert len(runlog.stale) == 20
    else:
        assert list(runlog.last) == []
        assert list(runlog.misses) == []
        assert list(runlog.stale) == []


async def test_the_run_log_and_the_log_line_say_the_core_s_verdict(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """What each request got is the core's word (``Engine.verdict``,
    ``Engine.label``), counted in the run log as the exchange ends and
    said by its log line: a recording, a cut stream, a hit, a miss, an
    upstream that refused the connection (nothing recorded: ``failed``)."""
    caplog.set_level(logging.INFO, logger="reel.proxy")
    cassette = tmp_path / "c.jsonl"
    cut = chat_call("cut me", stream=True, headers={SCENARIO_HEADER: "cut"})

    async def serve(opts: ProxyOptions, calls: list[tuple[Call, int]]) -> Proxy:
        assert opts.cassette is not None
        proxy = Proxy(opts.config(), cassette=opts.cassette, report=True)
        async with (
            running(opts, proxy=proxy) as url,
            httpx.AsyncClient(base_url=url, timeout=30, trust_env=False) as client,
        ):
            for call, status in calls:
                assert (await fetch(client, call)).status == status
        return proxy

    async with serve_fake() as fake:
        auto = await serve(
            options(Mode.AUTO, cassette, upstream=fake.url), [(chat_call("one"), 200), (cut, 200)]
        )
    replay = await serve(
        options(Mode.REPLAY, cassette), [(chat_call("one"), 200), (chat_call("two"), 404)]
    )
    failing = await serve(
        options(Mode.RECORD, tmp_path / "f.jsonl", upstream=closed_port_url()),
        [(chat_call("one"), 502)],
    )
    assert [s.verdict for s in auto.runlog.last] == [Verdict.RECORDED, Verdict.RECORDED]
    assert [s.verdict for s in replay.runlog.last] == [Verdict.HIT, Verdict.MISS]
    assert [(s.method, s.path, s.verdict) for s in failing.runlog.last] == [
        ("POST", "/v1/chat/completions", Verdict.FAILED)
    ]
    counted = [{v: n for v, n in p.runlog.counts.items() if n} for p in (auto, replay, failing)]
    assert counted == [
        {Verdict.RECORDED: 2},
        {Verdict.HIT: 1, Verdict.MISS: 1},
        {Verdict.FAILED: 1},
    ]
    assert len(interactions(cassette)) == 2
    assert not interactions(tmp_path / "f.jsonl")  # a failure before the head records nothing
    labels = [
        r.getMessage().split(" POST ")[0]
        for r in caplog.records
        if r.name == "reel.proxy" and " key=" in r.getMessage()
    ]
    assert labels == [
        "auto recorded",
        "auto recorded (cut: closed)",
        "replay hit     ",
        "replay miss    ",
        "record upstream refused",
    ]
