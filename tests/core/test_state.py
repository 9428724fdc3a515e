"""The transition table of a session, walked exhaustively."""

from __future__ import annotations

import itertools

import pytest

from reel_core import LocalProtocolError, State
from reel_core._state import TRANSITIONS, transition
from reel_core.tools import Input

ALL_PAIRS = list(itertools.product(State, Input))


@pytest.mark.parametrize(("state", "event"), ALL_PAIRS, ids=lambda x: str(x.value))
def test_every_pair_is_in_the_table_or_an_error(state: State, event: Input) -> None:
    if (state, event) in TRANSITIONS:
        assert transition(state, event) is TRANSITIONS[(state, event)]
    else:
        with pytest.raises(LocalProtocolError, match=f"{event.value} is not allowed in state"):
            transition(state, event)


def test_the_documented_happy_paths() -> None:
    s = State.IDLE
    for event in (Input.FORWARD, Input.UPSTREAM_HEAD, Input.UPSTREAM_DATA, Input.UPSTREAM_END):
        s = transition(s, event)
    assert s is State.DONE
    assert transition(s, Input.NEXT_CYCLE) is State.IDLE
    assert transition(State.IDLE, Input.HIT) is State.SERVING
    assert transition(State.IDLE, Input.MISS) is State.SERVING
    assert transition(State.SERVING, Input.SERVED) is State.DONE
    # an upstream failure before the head is answered (SERVING), after it is a cut
    assert transition(State.AWAIT_UPSTREAM, Input.UPSTREAM_ERROR) is State.SERVING
    assert transition(State.STREAMING, Input.UPSTREAM_ERROR) is State.DONE
    assert transition(State.IDLE, Input.CLIENT_CLOSED) is State.CLOSED
    assert transition(State.IDLE, Input.PROTOCOL_ERROR) is State.ERROR


def test_terminal_states_have_no_way_out() -> None:
    for state in (State.CLOSED, State.ERROR):
        assert not [k for k in TRANSITIONS if k[0] is state]


def test_every_state_is_reachable_from_idle() -> None:
    seen = {State.IDLE}
    frontier = [State.IDLE]
    while frontier:
        s = frontier.pop()
        for (src, _), dst in TRANSITIONS.items():
            if src is s and dst not in seen:
                seen.add(dst)
                frontier.append(dst)
    assert seen == set(State)


def test_table_only_uses_real_members() -> None:
    for (src, event), dst in TRANSITIONS.items():
        assert isinstance(src, State)
        assert isinstance(event, Input)
        assert isinstance(dst, State)
