"""A gRPC session is read, recorded and replayed in time linear in its
messages (the invariant of docs/reliability.md, "A gRPC session never
answers ahead of its client", measured as :mod:`tests.property.test_scaling`
measures the family)."""

from __future__ import annotations

import json

import pytest

from reel_core import (
    Cassette,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    Redactor,
    Signal,
    Timing,
)
from reel_core._grpc_log import GRPC_SESSION, GrpcLog, GrpcMessage
from reel_core._grpc_session import GrpcCallRecorder, GrpcCallReplay
from reel_core._interaction import interaction_from_json
from reel_core.tools import grpc_frame

from .test_scaling import RATIO, Case, scaling_ratio

PATH = "/pkg.Chat/Talk"


def _session(n: int) -> Interaction:
    """A bidirectional session of ``n`` turns: a client message, an answer."""
    messages = []
    for i in range(n):
        messages.append(GrpcMessage("client", float(i), grpc_frame(b"q%d" % i)))
        messages.append(GrpcMessage("server", i + 0.5, grpc_frame(b"a%d" % i)))
    messages.append(GrpcMessage("client", float(n), end=True))
    messages.append(GrpcMessage("server", float(n), end=True))
    return Interaction(
        "sha256:" + "0" * 64,
        "s",
        RecordedRequest("POST", PATH, (), grpc_frame(b"q0")),
        RecordedResponse(200, (), stream=GRPC_SESSION, end_ms=float(n)),
        grpc=GrpcLog(tuple(messages)),
    )


def _line(n: int) -> object:
    return json.loads(_session(n).to_line())


def _replayed(recording: Interaction) -> int:
    replay = GrpcCallReplay(recording, timing=Timing.parse("fast"), redactor=Redactor())
    replay.open(0.0)
    sent = 0
    assert recording.grpc is not None
    for _, message in recording.grpc.client_messages()[1:]:
        while not isinstance(replay.next_event(), Signal):
            sent += 1
        replay.client_message(message.data, 0.0)
    replay.client_end(0.0)
    while not isinstance(replay.next_event(), Signal):
        sent += 1
    return sent


def _recorded(recording: Interaction) -> Interaction:
    recorder = GrpcCallRecorder(Redactor(), opened=0.0)
    assert recording.grpc is not None
    for m in recording.grpc.messages:
        if m.sender == "client":
            if m.end:
                recorder.client_end(m.at_ms / 1000)
            else:
                recorder.client_message(m.data, m.at_ms / 1000)
        elif m.end:
            recorder.ended(m.at_ms / 1000)
        else:
            recorder.server_message(m.data, m.at_ms / 1000)
    return recorder.finish(recording, Cassette())


CASES: dict[str, Case] = {
    "grpc-session-line-read": Case(_line, interaction_from_json, 2_000),
    "grpc-session-replayed": Case(_session, _replayed, 2_000),
    "grpc-session-recorded": Case(_session, _recorded, 2_000),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_grpc_sessions_are_linear(name: str) -> None:
    ratio = scaling_ratio(CASES[name])
    assert ratio < RATIO, f"{name}: time(10 x input) / time(input) = {ratio:.1f}"
