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

from reel_core import Mode

from ._files import CassetteFile
from ._grpc_call import (
    CLIENT_STREAMING,
    CallFeed,
    Deserializer,
    Metadata,
    Outcome,
    Replayed,
    Serializer,
    call_request,
    refuse_upstream,
    replayed,
    unary,
    within,
)
from ._grpc_calls import Completed, ForwardedStream, ReplayedCall
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
        ``Decision``, or the ``Upstreaming`` of a forward); a miss is raised
        here when the channel is strict."""
        message = request if self._serialize is None else self._serialize(request)
        owner = self._owner
        request = call_request(self._method, metadata, message, owner.channel_metadata)
        decision = owner.player.decide(request)
        if not isinstance(decision, Upstreaming):
            owner._check(decision)
        return message, decision


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
            return self._forward(CallFeed(decision), message, timeout, metadata, kwargs)
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
            feed = CallFeed(decision)
            try:
                raw = self._raw()(message, timeout, metadata, **kwargs)
            except BaseException as exc:
                feed.failed(exc)
                raise
            return ForwardedStream(raw, feed, self._deserialize)
        return ReplayedCall(within(replayed(decision), timeout), self._deserialize)


class _Refused(grpc.StreamUnaryMultiCallable, grpc.StreamStreamMultiCallable):  # type: ignore[misc]
    """A client-streaming or bidirectional method outside live mode."""

    def __init__(self, method: str, mode: str) -> None:
        self._why = CLIENT_STREAMING.format(method=method, mode=mode)

    def _refuse(self) -> ReplayedCall:
        outcome = Outcome(grpc.StatusCode.UNIMPLEMENTED, self._why)
        return ReplayedCall(Replayed((), (), None, outcome))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise self._refuse()

    with_call = __call__

    def future(self, *args: Any, **kwargs: Any) -> Any:
        call = self._refuse()
        return Completed(call, error=call)


class Channel(Binding, grpc.Channel):  # type: ignore[misc]  # grpcio is untyped
    """A ``grpc.Channel`` whose unary-unary and unary-stream calls are
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

    def _streaming(self, kind: str, method: str, args: tuple[Any, ...], kwargs: Any) -> Any:
        mode = self.player.mode
        if mode is Mode.LIVE:  # nothing is recorded: the call passes through
            return getattr(self.channel, kind)(method, *args, **kwargs)
        return _Refused(method, mode.value)

    def stream_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._streaming("stream_unary", method, args, kwargs)

    def stream_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._streaming("stream_stream", method, args, kwargs)

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
