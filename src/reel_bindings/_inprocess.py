"""What the in-process bindings share: a cassette file, the session config,
and the few steps between a client library's request and the core's events.

The httpx/httpx2 transports and the requests adapter stay thin pumps over
:class:`Player`: it decides (under a lock, so threads may share it),
hands back the replayed head and timed frames, and takes the upstream
response of a forward, appending the recorded line when it ends.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import attrs

from reel_core import (
    Cut,
    EndOfResponse,
    Event,
    Forward,
    Limits,
    MatchConfig,
    Miss,
    MissReport,
    Mode,
    Recorded,
    Redactor,
    Refused,
    Replay,
    Request,
    ResponseHead,
    Session,
    Signal,
    Timing,
    UpstreamError,
)

from ._files import CassetteFile
from ._relay import CLIENT_CLOSED
from ._settings import Settings, mode_from_env

__all__ = ["CLIENT_CLOSED", "Decision", "Player", "Upstreaming", "mode_from_env"]

IN_PROCESS_HINT = (
    "run again with REEL_MODE=auto to record what is missing "
    "(or REEL_MODE=record to refresh the whole cassette)"
)


def limits_from_env() -> Limits:
    """The request limits: ``$REEL_MAX_BODY`` (bytes) raises the body's."""
    return Settings.from_env(mode=Mode.REPLAY).limits


@attrs.frozen
class Decision:
    """What the core decided for one request."""

    session: Session
    event: Replay | Miss | Refused | Forward | None
    #: For a replay, a miss or a refusal: the head, then the timed events.
    head: ResponseHead | None = None
    events: tuple[Event, ...] = ()

    @property
    def miss(self) -> MissReport | None:
        return self.event.report if isinstance(self.event, Miss) else None


class Player:
    """One cassette file and the config every in-process request shares."""

    def __init__(
        self,
        cassette: str | os.PathLike[str] | CassetteFile,
        *,
        mode: Mode | str | None = None,
        match: MatchConfig | None = None,
        timing: Timing | str = "realtime",
        repeat: bool | None = None,
        redactor: Redactor | None = None,
        strict_load: bool = False,
        hint: str = IN_PROCESS_HINT,
    ) -> None:
        settings = Settings.from_env(mode=mode)
        if isinstance(cassette, CassetteFile):
            self.file = cassette
        else:
            self.file = CassetteFile(Path(cassette), mode=settings.mode, strict=strict_load)
        self.config = settings.config(
            match=match,
            timing=Timing.parse(timing) if isinstance(timing, str) else timing,
            repeat=repeat,
            redactor=redactor,
            hint=hint,
        )
        self.lock = threading.Lock()
        #: Every miss served so far (the pytest plugin fails a test on them).
        self.misses: list[MissReport] = []

    @property
    def mode(self) -> Mode:
        return self.config.mode

    def decide(self, request: Request) -> Decision:
        with self.lock:
            session = Session(self.file.cassette, self.config)
            session.receive_request(request)
            event = session.next_event()
            if isinstance(event, Forward):
                return Decision(session, event)
            decision = event if isinstance(event, (Replay, Miss, Refused)) else None
            head = event if isinstance(event, ResponseHead) else session.next_event()
            assert isinstance(head, ResponseHead)
            events = []
            while True:
                item = session.next_event()
                assert not isinstance(item, Signal)
                events.append(item)
                if isinstance(item, (EndOfResponse, Cut)):
                    break
            if isinstance(decision, Miss):
                self.misses.append(decision.report)
            return Decision(session, decision, head, tuple(events))

    def upstream(self, decision: Decision) -> Upstreaming:
        return Upstreaming(self, decision.session)


class Upstreaming:
    """Feeds a forwarded exchange's upstream response to its session;
    appends the recorded line at the end."""

    def __init__(self, player: Player, session: Session) -> None:
        self._player = player
        self._session = session
        self.sent_at = time.monotonic()

    def head(self, status: int, headers: Iterable[tuple[bytes, bytes]]) -> None:
        self._session.upstream_head(
            status,
            list(headers),
            now=time.monotonic(),
            sent_at=self.sent_at,
            timestamp=time.time(),
        )
        self._drain()  # only events: a line comes after the end

    def data(self, chunk: bytes) -> None:
        self._session.upstream_data(chunk, now=time.monotonic())
        self._drain()

    def end(self) -> None:
        with self._player.lock:
            self._session.upstream_end(now=time.monotonic())
            lines = self._drain()  # pulling the line adds it to the shared cassette
        self._append(lines)

    def error(self, error: UpstreamError, detail: str) -> None:
        with self._player.lock:
            self._session.upstream_error(error, detail, now=time.monotonic())
            lines = self._drain()
        self._append(lines)

    def _drain(self) -> list[bytes]:
        # The client gets the upstream's own bytes; only the line matters here.
        lines: list[bytes] = []
        while True:
            event = self._session.next_event()
            if isinstance(event, Signal):
                return lines
            if isinstance(event, Recorded):
                lines.append(event.line)

    def _append(self, lines: list[bytes]) -> None:
        for line in lines:
            self._player.file.append(line)
