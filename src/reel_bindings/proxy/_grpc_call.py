"""A gRPC call forwarded at its first message: its client's later messages
taken upstream as they come, and (recording) its conversation kept.

The HTTP/2 pump (``_http2.py``) makes a :class:`StreamedCall` for a
``Forward`` the session decided at a call's first message
(``H2Session.streamed``) and hands it each :class:`~reel_core.tools.H2ClientMessage`
and the :class:`~reel_core.tools.H2ClientEnd` as the session hands them out;
the forward (``_forward.py``) sends :meth:`StreamedCall.next` upstream after
the first message while the answer streams back, and feeds the answer's
bytes and end here.  When the forward records, a
:class:`~reel_core.tools.GrpcCallRecorder` keeps both directions with their
times, as the in-process binding feeds its own, and :meth:`StreamedCall.amend`
turns the engine's recording into the session's on the proxy's one
recording path (``Proxy.record``).
"""

from __future__ import annotations

from collections import deque

import anyio
import attrs

from reel_core import Engine, PendingRecording
from reel_core.tools import GrpcCallRecorder, GrpcSplitter

__all__ = ["StreamedCall"]


@attrs.define(eq=False)
class StreamedCall:
    """The rest of a gRPC call's request, as its client sends it, and its
    recorder (``None``: the forward does not record)."""

    recorder: GrpcCallRecorder | None = None
    #: The client ended its stream (its END_STREAM came).
    ended: bool = False
    #: The messages waiting to go upstream; ``None`` in it is the client's end.
    _waiting: deque[bytes | None] = attrs.Factory(deque)
    #: Set when a message (or the end) is put in ``_waiting``, made when
    #: :meth:`rest` waits.
    _came: anyio.Event | None = None
    #: The answer's messages, as their bytes complete (recording only).
    _answer: GrpcSplitter = attrs.Factory(lambda: GrpcSplitter(max_message=2**63))

    @classmethod
    def of(cls, engine: Engine, *, record: bool, first: bytes, opened: float) -> StreamedCall:
        """The call whose first message ``first`` came at ``opened`` (the
        session's ``started_at``); ``record``: keep its conversation (with
        ``engine``'s exchange redactor)."""
        if not record:
            return cls()
        recorder = GrpcCallRecorder(engine.redactor, opened=opened)
        recorder.client_message(first, opened)
        return cls(recorder)

    # -- the client's side (the pump) -------------------------------------------------

    def message(self, data: bytes, at: float) -> None:
        """A later client message, come at ``at``: it goes upstream next."""
        if self.ended:
            return
        if self.recorder is not None:
            self.recorder.client_message(data, at)
        self._put(data)

    def end(self, rest: bytes, at: float) -> None:
        """The client ended its stream (``rest``: the bytes of an
        unfinished message, sent as they came)."""
        if self.ended:
            return
        self.ended = True
        if rest:
            self._put(rest)
        if self.recorder is not None:
            self.recorder.client_end(at)
        self._put(None)

    def _put(self, item: bytes | None) -> None:
        self._waiting.append(item)
        if self._came is not None:
            self._came.set()
            self._came = None

    async def next(self) -> bytes | None:
        """What goes upstream next after the first message, once it came;
        ``None`` at the client's end (a client that left never ends it:
        its forward is stopped, and its upstream stream reset)."""
        waiting = self._waiting
        while not waiting:
            self._came = anyio.Event()
            await self._came.wait()
        return waiting.popleft()

    # -- the upstream's side (the forward) ----------------------------------------------

    def answered(self, chunk: bytes, now: float) -> None:
        """Bytes of the upstream's answer, come at ``now``."""
        if self.recorder is not None:
            for message in self._answer.feed(chunk):
                self.recorder.server_message(message, now)

    def over(self, now: float) -> None:
        """The call ended at ``now`` (the upstream's trailers, or its
        failure, or the client gone): what comes after is not kept."""
        if self.recorder is not None:
            self.recorder.ended(now)

    def amend(self, pending: PendingRecording, *, mono: float) -> PendingRecording:
        """The engine's recording of the call, to be stored as the session's
        (a call that turned out no session is stored as the engine made it;
        one not ended is stored as ended at ``mono``)."""
        recorder = self.recorder
        if recorder is None:
            return pending
        cassette = pending.cassette
        return pending.amend(lambda made: recorder.finish(made, cassette, mono=mono))
