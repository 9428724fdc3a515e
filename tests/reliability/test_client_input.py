"""Bad and unusual client input to the proxy, over real sockets.

Slow and partial requests, pipelining, bytes that are not UTF-8, bodies that
are not JSON, HTTP/1.0, absolute-form targets and size limits.  After each,
the proxy goes on serving other clients.  (Malformed request lines, CONNECT,
an oversized head at the default limit and an idle half head are in
``tests/bindings/test_proxy_faults.py``.)
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx
import pytest

from reel_bindings.proxy import parse_options, running
from reel_core import Limits, Mode
from tests.bindings.proxy_support import chat_call, fetch, interactions, options
from tests.fakes.upstream import serve_fake

from ._support import (
    check_cassette,
    connect,
    head_bytes,
    parse_responses,
    raw_exchange,
    read_until_closed,
    record,
    wire_request,
)

pytestmark = pytest.mark.anyio

HIT = chat_call("a recorded question")
STREAM = chat_call("a recorded stream of words", stream=True)


@pytest.fixture
async def cassette(tmp_path: Path, anyio_backend: str) -> Path:
    """A cassette holding ``HIT`` (a plain body) and ``STREAM``."""
    path = tmp_path / "c.jsonl"
    await record(path, [HIT, STREAM])
    return path


def content_of(path: Path, prompt: str) -> bytes:
    """The recorded response body of the request whose prompt is ``prompt``."""
    for interaction in interactions(path):
        if prompt.encode() in interaction.request.body:
            return interaction.response.content
    raise AssertionError(f"no recording of {prompt!r}")


async def still_serving(url: str, cassette: Path) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        got = await fetch(client, HIT)
    assert got.status == 200
    assert got.body == content_of(cassette, "a recorded question")


# ------------------------------------------------------------ slow clients


async def test_slow_and_partial_requests_are_cut_off_and_others_served(cassette: Path) -> None:
    """Half a head, a head and half a body, and a request trickled in a byte
    at a time (each gap shorter than the timeout: slowloris) are all answered
    408 and closed about ``client_timeout`` after their first byte; 50 of them
    stalled at once do not keep a normal client waiting."""
    timeout = 2.0  # long enough that a loaded machine serves the normal client first
    whole = wire_request(HIT)
    stalls = {
        "half a head": b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Ty",
        "half a body": whole[:-10],
    }
    closed_after: dict[str, float] = {}
    answers: dict[str, bytes] = {}
    async with running(options(Mode.REPLAY, cassette, client_timeout=timeout)) as url:

        async def stall(name: str, data: bytes) -> None:
            async with await connect(url) as stream:
                start = anyio.current_time()
                await stream.send(data)
                answers[name] = await read_until_closed(stream)
                closed_after[name] = anyio.current_time() - start

        async def trickle() -> None:
            async with await connect(url) as stream, anyio.create_task_group() as tg:
                start = anyio.current_time()

                async def send_slowly() -> None:
                    for byte in whole:  # ~60 s for the whole request
                        try:
                            await stream.send(bytes([byte]))
                        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                            return
                        await anyio.sleep(timeout / 5)

                tg.start_soon(send_slowly)
                answers["trickle"] = await read_until_closed(stream)
                closed_after["trickle"] = anyio.current_time() - start
                tg.cancel_scope.cancel()

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for name, data in stalls.items():
                    tg.start_soon(stall, name, data)
                for n in range(50):
                    tg.start_soon(stall, f"half a head #{n}", stalls["half a head"])
                tg.start_soon(trickle)
                await anyio.sleep(0.1)
                await still_serving(url, cassette)
                # not queued behind them: served while every one still hangs
                assert closed_after == {}
        await still_serving(url, cassette)
    assert len(closed_after) == 53
    for name, elapsed in closed_after.items():
        # answered 408 and closed: never served
        assert answers[name].startswith(b"HTTP/1.1 408 Request Timeout\r\n"), name
        assert b"--client-timeout" in answers[name]
        # not before its timeout (the fail_after above bounds how late)
        assert elapsed >= timeout * 0.8, (name, elapsed)


# -------------------------------------------------------------- pipelining


@pytest.mark.parametrize("mode", [Mode.REPLAY, Mode.AUTO])
async def test_pipelined_requests_are_answered_in_order(cassette: Path, mode: Mode) -> None:
    """Four requests in one write: a hit stream, a miss (forwarded and
    recorded in auto, a 404 report in replay), a plain hit, and a last one
    asking to close.  Each is answered, in order, on the one connection."""
    fresh = chat_call("never recorded before", stream=True)
    last = dataclasses.replace(HIT, headers={"connection": "close"})
    data = wire_request(STREAM) + wire_request(fresh) + wire_request(HIT) + wire_request(last)
    async with serve_fake() as fake:
        async with running(options(mode, cassette, upstream=fake.url)) as url:
            answer = await raw_exchange(url, data)
            await still_serving(url, cassette)
        forwarded = [r.json()["messages"][0]["content"] for r in fake.requests]
    responses = parse_responses(answer)
    assert [r.status for r in responses] == [200, 200 if mode is Mode.AUTO else 404, 200, 200]
    assert responses[0].body == content_of(cassette, "a recorded stream of words")
    assert responses[2].body == content_of(cassette, "a recorded question")
    assert responses[3].headers["connection"] == "close"
    if mode is Mode.AUTO:
        # the fourth (and still_serving's) ask again what the third was
        # served: past the recorded count auto mode forwards and records
        assert forwarded == ["never recorded before", *["a recorded question"] * 2]
        assert responses[1].body == content_of(cassette, "never recorded before")
        assert len(check_cassette(cassette)) == 5
    else:
        assert forwarded == []
        assert responses[1].json()["error"]["type"] == "reel_miss"


# ----------------------------------------------------------- odd bytes in


async def test_bytes_that_are_not_utf8_in_the_target_and_headers(cassette: Path) -> None:
    async with running(options(Mode.REPLAY, cassette)) as url:
        # raw bytes above 0x7e are no valid request target: 400, then close
        answer = await raw_exchange(url, wire_request(HIT, target="/v1/chat/\xff\xfe"))
        [bad] = parse_responses(answer)
        assert bad.status == 400
        assert bad.headers["connection"] == "close"
        assert bad.json()["error"]["type"] == "reel_bad_request"
        await still_serving(url, cassette)
        # ... nor in a header name
        broken = wire_request(HIT).replace(b"host:", b"ho\xffst:", 1)
        [bad] = parse_responses(await raw_exchange(url, broken))
        assert bad.status == 400
        await still_serving(url, cassette)
        # obs-text in a header value is allowed: headers never matter for matching
        odd = dataclasses.replace(HIT, headers={"x-odd": "caf\xe9 \xff\xfe", "connection": "close"})
        [ok] = parse_responses(await raw_exchange(url, wire_request(odd)))
        assert ok.status == 200
        assert ok.body == content_of(cassette, "a recorded question")


async def test_percent_encoded_bytes_that_are_not_utf8_record_and_replay(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    target = "/v1/chat/completions?tag=%ff%fe%00&x=%E2%82"
    call = dataclasses.replace(HIT, headers={"connection": "close"})
    async with serve_fake() as fake:
        async with running(options(Mode.AUTO, cassette, upstream=fake.url)) as url:
            [recorded] = parse_responses(await raw_exchange(url, wire_request(call, target=target)))
        # forwarded exactly as sent
        assert [r.target for r in fake.requests] == [target]
    assert recorded.status == 200
    check_cassette(cassette)
    async with running(options(Mode.REPLAY, cassette)) as url:
        [replayed] = parse_responses(await raw_exchange(url, wire_request(call, target=target)))
    assert replayed.status == 200
    assert replayed.body == recorded.body


@pytest.mark.parametrize(
    "body",
    [
        b'{"model": "gpt-4o-mini", "messages": [',  # cut short
        b'{"model": "gpt-4o-mini"}{"again": 1}',  # two documents
        b'{"model": NaN, "n": 1e999}',
        b"\xff\xfe\x00 binary \x80\x81",  # not UTF-8 at all
        b"plain text, no JSON",
        b"",
    ],
    ids=["truncated", "two-documents", "nan", "binary", "text", "empty"],
)
async def test_bodies_that_are_not_json_are_forwarded_and_matched_as_bytes(
    tmp_path: Path, body: bytes
) -> None:
    cassette = tmp_path / "c.jsonl"
    path = "/v1/chat/completions"
    headers = {"content-type": "application/json"}
    async with serve_fake() as fake:
        async with (
            running(options(Mode.AUTO, cassette, upstream=fake.url)) as url,
            httpx.AsyncClient(base_url=url, timeout=10) as client,
        ):
            first = await client.post(path, content=body, headers=headers)
        async with (
            running(options(Mode.AUTO, cassette, upstream=fake.url)) as url,
            httpx.AsyncClient(base_url=url, timeout=10) as client,
        ):
            again = await client.post(path, content=body, headers=headers)  # a hit now
        assert [r.body for r in fake.requests] == [body]  # forwarded byte for byte, once
    [interaction] = check_cassette(cassette)
    assert interaction.request.body == body
    assert again.status_code == first.status_code
    assert again.content == first.content
    async with (
        running(options(Mode.REPLAY, cassette)) as url,
        httpx.AsyncClient(base_url=url, timeout=10) as client,
    ):
        replayed = await client.post(path, content=body, headers=headers)
        await still_serving_any(client)
    assert replayed.status_code == first.status_code
    assert replayed.content == first.content


async def still_serving_any(client: httpx.AsyncClient) -> None:
    """The proxy answers a well-formed request (a hit or a miss report)."""
    got = await client.post("/v1/chat/completions", json={"model": "gpt-4o-mini"})
    assert got.status_code in (200, 404)


# ------------------------------------------------------ HTTP versions, forms


async def test_http_1_0_is_answered_and_the_connection_closed(cassette: Path) -> None:
    """An HTTP/1.0 client gets its answer (a stream: delimited by the close)
    and the proxy closes the connection, keep-alive asked or not."""
    keep = dataclasses.replace(HIT, headers={"connection": "keep-alive"})
    async with running(options(Mode.REPLAY, cassette)) as url:
        for call, prompt in ((HIT, HIT), (STREAM, STREAM), (keep, HIT)):
            # raw_exchange returns only once the proxy closed the connection
            answer = await raw_exchange(url, wire_request(call, version=b"HTTP/1.0"))
            [response] = parse_responses(answer)
            assert response.status == 200
            text = json.loads(prompt.content)["messages"][0]["content"]
            assert response.body == content_of(cassette, text)
            if call is STREAM:
                assert "content-length" not in response.headers
                assert "transfer-encoding" not in response.headers
        miss = chat_call("not recorded")
        [response] = parse_responses(
            await raw_exchange(url, wire_request(miss, version=b"HTTP/1.0"))
        )
        assert response.status == 404
        assert response.json()["error"]["type"] == "reel_miss"
        await still_serving(url, cassette)


@pytest.mark.parametrize(
    "target",
    [
        "http://api.openai.com/v1/chat/completions",
        "https://api.openai.com:443/v1/chat/completions",
        "http://127.0.0.1:1/v1/chat/completions",
        "HTTP://SOMEWHERE.EXAMPLE/v1/chat/completions",
    ],
)
async def test_absolute_form_targets_are_taken_as_their_path(cassette: Path, target: str) -> None:
    """What a client configured to use an HTTP proxy sends (the host part is
    never a destination: see test_security)."""
    call = dataclasses.replace(HIT, headers={"connection": "close"})
    async with running(options(Mode.REPLAY, cassette)) as url:
        [response] = parse_responses(await raw_exchange(url, wire_request(call, target=target)))
        await still_serving(url, cassette)
    assert response.status == 200
    assert response.body == content_of(cassette, "a recorded question")


# ------------------------------------------------------------------ limits


async def test_bodies_over_the_configured_limit_are_413(cassette: Path) -> None:
    limit = 2048
    at_limit = b'{"p":"' + b"x" * (limit - 8) + b'"}'
    assert len(at_limit) == limit
    path = "/v1/chat/completions"
    async with (
        running(options(Mode.REPLAY, cassette, max_body=limit)) as url,
        httpx.AsyncClient(base_url=url, timeout=10) as client,
    ):
        fits = await client.post(path, content=at_limit)
        assert fits.status_code == 404  # read whole and matched: a miss
        for size in (limit + 1, 5 * 1024 * 1024):
            # content-length over the limit: refused before the body is read;
            # the client still reads the 413, not a reset
            big = b'{"p":"' + b"x" * (size - 8) + b'"}'
            refused = await client.post(path, content=big)
            assert refused.status_code == 413, size
            error = refused.json()["error"]
            assert error["type"] == "reel_bad_request"
            assert f"{limit}-byte limit" in error["message"]
            assert "raise the limit with the proxy's --max-body BYTES" in error["message"]
            await still_serving(url, cassette)

        # chunked, so the size shows only while reading
        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(4):
                yield b"y" * 1000

        refused = await client.post(path, content=chunks())
        assert refused.status_code == 413
        assert refused.headers["connection"] == "close"
        await still_serving(url, cassette)


async def test_heads_over_the_configured_limit_are_431(cassette: Path) -> None:
    limit = 1024
    async with running(options(Mode.REPLAY, cassette, max_head=limit)) as url:
        fits = dataclasses.replace(HIT, headers={"x-pad": "p" * 600, "connection": "close"})
        [ok] = parse_responses(await raw_exchange(url, wire_request(fits)))
        assert ok.status == 200
        big = dataclasses.replace(HIT, headers={"x-pad": "p" * 1100})
        [refused] = parse_responses(await raw_exchange(url, wire_request(big)))
        assert refused.status == 431
        assert f"{limit}-byte limit" in refused.json()["error"]["message"]
        # the same head dribbled in small pieces
        data = wire_request(big)
        with anyio.fail_after(10):
            async with await connect(url) as stream:
                for start in range(0, len(data), 100):
                    try:
                        await stream.send(data[start : start + 100])
                    except (anyio.BrokenResourceError, OSError):
                        break
                answer = await read_until_closed(stream)
        assert answer.startswith(b"HTTP/1.1 431 ")
        await still_serving(url, cassette)


def test_limit_flags_reach_the_core() -> None:
    default = parse_options([], environ={})
    assert default.config().limits == Limits()
    opts = parse_options(["--max-body", "1000", "--max-head", "4096"], environ={})
    assert opts.config().limits == Limits(max_head=4096, max_body=1000)
    for flag in ("--max-body", "--max-head"):
        with pytest.raises(SystemExit) as exit_info:
            parse_options([flag, "0"], environ={})
        assert exit_info.value.code == 2


async def test_a_head_without_a_body_waits_for_nothing(cassette: Path) -> None:
    """A GET (no body, no content-length) is complete at its blank line."""
    async with running(options(Mode.REPLAY, cassette)) as url:
        data = head_bytes("GET", "/v1/models", [("host", "x"), ("connection", "close")])
        [response] = parse_responses(await raw_exchange(url, data))
    assert response.status == 404
