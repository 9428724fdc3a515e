"""``python -m reel_bindings.proxy``: Reel's record/replay proxy on asyncio or trio.

What only the command line and a TLS listener need (the options' parser,
``_options``; the certificates, ``_tls``) is imported when first used: the
pytest plugin's per-test proxy, a :class:`Proxy` served by a listener of
the plugin's own, parses no option and makes no certificate.  The
options' names are this package's still, resolved when first asked for
(``__getattr__`` below).
"""

from __future__ import annotations

import functools
import logging
import signal
import ssl
import sys
import warnings
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
import anyio.abc
import anyio.streams.tls

from reel_core import CassetteError, Mode
from reel_core.tools import CassetteWarning

from .._store import StoreUnavailableError
from .._upstream import AsyncUpstream
from ._server import CASSETTE_HEADER, Proxy

if TYPE_CHECKING:
    from ._options import DEMO_CASSETTE, ProxyOptions, build_parser, parse_options

__all__ = [
    "CASSETTE_HEADER",
    "DEMO_CASSETTE",
    "Proxy",
    "ProxyOptions",
    "build_parser",
    "main",
    "parse_options",
    "running",
    "serve",
]

log = logging.getLogger("reel.proxy")

#: This package's names that ``_options`` holds (see ``__getattr__``).
_OPTIONS = frozenset({"DEMO_CASSETTE", "ProxyOptions", "build_parser", "parse_options"})


def __getattr__(name: str) -> object:
    """The options' names, imported from ``_options`` when first asked for
    and kept here, so the next look-up finds them at once."""
    if name not in _OPTIONS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import _options

    value = getattr(_options, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_OPTIONS})


def _proxy(options: ProxyOptions) -> Proxy:
    store = None
    if options.store is not None:
        from .._store_url import open_store

        store = open_store(options.store, prefix=options.store_prefix)
    return Proxy(
        options.config(),
        cassette=options.cassette,
        cassette_dir=options.cassette_dir,
        store=store,
        strict=options.strict,
        client_timeout=options.client_timeout,
        asset_threshold=options.asset_threshold,
        parsed_lines=options.parsed_lines,
        upstream=AsyncUpstream(
            connect_timeout=min(10.0, options.upstream_timeout),
            read_timeout=options.upstream_timeout,
            ca=options.ca,
        ),
    )


def _tls_context(options: ProxyOptions) -> ssl.SSLContext:
    """The listener's TLS context: the user's certificate, else the one
    generated (the first time) in the TLS directory; says how to trust it."""
    from ._tls import TLSFiles, default_tls_dir, local_certificate, server_context

    if options.cert is not None and options.key is not None:
        return server_context(TLSFiles(options.cert, options.key))
    files = local_certificate(options.tls_dir or default_tls_dir())
    log.info(
        "TLS listener with the local certificate %s: clients trust it with SSL_CERT_FILE=%s",
        files.cert,
        files.ca,
    )
    return server_context(files)


async def serve(
    options: ProxyOptions,
    *,
    ready: Callable[[str], None] | None = None,
    handle_signals: bool = True,
    proxy: Proxy | None = None,
    stop: anyio.Event | None = None,
) -> None:
    """Run the proxy until SIGINT/SIGTERM, ``stop`` (or cancellation).

    ``ready`` is called with the URL once listening (by default it is
    printed on stdout).  On a signal the proxy stops accepting, closes idle
    connections, lets open exchanges finish for ``options.grace`` seconds,
    then cuts what is left; every finished exchange is already on disk.
    Setting ``stop`` stops it the same way; cancelling it cuts at once.
    ``proxy`` serves instead of one built from ``options`` (which then give
    only the address, the grace and the log lines).
    """
    from ._options import is_loopback

    if proxy is None:
        proxy = _proxy(options)
    context = _tls_context(options) if options.tls else None
    tcp = await anyio.create_tcp_listener(local_host=options.host, local_port=options.port)
    port = tcp.extra(anyio.abc.SocketAttribute.local_port)
    listener: anyio.abc.Listener[anyio.abc.ByteStream] = tcp
    if context is not None:
        listener = anyio.streams.tls.TLSListener(tcp, context, standard_compatible=False)
    host = f"[{options.host}]" if ":" in options.host else options.host
    url = f"{'https' if context else 'http'}://{host}:{port}"
    if not is_loopback(options.host):
        log.warning(
            "listening on %s: other machines can reach this proxy; use --host 127.0.0.1 "
            "unless that is what you want",
            options.host,
        )
    cassette: object = options.cassette or options.cassette_dir
    if options.store is not None:
        cassette = f"{options.cassette or '(x-reel-cassette)'} in {proxy.store!r}"
    log.info("%s mode, cassette %s, listening on %s", options.mode.value, cassette, url)
    if options.ui:
        log.info("the viewer: %s/_reel/", url)
    try:
        async with anyio.create_task_group() as connections:
            async with anyio.create_task_group() as main:
                if handle_signals:
                    # before announcing the URL: a signal sent as soon as the
                    # URL is read must stop the proxy gracefully, not kill it
                    await main.start(_stop_on_signal, main.cancel_scope)
                if stop is not None:
                    main.start_soon(_stop_on_event, stop, main.cancel_scope)
                (ready or (lambda u: print(u, flush=True)))(url)
                main.start_soon(listener.serve, proxy.handle, connections)
            # The listener stopped: refuse new clients at once, finish what is
            # open, then cut the rest.
            await listener.aclose()
            proxy.shutdown_idle()
            with anyio.move_on_after(options.grace):
                while proxy.active:
                    await anyio.sleep(0.02)
            connections.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await listener.aclose()
            await proxy.upstream.aclose()
        log.info("stopped")


async def _stop_on_signal(
    scope: anyio.CancelScope, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        async for signum in signals:
            log.info("%s: finishing open exchanges, then stopping", signal.Signals(signum).name)
            scope.cancel()
            return


async def _stop_on_event(stop: anyio.Event, scope: anyio.CancelScope) -> None:
    await stop.wait()
    scope.cancel()


@asynccontextmanager
async def running(options: ProxyOptions, *, proxy: Proxy | None = None) -> AsyncIterator[str]:
    """Run a proxy in the background of the current task; yields its URL.
    A cassette that cannot be opened raises here, before anything runs.

    Leaving the block stops the proxy as a signal does (see :func:`serve`):
    open exchanges finish (a stream its client left is read on for the
    record grace) and are on disk when the block is left.  Cancelling the
    task cuts at once."""
    if proxy is None:
        proxy = _proxy(options)
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        urls: list[str] = []
        event = anyio.Event()

        def ready(url: str) -> None:
            urls.append(url)
            event.set()

        async def run() -> None:
            await serve(options, ready=ready, handle_signals=False, proxy=proxy, stop=stop)

        tg.start_soon(run)
        await event.wait()
        try:
            yield urls[0]
        finally:
            stop.set()


_python_showwarning = warnings.showwarning


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: object = None,
    line: str | None = None,
) -> None:
    if issubclass(category, CassetteWarning):
        log.warning("%s", message)
    else:  # pragma: no cover - no other warning is expected here
        _python_showwarning(message, category, filename, lineno, file, line)  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None, *, prog: str | None = None) -> None:
    """Entry point of ``python -m reel_bindings.proxy`` (and of ``reel
    MODE``: ``prog`` names it in usage and errors)."""
    from ._options import parse_options

    options = parse_options(argv) if prog is None else parse_options(argv, prog=prog)
    level = {-1: logging.WARNING, 0: logging.INFO, 1: logging.DEBUG}[options.verbosity]
    logging.basicConfig(level=level, format="reel: %(message)s", stream=sys.stderr)
    # a line skipped while loading is a log line, not a Python warning
    previous, warnings.showwarning = warnings.showwarning, _show_warning
    try:
        _main(options)
    finally:
        warnings.showwarning = previous


def _main(options: ProxyOptions) -> None:
    from ._tls import TLSSetupError

    try:
        proxy = _proxy(options)
    except StoreUnavailableError as exc:  # a server down, a bad URL: fix the setting
        print(f"reel: cannot open the store: {exc}", file=sys.stderr)
        sys.exit(2)
    except (CassetteError, OSError) as exc:  # say what is wrong, no traceback
        print(f"reel: cannot open the cassette: {exc}", file=sys.stderr)
        sys.exit(1)
    if options.mode is Mode.REPLAY and options.cassette is not None:
        (file,) = proxy.cassettes
        if not len(file.cassette):
            log.warning(
                "cassette %s holds no interactions: every request will miss; record it "
                "with `reel auto --cassette %s`",
                options.cassette,
                options.cassette,
            )
    try:
        anyio.run(functools.partial(serve, options, proxy=proxy), backend=options.backend)
    except TLSSetupError as exc:  # --tls: what to install or give instead
        print(f"reel: cannot listen behind TLS: {exc}", file=sys.stderr)
        sys.exit(2)
    except OSError as exc:
        print(f"reel: cannot listen on {options.host}:{options.port}: {exc}", file=sys.stderr)
        sys.exit(1)
