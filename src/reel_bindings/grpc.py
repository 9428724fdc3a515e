"""gRPC in process: grpcio channels whose calls are recorded and replayed::

    import grpc
    from reel_bindings.grpc import channel

    chan = channel(grpc.insecure_channel("localhost:50051"), "tests/cassettes/greet.jsonl")
    stub = greeter_pb2_grpc.GreeterStub(chan)  # build stubs on it as on any channel
    stub.SayHello(greeter_pb2.HelloRequest(name="Reel"))

:func:`channel` wraps a ``grpc.Channel`` (``grpc.intercept_channel`` ones
too), :func:`aio_channel` a ``grpc.aio.Channel``.  Every call (unary,
server-streaming, client-streaming, bidirectional) goes through Reel with
the options and modes of every in-process binding (``mode=``,
``timing=``, ``strict=``, ``$REEL_MODE``...); the cassette has the proxy's
shape (``POST /pkg.Service/Method``, each response message a frame with
its offset, the status as trailers; a client-streaming or bidirectional
call a session, its conversation gated by the client's messages on
replay), so either replays what the other recorded.  A replayed status
other than ``OK`` is raised as grpcio raises it (a ``grpc.RpcError`` with
its ``code()``, ``details()`` and ``trailing_metadata()``; on grpc.aio an
``AioRpcError``); a miss is ``NOT_FOUND`` with the miss report in
``details()``, a client message a replayed session does not have too.

Reel sees a call as the application makes it, above the wrapped channel's
own interceptors and call credentials.  What they add to every call (an
SDK's ``authorization``) is sent by the channel, not by Reel; name it in
``channel_metadata=`` and Reel reads each call with it, as it goes out on
the wire: its credential values are then scrubbed from all that is written
for the call (an answer that echoes the key).  Metadata is matched on
nothing and never written (the core stores no request header).

Needs grpcio (``pip install 'reel-llm[grpc]'``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

try:
    import grpc  # noqa: F401 - the extra's check, before the rooms that use it
except ImportError as exc:  # the grpc extra is not installed
    raise ImportError(
        "Reel's gRPC binding needs grpcio and protobuf: pip install 'reel-llm[grpc]'"
    ) from exc

from ._files import CassetteFile
from ._grpc_aio import AioChannel
from ._grpc_calls import ReplayedCall
from ._grpc_sync import Channel

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._options import BindingOptions

__all__ = ["AioChannel", "Channel", "ReplayedCall", "aio_channel", "channel"]


def channel(
    channel: Any,
    cassette: str | os.PathLike[str] | CassetteFile,
    *,
    channel_metadata: Iterable[tuple[str, str | bytes]] = (),
    **options: Unpack[BindingOptions],
) -> Channel:
    """``channel`` (a ``grpc.Channel``) with its calls recorded to and
    replayed from ``cassette``; close the result to close ``channel``.
    ``channel_metadata``: what ``channel`` itself adds to every call."""
    return Channel(channel, cassette, channel_metadata=channel_metadata, **options)


def aio_channel(
    channel: Any,
    cassette: str | os.PathLike[str] | CassetteFile,
    *,
    channel_metadata: Iterable[tuple[str, str | bytes]] = (),
    **options: Unpack[BindingOptions],
) -> AioChannel:
    """``channel`` (a ``grpc.aio.Channel``) with its calls recorded to and
    replayed from ``cassette``; ``await close()`` closes ``channel``."""
    return AioChannel(channel, cassette, channel_metadata=channel_metadata, **options)
