"""Boundaries: record and replay the functions an agent calls (tools,
retrievals, memory reads and writes) on the cassette its HTTP goes to::

    from reel_bindings.calls import calls_on, tool


    @tool
    def lookup_order(order_id: str) -> dict:
        return db.orders.find(order_id)


    with calls_on("tests/cassettes/agent.jsonl", mode="auto"):
        lookup_order("A-1")  # recorded once, replayed after

Under the pytest plugin a ``@pytest.mark.reel`` test (or one using the
``reel`` fixture) records and replays boundaries on its own cassette.
See docs/agent-runs.md.
"""

from __future__ import annotations

from ._calls import (
    Codec,
    RecordedCallError,
    arecord_call,
    boundary,
    calls_on,
    record_call,
    tool,
)

__all__ = [
    "Codec",
    "RecordedCallError",
    "arecord_call",
    "boundary",
    "calls_on",
    "record_call",
    "tool",
]
