"""A tool-calling run AgentTape itself records (its ``@tool``, ``@retrieval``
and ``@memory_*`` boundaries, its frozen clock, uuid4 and random, the OpenAI
SDK against the fake upstream) is imported with ``reel import agenttape``
and replays in Reel: the same function under Reel's boundary decorators
is served from the cassette (it never runs), and under ``freeze=`` the
agent sees the values AgentTape's run saw, so its prompt matches."""

from __future__ import annotations

import datetime
import json
import random
import uuid
from pathlib import Path
from typing import Any

import agenttape
import openai
import pytest

from reel_bindings import calls_on, memory_write, retrieval, tool
from reel_bindings.cli import main
from reel_bindings.httpcore import Transport
from reel_bindings.sdk import client_on
from tests.fakes.upstream import FakeUpstreamThread
from tests.secrets import OPENAI_KEY

ALL = ["clock", "uuid", "random"]
#: How many times each function really ran.
RAN: dict[str, int] = {}


class OrderMissing(KeyError):
    """Raised by the order lookup (a class the replay can make again)."""


def lookup_order(order_id: str, verbose: bool = False) -> dict[str, Any]:
    RAN["lookup_order"] = RAN.get("lookup_order", 0) + 1
    if order_id == "A-9":
        raise OrderMissing(order_id)
    return {"order": order_id, "status": "shipped", "verbose": verbose}


def search_docs(query: str, k: int = 2) -> list[str]:
    RAN["search_docs"] = RAN.get("search_docs", 0) + 1
    return [f"{query} #{n}" for n in range(k)]


def remember(key: str, value: str) -> bool:
    RAN["remember"] = RAN.get("remember", 0) + 1
    return True


def agent(client: Any, lookup: Any, search: Any, write: Any) -> dict[str, Any]:
    """A small agent: nondeterministic values in its prompt, three boundaries,
    one that raises, one LLM call."""
    stamp = datetime.datetime.now().isoformat()
    request_id = str(uuid.uuid4())
    pick = random.choice(["red", "green", "blue"])
    order = lookup("A-1", verbose=True)
    try:
        lookup("A-9")
        missing = "no error"
    except OrderMissing as exc:
        missing = f"{type(exc).__name__}: {exc}"
    docs = search("refunds")
    write("last_order", order["order"])
    content = json.dumps([stamp, request_id, pick, order, missing, docs])
    reply = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": content}]
    )
    return {
        "stamp": stamp,
        "request_id": request_id,
        "pick": pick,
        "order": order,
        "missing": missing,
        "docs": docs,
        "answer": reply.choices[0].message.content,
    }


def test_an_agenttape_run_with_boundaries_replays_in_reel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "run.yaml"
    RAN.clear()
    with FakeUpstreamThread() as fake:
        live = openai.OpenAI(base_url=fake.url + "/v1", api_key=OPENAI_KEY, max_retries=0)
        # AgentTape freezes clock, uuid and random by default
        with agenttape.use_cassette(source, mode="record", freeze=ALL):
            recorded = agent(
                live,
                agenttape.tool(lookup_order),
                agenttape.retrieval(search_docs),
                agenttape.memory_write(remember),
            )
        live.close()
    assert RAN == {"lookup_order": 2, "search_docs": 1, "remember": 1}
    assert recorded["missing"] == "OrderMissing: 'A-9'"
    kinds = [ix["kind"] for ix in json.loads(json.dumps(_yaml(source)))["interactions"]]
    assert kinds == ["tool", "tool", "retrieval", "memory_write", "llm"]

    out = tmp_path / "run.jsonl"
    assert main(["import", "agenttape", str(source), "-o", str(out)]) == 0
    assert "5 of 5 interactions" in capsys.readouterr().out
    lines = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
    assert sorted(lines[0]["_meta"]["freeze"]) == ["clock", "random", "uuid"]
    calls = [line["call"] for line in lines[1:] if "call" in line]
    assert calls == [
        {"name": "lookup_order", "kind": "tool", "args": {"order_id": "A-1", "verbose": True}},
        {"name": "lookup_order", "kind": "tool", "args": {"order_id": "A-9", "verbose": False}},
        {"name": "search_docs", "kind": "retrieval", "args": {"query": "refunds", "k": 2}},
        {"name": "remember", "kind": "memory_write", "args": {"key": "last_order", "value": "A-1"}},
    ]

    # Replay in Reel, offline: the same functions under Reel's decorators.
    RAN.clear()
    # (closing the transport ends its freeze, even when the agent raises)
    with Transport(out, mode="replay", strict=True, freeze=ALL) as transport, calls_on(transport):
        client = client_on("openai", transport, max_retries=0)
        replayed = agent(client, tool(lookup_order), retrieval(search_docs), memory_write(remember))
    assert RAN == {}  # served from the cassette: nothing ran
    assert replayed == recorded
    assert transport.misses == []


def _yaml(path: Path) -> Any:
    import yaml

    return yaml.safe_load(path.read_text("utf-8"))
