"""The ``grpc.aio`` channel's client-streaming and bidirectional calls: the
aio twin of :mod:`reel_bindings._grpc_stream`.

A call's client messages come from its request iterator (sync or async,
read by a task of the call's own, as grpc.aio reads it) or from the
call's ``write()`` and ``done_writing()``, onto one queue
(:class:`Requests`).  The call's pump takes the first (or, when the engine
says its path plays whole, all of them) and asks the player; then a
forward takes the rest upstream as they come (each fed to the call's
recorder as grpc.aio takes it), and a session's replay (:func:`played`)
hands each to the core's :class:`~reel_core.tools.GrpcCallReplay` while
the pump sends what it releases at its deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import grpc.aio

from reel_core import Cut, Frame, Signal, Trailers
from reel_core.tools import grpc_frame

from ._async.clock import sleep_until
from ._grpc_call import CallFeed, Outcome, broke_off, replayed, status, unframed
from ._inprocess import Decision, Player

__all__ = ["Requests", "StreamingCall", "played"]

#: The end of the client's messages on the queue, and an iterator that raised.
_END = object()
_FAILED = object()

#: How grpc.aio ends a call whose request iterator raised: it cancels it.
_CANCELLED = Outcome(grpc.StatusCode.CANCELLED, "Locally cancelled by application!")


class _RequestsFailed(Exception):
    """The caller's request iterator (or the method's serializer) raised."""


class Requests:
    """A streaming call's client messages, serialized, in order: from
    ``iterator`` (read by a task) or, when it is ``None``, from
    :meth:`write` and :meth:`done_writing`."""

    def __init__(self, iterator: Any, serialize: Callable[[Any], bytes]) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._serialize = serialize
        self._writer = iterator is None
        self._done = False
        self._task = None if iterator is None else asyncio.ensure_future(self._read(iterator))

    async def _read(self, iterator: Any) -> None:
        try:
            if hasattr(iterator, "__aiter__"):
                async for request in iterator:
                    self._queue.put_nowait(self._serialize(request))
            else:
                for request in iterator:
                    self._queue.put_nowait(self._serialize(request))
                    await asyncio.sleep(0)  # as grpc.aio: a write per turn of the loop
        except Exception:
            self._queue.put_nowait(_FAILED)
        else:
            self._queue.put_nowait(_END)

    def _style(self) -> None:
        if not self._writer:
            raise grpc.aio.UsageError("Please don't mix two styles of API for streaming requests")

    async def write(self, request: Any) -> None:
        self._style()
        if self._done:
            raise asyncio.InvalidStateError("RPC is half closed after calling done_writing.")
        self._queue.put_nowait(self._serialize(request))

    async def done_writing(self) -> None:
        self._style()
        if not self._done:
            self._done = True
            self._queue.put_nowait(_END)

    async def get(self) -> bytes | None:
        """The next client message, ``None`` at the client's end."""
        item = await self._queue.get()
        if item is _FAILED:
            raise _RequestsFailed
        return None if item is _END else item

    async def first(self, streamed: bool) -> tuple[list[bytes], bool]:
        """What the decision waits for: the first message (``streamed``)
        or all, and whether the client ended its stream."""
        taken: list[bytes] = []
        while (data := await self.get()) is not None:
            taken.append(data)
            if streamed:
                return taken, False
        return taken, True

    async def relayed(
        self, taken: list[bytes], ended: bool, feed: CallFeed
    ) -> AsyncIterator[bytes]:
        """What goes upstream: the messages taken, then the rest as they
        come, each fed to the recorder as grpc.aio takes it, then the end."""
        for data in taken:
            yield data
        while not ended and (more := await self.get()) is not None:
            feed.client_message(more)
            yield more
        feed.client_end()

    def close(self) -> None:
        """The call is over: the iterator is read no more."""
        if self._task is not None:
            self._task.cancel()


class StreamingCall:
    """What a streaming call adds to grpc.aio's call: ``write()`` and
    ``done_writing()``, and its iterator let go when the call ends."""

    _task: asyncio.Future[None]

    def __init__(self, source: Callable[[Any], AsyncIterator[Any]], requests: Requests) -> None:
        self._requests = requests
        super().__init__(source)  # type: ignore[call-arg]  # the call's own class
        self._task.add_done_callback(lambda _: requests.close())

    async def write(self, request: Any) -> None:
        await self._requests.write(request)

    async def done_writing(self) -> None:
        await self._requests.done_writing()


def played(
    decision: Decision,
    player: Player,
    requests: Requests,
    read: Callable[[bytes], Any],
    timeout: float | None,
    *,
    first: bool,
    ended: bool,
    unary: bool,
    method: str,
) -> Callable[[Any], AsyncIterator[Any]]:
    """The replay of a session (``decision.session``) as a call's source:
    each client message handed to it as it comes (by a task), the server's
    messages it releases yielded at their deadlines, the call's outcome
    set at its end (``NOT_FOUND`` where the client left the recording).
    ``first``: the call was decided on its first message; ``ended``: the
    client's stream ended before (it had none); ``unary``: the caller
    awaits one answer."""
    session = decision.session
    assert session is not None
    initial = replayed(decision).initial

    async def play(call: Any) -> AsyncIterator[Any]:
        loop = asyncio.get_running_loop()
        start = loop.time()
        with player.lock:  # a lease of the shared cassette follows the messages
            session.open(start, first=first)
        call.initial = initial
        call.headed.set()
        changed = asyncio.Event()
        failed = False

        async def client() -> None:
            nonlocal failed
            try:
                while True:
                    data = None if ended else await requests.get()
                    with player.lock:
                        if data is None:
                            session.client_end(loop.time())
                        else:
                            session.client_message(grpc_frame(data), loop.time())
                    if session.miss is not None:
                        player.runlog.session_missed(session.miss)
                    if data is None or session.miss is not None:
                        return
                    changed.set()
            except _RequestsFailed:
                failed = True
            finally:
                changed.set()

        feeder = asyncio.ensure_future(client())
        count = 0
        outcome: Outcome | None = None
        try:
            while True:
                if failed:
                    call.outcome = _CANCELLED
                    return
                with player.lock:
                    event = session.next_event()
                if event is Signal.NEED_DATA:
                    changed.clear()
                    left = None if timeout is None else start + timeout - loop.time()
                    try:
                        await asyncio.wait_for(changed.wait(), left)
                    except asyncio.TimeoutError:
                        call.outcome = Outcome(
                            grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded"
                        )
                        return
                    continue
                if event is Signal.CLOSED:
                    break
                at = getattr(event, "at", None) or 0.0
                if timeout is not None and at > timeout:
                    await sleep_until(start + timeout)
                    call.outcome = Outcome(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
                    return
                if at:
                    await sleep_until(start + at)
                if isinstance(event, Frame):
                    count += 1
                    message = unframed(event.data, count)
                    if isinstance(message, Outcome):
                        call.outcome = message
                        return
                    yield read(message)
                elif isinstance(event, Trailers):
                    outcome, _ = status(event.headers)
                    miss = session.miss
                    if miss is not None:  # the report whole, not its one line
                        if player.options.strict:
                            from reel_core import MissError

                            raise MissError(miss)
                        outcome = Outcome(
                            grpc.StatusCode.NOT_FOUND, miss.render(), outcome.trailing
                        )
                elif isinstance(event, Cut):
                    outcome = broke_off(event)
            if outcome is None:
                outcome, _ = status(())
            if unary and outcome.ok and count != 1:
                outcome = Outcome(
                    grpc.StatusCode.INTERNAL,
                    f"Reel: the recorded call {method} has {count} messages, not 1",
                )
            call.outcome = outcome
        finally:
            feeder.cancel()

    return play
