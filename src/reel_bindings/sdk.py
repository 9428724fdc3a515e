"""Ready SDK clients wired to a cassette, one helper per SDK family::

    from reel_bindings.sdk import openai_client

    client = openai_client("tests/cassettes/chat.jsonl")  # replay unless REEL_MODE says otherwise
    client.chat.completions.create(model="gpt-4o-mini", messages=[...])

Each helper builds the SDK's own client on an ``httpx2`` client whose
transport is Reel's (:mod:`reel_bindings.httpcore`), so nothing is patched;
xAI's SDK, which speaks gRPC, gets Reel's channel (:mod:`reel_bindings.grpc`)
around the one it builds.
In replay mode no API key is needed: a placeholder is passed when the SDK's
key variable is unset.  The in-process bindings' options (``mode=``,
``timing=``, ``store=``...) are Reel's; any other keyword argument goes to
the SDK client.  The
SDKs are not dependencies of Reel: a missing one raises an ImportError
saying what to install.

:func:`client_on` and :func:`genai_on` build the same clients on transports
you made yourself (the pytest plugin does, to watch their misses).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reel_core import Mode
from reel_core.tools import PROVIDERS

from ._files import CassetteFile
from ._inprocess import mode_from_env
from ._options import Options
from ._sdk_parts import REPLAY_KEY, import_sdk
from .httpcore import AsyncTransport, Transport

if TYPE_CHECKING:
    from ._shared_transport import AsyncSharedTransport, SharedTransport

__all__ = [
    "REPLAY_KEY",
    "anthropic_client",
    "async_anthropic_client",
    "async_openai_client",
    "async_xai_client",
    "client_on",
    "genai_client",
    "genai_on",
    "openai_client",
    "xai_client",
    "xai_on",
]


CassetteLike = str | os.PathLike[str] | CassetteFile

#: SDK name (its provider's) -> (module, package to install, sync class,
#: async class); the key variables are the provider's (``key_variables``).
_SDKS = {
    "openai": ("openai", "openai", "OpenAI", "AsyncOpenAI"),
    "anthropic": ("anthropic", "anthropic", "Anthropic", "AsyncAnthropic"),
}


def _key(variables: tuple[str, ...], mode: Mode, given: str | None) -> str | None:
    if given is not None:
        return given
    if any(os.environ.get(v) for v in variables):
        return None  # the SDK reads it itself
    return REPLAY_KEY if mode is Mode.REPLAY else None


def client_on(
    sdk: str,
    transport: Transport | AsyncTransport | SharedTransport | AsyncSharedTransport,
    *,
    mode: Mode | None = None,
    **kwargs: Any,
) -> Any:
    """An ``openai`` or ``anthropic`` SDK client on ``transport``: the async
    client for an async transport.  ``kwargs`` go to the SDK client.  The
    key: the one given, else the SDK's variable, else in replay ``mode``
    (by default the transport's) a placeholder."""
    module, package, sync_class, async_class = _SDKS[sdk]
    library = import_sdk(module, package)
    httpx2 = import_sdk("httpx2", "httpx2")
    is_async = hasattr(transport, "handle_async_request")  # a shared one too
    http_client = (httpx2.AsyncClient if is_async else httpx2.Client)(transport=transport)
    variables = PROVIDERS[sdk].key_variables
    if mode is None:
        assert isinstance(transport, Transport | AsyncTransport)
        mode = transport.player.mode
    kwargs["api_key"] = _key(variables, mode, kwargs.get("api_key"))
    return getattr(library, async_class if is_async else sync_class)(
        http_client=http_client, **kwargs
    )


def genai_on(transport: Transport, async_transport: AsyncTransport, **kwargs: Any) -> Any:
    """A ``google.genai.Client`` whose sync side uses ``transport`` and whose
    ``.aio`` side uses ``async_transport``; ``base_url=`` and an
    ``http_options`` dict are honoured.  genai builds (and closes) its own
    httpx2 clients around the transports."""
    genai = import_sdk("google.genai", "google-genai")
    http_options: dict[str, Any] = dict(kwargs.pop("http_options", None) or {})
    base_url = kwargs.pop("base_url", None)
    if base_url is not None:
        http_options["base_url"] = base_url
    for name, value in (("client_args", transport), ("async_client_args", async_transport)):
        http_options[name] = {**(http_options.get(name) or {}), "transport": value}
    variables = PROVIDERS["gemini"].key_variables
    key = _key(variables, transport.player.mode, kwargs.pop("api_key", None))
    return genai.Client(api_key=key, http_options=http_options, **kwargs)


#: The xAI SDK's key variable (it reads no other).
XAI_KEY_VARIABLES = ("XAI_API_KEY",)


#: A channel the xAI SDK built, and the metadata it adds to every call.
XaiWrap = Callable[[Any, tuple[tuple[str, str], ...]], Any]


def xai_on(wrap: XaiWrap, mode: Mode, *, is_async: bool, **kwargs: Any) -> Any:
    """An ``xai_sdk.Client`` (``xai_sdk.AsyncClient`` when ``is_async``)
    whose channels are ``wrap(channel, metadata)``: each channel the SDK
    builds (in ``_make_grpc_channel``: the API's, and the management API's
    when it has a key), interceptors and credentials included, is wrapped
    as it is made, with the metadata the SDK adds to every call on it (its
    ``authorization``, its version: see ``channel_metadata=`` in
    :mod:`reel_bindings.grpc`).  ``kwargs`` go to the SDK client; in replay
    ``mode`` with no key set, a placeholder key is passed."""
    xai_sdk = import_sdk("xai_sdk", "xai-sdk")
    base = xai_sdk.AsyncClient if is_async else xai_sdk.Client

    class ReelXaiClient(base):  # type: ignore[misc, valid-type]  # the SDK is untyped
        def _make_grpc_channel(
            self, api_key: str, api_host: str, metadata: Any, *args: Any, **kw: Any
        ) -> Any:
            made = super()._make_grpc_channel(api_key, api_host, metadata, *args, **kw)
            added = (("authorization", f"Bearer {api_key}"), *(metadata or ()))
            return wrap(made, added)

    kwargs["api_key"] = _key(XAI_KEY_VARIABLES, mode, kwargs.get("api_key"))
    return ReelXaiClient(**kwargs)


def _xai(cassette: CassetteLike, kwargs: dict[str, Any], *, is_async: bool) -> Any:
    options, rest = Options.split(kwargs)
    mode = mode_from_env(options.mode)
    options = dataclasses.replace(options, mode=mode)
    if not isinstance(cassette, CassetteFile) and options.store is None:
        cassette = CassetteFile(Path(cassette), mode=mode)  # one file for both channels
    from .grpc import AioChannel, Channel

    kind = AioChannel if is_async else Channel

    def wrap(channel: Any, added: tuple[tuple[str, str], ...]) -> Any:
        return kind(channel, cassette, options, channel_metadata=added)

    return xai_on(wrap, mode, is_async=is_async, **rest)


def xai_client(cassette: CassetteLike, **kwargs: Any) -> Any:
    """An ``xai_sdk.Client`` recording to / replaying from ``cassette``
    (its gRPC channel wrapped by :class:`reel_bindings.grpc.Channel`).
    Reel's options are split from the SDK's arguments (``api_host=``,
    ``use_insecure_channel=``...) as for the other helpers."""
    return _xai(cassette, kwargs, is_async=False)


def async_xai_client(cassette: CassetteLike, **kwargs: Any) -> Any:
    """An ``xai_sdk.AsyncClient`` (asyncio: grpc.aio) on ``cassette``."""
    return _xai(cassette, kwargs, is_async=True)


def _transport(
    cassette: CassetteLike, kind: type[Transport] | type[AsyncTransport], options: Options
) -> Any:
    resolved = mode_from_env(options.mode)
    if not isinstance(cassette, CassetteFile) and options.store is None:
        cassette = CassetteFile(Path(cassette), mode=resolved)
    return kind(cassette, dataclasses.replace(options, mode=resolved))


def openai_client(cassette: CassetteLike, **kwargs: Any) -> Any:
    """An ``openai.OpenAI`` client recording to / replaying from ``cassette``.
    The in-process bindings' options (``mode=``, ``match=``, ``timing=``,
    ``strict=``...: :class:`~reel_bindings._options.Options`) are Reel's;
    the other keyword arguments go to the SDK client."""
    options, rest = Options.split(kwargs)
    return client_on("openai", _transport(cassette, Transport, options), **rest)


def async_openai_client(cassette: CassetteLike, **kwargs: Any) -> Any:
    """An ``openai.AsyncOpenAI`` client (asyncio or trio) on ``cassette``."""
    options, rest = Options.split(kwargs)
    return client_on("openai", _transport(cassette, AsyncTransport, options), **rest)


def anthropic_client(cassette: CassetteLike, **kwargs: Any) -> Any:
    """An ``anthropic.Anthropic`` client on ``cassette``."""
    options, rest = Options.split(kwargs)
    return client_on("anthropic", _transport(cassette, Transport, options), **rest)


def async_anthropic_client(cassette: CassetteLike, **kwargs: Any) -> Any:
    """An ``anthropic.AsyncAnthropic`` client (asyncio or trio) on ``cassette``."""
    options, rest = Options.split(kwargs)
    return client_on("anthropic", _transport(cassette, AsyncTransport, options), **rest)


def genai_client(cassette: CassetteLike, **kwargs: Any) -> Any:
    """A ``google.genai.Client`` on ``cassette``; its ``.aio`` side is wired too
    (both on one open cassette)."""
    options, rest = Options.split(kwargs)
    mode = mode_from_env(options.mode)
    options = dataclasses.replace(options, mode=mode)
    if not isinstance(cassette, CassetteFile) and options.store is None:
        cassette = CassetteFile(Path(cassette), mode=mode)
    sync = _transport(cassette, Transport, options)
    aio = _transport(cassette, AsyncTransport, options)
    return genai_on(sync, aio, **rest)
