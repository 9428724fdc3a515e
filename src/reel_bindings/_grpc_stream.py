"""The sync channel's client-streaming and bidirectional calls.

A call whose client sends a stream is decided when its first message comes
(or, when the engine says its path plays whole, at its client's end: see
:meth:`~reel_bindings._inprocess.Player.streams`), so, as grpcio does, the
caller's request iterator is read in a thread of the call's own
(:class:`StreamCall`) while the caller reads the answers: a bidirectional
caller that waits for an answer before it sends on is never stuck.  What
the decision says then:

- a forward: the wrapped channel's raw-bytes call is made with the rest of
  the iterator, each message fed to the call's recorder as grpcio takes it
  upstream (:class:`~reel_bindings._grpc_call.CallFeed`), the answers as
  they come;
- a session's replay (:class:`SessionPlay`): each message the iterator
  yields is handed to the core's :class:`~reel_core.tools.GrpcCallReplay`,
  which compares it and releases the server's messages it gates, each at
  its deadline; a client that leaves the recording ends the call
  ``NOT_FOUND``, the miss report in ``details()``;
- anything else (a miss on the first message, a refusal, a call recorded
  whole): the :class:`~reel_bindings._grpc_calls.ReplayedCall` of a unary
  request.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from reel_core import Cut, EndOfResponse, Frame, Signal, Trailers
from reel_core.tools import grpc_frame

from ._clock import sleep_until_sync
from ._grpc_call import (
    CallFeed,
    Deserializer,
    Metadata,
    Outcome,
    Replayed,
    broke_off,
    replayed,
    status,
    unframed,
)
from ._grpc_calls import ReplayedCall
from ._inprocess import Decision, Player

__all__ = ["SessionPlay", "StreamCall", "relayed", "requests_failed"]

#: How grpcio ends a call whose request iterator raised.
requests_failed = Outcome(grpc.StatusCode.UNKNOWN, "Exception iterating requests!")


class SessionPlay(grpc.RpcError, grpc.Call):  # type: ignore[misc]  # grpcio is untyped
    """A replayed gRPC session as the caller's call: the server's messages
    when iterated, each once the client messages it waits on came and at
    its deadline; then the recorded status, or ``NOT_FOUND`` where the
    client left the recording.  ``feed`` (the call's request thread)
    hands it each client message and the client's end."""

    def __init__(
        self,
        decision: Decision,
        player: Player,
        deserialize: Deserializer,
        timeout: float | None,
        *,
        first: bool,
    ) -> None:
        super().__init__()
        session = decision.session
        assert session is not None
        self._session = session
        self._player = player
        self._strict = player.options.strict
        self._deserialize = deserialize
        self._initial = replayed(decision).initial
        self._timeout = timeout
        self._outcome: Outcome | None = None
        self._count = 0
        self._noted = False
        self._callbacks: list[Callable[[], None]] = []
        #: Guards the session between the request thread and the reader.
        self._changed = threading.Condition()
        self._start = time.monotonic()
        with player.lock:  # a lease of the shared cassette follows the messages
            session.open(self._start, first=first)

    # -- the client's side (the request thread) -------------------------------

    def client_message(self, data: bytes) -> bool:
        """A client message (serialized) came now; ``False``: the call is
        over, read no more."""
        with self._changed:
            if self._outcome is not None:
                return False
            with self._player.lock:
                self._session.client_message(grpc_frame(data), time.monotonic())
            self._note()
            self._changed.notify_all()
            return self._session.miss is None

    def client_end(self, failed: bool = False) -> None:
        """The client ended its stream (``failed``: its iterator raised)."""
        with self._changed:
            if failed and self._outcome is None:
                self._outcome = requests_failed
            elif self._outcome is None:
                with self._player.lock:
                    self._session.client_end(time.monotonic())
                self._note()
            self._changed.notify_all()

    def _note(self) -> None:
        """A client that left the recording: its miss goes to the run log."""
        miss = self._session.miss
        if miss is not None and not self._noted:
            self._noted = True
            self._player.runlog.session_missed(miss)

    # -- the caller's side ----------------------------------------------------

    def _next_event(self) -> Any:
        """The session's next event, once the client gave what it waits on
        (``None``: the caller's deadline passed first)."""
        with self._changed:
            while True:
                if self._outcome is not None:
                    return Signal.CLOSED
                with self._player.lock:
                    event = self._session.next_event()
                if event is not Signal.NEED_DATA:
                    return event
                left = None if self._timeout is None else self._start + self._timeout
                if left is not None and left <= time.monotonic():
                    return None
                self._changed.wait(None if left is None else left - time.monotonic())

    def _end(self, outcome: Outcome) -> None:
        with self._changed:
            if self._outcome is None:
                self._outcome = outcome
            self._changed.notify_all()
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        while True:
            event = self._next_event()
            at = getattr(event, "at", None) or 0.0
            if event is None or (self._timeout is not None and at > self._timeout):
                sleep_until_sync(self._start + (self._timeout or 0.0))
                self._end(Outcome(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded"))
                continue  # what was due after the deadline never comes
            if at:
                sleep_until_sync(self._start + at)
            if isinstance(event, Frame):
                self._count += 1
                message = unframed(event.data, self._count)
                if isinstance(message, Outcome):
                    self._end(message)
                    continue
                return message if self._deserialize is None else self._deserialize(message)
            if isinstance(event, Trailers):
                self._ended_by(event)
            elif isinstance(event, Cut):
                self._end(broke_off(event))
            elif isinstance(event, EndOfResponse):
                continue
            elif event is Signal.CLOSED:
                self._end(status(())[0])  # no status recorded (kept if it ended already)
                outcome = self._outcome
                assert outcome is not None
                if outcome.ok:
                    raise StopIteration
                raise self

    def _ended_by(self, trailers: Trailers) -> None:
        outcome, _ = status(trailers.headers)
        miss = self._session.miss
        if miss is not None:  # the report whole, not its one line
            if self._strict:
                from reel_core import MissError

                self._end(Outcome(grpc.StatusCode.NOT_FOUND, miss.render()))
                raise MissError(miss)
            outcome = Outcome(grpc.StatusCode.NOT_FOUND, miss.render(), outcome.trailing)
        self._end(outcome)

    def wait(self) -> None:
        """Read the call to its end (its messages are let go)."""
        for _ in self:
            pass

    # -- grpc.Call ------------------------------------------------------------

    def _settled(self) -> Outcome:
        if self._outcome is None:
            with contextlib.suppress(grpc.RpcError):  # raised: the outcome is set
                self.wait()
        assert self._outcome is not None
        return self._outcome

    def initial_metadata(self) -> Metadata:
        return self._initial

    def trailing_metadata(self) -> Metadata:
        return self._settled().trailing

    def code(self) -> grpc.StatusCode:
        return self._settled().code

    def details(self) -> str:
        return self._settled().details

    def debug_error_string(self) -> str:
        return f"replayed by Reel: {self._settled().code.name}"

    def is_active(self) -> bool:
        return self._outcome is None

    def time_remaining(self) -> float | None:
        if self._timeout is None:
            return None
        return max(0.0, self._start + self._timeout - time.monotonic())

    def cancel(self) -> bool:
        if self._outcome is not None:
            return False
        self._end(Outcome(grpc.StatusCode.CANCELLED, "Locally cancelled by application!"))
        return True

    def add_callback(self, callback: Callable[[], None]) -> bool:
        if self._outcome is not None:
            return False
        self._callbacks.append(callback)
        return True

    def __repr__(self) -> str:
        outcome = self._outcome
        said = "active" if outcome is None else f"{outcome.code.name}: {outcome.details!r}"
        return f"<SessionPlay {said}>"

    __str__ = __repr__


#: What decides a call and starts it: given the messages the decision
#: waits for (the first, or all) and whether they are all, it returns the
#: call the caller reads, and the sink for the rest of the client's
#: messages (``None``: the rest goes nowhere, or upstream by itself).
Start = Callable[[list[bytes], bool, Iterator[bytes]], tuple[Any, "SessionPlay | None"]]


class StreamCall(grpc.Call):  # type: ignore[misc]  # grpcio is untyped
    """A client-streaming or bidirectional call: its request iterator read
    in a thread of its own (the decision made on what it says), the call
    the decision starts read by the caller (its methods are that call's,
    once it is known)."""

    def __init__(
        self,
        requests: Iterator[Any],
        serialize: Callable[[Any], bytes],
        streamed: bool,
        start: Start,
    ) -> None:
        self._requests = requests
        self._serialize = serialize
        self._streamed = streamed
        self._start_call = start
        self._call: Any = None
        self._error: BaseException | None = None
        #: Held while the call is started (or settled without a start).
        self._deciding = threading.Lock()
        self._decided = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True, name="reel-grpc-requests")
        self._thread.start()

    def _messages(self) -> Iterator[bytes]:
        for request in self._requests:
            yield self._serialize(request)

    def _read(self) -> None:
        messages = self._messages()
        taken: list[bytes] = []
        try:
            for data in messages:
                taken.append(data)
                if self._streamed:
                    break
        except Exception:  # the caller's iterator or serializer raised: as grpcio ends it
            self._settle(requests_failed)
            return
        with self._deciding:
            if self._decided.is_set():  # cancelled meanwhile: never started
                return
            try:
                self._call, sink = self._start_call(
                    taken, not self._streamed or not taken, messages
                )
            except BaseException as exc:  # a strict miss, say: raised to the caller
                self._error = exc
                self._decided.set()
                return
            self._decided.set()
        if sink is None:
            return
        try:
            for data in messages:
                if not sink.client_message(data):
                    return
        except Exception:
            sink.client_end(failed=True)
            return
        sink.client_end()

    def _settle(self, outcome: Outcome) -> bool:
        """End the call with ``outcome`` if it was not started; whether it
        was so ended."""
        with self._deciding:
            if self._decided.is_set():
                return False
            self._call = ReplayedCall(Replayed((), (), None, outcome))
            self._call.wait()
            self._decided.set()
            return True

    def _target(self) -> Any:
        self._decided.wait()
        if self._error is not None:
            raise self._error
        return self._call

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        return next(self._target())

    def initial_metadata(self) -> Any:
        return self._target().initial_metadata()

    def trailing_metadata(self) -> Any:
        return self._target().trailing_metadata()

    def code(self) -> Any:
        return self._target().code()

    def details(self) -> Any:
        return self._target().details()

    def is_active(self) -> bool:
        if not self._decided.is_set():
            return True
        return self._call is not None and bool(self._call.is_active())

    def time_remaining(self) -> float | None:
        remaining: float | None = self._target().time_remaining()
        return remaining

    def cancel(self) -> bool:
        """Cancel the call: one that waits for its first message is never
        started (nor is what the iterator yields later sent anywhere)."""
        cancelled = Outcome(grpc.StatusCode.CANCELLED, "Locally cancelled by application!")
        return self._settle(cancelled) or bool(self._target().cancel())

    def add_callback(self, callback: Callable[[], None]) -> bool:
        return bool(self._target().add_callback(callback))

    def __getattr__(self, name: str) -> Any:  # debug_error_string, the Future's methods
        return getattr(self._target(), name)

    def __repr__(self) -> str:
        if not self._decided.is_set():
            return "<StreamCall waiting for its first message>"
        return repr(self._call if self._error is None else self._error)

    __str__ = __repr__


def relayed(messages: Iterator[bytes], first: list[bytes], feed: CallFeed) -> Iterator[bytes]:
    """What goes upstream: the messages taken, then the rest of the
    caller's, each fed to the recorder as grpcio takes it, then the end."""
    yield from first
    for data in messages:
        feed.client_message(data)
        yield data
    feed.client_end()
