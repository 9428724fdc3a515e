"""The upstream relay (see ``reel_bindings/_relay.py``).

``_async/relay.py`` (``arelay``) is the source; ``_sync/relay.py``
(``relay``) is generated from it by ``scripts/gen_sync.py``: edit the async
one, then run the script.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable

from reel_core import UpstreamError

from .._relay import (
    CLIENT_CLOSED,
    READING,
    AsyncCloser,
    Failure,
    Feed,
    closed_early,
    failed,
    finished,
)

__all__ = ["arelay"]


async def arelay(
    body: AsyncIterable[bytes],
    feed: Feed,
    failure: Failure,
    close: AsyncCloser | None = None,
    *,
    read_on: bool = True,
) -> AsyncGenerator[bytes, None]:
    """Relay the upstream's ``body``; ``close`` closes the upstream
    response.  ``read_on``: when the client closes the relay early, read
    once more and record the cut here; ``False`` when the caller records
    why the client left (the proxy)."""
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
            feed.data(chunk)
            try:
                yield chunk
            except GeneratorExit:
                if not read_on:
                    return
                if finished(chunks):  # closed under the relay: its end was not seen
                    feed.error(UpstreamError.CLIENT_CLOSED, CLIENT_CLOSED)
                    return
                # The client closed the response before its end: one more read.
                try:
                    last = await anext(chunks, None)
                except Exception as exc:
                    if not failed(exc, feed, failure):
                        raise
                    return
                closed_early(last, feed)
                return
        feed.end()
    finally:
        READING.discard(chunks)
        if isinstance(chunks, AsyncGenerator):  # left before its end: close it now
            await chunks.aclose()
        if close is not None:
            await close()
