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
    Routed,
    Signal,
    Trailers,
)

from ._helpers import request


def test_event_union_lists_every_event() -> None:
    assert set(typing.get_args(Event)) == {
        Continue,
        Replay,
        Forward,
        Miss,
        Refused,
        Routed,
        ResponseHead,
        Frame,
        Trailers,
        EndOfResponse,
        Cut,
    }
    assert Recorded not in typing.get_args(Event)  # record() returns it; never pulled


def test_events_are_frozen_values() -> None:
    assert Frame(b"x", 1.0) == Frame(b"x", 1.0)
    assert hash(Frame(b"x")) == hash(Frame(b"x", None))
    assert ResponseHead(200, ()).reason == b""
    assert EndOfResponse().at is None
    assert Cut("reset").detail == ""
    f = Forward(request(), "sha256:k", record=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.record = False


def test_forward_is_a_plain_value() -> None:
    """No deferred work hides in an event: a forward's key is a value (or
    ``None``: ``Engine.forward_key()`` computes it when asked)."""
    known = Forward(request(), "sha256:k", record=True, url="http://up/v1")
    assert known == Forward(request(), "sha256:k", record=True, url="http://up/v1")
    assert hash(known) == hash(Forward(request(), "sha256:k", record=True, url="http://up/v1"))
    assert known != Forward(request(), None, record=True, url="http://up/v1")
    assert known != Forward(request(), "sha256:k", record=False, url="http://up/v1")
    shown = "key='sha256:k', record=True, url='http://up/v1', websocket=False, refresh=False)"
    assert shown in repr(known)
    with pytest.raises(dataclasses.FrozenInstanceError):
        known.url = None


def test_signals_are_an_enum() -> None:
    assert {s.value for s in Signal} == {"NEED_DATA", "PAUSED", "CLOSED"}


def test_events_compare_only_with_their_own_kind() -> None:
    # Equal by fields within one class; never equal to another event with the
    # same values, nor to a tuple of them.
    assert Frame(b"x") != EndOfResponse()
    assert EndOfResponse(1.0) != Frame(b"", 1.0)
    assert Frame(b"x", None) != (b"x", None)
    assert Frame(b"x").__eq__((b"x", None)) is NotImplemented
    assert Continue() == Continue()
    assert len({Frame(b"x"), Frame(b"x"), Frame(b"y")}) == 2


def test_events_show_their_fields_in_order() -> None:
    assert repr(Continue()) == "Continue()"
    assert repr(Frame(b"x", 0.5)) == "Frame(data=b'x', at=0.5)"
    assert repr(Cut("reset", at=1.0)) == "Cut(error='reset', detail='', at=1.0)"
    assert repr(ResponseHead(200, ())) == "ResponseHead(status=200, headers=(), reason=b'')"


def test_an_event_field_cannot_be_deleted_nor_added() -> None:
    frame = Frame(b"x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        del frame.data
    with pytest.raises(dataclasses.FrozenInstanceError):
        frame.extra = 1  # type: ignore[attr-defined]
    assert frame.data == b"x"
