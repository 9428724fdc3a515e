"""Calls, over generated JSON arguments and results: what a replay returns is
what was recorded (the value as its line holds it: the live one whenever
redaction found nothing in it), of the same types, and every call line
reads back to the same value and the same bytes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from reel_bindings import MemoryStore
from reel_bindings.calls import calls_on, tool
from reel_core import Call, CallError, CallLog, CallResult, CallStream, Redactor, read_line

from .strategies import json_values

_names = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=30).filter(
    lambda name: "\x7f" not in name
)
_args = st.dictionaries(st.text(max_size=8), json_values(10), max_size=4)


def typed(value: Any) -> Any:
    """``value`` with every scalar's type beside it: ``1 == 1.0`` and
    ``True == 1`` in Python, not in a cassette."""
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [typed(v) for v in value]
    return (type(value).__name__, repr(value))


def as_recorded(log: CallLog) -> CallLog:
    return log.redacted(Redactor())


@given(args=_args, result=json_values(12), yields=st.lists(json_values(4), max_size=4))
def test_record_then_replay_returns_what_was_recorded(
    args: dict[str, Any], result: Any, yields: list[Any]
) -> None:
    store = MemoryStore()

    @tool("echo")
    def echo(payload: dict[str, Any]) -> Any:
        return result

    @tool("stream")
    def stream(payload: dict[str, Any]) -> Iterator[Any]:
        yield from yields

    @tool("astream")
    async def astream(payload: dict[str, Any]) -> AsyncIterator[Any]:
        for value in yields:
            yield value

    async def drain() -> list[Any]:
        return [value async for value in astream(args)]

    def run(mode: str) -> list[Any]:
        with calls_on("c.jsonl", store=store, mode=mode):
            return [echo(args), list(stream(args)), asyncio.run(drain())]

    live = run("record")
    assert typed(live) == typed([result, yields, yields])
    replayed = run("replay")
    call = Call("echo", {"payload": args})
    expected = as_recorded(CallLog(call, CallResult(result))).outcome
    assert isinstance(expected, CallResult)
    assert typed(replayed[0]) == typed(expected.value)
    items = as_recorded(CallLog(call, CallStream(tuple((1.0, v) for v in yields), 2.0))).outcome
    assert isinstance(items, CallStream)
    assert typed(replayed[1]) == typed([v for _, v in items.items])
    assert typed(replayed[2]) == typed(replayed[1])
    if Redactor().keeps(repr([args, result, yields])):
        assert typed(replayed) == typed(live)  # nothing to scrub: the very values


_outcomes = st.one_of(
    st.builds(CallResult, json_values(10)),
    st.builds(
        lambda items, end, error: CallStream(
            tuple(sorted(items, key=lambda item: item[0])),
            max([end, *(at for at, _ in items)]),
            error,
        ),
        st.lists(st.tuples(st.floats(0, 1e6, allow_nan=False), json_values(4)), max_size=4),
        st.floats(0, 1e6, allow_nan=False),
        st.none()
        | st.builds(CallError, st.text(max_size=10), st.text(max_size=10), st.text(max_size=30)),
    ),
    st.builds(
        CallError,
        st.text(max_size=10),
        st.text(max_size=10),
        st.text(max_size=30),
        st.none() | st.lists(json_values(3), max_size=3).map(tuple),
        json_values(3),
    ),
)


@given(
    name=_names,
    kind=st.sampled_from(("tool", "retrieval", "memory_read", "memory_write", "lookup-v2")),
    args=_args,
    outcome=_outcomes,
    meta=st.dictionaries(st.text(max_size=5), json_values(3), max_size=3),
    generation=st.integers(0, 3),
)
def test_every_call_line_round_trips(
    name: str,
    kind: str,
    args: dict[str, Any],
    outcome: CallResult | CallStream | CallError,
    meta: dict[str, Any],
    generation: int,
) -> None:
    from reel_core import Interaction, MatchConfig
    from reel_core._interaction import CALL_RESPONSE, call_request

    call = Call(name, args, kind)
    request = call_request(call)
    recorded = Interaction(
        key=request.key(MatchConfig()),
        id="0123456789ab",
        request=request,
        response=CALL_RESPONSE,
        timestamp=None,
        endpoint=f"CALL {kind}:{name}",
        meta=meta,
        generation=generation,
        call=CallLog(call, outcome),
    )
    line = recorded.to_line()
    back = read_line(line[:-1])
    assert back.call is not None
    assert typed(back.call.call.args) == typed(args)
    assert back == recorded
    assert repr(back.call) == repr(recorded.call)  # the types too: 1 is not 1.0 nor True
    assert back.to_line() == line
