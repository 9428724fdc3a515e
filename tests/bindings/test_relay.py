"""The upstream relay the bindings share (sync and async): what the core
is fed for a whole body, a failure, and a client that closes early."""

from __future__ import annotations

import gc
import time
from collections.abc import AsyncGenerator, Generator

import anyio
import pytest

from reel_bindings._async.relay import arelay
from reel_bindings._relay import CLIENT_CLOSED
from reel_bindings._sync.relay import relay
from reel_core import Abort, UpstreamError


class Broken(Exception):
    """An upstream failure of the library underneath."""


class Bug(Exception):
    """Not an upstream failure."""


def failure(exc: Exception) -> tuple[UpstreamError, str] | None:
    return (UpstreamError.RESET, f"broke: {exc}") if isinstance(exc, Broken) else None


class Feed:
    def __init__(self, end_fails: bool = False, grace: float = 5.0) -> None:
        self.seen: list[object] = []
        self.end_fails = end_fails
        #: What the core answers when the client leaves (``Engine.client_left``).
        self.grace = grace

    def data(self, chunk: bytes) -> None:
        self.seen.append(chunk)

    def end(self) -> None:
        if self.end_fails:
            raise OSError("disk full")
        self.seen.append("end")

    def error(self, error: UpstreamError | Abort, detail: str) -> None:
        self.seen.append((error, detail))

    def left(self, why: str) -> float:
        self.seen.append(("left", why))
        return self.grace


class Upstream:
    """Chunks, then the end or an exception; records what happened to it."""

    def __init__(
        self, chunks: list[bytes], then: Exception | None = None, every: float = 0.0
    ) -> None:
        self.chunks = chunks
        self.then = then
        #: Seconds before each chunk after the first.
        self.every = every
        self.read = 0
        self.closed = False
        self.generator_closed = False

    def sync(self) -> Generator[bytes, None, None]:
        try:
            for chunk in self.chunks:
                if self.read and self.every:
                    time.sleep(self.every)
                self.read += 1
                yield chunk
            if self.then is not None:
                raise self.then
        finally:
            self.generator_closed = True

    async def asynchronous(self) -> AsyncGenerator[bytes, None]:
        try:
            for chunk in self.chunks:
                if self.read and self.every:
                    await anyio.sleep(self.every)
                self.read += 1
                yield chunk
            if self.then is not None:
                raise self.then
        finally:
            self.generator_closed = True

    def close(self) -> None:
        self.closed = True

    async def aclose(self) -> None:
        self.closed = True


def run(upstream: Upstream, feed: Feed, take: int | None, is_async: bool) -> list[bytes]:
    """Read ``take`` chunks (all when None) through the relay, then close it."""
    if not is_async:
        relayed = relay(upstream.sync(), feed, failure, upstream.close)
        got = []
        try:
            for chunk in relayed:
                got.append(chunk)
                if take is not None and len(got) == take:
                    break
        finally:
            relayed.close()
        return got

    async def main() -> list[bytes]:
        relayed = arelay(upstream.asynchronous(), feed, failure, upstream.aclose)
        got = []
        try:
            async for chunk in relayed:
                got.append(chunk)
                if take is not None and len(got) == take:
                    break
        finally:
            await relayed.aclose()
        return got

    return anyio.run(main)


both = pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])


@both
def test_a_whole_body_is_fed_then_ended(is_async: bool) -> None:
    upstream, feed = Upstream([b"a", b"b"]), Feed()
    assert run(upstream, feed, None, is_async) == [b"a", b"b"]
    assert feed.seen == [b"a", b"b", "end"]
    assert upstream.closed
    assert upstream.generator_closed


@both
def test_a_failure_is_fed_and_raised(is_async: bool) -> None:
    upstream, feed = Upstream([b"a"], Broken("gone")), Feed()
    with pytest.raises(Broken):
        run(upstream, feed, None, is_async)
    assert feed.seen == [b"a", (UpstreamError.RESET, "broke: gone")]
    assert upstream.closed


@both
def test_an_exception_that_is_no_failure_is_raised_untouched(is_async: bool) -> None:
    upstream, feed = Upstream([b"a"], Bug("bug")), Feed()
    with pytest.raises(Bug):
        run(upstream, feed, None, is_async)
    assert feed.seen == [b"a"]
    assert upstream.closed


LEFT = ("left", CLIENT_CLOSED)
CUT = (Abort.CLIENT_CLOSED, CLIENT_CLOSED)


@both
def test_a_client_that_closes_at_the_end_gets_the_end_recorded(is_async: bool) -> None:
    """An SDK stops at [DONE]: reading on finds the body's end."""
    upstream, feed = Upstream([b"a", b"[DONE]"]), Feed()
    assert run(upstream, feed, 2, is_async) == [b"a", b"[DONE]"]
    assert feed.seen == [b"a", b"[DONE]", LEFT, "end"]
    assert upstream.closed


@both
def test_a_stream_that_ends_within_the_grace_is_recorded_whole(is_async: bool) -> None:
    upstream, feed = Upstream([b"a", b"b", b"c", b"d"], every=0.01), Feed(grace=5.0)
    assert run(upstream, feed, 1, is_async) == [b"a"]
    assert feed.seen == [b"a", LEFT, b"b", b"c", b"d", "end"]
    assert upstream.closed


@both
def test_a_stream_longer_than_the_grace_is_cut_when_it_runs_out(is_async: bool) -> None:
    """Chunks 50 ms apart, a grace of 0.12 s: a few are read on (the core
    keeps only what the client saw), then the upstream is closed, unread."""
    upstream = Upstream([b"%d" % n for n in range(100)], every=0.05)
    feed = Feed(grace=0.12)
    started = time.monotonic()
    assert run(upstream, feed, 1, is_async) == [b"0"]
    assert time.monotonic() - started < 4  # not the 5 s of the whole stream
    assert feed.seen[:2] == [b"0", LEFT]
    assert feed.seen[-1] == CUT
    assert 2 <= upstream.read < 100
    assert upstream.closed
    assert upstream.generator_closed


@both
def test_without_a_grace_a_client_that_closes_early_cuts_at_once(is_async: bool) -> None:
    upstream, feed = Upstream([b"a", b"b", b"c", b"d"]), Feed(grace=0.0)
    assert run(upstream, feed, 1, is_async) == [b"a"]
    assert feed.seen == [b"a", LEFT, CUT]
    assert upstream.read == 1  # not read on: closed
    assert upstream.closed
    assert upstream.generator_closed


@both
def test_a_failure_while_reading_on_is_recorded_not_raised(is_async: bool) -> None:
    upstream, feed = Upstream([b"a"], Broken("gone")), Feed()
    assert run(upstream, feed, 1, is_async) == [b"a"]
    assert feed.seen == [b"a", LEFT, (UpstreamError.RESET, "broke: gone")]
    assert upstream.closed


@both
def test_a_bug_while_reading_on_is_raised(is_async: bool) -> None:
    upstream, feed = Upstream([b"a"], Bug("bug")), Feed()
    with pytest.raises(Bug):
        run(upstream, feed, 1, is_async)
    assert feed.seen == [b"a", LEFT]


@both
def test_a_feed_that_fails_is_no_upstream_failure(is_async: bool) -> None:
    """The end's line could not be written: not fed back as an upstream
    error (the exchange already ended), raised as it is."""
    upstream, feed = Upstream([b"a"]), Feed(end_fails=True)
    with pytest.raises(OSError, match="disk full"):
        run(upstream, feed, None, is_async)
    assert feed.seen == [b"a"]
    assert upstream.closed


@both
def test_without_read_on_a_client_that_closes_early_is_left_to_the_caller(
    is_async: bool,
) -> None:
    """The proxy records why its client left itself: no read, no cut here."""
    upstream, feed = Upstream([b"a", b"b"]), Feed()
    if is_async:

        async def main() -> None:
            relayed = arelay(upstream.asynchronous(), feed, failure, read_on=False)
            assert await anext(relayed) == b"a"
            await relayed.aclose()

        anyio.run(main)
    else:
        relayed = relay(upstream.sync(), feed, failure, read_on=False)
        assert next(relayed) == b"a"
        relayed.close()
    assert feed.seen == [b"a"]
    assert upstream.read == 1
    assert upstream.generator_closed


@both
def test_a_body_closed_under_the_relay_is_a_cut_not_an_end(is_async: bool) -> None:
    """A garbage collector may finalize the upstream's body generator before
    the relay above it: the one more read then finds it over, which is no
    end of the body (the end was never seen): the recording is cut."""
    upstream, feed = Upstream([b"a", b"b"]), Feed()
    if is_async:

        async def main() -> None:
            body = upstream.asynchronous()
            relayed = arelay(body, feed, failure)
            assert await anext(relayed) == b"a"
            await body.aclose()
            await relayed.aclose()

        anyio.run(main)
    else:
        body = upstream.sync()
        relayed = relay(body, feed, failure)
        assert next(relayed) == b"a"
        body.close()
        relayed.close()
    assert feed.seen == [b"a", LEFT, CUT]


class Nested:
    """A body whose iterator is a generator over another generator, made
    before the relay (as httpcore's pool stream wraps its connection's)."""

    def __init__(self, upstream: Upstream, is_async: bool) -> None:
        self.inner_sync = None if is_async else upstream.sync()
        self.inner_async = upstream.asynchronous() if is_async else None

    def __iter__(self) -> Generator[bytes, None, None]:
        assert self.inner_sync is not None
        yield from self.inner_sync

    async def __aiter__(self) -> AsyncGenerator[bytes, None]:
        assert self.inner_async is not None
        async for part in self.inner_async:
            yield part


def test_a_dropped_relay_collected_as_garbage_reads_on_not_ends() -> None:
    """A client that dropped a stream unread leaves the relay, its body and
    the generators under it as one garbage cycle, finalized in any order.
    The relay holds the body's iterator outside that garbage while it
    runs, so the collector closes the relay first and reading on is real
    reading: here the rest and the real end (a body generator finalized
    first would end the first read, and a cut stream be recorded whole)."""
    upstream = Upstream([b"a", b"b", b"c"])
    seen = Feed()
    feed = Feed()
    feed.seen = seen.seen  # what the relay feeds, kept outside the garbage
    relayed = relay(Nested(upstream, is_async=False), feed, failure)
    assert next(relayed) == b"a"
    feed.relayed = relayed  # type: ignore[attr-defined]  # the cycle
    del relayed, feed
    gc.collect()
    assert seen.seen == [b"a", LEFT, b"b", b"c", "end"]
    assert upstream.read == 3
