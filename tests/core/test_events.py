from __future__ import annotations

import dataclasses
import typing

import pytest

from reel_core import (
    Cut,
    EndOfResponse,
    Event,
    Forward,
    Frame,
    Miss,
    Recorded,
    Refused,
    Replay,
    ResponseHead,
    Signal,
)

from ._helpers import request


def test_event_union_lists_every_event() -> None:
    assert set(typing.get_args(Event)) == {
        Replay,
        Forward,
        Miss,
        Refused,
        ResponseHead,
        Frame,
        EndOfResponse,
        Cut,
        Recorded,
    }


def test_events_are_frozen_values() -> None:
    assert Frame(b"x", 1.0) == Frame(b"x", 1.0)
    assert hash(Frame(b"x")) == hash(Frame(b"x", None))
    assert ResponseHead(200, ()).reason == b""
    assert EndOfResponse().at is None
    assert Cut("reset").detail == ""
    f = Forward(request(), "sha256:k", record=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.record = False  # type: ignore[misc]


def test_signals_are_an_enum() -> None:
    assert {s.value for s in Signal} == {"NEED_DATA", "PAUSED", "CLOSED"}
