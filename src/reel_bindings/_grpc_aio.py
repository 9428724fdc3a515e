"""The ``grpc.aio`` channel: :class:`AioChannel`, the sync
:class:`~reel_bindings._grpc_sync.Channel`'s twin on asyncio.

The same steps as the sync channel, on grpc.aio's call objects: a call is
decided by the :class:`~reel_bindings._inprocess.Player` when it starts,
then one task (the call's pump) plays the replay on its schedule, or reads
the wrapped channel's raw-bytes call and feeds the engine as each message
arrives, putting the messages on the call's queue; awaiting the call,
iterating it or :meth:`read` takes them off.  A status other than ``OK``
is raised as grpc.aio's own :class:`grpc.aio.AioRpcError`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Generator, Iterable
from typing import TYPE_CHECKING, Any

from ._async.clock import sleep_until
from ._files import CassetteFile
from ._grpc_aio_stream import Requests, StreamingCall, played
from ._grpc_call import (
    CallFeed,
    Deserializer,
    Metadata,
    Outcome,
    Serializer,
    call_request,
    refuse_upstream,
    replayed,
    settled,
    unary,
    within,
)
from ._inprocess import Binding, Decision, Upstreaming
from ._options import Options

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._options import BindingOptions

import grpc
import grpc.aio

__all__ = ["AioChannel"]

#: The end of a call's messages on its queue.
_END = object()


def _error(initial: Metadata, outcome: Outcome) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(
        outcome.code,
        grpc.aio.Metadata(*initial),
        grpc.aio.Metadata(*outcome.trailing),
        outcome.details,
        f"replayed by Reel: {outcome.code.name}",
    )


class _Call:
    """What a grpc.aio call of either kind is here: a pump task filling a
    queue, and the call's metadata and status once known."""

    def __init__(self, source: Callable[[_Call], AsyncIterator[Any]]) -> None:
        self._source = source
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self.initial: Metadata = ()
        #: Set once ``initial`` is known (before the first message, or at the end).
        self.headed = asyncio.Event()
        self.outcome: Outcome | None = None
        #: The wrapped channel's error, raised as it came.
        self.error: BaseException | None = None
        self._cancelled = False  # by the caller (cancel())
        self._task = asyncio.ensure_future(self._pump())

    async def _pump(self) -> None:
        try:
            async for message in self._source(self):
                self._queue.put_nowait(message)
        except grpc.aio.AioRpcError as exc:
            self.error = exc
            self.initial = tuple(exc.initial_metadata() or ())
            self.outcome = Outcome(exc.code(), exc.details() or "", tuple(exc.trailing_metadata()))
        except asyncio.CancelledError:
            self.outcome = Outcome(grpc.StatusCode.CANCELLED, "Locally cancelled by application!")
        except Exception as exc:  # grpcio refused the call's arguments, say
            self.error = exc
            self.outcome = Outcome(grpc.StatusCode.UNKNOWN, f"{type(exc).__name__}: {exc}")
        finally:
            self.headed.set()
            self._queue.put_nowait(_END)

    async def _next(self) -> Any:
        message = await self._queue.get()
        if message is _END:
            self._queue.put_nowait(_END)  # for the next reader
            await self._task
            assert self.outcome is not None
            if self.cancelled():  # as grpc.aio: the caller's own cancel, raised as such
                raise asyncio.CancelledError
            if self.error is not None:
                raise self.error
            if not self.outcome.ok:
                raise _error(self.initial, self.outcome)
        return message

    async def _ended(self) -> Outcome:
        await asyncio.shield(self._task)
        assert self.outcome is not None
        return self.outcome

    # -- grpc.aio.Call --------------------------------------------------------

    async def initial_metadata(self) -> grpc.aio.Metadata:
        await self.headed.wait()
        return grpc.aio.Metadata(*self.initial)

    async def trailing_metadata(self) -> grpc.aio.Metadata:
        return grpc.aio.Metadata(*(await self._ended()).trailing)

    async def code(self) -> grpc.StatusCode:
        return (await self._ended()).code

    async def details(self) -> str:
        return (await self._ended()).details

    async def wait_for_connection(self) -> None:
        return None

    def cancelled(self) -> bool:
        return self._cancelled

    def done(self) -> bool:
        return self._task.done()

    def time_remaining(self) -> float | None:
        return None

    def cancel(self) -> bool:
        if self._task.done():
            return False
        self._cancelled = True
        return self._task.cancel()

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        self._task.add_done_callback(lambda _: callback(self))


class _UnaryCall(_Call, grpc.aio.UnaryUnaryCall):  # type: ignore[misc]  # grpcio is untyped
    #: The answer, once taken off the queue (awaiting the call again gives it again).
    _answer: Any = _END

    def __await__(self) -> Generator[Any, None, Any]:
        if self._answer is _END:  # the first await; an error is raised each time
            self._answer = yield from self._next().__await__()
        return self._answer


class _StreamCall(_Call, grpc.aio.UnaryStreamCall):  # type: ignore[misc]
    def __aiter__(self) -> AsyncIterator[Any]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Any]:
        while True:
            message = await self._next()
            if message is _END:
                return
            yield message

    async def read(self) -> Any:
        message = await self._next()
        return grpc.aio.EOF if message is _END else message


class _Method:
    """The aio twin of the sync channel's ``_Method``."""

    kind = "unary_unary"

    def __init__(
        self,
        owner: AioChannel,
        method: str,
        serialize: Serializer,
        deserialize: Deserializer,
        registered: bool,
    ) -> None:
        self._owner = owner
        self._method = method
        self._serialize = serialize
        self._deserialize = deserialize
        self._registered = registered
        self._forwarder: Any = None

    def _raw(self) -> Any:
        if self._forwarder is None:
            factory = getattr(self._owner.channel, self.kind)
            extra = {"_registered_method": True} if self._registered else {}
            self._forwarder = factory(self._method, None, None, **extra)
        return self._forwarder

    def _read(self, data: bytes) -> Any:
        return data if self._deserialize is None else self._deserialize(data)

    def _source(
        self, request: Any, kwargs: dict[str, Any]
    ) -> Callable[[_Call], AsyncIterator[Any]]:
        """The call's messages, from the cassette or the wrapped channel."""
        message = request if self._serialize is None else self._serialize(request)
        owner = self._owner
        request = call_request(
            self._method, kwargs.get("metadata"), message, owner.channel_metadata
        )
        decision = owner.player.decide(request, streamed=True, trailers=True)
        if isinstance(decision, Upstreaming):
            feed = CallFeed(decision, whole=True)  # its one message went with the head
            return lambda call: self._forward(call, feed, message, kwargs)
        decision = settled(decision, owner.player)
        owner._check(decision)
        return self._play(decision, kwargs)

    def _play(
        self, decision: Decision, kwargs: dict[str, Any]
    ) -> Callable[[_Call], AsyncIterator[Any]]:
        """A decision that is no session's, played on its schedule."""
        replay = within(replayed(decision), kwargs.get("timeout"))
        if self.kind.endswith("_unary"):
            replay = unary(replay, self._method)
        start = asyncio.get_running_loop().time()

        async def play(call: _Call) -> AsyncIterator[Any]:
            call.initial = replay.initial
            call.headed.set()
            for at, data in replay.messages:
                if at:
                    await sleep_until(start + at)
                yield self._read(data)
            if replay.end:
                await sleep_until(start + replay.end)
            call.outcome = replay.outcome

        return play

    async def _forward(
        self, call: _Call, feed: CallFeed, message: Any, kwargs: dict[str, Any]
    ) -> AsyncIterator[Any]:
        """The wrapped channel's call of ``message`` (a request, or the
        request iterator of a client stream), its answers fed to ``feed``."""
        try:
            raw = self._raw()(message, **kwargs)
        except Exception as exc:  # grpcio refused the call's arguments
            feed.failed(exc)
            raise
        try:
            messages = [await raw] if self.kind.endswith("_unary") else raw
            async for data in _each(messages):
                if not call.headed.is_set():
                    call.initial = tuple(await raw.initial_metadata())
                    call.headed.set()
                    feed.head(call.initial)
                feed.message(data)
                yield self._read(data)
        except grpc.aio.AioRpcError as exc:
            feed.ended_by(exc)
            raise
        except asyncio.CancelledError:
            raw.cancel()
            feed.left("the caller cancelled the call")
            raise
        except BaseException as exc:
            raw.cancel()
            feed.failed(exc)
            raise
        call.initial = tuple(await raw.initial_metadata())
        code, details, trailing = (
            await raw.code(),
            await raw.details(),
            await raw.trailing_metadata(),
        )
        feed.end(call.initial, code, details, trailing)
        call.outcome = Outcome(code, details or "", tuple(trailing))


async def _each(messages: Any) -> AsyncIterator[bytes]:
    if isinstance(messages, list):
        for message in messages:
            yield message
    else:
        async for message in messages:
            yield message


class _UnaryUnary(_Method, grpc.aio.UnaryUnaryMultiCallable):  # type: ignore[misc]
    def __call__(self, request: Any, **kwargs: Any) -> _UnaryCall:
        return _UnaryCall(self._source(request, kwargs))


class _UnaryStream(_Method, grpc.aio.UnaryStreamMultiCallable):  # type: ignore[misc]
    kind = "unary_stream"

    def __call__(self, request: Any, **kwargs: Any) -> _StreamCall:
        return _StreamCall(self._source(request, kwargs))


class _Streaming(_Method):
    """What the client-streaming and bidirectional multicallables share:
    the call's messages once its client's first (or, when its path plays
    whole, all of them) came, from the decision they get (see
    :mod:`reel_bindings._grpc_aio_stream`)."""

    def _streaming(self, request_iterator: Any, kwargs: dict[str, Any]) -> Any:
        owner = self._owner
        metadata = kwargs.get("metadata")
        player = owner.player
        streamed = player.streams(call_request(self._method, metadata, (), owner.channel_metadata))
        serialize = self._serialize if self._serialize is not None else bytes
        requests = Requests(request_iterator, serialize)

        async def source(call: _Call) -> AsyncIterator[Any]:
            taken, ended = await requests.first(streamed)
            request = call_request(self._method, metadata, taken, owner.channel_metadata)
            decision = player.decide(request, streamed=streamed, trailers=True)
            if isinstance(decision, Upstreaming):
                feed = CallFeed(decision)
                upstream = requests.relayed(taken, ended, feed)
                async for message in self._forward(call, feed, upstream, kwargs):
                    yield message
                return
            owner._check(decision)
            if decision.session is None:
                play = self._play(decision, kwargs)
            else:
                play = played(
                    decision,
                    player,
                    requests,
                    self._read,
                    kwargs.get("timeout"),
                    first=bool(taken),
                    ended=ended,
                    unary=self.kind.endswith("_unary"),
                    method=self._method,
                )
            async for message in play(call):
                yield message

        return source, requests


class _StreamUnary(_Streaming, grpc.aio.StreamUnaryMultiCallable):  # type: ignore[misc]
    kind = "stream_unary"

    def __call__(self, request_iterator: Any = None, **kwargs: Any) -> Any:
        source, requests = self._streaming(request_iterator, kwargs)
        return _StreamUnaryCall(source, requests)


class _StreamStream(_Streaming, grpc.aio.StreamStreamMultiCallable):  # type: ignore[misc]
    kind = "stream_stream"

    def __call__(self, request_iterator: Any = None, **kwargs: Any) -> Any:
        source, requests = self._streaming(request_iterator, kwargs)
        return _StreamStreamCall(source, requests)


class _StreamUnaryCall(StreamingCall, _UnaryCall, grpc.aio.StreamUnaryCall):  # type: ignore[misc]
    """A client-streaming call: awaited for its answer (its one message,
    once the call ended: a replayed session's count is known at its end);
    ``write()`` and ``done_writing()`` send when no request iterator was
    given."""

    def __await__(self) -> Generator[Any, None, Any]:
        if self._answer is _END:  # the first await; an error is raised each time
            answer = yield from self._next().__await__()
            while (yield from self._next().__await__()) is not _END:
                pass  # more than one: the end says so (INTERNAL)
            self._answer = answer
        return self._answer


class _StreamStreamCall(StreamingCall, _StreamCall, grpc.aio.StreamStreamCall):  # type: ignore[misc]
    """A bidirectional call: its answers iterated or ``read()``;
    ``write()`` and ``done_writing()`` send when no request iterator was
    given."""


class AioChannel(Binding, grpc.aio.Channel):  # type: ignore[misc]  # grpcio is untyped
    """A ``grpc.aio.Channel`` whose calls (unary and streaming, either way)
    are recorded to and replayed from ``cassette`` (asyncio: grpc.aio's loop).
    ``channel`` is the aio channel it forwards through."""

    def __init__(
        self,
        channel: Any,
        cassette: str | os.PathLike[str] | CassetteFile,
        options: Options | None = None,
        *,
        channel_metadata: Iterable[tuple[str, str | bytes]] = (),
        **kwargs: Unpack[BindingOptions],
    ) -> None:
        given = Options.of(kwargs, options)
        refuse_upstream(given)
        super().__init__(cassette, given)
        #: The channel calls are forwarded through.
        self.channel = channel
        #: What the wrapped channel adds to every call (see :func:`reel_bindings.grpc.channel`).
        self.channel_metadata: Metadata = tuple(channel_metadata)

    def unary_unary(
        self,
        method: str,
        request_serializer: Serializer = None,
        response_deserializer: Deserializer = None,
        _registered_method: bool | None = False,
    ) -> Any:
        return _UnaryUnary(
            self, method, request_serializer, response_deserializer, bool(_registered_method)
        )

    def unary_stream(
        self,
        method: str,
        request_serializer: Serializer = None,
        response_deserializer: Deserializer = None,
        _registered_method: bool | None = False,
    ) -> Any:
        return _UnaryStream(
            self, method, request_serializer, response_deserializer, bool(_registered_method)
        )

    def stream_unary(
        self,
        method: str,
        request_serializer: Serializer = None,
        response_deserializer: Deserializer = None,
        _registered_method: bool | None = False,
    ) -> Any:
        return _StreamUnary(
            self, method, request_serializer, response_deserializer, bool(_registered_method)
        )

    def stream_stream(
        self,
        method: str,
        request_serializer: Serializer = None,
        response_deserializer: Deserializer = None,
        _registered_method: bool | None = False,
    ) -> Any:
        return _StreamStream(
            self, method, request_serializer, response_deserializer, bool(_registered_method)
        )

    def get_state(self, try_to_connect: bool = False) -> Any:
        return self.channel.get_state(try_to_connect)

    async def wait_for_state_change(self, last_observed_state: Any) -> None:
        await self.channel.wait_for_state_change(last_observed_state)

    async def channel_ready(self) -> None:
        await self.channel.channel_ready()

    async def close(self, grace: float | None = None) -> None:
        """Close the wrapped channel; the binding's ``freeze=`` ends."""
        self._unfreeze()
        await self.channel.close(grace)

    async def __aenter__(self) -> AioChannel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close(None)
