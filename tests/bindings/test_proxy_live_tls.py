"""Gemini Live through the proxy's TLS listener, google-genai as client.

``client.aio.live.connect()`` turns any base URL into ``wss://``: the proxy
listens behind TLS (``--tls``, a certificate generated on first use) and the
SDK trusts it through ``SSL_CERT_FILE``; nothing is patched.  The SDK's live
client is asyncio's (``websockets``): on trio it runs on an asyncio loop of
its own in a worker thread, against the proxy on trio.

google-genai dials ``/ws/google.ai.generativelanguage.v1.GenerativeService.
BidiGenerateContent`` (API version ``v1`` unless told otherwise); a fake that
knew only ``v1beta`` answered it in OpenAI's shape, and the SDK waited
forever for its ``turnComplete``.  Each session here is bounded by
:data:`LIMIT`: a hang fails with a clear error instead of stalling the run.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from google import genai
from google.genai import errors as genai_errors

from reel_bindings.proxy import _websocket as ws_binding
from reel_bindings.proxy import main, running
from reel_bindings.proxy._tls import TLSSetupError, local_certificate
from reel_core import Mode
from tests.fakes.realtime import reply_pieces, serve_realtime
from tests.secrets import SDK_GEMINI_KEY

from .proxy_support import interactions, options
from .timing import assert_not_early, spy_sleeps

pytestmark = pytest.mark.anyio

MODEL = "gemini-live-2.5-flash"
USER = "Greet Tromso briefly"
#: The longest one Live session may take, in seconds (a hang is a failure).
LIMIT = 30.0

Messages = list[dict[str, Any]]


class _Session:
    """What one Live session saw: the messages (as the SDK parsed them), when
    each arrived and when the user's turn was sent (``time.monotonic()``,
    the asyncio loop's clock), and the error that ended it, if one did."""

    def __init__(self) -> None:
        self.messages: Messages = []
        self.arrivals: list[float] = []
        self.sent = 0.0
        self.error: genai_errors.APIError | None = None


async def _live(url: str, text: str) -> _Session:
    client = genai.Client(api_key=SDK_GEMINI_KEY, http_options={"base_url": url})
    seen = _Session()
    config: Any = {"response_modalities": ["TEXT"]}
    try:
        async with client.aio.live.connect(model=MODEL, config=config) as session:
            seen.sent = time.monotonic()
            await session.send_client_content(
                turns={"role": "user", "parts": [{"text": text}]}, turn_complete=True
            )
            async for message in session.receive():  # ends at turnComplete
                seen.arrivals.append(time.monotonic())
                seen.messages.append(message.model_dump(mode="json", exclude_none=True))
    except genai_errors.APIError as exc:
        seen.error = exc
    return seen


async def live(url: str, text: str = USER) -> _Session:
    """One Live turn through the SDK, on asyncio's loop (the test's, or on
    trio a loop of its own in a worker thread)."""
    import sniffio

    async def bounded() -> _Session:
        return await asyncio.wait_for(_live(url, text), LIMIT)

    if sniffio.current_async_library() == "trio":
        return await anyio.to_thread.run_sync(lambda: asyncio.run(bounded()))
    return await bounded()


def _text(messages: Messages) -> str:
    return "".join(
        part.get("text", "")
        for m in messages
        for part in m.get("server_content", {}).get("model_turn", {}).get("parts", [])
    )


@pytest.fixture
def tls_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The proxy's certificate directory, its CA trusted by the SDK
    through ``SSL_CERT_FILE`` (what a user does)."""
    directory = tmp_path / "tls"
    files = local_certificate(directory)  # what the proxy generates on first use
    assert files.ca is not None
    monkeypatch.setenv("SSL_CERT_FILE", str(files.ca))
    return directory


async def _record(cassette: Path, tls_dir: Path) -> _Session:
    with serve_realtime() as upstream:
        opts = options(Mode.RECORD, cassette, upstream=upstream.url, tls=True, tls_dir=tls_dir)
        async with running(opts) as url:
            assert url.startswith("https://")
            recorded = await live(url)
        (path, headers), *more = upstream.upgrades
        assert more == []
        assert path.startswith("/ws/google.ai.generativelanguage.")
        assert path.split("?")[0].endswith(".GenerativeService.BidiGenerateContent")
        assert headers["x-goog-api-key"] == SDK_GEMINI_KEY  # the upstream got the key
        assert upstream.received[0]["setup"]["model"] == f"models/{MODEL}"
    assert recorded.error is None
    return recorded


async def test_genai_live_record_then_replay_through_the_tls_listener(
    tmp_path: Path, tls_dir: Path
) -> None:
    cassette = tmp_path / "live.jsonl"
    recorded = await _record(cassette, tls_dir)
    assert _text(recorded.messages) == "".join(reply_pieces(USER))
    assert recorded.messages[-1]["server_content"]["turn_complete"] is True
    assert recorded.messages[-1]["usage_metadata"]["total_token_count"] > 0
    # the upstream is gone: the cassette answers, the same messages
    async with running(options(Mode.REPLAY, cassette, tls=True, tls_dir=tls_dir)) as url:
        replayed = await live(url)
    assert replayed.error is None
    assert replayed.messages == recorded.messages
    (session,) = interactions(cassette)
    assert session.websocket is not None
    assert [m.sender for m in session.websocket.messages][:3] == ["client", "server", "client"]
    assert session.websocket.messages[1].data == b'{"setupComplete": {}}'
    assert SDK_GEMINI_KEY not in cassette.read_text()


async def test_genai_live_changed_text_is_a_loud_close(
    tmp_path: Path, tls_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A changed user text gets the close 4004 with its reason, as the
    SDK's ``APIError``: never the recorded answer to the other text."""
    cassette = tmp_path / "live.jsonl"
    await _record(cassette, tls_dir)
    caplog.set_level(logging.WARNING, "reel.proxy")
    async with running(options(Mode.REPLAY, cassette, tls=True, tls_dir=tls_dir)) as url:
        changed = await live(url, "Greet Bergen instead")
    assert changed.error is not None
    assert changed.error.code == 4004
    assert "client message 1" in str(changed.error)  # the clientContent (0 is the setup)
    assert _text(changed.messages) == ""
    assert "You said" not in str(changed.error)
    assert "client message 1" in caplog.text
    assert "Bergen" in caplog.text  # the miss report's field diff


@pytest.mark.parametrize(("timing", "factor"), [("realtime", 1.0), ("slow=2", 2.0), ("fast", 0.0)])
async def test_genai_live_replay_keeps_the_recorded_schedule(
    tmp_path: Path, tls_dir: Path, monkeypatch: pytest.MonkeyPatch, timing: str, factor: float
) -> None:
    """The model's parts come on their recorded schedule after the user's
    turn (times N for slow=N; none for fast), and never early."""
    cassette = tmp_path / "live.jsonl"
    await _record(cassette, tls_dir)
    (session,) = interactions(cassette)
    assert session.websocket is not None
    messages = session.websocket.messages
    last = max(i for i, m in enumerate(messages) if m.sender == "client")
    anchor = messages[last].at_ms / 1000
    tail: list[float] = []  # the distinct offsets after the turn (see test_proxy_realtime)
    for m in messages[last + 1 :]:
        if not tail or m.at_ms / 1000 > tail[-1]:
            tail.append(m.at_ms / 1000)
    # Each part came a gap after the one before; on a loaded machine two can
    # still arrive in one read and share a time: gaps enough to check remain.
    assert len(tail) >= len(reply_pieces(USER)) // 2
    spy = spy_sleeps(monkeypatch, ws_binding, "sleep_until")
    async with running(
        options(Mode.REPLAY, cassette, tls=True, tls_dir=tls_dir, timing=timing)
    ) as url:
        replayed = await live(url)
    assert replayed.error is None
    assert _text(replayed.messages) == "".join(reply_pieces(USER))
    if factor == 0.0:
        assert spy.deadlines == []
        return
    got = spy.deadlines[-len(tail) :]
    assert [d - got[0] for d in got] == pytest.approx(
        [(t - tail[0]) * factor for t in tail], abs=1e-6
    )
    # the wall clock: the SDK hands out messages one per model part (the
    # turnComplete one too), each no sooner than its offset from the turn
    offsets = [(m.at_ms / 1000 - anchor) * factor for m in messages[last + 1 :]]
    assert_not_early([a - replayed.sent for a in replayed.arrivals], offsets)


def test_the_generated_certificate_is_made_once(tmp_path: Path) -> None:
    first = local_certificate(tmp_path)
    second = local_certificate(tmp_path)
    assert first == second
    assert first.ca is not None
    context = ssl.create_default_context(cafile=str(first.ca))
    assert context.cert_store_stats()["x509_ca"] == 1


def test_tls_without_trustme_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "trustme", None)
    with pytest.raises(TLSSetupError, match=r"pip install 'reel-llm\[tls\]'"):
        local_certificate(tmp_path / "none-yet")


def test_cert_without_key_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cert = tmp_path / "cert.pem"
    cert.write_text("x")
    with pytest.raises(SystemExit) as exited:
        main(["--cert", str(cert)])
    assert exited.value.code == 2
    assert "--cert and --key go together" in capsys.readouterr().err
