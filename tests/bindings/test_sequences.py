"""Identical requests are served once each, in recorded order, on every binding.

An SDK retrying after a 429 sends the very same request again: in auto mode the
retry must reach the upstream (and be recorded after the 429), and a replay of
that cassette must give the 429 and then the 200, so the SDK call succeeds the
way it did while recording.  Past the recorded count, replay repeats the last
recording (the cassette's ``_meta`` ``"repeat"`` setting, on by default).
"""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest

from reel_bindings.proxy import ProxyOptions, running
from reel_bindings.sdk import openai_client
from reel_core import Mode, Timing
from tests.fakes.upstream import FakeUpstreamThread
from tests.fakes.wire import Reply

from .test_agreement import BINDINGS, Row, chat

GONE = "http://127.0.0.1:9"  # nothing listens: a replay that reached out would fail
ROW = Row("same", "/v1/chat/completions", chat("the same question"))
JSON = (("content-type", "application/json"),)


def rate_limited() -> Reply:
    body = b'{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit"}}'
    return Reply(429, (*JSON, ("retry-after-ms", "10")), (body,))


def answer(text: str) -> Reply:
    return Reply(200, JSON, (json.dumps({"answer": text}).encode(),))


def statuses(cassette: Path) -> list[int]:
    lines = cassette.read_bytes().splitlines()[1:]
    return [json.loads(line)["response"]["status"] for line in lines]


@pytest.mark.parametrize("binding", list(BINDINGS))
def test_a_retry_after_429_is_recorded_and_replayed_in_order(binding: str, tmp_path: Path) -> None:
    cassette = tmp_path / "retry.jsonl"
    with FakeUpstreamThread() as fake:
        fake.push_reply(rate_limited())
        with BINDINGS[binding](cassette, Mode.AUTO, fake.url) as send:
            live = [send(ROW), send(ROW)]
        assert len(fake.requests) == 2, "the retry did not reach the upstream"
    assert [r.status for r in live] == [429, 200]
    assert statuses(cassette) == [429, 200]
    with BINDINGS[binding](cassette, Mode.REPLAY, GONE) as send:
        replayed = [send(ROW), send(ROW), send(ROW)]
    assert replayed[:2] == live
    assert replayed[2] == live[1]  # past the recorded count the last one repeats


@pytest.mark.parametrize("binding", list(BINDINGS))
def test_three_answers_to_one_request_are_kept_and_served_once_each(
    binding: str, tmp_path: Path
) -> None:
    cassette = tmp_path / "abc.jsonl"
    with FakeUpstreamThread() as fake:
        for text in "ABC":
            fake.push_reply(answer(text))
        with BINDINGS[binding](cassette, Mode.AUTO, fake.url) as send:
            live = [json.loads(send(ROW).body)["answer"] for _ in range(3)]
        assert live == ["A", "B", "C"]
        # a later auto run replays A, B, C, then records a fourth answer
        fake.push_reply(answer("D"))
        with BINDINGS[binding](cassette, Mode.AUTO, fake.url) as send:
            again = [json.loads(send(ROW).body)["answer"] for _ in range(4)]
        assert again == ["A", "B", "C", "D"]
        assert len(fake.requests) == 4
    with BINDINGS[binding](cassette, Mode.REPLAY, GONE) as send:
        assert [json.loads(send(ROW).body)["answer"] for _ in range(4)] == ["A", "B", "C", "D"]


@pytest.mark.parametrize("binding", list(BINDINGS))
def test_a_cassette_may_say_that_replay_never_repeats(binding: str, tmp_path: Path) -> None:
    cassette = tmp_path / "once.jsonl"
    with FakeUpstreamThread() as fake, BINDINGS[binding](cassette, Mode.AUTO, fake.url) as send:
        assert send(ROW).status == 200
    lines = cassette.read_bytes().splitlines()
    meta = json.loads(lines[0])
    meta["_meta"]["repeat"] = False
    cassette.write_bytes(b"\n".join([json.dumps(meta).encode(), *lines[1:], b""]))
    with BINDINGS[binding](cassette, Mode.REPLAY, GONE) as send:
        assert send(ROW).status == 200
        miss = send(ROW)
    assert miss.status == 404
    error = json.loads(miss.body)["error"]
    assert error["repeat_past_count"] == {"recorded": 1, "this_request": 2}
    assert "past the recorded count" in error["reason"]


# -- the official SDK, retrying for real ---------------------------------------------


def _ask(client: openai.OpenAI) -> str:
    reply = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "retry me"}]
    )
    return reply.choices[0].message.content or ""


def test_the_openai_sdk_retry_succeeds_recording_and_replaying_in_process(
    tmp_path: Path,
) -> None:
    cassette = tmp_path / "sdk-retry.jsonl"
    with FakeUpstreamThread() as fake:
        fake.push_reply(rate_limited())
        with openai_client(
            cassette,
            mode="auto",
            timing="fast",
            base_url=fake.url + "/v1",
            api_key="sk-test-1",
            max_retries=2,
        ) as client:
            live = _ask(client)
        assert len(fake.requests) == 2
    assert statuses(cassette) == [429, 200]
    with openai_client(
        cassette, mode="replay", timing="fast", base_url=GONE + "/v1", max_retries=2
    ) as client:
        assert _ask(client) == live
    with (
        openai_client(
            cassette, mode="replay", timing="fast", base_url=GONE + "/v1", max_retries=0
        ) as client,
        pytest.raises(openai.RateLimitError),
    ):
        _ask(client)  # without the retry the recorded 429 is what the SDK gets


@pytest.mark.anyio
async def test_the_openai_sdk_retry_succeeds_through_the_proxy(tmp_path: Path) -> None:
    cassette = tmp_path / "proxy-retry.jsonl"

    async def ask(mode: Mode, upstream: str) -> str:
        options = ProxyOptions(
            mode=mode, cassette=cassette, upstream=upstream, port=0, timing=Timing.parse("fast")
        )
        async with running(options) as url:
            client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-test-1", max_retries=2)
            async with client:
                reply = await client.chat.completions.create(
                    model="gpt-4o-mini", messages=[{"role": "user", "content": "retry me"}]
                )
                return reply.choices[0].message.content or ""

    with FakeUpstreamThread() as fake:
        fake.push_reply(rate_limited())
        live = await ask(Mode.AUTO, fake.url)
        assert len(fake.requests) == 2
    assert statuses(cassette) == [429, 200]
    assert await ask(Mode.REPLAY, GONE) == live


def _aged(cassette: Path, max_age: str) -> None:
    """Every line stamped in 2020, and ``max_age`` in the ``_meta`` line."""
    meta, *lines = cassette.read_bytes().splitlines()
    head = json.loads(meta)
    head["_meta"]["max_age"] = max_age
    out = [json.dumps(head).encode()]
    for raw in lines:
        obj = json.loads(raw)
        obj["ts"] = "2020-01-01T00:00:00.000Z"
        out.append(json.dumps(obj).encode())
    cassette.write_bytes(b"\n".join(out) + b"\n")


@pytest.mark.parametrize("binding", list(BINDINGS))
def test_a_stale_429_then_200_pair_is_re_recorded_as_a_new_generation(
    binding: str, tmp_path: Path
) -> None:
    """Past the cassette's max_age, auto mode forwards the retried request
    both times (never the old 200 after the new 429), appends the pair as
    generation 1, and a replay serves the new pair in order."""
    cassette = tmp_path / "retry.jsonl"
    with FakeUpstreamThread() as fake:
        fake.push_reply(rate_limited())
        fake.push_reply(answer("old"))
        with BINDINGS[binding](cassette, Mode.AUTO, fake.url) as send:
            [send(ROW), send(ROW)]
        _aged(cassette, "7d")
        fake.push_reply(rate_limited())
        fake.push_reply(answer("new"))
        with BINDINGS[binding](cassette, Mode.AUTO, fake.url) as send:
            again = [send(ROW), send(ROW)]
        assert len(fake.requests) == 4
    assert [r.status for r in again] == [429, 200]
    assert json.loads(again[1].body) == {"answer": "new"}
    lines = [json.loads(line) for line in cassette.read_bytes().splitlines()[1:]]
    assert [(line["response"]["status"], line.get("gen", 0)) for line in lines] == [
        (429, 0),
        (200, 0),
        (429, 1),
        (200, 1),
    ]
    with BINDINGS[binding](cassette, Mode.REPLAY, GONE) as send:
        replayed = [send(ROW), send(ROW)]
    assert [r.status for r in replayed] == [429, 200]
    assert json.loads(replayed[1].body) == {"answer": "new"}
