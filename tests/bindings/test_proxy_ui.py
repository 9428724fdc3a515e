"""The proxy's ``--ui``: the viewer at ``/_reel/`` beside the recordings, on
asyncio and trio.  Requests for it are never forwarded nor recorded; without
``--ui`` they are a path like any other; other hosts and other machines are
refused unless ``--ui-public`` says otherwise."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from reel_bindings.proxy import parse_options
from reel_core import Mode
from tests.fakes.server import serve_fake

from .proxy_support import chat_call, fetch, interactions, options, proxied

pytestmark = pytest.mark.anyio


def rows_of(page: str) -> list[dict[str, Any]]:
    found = re.search(r'<script type="application/json" id="reel-data">(.*?)</script>', page)
    assert found is not None, page[:500]
    rows: list[dict[str, Any]] = json.loads(found.group(1))["rows"]
    return rows


async def version_of(client: httpx.AsyncClient) -> str:
    answer = await client.get("/_reel/version")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    value: str = answer.json()["version"]
    return value


async def test_the_viewer_shows_the_cassette_as_it_is_recorded(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    async with (
        serve_fake(frame_delay=0.0) as fake,
        proxied(options(Mode.AUTO, cassette, upstream=fake.url, ui=True)) as client,
    ):
        first = await fetch(client, chat_call("one", stream=True))
        assert first.status == 200
        page = await client.get("/_reel/")
        assert page.status_code == 200
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        assert page.headers["cache-control"] == "no-store"
        assert "connect-src 'self'" in page.text  # it may poll its version, nothing else
        assert [r["path"] for r in rows_of(page.text)] == ["/v1/chat/completions"]
        before = await version_of(client)
        assert await version_of(client) == before  # nothing changed
        await fetch(client, chat_call("two"))
        with anyio.fail_after(10):  # the line is appended once the client has its answer
            while len(interactions(cassette)) < 2:
                await anyio.sleep(0.01)
        assert await version_of(client) != before
        again = await client.get("/_reel")  # without the slash too
        assert len(rows_of(again.text)) == 2
        assert (await client.head("/_reel/")).status_code == 200
        # none of it went upstream, none of it is in the cassette
        assert [r.path for r in fake.requests] == ["/v1/chat/completions"] * 2
        assert all(not ix.request.path.startswith("/_reel") for ix in interactions(cassette))


async def test_other_hosts_and_paths_are_refused_not_forwarded(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    async with (
        serve_fake(frame_delay=0.0) as fake,
        proxied(options(Mode.RECORD, cassette, upstream=fake.url, ui=True)) as client,
    ):
        rebound = await client.get("/_reel/", headers={"host": "evil.example:7878"})
        assert rebound.status_code == 403
        assert rebound.json()["error"]["type"] == "reel_ui"
        assert "--ui-public" in rebound.json()["error"]["message"]
        unknown = await client.get("/_reel/settings")
        assert unknown.status_code == 404
        posted = await client.post("/_reel/", content=b"{}")
        assert posted.status_code == 405
        # the connection serves recordings on as before
        assert (await fetch(client, chat_call("after"))).status == 200
    assert fake.requests
    assert all(r.path == "/v1/chat/completions" for r in fake.requests)
    assert [ix.request.path for ix in interactions(cassette)] == ["/v1/chat/completions"]


async def test_ui_public_serves_any_host(tmp_path: Path) -> None:
    opts = options(Mode.REPLAY, tmp_path / "c.jsonl", ui=True, ui_public=True)
    (tmp_path / "c.jsonl").write_bytes(b"")
    async with proxied(opts) as client:
        answer = await client.get("/_reel/", headers={"host": "reel.internal:7878"})
        assert answer.status_code == 200
        assert rows_of(answer.text) == []


async def test_without_ui_a_reel_path_goes_upstream_and_is_recorded(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    async with (
        serve_fake(frame_delay=0.0) as fake,
        proxied(options(Mode.RECORD, cassette, upstream=fake.url)) as client,
    ):
        answer = await client.get("/_reel/version")
        assert answer.status_code == 404  # the fake's own answer: it has no such path
        assert "version" not in answer.json()
        with anyio.fail_after(10):
            while not interactions(cassette):
                await anyio.sleep(0.01)
    assert [r.path for r in fake.requests] == ["/_reel/version"]
    assert [ix.request.path for ix in interactions(cassette)] == ["/_reel/version"]


async def test_a_directory_of_cassettes_shows_each(tmp_path: Path) -> None:
    async with (
        serve_fake(frame_delay=0.0) as fake,
        proxied(
            options(Mode.AUTO, None, upstream=fake.url, ui=True, cassette_dir=tmp_path)
        ) as client,
    ):
        for name in ("a.jsonl", "sub/b.jsonl"):
            call = chat_call(name)
            headed = type(call)(call.path, call.body, {"x-reel-cassette": name})
            assert (await fetch(client, headed)).status == 200
        with anyio.fail_after(10):
            while not (tmp_path / "sub" / "b.jsonl").exists():
                await anyio.sleep(0.01)
        page = (await client.get("/_reel/")).text
    data = json.loads(
        re.search(r'id="reel-data">(.*?)</script>', page).group(1)  # type: ignore[union-attr]
    )
    assert [c["name"] for c in data["cassettes"]] == ["a.jsonl", "sub/b.jsonl"]
    assert len(data["rows"]) == 2


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.7", "proxy.internal"])
def test_ui_on_a_public_address_needs_ui_public(
    host: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_options(["--ui", "--host", host], environ={})
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"--ui on --host {host}" in err
    assert "--ui-public" in err
    # the same address through REEL_HOST
    with pytest.raises(SystemExit):
        parse_options(["--ui"], environ={"REEL_HOST": host})
    opts = parse_options(["--ui", "--ui-public", "--host", host], environ={})
    config = opts.config()
    assert config.ui is not None
    assert config.ui.public


def test_ui_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_options([], environ={}).config().ui is None  # off by default
    local = parse_options(["--ui", "--host", "localhost"], environ={}).config()
    assert local.ui is not None
    assert not local.ui.public
    assert parse_options(["--ui", "--host", "::1"], environ={}).ui
    with pytest.raises(SystemExit) as exited:
        parse_options(["--ui-public"], environ={})
    assert exited.value.code == 2
    assert "--ui-public goes with --ui" in capsys.readouterr().err
