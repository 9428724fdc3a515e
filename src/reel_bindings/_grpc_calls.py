"""The sync channel's call objects, as grpcio's own: a replayed call
(:class:`ReplayedCall`: a ``grpc.Call``, raised as the ``grpc.RpcError``
its status is, iterated as a server stream at its recorded offsets), what
a unary call's ``future()`` returns (:class:`Completed`) and a
client stream's (:class:`RunningCall`), and a server stream read from
the wrapped channel and fed to the engine as the caller reads it
(:class:`ForwardedStream`; a client stream's one answer read as one:
:class:`OneAnswer`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from ._clock import sleep_until_sync
from ._grpc_call import CallFeed, Deserializer, Metadata, Outcome, Replayed

__all__ = ["Completed", "ForwardedStream", "OneAnswer", "ReplayedCall", "RunningCall"]


class ReplayedCall(grpc.RpcError, grpc.Call):  # type: ignore[misc]  # grpcio is untyped
    """A replayed call, as grpcio's own calls are: its metadata, code and
    details; raised when its status is not ``OK``; a server stream's
    messages when iterated, each at its recorded offset."""

    def __init__(
        self,
        replay: Replayed,
        deserialize: Deserializer = None,
        start: float | None = None,
    ) -> None:
        super().__init__()
        self._replay = replay
        self._deserialize = deserialize
        self._start = time.monotonic() if start is None else start
        self._next = 0
        self._done = False
        self._outcome = replay.outcome
        self._callbacks: list[Callable[[], None]] = []

    # -- grpc.Call ------------------------------------------------------------

    def initial_metadata(self) -> Metadata:
        return self._replay.initial

    def trailing_metadata(self) -> Metadata:
        return self._outcome.trailing

    def code(self) -> grpc.StatusCode:
        return self._outcome.code

    def details(self) -> str:
        return self._outcome.details

    def debug_error_string(self) -> str:
        return f"replayed by Reel: {self._outcome.code.name}"

    def is_active(self) -> bool:
        return not self._done

    def time_remaining(self) -> float | None:
        return None

    def cancel(self) -> bool:
        if self._done:
            return False
        self._outcome = Outcome(grpc.StatusCode.CANCELLED, "Locally cancelled by application!")
        self._finish()
        return True

    def add_callback(self, callback: Callable[[], None]) -> bool:
        if self._done:
            return False
        self._callbacks.append(callback)
        return True

    def _finish(self) -> None:
        self._done = True
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    @property
    def messages(self) -> tuple[tuple[float | None, bytes], ...]:
        """The recorded messages (serialized), each with its deadline."""
        return self._replay.messages

    # -- a server stream ------------------------------------------------------

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        messages = self._replay.messages
        if not self._done and self._next < len(messages):
            at, data = messages[self._next]
            self._next += 1
            if at:
                sleep_until_sync(self._start + at)
            return data if self._deserialize is None else self._deserialize(data)
        self.wait()
        if not self._outcome.ok:
            raise self
        raise StopIteration

    def wait(self) -> None:
        """Wait until the recorded call ended (its end's offset)."""
        if not self._done:
            if self._replay.end:
                sleep_until_sync(self._start + self._replay.end)
            self._finish()

    def __repr__(self) -> str:
        return f"<ReplayedCall {self._outcome.code.name}: {self._outcome.details!r}>"

    __str__ = __repr__


class _Status:
    """What a call's status methods answer: the call's (``_call``) own."""

    _call: Any

    def initial_metadata(self) -> Any:
        return self._call.initial_metadata()

    def trailing_metadata(self) -> Any:
        return self._call.trailing_metadata()

    def code(self) -> Any:
        return self._call.code()

    def details(self) -> Any:
        return self._call.details()


class Completed(_Status, grpc.Future, grpc.Call):  # type: ignore[misc]  # grpcio is untyped
    """What ``future()`` returns: a call that already ended (the in-process
    channel runs it before it returns)."""

    def __init__(self, call: Any, response: Any = None, error: BaseException | None = None):
        self._call = call
        self._response = response
        self._error = error

    def cancel(self) -> bool:
        return False

    def cancelled(self) -> bool:
        return False

    def running(self) -> bool:
        return False

    def done(self) -> bool:
        return True

    def result(self, timeout: float | None = None) -> Any:
        if self._error is not None:
            raise self._error
        return self._response

    def exception(self, timeout: float | None = None) -> BaseException | None:
        return self._error

    def traceback(self, timeout: float | None = None) -> Any:
        return None if self._error is None else self._error.__traceback__

    def add_done_callback(self, fn: Callable[[Any], None]) -> None:
        fn(self)

    def is_active(self) -> bool:
        return False

    def time_remaining(self) -> float | None:
        return None

    def add_callback(self, callback: Callable[[], None]) -> bool:
        return False


class ForwardedStream(grpc.Call):  # type: ignore[misc]  # grpcio is untyped
    """A server stream read from the wrapped channel: each message fed to
    the engine as the caller reads it, the status when it ends."""

    def __init__(self, raw: Any, feed: CallFeed, deserialize: Deserializer) -> None:
        self._raw = raw
        self._feed = feed
        self._deserialize = deserialize
        self._messages = self._relay()

    def _relay(self) -> Iterator[Any]:
        raw, feed = self._raw, self._feed
        try:
            for data in raw:
                feed.head(raw.initial_metadata())
                feed.message(data)
                yield data if self._deserialize is None else self._deserialize(data)
        except grpc.RpcError as exc:
            feed.ended_by(exc)
            raise
        except GeneratorExit:  # dropped before its end
            raw.cancel()
            feed.left("the caller stopped reading the stream")
            raise
        except BaseException as exc:
            raw.cancel()
            feed.failed(exc)
            raise
        feed.ended_by(raw)

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        return next(self._messages)

    def initial_metadata(self) -> Any:
        return self._raw.initial_metadata()

    def trailing_metadata(self) -> Any:
        return self._raw.trailing_metadata()

    def code(self) -> Any:
        return self._raw.code()

    def details(self) -> Any:
        return self._raw.details()

    def is_active(self) -> bool:
        return bool(self._raw.is_active())

    def time_remaining(self) -> float | None:
        remaining: float | None = self._raw.time_remaining()
        return remaining

    def cancel(self) -> bool:
        return bool(self._raw.cancel())

    def add_callback(self, callback: Callable[[], None]) -> bool:
        return bool(self._raw.add_callback(callback))

    def __getattr__(self, name: str) -> Any:  # debug_error_string, the Future's methods
        return getattr(self._raw, name)


class RunningCall(_Status, grpc.Future, grpc.Call):  # type: ignore[misc]  # grpcio is untyped
    """What a client-streaming call's ``future()`` returns: the call's
    answer read in a thread of its own, as grpcio's future is (its request
    iterator may wait on what the caller does once it has the future)."""

    def __init__(self, call: Any, answer: Callable[[], Any]) -> None:
        self._call = call
        self._response: Any = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Any], None]] = []
        self._lock = threading.Lock()
        self._done = threading.Event()
        threading.Thread(target=self._run, args=(answer,), daemon=True).start()

    def _run(self, answer: Callable[[], Any]) -> None:
        try:
            self._response = answer()
        except BaseException as exc:  # the call's error, raised by result()
            self._error = exc
        with self._lock:
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)

    def cancel(self) -> bool:
        return not self._done.is_set() and bool(self._call.cancel())

    def cancelled(self) -> bool:
        return self._done.is_set() and self._call.code() is grpc.StatusCode.CANCELLED

    def running(self) -> bool:
        return not self._done.is_set()

    def done(self) -> bool:
        return self._done.is_set()

    def _wait(self, timeout: float | None) -> None:
        if not self._done.wait(timeout):
            raise grpc.FutureTimeoutError

    def result(self, timeout: float | None = None) -> Any:
        self._wait(timeout)
        if self._error is not None:
            raise self._error
        return self._response

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        return self._error

    def traceback(self, timeout: float | None = None) -> Any:
        self._wait(timeout)
        return None if self._error is None else self._error.__traceback__

    def add_done_callback(self, fn: Callable[[Any], None]) -> None:
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(fn)
                return
        fn(self)

    def is_active(self) -> bool:
        return bool(self._call.is_active())

    def time_remaining(self) -> float | None:
        remaining: float | None = self._call.time_remaining()
        return remaining

    def add_callback(self, callback: Callable[[], None]) -> bool:
        return bool(self._call.add_callback(callback))


class OneAnswer:
    """A forwarded stream-unary call (grpcio's future) read as a stream of
    its one answer, so it is relayed as a stream is
    (:class:`~reel_bindings._grpc_calls.ForwardedStream`)."""

    def __init__(self, future: Any) -> None:
        self._future = future

    def __iter__(self) -> Iterator[bytes]:
        yield self._future.result()

    def __getattr__(self, name: str) -> Any:  # the call's methods
        return getattr(self._future, name)
