"""Ready SDK clients wired to a cassette, one helper per SDK family::

    from reel_bindings.sdk import openai_client

    client = openai_client("tests/cassettes/chat.jsonl")  # replay unless REEL_MODE says otherwise
    client.chat.completions.create(model="gpt-4o-mini", messages=[...])

Each helper builds the SDK's own client on an ``httpx2`` client whose
transport is Reel's (:mod:`reel_bindings.httpcore`), so nothing is patched.
In replay mode no API key is needed: a placeholder is passed when the SDK's
key variable is unset.  Extra keyword arguments go to the SDK client.  The
SDKs are not dependencies of Reel: a missing one raises an ImportError
saying what to install.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

from reel_core import MatchConfig, Mode, Timing

from ._files import CassetteFile
from ._inprocess import mode_from_env
from .httpcore import AsyncTransport, Transport

__all__ = [
    "anthropic_client",
    "async_anthropic_client",
    "async_openai_client",
    "genai_client",
    "openai_client",
]

#: The placeholder key passed in replay mode when no real key is set.
REPLAY_KEY = "reel-replay-no-key"

CassetteLike = str | os.PathLike[str] | CassetteFile


def _import(name: str, package: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        raise ImportError(
            f"this helper needs the {package} package: pip install {package}"
        ) from None


def _key(variable: str, mode: Mode, given: str | None) -> str | None:
    if given is not None:
        return given
    if os.environ.get(variable):
        return None  # the SDK reads it itself
    return REPLAY_KEY if mode is Mode.REPLAY else None


def _transport_kwargs(
    mode: Mode | str | None, match: MatchConfig | None, timing: Timing | str, strict: bool
) -> dict[str, Any]:
    return {"mode": mode_from_env(mode), "match": match, "timing": timing, "strict": strict}


def _file(cassette: CassetteLike, mode: Mode) -> CassetteFile:
    return (
        cassette if isinstance(cassette, CassetteFile) else CassetteFile(Path(cassette), mode=mode)
    )


def openai_client(
    cassette: CassetteLike,
    *,
    mode: Mode | str | None = None,
    match: MatchConfig | None = None,
    timing: Timing | str = "realtime",
    strict: bool = False,
    api_key: str | None = None,
    **kwargs: Any,
) -> Any:
    """An ``openai.OpenAI`` client recording to / replaying from ``cassette``."""
    openai = _import("openai", "openai")
    httpx2 = _import("httpx2", "httpx2")
    options = _transport_kwargs(mode, match, timing, strict)
    transport = Transport(_file(cassette, options["mode"]), **options)
    key = _key("OPENAI_API_KEY", options["mode"], api_key)
    return openai.OpenAI(api_key=key, http_client=httpx2.Client(transport=transport), **kwargs)


def async_openai_client(
    cassette: CassetteLike,
    *,
    mode: Mode | str | None = None,
    match: MatchConfig | None = None,
    timing: Timing | str = "realtime",
    strict: bool = False,
    api_key: str | None = None,
    **kwargs: Any,
) -> Any:
    """An ``openai.AsyncOpenAI`` client (asyncio or trio) on ``cassette``."""
    openai = _import("openai", "openai")
    httpx2 = _import("httpx2", "httpx2")
    options = _transport_kwargs(mode, match, timing, strict)
    transport = AsyncTransport(_file(cassette, options["mode"]), **options)
    key = _key("OPENAI_API_KEY", options["mode"], api_key)
    return openai.AsyncOpenAI(
        api_key=key, http_client=httpx2.AsyncClient(transport=transport), **kwargs
    )


def anthropic_client(
    cassette: CassetteLike,
    *,
    mode: Mode | str | None = None,
    match: MatchConfig | None = None,
    timing: Timing | str = "realtime",
    strict: bool = False,
    api_key: str | None = None,
    **kwargs: Any,
) -> Any:
    """An ``anthropic.Anthropic`` client on ``cassette``."""
    anthropic = _import("anthropic", "anthropic")
    httpx2 = _import("httpx2", "httpx2")
    options = _transport_kwargs(mode, match, timing, strict)
    transport = Transport(_file(cassette, options["mode"]), **options)
    key = _key("ANTHROPIC_API_KEY", options["mode"], api_key)
    return anthropic.Anthropic(
        api_key=key, http_client=httpx2.Client(transport=transport), **kwargs
    )


def async_anthropic_client(
    cassette: CassetteLike,
    *,
    mode: Mode | str | None = None,
    match: MatchConfig | None = None,
    timing: Timing | str = "realtime",
    strict: bool = False,
    api_key: str | None = None,
    **kwargs: Any,
) -> Any:
    """An ``anthropic.AsyncAnthropic`` client (asyncio or trio) on ``cassette``."""
    anthropic = _import("anthropic", "anthropic")
    httpx2 = _import("httpx2", "httpx2")
    options = _transport_kwargs(mode, match, timing, strict)
    transport = AsyncTransport(_file(cassette, options["mode"]), **options)
    key = _key("ANTHROPIC_API_KEY", options["mode"], api_key)
    return anthropic.AsyncAnthropic(
        api_key=key, http_client=httpx2.AsyncClient(transport=transport), **kwargs
    )


def genai_client(
    cassette: CassetteLike,
    *,
    mode: Mode | str | None = None,
    match: MatchConfig | None = None,
    timing: Timing | str = "realtime",
    strict: bool = False,
    api_key: str | None = None,
    base_url: str | None = None,
    **kwargs: Any,
) -> Any:
    """A ``google.genai.Client`` on ``cassette``; its ``.aio`` side is wired too."""
    genai = _import("google.genai", "google-genai")
    options = _transport_kwargs(mode, match, timing, strict)
    file = _file(cassette, options["mode"])
    # genai builds (and closes) its own httpx2 clients around these transports.
    http_options: dict[str, Any] = {
        "client_args": {"transport": Transport(file, **options)},
        "async_client_args": {"transport": AsyncTransport(file, **options)},
    }
    if base_url is not None:
        http_options["base_url"] = base_url
    key = api_key
    if key is None and not (os.environ.get("GOOGLE_API_KEY") or os.environ.get("GEMINI_API_KEY")):
        key = REPLAY_KEY if options["mode"] is Mode.REPLAY else None
    return genai.Client(api_key=key, http_options=http_options, **kwargs)
