"""The sync gRPC channel: grpcio's ``grpc.Channel`` with Reel in front.

:class:`Channel` wraps a channel (yours, or one an SDK built, interceptors
and all) and hands out multicallables that hold the method's serializers:
a call's request is serialized with the method's own serializer, asked of
the :class:`~reel_bindings._inprocess.Player` (the one engine decision
path every in-process binding takes), and answered either from the
cassette (the recorded messages deserialized with the method's own
deserializer, at their recorded offsets, then the recorded status) or by
the wrapped channel, called with raw bytes, its answer fed to the engine
as it comes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ._files import CassetteFile
from ._grpc_call import (
    CallFeed,
    Deserializer,
    Metadata,
    Outcome,
    Replayed,
    Serializer,
    call_request,
    refuse_upstream,
    replayed,
    settled,
    unary,
    within,
)
from ._grpc_calls import Completed, ForwardedStream, OneAnswer, ReplayedCall, RunningCall
from ._grpc_stream import SessionPlay, StreamCall, relayed
from ._inprocess import Binding, Upstreaming
from ._options import Options

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._options import BindingOptions

import grpc

__all__ = ["Channel"]


class _Method:
    """What both multicallables hold: the channel, the method and its
    serializers, and the wrapped channel's raw-bytes multicallable, made
    when a call is first forwarded."""

    kind = "unary_unary"

    def __init__(
        self,
        owner: Channel,
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

    def _decide(self, request: Any, metadata: Any) -> tuple[bytes, Any]:
        """The serialized request and the player's answer to it (a
        ``Decision``, a session's played out at once: the request is whole,
        or the ``Upstreaming`` of a forward); a miss is raised here when
        the channel is strict."""
        message = request if self._serialize is None else self._serialize(request)
        owner = self._owner
        request = call_request(self._method, metadata, message, owner.channel_metadata)
        decision = owner.player.decide(request, streamed=True, trailers=True)
        if not isinstance(decision, Upstreaming):
            decision = settled(decision, owner.player)
            owner._check(decision)
        return message, decision

    def _feed(self, upstreaming: Upstreaming) -> CallFeed:
        """A unary request's feed: its one message went with the head."""
        return CallFeed(upstreaming, whole=True)


class _UnaryUnary(_Method, grpc.UnaryUnaryMultiCallable):  # type: ignore[misc]
    def __call__(
        self, request: Any, timeout: float | None = None, metadata: Any = None, **kwargs: Any
    ) -> Any:
        return self.with_call(request, timeout, metadata, **kwargs)[0]

    def with_call(
        self, request: Any, timeout: float | None = None, metadata: Any = None, **kwargs: Any
    ) -> tuple[Any, Any]:
        message, decision = self._decide(request, metadata)
        if isinstance(decision, Upstreaming):
            return self._forward(self._feed(decision), message, timeout, metadata, kwargs)
        replay = unary(within(replayed(decision), timeout), self._method)
        call = ReplayedCall(replay, self._deserialize)
        call.wait()
        messages = call.messages
        if call.code() is not grpc.StatusCode.OK:
            raise call
        data = messages[0][1]
        return (data if self._deserialize is None else self._deserialize(data)), call

    def _forward(
        self, feed: CallFeed, message: bytes, timeout: float | None, metadata: Any, kwargs: Any
    ) -> tuple[Any, Any]:
        try:
            data, call = self._raw().with_call(message, timeout, metadata, **kwargs)
        except grpc.RpcError as exc:
            if isinstance(exc, grpc.Call):
                feed.ended_by(exc)
            else:
                feed.failed(exc)
            raise
        except BaseException as exc:
            feed.failed(exc)
            raise
        feed.head(call.initial_metadata())
        feed.message(data)
        feed.ended_by(call)
        return (data if self._deserialize is None else self._deserialize(data)), call

    def future(
        self, request: Any, timeout: float | None = None, metadata: Any = None, **kwargs: Any
    ) -> Any:
        """The call as a ``grpc.Future``, run before it returns."""
        try:
            response, call = self.with_call(request, timeout, metadata, **kwargs)
        except grpc.RpcError as exc:
            return Completed(exc, error=exc)
        return Completed(call, response)


class _UnaryStream(_Method, grpc.UnaryStreamMultiCallable):  # type: ignore[misc]
    kind = "unary_stream"

    def __call__(
        self, request: Any, timeout: float | None = None, metadata: Any = None, **kwargs: Any
    ) -> Any:
        message, decision = self._decide(request, metadata)
        if isinstance(decision, Upstreaming):
            feed = self._feed(decision)
            try:
                raw = self._raw()(message, timeout, metadata, **kwargs)
            except BaseException as exc:
                feed.failed(exc)
                raise
            return ForwardedStream(raw, feed, self._deserialize)
        return ReplayedCall(within(replayed(decision), timeout), self._deserialize)


class _Streaming(_Method):
    """What the client-streaming and bidirectional multicallables share: a
    call read from its request iterator in a thread (see
    :mod:`reel_bindings._grpc_stream`)."""

    def _begin(self, requests: Any, timeout: float | None, metadata: Any, kwargs: Any) -> Any:
        owner = self._owner
        player = owner.player
        head = call_request(self._method, metadata, (), owner.channel_metadata)
        streamed = player.streams(head)

        def start(taken: list[bytes], whole: bool, rest: Any) -> tuple[Any, SessionPlay | None]:
            request = call_request(self._method, metadata, taken, owner.channel_metadata)
            decision = player.decide(request, streamed=streamed, trailers=True)
            if isinstance(decision, Upstreaming):
                feed = CallFeed(decision)
                return self._forward(relayed(rest, taken, feed), feed, timeout, metadata, kwargs)
            owner._check(decision)
            if decision.session is not None:
                play = SessionPlay(decision, player, self._deserialize, timeout, first=bool(taken))
                return play, play
            return ReplayedCall(within(replayed(decision), timeout), self._deserialize), None

        serialize = self._serialize if self._serialize is not None else bytes
        return StreamCall(iter(requests), serialize, streamed, start)

    def _forward(
        self, upstream: Any, feed: CallFeed, timeout: float | None, metadata: Any, kwargs: Any
    ) -> tuple[Any, None]:
        try:
            raw = self._raw_call(upstream, timeout, metadata, kwargs)
        except BaseException as exc:
            feed.failed(exc)
            raise
        return ForwardedStream(raw, feed, self._deserialize), None

    def _raw_call(self, upstream: Any, timeout: float | None, metadata: Any, kwargs: Any) -> Any:
        return self._raw()(upstream, timeout, metadata, **kwargs)


class _StreamUnary(_Streaming, grpc.StreamUnaryMultiCallable):  # type: ignore[misc]
    kind = "stream_unary"

    def _raw_call(self, upstream: Any, timeout: float | None, metadata: Any, kwargs: Any) -> Any:
        return OneAnswer(self._raw().future(upstream, timeout, metadata, **kwargs))

    def __call__(
        self,
        request_iterator: Any,
        timeout: float | None = None,
        metadata: Any = None,
        **kwargs: Any,
    ) -> Any:
        return self.with_call(request_iterator, timeout, metadata, **kwargs)[0]

    def with_call(
        self,
        request_iterator: Any,
        timeout: float | None = None,
        metadata: Any = None,
        **kwargs: Any,
    ) -> tuple[Any, Any]:
        return self._answer(self._begin(request_iterator, timeout, metadata, kwargs))

    def _answer(self, call: StreamCall) -> tuple[Any, Any]:
        """The call's one answer, once it ended."""
        answers = list(call)  # an error status is raised here
        if len(answers) != 1:
            wrong = Outcome(
                grpc.StatusCode.INTERNAL,
                f"Reel: the recorded call {self._method} has {len(answers)} messages, not 1",
            )
            raise ReplayedCall(Replayed(tuple(call.initial_metadata() or ()), (), None, wrong))
        return answers[0], call

    def future(
        self,
        request_iterator: Any,
        timeout: float | None = None,
        metadata: Any = None,
        **kwargs: Any,
    ) -> Any:
        """The call as a ``grpc.Future``, its answer read in a thread."""
        call = self._begin(request_iterator, timeout, metadata, kwargs)
        return RunningCall(call, lambda: self._answer(call)[0])


class _StreamStream(_Streaming, grpc.StreamStreamMultiCallable):  # type: ignore[misc]
    kind = "stream_stream"

    def __call__(
        self,
        request_iterator: Any,
        timeout: float | None = None,
        metadata: Any = None,
        **kwargs: Any,
    ) -> Any:
        return self._begin(request_iterator, timeout, metadata, kwargs)


class Channel(Binding, grpc.Channel):  # type: ignore[misc]  # grpcio is untyped
    """A ``grpc.Channel`` whose calls (unary and streaming, either way) are
    recorded to and replayed from ``cassette``: build your stubs on it.
    ``channel`` is the channel it forwards through (record, auto and live
    modes; a replay never touches it).  The options are every in-process
    binding's (``mode=``, ``timing=``, ``strict=``...)."""

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
        _registered_method: bool = False,
    ) -> Any:
        return _UnaryUnary(
            self, method, request_serializer, response_deserializer, _registered_method
        )

    def unary_stream(
        self,
        method: str,
        request_serializer: Serializer = None,
        response_deserializer: Deserializer = None,
        _registered_method: bool = False,
    ) -> Any:
        return _UnaryStream(
            self, method, request_serializer, response_deserializer, _registered_method
        )

    def stream_unary(
        self,
        method: str,
        request_serializer: Serializer = None,
        response_deserializer: Deserializer = None,
        _registered_method: bool = False,
    ) -> Any:
        return _StreamUnary(
            self, method, request_serializer, response_deserializer, _registered_method
        )

    def stream_stream(
        self,
        method: str,
        request_serializer: Serializer = None,
        response_deserializer: Deserializer = None,
        _registered_method: bool = False,
    ) -> Any:
        return _StreamStream(
            self, method, request_serializer, response_deserializer, _registered_method
        )

    def subscribe(self, callback: Callable[[Any], None], try_to_connect: bool = False) -> None:
        self.channel.subscribe(callback, try_to_connect)

    def unsubscribe(self, callback: Callable[[Any], None]) -> None:
        self.channel.unsubscribe(callback)

    def close(self) -> None:
        """Close the wrapped channel; the binding's ``freeze=`` ends."""
        self._unfreeze()
        self.channel.close()

    def __enter__(self) -> Channel:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
