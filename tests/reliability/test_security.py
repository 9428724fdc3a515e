"""Security: where the proxy listens, where it forwards, which files it
touches, that replay opens no connection, and that no secret is written.

(An unknown path without ``--upstream`` answered 421, and ``../`` and
absolute cassette names answered 400, are in ``tests/bindings``; here the
routing is checked against hostile hosts and targets, and cassette names
against symlinks.)
"""

from __future__ import annotations

import errno
import logging
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
import requests

from reel_bindings.httpcore import AsyncTransport, Transport
from reel_bindings.proxy import ProxyOptions, parse_options, running
from reel_bindings.requests import Adapter
from reel_core import MissError, Mode
from tests.bindings.proxy_support import (
    Call,
    anthropic_call,
    chat_call,
    fetch,
    gemini_call,
    options,
)
from tests.fakes.upstream import closed_port_url, serve_fake

from ._support import check_cassette, parse_responses, raw_exchange, record, wire_request

# -------------------------------------------------------------- socket guard


@dataclass
class Guard:
    """Every connect and name lookup in this process goes through here."""

    #: Loopback ports that may be connected to (the proxy under test).
    allowed: set[int] = field(default_factory=set)
    attempts: list[str] = field(default_factory=list)
    on: bool = False

    def permits(self, address: Any) -> bool:
        if not self.on:
            return True
        if (
            isinstance(address, tuple)
            and address[0] in ("127.0.0.1", "::1")
            and address[1] in self.allowed
        ):
            return True
        self.attempts.append(f"connect {address!r}")
        return False


@pytest.fixture
def guard(monkeypatch: pytest.MonkeyPatch) -> Guard:
    """A socket guard: with ``guard.on``, a connect anywhere but an allowed
    loopback port, and a lookup of any name but loopback, fail and are noted."""
    guard = Guard()
    connect = socket.socket.connect
    connect_ex = socket.socket.connect_ex
    getaddrinfo = socket.getaddrinfo

    def guarded_connect(self: socket.socket, address: Any) -> None:
        if not guard.permits(address):
            raise ConnectionRefusedError(errno.ECONNREFUSED, "blocked by the test's socket guard")
        connect(self, address)

    def guarded_connect_ex(self: socket.socket, address: Any) -> int:
        if not guard.permits(address):
            return errno.ECONNREFUSED
        return connect_ex(self, address)

    def guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if guard.on and name not in (None, "127.0.0.1", "::1", "localhost"):
            guard.attempts.append(f"lookup {name!r}")
            raise socket.gaierror(socket.EAI_NONAME, "blocked by the test's socket guard")
        return getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", guarded_connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", guarded_getaddrinfo)
    return guard


# ------------------------------------------------------------------ listening


@pytest.mark.anyio
async def test_listens_on_loopback_and_warns_when_bound_elsewhere(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="reel")
    assert ProxyOptions().host == "127.0.0.1"
    assert parse_options([], environ={}).host == "127.0.0.1"
    cassette = tmp_path / "c.jsonl"
    cassette.write_bytes(b"")

    def warnings_logged() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]

    for host in ("127.0.0.1", "127.0.0.2", "localhost"):  # all loopback: no warning
        async with running(ProxyOptions(cassette=cassette, port=0, host=host)) as url:
            assert url.startswith(f"http://{host}:")
        assert warnings_logged() == [], host
    # every interface: reachable from other machines, said loudly (and only
    # reached here through 127.0.0.1)
    async with running(ProxyOptions(cassette=cassette, port=0, host="0.0.0.0")) as url:
        port = int(url.rsplit(":", 1)[1])
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            assert (await fetch(client, chat_call("reachable"))).status == 404
    [warning] = warnings_logged()
    assert "listening on 0.0.0.0: other machines can reach this proxy" in warning
    assert "--host 127.0.0.1" in warning


# ------------------------------------------------------------------- routing


HOSTILE = "evil.example"
KEY = "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"


@pytest.mark.anyio
async def test_without_upstream_only_provider_hosts_are_destinations(
    tmp_path: Path, guard: Guard
) -> None:
    """The Host header, forwarding headers and an absolute-form target
    naming another host never choose the destination: the only names the
    proxy looks up are the providers' (the socket guard stops the lookup,
    so nothing leaves the machine)."""
    hostile = {
        "host": HOSTILE,
        "x-forwarded-host": HOSTILE,
        "forwarded": f"host={HOSTILE}",
        "connection": "close",
    }
    gemini = gemini_call("to gemini")
    cases = [
        (chat_call("to openai"), None, "api.openai.com"),
        (chat_call("absolute"), f"http://{HOSTILE}:8080/v1/chat/completions", "api.openai.com"),
        (anthropic_call("to anthropic"), None, "api.anthropic.com"),
        (gemini, f"https://{HOSTILE}{gemini.path}&key={KEY}", "generativelanguage.googleapis.com"),
        (Call("/api/chat", {"model": "llama3"}), f"http://{HOSTILE}/api/chat", None),
    ]
    async with running(options(Mode.AUTO, tmp_path / "c.jsonl")) as url:
        guard.allowed.add(int(url.rsplit(":", 1)[1]))
        guard.on = True
        for call, target, host in cases:
            hostile_call = Call(call.path, call.body, {**call.headers, **hostile})
            data = wire_request(hostile_call, target=target).replace(
                b"host: api.openai.com\r\n", b"", 1
            )
            before = len(guard.attempts)
            [answer] = parse_responses(await raw_exchange(url, data))
            if host is None:
                assert answer.status == 421
                assert guard.attempts[before:] == []  # nothing forwarded
            else:
                assert answer.status == 502  # the guard stopped it
                assert set(guard.attempts[before:]) == {f"lookup {host!r}"}
    assert not any(HOSTILE in attempt for attempt in guard.attempts)


@pytest.mark.anyio
async def test_with_an_upstream_it_is_the_only_destination(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    async with serve_fake() as upstream, serve_fake() as elsewhere:
        async with running(options(Mode.AUTO, cassette, upstream=upstream.url)) as url:
            call = chat_call("where does this go", headers={"connection": "close"})
            for target in (f"{elsewhere.url}/v1/chat/completions", call.path):
                data = wire_request(call, target=target).replace(
                    b"host: api.openai.com", f"host: {elsewhere.url[7:]}".encode()
                )
                [answer] = parse_responses(await raw_exchange(url, data))
                assert answer.status == 200
        # the same request twice: each occurrence is forwarded (and recorded)
        assert len(upstream.requests) == 2
        assert {r.target for r in upstream.requests} == {"/v1/chat/completions"}
        assert elsewhere.requests == []
        assert elsewhere.connections == 0


# ------------------------------------------------------------ cassette names


def dir_options(root: Path, upstream: str) -> ProxyOptions:
    return ProxyOptions(mode=Mode.AUTO, cassette_dir=root, upstream=upstream, port=0)


def tree(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() and not p.is_symlink() else None)
        for p in sorted(root.rglob("*"))
    }


@pytest.mark.anyio
async def test_cassette_names_cannot_leave_the_directory_through_symlinks(tmp_path: Path) -> None:
    """A name is resolved, symlinks included, and must stay inside the
    cassette directory: a symlinked subdirectory or file pointing outside
    is refused (400) and nothing outside is created or written.  Symlinks
    that stay inside, and a cassette directory that is itself a symlink,
    work."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "target.jsonl").write_bytes(b"not yours\n")
    real = tmp_path / "real"
    real.mkdir()
    root = tmp_path / "cassettes"
    root.symlink_to(real)  # the directory itself a symlink: fine
    (real / "out").symlink_to(outside)
    (real / "evil.jsonl").symlink_to(outside / "target.jsonl")
    (real / "loop.jsonl").symlink_to(real / "loop.jsonl")
    (real / "sub").mkdir()
    (real / "alias.jsonl").symlink_to(real / "sub" / "inside.jsonl")
    before = tree(outside)
    refused = ["out/x", "out/target", "evil", "evil.jsonl", "loop"]
    odd_names = ["..\\x", "%2e%2e/x", "C:/x", "~root/x", "a/./b", "x/", "x" * 201]
    async with serve_fake() as fake:
        async with (
            running(dir_options(root, fake.url)) as url,
            httpx.AsyncClient(base_url=url, timeout=10) as client,
        ):
            for name in refused + odd_names:
                call = chat_call(f"escape via {name!r}", headers={"x-reel-cassette": name})
                got = await fetch(client, call)
                assert got.status == 400, name
                assert got.json()["error"]["type"] == "reel_bad_cassette"
            for name in ("alias", "sub/direct"):
                got = await fetch(
                    client, chat_call(f"stay in {name}", headers={"x-reel-cassette": name})
                )
                assert got.status == 200
            # a symlink swapped in after a cassette was used is caught at the next request
            inside = chat_call("first", headers={"x-reel-cassette": "swap"})
            assert (await fetch(client, inside)).status == 200
            # the next answer on the connection comes once that line is written
            # (asked again, sub/direct's request is recorded again, there)
            again = chat_call("stay in sub/direct", headers={"x-reel-cassette": "sub/direct"})
            assert (await fetch(client, again)).status == 200
            (real / "swap.jsonl").rename(tmp_path / "swap-saved.jsonl")
            (real / "swap.jsonl").symlink_to(outside / "target.jsonl")
            swapped = await fetch(client, chat_call("second", headers={"x-reel-cassette": "swap"}))
            assert swapped.status == 400
        assert len(fake.requests) == 4  # only the ones that stayed inside
    assert tree(outside) == before
    assert len(check_cassette(real / "sub" / "inside.jsonl")) == 1
    assert len(check_cassette(real / "sub" / "direct.jsonl")) == 2
    assert len(check_cassette(tmp_path / "swap-saved.jsonl")) == 1


HIT = chat_call("replayed without a network")
STREAM = chat_call("a replayed stream without a network", stream=True)
CUT = chat_call("a cut stream " + "word " * 10, stream=True, headers={"x-fake-scenario": "cut"})
LIMITED = chat_call("rate limited", headers={"x-fake-scenario": "429"})


@pytest.mark.anyio
async def test_the_proxy_replays_with_no_outbound_connection(tmp_path: Path, guard: Guard) -> None:
    cassette = tmp_path / "c.jsonl"
    # HIT twice: it is asked twice below, and each recording is served once in auto mode
    await record(cassette, [HIT, STREAM, CUT, LIMITED, HIT])
    guard.on = True
    # an upstream is named (a loopback port the guard does not allow): never used
    for mode in (Mode.REPLAY, Mode.AUTO):
        opts = options(mode, cassette, upstream=closed_port_url(), timing="fast")
        async with running(opts) as url:
            guard.allowed.add(int(url.rsplit(":", 1)[1]))
            async with httpx.AsyncClient(base_url=url, timeout=10) as client:
                got = [await fetch(client, call) for call in (HIT, STREAM, CUT, LIMITED)]
                assert [g.status for g in got] == [200, 200, 200, 429]
                assert got[2].error is not None  # the cut, replayed
                if mode is Mode.REPLAY:
                    assert (await client.head("/v1/chat/completions")).status_code == 404
                    assert (await fetch(client, chat_call("a miss"))).status == 404
                    unknown = Call("/api/chat?key=x", {"model": "llama3"})
                    assert (await fetch(client, unknown)).status == 404
            absolute = wire_request(HIT, target="https://api.openai.com/v1/chat/completions")
            [answer] = parse_responses(
                await raw_exchange(
                    url, absolute.replace(b"\r\n\r\n", b"\r\nconnection: close\r\n\r\n", 1)
                )
            )
            assert answer.status == 200
    assert guard.attempts == []
    # the guard is no paper tiger: an auto-mode miss does try to connect
    async with running(options(Mode.AUTO, cassette, upstream=closed_port_url())) as url:
        guard.allowed.add(int(url.rsplit(":", 1)[1]))
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            assert (await fetch(client, chat_call("a miss, forwarded"))).status == 502
    assert guard.attempts
    assert all(a.startswith("connect ('127.0.0.1'") for a in guard.attempts)


def test_in_process_bindings_replay_with_no_outbound_connection(
    tmp_path: Path, guard: Guard
) -> None:
    cassette = tmp_path / "c.jsonl"
    anyio.run(record, cassette, [HIT, STREAM, LIMITED])
    base = "https://api.openai.com"
    guard.on = True
    for family in (httpx, httpx2):
        with family.Client(transport=Transport(cassette, mode="replay"), base_url=base) as client:
            for call in (HIT, STREAM, LIMITED):
                client.post(call.path, content=call.content).read()
            assert client.post(HIT.path, content=b'{"other":1}').status_code == 404
        with family.Client(transport=Transport(cassette, mode="auto"), base_url=base) as client:
            assert client.post(HIT.path, content=HIT.content).status_code == 200

    async def async_calls() -> None:
        transport = AsyncTransport(cassette, mode="replay", timing="fast")
        async with httpx.AsyncClient(transport=transport, base_url=base) as client:
            for call in (HIT, STREAM, LIMITED):
                await client.post(call.path, content=call.content)

    anyio.run(async_calls, backend="asyncio")
    anyio.run(async_calls, backend="trio")
    session = requests.Session()
    session.mount("https://", Adapter(cassette, mode="replay", timing="fast"))
    for call in (HIT, STREAM, LIMITED):
        session.post(base + call.path, data=call.content)
    assert session.post(base + HIT.path, data=b"{}").status_code == 404
    assert guard.attempts == []
    # and a miss in auto mode does reach for the network (which the guard stops)
    with (
        httpx.Client(transport=Transport(cassette, mode="auto"), base_url=base) as client,
        pytest.raises(httpx.ConnectError),
    ):
        client.post(HIT.path, content=b'{"never": "recorded"}')
    assert guard.attempts == ["lookup 'api.openai.com'"]


# ---------------------------------------------------------------- secret scan

SECRETS = {
    "openai": "sk-proj-Q7vXk2LmN9pR4sT6uW8yZ0aB3cD5eF7gH9jK1mN3pQ5rS7tU9v"
    "W1xY3zA5bC7dE9_fG1hJ3kL5mN7p",
    "anthropic": "sk-ant-api03-Xy9Zw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0EdCbA9zY8xW7vU6tS5r"
    "Q4pO3nM2lK1jI0hG-AbCdEfAA",
    "google": "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
    "github": "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "aws": "AKIAIOSFODNN7EXAMPL3",
    "slack": "xoxb-2048-1024-Zx8Cv7Bn6Mq5Wr4Et3Yu2I",
    "jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "email": "jane.doe+llm@example-corp.com",
    "opaque": "opaque-value-nobody-could-guess-7731",
}


def leaks(text: str) -> list[str]:
    """Which secrets (or the last 12 characters of one) occur in ``text``."""
    return [k for k, v in SECRETS.items() if v in text or v[-12:] in text]


def secret_prompt(tag: str) -> str:
    s = SECRETS
    return (
        f"[{tag}] My OpenAI key is {s['openai']}, the AWS one {s['aws']}; post to Slack with "
        f"{s['slack']} as {s['email']}; GitHub: {s['github']}; session {s['jwt']}"
    )


def secret_calls(tag: str) -> list[Call]:
    auth = {"authorization": f"Bearer {SECRETS['openai']}"}
    openai = chat_call(secret_prompt(tag), stream=True, headers=auth)
    body = dict(openai.body or {})
    body["user"] = SECRETS["email"]
    body["metadata"] = {"api_key": SECRETS["opaque"]}
    anthropic = anthropic_call(secret_prompt(tag))
    gemini = gemini_call(secret_prompt(tag))
    return [
        Call(openai.path, body, auth),
        Call(
            anthropic.path, anthropic.body, {**anthropic.headers, "x-api-key": SECRETS["anthropic"]}
        ),
        Call(
            gemini.path + f"&key={SECRETS['google']}",
            gemini.body,
            {"x-goog-api-key": SECRETS["google"]},
        ),
        Call(chat_call(tag).path, chat_call(tag).body, {**auth, "x-fake-scenario": "401"}),
    ]


@pytest.mark.anyio
async def test_no_secret_is_ever_written(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Record then replay a session whose requests carry keys in headers,
    queries and bodies, plus e-mails and tokens the upstream echoes back;
    provoke misses, refusals, upstream failures and malformed requests.
    Then scan everything Reel wrote: cassettes, its log (debug level),
    every answer it made itself, and exception messages."""
    caplog.set_level(logging.DEBUG, logger="reel")
    cassette = tmp_path / "c.jsonl"
    written: list[str] = []  # everything Reel produced, to scan

    async with serve_fake() as fake:
        opts = options(Mode.AUTO, cassette, upstream=fake.url, timing="fast")
        async with (
            running(opts) as url,
            httpx.AsyncClient(base_url=url, timeout=10) as client,
        ):
            for call in secret_calls("recorded"):
                await fetch(client, call)  # live: the upstream's own bytes, not Reel's
        async with (
            running(opts) as url,
            httpx.AsyncClient(base_url=url, timeout=10) as client,
        ):
            for call in secret_calls("recorded"):
                hit = await fetch(client, call)  # replayed from what was recorded
                written.append(hit.body.decode())
        assert len(fake.requests) == 4
        # what went upstream was not altered: the secrets were there
        assert SECRETS["anthropic"] in dict(fake.requests[1].headers)["x-api-key"]

    async with (
        running(options(Mode.REPLAY, cassette, timing="fast")) as url,
        httpx.AsyncClient(base_url=url, timeout=10) as client,
    ):
        for call in secret_calls("recorded"):
            written.append((await fetch(client, call)).body.decode())
        for call in secret_calls("never recorded"):  # misses: the report quotes the request
            miss = await fetch(client, call)
            assert miss.status == 404
            written.append(miss.body.decode())
        bad = [
            f"POST /v1/chat/completions?key={SECRETS['google']} HTTP/1.1 junk\r\n\r\n",
            f"POST /v1/x HTTP/1.1\r\nHost: a\r\nAuthorization Bearer {SECRETS['openai']}\r\n\r\n",
            f"POST /v1/x HTTP/1.1\r\nHost: a\r\nx api key: {SECRETS['opaque']}\r\n\r\n",
            f"POST x?key={SECRETS['google']} HTTP/1.1\r\nHost: a\r\n\r\n",
            "POST /v1/x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
            f"{SECRETS['github']}\r\n",
        ]
        for data in bad:
            answer = await raw_exchange(url, data.encode("latin-1"))
            assert answer.startswith(b"HTTP/1.1 400 "), answer
            written.append(answer.decode("latin-1"))

    # a proxy with no upstream refuses an unknown path; one whose upstream is
    # gone answers 502: both messages quote the request target
    for upstream in (None, closed_port_url()):
        opts = options(Mode.AUTO, tmp_path / "other.jsonl", upstream=upstream)
        async with (
            running(opts) as url,
            httpx.AsyncClient(base_url=url, timeout=10) as client,
        ):
            for call in (
                Call(f"/api/chat?token={SECRETS['github']}&key={SECRETS['google']}", {"x": 1}),
                Call(f"/v1/chat/completions?key={SECRETS['google']}", {"x": 1}),
            ):
                refused = await fetch(client, call)
                assert refused.status in (421, 502)
                written.append(refused.body.decode())

    # in-process bindings: the miss report as an exception, and as a body
    transport = Transport(cassette, mode="replay", strict=True, timing="fast")
    with httpx.Client(transport=transport, base_url="https://api.openai.com") as client:
        for call in secret_calls("in-process miss")[:1]:
            with pytest.raises(MissError) as info:
                client.post(call.path, content=call.content, headers=dict(call.headers))
            written.append(str(info.value))
            written.append(info.value.report.to_bytes().decode())
    session = requests.Session()
    session.mount("https://", Adapter(cassette, mode="replay", timing="fast"))
    for call in secret_calls("requests miss"):
        written.append(session.post("https://x" + call.path, data=call.content).text)

    written.append(cassette.read_text(encoding="utf-8"))
    written += [r.getMessage() for r in caplog.records]
    check_cassette(cassette)
    assert len(caplog.records) > 20  # the log was there to scan, at debug level
    everything = "\n".join(written)
    assert "[REDACTED:" in everything
    assert leaks(everything) == []
