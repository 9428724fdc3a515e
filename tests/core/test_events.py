from __future__ import annotations

import dataclasses
import typing

import pytest

from reel_core import (
    Continue,
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
        Continue,
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


def test_forward_key_is_computed_once_when_first_read() -> None:
    calls: list[int] = []

    def key() -> str:
        calls.append(1)
        return "sha256:k"

    lazy = Forward(request(), key, record=True, url="http://up/v1")
    assert calls == []
    assert lazy.key == "sha256:k"
    assert lazy.key == "sha256:k"
    assert calls == [1]
    eager = Forward(request(), "sha256:k", record=True, url="http://up/v1")
    assert lazy == eager
    assert hash(lazy) == hash(eager)
    assert lazy != Forward(request(), "sha256:other", record=True, url="http://up/v1")
    assert lazy != Forward(request(), "sha256:k", record=False, url="http://up/v1")
    assert lazy != "sha256:k"
    assert repr(lazy).startswith("Forward(request=Request(")
    assert "key='sha256:k', record=True, url='http://up/v1')" in repr(lazy)
    with pytest.raises(dataclasses.FrozenInstanceError):
        lazy.url = None  # type: ignore[misc]


def test_signals_are_an_enum() -> None:
    assert {s.value for s in Signal} == {"NEED_DATA", "PAUSED", "CLOSED"}
