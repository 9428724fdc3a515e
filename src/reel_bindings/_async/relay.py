"""The upstream relay (see ``reel_bindings/_relay.py``).

``_async/relay.py`` (``arelay``) is the source; ``_sync/relay.py``
(``relay``) is generated from it by ``scripts/gen_sync.py``: edit the async
one, then run the script.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator
from typing import Literal, cast, overload

import anyio

from reel_core import Abort

from .._relay import (
    CLIENT_CLOSED,
    READING,
    AsyncCloser,
    Failure,
    Feed,
    GraceOver,
    ReadingFeed,
    anext_before,
    cancelled,
    failed,
    finished,
    shielded,
)

__all__ = ["arelay"]


@overload
def arelay(
    body: AsyncIterable[bytes],
    feed: ReadingFeed,
    failure: Failure,
    close: AsyncCloser | None = None,
    *,
    read_on: Literal[True] = True,
) -> AsyncGenerator[bytes, None]: ...


@overload
def arelay(
    body: AsyncIterable[bytes],
    feed: Feed,
    failure: Failure,
    close: AsyncCloser | None = None,
    *,
    read_on: Literal[False],
) -> AsyncGenerator[bytes, None]: ...


async def arelay(
    body: AsyncIterable[bytes],
    feed: Feed,
    failure: Failure,
    close: AsyncCloser | None = None,
    *,
    read_on: bool = True,
) -> AsyncGenerator[bytes, None]:
    """Relay the upstream's ``body``; ``close`` closes the upstream
    response.  ``read_on``: when the client closes the relay early, the
    recording reads on for the core's grace (see ``_relay.py``), and
    ``feed`` says how long (a :class:`ReadingFeed`); ``False`` when the
    caller does that itself (the proxy), and any :class:`Feed` will do."""
    # Iterated from here, not before: a body iterator made before the relay
    # is finalized before it when both are garbage, and would look ended.
    chunks = aiter(body)
    READING.add(chunks)  # not finalized under the relay (see READING)
    try:
        while True:
            try:
                chunk = await anext(chunks)
            except StopAsyncIteration:
                break
            except Exception as exc:
                failed(exc, feed, failure)
                raise
            except cancelled():
                # the client's task was cancelled while it waited for the
                # upstream: the client left, as when it closes the response.
                # The recording reads on for the grace where it can (a body
                # the cancellation ended is recorded as the client saw it).
                if read_on:
                    with shielded():
                        await _read_on(chunks, cast(ReadingFeed, feed), failure)
                raise
            feed.data(chunk)
            try:
                yield chunk
            except GeneratorExit:
                if read_on:
                    await _read_on(chunks, cast(ReadingFeed, feed), failure)
                return
        feed.end()
    finally:
        READING.discard(chunks)
        if isinstance(chunks, AsyncGenerator):  # left before its end: close it now
            await chunks.aclose()
        if close is not None:
            await close()


async def _read_on(chunks: AsyncIterator[bytes], feed: ReadingFeed, failure: Failure) -> None:
    """The client closed the response before its end: read on for the
    core's grace, feeding what comes (see ``_relay.py``)."""
    grace = feed.left(CLIENT_CLOSED)
    if grace and not finished(chunks):  # closed under the relay: no end to see
        deadline = anyio.current_time() + grace
        try:
            while (chunk := await anext_before(chunks, deadline)) is not None:
                feed.data(chunk)
        except GraceOver:
            pass
        except Exception as exc:
            if not failed(exc, feed, failure):
                raise
            return
        else:
            feed.end()
            return
    feed.error(Abort.CLIENT_CLOSED, CLIENT_CLOSED)
