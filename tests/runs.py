"""Lines of every kind a run holds, for the tests of what reads a whole run
(``reel export otel``, the viewer's timeline): a call line built as the
core builds one, and hypothesis strategies for HTTP exchanges with any
timing ``meta``, WebSocket sessions and call lines."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from reel_core import CallLog, Interaction, MatchConfig, RecordedRequest, RecordedResponse
from reel_core._interaction import CALL_RESPONSE, call_request
from reel_core.tools import (
    Call,
    CallError,
    CallResult,
    CallStream,
    WebSocketClose,
    WebSocketLog,
    WebSocketMessage,
)
from tests.property.strategies import interactions, json_bodies, json_values

__all__ = ["T0", "any_lines", "call_line", "call_lines", "http_lines", "sessions"]

#: A line's ``ts``.
T0 = "2026-11-29T04:00:00.000Z"


def call_line(
    name: str,
    outcome: CallResult | CallStream | CallError,
    *,
    id: str,
    ts: str | None = T0,
    kind: str = "tool",
    meta: dict[str, Any] | None = None,
) -> Interaction:
    log = CallLog(Call(name, {"order_id": "A-1"}, kind), outcome)
    request = call_request(log.call)
    return Interaction(
        key=request.key(MatchConfig()),
        id=id,
        request=request,
        response=CALL_RESPONSE,
        timestamp=ts,
        endpoint=f"{request.method} {request.path}",
        meta={"total_ms": 3.0} if meta is None else meta,
        call=log,
    )


_times = st.one_of(
    st.none(), st.floats(allow_nan=True), st.integers(-5, 10**20), st.text(max_size=3)
)
_ms = st.floats(0, 1e9, allow_nan=False)


@st.composite
def sessions(draw: st.DrawFn) -> Interaction:
    """A WebSocket session of any provider: any messages (text, JSON,
    binary), any close or none."""
    base = draw(interactions())
    message = st.builds(
        WebSocketMessage,
        sender=st.sampled_from(("client", "server")),
        at_ms=_ms,
        data=st.one_of(st.binary(max_size=30), json_bodies(json_values(4))),
        binary=st.booleans(),
    )
    close = st.builds(
        WebSocketClose,
        code=st.one_of(st.none(), st.integers(1000, 4999)),
        reason=st.text(max_size=8),
        by=st.sampled_from(("client", "server", "upstream-dropped", "client-dropped")),
        at_ms=_ms,
    )
    log = WebSocketLog(
        tuple(draw(st.lists(message, max_size=4))), draw(st.one_of(st.none(), close))
    )
    return Interaction(
        key=base.key,
        id=base.id,
        request=RecordedRequest("GET", base.request.path, base.request.query),
        response=RecordedResponse(101),
        timestamp=base.timestamp,
        provider=draw(st.sampled_from(("openai", "gemini", "generic"))),
        meta={"ttfb_ms": draw(_times), "total_ms": draw(_times)},
        websocket=log,
    )


_errors = st.builds(
    CallError, type=st.text(min_size=1, max_size=8), module=st.text(max_size=8), message=st.text()
)


@st.composite
def call_lines(draw: st.DrawFn) -> Interaction:
    """A call line: any name and kind, a value returned, values yielded (and
    maybe an error after them) or an exception."""
    name = draw(st.text(min_size=1, max_size=20).filter(lambda t: t.isprintable()))
    kind = draw(st.sampled_from(("tool", "retrieval", "memory_read", "memory_write", "sandbox")))
    outcome = draw(
        st.one_of(
            st.builds(CallResult, json_values(4)),
            st.builds(
                CallStream,
                st.lists(st.tuples(_ms, json_values(2)), max_size=3).map(tuple),
                _ms,
                st.one_of(st.none(), _errors),
            ),
            _errors,
        )
    )
    ts = draw(st.one_of(st.none(), st.just(T0), st.text(max_size=5)))
    return call_line(
        name,
        outcome,
        id=draw(st.text(max_size=6)),
        ts=ts,
        kind=kind,
        meta={"total_ms": draw(_times)},
    )


def any_lines(max_size: int = 5) -> st.SearchStrategy[list[Interaction]]:
    """Lines of every kind a cassette holds: HTTP exchanges, sessions, calls."""
    return st.lists(st.one_of(http_lines(), sessions(), call_lines()), max_size=max_size)


@st.composite
def http_lines(draw: st.DrawFn) -> Interaction:
    """An HTTP line with any timing ``meta``."""
    ix = draw(interactions())
    return Interaction(
        key=ix.key,
        id=ix.id,
        request=ix.request,
        response=ix.response,
        timestamp=ix.timestamp,
        provider=ix.provider,
        meta={"ttfb_ms": draw(_times), "total_ms": draw(_times), **ix.meta},
    )
